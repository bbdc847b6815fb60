#!/usr/bin/python3
"""How far the dry-run's time estimate is from what a run took (issue #30: an estimate worth
putting in #SBATCH --time). For each ringbench output file: its own config (stored in /run),
planned again with `ringbench CONFIG --dry-run --world-size W --ranks-per-node K` at the file's
world size and node layout, each sweep's estimate set against the sweep's measured wall time.

    launch/estimate_error.py RUN.h5 [RUN.h5 ...] [--ringbench build/ringbench] [--markdown]
                             [--max-error 25] [--min-seconds 1] [--estimate-from EARLIER.h5]

error = (estimate - measured) / measured: negative where the estimate is low (a job that would
hit its time limit). With --max-error PCT, exit 1 when any sweep's |error| is larger; exit 2 when
a file is not a complete ringbench output or the dry-run fails. --min-seconds S leaves sweeps
that took less than S out of the verdict and the largest error (listed still): the plan prints
times under a second to two decimals, so a 0.02 s sweep is 25 % off by rounding alone.

--estimate-from EARLIER.h5 plans with `--estimate-from EARLIER.h5` (an earlier run's measured
times, e.g. of the same config) instead of the cost model alone. Where both the plan and the file
split a sweep by phase (wall_s and phase_*_s: set-up, warm-up, timed, check, calibration,
write; and the sweep's time outside its points), a second table gives each phase's error.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import h5py
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def seconds_of(duration):
    """The dry-run's duration text (progress.cpp duration_text) in seconds."""
    m = re.fullmatch(r"(\d+) h (\d+) min", duration)
    if m:
        return 3600 * int(m[1]) + 60 * int(m[2])
    m = re.fullmatch(r"(\d+) min (\d+) s", duration)
    if m:
        return 60 * int(m[1]) + int(m[2])
    m = re.fullmatch(r"([\d.]+) s", duration)
    if m:
        return float(m[1])
    raise ValueError(f"not a duration: {duration!r}")


def read_run(path):
    """(config text, world size, ranks per node, GPU name, the run's --only, {sweep: measured s})."""
    with h5py.File(path, "r") as f:
        run = f["run"].attrs
        if text(run.get("status", "")) != "complete":
            raise ValueError(f"{path}: the run is not complete (status {text(run.get('status', '?'))})")
        world = int(run["world_size"])
        nodes = max(int(run.get("node_count", 1)), 1)
        gpu = (text(f["ranks/gpu_name"][0]) if "ranks/gpu_name" in f else "") or "host"
        measured = {name: float(g.attrs["wall_time_s"]) for name, g in f["sweeps"].items()
                    if text(g.attrs.get("status", "")) == "complete" and "wall_time_s" in g.attrs}
        only = re.findall(r"--only[ =](\S+)", text(run.get("command_line", "")))
        return text(run["config_text"]), world, world // nodes, gpu, only, measured


PHASES = ("setup", "warmup", "timed", "check", "calibration", "write")


def measured_phases(path):
    """{sweep: {phase: s}}: per point the slowest rank's phases (largest wall_s), summed
    over the points, and `outside`, the sweep's wall time less its points'. As the dry-run
    (src/app/estimate_phases.cpp): the slowest ranks' walls overlap (the ranks start a point at
    different times), so the phases are scaled to the busiest rank's sum of wall_s where
    they add up to more. Sweeps without the phase columns are left out."""
    out = {}
    with h5py.File(path, "r") as f:
        for name, g in f["sweeps"].items():
            if "wall_s" not in g or "wall_time_s" not in g.attrs:
                continue
            wall = np.asarray(g["wall_s"][()], dtype=float)
            filled = np.where(np.isnan(wall), -np.inf, wall)
            slowest = np.argmax(filled, axis=0)
            cols = np.arange(wall.shape[1])
            walls = float(np.sum(np.where(np.isfinite(filled[slowest, cols]), filled[slowest, cols], 0)))
            busiest = float(np.max(np.nansum(wall, axis=1)))
            scale = busiest / walls if walls > busiest > 0 else 1.0
            phases = {p: scale * float(np.nansum(np.asarray(g[f"phase_{p}_s"][()])[slowest, cols]))
                      for p in PHASES}
            phases["outside"] = max(0.0, float(g.attrs["wall_time_s"]) - min(walls, busiest))
            out[name] = phases
    return out


def phase_table(lines):
    """{sweep: {phase: s}} from the dry-run's `by phase` table (absent: {})."""
    start = next((i for i, line in enumerate(lines) if line.startswith("by phase")), None)
    if start is None:
        return {}
    head = next(i for i in range(start + 1, len(lines)) if lines[i].split()[:1] == ["sweep"])
    names = lines[head].split()
    out = {}
    for line in lines[head + 2:]:  # below the header and its units line
        cols = line.split()
        if not cols or line.startswith("suggested:") or len(cols) != len(names):
            break
        out[cols[0]] = {n: float(v) for n, v in zip(names[1:], cols[1:])}
    return out


