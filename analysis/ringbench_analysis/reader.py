"""Loads ringbench HDF5 files into plain tables: one row per (point, rank).

    from ringbench_analysis import reader
    run = reader.load("results/small_20261122T120000Z.h5")
    print(run.machine_summary())
    t = run.table("ring")                 # a sweep by name, or by type: run.table(type="ring_attention")
    for row in t.where(rank=0).rows():    # plain dicts
        print(row["seq_len"], row["ring_size"], row["total_time"])

Every sweep group in the file becomes a Table, whatever its layout:

* point layout: the sweep group holds one subgroup per point (``point_0000`` ...). The point
  subgroup's scalar attributes become key columns (seq_len, ring_size, causal, ...), each
  per-rank dataset ``[world]`` a metric column, and each ``[world, k, ...]`` dataset an
  array-valued column (one numpy array per row; e.g. step_compute_time over ring steps).
* columnar layout: 1-D shared datasets of length P (host_pingpong's message_size, ...) are
  key columns with one value per point; per-rank datasets ``[world, P]`` are metric columns,
  ``[world, P, k, ...]`` array columns, ``[world]`` per-rank columns repeated on every point.
* anything else under the sweep (a fitted ``model`` subgroup, matrices that are not per
  point) stays reachable as raw arrays through ``Sweep.group_arrays()`` / ``Run.h5path()``.

Every column remembers the dataset's ``units`` and ``description`` (``Table.units``).
Only h5py and numpy are needed; nothing here plots or prints.
"""
import os
import re

import numpy as np

# The writer may still hold a file open (a run in progress, a flush-then-read); reading must
# not fail on HDF5's file lock.
os.environ.setdefault("HDF5_USE_FILE_LOCKING", "FALSE")

try:
    import h5py
except ImportError as exc:  # pragma: no cover - depends on the machine
    raise ImportError("ringbench_analysis needs h5py (Debian: apt-get install python3-h5py); "
                      "run it with /usr/bin/python3 or a Python that has h5py") from exc

# Names the analysis relies on, in one place, so a renamed dataset is a one-line change here.
# Each entry lists accepted names, first match wins.
NAMES = {
    # point attributes of the ring attention sweep
    "seq_len": ("seq_len", "sequence_length"),
    "ring_size": ("ring_size",),
    "batch": ("batch", "batch_size"),
    "heads": ("num_heads", "heads"),
    "head_dim": ("head_dim",),
    "dtype": ("storage_dtype", "dtype"),
    "num_rings": ("num_rings",),
    "point_status": ("status",),
    # ring attention per-rank metrics
    "forward_time": ("forward_time_median", "median_forward_time", "forward_time"),
    "backward_time": ("backward_time_median", "median_backward_time", "backward_time"),
    "total_time": ("total_time_median", "median_total_time", "total_time"),
    "step_compute_time": ("step_compute_time",),
    "step_wait_time": ("step_wait_time",),
    "tokens_per_s": ("tokens_per_s", "throughput"),
    "tflops": ("tflops_total", "tflops"),
    "flops_forward": ("flops_forward",),
    "peak_memory": ("peak_memory_bytes", "peak_memory"),
    "kv_bytes": ("kv_block_bytes",),
    # collectives / p2p
    "op": ("op", "operation", "collective"),
    "group": ("group", "group_name"),
    "size": ("message_size", "bytes", "size"),
    "busbw": ("busbw_Bps", "busbw", "median_busbw", "bus_bandwidth"),
    "algbw": ("algbw_Bps", "algbw", "median_algbw", "algorithm_bandwidth"),
    "coll_time": ("time_s", "time", "median_time", "median_one_way_time"),
    "bandwidth": ("bandwidth", "median_bandwidth"),
}

RING_TYPES = ("ring_attention", "ring")
COLLECTIVE_TYPES = ("collectives",)
P2P_TYPES = ("p2p_matrix", "p2p")
PINGPONG_TYPES = ("host_pingpong",)


class RingbenchFileError(Exception):
    """A file that cannot be analysed: missing, not HDF5, not from ringbench, or unusable."""


def first_name(names_key, available):
    """The first of NAMES[names_key] that is in `available` (a container), or None."""
    for n in NAMES[names_key]:
        if n in available:
            return n
    return None


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


