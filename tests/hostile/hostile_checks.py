#!/usr/bin/env python3
"""Hostile inputs and faults (issues #18 and #31) against the real ringbench on the host path:
each ends with a clear message and a non-zero exit within seconds, nothing hangs, no file is
clobbered or half-written.

    hostile_checks.py CHECK --ringbench BIN --mpiexec MPIEXEC --source SRC --workdir DIR
CHECK: config | output | race | diskfull | oom | oom_validation | stopped | stopped_nodes | stopped_setup |
config_limits | side_files | environment | closed_stdout. Exit 0 = pass, 1 = fail, 77 = skipped (diskfull
without the right to mount a tmpfs; oom without prlimit).
"""
import json
import math
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import check, mpirun  # noqa: E402
import harness  # noqa: E402

h5py, _ = harness.h5py_and_numpy(echo_passes=True)

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
    json_out = os.path.join(w, "json_self.h5")
    for what, json_path, needle in (("the config", cfg, "is the config file"),
                                    ("the output", json_out, "is the output file")):
        r, s = run_job(args, json_out, "--json", json_path, "--force", cfg=cfg)
        ok, msgs = refused_once(r, s, f"--json file '{json_path}' {needle}", limit_s=20)
        check(ok and open(cfg).read() == JOB, f"--json naming {what} is refused once, even with --force;"
              f" the config is intact: {msgs}")
    # A policy file the config reads is an input too: neither the output nor --json may replace it.
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "inputs", "tuned_h100.yaml")
    policy_text = open(src).read()
    policy = write(os.path.join(w, "pol.yaml"), policy_text)
    pcfg = write(os.path.join(w, "with_policy.yaml"), "kernel_policy: pol.yaml\n" + JOB)
    r, _ = run_job(args, policy, "--force", cfg=pcfg)
    check(r.returncode != 0 and f"output file '{policy}' is the policy file {pcfg}:1: key 'kernel_policy' names"
          in r.stderr and open(policy).read() == policy_text,
          f"--output naming the kernel_policy file is refused, even with --force; the policy is intact:"
          f" {r.stderr[-300:]}")
    r, s = run_job(args, os.path.join(w, "pol_json.h5"), "--json", policy, "--force", cfg=pcfg)
    ok, msgs = refused_once(r, s, f"--json file '{policy}' is the policy file", limit_s=20)
    check(ok and open(policy).read() == policy_text, f"--json naming the policy file is refused once: {msgs}")
    # --json into a directory that is not there yet is made, as --output's is (before: a warning,
    # no JSON, exit 0); a file standing where the directory goes is refused before the run.
    json_dir = os.path.join(w, "jd")
    shutil.rmtree(json_dir, ignore_errors=True)
    r, _ = run_job(args, os.path.join(w, "jd_out.h5"), "--json", os.path.join(json_dir, "sub", "r.json"),
                   "--force")
    check(r.returncode == 0 and os.path.isfile(os.path.join(json_dir, "sub", "r.json")),
          f"--json into a missing directory makes it and writes the JSON: {r.stderr[-300:]}")
    blocker = write(os.path.join(w, "jblock"), "x")
    r, s = run_job(args, os.path.join(w, "jb_out.h5"), "--json", os.path.join(blocker, "r.json"), "--force")
    ok, msgs = refused_once(r, s, f"cannot create the directory '{blocker}' for --json file", limit_s=20)
    check(ok and not os.path.exists(os.path.join(w, "jb_out.h5")),
          f"--json under a file is refused once, before the output is made: {msgs}")
    short_dir = os.path.join(w, "od")
    os.makedirs(short_dir, exist_ok=True)
    r = subprocess.run([args.ringbench, cfg, "--output", "od"], cwd=w, capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, **harness.MPI_AS_ROOT))
    check(r.returncode == 2 and "--output 'od' is too short for an output file name (it is a directory)"
          in r.stderr, f"--output naming a short directory says so: {r.stderr[-300:]}")
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
              and ("already exists" in refused[0] or "appeared while this run was starting" in refused[0]
                   or "is in use by another ringbench run" in refused[0]))
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


