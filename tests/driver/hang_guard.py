#!/usr/bin/env python3
"""End-to-end checks of the hang guard (issue #15 item 6): the real ringbench on 2 ranks with
tests/analysis/analysis_small.yaml, a time limit, and the test-only hook
RINGBENCH_TEST_HANG_POINT=collectives:0 (the second sweep's first point sleeps forever on
every rank).

    point    run.point_timeout_s: 3: the run ends within limit + 30 s with exit code 124 (what
             mpirun returns when a rank exits 124), stderr names the rank, sweep, point and the
             key, and the HDF5 file keeps the first sweep complete and readable
    run      --timeout 5 (the whole run), no point limit: exit 124, the message names --timeout
    no_hang  the same point limit without the hook: the run completes (exit 0): the guard does
             not fire on points that end, and stops with the run
    auto     no point_timeout_s (the default, auto: 10 x the sweep's estimate, at least a floor
             that RINGBENCH_TEST_AUTO_POINT_FLOOR_S=3 lowers): exit 124, the message names auto
    off      point_timeout_s: off with the same floor and --timeout 8: only the run's limit fires

    hang_guard.py CHECK --ringbench BIN --mpiexec MPIEXEC --source DIR --workdir DIR
Exit 0 = pass, 1 = fail, 77 = skipped.
"""
import math
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import check  # noqa: E402
import harness  # noqa: E402

h5py, np = harness.h5py_and_numpy(echo_passes=True)

RANKS = 2
GRACE_S = 30  # the run must end within the limit plus this


def write_config(args, point_timeout_s):
    """analysis_small.yaml with output_dir in the work folder and, if given, the point limit."""
    text = open(os.path.join(args.source, "tests", "analysis", "analysis_small.yaml")).read()
    extra = f"\n  point_timeout_s: {point_timeout_s}" if point_timeout_s else ""
    text = text.replace("  output_dir: results", f"  output_dir: {args.workdir}{extra}")
    check(f"output_dir: {args.workdir}" in text, "the config's run section was rewritten")
    path = os.path.join(args.workdir, "hang.yaml")
    open(path, "w").write(text)
    return path


def run(args, extra_args, point_timeout_s, hang, limit_s, env=None):
    """Runs ringbench; returns (completed process or None, seconds, output file)."""
    config = write_config(args, point_timeout_s)
    out = os.path.join(args.workdir, "hang.h5")
    env = dict(env or {})
    if hang:
        env["RINGBENCH_TEST_HANG_POINT"] = "collectives:0"
    cmd = [args.ringbench, config, "--output", out, "--force"] + extra_args
    for name in env:  # Open MPI passes only the variables it is told to
        cmd = ["-x", name] + cmd
    t0 = time.monotonic()
    try:
        p = mpirun(args, RANKS, cmd, timeout=limit_s + GRACE_S, env=env)
    except subprocess.TimeoutExpired:
        p = None
    seconds = time.monotonic() - t0
    check(p is not None, f"the run ended within {limit_s} + {GRACE_S} s (took {seconds:.1f} s)")
    return p, seconds, out


def mpirun(args, ranks, cmd, timeout, env):
    """harness.mpirun, with mpirun options (-x) allowed before the program."""
    opts = []
    while cmd and cmd[0] == "-x":
        opts += cmd[:2]
        cmd = cmd[2:]
    full = [args.mpiexec, "-np", str(ranks), "--oversubscribe"] + opts + cmd
    e = {k: os.environ.get(k, v) for k, v in harness.MPI_AS_ROOT.items()}
    e.update(env)
    return harness.run(full, timeout=timeout, env=e)