def _read_dataset(ds):
    """Whole dataset as numpy; fixed-length strings become str arrays."""
    if ds.dtype.kind in ("S", "O") or h5py.check_string_dtype(ds.dtype) is not None:
        return np.asarray(ds.asstr()[()], dtype=object)
    return ds[()]


class Table:
    """Columns of equal length: name -> numpy array (object arrays for strings and arrays).

    Deliberately small (no pandas on Debian by default): select with where(), iterate with
    rows(), group with groups(), export with to_csv().
    """

    def __init__(self, columns=None, units=None, descriptions=None, keys=None):
        self.columns = dict(columns or {})
        self.units = dict(units or {})
        self.descriptions = dict(descriptions or {})
        self.keys = list(keys or [])  # the columns that identify a point (not metrics)
        lengths = {len(v) for v in self.columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns of different lengths: {sorted(lengths)}")

    def __len__(self):
        return len(next(iter(self.columns.values()))) if self.columns else 0

    def __contains__(self, name):
        return name in self.columns

    def __getitem__(self, name):
        return self.columns[name]

    def names(self):
        return list(self.columns)

    def scalar_columns(self):
        """Columns holding one number or string per row (not arrays)."""
        out = []
        for n, v in self.columns.items():
            if v.dtype != object or not any(isinstance(x, np.ndarray) for x in v[:1]):
                out.append(n)
        return out

    def metrics(self):
        """Numeric scalar columns that are not keys (what compare and report look at)."""
        skip = set(self.keys) | {"rank", "run", "sweep", "point"}
        return [n for n in self.scalar_columns()
                if n not in skip and self.columns[n].dtype.kind in "fiu"]

    def rows(self):
        names = list(self.columns)
        for i in range(len(self)):
            yield {n: _py(self.columns[n][i]) if not isinstance(self.columns[n][i], np.ndarray)
                   else self.columns[n][i] for n in names}

    def mask(self, **equal):
        m = np.ones(len(self), dtype=bool)
        for k, v in equal.items():
            if k not in self.columns:
                return np.zeros(len(self), dtype=bool)
            col = self.columns[k]
            m &= np.array([x == v for x in col], dtype=bool) if col.dtype == object else (col == v)
        return m

    def where(self, mask=None, **equal):
        m = self.mask(**equal) if mask is None else (np.asarray(mask, dtype=bool) & self.mask(**equal))
        return Table({n: v[m] for n, v in self.columns.items()}, self.units, self.descriptions,
                     self.keys)

    def unique(self, name):
        if name not in self.columns:
            return []
        vals = {_py(v) for v in self.columns[name]}
        return sorted(vals, key=lambda v: (str(type(v)), v))

    def groups(self, names):
        """[(dict of key values, sub-table)] for each distinct combination of `names`."""
        names = [n for n in names if n in self.columns]
        seen = {}
        for i in range(len(self)):
            key = tuple(_py(self.columns[n][i]) for n in names)
            seen.setdefault(key, []).append(i)
        out = []
        for key in sorted(seen, key=lambda k: tuple((str(type(x)), x) for x in k)):
            idx = np.array(seen[key])
            out.append((dict(zip(names, key)), Table({n: v[idx] for n, v in self.columns.items()},
                                                     self.units, self.descriptions, self.keys)))
        return out

    def to_csv(self, path_or_file):
        names = self.scalar_columns()
        close = False
        f = path_or_file
        if isinstance(path_or_file, (str, os.PathLike)):
            f, close = open(path_or_file, "w"), True
        try:
            f.write(",".join(names) + "\n")
            for row in self.rows():
                f.write(",".join(_csv_cell(row[n]) for n in names) + "\n")
        finally:
            if close:
                f.close()

    @staticmethod
    def concat(tables):
        tables = [t for t in tables if len(t)]
        if not tables:
            return Table()
        names = []
        for t in tables:
            names += [n for n in t.columns if n not in names]
        cols = {}
        for n in names:
            parts = []
            for t in tables:
                if n in t.columns:
                    parts.append(np.asarray(t.columns[n], dtype=object))
                else:
                    parts.append(np.array([None] * len(t), dtype=object))
            merged = np.concatenate(parts)
            cols[n] = _tighten(merged)
        units, desc, keys = {}, {}, []
        for t in tables:
            units.update(t.units)
            desc.update(t.descriptions)
            keys += [k for k in t.keys if k not in keys]
        return Table(cols, units, desc, keys)


def _csv_cell(v):
    s = "" if v is None else str(v)
    return '"' + s.replace('"', '""') + '"' if any(c in s for c in ',"\n') else s


def _tighten(arr):
    """object array -> numeric array when every element is a plain number."""
    vals = list(arr)
    if vals and all(isinstance(v, (bool, np.bool_)) for v in vals):
        return np.array(vals, dtype=bool)
    if vals and all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
                    for v in vals):
        return np.array(vals, dtype=np.int64)
    nums = [v for v in vals if v is not None]
    if nums and all(isinstance(v, (int, float, np.integer, np.floating))
                    and not isinstance(v, (bool, np.bool_)) for v in nums):
        # A point that did not run (oom) has no value: NaN, so the column stays numeric.
        return np.array([np.nan if v is None else v for v in vals], dtype=float)
    return arr


