"""Reading a contention sweep (docs/sweeps/contention.md) into pandas tables: its points,
per-iteration times of the measuring ranks, placement per (point, rank), the monitor series and
the sweep's own tuning_mismatch/ group. Every name of the file layout lives here.
"""
import warnings

import numpy as np
import pandas as pd

from . import reader

# ---- every name of the file layout, in one place: a renamed dataset is a one-line change ----
KEYS = {"phase": "phase", "workload": "workload", "binding": "binding", "path": "path",
        "rows": "rows"}
METRICS = {"time": "time_s", "role": "role", "cpuset": "cpuset", "nodeset": "nodeset",
           "start": "phase_start_s", "end": "phase_end_s", "error": "error",
           "note": "binding_note"}
# The keys that say what was measured: a point of another phase with the same values is the
# same measurement under other conditions (slowdown, verdicts, tuning mismatch). Other keys
# (iterations, label) describe the point and are kept in Contention.points only.
SHAPE_KEYS = (KEYS["workload"], KEYS["path"], KEYS["rows"])
MONITOR_GROUP = "monitor"
# The sweep's own tuning mismatch per phase (src/sweeps/contention.cpp), cross-checked against
# contention_stats.tuning_mismatch(): phase, shapes, mismatched, fraction, changes; attribute
# reference.
MISMATCH_GROUP = "tuning_mismatch"
MONITOR = {"t": "t_s", "sm_clock": "sm_clock_hz", "mem_clock": "mem_clock_hz",
           "power": "power_w", "energy": "energy_j", "temperature": "temperature_c",
           "gpu_util": "gpu_util", "mem_util": "mem_util", "throttle": "throttle_reasons",
           "pcie_tx": "pcie_tx_Bps", "pcie_rx": "pcie_rx_Bps", "memory_used": "memory_used_bytes",
           "cpu_busy": "cpu_busy", "numa_hit": "numa_hit", "numa_miss": "numa_miss",
           "voluntary": "voluntary_switches", "involuntary": "involuntary_switches",
           "migrations": "migrations", "unavailable": "unavailable",
           "gpu_bus": "gpu_pci_bus_id"}
ALONE, UNBOUND, BOUND_PREFIX = "alone", "concurrent_unbound", "concurrent_bound:"
MEASURE = "measure"


class ContentionError(Exception):
    """A contention sweep whose layout this analysis cannot read (names the dataset)."""


class Contention:
    """One contention sweep read into DataFrames (see contention.py's docstring)."""

    def __init__(self, sweep, points, placement, samples, monitor):
        self.sweep, self.name, self.path = sweep, sweep.name, sweep.run.path
        self.points, self.placement, self.samples = points, placement, samples
        # monitor: (series, {rank: unavailable lines}, the monitor/ group as stored, why the
        # series are absent or "")
        self.monitor, self.unavailable, self.monitor_group, self.monitor_missing = monitor

    def gpu_watchers(self):
        """{rank: PCI bus id} of the ranks that recorded a GPU's series ({} when the file does
        not say: then every rank's series is looked at)."""
        ids = self.monitor_group.get(MONITOR["gpu_bus"])
        if ids is None:
            return {}
        return {r: str(b) for r, b in enumerate(np.asarray(ids, dtype=object).ravel()) if str(b)}

    @property
    def shape_keys(self):
        """Keys that say what was measured (workload, path, rows), not when or how bound."""
        return [k for k in SHAPE_KEYS if k in self.points.columns]

    @property
    def phases(self):
        """Phase names in run order (the file's phase-major point order)."""
        return list(dict.fromkeys(self.points[KEYS["phase"]]))

    def measuring_ranks(self):
        return sorted(self.placement.loc[self.placement["role"] == MEASURE, "rank"].unique())


def is_contention(sweep):
    return sweep.type in reader.CONTENTION_TYPES


def _need(sweep, name, where="metric"):
    have = sweep.metrics if where == "metric" else sweep.points
    if name not in have:
        raise ContentionError(f"{sweep.where}: no {where} '{name}' (contention layout, "
                              "docs/sweeps/contention.md)")
    return have[name]


def read(sweep):
    """Contention of one reader.Sweep of type contention."""
    for k in ("phase", "workload"):
        _need(sweep, KEYS[k], "key")
    if len(sweep.points) == 0:  # a signal inside the alone phase keeps no point
        raise ContentionError(f"{sweep.where}: no points (status "
                              f"'{sweep.attrs.get('status', '?')}': nothing finished to compare)")
    points = sweep.points.copy()
    if KEYS["binding"] not in points:
        points[KEYS["binding"]] = ""
    first = [KEYS["phase"]] + [k for k in SHAPE_KEYS if k in points]  # others after, binding last
    points = points[first + [k for k in points if k not in first + [KEYS["binding"]]] + [KEYS["binding"]]]
    times = np.asarray(_need(sweep, METRICS["time"]), dtype=float)
    if times.ndim != 3:
        raise ContentionError(f"{sweep.where}/{METRICS['time']}: shape {list(times.shape)}, "
                              "expected [world, points, iterations]")
    placement = _placement(sweep, points)
    samples = _samples(points, placement, times)
    return Contention(sweep, points, placement, samples, _monitor(sweep))


