"""A ring_attention point's per-step metrics and their sums over the ring steps, whatever the
file's layout (docs/sweeps/ring_attention.md):

  schema 4   each ring size's steps in a table of their own, steps/R<R>, [rows, its points, R]:
             every rank up to 8 ranks, above that 8 ranks per point (the slowest first, row_rank
             says which); each rank's sums over the steps in the sweep's table
             (forward_compute_s, forward_wait_s, backward_compute_s, backward_wait_s), whose
             over_ranks say the sums over every rank where the table keeps a sample;
  schema 2, 3  [world, P, largest ring] step datasets in the sweep's table, padded past each
             point's ring (NaN, -1).
"""
import numpy as np

from . import reader

# Schema 4's per-rank sums over the ring steps, by the step metric they add up.
SUMS = {"step_compute_s": "forward_compute_s", "step_wait_s": "forward_wait_s",
        "backward_step_compute_s": "backward_compute_s", "backward_step_wait_s": "backward_wait_s"}


def _step_tables(sweep):
    return [t for name, t in sweep.subtables.items() if name.startswith("steps/")]


def _table_of(sweep, p):
    """(the step table, its row of sweep point p) in a schema-4 file, else (None, None)."""
    if "ring_size" not in sweep.points:
        return None, None
    t = sweep.subtables.get(f"steps/R{int(sweep.points['ring_size'].iloc[p])}")
    if t is None or "sweep_point" not in t.points:
        return None, None
    rows = np.flatnonzero(t.points["sweep_point"].to_numpy() == p)
    return (t, int(rows[0])) if rows.size else (None, None)


def has_steps(sweep, names=("step_compute_s",)):
    """Whether the sweep records these per-step metrics (either layout)."""
    if all(n in sweep.metrics for n in names):
        return True
    tables = _step_tables(sweep)
    return bool(tables) and all(n in t.metrics for t in tables for n in names)


def _as_float(table, name, values):
    """A metric's values as float, an integer metric's -1 (none) as NaN."""
    v = np.asarray(values, dtype=float)
    if table.metrics.columns[name].dtype.kind in "iu":
        v[v == -1] = np.nan
    return v


def point_steps(sweep, p, names):
    """(ranks, {name: [rows, R] float array}) of point p: the world rank of each row (-1: an
    empty row of a sample) and each metric's steps (NaN where a rank has none); None when the
    file has none of these metrics. Rows: schema 4's step table's (every rank, or its sample),
    older files' every rank, the padding past the point's ring cut off."""
    t, q = _table_of(sweep, p)
    if t is not None:
        got = {n: _as_float(t, n, t.metrics[n][:, q]) for n in names if n in t.metrics}
        return (t.ranks_at(q), got) if got else None
    R = int(sweep.points["ring_size"].iloc[p]) if "ring_size" in sweep.points else None
    got = {n: _as_float(sweep, n, sweep.metrics[n][:, p])[:, :R] for n in names if n in sweep.metrics}
    return (sweep.ranks_at(p), got) if got else None


def rank_sums(sweep, p, name):
    """Each row's sum over the ring steps of a step metric at point p (NaN: a row without one),
    the rows of the sweep's table; None when the file has neither the sum nor the steps."""
    if SUMS.get(name) in sweep.metrics:
        return reader.numbers(sweep.metrics[SUMS[name]][:, p])
    if name not in sweep.metrics:
        return None
    v = np.asarray(sweep.metrics[name][:, p], dtype=float).reshape(sweep.nrows, -1)
    has = np.isfinite(v).any(axis=1)
    return np.where(has, np.nansum(v, axis=1), np.nan)


def total(sweep, p, name):
    """A step metric summed over every rank and step at point p; None when not recorded (or
    no rank has it)."""
    if SUMS.get(name) in sweep.metrics:
        s = sweep.over_ranks(SUMS[name], p)["sum"]
        return float(s) if np.isfinite(s) else None
    if name not in sweep.metrics:
        return None
    v = np.asarray(sweep.metrics[name][:, p], dtype=float).ravel()
    v = v[np.isfinite(v)]
    return float(v.sum()) if v.size else None