class Sweep:
    """One /sweeps/<name> group: its type, status, attributes and its table."""

    def __init__(self, run, name, group):
        self.run = run
        self.name = name
        self.attrs = {k: _py(v) for k, v in group.attrs.items()}
        self.type = str(self.attrs.get("type", ""))
        self.status = str(self.attrs.get("status", "unknown"))
        self.failure = str(self.attrs.get("failure", ""))
        self.table = _sweep_table(group, run.world_size, name)
        self.arrays = {}  # "model/alpha_s" -> array, for everything not in the table
        self._collect_arrays(group, "")

    def _collect_arrays(self, group, prefix):
        for key, obj in group.items():
            path = prefix + key
            if POINT_GROUP.match(key) or key == "dump":
                continue  # per-point data is in the table; dumps are large and for validation
            if isinstance(obj, h5py.Dataset):
                if obj.size <= (1 << 22):
                    self.arrays[path] = _read_dataset(obj)
            elif isinstance(obj, h5py.Group):
                self.arrays[path + "@attrs"] = {k: _py(v) for k, v in obj.attrs.items()}
                self._collect_arrays(obj, path + "/")

    def group_arrays(self, prefix):
        """{relative name: array} of the raw datasets under `prefix` (e.g. "model")."""
        p = prefix.rstrip("/") + "/"
        return {k[len(p):]: v for k, v in self.arrays.items() if k.startswith(p)}

    @property
    def completed(self):
        return self.status == "complete"

    def __repr__(self):
        return f"Sweep({self.name!r}, type={self.type!r}, status={self.status!r}, rows={len(self.table)})"