def planned(ringbench, config_text, world, per_node, only, earlier=None):
    """({sweep: estimated s}, {sweep: {phase: estimated s}}) from the dry-run's tables. The
    config is written beside links to inputs/, so the files it names relative to itself
    (policies) resolve as in the repository."""
    with tempfile.TemporaryDirectory() as d:
        for name in os.listdir(os.path.join(ROOT, "inputs")):
            os.symlink(os.path.join(ROOT, "inputs", name), os.path.join(d, name))
        cfg = os.path.join(d, "estimate_error_config.yaml")
        with open(cfg, "w") as out:
            out.write(config_text)
        r = subprocess.run([ringbench, cfg, "--dry-run", "--world-size", str(world),
                            "--ranks-per-node", str(per_node), "--wide"]
                           + [a for o in only for a in ("--only", o)]
                           + (["--estimate-from", os.path.abspath(earlier)] if earlier else []),
                           capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise ValueError(f"the dry-run failed (exit {r.returncode}): {r.stderr.strip()[-500:]}")
    lines = r.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.split()[:2] == ["sweep", "type"])
    estimates = {}
    for line in lines[head + 1:]:
        if line.startswith("total:"):
            break
        cols = re.split(r"\s{2,}", line.strip())
        estimates[cols[0]] = seconds_of(cols[5])
    return estimates, phase_table(lines)


def rows_of(path, ringbench, earlier=None):
    """(sweep rows, phase rows): each sweep's and, where both sides split it, each phase's
    measured and estimated seconds and error."""
    config_text, world, per_node, gpu, only, measured = read_run(path)
    estimates, est_phases = planned(ringbench, config_text, world, per_node, only, earlier)
    base = os.path.basename(path)
    rows = [(base, gpu, world, name, measured[name], estimates[name],
             (estimates[name] - measured[name]) / measured[name])
            for name in measured if name in estimates and measured[name] > 0]
    phase_rows = []
    for name, phases in measured_phases(path).items():
        for phase, m in phases.items():
            e = est_phases.get(name, {}).get(phase)
            if e is not None:
                phase_rows.append((base, name, phase, m, e, (e - m) / m if m > 0 else float("nan")))
    return rows, phase_rows


def print_table(head, cells, markdown):
    if markdown:
        print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
        for c in cells:
            print("| " + " | ".join(c) + " |")
    else:
        widths = [max(len(r[i]) for r in [head] + cells) for i in range(len(head))]
        for c in [head] + cells:
            print("  ".join(v.ljust(w) for v, w in zip(c, widths)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--ringbench", default=os.path.join(ROOT, "build", "ringbench"))
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    ap.add_argument("--max-error", type=float, help="exit 1 when a sweep's |error| exceeds PCT")
    ap.add_argument("--min-seconds", type=float, default=0.0,
                    help="leave sweeps shorter than S out of the largest error and --max-error")
    ap.add_argument("--estimate-from", metavar="EARLIER.h5",
                    help="plan with --estimate-from EARLIER.h5; per-phase errors where recorded")
    args = ap.parse_args()
    rows, phase_rows = [], []
    for path in args.files:
        try:
            r, p = rows_of(path, args.ringbench, args.estimate_from)
            rows += r
            phase_rows += p
        except (OSError, KeyError, ValueError, StopIteration, subprocess.TimeoutExpired) as e:
            print(f"estimate_error: {path}: {e}", file=sys.stderr)
            return 2
    head = ("file", "GPU", "ranks", "sweep", "measured s", "estimate s", "error")
    cells = [(f, g, str(w), s, f"{m:.1f}", f"{e:.1f}", f"{100 * x:+.0f} %") for f, g, w, s, m, e, x in rows]
    print_table(head, cells, args.markdown)
    if phase_rows:
        print()
        print_table(("file", "sweep", "phase", "measured s", "estimate s", "error"),
                    [(f, s, p, f"{m:.3f}", f"{e:.3f}", "-" if np.isnan(x) else f"{100 * x:+.0f} %")
                     for f, s, p, m, e, x in phase_rows], args.markdown)
    judged = [r for r in rows if r[4] >= args.min_seconds]
    worst = max((abs(r[6]) for r in judged), default=0.0)
    shorter = f" ({len(rows) - len(judged)} under {args.min_seconds:g} s left out)" if len(judged) < len(rows) else ""
    print(f"{len(rows)} sweep(s); largest |error| {100 * worst:.0f} %{shorter}")
    return 1 if args.max_error is not None and 100 * worst > args.max_error else 0


if __name__ == "__main__":
    sys.exit(main())
