"""The report's per-rank CSVs: points.csv (every ring attention point and rank of every file)
and points_<sweep>.csv (one row per file, point and rank of each sweep name), the scalar
columns of the sweeps' tables (reader.Sweep.rows) with the file's run and world_size.

A large file's tables are never built whole: the rows are written a run of points at a time
(Sweep.scalar_row_chunks), and each run as the same bytes pandas' to_csv of the concatenated
tables wrote (columns in order of appearance, dtypes unified as pd.concat does them), but
formatted column by column: the columns that are the same on every rank of a point (sweep,
point, keys, run) once per point, and the metrics' missing values, most of a p2p_matrix
sweep's millions of rows at 1,024 ranks, as empty fields without formatting each. A column of
another dtype than those handled here leaves its run of rows to pandas.
"""
import csv
import io
import os

import numpy as np
import pandas as pd

from . import outfile, reader

# What makes the csv module quote a field under QUOTE_MINIMAL with "," and '"' (the line
# terminator's characters besides): a field without them is written as it is.
SPECIAL = (",", '"', "\r", "\n")


def csv_name(sweep):
    return "points_" + "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in sweep) + ".csv"


def write(runs, out_dir):
    """points.csv and points_<sweep>.csv in out_dir; returns the names written."""
    written = []
    ring = [(run, s) for run in runs for s in run.sweeps_of_type(reader.RING_TYPES)]
    if write_rows(os.path.join(out_dir, "points.csv"), ring):
        written.append("points.csv")
    names = list(dict.fromkeys(s.name for run in runs for s in run.sweeps.values()))
    for name in names:
        if write_rows(os.path.join(out_dir, csv_name(name)),
                      [(run, run.sweeps[name]) for run in runs if name in run.sweeps]):
            written.append(csv_name(name))
    return written


def _tagged(run, table):
    return table.assign(run=os.path.basename(run.path), world_size=run.world_size)


def write_rows(path, parts):
    """The scalar columns' rows of every (run, sweep) of parts into path; False, and no file,
    when there is no row."""
    parts = [(run, s) for run, s in parts if s.npoints * s.world]
    if not parts:
        return False
    like = pd.concat([_tagged(run, s.rows(0, 1, s.scalar_metrics())) for run, s in parts],
                     ignore_index=True)
    with outfile.replacing(path, encoding="utf-8", newline="") as f:
        like.iloc[:0].to_csv(f, index=False)
        for run, s in parts:
            per_row = {"rank"} | set(s.scalar_metrics())
            for chunk in s.scalar_row_chunks():
                chunk = _tagged(run, chunk).reindex(columns=like.columns).astype(like.dtypes.to_dict())
                text = _text(chunk, per_row, s.nrows)
                if text is None:
                    chunk.to_csv(f, index=False, header=False)
                else:
                    f.write(text)
    return True


def _text(df, per_row, world):
    """df's rows as to_csv writes them (no header), or None where a column's dtype is not one
    handled here. Rows come point by point, `world` rows each; columns not in per_row are the
    same on each point's rows, so they are formatted once per point."""
    if not df.columns.is_unique:
        return None
    groups = []  # runs of neighbouring columns of one kind: [per_row, [(cells, empty, blank)]]
    for i, c in enumerate(df.columns):
        is_row = c in per_row
        got = _cells(df[c] if is_row else df[c].iloc[::world], "," if i else "")
        if got is None:
            return None
        if groups and groups[-1][0] == is_row:
            groups[-1][1].append(got)
        else:
            groups.append([is_row, [got]])
    line = None
    for is_row, cols in groups:
        part = _join(cols)
        if not is_row:
            part = np.repeat(part, world)
        line = part if line is None else line + part
    return "\n".join(line.tolist()) + "\n" if len(df) else ""


def _join(cols):
    """Per row, the cells of neighbouring columns one after another (each with its ","); the
    rows whose cells are all empty (metrics a rank did not measure) are one shared string."""
    some = ~np.logical_and.reduce([empty for _, empty, _ in cols])
    rows = slice(None) if some.all() else np.flatnonzero(some)
    acc = cols[0][0][rows]
    for cells, _, _ in cols[1:]:
        acc = acc + cells[rows]
    if isinstance(rows, slice):
        return acc
    out = np.full(len(some), "".join(blank for _, _, blank in cols), dtype=object)
    out[rows] = acc
    return out


# str of the small non-negative integers (ranks, points, ids), without and with the ","
_SMALL = {lead: np.array([lead + str(k) for k in range(1 << 16)], dtype=object) for lead in ("", ",")}


def _ints(v, lead):
    if v.size and v.min() >= 0 and v.max() < len(_SMALL[lead]):
        return _SMALL[lead][v]
    return np.array([lead + str(x) for x in v.tolist()], dtype=object).reshape(len(v))


def _cells(s, lead):
    """(cells, empty, blank): a column's fields as to_csv writes them, each after `lead` (the
    separator), where they are empty, and an empty field; None for a dtype not handled here.
    Formats as pandas: floats as numpy's str (Python's repr for float64), missing as "", and
    other values through str and the csv module's quoting."""
    n = len(s)
    if isinstance(s.dtype, pd.Int64Dtype):
        empty = s.isna().to_numpy()
        cells = _ints(s.to_numpy(dtype=np.int64, na_value=0), lead)
        cells[empty] = lead
        return cells, empty, lead
    if not isinstance(s.dtype, np.dtype):
        return None
    v = s.to_numpy()
    if s.dtype.kind in "iu":
        return _ints(v, lead), np.zeros(n, dtype=bool), lead
    if s.dtype.kind == "b":
        return np.where(v, lead + "True", lead + "False").astype(object), np.zeros(n, dtype=bool), lead
    if s.dtype.kind == "f":
        empty = np.isnan(v)  # what pandas calls missing in a float column (inf is written)
        cells = np.full(n, lead, dtype=object)
        values = v[~empty]
        text = map(repr, values.tolist()) if s.dtype == np.float64 else values.astype(str).tolist()
        cells[~empty] = [lead + t for t in text]
        return cells, empty, lead
    if s.dtype == object:
        return _objects(v, lead)
    return None


def _objects(v, lead):
    empty = pd.isna(v)
    cells = np.full(len(v), lead, dtype=object)
    values = v[~empty]
    if pd.api.types.infer_dtype(values, skipna=False) == "string":  # each distinct text once
        codes, distinct = pd.factorize(values)
        cells[~empty] = np.array([lead + _field(x) for x in distinct] + [""], dtype=object)[codes]
    else:
        cells[~empty] = [lead + _field(x) for x in values]
    return cells, empty, lead


def _field(x):
    """One field as the csv module writes it: quoted (by the module itself) where it holds a
    delimiter, quote or line break."""
    t = x if isinstance(x, str) else str(x)
    if not any(c in t for c in SPECIAL):
        return t
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_MINIMAL).writerow([t])
    return buf.getvalue()[:-1]