class Run:
    """One ringbench output file."""

    def __init__(self, path):
        self.path = str(path)
        if not os.path.exists(self.path):
            raise RingbenchFileError(f"{self.path}: no such file")
        if os.path.isdir(self.path):
            raise RingbenchFileError(f"{self.path}: is a directory, not a ringbench HDF5 file")
        if not h5py.is_hdf5(self.path):
            raise RingbenchFileError(f"{self.path}: not an HDF5 file (is it a ringbench output file? "
                                     "ringbench writes .h5 files named <run>_<UTC time>.h5)")
        try:
            f = h5py.File(self.path, "r")
        except OSError as exc:
            raise RingbenchFileError(f"{self.path}: cannot open as HDF5 ({exc}); a run killed while "
                                     "creating its file leaves an unreadable file") from exc
        with f:
            if "run" not in f or "ringbench_version" not in f["run"].attrs:
                top = ", ".join(sorted(f.keys())) or "nothing"
                raise RingbenchFileError(f"{self.path}: an HDF5 file, but not one written by ringbench "
                                         f"(no /run group with ringbench_version; top level has {top})")
            self.attrs = {k: _py(v) for k, v in f["run"].attrs.items()}
            self.world_size = int(self.attrs.get("world_size", 0))
            self.ranks = _ranks_table(f, self.world_size)
            self.sweeps = {}
            self.unreadable = {}  # sweep name -> why (a run killed while writing it)
            if "sweeps" in f:
                for name in list(f["sweeps"].keys()):
                    try:
                        g = f["sweeps"][name]
                        if isinstance(g, h5py.Group):
                            self.sweeps[name] = Sweep(self, name, g)
                    except (OSError, KeyError, ValueError, RuntimeError) as exc:
                        self.unreadable[name] = str(exc)

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

    def hosts(self):
        return self.ranks.unique("hostname") if "hostname" in self.ranks else []

    def gpu_names(self):
        if "gpu_name" not in self.ranks:
            return []
        return [g for g in self.ranks.unique("gpu_name") if g]

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
                             + (" (what it wrote is shown; it did not finish)" if s.status == "running" else ""))
        for name, why in self.unreadable.items():
            lines.append(f"sweep '{name}' unreadable (the run stopped while writing it): {why}")
        if self.status != "complete":
            for name, typ in self.configured_sweeps():
                if name not in self.sweeps and name not in self.unreadable:
                    lines.append(f"sweep '{name}' ({typ}) of the config is not in the file: "
                                 "the run stopped before it (or while starting it)")
        return lines

    def configured_sweeps(self):
        """[(name, type)] of the sweeps in the run's config_text, in order; [] if unparsable.
        (--only runs a subset: compare with the command line before calling one missing.)"""
        text = self.config_text
        try:
            import yaml  # python3-yaml; optional
            doc = yaml.safe_load(text) or {}
            out = []
            for s in doc.get("sweeps", []) or []:
                if isinstance(s, dict) and "type" in s:
                    out.append((str(s.get("name", s["type"])), str(s["type"])))
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

    def table(self, name=None, type=None):
        """The table of one sweep (by name) or all sweeps of a type, concatenated."""
        if name is not None:
            if name not in self.sweeps:
                known = ", ".join(self.sweeps) or "none"
                raise KeyError(f"{self.path}: no sweep named '{name}' (sweeps: {known})")
            return self.sweeps[name].table
        if type is None:
            raise TypeError("table() needs a sweep name or type=")
        return Table.concat([s.table for s in self.sweeps_of_type(type)])

    def __repr__(self):
        return f"Run({self.path!r}, status={self.status!r}, world_size={self.world_size}, sweeps={list(self.sweeps)})"


def _attr_columns(obj):
    return {k: _py(v) for k, v in obj.attrs.items() if k not in ("units", "description")}


def _meta(ds):
    return _py(ds.attrs.get("units", "")), _py(ds.attrs.get("description", ""))


def _ranks_table(f, world):
    if "ranks" not in f:
        return Table()
    cols, units, desc = {}, {}, {}
    for name, ds in f["ranks"].items():
        if isinstance(ds, h5py.Dataset) and ds.shape[:1] == (world,) and ds.ndim == 1:
            cols[name] = _read_dataset(ds)
            units[name], desc[name] = _meta(ds)
    return Table(cols, units, desc, keys=["rank"])


def _per_rank(ds, world):
    return isinstance(ds, h5py.Dataset) and ds.ndim >= 1 and ds.shape[0] == world


POINT_GROUP = re.compile(r"^point_\d+$")
# Point attributes that describe the outcome or the check, not which point it is: they are
# columns, but not keys (two runs of the same point may differ in them).
NOT_KEYS = {"status", "failure", "label", "tolerance", "parity_sampled", "parity_note",
            "compute_dtype", "oom_message"}
# Sweep-level attributes that are part of every point's configuration (the ring attention
# sweep stores batch, heads and head_dim once per sweep); copied into point rows as keys.
SWEEP_LEVEL_KEYS = ("batch", "num_heads", "heads", "head_dim", "backward", "kernel")


def _sweep_table(group, world, sweep_name):
    points = sorted(k for k, v in group.items() if isinstance(v, h5py.Group) and POINT_GROUP.match(k))
    if points:
        return _point_layout(group, points, world, sweep_name)
    if _py(group.attrs.get("type", "")) == "compute":
        return _compute_layout(group, world, sweep_name)
    return _columnar_layout(group, world, sweep_name)