def fill_disk(path):
    """Writes zeros to path until the file system is full."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)


def check_json_on_full_disk(args, mnt):
    """Issue #31 D11: --json onto a full disk warned at every try (the start, after each sweep,
    the end: 4 lines for JOB); now once, and the run and its HDF5 file are unaffected."""
    mount_tmpfs(mnt, "4k")
    fill_disk(os.path.join(mnt, "fill"))
    out = os.path.join(args.workdir, "json_full.h5")
    if os.path.exists(out):
        os.remove(out)
    r, _ = run_job(args, out, "--json", os.path.join(mnt, "run.json"), timeout=90)
    warned = lines_with(r.stderr, "cannot write the --json file")
    check(r.returncode == 0 and status_of(out) == "complete" and len(warned) == 1
          and "without another warning" in warned[0],
          f"--json onto a full disk: exit {r.returncode}, output {status_of(out)}, one warning: {warned}")


def check_force_on_full_disk(args, mnt, cfg):
    """Issue #31 D3: --force over a good output, then the disk fills after the first flush. The
    old file was renamed away at that flush and the run then failed: lost. Now it is replaced
    only when the new run closes its file whole: it stays byte for byte, and the run removes its
    own unfinished file (a full disk needs the room)."""
    old = os.path.join(args.workdir, "force_old.h5")
    if os.path.exists(old):
        os.remove(old)
    r, _ = run_job(args, old, timeout=90)
    check(r.returncode == 0 and status_of(old) == "complete", f"the old output: exit {r.returncode}")
    # Room for the old file, the new file's first flush (64 KiB kept for metadata) and its first
    # sweeps, not for the big one after them.
    mount_tmpfs(mnt, f"{os.path.getsize(old) // 1024 + 200}k")
    out = shutil.copy(old, os.path.join(mnt, "run.h5"))
    with open(out, "rb") as f:
        before = f.read()
    r, s = run_job(args, out, "--force", cfg=cfg, timeout=90)
    with open(out, "rb") as f:
        kept = f.read() == before
    left = [n for n in os.listdir(mnt) if n.endswith(".partial")]
    flushed = "[mem] done" in r.stderr  # the disk filled after the first sweeps' flushes, as meant
    check(r.returncode != 0 and "No space left on device" in r.stderr and s < 30 and flushed,
          f"--force onto a nearly full disk: exit {r.returncode} in {s:.1f} s, after a sweep was done")
    check(kept and not left and "removed this run's unfinished file" in r.stderr,
          f"the old output is intact ({kept}) and no partial file is left ({left})")
    if not (kept and flushed):
        print(r.stderr[-2000:])


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
        # Sizes where the disk fills at the first sweep's flush and at a later one. At 24k-56k
        # a metadata write failed inside H5Fflush on one rank while the other waited in its
        # truncate, and both hung: metrics/h5 now refuses a flush without 64 KiB of room.
        for size, where in (("24k", "the first flush (HDF5 hung there before)"),
                            ("40k", "the first sweep's flush"),
                            ("56k", "the first flush (HDF5 hung there before)"),
                            ("256k", "a later sweep")):
            mount_tmpfs(mnt, size)
            out = os.path.join(mnt, "run.h5")
            r, s = run_job(args, out, cfg=cfg, timeout=90)
            said = "No space left on device" in r.stderr
            check(r.returncode != 0 and said and s < 30 and "terminate called" not in r.stderr,
                  f"disk full at {where} ({size} tmpfs): exit {r.returncode} in {s:.1f} s with "
                  f"'No space left on device', no uncaught exception")
            if not said:
                print(r.stderr[-2000:])
            if "first flush" in where:  # #31 item 18: the unreadable file blocked a re-run
                check(not os.path.exists(out) and "removed the unfinished output" in r.stderr,
                      f"the file whose first flush failed is removed ({size}): a re-run is not blocked")
        check_force_on_full_disk(args, mnt, cfg)
        check_json_on_full_disk(args, mnt)
    finally:
        subprocess.run(["umount", mnt], capture_output=True)


def meminfo(field):
    """A /proc/meminfo field in bytes (0 when unknown)."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def texts(values):
    return [v.decode() if isinstance(v, bytes) else str(v) for v in values]


# Under an address-space limit of BASE + 1.5 GiB per rank: a 1 GiB triad (3 GiB), a 12288^2
# float64 GEMM (3.4 GiB) and 1 GiB collective buffers (2 GiB) cannot be had; the small points
# of the same sweeps can.
OOM_JOB = """backend: host
sweeps:
  - {type: memory, name: mem_big, bytes: 1GiB, iterations: 2, warmup: 0}
  - {type: compute, name: gemm, sizes: [64, 12288], dtypes: [float64], iterations: 1, warmup: 0}
  - {type: collectives, name: coll, operations: [all_reduce], min_bytes: 1KiB, max_bytes: 1GiB, factor: 1048576, iterations: 2, warmup: 0}
  - {type: memory, name: mem_ok, bytes: 1MiB, iterations: 2}
"""
OOM_WANT = {"mem_big": ["oom"], "gemm": ["ok", "oom"], "coll": ["ok", "ok", "oom", "oom"],
            "mem_ok": ["ok"]}
OOM_ASKED = {"mem_big": 3 << 30, "gemm": 3 * 8 * 12288 * 12288, "coll": 2 << 30}


def check_oom_file(out, ranks):
    """Every sweep complete; each point's status the same on every rank; an oom point records
    the bytes asked and the bytes free on every rank; the ok points have their numbers."""
    with h5py.File(out, "r") as f:
        check(texts([f["run"].attrs["status"]])[0] == "complete", "/run status is complete")
        for name, want in OOM_WANT.items():
            g = f["sweeps/" + name]
            status = [texts(row) for row in g["status"][()]]
            check(texts([g.attrs["status"]])[0] == "complete" and status == [want] * ranks,
                  f"{name}: sweep complete, point status {want} on all {ranks} ranks (got {status})")
            asked, free = g["oom_requested_bytes"][()], g["oom_free_bytes"][()]
            for pi, st in enumerate(want):
                if st == "oom":
                    check(all(asked[r][pi] == OOM_ASKED[name] and free[r][pi] > 0
                              for r in range(ranks)),
                          f"{name} point {pi}: asked {OOM_ASKED[name]} B and the bytes free recorded "
                          f"({asked[:, pi].tolist()}, {free[:, pi].tolist()})")
                    msg = texts(g["oom_message"][()][0:1, pi])[0]
                    check("out of memory allocating" in msg, f"{name} point {pi}: message {msg!r}")
                else:
                    rate = g["rate_tflops" if name == "gemm" else "bandwidth_Bps" if "mem" in name
                             else "time_s"][()][:, pi]
                    check(all(math.isfinite(x) and x > 0 for x in rate),
                          f"{name} point {pi} was measured on every rank: {rate.tolist()}")