def _placement(sweep, points):
    """One row per (point, rank): the point's keys, role, cpuset, nodeset, error, binding_note
    and phase stamps."""
    world, n = sweep.world, sweep.npoints
    cols = {"point": np.repeat(np.arange(n), world), "rank": np.tile(np.arange(world), n)}
    for k in points.columns:
        cols[k] = np.repeat(points[k].to_numpy(), world)
    for col, name, fill in (("role", METRICS["role"], MEASURE), ("cpuset", METRICS["cpuset"], ""),
                            ("nodeset", METRICS["nodeset"], ""), ("error", METRICS["error"], ""),
                            ("binding_note", METRICS["note"], ""),
                            ("phase_start_s", METRICS["start"], np.nan),
                            ("phase_end_s", METRICS["end"], np.nan)):
        v = sweep.metrics.get(name)
        cols[col] = (np.full(n * world, fill, dtype=object if isinstance(fill, str) else float)
                     if v is None else np.swapaxes(v, 0, 1).reshape(n * world))
    out = pd.DataFrame(cols)
    for col in ("phase_start_s", "phase_end_s"):
        out[col] = reader.numbers(out[col])
    for col in ("role", "cpuset", "nodeset", "error", "binding_note"):
        out[col] = out[col].astype(str)
    return out


def _samples(points, placement, times):
    """Long table of the finite per-iteration times of measuring ranks."""
    world, n, _ = times.shape
    measure = (placement["role"].to_numpy() == MEASURE).reshape(n, world).T  # [world, P]
    r, p, i = np.nonzero(np.isfinite(times) & measure[:, :, None])
    out = pd.DataFrame({"point": p, "rank": r, "iteration": i, "time_s": times[r, p, i]})
    return out.join(points, on="point")[["point"] + list(points.columns)
                                        + ["rank", "iteration", "time_s"]].sort_values(
        ["point", "rank", "iteration"], ignore_index=True)


def _monitor(sweep):
    """(long DataFrame per rank and sample, {rank: [unavailable lines]}, the reader.RawGroup,
    why the series are missing or "")."""
    g = reader.read_group(sweep.run.path, f"sweeps/{sweep.name}/{MONITOR_GROUP}")
    if g.missing or MONITOR["t"] not in g:
        return (pd.DataFrame(), {}, g,
                g.missing or f"{MONITOR_GROUP}/{MONITOR['t']} is not in the file")
    t = np.asarray(g.get(MONITOR["t"]), dtype=float)
    world = t.shape[0]
    frames = []
    for r in range(world):
        keep = np.isfinite(t[r])
        cols = {"rank": r, "t_s": t[r][keep]}
        for concept, name in MONITOR.items():
            v = g.get(name)
            if concept in ("t", "unavailable") or v is None or v.dtype.kind not in "fiu":
                continue
            v = np.asarray(v, dtype=float)
            if v.ndim == 2:
                cols[name] = v[r][keep]
            elif v.ndim == 3:  # per CPU or per NUMA node: summaries, since one line per CPU is unreadable
                cols.update(_wide_summary(name, v[r][keep]))
        frames.append(pd.DataFrame(cols))
    return pd.concat(frames, ignore_index=True), _unavailable_lines(g, world), g, ""


def _wide_summary(name, v):
    """[T, C] per CPU or NUMA node -> mean and max over CPUs, or the sum over NUMA nodes."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if name == MONITOR["cpu_busy"]:
            return {f"{name}_mean": np.nanmean(v, axis=1), f"{name}_max": np.nanmax(v, axis=1)}
        total = np.nansum(v, axis=1)
        return {f"{name}_total": np.where(np.isfinite(v).any(axis=1), total, np.nan)}


def _unavailable_lines(g, world):
    """{rank: [line, ...]} from monitor/unavailable [world] (or the group attribute)."""
    per_rank = g.get(MONITOR["unavailable"])
    if per_rank is None:
        text = str(g.attrs.get(MONITOR["unavailable"], ""))
        per_rank = [text] * world
    out = {}
    for r, text in enumerate(list(np.asarray(per_rank, dtype=object).ravel())[:world]):
        lines = [x.strip() for x in str(text).splitlines() if x.strip()]
        if lines:
            out[r] = lines
    return out


def stored_tuning_mismatch(c):
    """The sweep's own tuning_mismatch/ group as a DataFrame (phase, reference, shapes,
    mismatched, fraction, changes as a list); None when the file has none."""
    g = reader.read_group(c.path, f"sweeps/{c.name}/{MISMATCH_GROUP}")
    if "phase" not in g:
        return None
    changes = [[x for x in str(v).split("; ") if x] for v in g.get("changes")]
    return pd.DataFrame({"phase": [str(p) for p in g.get("phase")],
                         "reference": str(g.attrs.get("reference", "")),
                         "shapes": np.asarray(g.get("shapes"), dtype=int),
                         "mismatched": np.asarray(g.get("mismatched"), dtype=int),
                         "fraction": np.asarray(g.get("fraction"), dtype=float), "changes": changes})
