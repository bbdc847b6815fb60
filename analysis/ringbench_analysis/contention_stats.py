"""Statistics of a read contention sweep (contention_read.Contention): per (point, rank), per
point and per (shape, rank), the tuning mismatch per phase, and the run's conditions the verdicts
must know (foreign CPU load, policies that placed every rank as unbound; docs/analysis.md,
"Contention").
"""
import math
import warnings

import numpy as np
import pandas as pd

from .contention_plots import phase_spans  # the spans the monitor plot shades
from .contention_read import ALONE, BOUND_PREFIX, KEYS, MONITOR, UNBOUND

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


# ---- what the run allows a verdict to say (docs/analysis.md, "Contention", Conditions) ----
FOREIGN_ATTR = "foreign_cpu_fraction"  # /run attribute: other processes' share of the nodes' CPU


def _pu_set(text):
    """'0-3,8' -> frozenset({0, 1, 2, 3, 8}); None when the text is not a PU list."""
    out = set()
    try:
        for part in str(text).replace(" ", "").split(","):
            lo, _, hi = part.partition("-")
            out.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        return None
    return frozenset(out) or None


def numa_nodes(c):
    """NUMA nodes of the run's nodes as the monitor saw them: the most numa_hit columns with a
    value on any node-watching rank; None when the file does not tell."""
    hit = c.monitor_group.get(MONITOR["numa_hit"])
    if hit is None:
        return None
    hit = np.asarray(hit, dtype=float)
    if hit.ndim != 3:
        return None
    per_rank = np.isfinite(hit).any(axis=1).sum(axis=1)  # [world]: nodes with a value
    return int(per_rank.max()) if per_rank.max() > 0 else None


def _phase_binding(c, phase):
    """{rank: (cpuset, nodeset)} of one phase, or None where a rank's points disagree."""
    rows = c.placement[c.placement[KEYS["phase"]] == phase]
    out = {}
    for r, g in rows.groupby("rank"):
        pairs = set(zip(g["cpuset"].astype(str), g["nodeset"].astype(str)))
        out[int(r)] = pairs.pop() if len(pairs) == 1 else None
    return out


def same_as_unbound(c):
    """{policy: note} of the bound policies under which every rank got the same CPUs as in
    concurrent_unbound (the same PU list, read back by the sweep) and memory that cannot differ
    either: the same memory policy, or one NUMA node (note: what made the memory the same).
    A policy with a blank or unreadable cpuset on some rank is never listed: nothing to tell."""
    unbound = _phase_binding(c, UNBOUND) if UNBOUND in c.phases else {}
    if not unbound:
        return {}
    nodes = numa_nodes(c)
    out = {}
    for ph in c.phases:
        if not ph.startswith(BOUND_PREFIX):
            continue
        mine = _phase_binding(c, ph)
        if set(mine) != set(unbound) or None in mine.values() or None in unbound.values():
            continue
        cpus = all(_pu_set(mine[r][0]) is not None and _pu_set(mine[r][0]) == _pu_set(unbound[r][0])
                   for r in unbound)
        memory_same = all(mine[r][1] == unbound[r][1] for r in unbound)
        if cpus and (memory_same or nodes == 1):
            out[ph[len(BOUND_PREFIX):]] = (
                "" if memory_same else "; its memory policy differs, but the node has one NUMA node")
    return out


def phase_cpu_busy(c):
    """{phase: node CPU busy fraction} over each phase's span (mean over CPUs and samples on
    each node-watching rank, the busiest node): every process's load, this run's ranks and
    feeders included, so not the foreign load. {} without the cpu_busy series."""
    col = MONITOR["cpu_busy"] + "_mean"
    if not len(c.monitor) or col not in c.monitor:
        return {}
    out = {}
    for ph, t0, t1 in phase_spans(c):
        m = c.monitor[(c.monitor["t_s"] >= t0) & (c.monitor["t_s"] <= t1)]
        per_node = m.groupby("rank")[col].mean().dropna()
        if len(per_node):
            out[ph] = float(per_node.max())
    return out


def conditions(c):
    """What the verdicts must know beyond the timings: foreign_cpu_fraction (the run's /run
    attribute, over the whole run: the sweep records no per-phase foreign load; None when
    absent or NaN), same_as_unbound (same_as_unbound(c)), numa_nodes and phase_cpu_busy."""
    f = c.sweep.run.attrs.get(FOREIGN_ATTR)
    try:
        f = float(f) if f is not None else None
    except (TypeError, ValueError):
        f = None
    return {"foreign_cpu_fraction": f if f is not None and math.isfinite(f) else None,
            "same_as_unbound": same_as_unbound(c), "numa_nodes": numa_nodes(c),
            "phase_cpu_busy": phase_cpu_busy(c)}