# The address-space limit of the oom checks' ranks: ~ the process's own 200 MiB + 1.5 GiB.
AS_LIMIT = str((1 << 30) + (1 << 29) + 256 * (1 << 20))


def prlimit_or_skip():
    """prlimit's path; exits 77 without it or on a machine with too little memory for the
    sizes of the oom checks."""
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        print("SKIP: no prlimit (util-linux)")
        sys.exit(77)
    if meminfo("MemTotal") < 2 * 4 * (1 << 30):
        print("SKIP: the machine has too little memory for the sizes of this test")
        sys.exit(77)
    return prlimit


def check_oom(args):
    """Host allocations that fail (an address-space limit per rank) become oom points on every
    rank; the sweeps go on and the run completes (exit 0)."""
    prlimit = prlimit_or_skip()
    cfg = write(os.path.join(args.workdir, "oom.yaml"), OOM_JOB)
    for ranks in (1, 2):
        out = os.path.join(args.workdir, f"oom{ranks}.h5")
        r, s = timed(args, ranks, [prlimit, f"--as={AS_LIMIT}", args.ringbench, cfg, "--output", out,
                                   "--force"], timeout=300)
        check(r.returncode == 0 and "terminate called" not in r.stderr and "Abort" not in r.stderr,
              f"{ranks} rank(s) under prlimit --as: exit {r.returncode} in {s:.1f} s, no abort")
        if r.returncode != 0:
            print(r.stdout[-2000:], r.stderr[-3000:], sep="\n")
        notes = lines_with(r.stderr, "out of memory, skipped")  # progress notes: stderr
        check(len(notes) == 4, f"one 'out of memory, skipped' line per oom point (4): {notes}")
        check(re.search(r"^  - oom: 4 point\(s\) ran out of memory", r.stdout, re.M) is not None,
              f"the run's summary counts the oom points: {r.stdout[-800:]}")
        if os.path.exists(out):
            check_oom_file(out, ranks)


MPI_SCRATCH_SIZES_MIB = (64, 128, 160, 192, 256, 320, 384)


def check_oom_mpi(args):
    """Issue #31 item 9: the point's own buffers fit under the address-space limit, but the
    memory MPI allocates inside a collective does not; that was MPI_ERR_INTERN (or _OTHER) and
    an abort of every rank. Now such a point is `oom` on every rank before it runs, its message
    names MPI's working buffers, and the run completes. The sizes step across the window where
    the buffers fit and MPI's share does not (where it lies depends on the process's own size)."""
    prlimit = prlimit_or_skip()
    ops = "[all_reduce, reduce_scatter, all_gather, all_to_all, broadcast, reduce]"
    cfg = write(os.path.join(args.workdir, "oom_mpi.yaml"), "backend: host\nsweeps:\n" + "".join(
        f"  - {{type: collectives, name: c{m}, operations: {ops}, min_bytes: {m}MiB, max_bytes: {m}MiB,"
        f" iterations: 1, warmup: 0}}\n" for m in MPI_SCRATCH_SIZES_MIB))
    out = os.path.join(args.workdir, "oom_mpi.h5")
    r, s = timed(args, 2, [prlimit, f"--as={AS_LIMIT}", args.ringbench, cfg, "--output", out, "--force"],
                 timeout=300)
    check(r.returncode == 0 and "MPI_ERR" not in r.stderr and status_of(out) == "complete",
          f"2 ranks under prlimit --as: exit {r.returncode} in {s:.1f} s, no MPI error: "
          f"{r.stderr[-1500:] if r.returncode else ''}")
    if not os.path.exists(out):
        return
    reasons = []
    with h5py.File(out, "r") as f:
        for m in MPI_SCRATCH_SIZES_MIB:
            g = f[f"sweeps/c{m}"]
            status = [texts(row) for row in g["status"][()]]
            check(status[0] == status[1], f"c{m}: each point's status is the same on both ranks")
            msgs = [texts(row) for row in g["oom_message"][()]]
            reasons += [msg for row in msgs for msg in row if msg]
            if m == MPI_SCRATCH_SIZES_MIB[0]:
                check(status[0] == ["ok"] * len(status[0]), f"c{m}: every operation measured: {status[0]}")
    scratch = [msg for msg in reasons if msg.startswith("MPI's working buffers")]
    check(len(scratch) > 0 and all("out of memory allocating" in msg for msg in scratch),
          f"some point is oom for MPI's working buffers alone (not its own): {sorted(set(reasons))[:4]}")


