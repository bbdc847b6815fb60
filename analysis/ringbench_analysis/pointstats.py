"""Per-point statistics over ranks for every point of a sweep at once: a block of points of the
reader's cache at a time (reader.Column.points), each statistic one numpy call over the block's
points instead of a Python loop calling np.median / np.percentile point by point.

The numbers are those of the point-by-point code (Sweep.rank_values and its reductions,
results._slowest_samples and cv): numpy's median, percentiles, mean and standard deviation
along the last axis of an array are the one-dimensional computation repeated per row, so rows
holding the same number of finite values are computed together (reader.finite_groups) and
give the same bits as each row alone. tests/analysis/test_pointstats.py holds them to that on
a file with uneven ranks and iterations and NaNs.
"""
import numpy as np

from . import reader

REDUCE = {"max": np.max, "min": np.min, "mean": np.mean, "sum": np.sum}


def span_of(sweep, span=None):
    """(p0, p1): the points a statistic is asked for, every point by default."""
    return (0, sweep.npoints) if span is None else span


def blocks(sweep, names, span=None):
    """(p0, p1) runs of the points of `span`, each within one cache block of every metric of
    `names`, so a pass over a sweep holds a block per metric, never a whole metric."""
    first, end = span_of(sweep, span)
    per = min([sweep.metrics.columns[n].points_per_block() for n in names] or [end - first or 1])
    return [(p0, min(end, p0 + per)) for p0 in range(first, end, per)]


def rank_block(sweep, name, p0, p1):
    """[world, p1 - p0] floats: each rank's value at each point (an array metric: the rank's
    median over its inner axes), NaN where a rank has none: Sweep.rank_values before it drops
    the ranks without a value."""
    v = sweep.metrics.columns[name].points(p0, p1)
    if v.ndim == 2:
        return reader.numbers(v.ravel()).reshape(v.shape)
    world, n = v.shape[:2]
    return reader.row_median(np.asarray(v, dtype=float).reshape(world * n, -1)).reshape(world, n)


def reduce_rows(values, how):
    """[n, k] -> [n]: REDUCE[how] of each row's finite values, NaN for a row without one."""
    out = np.full(len(values), np.nan)
    for rows, finite in reader.finite_groups(values):
        out[rows] = REDUCE[how](finite, axis=1)
    return out


def over_ranks(sweep, name, how, positive=False, span=None):
    """Per point of `span` (default every point): the max / min / mean / sum of the ranks'
    values (rank_values; positive: only those > 0), NaN where no rank has one or the sweep
    lacks the metric."""
    first, end = span_of(sweep, span)
    out = np.full(end - first, np.nan)
    for p0, p1 in blocks(sweep, [name], span) if name in sweep.metrics else ():
        v = rank_block(sweep, name, p0, p1).T
        if positive:
            v = np.where(v > 0, v, np.nan)
        out[p0 - first:p1 - first] = reduce_rows(v, how)
    return out


def slowest_rows(block, higher_is_worse=True):
    """[world, n, k] samples -> [n, k]: per point the samples of the rank whose median is worst
    (results._slowest_samples: the first such rank, as np.nanargmax), all NaN where no rank
    has a sample."""
    world, n = block.shape[:2]
    block = np.asarray(block, dtype=float).reshape(world, n, -1)
    meds = reader.row_median(block.reshape(world * n, -1)).reshape(world, n)
    have = np.isfinite(meds).any(axis=0)
    worst = np.where(np.isfinite(meds), meds, -np.inf if higher_is_worse else np.inf)
    pick = np.argmax(worst, axis=0) if higher_is_worse else np.argmin(worst, axis=0)
    rows = block[pick, np.arange(n)]
    rows[~have] = np.nan
    return rows


def sample_stats(rows):
    """Per row of [n, k] samples (NaN: none): {"n", "p25", "p75", "cv"} of its finite values,
    as np.percentile and results.cv give them for each row alone (NaN without samples; cv NaN
    below two samples or a zero mean)."""
    n = len(rows)
    out = {"n": np.zeros(n, dtype=np.int64), "p25": np.full(n, np.nan), "p75": np.full(n, np.nan),
           "cv": np.full(n, np.nan)}
    for idx, a in reader.finite_groups(rows):
        out["n"][idx] = a.shape[1]
        out["p25"][idx] = np.percentile(a, 25, axis=1)
        out["p75"][idx] = np.percentile(a, 75, axis=1)
        if a.shape[1] >= 2:
            mean = a.mean(axis=1)
            with np.errstate(divide="ignore", invalid="ignore"):
                out["cv"][idx] = np.where(mean == 0, np.nan, a.std(axis=1, ddof=1) / mean)
    return out


def joined(parts, npoints):
    """sample_stats of consecutive blocks as one (no samples at all: npoints without any)."""
    if not parts:
        return sample_stats(np.full((npoints, 0), np.nan))
    return {k: np.concatenate([x[k] for x in parts]) for k in parts[0]}


def slowest_stats(sweep, name, higher_is_worse=True, span=None):
    """sample_stats of each point's (of `span`) slowest rank's samples of an array metric
    ([world, P, k]); no samples at any point where the sweep lacks the metric."""
    first, end = span_of(sweep, span)
    return joined([sample_stats(slowest_rows(sweep.metrics.columns[name].points(p0, p1), higher_is_worse))
                   for p0, p1 in (blocks(sweep, [name], span) if name in sweep.metrics else ())], end - first)


def first_text(sweep, name, skip=("",)):
    """[P] str: per point the first rank's text of a text metric not in `skip` ("" where none),
    as Sweep.point_status and the noise class read one point; "" everywhere without the metric."""
    out = np.full(sweep.npoints, "", dtype=object)
    for p0, p1 in blocks(sweep, [name]) if name in sweep.metrics else ():
        v = np.asarray(sweep.metrics.columns[name].points(p0, p1), dtype=object).astype(str)
        keep = np.ones(v.shape, dtype=bool)
        for s in skip:
            keep &= v != s
        said = keep.any(axis=0)
        out[p0:p1][said] = v[keep.argmax(axis=0), np.arange(p1 - p0)][said]
    return [str(s) for s in out]


def point_keys(sweep):
    """[P] dicts {key: plain Python value} of every point (reader._py of each key's value)."""
    cols = {k: [reader._py(v) for v in sweep.points[k].to_numpy()] for k in sweep.keys}
    return [{k: cols[k][p] for k in sweep.keys} for p in range(sweep.npoints)]
