#!/usr/bin/env python3
"""A signal stops a sweep between two points and the file keeps the points it finished, on 2
ranks of the host path. Before, a sweep's table was written only when the sweep ended, so a run
stopped by its time limit lost every point of the sweep it was in.

    hook_k_points   the test-only signal hook (RINGBENCH_TEST_SIGNAL_POINT=tune:3: every rank
                    sends itself SIGTERM as point 3 starts) in an 8-point sweep: point 3 ends,
                    the ranks agree to stop before point 4; every rank exits 143; the file
                    holds 'first' complete, 'tune' with status 'interrupted', points 4 of
                    points_planned 8 and rows of the complete sweep's shape, all measured;
                    /run status 'interrupted'; no later sweep; no OUTPUT.end left; rb-analysis
                    report exits 0 and says the sweep was cut short, compare says so too
    force_keeps_old the hook in a --force run over a complete file: the old file stays byte for
                    byte, the stopped run's file is removed (said once), exit 143
    sigterm_ranks   a real SIGTERM to both ranks from outside while the sweep runs: every rank
                    exits 143 within seconds and the file keeps 1 to 29 of the 30 points, each
                    row measured
    first_point     the signal while the sweep's first point runs: that point ends and is kept
                    (1 point), the earlier sweep stays complete
    last_point      the signal while the sweep's last point runs: the sweep completes, the
                    run stops after it ('SIGTERM after sweep tune', exit 143), no later sweep
    contention_concurrent  the hook at a contention sweep's second point (its first concurrent
                    phase, 4 points: alone, unbound, bound core, bound numa): every rank,
                    measuring or not, agrees before the third; the sweep keeps 2 of 4 points
                    (status 'interrupted'), exit 143, no later sweep; rb-analysis report reads it
    contention_alone    the hook at the first point (the alone phase, which holds each rank's
                    turn): the sweep keeps no point ('stopped after 0 of 4'), and the report
                    says it was not analysed instead of failing
    hung_point      the signal while a point that never ends runs (the hang hook as well): the
                    run ends when its grace (20 s) is over, with 143; the earlier sweep stays
                    complete, the sweep in progress is absent or has no rows (no half rows),
                    OUTPUT.end says how the run ended

    interrupted_sweep.py CHECK --ringbench BIN --mpiexec MPIEXEC --source DIR --workdir DIR
Exit 0 = pass, 1 = fail, 77 = skipped.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import check  # noqa: E402
import harness  # noqa: E402

harness.ECHO_PASSES = True
RANKS = 2


def config(args, tune_sizes, iterations):
    """'first' (one point), 'tune' (a point per message size), 'after' (never reached)."""
    sizes = ", ".join(str(s) for s in tune_sizes)
    path = os.path.join(args.workdir, "run.yaml")
    with open(path, "w") as f:
        f.write("backend: host\nrun:\n  point_timeout_s: off\nsweeps:\n"
                "  - {type: host_pingpong, name: first, message_sizes: [8], iterations: 5}\n"
                f"  - {{type: host_pingpong, name: tune, message_sizes: [{sizes}], "
                f"iterations: {iterations}}}\n"
                "  - {type: host_pingpong, name: after, message_sizes: [8], iterations: 5}\n")
    return path


def run_with_hook(args, hook, hang=None, timeout=180, extra=()):
    """The run with RINGBENCH_TEST_SIGNAL_POINT (and _HANG_POINT); (result, output, exit codes)."""
    cfg = config(args, [4096 * (i + 1) for i in range(8)], 20)  # above compare's --min-bytes
    out = os.path.join(args.workdir, "run.h5")
    # The ranks inherit mpirun's environment on its own node (the wrapper that records each
    # rank's exit code leaves no place for mpirun's -x).
    env = {"RINGBENCH_TEST_SIGNAL_POINT": hook}
    if hang:
        env["RINGBENCH_TEST_HANG_POINT"] = hang
    cmd = [args.ringbench, cfg, "--output", out] + list(extra)
    t0 = time.monotonic()
    r = harness.mpirun(args, RANKS, cmd, timeout=timeout, per_rank_exit_dir=args.workdir, env=env)
    print(f"ended after {time.monotonic() - t0:.1f} s, exit code {r.returncode}")
    print(r.stdout[-2000:])
    print(r.stderr[-3000:])
    return r, out, harness.rank_exit_codes(args.workdir)


def check_ranks_exit(codes, want):
    check(len(codes) == RANKS and set(codes.values()) == {want},
          f"every rank exits {want} (128 + SIGTERM): {codes}")


def check_kept(h5py, np, out, planned, kept):
    """'first' complete, 'tune' interrupted with `kept` points (a range: at least, at most) of
    `planned`, each row measured, /run interrupted, 'after' not run. Returns tune's points."""
    with h5py.File(out, "r") as f:
        run = f["run"].attrs
        check(run["status"] == "interrupted", f"/run status is 'interrupted' (got {run['status']})")
        check(str(run["failure"]).startswith("SIGTERM during sweep tune: stopped after "),
              f"/run failure says the signal and where: {run['failure']}")
        check(f["sweeps/first"].attrs["status"] == "complete", "the earlier sweep stays complete")
        t = f["sweeps/tune"]
        points = int(t.attrs["points"])
        check(t.attrs["status"] == "interrupted", f"'tune' status is 'interrupted' ({t.attrs['status']})")
        check(int(t.attrs["points_planned"]) == planned, f"points_planned is {planned}")
        check(kept[0] <= points <= kept[1], f"'tune' keeps {kept[0]}..{kept[1]} points (got {points})")
        check(f"stopped after {points} of {planned} points" in str(t.attrs["failure"]),
              f"its failure says how many: {t.attrs['failure']}")
        times = t["one_way_time_s"]
        check(times.shape[:2] == (RANKS, points), f"rows [ranks, points, ...] of the kept points: {times.shape}")
        check(t["points/message_size_bytes"].shape == (points,), "one key per kept point")
        bw = t["bandwidth_Bps"][()]
        check(bool(np.all(np.isfinite(bw)) and np.all(bw > 0)), f"every kept row is measured: {bw}")
        check("after" not in f["sweeps"], "no sweep after the interrupted one ran")
    check(not os.path.exists(out + ".end"), "no OUTPUT.end left: /run says how the run ended")
    return points