def check_oom_validation(args):
    """Sizes that cannot fit in this node's physical memory are refused before any work, with
    the file, the line and the key."""
    total = meminfo("MemTotal")
    cases = [("memory", "  - {type: memory, bytes: 16TiB}\n", "sweeps[0].bytes")]
    # The largest the schema allows (MPI's int counts): collectives 2 x 16 GiB - 16 B per rank, a GEMM
    # 3 x 65536^2 x 8 B = 96 GiB per rank; refused only on nodes with less.
    for kind, need, sweep, key in (
            ("collectives", 2 * 15 * (1 << 30),
             "  - {type: collectives, min_bytes: 15GiB, max_bytes: 15GiB, dtypes: [float64]}\n", "sweeps[0].max_bytes"),
            ("compute", 3 * 8 * 65536 ** 2,
             "  - {type: compute, sizes: [128, 65536], dtypes: [float64]}\n", "sweeps[0].sizes")):
        if need > total:
            cases.append((kind, sweep, key))
        else:
            print(f"note: the {kind} case needs a node under {need} B (this one has {total} B): not run")
    for ranks in (1, 2):
        for kind, sweep, key in cases:
            cfg = write(os.path.join(args.workdir, f"fit_{kind}.yaml"),
                        "backend: host\nsweeps:\n" + sweep)
            out = os.path.join(args.workdir, f"fit_{kind}.h5")
            if os.path.exists(out):
                os.remove(out)
            r, s = timed(args, ranks, [args.ringbench, cfg, "--output", out], timeout=60)
            msgs = lines_with(r.stderr, "of physical memory (MemTotal)")
            check(r.returncode != 0 and s < 20 and not os.path.exists(out) and len(msgs) == 1
                  and f"{cfg}:3:" in msgs[0] and f"key '{key}'" in msgs[0],
                  f"{ranks} rank(s), {kind}: refused in {s:.1f} s, once, at {cfg}:3 key '{key}': {msgs}")
            if kind == "memory":  # --dry-run validates the same way
                r, _ = timed(args, ranks, [args.ringbench, cfg, "--dry-run"], timeout=60)
                check(r.returncode != 0 and "physical memory" in r.stderr,
                      f"{ranks} rank(s): --dry-run refuses it too")


# Many short points (each well under the limit) so that the run is mid-sweep for many seconds.
STOP_JOB = """backend: host
run:
  point_timeout_s: {limit}
sweeps:
  - {{type: memory, name: mem, bytes: 1MiB, iterations: 2}}
  - {{type: collectives, name: coll, operations: [all_reduce, all_gather, broadcast, reduce_scatter], min_bytes: 8, max_bytes: 64KiB, dtypes: [float32, float64], iterations: 2000, warmup: 5}}
"""
STOP_LIMIT_S = 4
STOP_GRACE_S = 30


def rank_pids(marker, ringbench):
    """{rank: pid} of the ringbench processes whose command line holds `marker`."""
    pids = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if marker.encode() not in cmd or os.path.basename(cmd[0].decode()) != os.path.basename(ringbench):
            continue
        for e in env:
            if e.startswith(b"OMPI_COMM_WORLD_RANK="):
                pids[int(e.split(b"=")[1])] = int(pid)
    return pids


