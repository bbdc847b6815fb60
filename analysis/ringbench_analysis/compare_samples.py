"""The samples compare judges for each point of a sweep, computed a block of points at a time
(pointstats.blocks): each reduction over ranks is one numpy call over the block's points, and
the per-point arrays are cut from the result, where compare once reduced point by point.

For one metric of one point:
- a per-iteration metric ([world, P, iterations]): per iteration, the limiting rank (ranks =
  each: every rank's iterations);
- a scalar metric of a sweep with per-iteration times: the limiting rank's value spread as the
  slowest rank's per-iteration times (value x t_i / median t for times, value x median t / t_i
  for rates), so the median is the value and the spread is measured; ranks = each: each rank's
  value spread by its own times, all ranks together;
- otherwise one value per rank (p2p pairs: the two ranks of the pair).
The numbers are those of the point-by-point computation (tests/analysis/test_pointstats.py).
"""
import numpy as np

from . import pointstats, reader


def iteration_time_metric(sweep):
    """The per-iteration time metric the sweep names in its `iteration_times` attribute, where
    the file holds it per iteration, or None."""
    name = sweep.iteration_times
    return name if name and name in sweep.metrics and sweep.metrics.columns[name].ndim > 2 else None


def _split(values, keep):
    """[n, ...] values and mask -> n arrays: each row's values where kept, in row-major order."""
    counts = keep.reshape(len(keep), -1).sum(axis=1)
    return np.split(values[keep], np.cumsum(counts)[:-1]) if len(keep) else []


def _floats(sweep, name, p0, p1):
    """[world, p1 - p0, k] floats of a metric (a scalar metric: k = 1)."""
    v = np.asarray(sweep.metrics.columns[name].points(p0, p1), dtype=float)
    return v.reshape(v.shape[0], p1 - p0, -1)


def _limiting(v, d):
    """[world, n, k] -> [n, k]: per point and iteration the limiting rank's value (max for
    lower-is-better, min for rates) among the ranks with any finite value; NaN where none."""
    v = np.where(np.isfinite(v).any(axis=2, keepdims=True), v, np.nan)
    return (np.fmax if d < 0 else np.fmin).reduce(v, axis=0)  # NaN ignored, as np.nanmax


def _spread(value, t, d):
    """value x t / median t (times) or value / (t / median t) (rates), the median of each row
    of t's last axis (NaN where a row has no time)."""
    s = t / reader.row_median(t.reshape(-1, t.shape[-1])).reshape(t.shape[:-1] + (1,))
    return value[..., None] * s if d < 0 else value[..., None] / s


def _per_device(sweep, p0, p1, vals, d):
    """Per point, every rank's value spread by that rank's own per-iteration times,
    concatenated in rank order (ranks without a value or a positive median time left out)."""
    t = _floats(sweep, sweep.iteration_times, p0, p1)
    med = reader.row_median(t.reshape(-1, t.shape[-1])).reshape(t.shape[:2])
    ok = np.isfinite(vals) & (med > 0)
    x = _spread(vals, t, d)
    keep = ok[..., None] & np.isfinite(t)
    return _split(np.swapaxes(x, 0, 1), np.swapaxes(keep, 0, 1))


def _scalar(sweep, p0, p1, vals, d):
    """Per point, a scalar metric's samples: the limiting value spread by the limiting rank's
    per-iteration times, or the ranks' values where the sweep has no such times."""
    name = iteration_time_metric(sweep)
    ranks = _split(vals.T, np.isfinite(vals.T))
    if name is None:
        return ranks
    t = _limiting(_floats(sweep, name, p0, p1), -1)
    ref = pointstats.reduce_rows(vals.T, "max" if d < 0 else "min")
    med = reader.row_median(t)
    spread = _split(_spread(ref, t, d), np.isfinite(t))
    return [spread[j] if np.isfinite(ref[j]) and med[j] > 0 else ranks[j] for j in range(p1 - p0)]


def point_samples(sweep, metric, span=None):
    """The samples (module docstring) of each point of `span` (default every point)."""
    d = sweep.direction_of(metric) or -1
    each = sweep.ranks_of(metric) == "each"
    scalar = sweep.metrics.columns[metric].ndim == 2
    names = [metric] + ([iteration_time_metric(sweep)] if scalar and iteration_time_metric(sweep) else [])
    out = []
    for p0, p1 in pointstats.blocks(sweep, names, span):
        if not scalar:
            v = _floats(sweep, metric, p0, p1)
            x = np.swapaxes(v, 0, 1) if each else _limiting(v, d)
            out += _split(x, np.isfinite(x))
            continue
        vals = pointstats.rank_block(sweep, metric, p0, p1)
        out += _per_device(sweep, p0, p1, vals, d) if each and len(names) > 1 else _scalar(sweep, p0, p1, vals, d)
    return out


def samples(sweep, metric, point):
    """The samples compare judges for one metric of one point (point_samples)."""
    return point_samples(sweep, metric, (point, point + 1))[0]
