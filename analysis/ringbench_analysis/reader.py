"""Loads ringbench HDF5 files (schema_version 4; 2 and 3 too, 2 through legacy.py) into pandas
DataFrames: one row per (point, rank).

    from ringbench_analysis import reader
    run = reader.load("results/small_20261122T120000Z.h5")
    print(run.machine_summary())
    t = run.table("ring")                  # a sweep by name, or run.table(type="ring_attention")
    print(t[t["rank"] == 0][["seq_len", "ring_size", "total_tflops"]])
    ring = run.sweeps["ring"]
    ring.array("total_time_s")             # the dataset itself: [world, points, iterations]

The layout comes from the file (docs/hdf5-schema.md), not from dataset names:

    /sweeps/<name>/points/<key>   [P]              role=key     which point p is
    /sweeps/<name>/<metric>       [world, P, ...]  role=metric  what rank r measured at point p
    /sweeps/<name>/<sub>/...      the same layout one level down (a sub-table, e.g. model/,
                                  or a group of them: a ring sweep's steps/R<R>)

Rows (schema 4): a table on more ranks than it keeps has a sample of ranks per point instead of
every rank: its metrics are [rows, P, ...], row_rank [rows, P] says which rank each row holds
(PointsTable.row_rank; -1: an empty row) and over_ranks/ the min, mean, max and sum over every
rank (PointsTable.over_ranks). Row indexing (rank_values, metrics[:, p]) sees the sample.

A sweep's table has the columns sweep, point (0..P-1), rank, every key, and every metric: a
scalar metric is one number (or text) per row; an array metric ([world, P, k, ...]) is an
object column holding one numpy array per row (per-iteration samples, ring steps). Missing
values stay missing: NaN for numbers, <NA> for integer metrics (the file's -1), "" for text.
Every column keeps its dataset's units and description (Sweep.units, Sweep.descriptions), and
every metric how it is judged (Sweep.judging: direction, headline, rank reduction, noise class,
inner axis; read by compare, verdict and the report, never restated by them).

Memory: a file is never read whole (one of 1,024 ranks holds GBs). Keys and metadata are read
when the file is loaded; a metric is read when used, a block of points ([world, p0:p1, ...])
at a time, into one least-recently-used cache of CACHE_BYTES for the whole process, whose
blocks are dropped when it is full (docs/analysis.md#large-files). Sweep.metrics[name] is the
metric's numpy array where it fits in one block, else a Column that reads the blocks its
indexing needs (column[:, p], column[r, p], column[:, p0:p1]); the values are the same.
"""
import itertools
import os
import re
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Mapping

import numpy as np
import pandas as pd

from . import filecheck, legacy

# The writer may still hold a file open (a run in progress, a flush-then-read); reading must
# not fail on HDF5's file lock.
os.environ.setdefault("HDF5_USE_FILE_LOCKING", "FALSE")

try:
    import h5py
except ImportError as exc:  # pragma: no cover - depends on the machine
    raise ImportError("ringbench_analysis needs h5py (Debian: apt-get install python3-h5py); "
                      "run it with /usr/bin/python3 or a Python that has h5py") from exc

SCHEMA_VERSION = 4
# Older layouts this reader still reads: schema 2 (no column descriptions; legacy.py supplies
# them) and 3 (every rank a row, ring steps padded to the largest ring: steps.py reads both), so a
# nightly baseline written before schema 4 still compares.
READABLE_SCHEMAS = (2, 3, 4)
# What a sampled table's over_ranks/ datasets hold, row by row.
OVER_RANKS = ("min", "mean", "max", "sum")

RING_TYPES = ("ring_attention",)
COLLECTIVE_TYPES = ("collectives",)
P2P_TYPES = ("p2p_matrix",)
PINGPONG_TYPES = ("host_pingpong",)
CONTENTION_TYPES = ("contention",)

# Columns every table has besides its keys and metrics.
ROW_COLUMNS = ("sweep", "point", "rank")

# Units of rates (B/s, TFLOP/s, Hz): how fmt prints a value. Whether a metric is better higher
# is the file's word (its `direction` attribute), not its units'.
RATE_UNITS = ("B/s", "TFLOP/s", "Hz")
# A metric dataset's attributes that say how it is judged (schema 3; docs/hdf5-schema.md).
JUDGING_ATTRS = ("direction", "judged", "ranks", "noise", "inner_axis")
DIRECTION = {"higher": +1, "lower": -1, "none": 0}