def check_stopped(args, one_rank_nodes=False):
    """A rank stopped with SIGSTOP mid-sweep: the others' hang guard ends the job with exit 124
    within the point limit + 30 s, names the stopped rank, and the file keeps the finished
    sweep readable. one_rank_nodes (check stopped_nodes): two simulated nodes of one rank
    (RINGBENCH_RANKS_PER_NODE=1), so rank 0 reads rank 1's heartbeat from the shared file its
    node's writer (rank 1 itself) stopped writing, and says the node sent nothing."""
    w = args.workdir
    cfg = write(os.path.join(w, "stop.yaml"), STOP_JOB.format(limit=STOP_LIMIT_S))
    out = os.path.join(w, f"stopped_{os.getpid()}.h5")  # unique: finds this run's processes
    for stale in (out, out + ".heartbeat"):
        if os.path.exists(stale):
            os.remove(stale)
    cmd = [args.mpiexec, "-np", "2", "--oversubscribe", args.ringbench, cfg, "--output", out]
    env = dict(os.environ, **harness.MPI_AS_ROOT)
    if one_rank_nodes:
        env["RINGBENCH_RANKS_PER_NODE"] = "1"
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    err, screen = [], []
    drain_out = threading.Thread(target=lambda: screen.extend(p.stdout), daemon=True)
    drain_out.start()
    pids, stopped_at, victim = {}, None, 1
    try:
        for line in p.stderr:  # rank 0's progress (stderr): stop once the second sweep is under way
            err.append(line)
            if "[mem] done" in line:
                time.sleep(1.5)
                pids = rank_pids(out, args.ringbench)
                break
        drain = threading.Thread(target=lambda: err.extend(p.stderr), daemon=True)
        drain.start()
        check(len(pids) == 2, f"found both ranks' processes by the output name: {pids}")
        if victim in pids:
            os.kill(pids[victim], signal.SIGSTOP)
            stopped_at = time.monotonic()
        try:
            p.wait(timeout=STOP_LIMIT_S + STOP_GRACE_S + 10)
        except subprocess.TimeoutExpired:
            pass
        ended = p.poll() is not None
        took = time.monotonic() - stopped_at if stopped_at else float("nan")
        check(ended and took <= STOP_LIMIT_S + STOP_GRACE_S,
              f"the job ended {took:.1f} s after the stop (limit {STOP_LIMIT_S} + {STOP_GRACE_S} s)")
        drain.join(timeout=10)
        stderr = "".join(err)
        print(stderr[-3000:])
        check(p.returncode == 124, f"mpirun's exit code is 124 (got {p.returncode})")
        named = lines_with(stderr, "the rank(s) the others wait for: rank 1 (last at sweep coll")
        check(len(named) >= 1 and "rank 0:" in named[0],
              f"rank 0's guard names the stopped rank 1 and where it was: {named}")
        node_said = bool(named) and "nor did any other rank of its node" in named[0]
        check(node_said == one_rank_nodes,
              "rank 1 alone on its node: its node sent nothing to the file, and the line says so"
              if one_rank_nodes else "one node: rank 1 judged from the node's memory")
        check("TIMEOUT: sweep coll point" in stderr, "the TIMEOUT line names the sweep and point")
        with h5py.File(out, "r") as f:
            mem = f["sweeps/mem"]
            bw = mem["bandwidth_Bps"][()]
            check(texts([mem.attrs["status"]])[0] == "complete" and bw.size > 0
                  and all(math.isfinite(x) and x > 0 for x in bw.ravel()),
                  f"the finished sweep is complete and readable: {bw.tolist()}")
            coll = f["sweeps"].get("coll")
            check(coll is None or texts([coll.attrs["status"]])[0] != "complete",
                  "the interrupted sweep is not marked complete")
    finally:
        for pid in pids.values():  # nothing may outlive the test
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
        if p.poll() is None:
            p.kill()
            p.wait()
    for leftover in (out, out + ".heartbeat"):
        if os.path.exists(leftover):
            os.remove(leftover)


def check_stopped_setup(args):
    """Issue #31 D5: a rank stopped (SIGSTOP) before the output is claimed, when no point runs:
    only points were timed, so with a point limit and no run limit every rank waited for good.
    Now the time between points has the point limit too, at least 60 s: the job ends with exit
    124 and a TIMEOUT line that says 'between points'."""
    cfg = write(os.path.join(args.workdir, "stop_setup.yaml"), STOP_JOB.format(limit=STOP_LIMIT_S))
    out = os.path.join(args.workdir, f"stopped_setup_{os.getpid()}.h5")  # unique: finds its ranks
    cmd = [args.mpiexec, "-np", "2", "--oversubscribe", args.ringbench, cfg, "--output", out]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, **harness.MPI_AS_ROOT))
    pids, stopped_at = {}, None
    try:
        # The header's first line: every rank is set up (the guard runs), the output not yet claimed.
        p.stdout.readline()
        pids = rank_pids(out, args.ringbench)
        if 1 in pids:
            os.kill(pids[1], signal.SIGSTOP)
            stopped_at = time.monotonic()
        check(stopped_at is not None, f"rank 1 found and stopped before the run's first point: {pids}")
        threading.Thread(target=p.stdout.read, daemon=True).start()
        try:
            err = p.stderr.read() if p.wait(timeout=60 + STOP_GRACE_S + 10) is not None else ""
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            err = ""
        took = time.monotonic() - stopped_at if stopped_at else float("nan")
        said = lines_with(err, "TIMEOUT: between points has run")
        check(p.returncode == 124 and took <= 60 + STOP_GRACE_S and said
              and "at least 60 s between points" in said[0],
              f"the job ended with exit {p.returncode} {took:.1f} s after the stop: {said}")
        if not said:
            print(err[-2000:])
    finally:
        for pid in pids.values():
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
    for leftover in (out, out + ".heartbeat", out + ".end", out + ".lock"):
        if os.path.exists(leftover):
            os.remove(leftover)


def refused_once(r, seconds, needle, limit_s=10):
    """(ok, the lines): a non-zero exit within limit_s, the message once (one rank), no crash."""
    msgs = lines_with(r.stderr, needle)
    crashed = any(t in r.stderr for t in ("terminate called", "Segmentation fault", "Backtrace",
                                          "signal 11", "Traceback functionality"))
    return r.returncode != 0 and seconds < limit_s and len(msgs) == 1 and not crashed, msgs


