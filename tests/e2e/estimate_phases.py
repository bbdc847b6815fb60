#!/usr/bin/env python3
"""Issue #30 item 3: each ring_attention point's phases in the file, and --estimate-from built
on them. Two checks (one CTest entry each, tests/e2e.cmake):

  columns  one 2-rank host run: wall_s and every phase_*_s column there, [ranks, P],
           finite, each rank's phases summing to its wall_s, a rank's points within the
           sweep's wall_time_s; the dry-run from that file splits the sweep by phase, the phases
           and the time outside the points summing to the file's wall time, and a plan of twice the
           iterations doubles the timed phase (structure: no timing is asserted).
  rerun    the same config run twice: launch/estimate_error.py --estimate-from the first file,
           on the first file every sweep's and phase's error within the plan's rounding (the
           estimate of a re-run is what the earlier run took, phase by phase), on the second the
           ring sweep within a factor RERUN_FACTOR (loose: on the loaded 2-core host VM one run
           of inputs/small.yaml took twice the time of the one before; docs/performance.md has
           the figures), every error printed, a row per phase.

Exit 0 = pass, 1 = fail, 77 = skipped.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import check, ringbench_on, run  # noqa: E402
import harness  # noqa: E402

h5py, np = harness.h5py_and_numpy()

PHASES = ("setup", "warmup", "timed", "check", "calibration", "write")
# estimate / measured of the ring sweep's re-run from the first run's file, between
# 1 / RERUN_FACTOR and RERUN_FACTOR. On the 2-core host VM at steady load within 11 %, but
# +108 % when the load changed between the runs (and the memory sweep -88 % under a parallel
# build): the deterministic check is the first file's own estimate, this one only catches a
# gross loss.
RERUN_FACTOR = 10.0
# The plan prints a sweep's time to 2 significant digits or so (duration_text): 5 % at most.
ROUNDING = 0.05
CONFIG = """
run: {{name: {stem}, output_dir: {out}}}
backend: host
binding: {{policy: none}}
sweeps:
  - type: ring_attention
    name: ra
    batch: 1
    seq_lengths: [256]
    num_heads: 2
    head_dim: 32
    dtype: fp32
    causal: true
    layout: [contiguous, zigzag]
    ring_sizes: [1, 2]
    warmup: 2
    iterations: {iterations}
    backward: true
  - {{type: memory, name: mem, bytes: 8MiB, iterations: 10}}
