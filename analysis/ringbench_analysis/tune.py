"""tune: `rb-analysis tune` (a kernel_tuning sweep -> tuned policy file + report) and
`rb-analysis compare-tuning` (two policy files -> changes and a verdict). docs/analysis.md.

The decisions themselves are tuning.py's; this module reads the sweep into the frame tuning
wants, collects the machine facts for the policy file and prints what the user sees.
"""
import datetime
import math
import sys

import numpy as np
import pandas as pd

from . import pointstats, reader, tuning

EXIT_OK, EXIT_CHANGED, EXIT_ERROR = 0, 1, 2
SWEEP_TYPE = "kernel_tuning"
# What the frame needs from the sweep (docs/sweeps/kernel_tuning.md); auto_path is checked
# on its own because older files lack it and the fix is different.
NEEDED_KEYS = ("block_rows", "head_dim", "dtype", "causal", "segment", "rate", "path")
NEEDED_METRICS = ("forward_time_s", "backward_time_s", "parity_ok")


class TuneError(Exception):
    """An input tune cannot work with: the message says which file and what is wrong."""


# ------------------------------------------------------------------------------ the sweep

def tuning_sweep(run, name=None):
    """The kernel_tuning sweep of a run: the one named, or the only one."""
    found = run.sweeps_of_type(SWEEP_TYPE)
    if name is not None:
        if name not in run.sweeps:
            broken = f" (unreadable: {run.unreadable[name]})" if name in run.unreadable else ""
            raise TuneError(f"{run.path}: no readable sweep named '{name}'{broken}; "
                            f"kernel_tuning sweeps: {_names(found)}")
        if run.sweeps[name].type != SWEEP_TYPE:
            raise TuneError(f"{run.path}: sweep '{name}' is a {run.sweeps[name].type} sweep, not "
                            f"{SWEEP_TYPE}; kernel_tuning sweeps: {_names(found)}")
        return run.sweeps[name]
    if len(found) == 1:
        return found[0]
    if not found:
        others = ", ".join(f"{s.name} ({s.type})" for s in run.sweeps.values()) or "none"
        unreadable = "".join(f"; '{n}' unreadable: {why}" for n, why in run.unreadable.items())
        raise TuneError(f"{run.path}: no {SWEEP_TYPE} sweep (sweeps: {others}{unreadable}); "
                        "run ringbench with a kernel_tuning sweep (docs/sweeps/kernel_tuning.md)")
    raise TuneError(f"{run.path}: {len(found)} {SWEEP_TYPE} sweeps ({_names(found)}): "
                    "pick one with --sweep NAME")


def _names(sweeps):
    return ", ".join(s.name for s in sweeps) or "none"


def _check_layout(sweep):
    if "auto_path" not in sweep.keys:
        raise TuneError(f"{sweep.where}: no points/auto_path, the path the built-in auto rule "
                        "runs on each shape (the default a tuned path must beat); the file comes "
                        "from a ringbench older than that key: run the kernel_tuning sweep again")
    missing = ([f"points/{k}" for k in NEEDED_KEYS if k not in sweep.keys]
               + [m for m in NEEDED_METRICS if m not in sweep.metrics])
    if missing:
        raise TuneError(f"{sweep.where}: lacks {', '.join(missing)} "
                        "(layout of docs/sweeps/kernel_tuning.md)")


def _block_facts(sweep, p0, p1, ranks):
    """Time, parity and per-rank spread of the points p0 .. p1-1 from every rank of `ranks` that
    measured them (status not oom), each a numpy call over the block's points."""
    world, n = sweep.world, p1 - p0
    status = (np.asarray(sweep.metrics.columns["status"].points(p0, p1), dtype=object).astype(str)
              if "status" in sweep.metrics else np.full((world, n), "ok"))
    chosen = np.isin(np.arange(world), ranks)
    measured = (status != "oom") & chosen[:, None]  # oom: the rank did not measure
    fwd, bwd = (np.asarray(sweep.metrics.columns[m].points(p0, p1), dtype=float).reshape(world, n, -1)
                for m in ("forward_time_s", "backward_time_s"))
    total = fwd + bwd
    pooled = np.swapaxes(np.where(measured[..., None], total, np.nan), 0, 1).reshape(n, -1)
    time_s = reader.row_median(pooled)
    rank_medians = reader.row_median(total.reshape(world * n, -1)).reshape(world, n)
    rank_medians = np.where(measured, rank_medians, np.nan).T
    fastest, slowest = pointstats.reduce_rows(rank_medians, "min"), pointstats.reduce_rows(rank_medians, "max")
    spread_ok = (np.isfinite(rank_medians).sum(axis=1) > 1) & (fastest > 0)
    parity = pointstats.rank_block(sweep, "parity_ok", p0, p1)
    passed = measured.any(axis=0) & ((parity == 1) | ~measured).all(axis=0)
    count, asked = measured.sum(axis=0), len(ranks)
    out = []
    for j in range(n):
        label = ("oom" if not count[j] else "FAILED" if not passed[j] else
                 "ok" if count[j] == asked else f"ok (oom on {asked - count[j]} of {asked} ranks)")
        out.append({"time_s": float(time_s[j]), "parity_ok": bool(passed[j]), "parity": label,
                    "ranks_measured": int(count[j]),
                    "rank_spread": float(slowest[j] / fastest[j]) if spread_ok[j] else math.nan})
    return out