def config_text_cases():
    """Issue #31 round two, D2 and D10: a UTF-16 file and a NUL byte in a comment (both ran, and
    /run config_text kept their first bytes only), a 100,000-character key in a flow map (yaml-cpp
    said 'end of map flow not found') and a 100,000-character sweep name (accepted)."""
    line3 = JOB.split("\n")[2]
    long_key = "k" * 100000
    keyed = line3.replace("iterations: 2}", f"iterations: 2, {long_key}: 1}}")
    return [
        ("utf16", JOB.encode("utf-16"), ":1:1: ", "the file is UTF-16LE encoded (byte-order mark FF FE)"),
        ("nul_comment", JOB.replace("backend: host", "backend: host # a\0b"), ":1:18: ",
         "a NUL byte (\\0) here"),
        ("long_key", JOB.replace(line3, keyed), f":3:{keyed.index(long_key) + 1}: key 'sweeps[0]'",
         "key longer than 1024 characters (100000, starting 'kkk"),
        ("long_name", JOB.replace("name: mem", "name: " + "m" * 100000),
         f":3:{line3.index('name: mem') + 7}: key 'sweeps[0].name'",
         "expected a name of at most 128 characters, got 100000"),
    ]


def check_config_limits(args):
    """Issue #31 items 1, 7, 11: a self-referencing alias (SIGSEGV on every rank before), an
    MPI-IO hint value of MPI_MAX_INFO_VAL characters (every rank aborted after the output was
    claimed, a 57-byte non-HDF5 file left), a list beyond HDF5's 64 KiB attribute (aborted at
    run time), and config_text_cases: each refused at validation, at its key (or the file's
    line and column), once, with no output file."""
    w = args.workdir
    head_dims = ", ".join(["16"] * 8001)
    cases = [
        ("self_alias", "x: &a [*a]\nsweeps:\n  - {type: memory}\n", ":1:8: key 'x[0]'",
         "stands for the list anchored '&a' at line 1"),
        ("self_alias_map", "backend: host\nsweeps:\n  - &s {type: memory, name: m, more: *s}\n",
         ":3:38: key 'sweeps[0].more'", "would contain itself"),
        ("hint_value", "backend: host\nrun:\n  mpiio_hints:\n    cb_config_list: " + "x" * 256 +
         "\n" + JOB.split("\n", 1)[1], ":4:21: key 'run.mpiio_hints.cb_config_list'",
         "MPI-IO hint values are at most 255 characters"),
        ("long_list", "backend: host\nsweeps:\n  - {type: kernel_tuning, block_rows: [64], "
         "head_dims: [" + head_dims + "]}\n", ":3:", "a list may hold at most 8000 values, got 8001"),
    ] + config_text_cases()
    for name, text, where, needle in cases:
        cfg = os.path.join(w, name + ".yaml")
        with open(cfg, "wb") as f:
            f.write(text if isinstance(text, bytes) else text.encode())
        out = os.path.join(w, name + ".h5")
        if os.path.exists(out):
            os.remove(out)
        r, s = timed(args, 2, [args.ringbench, cfg, "--output", out], timeout=60)
        ok, msgs = refused_once(r, s, needle)
        check(ok and f"{cfg}{where}" in msgs[0] and not os.path.exists(out),
              f"{name}: refused in {s:.1f} s at {where}, once, no output file: {msgs}")
        if not ok:
            print(r.stderr[-2000:])
        r, _ = timed(args, 1, [args.ringbench, cfg, "--dry-run"], timeout=60)
        check(r.returncode != 0 and needle in r.stderr, f"{name}: --dry-run refuses it too")