def report(args, out):
    """rb-analysis report on `out`: (its result, report.md's text or '' when none was written)."""
    tool = os.path.join(args.source, "analysis", "rb-analysis")
    r = harness.run([tool, "report", out, "--out", os.path.join(args.workdir, "report")], timeout=300)
    md_path = os.path.join(args.workdir, "report", "report.md")
    if not os.path.exists(md_path):
        return r, ""
    with open(md_path) as f:
        return r, f.read()


def check_analysis(args, out):
    """rb-analysis report exits 0 and says the sweep was cut short; compare says so too."""
    tool = os.path.join(args.source, "analysis", "rb-analysis")
    r, md = report(args, out)
    text = r.stdout + r.stderr
    check(r.returncode == 0, f"rb-analysis report exits 0: {text[-1500:]}")
    check("run status is 'interrupted': SIGTERM during sweep tune" in md,
          "the report says the run was interrupted, and where")
    check("sweep 'tune' (host_pingpong) status 'interrupted'" in md and "cut short" in md,
          f"the report says the sweep was cut short: {md[:3000]}")
    r = harness.run([tool, "compare", out, out, "--min-bytes", "0"], timeout=300)
    text = r.stdout + r.stderr
    check("Traceback" not in text and r.returncode in (0, 1), f"compare runs (exit {r.returncode})")
    check("cut short by a signal" in text, f"compare says the sweep was cut short: {text[-2000:]}")


def check_hook_k_points(args):
    h5py, np = harness.h5py_and_numpy()
    r, out, codes = run_with_hook(args, "tune:3")
    check(r.returncode == 143, f"mpirun exits 143 (got {r.returncode})")
    check_ranks_exit(codes, 143)
    check_kept(h5py, np, out, 8, (4, 4))
    check("INTERRUPTED: " + out in r.stdout, "the summary's first line says INTERRUPTED")
    check("2 sweep(s), 5 point(s)" in r.stdout, "and counts the sweeps and points that ran")
    check_analysis(args, out)


