"""Per GPU: a kernel_tuning sweep run with one rank per GPU of a node times every path on every
GPU at once. The policy pools the ranks' samples; this module says whether that hides anything:
how far apart the GPUs' times of one path are (rank spread: slowest rank's median / fastest
rank's), and which path each GPU would get if it were tuned on its own samples alone, with the
same margin and hysteresis, wherever that differs from the pooled choice.
"""
import math

import numpy as np

from . import tune, tuning


def _words(shape):
    from . import tune_report  # the report's wording of a shape ("bf16, head_dim 64, causal, ...")
    return tune_report.shape_words(tuple(tune._scalar(v) for v in shape))


def _gpu_of(run, rank):
    ranks = run.ranks
    idx = int(ranks["gpu_index"][rank]) if "gpu_index" in ranks else -1
    return f"GPU {idx} (rank {rank})" if idx >= 0 else f"rank {rank}"


def spreads(frame):
    """Per path: how many points, the median and the largest rank spread, and where."""
    out = {}
    for path, g in frame.groupby("path", sort=True):
        s = g[np.isfinite(g["rank_spread"].astype(float))]
        if not len(s):
            continue
        worst = s.loc[s["rank_spread"].astype(float).idxmax()]
        out[path] = {"points": len(s), "median": float(s["rank_spread"].median()),
                     "max": float(worst["rank_spread"]),
                     "where": f"{_words(tuple(worst[k] for k in tuning.SHAPE_KEYS))}, "
                              f"{int(worst['block_rows'])} rows"}
    return out


def per_gpu(run, sweep, decisions, margin, hysteresis):
    """{} for one rank; else {"gpus": labels, "spread": spreads(), "points": grid points,
    "differences": [{shape, block_rows, pooled, per_gpu: {label: (path, speedup)}}]} where some
    GPU tuned alone would pick another path than the pooled policy."""
    if sweep.world < 2:
        return {}
    labels = [_gpu_of(run, r) for r in range(sweep.world)]
    own = []
    for r in range(sweep.world):
        try:
            own.append(tuning.decide(tune.measurements(sweep, ranks=[r]), None, margin, hysteresis))
        except tuning.TuningError:
            own.append({})  # a rank that measured nothing decides nothing
    differences, points = [], 0
    for shape, pooled in decisions.items():
        for d in pooled:
            points += 1
            theirs = {}
            for label, mine in zip(labels, own):
                at = {x.block_rows: x for x in mine.get(shape, [])}.get(d.block_rows)
                if at is not None:
                    theirs[label] = (at.path, at.speedup_vs_default)
            if any(p != d.path for p, _ in theirs.values()):
                differences.append({"shape": shape, "block_rows": d.block_rows, "pooled": d.path,
                                    "default": d.default_path,
                                    "pooled_speedup": d.speedup_vs_default, "per_gpu": theirs})
    return {"gpus": labels, "spread": spreads(tune.measurements(sweep)), "points": points,
            "differences": differences, "unit": "GPU" if labels[0].startswith("GPU") else "rank"}


def summary_line(per):
    if not per:
        return ""
    n = len(per["differences"])
    worst = max((s["max"] for s in per["spread"].values()), default=math.nan)
    u = per["unit"]
    return (f"per {u} ({len(per['gpus'])} ranks): {per['points'] - n} of {per['points']} grid "
            f"point(s) get the same path on every {u} tuned alone; largest rank spread {worst:.3f}")


def _speed(path, speedup, default):
    return path if path == default or not math.isfinite(speedup) else f"{path} ({speedup:.2f}x)"


def report_lines(per):
    """The tuning report's "Per GPU" section (Markdown lines)."""
    if not per:
        return []
    u = per["unit"]
    md = [f"## Per {u}", "",
          f"{len(per['gpus'])} ranks" + (", one per GPU," if u == "GPU" else "")
          + " timed every path at once. Rank spread = the slowest rank's median / the fastest rank's, per point.", "",
          "| path | points | median rank spread | largest | where |", "|---|---|---|---|---|"]
    for path, s in per["spread"].items():
        md.append(f"| {path} | {s['points']} | {s['median']:.3f} | {s['max']:.3f} | {s['where']} |")
    agree = (f"Each {u} tuned on its own samples alone, with the same margin and hysteresis: "
             f"**{per['points'] - len(per['differences'])} of {per['points']}** grid points get the "
             f"pooled policy's path on every {u}.")
    if not per["differences"]:
        return md + ["", agree, ""]
    md += ["", agree + f" Where a {u} alone would choose otherwise (speedup against the shape's "
           "default in brackets):", "",
           "| shape | block rows | policy (pooled) | " + " | ".join(per["gpus"]) + " |",
           "|---|---|---|" + "---|" * len(per["gpus"])]
    for d in per["differences"]:
        cells = [_speed(*d["per_gpu"][g], d["default"]) if g in d["per_gpu"] else "-" for g in per["gpus"]]
        md.append(f"| {_words(d['shape'])} | {d['block_rows']} | "
                  f"{_speed(d['pooled'], d['pooled_speedup'], d['default'])} | " + " | ".join(cells) + " |")
    return md + [""]