def special_files(w, stem):
    """{kind: path} of a FIFO, a socket and (as root) a character device named stem.*, new."""
    import socket
    made = {}
    fifo = os.path.join(w, stem + ".fifo")
    os.mkfifo(fifo)
    made["a FIFO (named pipe)"] = fifo
    sock_path = os.path.join(w, stem + ".sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(sock_path)
    sock.close()
    made["a socket"] = sock_path
    dev = os.path.join(w, stem + ".dev")
    try:
        os.mknod(dev, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers
        made["a character device"] = dev
    except PermissionError:
        print("note: not root: no device node planted")
    return made


def fresh_dir(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def json_status(path):
    try:
        with open(path) as f:
            return json.load(f).get("status")
    except (OSError, ValueError):
        return None


def check_side_files(args):
    """Issue #31 items 2, 4 and 18: --json wrote FILE.tmp through a planted link; the heartbeat
    file was opened through a link (and blocked on a FIFO); --force renamed over a FIFO, socket
    or device. Now nothing is written through a link, only regular files (or, with --force, a
    link itself) are replaced, and a link or FIFO at the heartbeat's name refuses the run."""
    w = fresh_dir(os.path.join(args.workdir, "side"))
    target = write(os.path.join(w, "target.txt"), "keep me")
    json_path = os.path.join(w, "r.json")
    out = os.path.join(w, "run.h5")
    os.symlink("target.txt", json_path + ".tmp")          # the old fixed temporary name
    r, _ = run_job(args, out, "--json", json_path, timeout=120)
    check(r.returncode == 0 and status_of(out) == "complete" and json_status(json_path) == "complete"
          and open(target).read() == "keep me" and os.path.islink(json_path + ".tmp"),
          "--json beside a planted link: run complete, JSON complete, the link and its target untouched")
    check(not [n for n in os.listdir(w) if n.startswith(".r.json.")],
          "no temporary file of the --json writer is left")
    # A link or a FIFO where the hang guard's heartbeat goes: the run refuses to start, naming
    # it, before the output is claimed; nothing is written through the link, never blocked.
    os.remove(out)
    os.symlink("target.txt", out + ".heartbeat")
    r, s = run_job(args, out, timeout=60)
    ok, msgs = refused_once(r, s, f"heartbeat file '{out}.heartbeat' is a symbolic link")
    check(ok and not os.path.exists(out) and os.path.islink(out + ".heartbeat")
          and open(target).read() == "keep me",
          f"a link at OUTPUT.heartbeat: refused once, no output, the link and its target untouched: {msgs}")
    out2 = os.path.join(w, "run2.h5")
    os.mkfifo(out2 + ".heartbeat")
    r, s = run_job(args, out2, timeout=60)
    ok, msgs = refused_once(r, s, f"heartbeat file '{out2}.heartbeat' is a FIFO (named pipe)")
    check(ok and not os.path.exists(out2) and stat.S_ISFIFO(os.lstat(out2 + ".heartbeat").st_mode),
          f"a FIFO at OUTPUT.heartbeat: refused once in {s:.1f} s, no output, the FIFO stays: {msgs}")
    for kind, path in special_files(w, "json").items():
        r, s = run_job(args, os.path.join(w, "j.h5"), "--json", path, "--force", timeout=60)
        ok, msgs = refused_once(r, s, f"--json file '{path}' is {kind}")
        check(ok and not os.path.exists(os.path.join(w, "j.h5")) and not stat.S_ISREG(os.lstat(path).st_mode),
              f"--json onto {kind}: refused once before the output is claimed, left as it was: {msgs}")
    link = os.path.join(w, "link.json")
    os.symlink("target.txt", link)
    r, s = run_job(args, os.path.join(w, "l.h5"), "--json", link, timeout=60)
    check(r.returncode != 0 and "is a symbolic link" in r.stderr and os.path.islink(link),
          "--json onto a link without --force: refused, the link kept")
    r, s = run_job(args, os.path.join(w, "l.h5"), "--json", link, "--force", timeout=120)
    check(r.returncode == 0 and not os.path.islink(link) and json_status(link) == "complete"
          and open(target).read() == "keep me",
          "--json onto a link with --force: the link itself replaced, its target untouched")
    for kind, path in special_files(w, "out").items():
        r, s = run_job(args, path, "--force", timeout=60)
        ok, msgs = refused_once(r, s, f"output '{path}' is {kind}, not a regular file")
        check(ok and not stat.S_ISREG(os.lstat(path).st_mode)
              and not [n for n in os.listdir(w) if n.endswith(".partial")],
              f"--force onto {kind}: refused once, left as it was, no partial file: {msgs}")


def check_partial_leftover(args):
    """A --force run killed before its end leaves its new file under the partial name
    (.NAME.rbPID.partial). The next run on that output, holding its lock, removes this user's
    regular leftovers of that output, says so once, and leaves other outputs' partials, links
    and their targets alone."""
    w = fresh_dir(os.path.join(args.workdir, "partials"))
    out = os.path.join(w, "run.h5")
    r, _ = run_job(args, out, timeout=120)
    check(r.returncode == 0 and status_of(out) == "complete", f"first run: exit {r.returncode}")
    stale = write(os.path.join(w, ".run.h5.rb99999.partial"), "a killed run's file")
    other = write(os.path.join(w, ".other.h5.rb5.partial"), "another output's")
    target = write(os.path.join(w, "target.txt"), "keep me")
    link = os.path.join(w, ".run.h5.rb77.partial")
    os.symlink("target.txt", link)
    r, _ = run_job(args, out, "--force", timeout=120)
    notes = lines_with(r.stderr, "left by an earlier --force run")
    check(r.returncode == 0 and status_of(out) == "complete" and not os.path.exists(stale),
          f"--force run: exit {r.returncode}, output complete, the leftover removed")
    check(len(notes) == 1 and stale in notes[0], f"said once, naming it: {notes}")
    check(os.path.exists(other) and os.path.islink(link) and open(target).read() == "keep me",
          "another output's partial, a link with a partial name and its target are left alone")
    check(sorted(n for n in os.listdir(w) if n.endswith(".partial")) == [".other.h5.rb5.partial",
                                                                        ".run.h5.rb77.partial"],
          f"this run left no partial of its own: {sorted(os.listdir(w))}")


ENV_CASES = [  # (variable, value, what the message names)
    ("RINGBENCH_RANKS_PER_NODE", "abc", "an integer between 1 and 1048576 (ranks per simulated node)"),
    ("RINGBENCH_PLACEMENT", "diagonal", "one of block|cyclic"),
    ("RINGBENCH_TEST_HANG_POINT", "collectives", "SWEEP:INDEX (a sweep name and a point index from 0, e.g. collectives:0)"),
    ("RINGBENCH_TEST_HANG_POINT", "mem:99999999999999999999999",
     "SWEEP:INDEX (a sweep name and a point index from 0, e.g. collectives:0)"),
    ("KOKKOS_NUM_THREADS", "abc", "an integer between 1 and 2147483647 (host threads)"),
    ("KOKKOS_NUM_THREADS", "", "an integer between 1 and 2147483647 (host threads)"),
    ("KOKKOS_DEVICE_ID", "4x", "an integer between 0 and 2147483647 (the GPU's index)"),
    ("KOKKOS_DISABLE_WARNINGS", "ture", "true, on, yes, 1-9, or false, off, no, 0"),
]


def check_environment(args):
    """Issue #31 item 8: bad RINGBENCH_* / KOKKOS_* variables threw inside ringbench or Kokkos on
    every rank (std::terminate, backtraces). Now: one message naming the variable and its form,
    from one rank, and a non-zero exit on every rank, also when only rank 1 has the bad value."""
    w = fresh_dir(os.path.join(args.workdir, "env"))
    cfg = write(os.path.join(w, "job.yaml"), JOB)
    for name, value, form in ENV_CASES:
        for only_rank1 in (False, True):
            exits = fresh_dir(os.path.join(w, "exits"))
            if only_rank1:  # the variable set on rank 1 alone
                cmd = ["sh", "-c", f'[ "$OMPI_COMM_WORLD_RANK" = 1 ] && export {name}="{value}"; '
                       'exec "$0" "$@"', args.ringbench, cfg, "--dry-run"]
                env = None
            else:
                cmd, env = [args.ringbench, cfg, "--dry-run"], {name: value}
            t0 = time.monotonic()
            r = mpirun(args, 2, cmd, timeout=60, per_rank_exit_dir=exits, env=env)
            ok, msgs = refused_once(r, time.monotonic() - t0, f"environment variable {name}: ")
            codes = sorted(open(os.path.join(exits, f)).read().strip() for f in os.listdir(exits))
            check(ok and f"expected {form}, got '{value}'" in msgs[0] and codes == ["1", "1"],
                  f"{name}={value!r}{' on rank 1 only' if only_rank1 else ''}: one message naming "
                  f"it and its form, exit 1 on both ranks ({codes}): {msgs}")
            if not ok:
                print(r.stderr[-1500:])
    # Fine values, and one Kokkos itself refuses (an option contradicting the variable).
    r = mpirun(args, 2, [args.ringbench, cfg, "--dry-run"], timeout=60,
               env={"KOKKOS_NUM_THREADS": "2", "RINGBENCH_PLACEMENT": "cyclic",
                    "RINGBENCH_RANKS_PER_NODE": "1"})
    check(r.returncode == 0, f"valid values run (exit {r.returncode})")
    t0 = time.monotonic()
    r = mpirun(args, 2, [args.ringbench, cfg, "--dry-run", "--kokkos-threads=3"], timeout=60,
               env={"KOKKOS_NUM_THREADS": "2"})
    ok, msgs = refused_once(r, time.monotonic() - t0, "ringbench: Kokkos could not start: ")
    check(ok, f"--kokkos-threads contradicting KOKKOS_NUM_THREADS: Kokkos' reason once: {msgs}")


def check_closed_stdout(args):
    """Issue #31 item 10: `ringbench ... | head -1` died of SIGPIPE (exit 141) and left the file
    'running'. Now the run goes on to the end: exit 0, the HDF5 and JSON files complete, one
    note on stderr. (The child gets SIGPIPE's default action back, as from a shell.)"""
    w = fresh_dir(os.path.join(args.workdir, "pipe"))
    cfg = write(os.path.join(w, "job.yaml"), JOB + "  - {type: memory, name: mem2, bytes: 1MiB, iterations: 2}\n")
    out, json_path = os.path.join(w, "run.h5"), os.path.join(w, "run.json")
    env = dict(os.environ, **harness.MPI_AS_ROOT)
    for stream in ("stdout", "both"):
        for f in (out, json_path):
            if os.path.exists(f):
                os.remove(f)
        p = subprocess.Popen([args.ringbench, cfg, "--output", out, "--json", json_path],
                             stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT if stream == "both" else subprocess.PIPE,
                             env=env)
        first = p.stdout.readline()
        p.stdout.close()  # the reader is gone, as `| head -1` leaves it
        err = b"" if stream == "both" else p.stderr.read()
        p.wait(timeout=120)
        check(first.startswith(b"ringbench ") and p.returncode == 0 and status_of(out) == "complete"
              and json_status(json_path) == "complete",
              f"{stream} closed after the first line: exit {p.returncode}, output "
              f"{status_of(out)}, JSON {json_status(json_path)}")
        if stream == "stdout":
            check(err.count(b"standard output is gone (Broken pipe)") == 1 and b"terminate" not in err,
                  f"one note on stderr: {err[-600:]!r}")


def main():
    ap = harness.arg_parser()
    checks = {"config": check_config, "output": check_output, "race": check_race,
              "diskfull": check_diskfull, "oom": check_oom, "oom_mpi": check_oom_mpi,
              "oom_validation": check_oom_validation,
              "stopped": check_stopped, "config_limits": check_config_limits,
              "stopped_nodes": lambda a: check_stopped(a, one_rank_nodes=True),
              "stopped_setup": check_stopped_setup,
              "side_files": check_side_files, "environment": check_environment,
              "closed_stdout": check_closed_stdout, "partial_leftover": check_partial_leftover}
    ap.add_argument("check", choices=list(checks))
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    checks[args.check](args)
    return harness.exit_code()


if __name__ == "__main__":
    sys.exit(main())