def check_force_keeps_old(args):
    """A --force run over a complete file, stopped by SIGTERM between points: the old file stays
    as it was (docs/user-guide.md), this run's cut-short file is removed, saying so; exit 143.
    Before, the interrupted file was renamed over the complete one."""
    h5py, _ = harness.h5py_and_numpy()
    out = os.path.join(args.workdir, "run.h5")
    cfg = config(args, [8], 5)
    first = harness.mpirun(args, RANKS, [args.ringbench, cfg, "--output", out, "--force"], timeout=180)
    check(first.returncode == 0, f"the first run completes: {first.stderr[-1000:]}")
    with open(out, "rb") as f:
        before = f.read()
    r, _, codes = run_with_hook(args, "tune:3", extra=("--force",))
    check(r.returncode == 143, f"mpirun exits 143 (got {r.returncode})")
    check_ranks_exit(codes, 143)
    with open(out, "rb") as f:
        check(f.read() == before, "the old, complete output is byte for byte as it was")
    with h5py.File(out, "r") as f:
        check(f["run"].attrs["status"] == "complete", "its /run status is still 'complete'")
    said = [ln for ln in r.stderr.splitlines() if "removed this run's unfinished file" in ln]
    check(len(said) == 1 and f"the output '{out}' it was to replace (--force) is left as it was" in said[0],
          f"said once: {said}")
    left = [n for n in os.listdir(args.workdir) if n.startswith(".run.h5") or n.startswith("run.h5.")]
    check(not [n for n in left if not n.endswith((".lock", ".heartbeat"))],
          f"no temporary file of the stopped run is left: {left}")


def check_first_point(args):
    h5py, np = harness.h5py_and_numpy()
    _, out, codes = run_with_hook(args, "tune:0")
    check_ranks_exit(codes, 143)
    check_kept(h5py, np, out, 8, (1, 1))


def check_last_point(args):
    h5py, _ = harness.h5py_and_numpy()
    _, out, codes = run_with_hook(args, "tune:7")
    check_ranks_exit(codes, 143)
    with h5py.File(out, "r") as f:
        check(f["run"].attrs["status"] == "interrupted", "/run status is 'interrupted'")
        check(f["run"].attrs["failure"] == "SIGTERM after sweep tune",
              f"/run failure says after which sweep: {f['run'].attrs['failure']}")
        t = f["sweeps/tune"]
        check(t.attrs["status"] == "complete" and int(t.attrs["points"]) == 8
              and "points_planned" not in t.attrs, "the sweep whose last point ran is complete")
        check("after" not in f["sweeps"], "the next sweep did not start")


def check_hung_point(args):
    h5py, _ = harness.h5py_and_numpy()
    t0 = time.monotonic()
    r, out, codes = run_with_hook(args, "tune:0", hang="tune:0")
    took = time.monotonic() - t0
    check_ranks_exit(codes, 143)
    check(took < 60, f"the run ended within its grace and a little more ({took:.0f} s)")
    check("no point boundary came in time" in r.stderr, "stderr says why the points were not kept")
    with h5py.File(out, "r") as f:
        check(f["sweeps/first"].attrs["status"] == "complete", "the earlier sweep stays complete")
        # The group of the sweep in progress reaches the disk only with the file's next flush.
        t = f["sweeps"].get("tune")
        check(t is None or t.attrs.get("status") == "running",
              "the sweep in progress is absent or not marked complete")
        check(t is None or len(t.keys()) == 0, "and has no rows, no half ones")
    with open(out + ".end") as f:
        record = f.read()
    check("status: interrupted" in record and "SIGTERM during sweep tune point 0" in record,
          f"OUTPUT.end says how the run ended: {record}")


