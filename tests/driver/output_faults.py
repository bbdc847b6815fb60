#!/usr/bin/env python3
"""End-to-end checks of how a run holds and ends its output (issue #31), on 2 ranks of the host
path. The file is read back with h5dump (no h5py needed).

    lock        a run holds OUTPUT.lock for its whole life: a second run on the same output, with
                --force or without, is refused once (rank 0), non-zero, while the first goes on
                and completes its file; the lock file is gone after; a run killed with SIGKILL
                blocks nothing (the next run with --force completes)
    slow_point  a healthy point slower than run.point_timeout_s: once the hang guard decided,
                the run ends with exit code 124, /run status is not 'complete' and nothing
                says 'complete'; OUTPUT.end records 'status: timeout' and the point
    sigterm_ranks   SIGTERM to both ranks (as Slurm's time limit and scancel send it) while the
                second sweep's first point runs (the test-only hang hook holds it there): the
                point never ends, so the run ends when the signal's grace (20 s) is over
                (tests/driver/interrupted_sweep.py: a point that ends is kept), mpirun exits
                143 (128 + SIGTERM), one rank says
                'interrupted by SIGTERM during sweep hang point 0', OUTPUT.end records
                'status: interrupted' with the signal and the point, /run status is 'running'
                (not 'complete') and the first sweep stays complete and readable
    dirs        under umask 000 the directories made for the output are 0755 (not 0777); a run
                refused after they were made (an output path too long for MPI-IO) leaves none
    sigterm_mpirun  the same with SIGTERM to mpirun (which passes it on to the ranks, then
                SIGKILL): non-zero exit, OUTPUT.end written before the SIGKILL (when the signal
                comes, not when its grace ends)

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
    record = end_record(out + ".end")
    check(record is not None and record.get("status") == "timeout"
          and record.get("failure", "").startswith("sweep mem point 0 (")
          and "run.point_timeout_s" in record.get("failure", ""),
          f"OUTPUT.end records the timeout and its point: {record}")


# A first sweep that completes, then a point the test-only hang hook holds (hang:0).
HANG = """backend: host
run:
  point_timeout_s: off
sweeps:
  - {type: host_pingpong, name: first, message_sizes: [8], iterations: 5}
  - {type: collectives, name: hang, operations: [all_reduce], max_bytes: 1KiB, iterations: 5}
"""


def end_record(path):
    """OUTPUT.end as a dict of its 'key: value' lines, or None."""
    try:
        with open(path) as f:
            return dict(line.split(": ", 1) for line in f.read().splitlines() if ": " in line)
    except OSError:
        return None


def check_sigterm(args, to_ranks):
    config = write(args, "hang.yaml", HANG)
    out = os.path.join(args.workdir, "hang.h5")
    cmd = [args.mpiexec, "-np", str(RANKS), "--oversubscribe", "-x", "RINGBENCH_TEST_HANG_POINT",
           args.ringbench, config, "--output", out]
    e = env()
    e["RINGBENCH_TEST_HANG_POINT"] = "hang:0"
    r = harness.sigterm_at(cmd, e, "[hang] point 1/", RANKS, to_ranks)
    check("[first] done" in r.seen and "[hang] point 1/" in r.seen,
          f"the first sweep ended and the held point started: {r.seen[-1000:]}")
    check(not r.killed, "the run ended within 60 s of SIGTERM")
    stderr = r.seen + r.stderr
    print(r.stdout[-1000:], stderr[-3000:], sep="\n")
    if to_ranks:
        check(r.returncode == 143, f"exit code 143, 128 + SIGTERM (got {r.returncode})")
        said = [l for l in stderr.splitlines() if "interrupted by SIGTERM during sweep hang point 0" in l]
        check(len(said) == 1 and "exit code 143" in said[0] and out + ".end" in said[0],
              f"said once, with the point, the code and the record: {said}")
    check(r.returncode != 0, f"a non-zero exit code (got {r.returncode})")
    record = end_record(out + ".end")
    print("OUTPUT.end:", record)
    check(record is not None and record.get("status") == "interrupted",
          "OUTPUT.end records status 'interrupted'")
    check(record is not None and record.get("failure", "").startswith("SIGTERM during sweep hang point 0 ("),
          "its failure names the signal and the point")
    check(h5_attr(out, "/run", "status") == "running", "/run status is 'running', not 'complete'")
    check(h5_attr(out, "/sweeps/first", "status") == "complete", "the first sweep stays complete")
    check("complete" not in r.stdout, "nothing says complete")
    check_analysis_reads_the_end(args, out)


def check_analysis_reads_the_end(args, out):
    """rb-analysis reads the record beside the file: its status line says how the run ended."""
    r = harness.run([os.path.join(args.source, "analysis", "rb-analysis"), "report", out, "--out",
                     os.path.join(args.workdir, "report")], timeout=300, env=env())
    if "h5py" in r.stderr and r.returncode != 0:
        print("rb-analysis needs h5py here: not checked")
        return
    text = r.stdout + r.stderr
    check("run status is 'interrupted': SIGTERM during sweep hang point 0" in text,
          f"rb-analysis report says how the run ended: {text[-1500:]}")


def check_dirs(args):
    config = write(args, "dirs.yaml", "backend: host\nsweeps:\n  - {type: host_pingpong, name: p, "
                   "message_sizes: [8], iterations: 5}\n")
    out = os.path.join(args.workdir, "made", "deeper", "run.h5")
    cmd = command(args, config, out)
    print("+ (umask 000)", " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env(), timeout=120,
                       preexec_fn=lambda: os.umask(0))
    check(r.returncode == 0, f"the run completes (exit {r.returncode}): {r.stderr[-2000:]}")
    modes = {d: oct(os.stat(d).st_mode & 0o7777) for d in (os.path.dirname(os.path.dirname(out)),
                                                            os.path.dirname(out))}
    check(set(modes.values()) == {"0o755"}, f"the directories made are 0755 under umask 000: {modes}")
    fresh = os.path.join(args.workdir, "fresh")
    long_out = os.path.join(fresh, "d" * 120, "e" * 120, "run.h5")
    r = harness.run(command(args, config, long_out), timeout=120, env=env())
    check(r.returncode != 0 and "too long for MPI-IO" in r.stderr,
          f"a {len(long_out)}-character --output is refused: {r.stderr[-1000:]}")
    check(not os.path.exists(fresh), "and the directories it made for it are gone")


def main():
    return harness.run_check({"lock": check_lock, "slow_point": check_slow_point,
                              "sigterm_ranks": lambda a: check_sigterm(a, to_ranks=True),
                              "sigterm_mpirun": lambda a: check_sigterm(a, to_ranks=False), "dirs": check_dirs})


if __name__ == "__main__":
    sys.exit(main())