def measurements(sweep, ranks=None):
    """The sweep as tuning.choose() wants it: one row per point (shape, block_rows, path,
    default_path), time_s = median of every measuring rank's forward + backward samples,
    parity_ok = every rank that measured the point passed; plus parity (ok | FAILED | oom) and
    rank_spread (slowest / fastest rank median) for the report. ranks: only these ranks'
    samples (one GPU's own choice: tune_gpus.py)."""
    _check_layout(sweep)
    ranks = list(range(sweep.world)) if ranks is None else list(ranks)
    facts = [f for p0, p1 in pointstats.blocks(sweep, list(NEEDED_METRICS))
             for f in _block_facts(sweep, p0, p1, ranks)]
    cols = {k: sweep.points[k].to_numpy() for k in tuning.SHAPE_KEYS + ("block_rows", "path", "auto_path")}
    rows = []
    for p in range(sweep.npoints):
        row = {k: _scalar(cols[k][p]) for k in tuning.SHAPE_KEYS}
        row["causal"] = bool(row["causal"])
        row.update(block_rows=int(cols["block_rows"][p]), path=str(cols["path"][p]),
                   default_path=str(cols["auto_path"][p]))
        row.update(facts[p])
        rows.append(row)
    if not rows:
        raise TuneError(f"{sweep.where}: the sweep has no points")
    return pd.DataFrame(rows)


def _scalar(v):
    return v.item() if hasattr(v, "item") else v


def sweep_grid(sweep):
    """The policy's grid: the batch and heads every block of the sweep computed."""
    missing = [k for k in tuning.GRID_KEYS if k not in sweep.attrs]
    if missing:
        raise TuneError(f"{sweep.where}: lacks the attribute(s) {', '.join(missing)} "
                        "(layout of docs/sweeps/kernel_tuning.md)")
    return {k: int(sweep.attrs[k]) for k in tuning.GRID_KEYS}


# ------------------------------------------------------------------------------ machine

def machine_info(run):
    """The policy file's machine mapping: rank 0's GPU, /run/libraries, version and commit."""
    gpus = [str(g) for g in run.ranks["gpu_name"]] if "gpu_name" in run.ranks else []
    archs = [str(a) for a in run.ranks["gpu_arch"]] if "gpu_arch" in run.ranks else []
    libs = run.libraries
    return {"device": run.attrs.get("backend") or None,
            "gpu": (gpus[0] or None) if gpus else None,
            "gpu_arch": (archs[0] or None) if archs else None,
            "cuda_driver": libs.get("cuda_driver"), "cuda_runtime": libs.get("cuda_runtime"),
            "cudnn": libs.get("cudnn"),
            "ringbench_version": run.attrs.get("ringbench_version") or None,
            "commit": run.attrs.get("git_commit") or None}


def run_notes(run, sweep):
    """What the user should know about the input before trusting the policy."""
    notes = []
    gpus = sorted({str(g) for g in run.ranks.get("gpu_name", [])})
    if len(gpus) > 1:
        notes.append(f"the ranks ran on different GPUs ({', '.join(gpus)}); the timings are "
                     "pooled and the policy file records rank 0's")
    if not sweep.completed:
        why = f": {sweep.failure}" if sweep.failure else ""
        cut = f"; {sweep.cut_short()}" if sweep.cut_short() else ""
        notes.append(f"sweep '{sweep.name}' status is '{sweep.status}'{why} (its points are "
                     f"used as measured; a failed parity check is never chosen{cut})")
    if run.status != "complete":
        notes.append(f"run status is '{run.status}'")
    return notes


def run_date(run):
    """The day the timings were taken (the run's start, UTC); today when the file lacks it."""
    start = str(run.attrs.get("start_time", ""))
    if len(start) >= 10:
        return start[:10]
    return datetime.datetime.now(datetime.timezone.utc).date().isoformat()


# ------------------------------------------------------------------------------ tune

def check_settings(margin, hysteresis):
    if not (math.isfinite(margin) and margin >= 1.0):
        raise TuneError(f"--safety-margin {margin:g}: must be a finite number >= 1.0 "
                        "(1.2: a path must be 20% faster than the default to replace it)")
    if hysteresis < 1:
        raise TuneError(f"--hysteresis {hysteresis}: must be >= 1 (1: no smoothing)")