def check_sigterm_ranks(args):
    h5py, np = harness.h5py_and_numpy()
    cfg = config(args, [262144 + 8 * i for i in range(30)], 400)
    out = os.path.join(args.workdir, "run.h5")
    cmd = [args.mpiexec, "-np", str(RANKS), "--oversubscribe", args.ringbench, cfg, "--output", out]
    env = dict(os.environ)
    env.update({k: os.environ.get(k, v) for k, v in harness.MPI_AS_ROOT.items()})
    r = harness.sigterm_at(cmd, env, "[tune] point 1/", RANKS)
    check("[tune] point 1/" in r.seen, f"the sweep started: {r.seen[-1000:]}")
    print(r.stdout[-1500:], (r.seen + r.stderr)[-3000:], sep="\n")
    check(r.returncode == 143, f"exit code 143 (got {r.returncode})")
    points = check_kept(h5py, np, out, 30, (1, 29))
    print(f"kept {points} of 30 points")


def contention_run(args, hook):
    """'first', then a host contention sweep of 4 points on 2 measuring ranks, then 'after'."""
    path = os.path.join(args.workdir, "contention.yaml")
    with open(path, "w") as f:
        f.write("backend: host\nrun:\n  point_timeout_s: off\nsweeps:\n"
                "  - {type: host_pingpong, name: first, message_sizes: [8], iterations: 5}\n"
                "  - {type: contention, name: cont, phases: [alone, concurrent_unbound, "
                "concurrent_bound], policies: [core, numa], workloads: [triad], iterations: 5, "
                "warmup: 1, cooldown_s: 0, triad_bytes: 4MiB, monitor_interval_ms: 100}\n"
                "  - {type: host_pingpong, name: after, message_sizes: [8], iterations: 5}\n")
    out = os.path.join(args.workdir, "contention.h5")
    r = harness.mpirun(args, RANKS, [args.ringbench, path, "--output", out], timeout=180,
                       per_rank_exit_dir=args.workdir, env={"RINGBENCH_TEST_SIGNAL_POINT": hook})
    print(r.stdout[-1500:])
    print(r.stderr[-2000:])
    check_ranks_exit(harness.rank_exit_codes(args.workdir), 143)
    return out


def check_contention_kept(h5py, out, kept):
    with h5py.File(out, "r") as f:
        check(f["run"].attrs["status"] == "interrupted", "/run status is 'interrupted'")
        check(f["sweeps/first"].attrs["status"] == "complete", "the earlier sweep stays complete")
        g = f["sweeps/cont"]
        check(g.attrs["status"] == "interrupted" and int(g.attrs["points"]) == kept and
              int(g.attrs["points_planned"]) == 4,
              f"the contention sweep keeps {kept} of 4 points: {dict(g.attrs).get('points')}")
        check(f"stopped after {kept} of 4 points" in str(g.attrs["failure"]),
              f"its failure says how many: {g.attrs['failure']}")
        check(g["time_s"].shape[:2] == (RANKS, kept), f"rows of the kept points: {g['time_s'].shape}")
        check("after" not in f["sweeps"], "no sweep after the interrupted one ran")


def check_contention_concurrent(args):
    h5py, _ = harness.h5py_and_numpy()
    out = contention_run(args, "cont:1")
    check_contention_kept(h5py, out, 2)
    r, md = report(args, out)
    check(r.returncode == 0 and "phases alone, concurrent_unbound" in md,
          f"the report reads the 2 kept phases: {(r.stdout + r.stderr)[-1000:]}")


def check_contention_alone(args):
    h5py, _ = harness.h5py_and_numpy()
    out = contention_run(args, "cont:0")
    check_contention_kept(h5py, out, 0)
    r, md = report(args, out)
    check(r.returncode == 0 and "not analysed" in md and "no points" in md,
          f"the report says the sweep with no points was not analysed: {(r.stdout + r.stderr)[-1000:]}")


def main():
    return harness.run_check({"hook_k_points": check_hook_k_points,
                              "sigterm_ranks": check_sigterm_ranks,
                              "first_point": check_first_point, "last_point": check_last_point,
                              "hung_point": check_hung_point, "force_keeps_old": check_force_keeps_old,
                              "contention_concurrent": check_contention_concurrent,
                              "contention_alone": check_contention_alone})


if __name__ == "__main__":
    sys.exit(main())