def _compute_layout(group, world, sweep_name):
    """compute sweep (docs/sweeps/compute.md): GEMM points over [dtype x size] and attention
    block points over rows, one row per (point, rank), with a `kind` key column."""
    rows, units, desc = [], {}, {}

    def get(name):
        if name in group:
            units[name], desc[name] = _meta(group[name])
            return _read_dataset(group[name])
        return None
    sizes, dtypes = get("gemm_size"), get("gemm_dtype")
    gemm = {n: get(n) for n in ("gemm_tflops", "gemm_iteration_s", "gemm_max_abs_error")}
    if sizes is not None and dtypes is not None:
        for di, d in enumerate(dtypes):
            for si, size in enumerate(sizes):
                for r in range(world):
                    row = {"sweep": sweep_name, "point": f"gemm_{d}_{size}", "rank": r, "kind": "gemm",
                           "gemm_dtype": _py(d), "gemm_size": _py(size)}
                    for n, v in gemm.items():
                        if v is not None and v.ndim >= 3 and v.shape[:3] == (world, len(dtypes), len(sizes)):
                            x = v[r, di, si]
                            row[n] = x if isinstance(x, np.ndarray) else _py(x)
                    rows.append(row)
    arows = get("attention_rows")
    att = {n: get(n) for n in ("attention_tflops", "attention_iteration_s")}
    if arows is not None:
        for ai, a in enumerate(arows):
            for r in range(world):
                row = {"sweep": sweep_name, "point": f"attention_{a}", "rank": r, "kind": "attention",
                       "attention_rows": _py(a)}
                for n, v in att.items():
                    if v is not None and v.ndim >= 2 and v.shape[:2] == (world, len(arows)):
                        x = v[r, ai]
                        row[n] = x if isinstance(x, np.ndarray) else _py(x)
                rows.append(row)
    return _rows_to_table(rows, units, desc, ["sweep", "point", "kind", "gemm_dtype", "gemm_size",
                                               "attention_rows"])


def _point_layout(group, points, world, sweep_name):
    """One subgroup per point: attributes are keys, per-rank datasets metrics."""
    rows, units, desc, keys = [], {}, {}, []
    sweep_attrs = {k: _py(group.attrs[k]) for k in SWEEP_LEVEL_KEYS if k in group.attrs}
    for p in points:
        pg = group[p]
        attrs = dict(sweep_attrs)
        attrs.update({k: v for k, v in _attr_columns(pg).items() if not isinstance(v, list)})
        for k in attrs:
            if k not in keys and k not in NOT_KEYS:
                keys.append(k)
        data = {}
        for name, ds in pg.items():
            if not _per_rank(ds, world):
                continue
            data[name] = _read_dataset(ds)
            units[name], desc[name] = _meta(ds)
        # A point that did not run (oom, failed) may have fewer or no per-rank datasets;
        # it still gets one row per rank so it is reported, not silently dropped.
        for r in range(world):
            row = {"sweep": sweep_name, "point": p, "rank": r}
            row.update(attrs)
            for name, arr in data.items():
                v = arr[r]
                row[name] = v if isinstance(v, np.ndarray) else _py(v)
            rows.append(row)
    return _rows_to_table(rows, units, desc, ["sweep", "point"] + keys)


# 1-D per-rank datasets ([world]) of columnar sweeps, for the case where the number of points
# equals the world size and the shape alone cannot tell them from per-point key arrays.
PER_RANK_1D_NAMES = {"partner_rank", "corrupt_echoes"}


def _is_key_column(name, units):
    """Shared per-point arrays are keys (operation, group, message size), except measured
    values (times, rates) and check results, which are metrics."""
    u = str(units or "")
    if u == "s" or u.endswith("/s"):
        return False
    return not any(w in name for w in ("wrong", "error", "time", "bw", "bandwidth"))