# The cache of metric blocks, for the whole process (RB_ANALYSIS_CACHE_MB sets another size),
# and how many blocks it holds at least: a loop over points reads a few metrics at a time, and
# each must keep its block while the others are read. A str value costs its object besides the
# fixed-length bytes (the size of CPython's empty str).
CACHE_BYTES = int(float(os.environ.get("RB_ANALYSIS_CACHE_MB", "") or 256) * 2**20)
CACHE_BLOCKS = 16
STR_OVERHEAD = 57


class RingbenchFileError(Exception):
    """A file that cannot be analysed: missing, not HDF5, not from ringbench, or unusable."""


def _py(value):
    """HDF5 attribute value -> plain Python (str, int, float, bool, list)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        if value.dtype.kind in ("S", "O"):
            return [v.decode() if isinstance(v, bytes) else v for v in value.tolist()]
        return value.tolist() if value.size != 1 else value.reshape(()).item()
    return value


def _and(items):
    """'2, 3 and 4'."""
    items = [str(x) for x in items]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _is_text(ds):
    return h5py.check_string_dtype(ds.dtype) is not None or ds.dtype.kind == "S"


def _read(ds, sel=()):
    """A dataset (or its selection `sel`) as numpy; strings (fixed-length in ringbench files)
    as str objects."""
    if _is_text(ds):
        return np.asarray(ds.asstr()[sel], dtype=object)
    return ds[sel]


def _is_scale(ds):
    """An HDF5 dimension scale (H5DSset_scale): it labels another dataset's axis, it is not a
    key or metric of its own."""
    return _py(ds.attrs.get("CLASS", b"")) == "DIMENSION_SCALE"


def _attr(obj, name, default=""):
    return _py(obj.attrs[name]) if name in obj.attrs else default


def _row_values(values, world, int_missing):
    """[world, P, ...] -> one value per (point, rank) row, point-major like the table."""
    moved = np.swapaxes(values, 0, 1)
    n = moved.shape[0] * moved.shape[1]
    if moved.ndim == 2:
        flat = moved.reshape(n)
        if int_missing and flat.dtype.kind == "i":
            return pd.arrays.IntegerArray(flat.astype(np.int64), flat == -1)  # -1: <NA>
        return flat
    return pd.Series(list(moved.reshape((n,) + moved.shape[2:])), dtype=object).to_numpy()


class _BlockCache:
    """Blocks of metrics, least recently used first out once CACHE_BYTES is passed (the
    newest block always stays)."""

    def __init__(self):
        self.blocks, self.used = OrderedDict(), 0

    def get(self, key):
        hit = self.blocks.get(key)
        if hit is None:
            return None
        self.blocks.move_to_end(key)
        return hit[0]

    def put(self, key, array, nbytes):
        self.blocks[key] = (array, nbytes)
        self.used += nbytes
        while self.used > CACHE_BYTES and len(self.blocks) > 1:
            self.used -= self.blocks.popitem(last=False)[1][1]

    def drop(self, owner):
        """Forgets the blocks of a run that is gone."""
        for key in [k for k in self.blocks if k[0] == owner]:
            self.used -= self.blocks.pop(key)[1]


_CACHE = _BlockCache()
_OWNERS = itertools.count()


def set_cache_bytes(nbytes):
    """Sets CACHE_BYTES (tests; RB_ANALYSIS_CACHE_MB for a command) and empties the cache."""
    global CACHE_BYTES
    CACHE_BYTES = int(nbytes)
    _CACHE.blocks.clear()
    _CACHE.used = 0


def block_bytes():
    return max(1, CACHE_BYTES // CACHE_BLOCKS)


def _stat_key(path):
    st = os.stat(path)
    return (st.st_size, st.st_mtime_ns, st.st_ino)


class _Source:
    """The file a run's metrics are read from, opened for each read: never held open, so that
    the process that loaded a file can still write one at its path (HDF5 refuses to open a
    file again for writing, or to truncate it, while it is open). A file changed since it was
    loaded is refused rather than read as if it were the same."""

    def __init__(self, path):
        self.path, self.key = path, _stat_key(path)

    def read(self, name, sel, where):
        try:
            if _stat_key(self.path) != self.key:
                raise RingbenchFileError(f"{self.path}: changed on disk since it was loaded; load it again")
            with h5py.File(self.path, "r") as f:
                return _read(f[name], sel)
        except (OSError, RuntimeError, ValueError, KeyError) as exc:
            raise RingbenchFileError(filecheck.unreadable(
                where, f"HDF5: {exc}: truncated or corrupted?")) from exc


class Column:
    """A metric [world, P, ...] of a file, read a block of points at a time when indexed (the
    blocks cached in _CACHE): column[:, p], column[r, p] and column[:, p0:p1] read only the
    blocks they need; np.asarray(column) and ravel() read it whole, uncached."""

    def __init__(self, ds, source, owner, where):
        self._source, self._owner, self.where, self._name = source, owner, where, ds.name
        self.shape, self.ndim = tuple(ds.shape), ds.ndim
        self.text = _is_text(ds)
        self.dtype = np.dtype(object) if self.text else ds.dtype
        self.size = int(np.prod(self.shape))
        value = ds.dtype.itemsize + (STR_OVERHEAD if self.text else 0)
        self.point_bytes = value * self.size // max(1, self.shape[1])
        self.nbytes = value * self.size

    def __len__(self):
        return self.shape[0]

    def value(self):
        """The numpy array where the metric fits in one block (cached), else this Column."""
        return self._block(0, self.points_per_block()) if self.nbytes <= block_bytes() else self

    def points_per_block(self):
        """How many points one block of the cache holds (a pass over every point reads this
        many at a time)."""
        return max(1, block_bytes() // max(1, self.point_bytes))

    def _block(self, b, n):
        key = (self._owner, self._name, n, b)
        got = _CACHE.get(key)
        if got is None:
            got = self._read(np.s_[:, b * n:min(self.shape[1], (b + 1) * n)])
            _CACHE.put(key, got, self.point_bytes * got.shape[1])
        return got

    def _read(self, sel=()):
        return self._source.read(self._name, sel, self.where)

    def points(self, p0, p1):
        """[world, p1 - p0, ...]: the points p0 .. p1-1, from the blocks that hold them."""
        n = self.points_per_block()
        parts = [self._block(b, n)[:, max(p0, b * n) - b * n:min(p1, (b + 1) * n) - b * n]
                 for b in range(p0 // n, (p1 - 1) // n + 1)] if p1 > p0 else []
        if len(parts) == 1:
            return parts[0].copy()  # never a view: a caller keeping it would keep the block
        return np.concatenate(parts, axis=1) if parts else self._read(np.s_[:, p0:p1])

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        npts = self.shape[1]
        if len(key) >= 2 and isinstance(key[1], (int, np.integer)) and not isinstance(key[1], bool):
            p = int(key[1]) + (npts if key[1] < 0 else 0)
            if not 0 <= p < npts:
                raise IndexError(f"{self.where}: point {key[1]} of {npts}")
            got = self.points(p, p + 1)
            return got[(key[0], 0) + key[2:]]
        if len(key) >= 2 and isinstance(key[1], slice) and key[1].step in (None, 1):
            p0, p1, _ = key[1].indices(npts)
            return self.points(p0, max(p0, p1))[(key[0], slice(None)) + key[2:]]
        return np.asarray(self)[key]

    def __array__(self, dtype=None):
        whole = self._read()
        return whole if dtype is None else whole.astype(dtype)

    def __iter__(self):
        return iter(np.asarray(self))

    def ravel(self):
        return np.asarray(self).ravel()


class Metrics(Mapping):
    """name -> metric of one points table: its numpy array [world, P, ...] where it fits in one
    block of the cache, else its Column. `columns` has every Column (shape, dtype, size)
    without reading any."""

    def __init__(self):
        self.columns = {}

    def __getitem__(self, name):
        return self.columns[name].value()

    def __contains__(self, name):
        return name in self.columns

    def __iter__(self):
        return iter(self.columns)

    def __len__(self):
        return len(self.columns)


class PointsTable:
    """One points table of a file (a sweep, or a sub-table such as a sweep's model/)."""

    def __init__(self, group, world, where, origin):
        """origin: (the run's _Source, its number in the cache): where the metrics are read."""
        self.world = world  # ranks of the run; nrows: rows of this table's metrics
        self.where = where  # "FILE:/sweeps/NAME" for messages
        self._source = origin[0]
        self.row_rank, self.nrows = None, world
        self.units, self.descriptions = {}, {}
        # How each metric is judged (JUDGING_ATTRS), what a key spans ("message_size"), and
        # each point's own noise class where the file gives one (noise_class).
        self.judging, self.key_axes, self.point_noise = {}, {}, None
        self.keys, self.metrics, self.subtables = [], Metrics(), {}
        keys = {}
        if "points" in group:
            for name, ds in group["points"].items():
                if isinstance(ds, h5py.Dataset) and not (_is_scale(ds) and _attr(ds, "role", None) != "key"):
                    keys[name] = _read(self._dataset(ds, name, "key", ds.ndim == 1))
        self.keys = list(keys)
        npoints = {len(v) for v in keys.values()}
        if len(npoints) > 1:
            raise RingbenchFileError(f"{where}/points: keys of different lengths {sorted(npoints)}")
        self.npoints = npoints.pop() if npoints else int(_attr(group, "points", 0) or 0)
        self.points = pd.DataFrame(keys, index=pd.RangeIndex(self.npoints, name="point"))
        # A sampled table (schema 4): which rank each row holds; None: row r is rank r.
        self.row_rank = _read(group["row_rank"]) if "row_rank" in group else None
        self.nrows = world if self.row_rank is None else self.row_rank.shape[0]
        self._over_ranks = group["over_ranks"].name if "over_ranks" in group else None
        for name, obj in group.items():
            if isinstance(obj, h5py.Dataset):
                if (_is_scale(obj) and _attr(obj, "role", None) != "metric") or name == "row_rank":
                    continue
                ok = obj.ndim >= 2 and obj.shape[:2] == (self.nrows, self.npoints)
                self.metrics.columns[name] = Column(self._dataset(obj, name, "metric", ok), *origin,
                                                    f"{where}/{name}")
            elif name != "points" and "points" in obj:
                self.subtables[name] = PointsTable(obj, world, f"{where}/{name}", origin)
            elif name != "over_ranks":  # a group of tables (steps/R<R>): each by its path
                for sub, child in obj.items():
                    if isinstance(child, h5py.Group) and "points" in child:
                        self.subtables[f"{name}/{sub}"] = PointsTable(child, world, f"{where}/{name}/{sub}",
                                                                      origin)
        self._table = None

    def _dataset(self, ds, name, role, shape_ok):
        """The dataset, its role and shape checked and its units and description kept."""
        got = _attr(ds, "role", None)
        if got != role:
            raise RingbenchFileError(f"{self.where}/{name}: role {got!r}, expected {role!r} "
                                     "(schema_version 2: keys under points/, metrics beside them)")
        if not shape_ok:
            rows = f"world={self.world}" if self.row_rank is None else f"rows={self.nrows}"
            want = "[points]" if role == "key" else f"[{rows}, points={self.npoints}, ...]"
            raise RingbenchFileError(f"{self.where}/{name}: shape {list(ds.shape)}, expected {want}")
        self.units[name] = str(_attr(ds, "units"))
        self.descriptions[name] = str(_attr(ds, "description"))
        if role == "metric" and "direction" in ds.attrs:
            self.judging[name] = {a: str(_attr(ds, a, "")) for a in JUDGING_ATTRS}
        if role == "key" and "axis" in ds.attrs:
            self.key_axes[name] = str(_attr(ds, "axis"))
        return ds

    def array(self, name):
        """A metric as stored: [world, points, ...]."""
        if name not in self.metrics:
            raise KeyError(f"{self.where}: no metric '{name}' (metrics: {', '.join(self.metrics) or 'none'})")
        return self.metrics[name]

    def rank_values(self, name, point):
        """Each rank's value of a metric at one point, ranks without a value left out: a
        scalar metric as stored, an array metric (per-iteration samples) as the rank's median."""
        v = self.array(name)[:, point]
        if v.ndim == 1:
            v = numbers(v)
            return v[np.isfinite(v)]
        meds = row_median(v.reshape(v.shape[0], -1))
        return meds[np.isfinite(meds)]

    def ranks_at(self, point):
        """The world rank of each row at a point (-1: an empty row of a sample)."""
        if self.row_rank is None:
            return np.arange(self.nrows)
        return np.asarray(self.row_rank[:, point], dtype=np.int64)

    def over_ranks(self, name, point):
        """{min, mean, max, sum} of a numeric metric at a point over every rank with a value (NaN,
        and -1 in integer metrics, are none): arrays over the inner axes, numbers for a scalar
        metric; NaN where no rank had one. A sampled table's are its over_ranks/ datasets, else
        they are computed from the rows (every rank)."""
        if self._over_ranks is not None:
            got = self._source.read(f"{self._over_ranks}/{name}", np.s_[:, point], f"{self.where}/over_ranks")
            return {s: (float(v) if np.ndim(v) == 0 else v) for s, v in zip(OVER_RANKS, got)}
        v = self.array(name)[:, point]
        v = v.astype(float) if v.dtype.kind in "fiu" else numbers(v)
        if self.metrics.columns[name].dtype.kind in "iu":
            v[v == -1] = np.nan
        has = np.isfinite(v).any(axis=0)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            out = {"min": np.nanmin(v, axis=0), "mean": np.nanmean(v, axis=0),
                   "max": np.nanmax(v, axis=0), "sum": np.where(has, np.nansum(v, axis=0), np.nan)}
        return {s: (float(x) if np.ndim(x) == 0 else x) for s, x in out.items()}

    # --- how the file says its columns are judged (schema 3; legacy.py for schema 2) ---
    def direction_of(self, name):
        """+1 when higher is better, -1 when lower is, 0 when not a performance number."""
        return DIRECTION.get(self.judging.get(name, {}).get("direction"), 0)

    def headline_metrics(self):
        """The metrics compare judges without --metric (judged = headline)."""
        return [n for n, j in self.judging.items() if j.get("judged") == "headline" and n in self.metrics]

    def ranks_of(self, name):
        """limiting: the worst rank makes the point's figure; each: every rank its own device."""
        return self.judging.get(name, {}).get("ranks", "limiting")

    def noise_of(self, name, point):
        """The run-to-run noise class (verdict.RUN_NOISE) of one metric at one point."""
        own = self.point_noise(point) if self.point_noise else ""
        return own or self.judging.get(name, {}).get("noise", "*")

    def message_size_key(self):
        """The key compare's --min-bytes filters (axis message_size), or None."""
        found = [k for k, a in self.key_axes.items() if a == "message_size"]
        return found[0] if found else None

    def key_with_units(self, units):
        """The one key measured in `units` (a message size: "B"), or None."""
        found = [k for k in self.keys if self.units.get(k) == units]
        return found[0] if len(found) == 1 else None

    def scalar_metrics(self):
        return [n for n, c in self.metrics.columns.items() if c.ndim == 2]

    def array_metrics(self):
        return [n for n, c in self.metrics.columns.items() if c.ndim > 2]

    @property
    def table(self):
        """DataFrame: one row per (point, rank), point-major."""
        if self._table is None:
            self._table = self._build_table()
        return self._table

    def _build_table(self):
        return self.rows(0, self.npoints, list(self.metrics))

    def rows(self, p0, p1, metrics):
        """DataFrame of the points p0 .. p1-1 with the given metrics: one row per (point, rank),
        point-major, as `table`'s rows of those points."""
        n, w = p1 - p0, self.nrows
        ranks = np.tile(np.arange(w, dtype=np.int64), n) if self.row_rank is None \
            else np.asarray(self.row_rank[:, p0:p1], dtype=np.int64).T.ravel()
        cols = {"sweep": np.full(n * w, getattr(self, "name", ""), dtype=object),
                "point": np.repeat(np.arange(p0, p1, dtype=np.int64), w), "rank": ranks}
        for k in self.keys:
            cols[k] = np.repeat(self.points[k].to_numpy()[p0:p1], w)
        for m in metrics:
            cols[m] = _row_values(self.metrics.columns[m].points(p0, p1), w, int_missing=True)
        return pd.DataFrame(cols)

    def scalar_row_chunks(self):
        """`rows` of the scalar metrics (what a CSV holds), a run of points at a time: each
        chunk's rows about one cache block in memory, whatever the file's size."""
        names = self.scalar_metrics()
        row = 16 * (3 + len(self.keys)) + sum(self.metrics.columns[m].point_bytes for m in names) \
            // max(1, self.nrows)
        step = max(1, block_bytes() // max(1, row * self.nrows))
        for p0 in range(0, self.npoints, step):
            yield self.rows(p0, min(self.npoints, p0 + step), names)


class Sweep(PointsTable):
    """One /sweeps/<name> group: type, status, parameters (attributes) and its points table."""

    def __init__(self, run, name, group):
        self.name = name
        self.run = run
        self.attrs = {k: _py(v) for k, v in group.attrs.items()}
        self.type = str(self.attrs.get("type", ""))
        self.status = str(self.attrs.get("status", "unknown"))
        self.failure = str(self.attrs.get("failure", ""))
        super().__init__(group, run.world_size, f"{run.path}:/sweeps/{name}", (run.source, run.owner))
        self.iteration_times = str(self.attrs.get("iteration_times", "")) or None
        if "noise_class" in self.metrics:
            self.point_noise = self._noise_class
        if run.attrs.get("schema_version") == 2:
            legacy.describe(self)

    def _noise_class(self, point):
        said = [str(x) for x in self.metrics["noise_class"][:, point] if str(x)]
        return said[0] if said else ""

    @property
    def completed(self):
        return self.status == "complete"

    @property
    def points_planned(self):
        """The points the sweep planned: more than npoints when a signal cut it short."""
        return int(self.attrs.get("points_planned", self.npoints))

    def cut_short(self):
        """"" unless a signal stopped the sweep between two points (status 'interrupted'), else
        what it kept: its finished points, in the layout of a complete sweep, fewer of them."""
        if self.status != "interrupted":
            return ""
        return (f"cut short by a signal: {self.npoints} of {self.points_planned} planned points "
                "written, the rest never ran")

    def point_status(self, point):
        """ok | oom | parity_failed (the status metric; the same on every rank, so the first
        rank that says other than ok wins)."""
        if "status" not in self.metrics:
            return "ok"
        said = [str(x) for x in self.metrics["status"][:, point] if str(x) and str(x) != "ok"]
        return said[0] if said else "ok"

    def parity_mode(self, point):
        """full | sampled | off: how the point's parity was checked (validate.reference);
        files from before the key: sampled or full from parity_sampled, "" when unknown."""
        if "parity_mode" in self.metrics:
            said = {str(x) for x in self.metrics["parity_mode"][:, point] if str(x)}
            for mode in ("off", "sampled", "full"):  # the least checked first
                if mode in said:
                    return mode
        if "parity_sampled" in self.metrics:
            return "sampled" if (self.metrics["parity_sampled"][:, point] == 1).any() else "full"
        return ""

    def iteration_samples(self):
        """The metrics of this sweep that hold per-iteration samples (inner axis iteration)."""
        return [m for m, j in self.judging.items() if j.get("inner_axis") == "iteration" and m in self.metrics]

    def __repr__(self):
        return (f"Sweep({self.name!r}, type={self.type!r}, status={self.status!r}, "
                f"points={self.npoints})")


def finite_groups(values):
    """[n, k] floats -> (rows, [len(rows), m] their finite values in order) for each count m >= 1
    of finite values a row holds: rows with as many samples reduced by one numpy call along the
    last axis, which gives each row's numbers as a call on that row alone would."""
    ok = np.isfinite(values)
    counts = ok.sum(axis=1)
    for m in np.unique(counts[counts > 0]):
        rows = np.flatnonzero(counts == m)
        yield rows, values[rows][ok[rows]].reshape(len(rows), m)


def row_median(column):
    """Per row, the median of an array column (NaN where a row has no finite value)."""
    out = np.full(len(column), np.nan)
    if isinstance(column, np.ndarray) and column.ndim == 2 and column.dtype.kind == "f" and column.shape[1]:
        # A thousand ranks' medians are a few calls, not a thousand.
        for rows, finite in finite_groups(column):
            out[rows] = np.median(finite, axis=1)
        return out
    for i, v in enumerate(column):
        a = np.asarray(v, dtype=float).ravel()
        a = a[np.isfinite(a)]
        if a.size:
            out[i] = np.median(a)
    return out


def numbers(column):
    """A column as float64 (NA and text become NaN)."""
    if isinstance(column, np.ndarray) and column.dtype.kind in "fiu":
        return column.astype(float)  # what to_numeric gives, without a Series per call
    return pd.to_numeric(pd.Series(column), errors="coerce").astype(float).to_numpy()


class Run:
    """One ringbench output file."""

    def __init__(self, path):
        self.path = str(path)
        self.owner = next(_OWNERS)  # names this run's blocks in the cache
        with self._open() as f:
            self.source = _Source(self.path)  # metrics are read from it when used
            try:
                self._read(f)
            except (OSError, RuntimeError, KeyError, ValueError) as exc:
                # What the check's walk reached without a complaint but HDF5 cannot decode
                # (the data of a damaged file): a message, not a traceback.
                raise RingbenchFileError(filecheck.unreadable(
                    self.path, f"HDF5: {exc}: truncated or corrupted?")) from exc
        weakref.finalize(self, _CACHE.drop, self.owner)  # its blocks leave the cache with it

    def _read(self, f):
        self.attrs = {k: _py(v) for k, v in f["run"].attrs.items()}
        self._check_version()
        self._fold_end_record()
        # /run/libraries: one version string per library (cudnn, cuda_driver, ...)
        self.libraries = ({k: _py(v) for k, v in f["run/libraries"].attrs.items()}
                          if "libraries" in f["run"] else {})
        self.world_size = int(self.attrs.get("world_size", 0))
        self.ranks = _ranks_frame(f, self.world_size)
        self.sweeps, self.unreadable = {}, {}  # unreadable: name -> why
        bad = filecheck.bad_sweeps(self.path)  # HDF5 failed, crashed or hung on these
        for name in list(f["sweeps"].keys()) if "sweeps" in f else []:
            if name in bad:
                self.unreadable[name] = bad[name]
                continue
            try:
                self.sweeps[name] = Sweep(self, name, f["sweeps"][name])
            except (OSError, KeyError, ValueError, RuntimeError, RingbenchFileError) as exc:
                self.unreadable[name] = str(exc)

    def _fold_end_record(self):
        """A run ended by a signal or the hang guard leaves /run status 'running' and says how it
        ended in OUTPUT.end beside the file (src/app/end_record.hpp): its status, failure and
        end_time stand for /run's. Only a regular file, and only for a file still 'running'."""
        path = self.path + ".end"
        if self.attrs.get("status") != "running" or os.path.islink(path) or not os.path.isfile(path):
            return
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                said = dict(line.split(": ", 1) for line in fh.read(4096).splitlines() if ": " in line)
        except OSError:
            return
        if said.get("status") in ("interrupted", "timeout"):
            for key in ("status", "failure", "end_time"):
                self.attrs[key] = said.get(key, "").strip()
            self.attrs["end_record"] = path

    def _open(self):
        # Missing, not HDF5, or a file HDF5 would crash or hang on: said before this process
        # opens it (filecheck.py).
        filecheck.check([self.path])
        try:
            f = h5py.File(self.path, "r")
        except OSError as exc:
            raise RingbenchFileError(f"{self.path}: cannot open as HDF5 ({exc}); a run killed while "
                                     "creating its file leaves an unreadable file") from exc
        if "run" not in f or "ringbench_version" not in f["run"].attrs:
            top = ", ".join(sorted(f.keys())) or "nothing"
            f.close()
            raise RingbenchFileError(f"{self.path}: an HDF5 file, but not one written by ringbench "
                                     f"(no /run group with ringbench_version; top level has {top})")
        return f

    def _check_version(self):
        version = self.attrs.get("schema_version")
        if version in READABLE_SCHEMAS:
            return
        made = f"ringbench {self.attrs.get('ringbench_version', '?')}, commit {self.attrs.get('git_commit', '?')}"
        what = "no /run schema_version (a file from before schema 2)" if version is None \
            else f"schema_version {version}"
        raise RingbenchFileError(f"{self.path}: {what}, written by {made}; this rb-analysis reads "
                                 f"schema_version {_and(READABLE_SCHEMAS)} only: "
                                 "analyse it with the rb-analysis "
                                 "of that commit, or run the benchmark again")

    # --- run-level facts -------------------------------------------------------------
    @property
    def status(self):
        return str(self.attrs.get("status", "unknown"))

    @property
    def failure(self):
        return str(self.attrs.get("failure", ""))

    @property
    def config_text(self):
        return str(self.attrs.get("config_text", ""))

    @property
    def node_count(self):
        return int(self.attrs.get("node_count", 0))

    def _distinct(self, column):
        if column not in self.ranks:
            return []
        return sorted({str(v) for v in self.ranks[column] if str(v)})

    def hosts(self):
        return self._distinct("hostname")

    def gpu_names(self):
        return self._distinct("gpu_name")

    def machine_summary(self):
        """One line: ranks, nodes, hosts, GPUs, backend."""
        gpus = self.gpu_names()
        hosts = self.hosts()
        host_txt = ", ".join(hosts[:4]) + (f" and {len(hosts) - 4} more" if len(hosts) > 4 else "")
        gpu_txt = ("GPUs: " + ", ".join(gpus)) if gpus else "no GPU (host path)"
        return (f"{self.world_size} ranks on {self.node_count} node(s) ({host_txt}); "
                f"backend {self.attrs.get('backend', '?')}; {gpu_txt}")

    def completeness(self):
        """(completed sweep names, [(name, status, failure)] of the others)."""
        done = [s.name for s in self.sweeps.values() if s.completed]
        other = [(s.name, s.status, s.failure) for s in self.sweeps.values() if not s.completed]
        return done, other

    def problems(self):
        """Human-readable lines about what did not complete (empty for a clean run)."""
        lines = []
        if self.status != "complete":
            why = f": {self.failure}" if self.failure else ""
            if self.status == "running":
                lines.append(f"run status is 'running': the run did not finish (killed, timed out or "
                             f"crashed); end_time is {self.attrs.get('end_time') or 'missing'}{why}")
            else:
                lines.append(f"run status is '{self.status}'{why}")
        for s in self.sweeps.values():
            if not s.completed:
                lines.append(f"sweep '{s.name}' ({s.type}) status '{s.status}'"
                             + (f": {s.failure}" if s.failure else "")
                             + (" (what it wrote is shown; it did not finish)" if s.status == "running" else "")
                             + (f" ({s.cut_short()}; those are shown)" if s.cut_short() else ""))
        for name, why in self.unreadable.items():
            lines.append(f"sweep '{name}' unreadable: {why}")
        if self.status != "complete":
            for name, typ in self.configured_sweeps():
                if name not in self.sweeps and name not in self.unreadable:
                    lines.append(f"sweep '{name}' ({typ}) of the config is not in the file: "
                                 "the run stopped before it (or while starting it)")
        return lines

    def configured_sweeps(self):
        """[(name, type)] of the sweeps in the run's config_text, in order; [] if unparsable.
        (--only runs a subset: compare with the command line before calling one missing.)"""
        try:
            import yaml  # python3-yaml; optional
            doc = yaml.safe_load(self.config_text) or {}
            out = [(str(s.get("name", s["type"])), str(s["type"]))
                   for s in doc.get("sweeps", []) or [] if isinstance(s, dict) and "type" in s]
            only = re.search(r"--only[ =](\S+)", str(self.attrs.get("command_line", "")))
            if only:
                keep = set(only.group(1).split(","))
                out = [x for x in out if x[0] in keep]
            return out
        except Exception:  # no PyYAML, or text it cannot read: say nothing rather than guess
            return []

    # --- tables ---------------------------------------------------------------------
    def sweeps_of_type(self, types):
        types = (types,) if isinstance(types, str) else tuple(types)
        return [s for s in self.sweeps.values() if s.type in types]

    def sweep(self, name):
        if name not in self.sweeps:
            known = ", ".join(self.sweeps) or "none"
            raise KeyError(f"{self.path}: no sweep named '{name}' (sweeps: {known})")
        return self.sweeps[name]

    def table(self, name=None, type=None):  # type= is the documented keyword: pylint: disable=redefined-builtin
        """The table of one sweep (by name) or of all sweeps of a type, concatenated."""
        if name is not None:
            return self.sweep(name).table
        if type is None:
            raise TypeError("table() needs a sweep name or type=")
        parts = [s.table for s in self.sweeps_of_type(type)]
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()

    def __repr__(self):
        return f"Run({self.path!r}, status={self.status!r}, world_size={self.world_size}, sweeps={list(self.sweeps)})"


class RawGroup:
    """The datasets of one group as stored, for groups that are not a points table (a
    contention sweep's monitor/ series: [world, T] and [world, T, C]): arrays by name, their
    units, and the group's attributes. Missing group: `missing` says why, arrays are empty."""

    def __init__(self, arrays, units, attrs, missing=""):
        self.arrays, self.units, self.attrs, self.missing = arrays, units, attrs, missing

    def __contains__(self, name):
        return name in self.arrays

    def get(self, name):
        return self.arrays.get(name)


def read_group(path, where):
    """RawGroup of FILE:/where (datasets directly in it; subgroups are not read)."""
    filecheck.check([path])  # done already for a loaded run's file: remembered
    with h5py.File(path, "r") as f:
        if where not in f:
            return RawGroup({}, {}, {}, missing=f"{path}:/{where} is not in the file")
        g = f[where]
        arrays, units = {}, {}
        for name, ds in g.items():
            if isinstance(ds, h5py.Dataset):
                arrays[name] = _read(ds)
                units[name] = str(_attr(ds, "units"))
        return RawGroup(arrays, units, {k: _py(v) for k, v in g.attrs.items()})


def _ranks_frame(f, world):
    cols = {}
    for name, ds in (f["ranks"].items() if "ranks" in f else []):
        if isinstance(ds, h5py.Dataset) and ds.shape == (world,):
            cols[name] = _read(ds)
    return pd.DataFrame(cols)


def load(path):
    """Loads one ringbench file. Raises RingbenchFileError with a clear message."""
    return Run(path)


def run_files(paths):
    """The files that `paths` name: a directory stands for every .h5 in it."""
    files = []
    for p in paths:
        if os.path.isdir(p):
            found = sorted(os.path.join(p, n) for n in os.listdir(p) if n.endswith(".h5"))
            if not found:
                raise RingbenchFileError(f"{p}: directory holds no .h5 files")
            files += found
        else:
            files.append(p)
    return files


def load_many(paths):
    """Loads several files (a scaling series); a directory stands for every .h5 in it."""
    files = run_files(paths)
    filecheck.check(files)  # one checking process for all of them
    return [Run(p) for p in files]


def combined_table(runs, sweep_types):
    """The tables of every sweep of the given types across runs, with run and world_size columns."""
    parts = []
    for run in runs:
        for s in run.sweeps_of_type(sweep_types):
            if len(s.table):
                parts.append(s.table.assign(run=os.path.basename(run.path), world_size=run.world_size))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def csv_columns(table):
    """The columns of a table that are one value per row (array columns do not fit a CSV cell)."""
    return [c for c in table.columns
            if not (table[c].dtype == object and any(isinstance(v, np.ndarray) for v in table[c][:1]))]
