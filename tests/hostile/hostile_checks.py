#!/usr/bin/env python3
"""Hostile inputs and faults (issue #18) against the real ringbench on the host path:
each ends with a clear message and a non-zero exit within seconds, nothing hangs, no file is
clobbered or half-written.

    hostile_checks.py CHECK --ringbench BIN --mpiexec MPIEXEC --source SRC --workdir DIR
CHECK: config | output | race | diskfull. Exit 0 = pass, 1 = fail, 77 = skipped (diskfull
without the right to mount a tmpfs).
"""
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import check, mpirun  # noqa: E402
import harness  # noqa: E402

h5py, _ = harness.h5py_and_numpy()
harness.ECHO_PASSES = True

# Small and quick: every point of it takes milliseconds on the host path.
JOB = """backend: host
sweeps:
  - {type: memory, name: mem, bytes: 1MiB, iterations: 2}
  - {type: collectives, name: coll, operations: [all_reduce], min_bytes: 1KiB, max_bytes: 64KiB, iterations: 2}
"""


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def timed(args, ranks, cmd, timeout=120, env=None):
    """(result, seconds) of mpirun."""
    t0 = time.monotonic()
    r = mpirun(args, ranks, cmd, timeout=timeout, env=env)
    return r, time.monotonic() - t0


def lines_with(text, needle):
    return [ln for ln in text.splitlines() if needle in ln]


def status_of(path):
    """/run status of an output file, or None if it cannot be read."""
    try:
        with h5py.File(path, "r") as f:
            v = f["run"].attrs["status"]
            return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:  # noqa: BLE001 - any unreadable file is "None" here
        return None


def check_config(args):
    """Alias bomb, FIFO, device: refused on rank 0 with file and line, fast, no output."""
    w = args.workdir
    bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 10))
    cfg = write(os.path.join(w, "bomb.yaml"), bomb + "sweeps:\n  - {type: memory}\n")
    out = os.path.join(w, "bomb.h5")
    r, s = timed(args, 2, [args.ringbench, cfg, "--output", out])
    check(r.returncode != 0 and s < 5 and not os.path.exists(out),
          f"an alias bomb (10^10 nodes in 11 lines) is refused in {s:.1f} s < 5 s, no output file")
    msgs = lines_with(r.stderr, "expands to more than 1000000 YAML nodes")
    check(len(msgs) == 1 and f"{cfg}:6:" in msgs[0],
          f"the bomb's message is printed once (rank 0), naming the file and line 6: {msgs}")
    fifo = os.path.join(w, "pipe.yaml")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    for path, kind in ((fifo, "a FIFO (named pipe)"), ("/dev/zero", "a character device")):
        r, s = timed(args, 2, [args.ringbench, path, "--output", os.path.join(w, "x.h5")], timeout=60)
        check(r.returncode != 0 and s < 10 and len(lines_with(r.stderr, f"it is {kind}")) == 1,
              f"config {path}: refused in {s:.1f} s as {kind}, once")


def run_job(args, out, *extra, ranks=2, timeout=120, cfg=None):
    cfg = cfg or write(os.path.join(args.workdir, "job.yaml"), JOB)
    return timed(args, ranks, [args.ringbench, cfg, "--output", out] + list(extra), timeout=timeout)


def check_output(args):
    """Links, the config as output, a path too long for MPI-IO."""
    w = args.workdir
    target = write(os.path.join(w, "target.txt"), "keep me")
    link = os.path.join(w, "link.h5")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink("target.txt", link)
    r, _ = run_job(args, link)
    check(r.returncode != 0 and "is a symbolic link" in r.stderr and open(target).read() == "keep me",
          "--output through a link is refused without --force, the target untouched")
    r, _ = run_job(args, link, "--force")
    check(r.returncode == 0 and not os.path.islink(link) and status_of(link) == "complete"
          and open(target).read() == "keep me",
          "--force replaces the link itself with a complete file; the link's target is untouched")
    dangling = os.path.join(w, "dangling.h5")
    if os.path.lexists(dangling):
        os.remove(dangling)
    os.symlink("nowhere.h5", dangling)
    r, _ = run_job(args, dangling)
    check(r.returncode != 0 and not os.path.exists(os.path.join(w, "nowhere.h5")),
          "a dangling link is refused, never followed")
    cfg = write(os.path.join(w, "self.yaml"), JOB)
    r, _ = run_job(args, cfg, "--force", cfg=cfg)
    check(r.returncode != 0 and "is the config file" in r.stderr and open(cfg).read() == JOB,
          "--output equal to the config is refused, even with --force; the config is intact")
    deep = os.path.join(w, "d" * 120, "e" * 120)
    os.makedirs(deep, exist_ok=True)
    out = os.path.join(deep, "run.h5")
    r, s = run_job(args, out)
    check(r.returncode != 0 and "too long for MPI-IO" in r.stderr and "buffer overflow" not in r.stderr
          and s < 20, f"a {len(out)}-character --output is refused with a message in {s:.1f} s")