"""


def config(args, stem, iterations=5):
    return CONFIG.format(stem=stem, out=args.workdir, iterations=iterations)


def plan(args, text, stem, earlier):
    """The dry-run of config `text` at 2 ranks from `earlier`: (stdout, {sweep: {phase: s}})."""
    cfg = os.path.join(args.workdir, stem + ".yaml")
    with open(cfg, "w") as fh:
        fh.write(text)
    r = run([args.ringbench, cfg, "--dry-run", "--world-size", "2", "--wide",
             "--estimate-from", earlier])
    print(r.stdout, r.stderr)
    check(r.returncode == 0, f"the dry-run of {stem} succeeds")
    sys.path.insert(0, os.path.join(args.source, "launch"))
    import estimate_error  # noqa: E402  (its parser of the plan's phase table)
    return r.stdout, estimate_error.phase_table(r.stdout.splitlines())


def columns(args):
    res, out = ringbench_on(args, 2, config(args, "first"), "first")
    if not check(res.returncode == 0, "the run succeeds"):
        return
    with h5py.File(out, "r") as f:
        g = f["sweeps/ra"]
        P = int(g.attrs["points"])
        have = all(f"phase_{p}_s" in g for p in PHASES) and "wall_s" in g
        if not check(have, "wall_s and phase_{" + ",".join(PHASES) + "}_s are in the file"):
            return
        wall = g["wall_s"][()]
        phases = np.stack([g[f"phase_{p}_s"][()] for p in PHASES])
        check(wall.shape == (2, P) and phases.shape == (len(PHASES), 2, P), f"[ranks, P]: {wall.shape}")
        check(np.all(np.isfinite(phases)) and np.all(phases >= 0), "every phase finite and >= 0")
        gap = np.abs(phases.sum(axis=0) - wall)
        check(np.all(gap <= 1e-3 + 0.01 * wall), f"the phases sum to wall_s (gap {gap.max():.2e} s)")
        check(np.all(phases[PHASES.index("timed")] > 0) and np.all(phases[PHASES.index("check")] > 0),
              "the timed iterations and the parity check took time at every point")
        for p in PHASES:
            check(g[f"phase_{p}_s"].attrs["units"] in (b"s", "s"), f"phase_{p}_s in seconds")
        sweep_wall = float(g.attrs["wall_time_s"])
        # One rank's points run one after another inside the sweep (the slowest ranks' of each
        # point may add up to more: the ranks start a point at different times).
        check(np.all(wall.sum(axis=1) <= sweep_wall * 1.01), "each rank's points fit in the sweep's wall time")
    stdout, by_phase = plan(args, config(args, "first"), "same", out)
    if not check("ra" in by_phase, "the plan splits the ring sweep by phase"):
        return
    ra = by_phase["ra"]
    total = sum(ra[p] for p in PHASES) + ra["outside"] + ra["model"]
    check(abs(total - sweep_wall) <= 0.01 + 0.01 * sweep_wall,
          f"phases + outside = the file's wall time: {total:.3f} vs {sweep_wall:.3f} s")
    check(ra["model"] == 0 and "mem" not in by_phase, "every ring point matched; memory has no phases")
    slowest = wall.argmax(axis=0)
    walls = wall.max(axis=0).sum()
    scale = min(1.0, wall.sum(axis=1).max() / walls)  # the slowest ranks' walls overlap
    timed = scale * phases[PHASES.index("timed")][slowest, np.arange(P)].sum()
    check(abs(ra["timed"] - timed) <= 1e-3 * P, f"the timed phase is the slowest ranks': {ra['timed']} vs {timed}")
    _, doubled = plan(args, config(args, "first", iterations=10), "doubled", out)
    got = doubled.get("ra", {}).get("timed", -1)
    check(abs(got - 2 * ra["timed"]) <= 2e-3, f"twice the iterations, twice the timed phase: {got} vs {ra['timed']}")
    check(abs(doubled.get("ra", {}).get("check", -1) - ra["check"]) <= 1e-3, "the check phase unchanged")


def errors_of(args, measured, earlier):
    """estimate_error.py on `measured` from `earlier`: ({sweep: error %}, {phase: (m, e)} of ra)."""
    r = run([sys.executable, os.path.join(args.source, "launch", "estimate_error.py"), measured,
             "--estimate-from", earlier, "--ringbench", args.ringbench])
    print(r.stdout, r.stderr)
    check(r.returncode == 0, "estimate_error.py succeeds")
    base = re.escape(os.path.basename(measured))
    sweeps = {m.group(1): float(m.group(2)) for m in
              re.finditer(base + r"\s+host\s+2\s+(\S+)\s+\S+\s+\S+\s+([+-]\d+) %", r.stdout)}
    phases = {m.group(1): (float(m.group(2)), float(m.group(3))) for m in
              re.finditer(base + r"\s+ra\s+(\w+)\s+([\d.]+)\s+([\d.]+)", r.stdout)}
    return sweeps, phases


def rerun(args):
    runs = []
    for stem in ("first", "second"):
        res, out = ringbench_on(args, 2, config(args, "first"), stem)
        if not check(res.returncode == 0, f"run {stem} succeeds"):
            return
        runs.append(out)
    sweeps, phases = errors_of(args, runs[0], runs[0])
    check(set(sweeps) == {"ra", "mem"}, f"an error for each sweep: {sweeps}")
    # The memory sweep takes ~10 ms: the plan prints it to 10 ms, so only ra's error is the
    # estimator's (its phases are checked to the millisecond below).
    check(abs(sweeps.get("ra", 100.0)) <= 100 * ROUNDING,
          f"the first run estimated from itself: ra's own time, to the plan's rounding: {sweeps}")
    check(set(phases) == set(PHASES) | {"outside"}, f"a row per phase: {sorted(phases)}")
    check(all(abs(m - e) <= 2e-3 for m, e in phases.values()), f"each phase as measured: {phases}")
    sweeps, _ = errors_of(args, runs[1], runs[0])
    check(set(sweeps) == {"ra", "mem"}, f"an error for each sweep of the re-run: {sweeps}")
    ratio = 1 + sweeps.get("ra", -100) / 100
    check(1 / RERUN_FACTOR <= ratio <= RERUN_FACTOR,
          f"ra: re-run estimated within a factor {RERUN_FACTOR:g}: {sweeps.get('ra')} %")


if __name__ == "__main__":
    sys.exit(harness.run_check({"columns": columns, "rerun": rerun}))
