"""Statistics of a read contention sweep (contention_read.Contention): per (point, rank), per
point and per (shape, rank), and the tuning mismatch per phase (docs/analysis.md, "Contention").
"""
import math
import warnings

import numpy as np
import pandas as pd

from .contention_read import ALONE, KEYS

CV_DDOF = 1  # CV = sample standard deviation (n - 1) / mean


def rank_stats(c):
    """One row per (point, measuring rank): n, median_s, cv, p95_s, p99_s, and slowdown (the
    median over the same rank's median of the same workload in `alone`; NaN without alone)."""
    if not len(c.samples):
        return pd.DataFrame(columns=["point", "rank", "n", "median_s", "cv", "p95_s", "p99_s",
                                     "slowdown"])
    g = c.samples.groupby(["point", "rank"])["time_s"]
    out = pd.DataFrame({"n": g.size(), "median_s": g.median(),
                        "cv": g.std(ddof=CV_DDOF) / g.mean(),
                        "p95_s": g.quantile(0.95), "p99_s": g.quantile(0.99)}).reset_index()
    out = out.join(c.points, on="point")
    shape = c.shape_keys
    alone = out[out[KEYS["phase"]] == ALONE][shape + ["rank", "median_s"]]
    alone = alone.rename(columns={"median_s": "alone_median_s"})
    out = out.merge(alone, on=shape + ["rank"], how="left")
    out["slowdown"] = out["median_s"] / out["alone_median_s"]
    return out.sort_values(["point", "rank"]).reset_index(drop=True)


def summary(c, stats=None):
    """One row per point (phase, workload, ...) in file order: the point's keys, ranks (how
    many measured), n (median samples per rank), median_s, cv, p95_s, p99_s, slowdown (median
    over ranks), worst_slowdown (largest), spread (largest / smallest rank median)."""
    stats = rank_stats(c) if stats is None else stats
    rows = []
    with warnings.catch_warnings():  # a column of NaN (no alone phase) has a NaN median
        warnings.simplefilter("ignore", RuntimeWarning)
        for p, keys in c.points.iterrows():
            rows.append(_summary_row(p, keys, stats[stats["point"] == p]))
    cols = (["point"] + list(c.points.columns) + ["ranks", "n", "median_s", "cv", "p95_s",
                                                  "p99_s", "slowdown", "worst_slowdown", "spread"])
    return pd.DataFrame(rows).reindex(columns=cols)


def _summary_row(p, keys, s):
    row = dict(keys, point=p, ranks=len(s))
    if len(s):
        row.update(n=float(s["n"].median()), median_s=s["median_s"].median(),
                   cv=s["cv"].median(), p95_s=s["p95_s"].median(), p99_s=s["p99_s"].median(),
                   slowdown=s["slowdown"].median(), worst_slowdown=s["slowdown"].max(),
                   spread=s["median_s"].max() / s["median_s"].min())
    return row


def per_rank(c, stats=None):
    """One row per (shape, measuring rank), shapes in file order: the rank's GPU (index and
    name from /ranks, "" on the host path) and, per phase, its median_s, cv and slowdown,
    as columns '<phase> median_s', '<phase> cv', '<phase> slowdown'."""
    stats = rank_stats(c) if stats is None else stats
    shape = c.shape_keys
    ranks = c.sweep.run.ranks
    gpu = {r: (int(ranks["gpu_index"][r]) if "gpu_index" in ranks and int(ranks["gpu_index"][r]) >= 0 else None,
               str(ranks["gpu_name"][r]) if "gpu_name" in ranks else "")
           for r in range(len(ranks))}
    rows = []
    keyed = [tuple(k) for k in stats[shape].itertuples(index=False)]
    for key in dict.fromkeys(keyed):  # shapes in file order
        g = stats[[k == key for k in keyed]]
        for r, mine in g.groupby("rank", sort=True):
            row = dict(zip(shape, key), rank=int(r), gpu_index=gpu.get(r, (None, ""))[0],
                       gpu_name=gpu.get(r, (None, ""))[1])
            for _, x in mine.iterrows():
                for m in ("median_s", "cv", "slowdown"):
                    row[f"{x[KEYS['phase']]} {m}"] = float(x[m])
            rows.append(row)
    return pd.DataFrame(rows)


def tuning_mismatch(c, table=None):
    """Only when points carry a `path` key: per phase, how many shapes (workload and the other
    keys, not the path) have a different fastest path than in the reference phase (alone, else
    the first phase). None without a path key. DataFrame: phase, reference, shapes,
    mismatched, fraction, changes (["attention, 8192: flash -> cudnn"]). None too when no shape
    had two or more paths timed (every file of the sweep has the path key)."""
    path = KEYS["path"]
    if path not in c.points:
        return None
    table = summary(c) if table is None else table
    shape = [k for k in c.shape_keys if k != path]
    fastest = {}
    for (ph, *key), g in table.groupby([KEYS["phase"]] + shape, sort=False):
        g = g[np.isfinite(g["median_s"].astype(float)) & (g[path].astype(str) != "")]
        if g[path].nunique() >= 2:  # a choice only where two or more paths were timed
            fastest[(ph, tuple(key))] = str(g.loc[g["median_s"].astype(float).idxmin(), path])
    if not fastest:
        return None
    ref = ALONE if ALONE in c.phases else c.phases[0]
    rows = []
    for ph in c.phases:
        changes, shapes = [], 0
        for (p2, key), best in fastest.items():
            if p2 != ph or (ref, key) not in fastest:
                continue
            shapes += 1
            if best != fastest[(ref, key)]:
                changes.append(f"{', '.join(map(str, key))}: {fastest[(ref, key)]} -> {best}")
        rows.append({"phase": ph, "reference": ref, "shapes": shapes, "mismatched": len(changes),
                     "fraction": len(changes) / shapes if shapes else math.nan, "changes": changes})
    return pd.DataFrame(rows)


def mismatch_disagreement(computed, stored):
    """Phases where the sweep's stored fraction and this analysis's differ (NaN = NaN), as
    lines; [] when they agree or either is absent (a stored one with no shapes is absent)."""
    if computed is None or stored is None:
        return []
    mine = dict(zip(computed["phase"], computed["fraction"]))
    out = []
    for ph, f in zip(stored["phase"], stored["fraction"]):
        m = mine.get(ph, math.nan)
        if not (math.isnan(f) and math.isnan(m)) and not abs(f - m) <= 1e-12:
            out.append(f"{ph}: file {f:.3g}, analysis {m:.3g}")
    return out