def check_race(args):
    """Two runs started together on one --output: exactly one proceeds, ten times."""
    w = args.workdir
    cfg = write(os.path.join(w, "job.yaml"), JOB)
    full = [args.mpiexec, "-np", "2", "--oversubscribe", args.ringbench, cfg, "--output"]
    env = dict(os.environ, **harness.MPI_AS_ROOT)
    outcomes = []
    for i in range(10):
        out = os.path.join(w, f"race{i}.h5")
        if os.path.exists(out):
            os.remove(out)
        procs = [subprocess.Popen(full + [out], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=env) for _ in range(2)]
        results = [p.communicate(timeout=120) + (p.returncode,) for p in procs]
        codes = sorted(rc for _, _, rc in results)
        refused = [err for _, err, rc in results if rc != 0]
        ok = (codes[0] == 0 and codes[1] != 0 and status_of(out) == "complete" and len(refused) == 1
              and ("already exists" in refused[0] or "appeared while this run was starting" in refused[0]))
        outcomes.append(ok)
        if not ok:
            print(f"race {i}: exit codes {codes}, status {status_of(out)}; stderr:\n"
                  + "\n".join(err[-800:] for _, err, _ in results))
    check(all(outcomes), f"two runs racing for one --output: exactly one complete file and one "
                         f"clear refusal in {sum(outcomes)} of 10 races")


def mount_tmpfs(path, size):
    os.makedirs(path, exist_ok=True)
    subprocess.run(["umount", path], capture_output=True)
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path],
                          capture_output=True).returncode == 0


def check_diskfull(args):
    """A full disk at a sweep's write and at the first flush: the OS reason, exit within
    seconds, and the file keeps the sweeps finished before."""
    mnt = os.path.join(args.workdir, "full")
    if os.geteuid() != 0 or not mount_tmpfs(mnt, "256k"):
        print("SKIP: cannot mount a tmpfs here (not root, or no CAP_SYS_ADMIN)")
        sys.exit(77)
    try:
        # A second sweep whose samples alone (40000 iterations x 2 ranks x 8 B) outgrow the disk.
        big = JOB + "  - {type: memory, name: mem2, bytes: 4KiB, iterations: 40000}\n"
        cfg = write(os.path.join(args.workdir, "full.yaml"), big)
        for size, where in (("48k", "first flush"), ("256k", "a later sweep")):
            mount_tmpfs(mnt, size)
            out = os.path.join(mnt, "run.h5")
            r, s = run_job(args, out, cfg=cfg, timeout=90)
            said = "No space left on device" in r.stderr
            check(r.returncode != 0 and said and s < 30 and "terminate called" not in r.stderr,
                  f"disk full at {where} ({size} tmpfs): exit {r.returncode} in {s:.1f} s with "
                  f"'No space left on device', no uncaught exception")
            if not said:
                print(r.stderr[-2000:])
    finally:
        subprocess.run(["umount", mnt], capture_output=True)


def main():
    ap = harness.arg_parser()
    ap.add_argument("check", choices=["config", "output", "race", "diskfull"])
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    {"config": check_config, "output": check_output, "race": check_race,
     "diskfull": check_diskfull}[args.check](args)
    return harness.exit_code()


if __name__ == "__main__":
    sys.exit(main())