def _columnar_layout(group, world, sweep_name):
    """Shared 1-D datasets of length P are per-point columns; per-rank [world, P, ...] metrics."""
    datasets = {k: v for k, v in group.items() if isinstance(v, h5py.Dataset)}
    # The number of points P, from (in order): shared 1-D per-point arrays (the sweep's
    # `points` attribute picks among their lengths); else, when the sweep has [world]
    # datasets and no [world, world] matrix, one point (the [world, k] datasets are then
    # per-iteration arrays, as in the memory sweep); else the second dimension of the
    # per-rank datasets ([sender, receiver] matrices: one row per receiver).
    shared_lengths = [v.shape[0] for v in datasets.values() if v.ndim == 1 and v.shape[0] != world]
    attr_points = int(_py(group.attrs["points"])) if "points" in group.attrs else None
    npoints = None
    if shared_lengths:
        npoints = attr_points if attr_points in shared_lengths else max(set(shared_lengths), key=shared_lengths.count)
    elif any(v.ndim == 1 and v.shape[0] == world for v in datasets.values()) and \
            not any(v.ndim == 2 and v.shape == (world, world) for v in datasets.values()):
        npoints = 1
    else:
        for v in datasets.values():
            if v.ndim >= 2 and v.shape[0] == world:
                npoints = v.shape[1]
                break
    if npoints is None and attr_points is not None:
        npoints = attr_points
    single = npoints == 1 and not shared_lengths
    shared, per_point, per_rank_only = {}, {}, {}
    units, desc = {}, {}
    for k, ds in datasets.items():
        n0 = ds.shape[0] if ds.ndim else None
        if ds.ndim == 1 and n0 == npoints and (n0 != world or k not in PER_RANK_1D_NAMES):
            shared[k] = _read_dataset(ds)
        elif single and ds.ndim >= 2 and n0 == world:
            per_point[k] = _read_dataset(ds)[:, None]  # [world, 1, k...]: one array per rank
        elif ds.ndim >= 2 and n0 == world and ds.shape[1] == npoints:
            per_point[k] = _read_dataset(ds)
        elif ds.ndim == 1 and n0 == world:
            per_rank_only[k] = _read_dataset(ds)
        else:
            continue
        units[k], desc[k] = _meta(ds)
    if npoints is None:
        npoints = 1 if per_rank_only else 0
    # Built column by column (rows point-major, rank-minor): a large run has
    # points x ranks rows, too many to assemble one dict at a time.
    n = npoints * world
    cols = {"sweep": np.array([sweep_name] * n, dtype=object),
            "point": np.repeat(np.array([f"point_{i:04d}" for i in range(npoints)], dtype=object), world),
            "rank": np.tile(np.arange(world, dtype=np.int64), npoints)}
    for k, v in shared.items():
        cols[k] = _tighten(np.repeat(np.asarray(v, dtype=object), world)) if v.dtype == object \
            else np.repeat(v, world)
    for k, v in per_point.items():
        moved = np.swapaxes(v, 0, 1)  # [P, world, ...]
        if moved.ndim == 2:
            cols[k] = moved.reshape(n)
        else:
            flat = moved.reshape((n,) + moved.shape[2:])
            arr = np.empty(n, dtype=object)
            for i in range(n):
                arr[i] = flat[i]
            cols[k] = arr
    for k, v in per_rank_only.items():
        cols[k] = np.tile(v, npoints)
    keys = [k for k in shared if _is_key_column(k, units.get(k))]
    return Table(cols, units, desc, ["sweep", "point"] + keys)


def _rows_to_table(rows, units, desc, keys):
    names = []
    for r in rows:
        names += [n for n in r if n not in names]
    cols = {}
    for n in names:
        arr = np.empty(len(rows), dtype=object)
        for i, r in enumerate(rows):
            arr[i] = r.get(n)
        cols[n] = _tighten(arr)
    return Table(cols, units, desc, [k for k in keys if k in cols])


def load(path):
    """Loads one ringbench file. Raises RingbenchFileError with a clear message."""
    return Run(path)


def load_many(paths):
    """Loads several files (a scaling series); a directory stands for every .h5 in it."""
    files = []
    for p in paths:
        if os.path.isdir(p):
            found = sorted(os.path.join(p, n) for n in os.listdir(p) if n.endswith(".h5"))
            if not found:
                raise RingbenchFileError(f"{p}: directory holds no .h5 files")
            files += found
        else:
            files.append(p)
    return [Run(p) for p in files]


def combined_table(runs, sweep_types):
    """The tables of every sweep of the given types across runs, with run and world_size columns."""
    parts = []
    for i, run in enumerate(runs):
        for s in run.sweeps_of_type(sweep_types):
            t = s.table
            if not len(t):
                continue
            cols = dict(t.columns)
            cols["run"] = np.array([os.path.basename(run.path)] * len(t), dtype=object)
            cols["world_size"] = np.full(len(t), run.world_size, dtype=np.int64)
            parts.append(Table(cols, t.units, t.descriptions, t.keys))
    return Table.concat(parts)