def tune(path, sweep_name, margin, hysteresis, out, report_path=None):
    """Reads the sweep, decides, writes the policy (and the report); returns the summary dict
    for the screen. TuneError / reader.RingbenchFileError on unusable input."""
    check_settings(margin, hysteresis)
    run = reader.load(path)
    sweep = tuning_sweep(run, sweep_name)
    frame = measurements(sweep)
    try:
        decisions = tuning.decide(frame, None, margin, hysteresis)
    except tuning.TuningError as exc:
        raise TuneError(f"{sweep.where}: {exc}") from None
    choices = {shape: tuning.ranges_from(d) for shape, d in decisions.items()}
    machine = machine_info(run)
    policy = tuning.policy_dict(choices, machine, margin, grid=sweep_grid(sweep),
                                date=run_date(run), hysteresis=hysteresis, source=path,
                                sweep=sweep.name)
    tuning.write_policy_yaml(policy, out)
    from . import tune_gpus  # imports this module
    summary = {"policy": out, "report": report_path, "choices": choices, "plots": [],
               "notes": run_notes(run, sweep), "builtin": tuning.builtin_quality(frame),
               "per_gpu": tune_gpus.per_gpu(run, sweep, decisions, margin, hysteresis)}
    if report_path:
        from . import tune_report
        summary["plots"] = tune_report.write(report_path, run=run, sweep=sweep, frame=frame,
                                             decisions=decisions, choices=choices,
                                             policy=policy, notes=summary["notes"],
                                             per_gpu=summary["per_gpu"],
                                             builtin=summary["builtin"])
    return summary


def _range_text(r):
    rows = f"{r.rows_lo}" if r.rows_lo == r.rows_hi else f"{r.rows_lo}..{r.rows_hi}"
    speed = (f" ({r.speedup_vs_default:.2f}x)" if r.path not in (None, r.default_path)
             and math.isfinite(r.speedup_vs_default) else "")
    return f"{rows} {r.path or 'none (no path passed parity)'}{speed}"


def print_summary(summary, stream=None):
    stream = stream or sys.stdout  # looked up now: callers may have redirected it
    choices = summary["choices"]
    non_default = sum(1 for ranges in choices.values() for r in ranges
                      if r.path is not None and r.path != r.default_path)
    unusable = sum(1 for ranges in choices.values() for r in ranges if r.path is None)
    print(f"tune: {len(choices)} shape(s), {non_default} non-default choice(s)"
          + (f", {unusable} range(s) where no path passed parity" if unusable else ""),
          file=stream)
    for shape, ranges in choices.items():
        print(f"  {tuning.shape_text(shape)} (default {tuning.defaults_text(ranges)}): "
              + " | ".join(_range_text(r) for r in ranges), file=stream)
    if summary.get("builtin"):
        print(tuning.builtin_quality_text(summary["builtin"]), file=stream)
    if summary.get("per_gpu"):
        from . import tune_gpus
        print(tune_gpus.summary_line(summary["per_gpu"]), file=stream)
    print(f"policy: {summary['policy']}", file=stream)
    if summary["report"]:
        print(f"report: {summary['report']} ({len(summary['plots'])} plot(s))", file=stream)
    for note in summary["notes"]:
        print(f"warning: {note}", file=sys.stderr)


def tune_command(args):
    """`rb-analysis tune`: exit 0 written, 2 unusable input or settings."""
    try:
        summary = tune(args.file, args.sweep, args.safety_margin, args.hysteresis, args.out,
                       args.report)
    except (TuneError, reader.RingbenchFileError) as exc:
        print(f"rb-analysis tune: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as exc:
        print(f"rb-analysis tune: cannot write {exc.filename}: {exc.strerror}", file=sys.stderr)
        return EXIT_ERROR
    print_summary(summary)
    return EXIT_OK


# ------------------------------------------------------------------------------ compare

def compare_tuning_command(args):
    """`rb-analysis compare-tuning OLD NEW`: 0 same or switch points moved one grid step,
    1 a choice changed or moved further, 2 an unreadable or invalid file."""
    try:
        old, new = tuning.read_policy_yaml(args.old), tuning.read_policy_yaml(args.new)
    except tuning.TuningError as exc:
        print(f"rb-analysis compare-tuning: {exc}", file=sys.stderr)
        return EXIT_ERROR
    for diff in tuning.machine_differences(old, new):
        print(f"warning: the policies come from different machines: machine.{diff}; a changed "
              "choice may be the machine, not the code", file=sys.stderr)
    changes, code = tuning.compare_policies(old, new)
    for c in changes:
        print(c["text"])
    failing = [c for c in changes if c["kind"] == "changed choice"
               or (c["kind"] == "moved switch point" and c["steps"] > 1)]
    if not changes:
        print(f"OK: same choices ({len(new.get('rules', []))} shape(s))")
    elif code == EXIT_OK:
        print(f"OK: {len(changes)} change(s), none beyond one grid step of a switch point")
    else:
        print(f"CHANGED: {len(failing)} of {len(changes)} change(s) move a choice by more than "
              "one grid step or pick a path the old policy never chose there")
    return code