def check_first_sweep_kept(out):
    """The sweep finished before the hang is complete and its data readable."""
    check(os.path.exists(out), f"{out} exists")
    if not os.path.exists(out):
        return
    with h5py.File(out, "r") as f:
        check(f["run"].attrs["status"] == "running", "/run status stays 'running'")
        ring = f["sweeps/ring"]
        check(ring.attrs["status"] == "complete", "the first sweep (ring) is complete")
        t = ring["forward_time_s"][()]
        check(t.size > 0 and all(math.isfinite(x) and x > 0 for x in t.ravel()),
              f"its forward_time_s is readable and positive: {t}")
        status = f["sweeps"].get("collectives")
        check(status is None or status.attrs.get("status") != "complete",
              "the hung sweep is not marked complete")


def check_point(args):
    p, seconds, out = run(args, [], 3, True, 3)
    if p is None:
        return
    print(p.stdout[-2000:], p.stderr[-3000:], sep="\n")
    check(p.returncode == 124, f"mpirun's exit code is 124 (got {p.returncode})")
    for rank in range(RANKS):
        want = f"ringbench: rank {rank}: TIMEOUT: sweep collectives point 0 ("
        check(want in p.stderr, f"stderr has '{want}'")
    check("> limit 3 s (run.point_timeout_s)" in p.stderr, "stderr names the limit and its key")
    check(seconds >= 3, f"the guard did not fire before the limit ({seconds:.1f} s)")
    check_first_sweep_kept(out)


def check_run(args):
    p, seconds, out = run(args, ["--timeout", "5"], None, True, 5)
    if p is None:
        return
    print(p.stderr[-3000:])
    check(p.returncode == 124, f"mpirun's exit code is 124 (got {p.returncode})")
    check("TIMEOUT: sweep collectives point 0 (" in p.stderr, "stderr names the hung point")
    check("> limit 5 s (the run, --timeout)" in p.stderr, "stderr names --timeout")
    check(seconds >= 5, f"the guard did not fire before the limit ({seconds:.1f} s)")
    check_first_sweep_kept(out)


def check_no_hang(args):
    p, _, out = run(args, [], 3, False, 120)
    if p is None:
        return
    check(p.returncode == 0, f"exit 0 without a hang (got {p.returncode}): {p.stderr[-2000:]}")
    check("TIMEOUT" not in p.stderr, "no TIMEOUT line")
    with h5py.File(out, "r") as f:
        check(f["run"].attrs["status"] == "complete", "/run status is 'complete'")


FLOOR = {"RINGBENCH_TEST_AUTO_POINT_FLOOR_S": "3"}


def check_auto(args):
    """The default limit (auto) ends a hung point with no point_timeout_s in the config."""
    p, seconds, out = run(args, [], None, True, 3, env=FLOOR)
    if p is None:
        return
    print(p.stderr[-3000:])
    check(p.returncode == 124, f"mpirun's exit code is 124 (got {p.returncode})")
    check("TIMEOUT: sweep collectives point 0 (" in p.stderr, "stderr names the hung point")
    check("(run.point_timeout_s: auto, 10 x the sweep's estimate" in p.stderr,
          "stderr says the limit came from auto and how")
    check(seconds >= 3, f"the guard did not fire before the floor ({seconds:.1f} s)")
    check_first_sweep_kept(out)


def check_off(args):
    """point_timeout_s: off: the same hang waits for the run's limit (8 s), not auto's 3 s."""
    p, seconds, out = run(args, ["--timeout", "8"], "off", True, 8, env=FLOOR)
    if p is None:
        return
    print(p.stderr[-3000:])
    check(p.returncode == 124, f"mpirun's exit code is 124 (got {p.returncode})")
    check("> limit 8 s (the run, --timeout)" in p.stderr and "auto" not in p.stderr,
          "only the run's limit fired")
    check(seconds >= 8, f"the run's limit, not a point limit, ended it ({seconds:.1f} s)")


def main():
    return harness.run_check({"point": check_point, "run": check_run, "no_hang": check_no_hang,
                              "auto": check_auto, "off": check_off})


if __name__ == "__main__":
    sys.exit(main())
