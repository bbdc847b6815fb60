#!/usr/bin/env python3
"""End-to-end checks of how a run holds and ends its output (issue #31), on 2 ranks of the host
path. The file is read back with h5dump (no h5py needed).

    lock        a run holds OUTPUT.lock for its whole life: a second run on the same output, with
                --force or without, is refused once (rank 0), non-zero, while the first goes on
                and completes its file; the lock file is gone after; a run killed with SIGKILL
                blocks nothing (the next run with --force completes)
    slow_point  a healthy point slower than run.point_timeout_s: once the hang guard decided,
                the run ends with exit code 124, /run status is not 'complete' and nothing
                says 'complete'

    output_faults.py CHECK --ringbench BIN --mpiexec MPIEXEC --source DIR --workdir DIR
Exit 0 = pass, 1 = fail, 77 = skipped.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import check  # noqa: E402
import harness  # noqa: E402

harness.ECHO_PASSES = True
RANKS = 2

# Many short collectives points: the run is busy for several seconds.
BUSY = """backend: host
sweeps:
  - {type: collectives, name: coll, operations: [all_reduce, all_gather, broadcast, reduce_scatter], min_bytes: 8, max_bytes: 64KiB, dtypes: [float32, float64], iterations: 6000, warmup: 5}
"""

# One memory point far slower than the point limit, then the run's end.
SLOW = """backend: host
run:
  point_timeout_s: 0.2
sweeps:
  - {type: memory, name: mem, bytes: 64MiB, iterations: 40}
"""


def h5_attr(path, obj, name):
    """A string attribute read with h5dump, or None."""
    if shutil.which("h5dump") is None:
        print("SKIPPED: no h5dump")
        sys.exit(harness.SKIPPED)
    p = subprocess.run(["h5dump", "-a", f"{obj}/{name}", path], capture_output=True, text=True)
    m = re.search(r'\(0\): "([^"]*)"', p.stdout)
    return m.group(1) if m else None


def command(args, config, out, *extra):
    return [args.mpiexec, "-np", str(RANKS), "--oversubscribe", args.ringbench, config,
            "--output", out] + list(extra)


def env():
    e = dict(os.environ)
    e.update({k: os.environ.get(k, v) for k, v in harness.MPI_AS_ROOT.items()})
    return e


def start(args, config, out, *extra):
    """A run in the background, in a session of its own (so that it can be killed whole)."""
    cmd = command(args, config, out, *extra)
    print("+ (background)", " ".join(cmd), flush=True)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env(), start_new_session=True)


def wait_for(path, proc, seconds=120):
    """Waits until `path` exists while `proc` runs; False if it ended first or time ran out."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        if os.path.exists(path):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.05)
    return False


def write(args, name, text):
    path = os.path.join(args.workdir, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def check_lock(args):
    config = write(args, "busy.yaml", BUSY)
    out = os.path.join(args.workdir, "busy.h5")
    first = start(args, config, out)
    started = wait_for(out + ".lock", first) and wait_for(out, first)
    check(started, "the first run holds OUTPUT.lock and has created its file")
    for extra in (["--force"], []):
        second = harness.run(command(args, config, out, *extra), timeout=120, env=env())
        msgs = [l for l in second.stderr.splitlines() if "is in use by another ringbench run" in l]
        print(second.stderr[-2000:])
        check(second.returncode != 0, f"the second run {extra} exits non-zero ({second.returncode})")
        check(len(msgs) == 1 and f"output '{out}'" in msgs[0] and f"'{out}.lock'" in msgs[0]
              and re.search(r"host \S+ pid \d+", msgs[0]),
              f"said once, naming the output, the lock file and the holder: {msgs}")
        check(first.poll() is None, f"the first run was still running when {extra} was refused "
                                    "(else the check proves nothing: make BUSY longer)")
    stdout, stderr = first.communicate(timeout=300)
    check(first.returncode == 0, f"the first run completes (exit {first.returncode}): {stderr[-2000:]}")
    check(h5_attr(out, "/run", "status") == "complete", "its /run status is 'complete'")
    check(h5_attr(out, "/sweeps/coll", "status") == "complete", "its sweep is complete")
    check(not os.path.exists(out + ".lock"), "the lock file is removed at the end")

    killed = start(args, config, out, "--force")
    check(wait_for(out + ".lock", killed), "a run with --force takes the lock again")
    time.sleep(1)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.communicate(timeout=60)
    time.sleep(1)
    after = harness.run(command(args, config, out, "--force"), timeout=300, env=env())
    check(after.returncode == 0, f"a run killed with SIGKILL blocks nothing: the next completes "
                                 f"(exit {after.returncode}): {after.stderr[-2000:]}")
    check(h5_attr(out, "/run", "status") == "complete", "and its file is complete")


def check_slow_point(args):
    config = write(args, "slow.yaml", SLOW)
    out = os.path.join(args.workdir, "slow.h5")
    t0 = time.monotonic()
    p = harness.run(command(args, config, out), timeout=180, env=env())
    print(p.stdout[-2000:], p.stderr[-3000:], sep="\n")
    check("TIMEOUT: sweep mem point" in p.stderr, "the guard fired on the slow point")
    check(p.returncode == 124, f"exit code 124, the guard's (got {p.returncode})")
    check(h5_attr(out, "/run", "status") != "complete", "/run status is not 'complete'")
    check(h5_attr(out, "/sweeps/mem", "status") != "complete", "the sweep is not 'complete'")
    check("complete" not in p.stdout and "[mem] done" not in p.stderr,
          "nothing says complete or done")
    check(time.monotonic() - t0 < 120, "the run ended (no rank hangs)")


def main():
    ap = harness.arg_parser()
    ap.add_argument("check", choices=["lock", "slow_point"])
    args = ap.parse_args()
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    {"lock": check_lock, "slow_point": check_slow_point}[args.check](args)
    return harness.exit_code()


if __name__ == "__main__":
    sys.exit(main())
