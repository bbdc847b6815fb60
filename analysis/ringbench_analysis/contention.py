"""The contention sweep (docs/sweeps/contention.md): the same workloads run alone, then
concurrently with every rank unbound, then concurrently bound under each policy, with GPU
and system monitor series. This module turns one such sweep into pandas tables, per-phase
statistics, one verdict per binding policy, and the report's "Contention" section.

    from ringbench_analysis import reader, contention
    run = reader.load("results/contention.h5")
    c = contention.read(run.sweeps["contention"])
    c.samples          # one row per (point, measuring rank, iteration): phase, workload, time_s
    c.placement        # one row per (point, rank): role, cpuset, nodeset, phase_start_s, phase_end_s
    c.monitor          # one row per (rank, sample): t_s and every series (NaN: not measured)
    s = contention.summary(c)      # per point (phase, workload): median_s, cv, p95_s, p99_s,
                                   # slowdown, worst_slowdown, spread
    for v in contention.verdicts(s):
        print(v["sentence"])       # "numa binding cut CV from 0.12 to 0.03 and slowdown ..."

Definitions (docs/analysis.md, "Contention"): each rank's statistics come from its own
per-iteration times; a point's number is the median over its measuring ranks of that
statistic, except `worst_slowdown` (the largest) and `spread` (largest / smallest rank median).
"""
import math
import os
import warnings

import numpy as np
import pandas as pd

from . import reader

# ---- every name of the file layout, in one place: a renamed dataset is a one-line change ----
KEYS = {"phase": "phase", "workload": "workload", "binding": "binding", "path": "path",
        "rows": "rows"}
METRICS = {"time": "time_s", "role": "role", "cpuset": "cpuset", "nodeset": "nodeset",
           "start": "phase_start_s", "end": "phase_end_s", "error": "error"}
# The keys that say what was measured: a point of another phase with the same values is the
# same measurement under other conditions (slowdown, verdicts, tuning mismatch). Other keys
# (iterations, label) describe the point and are kept in Contention.points only.
SHAPE_KEYS = (KEYS["workload"], KEYS["path"], KEYS["rows"])
MONITOR_GROUP = "monitor"
# The sweep's own tuning mismatch per phase (src/sweeps/contention.cpp), cross-checked against
# tuning_mismatch() below: phase, shapes, mismatched, fraction, changes; attribute reference.
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

# ---- the verdict rule (docs/analysis.md): a change counts only beyond the noise ----
Z = 2.0                 # how many combined standard errors a change must exceed
TIME_NOISE_FLOOR = 0.02  # ... and at least this relative change of the median time
CV_NOISE_FLOOR = 0.01    # ... and at least this absolute change of the CV
CV_DDOF = 1              # CV = sample standard deviation (n - 1) / mean


class ContentionError(Exception):
    """A contention sweep whose layout this analysis cannot read (names the dataset)."""


class Contention:
    """One contention sweep read into DataFrames (see the module docstring)."""

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
    """One row per (point, rank): the point's keys, role, cpuset, nodeset and phase stamps."""
    world, n = sweep.world, sweep.npoints
    cols = {"point": np.repeat(np.arange(n), world), "rank": np.tile(np.arange(world), n)}
    for k in points.columns:
        cols[k] = np.repeat(points[k].to_numpy(), world)
    for col, name, fill in (("role", METRICS["role"], MEASURE), ("cpuset", METRICS["cpuset"], ""),
                            ("nodeset", METRICS["nodeset"], ""), ("error", METRICS["error"], ""),
                            ("phase_start_s", METRICS["start"], np.nan),
                            ("phase_end_s", METRICS["end"], np.nan)):
        v = sweep.metrics.get(name)
        cols[col] = (np.full(n * world, fill, dtype=object if isinstance(fill, str) else float)
                     if v is None else np.swapaxes(v, 0, 1).reshape(n * world))
    out = pd.DataFrame(cols)
    for col in ("phase_start_s", "phase_end_s"):
        out[col] = reader.numbers(out[col])
    for col in ("role", "cpuset", "nodeset", "error"):
        out[col] = out[col].astype(str)
    return out


def _samples(points, placement, times):
    """Long table of the finite per-iteration times of measuring ranks."""
    world, n, iters = times.shape
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


# ---- statistics ---------------------------------------------------------------------------
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


def policy_of(phase):
    """'concurrent_bound:numa' -> 'numa'; other phases -> None."""
    return phase[len(BOUND_PREFIX):] if str(phase).startswith(BOUND_PREFIX) else None


def phase_spans(c):
    """[(phase, start_s, end_s)] in run order, on the monitors' clock: from the earliest start
    to the latest end over the phase's points and ranks (feeders included)."""
    out = []
    for ph in c.phases:
        rows = c.placement[c.placement[KEYS["phase"]] == ph]
        t0 = np.nanmin(rows["phase_start_s"], initial=np.inf)
        t1 = np.nanmax(rows["phase_end_s"], initial=-np.inf)
        if np.isfinite(t0) and np.isfinite(t1) and t1 > t0:
            out.append((ph, float(t0), float(t1)))
    return out


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


# ---- verdicts -----------------------------------------------------------------------------
def _median_se(cv, n):
    """Relative standard error of a median of n samples with this CV (normal samples:
    sqrt(pi/2) * sigma / sqrt(n))."""
    return 1.2533 * cv / math.sqrt(max(n, 1))


def _cv_se(cv, n):
    """Standard error of a sample CV (normal samples: cv / sqrt(2 (n - 1)))."""
    return cv / math.sqrt(max(2 * (n - 1), 1))


def _pct(slowdown):
    """Slowdown 1.18 -> '18 %' (how much slower than alone)."""
    x = (slowdown - 1) * 100
    return f"{x:.0f} %" if abs(x) >= 10 or abs(x - round(x)) < 0.05 else f"{x:.1f} %"


def _cv(v):
    return f"{v:.2f}" if v >= 0.01 else f"{v:.1g}"


def fmt_time(v):
    if v is None or not math.isfinite(v):
        return "-"
    for f, u in ((1, "s"), (1e-3, "ms"), (1e-6, "us")):
        if v >= f:
            return f"{v / f:.3g} {u}"
    return f"{v * 1e9:.3g} ns"


def shape_label(row, keys):
    """'triad', 'attention (flash, rows 8192)': a path or rows the workload lacks ("", 0) is left out."""
    vals = [f"rows {row[k]}" if k == KEYS["rows"] else str(row[k]) for k in keys
            if str(row[k]) not in ("", "0")]
    return vals[0] + (f" ({', '.join(vals[1:])})" if len(vals) > 1 else "") if vals else "?"


def _change(u, b):
    """(time state, CV state): 'better' | 'worse' | 'same' (within noise), and the numbers."""
    n = min(u["n"], b["n"])
    dt = b["median_s"] / u["median_s"] - 1
    band_t = max(TIME_NOISE_FLOOR, Z * math.hypot(_median_se(u["cv"], n), _median_se(b["cv"], n)))
    dcv = b["cv"] - u["cv"]
    band_cv = max(CV_NOISE_FLOOR, Z * math.hypot(_cv_se(u["cv"], n), _cv_se(b["cv"], n)))

    def state(d, band):
        return "better" if d < -band else "worse" if d > band else "same"
    return {"time": state(dt, band_t), "cv": state(dcv, band_cv), "time_change": dt,
            "time_band": band_t, "cv_change": dcv, "cv_band": band_cv}


def _clauses(u, b):
    """{metric: (from-to words, a -> b words)} for CV and slowdown (median time without alone)."""
    out = {"cv": (f"CV from {_cv(u['cv'])} to {_cv(b['cv'])}", f"CV {_cv(u['cv'])} -> {_cv(b['cv'])}")}
    if math.isfinite(u["slowdown"]) and math.isfinite(b["slowdown"]):
        out["time"] = (f"slowdown from {_pct(u['slowdown'])} to {_pct(b['slowdown'])}",
                       f"slowdown {_pct(u['slowdown'])} -> {_pct(b['slowdown'])}")
    else:
        out["time"] = (f"median time from {fmt_time(u['median_s'])} to {fmt_time(b['median_s'])}",
                       f"median time {fmt_time(u['median_s'])} -> {fmt_time(b['median_s'])}")
    return out


def verdict(policy, shape, u, b):
    """The sentence and numbers for one bound policy against concurrent_unbound on one shape.
    Helped: CV or the median time (slowdown) improved beyond the noise and neither got worse
    beyond it; anything else 'did not help'."""
    base = {"policy": policy, "shape": shape}
    for row, ph in ((u, UNBOUND), (b, BOUND_PREFIX + policy)):
        if not (row["ranks"] and math.isfinite(row["median_s"]) and math.isfinite(row["cv"])):
            return dict(base, helped=None, sentence=f"{policy} binding: no verdict on {shape}: "
                        f"{ph} has no timed iterations of it.")
    ch = _change(u, b)
    words = _clauses(u, b)
    order = ("cv", "time")
    better = [words[m][0] for m in order if ch[m] == "better"]
    worse = [words[m][0].replace(" from ", " rose from ", 1) for m in order if ch[m] == "worse"]
    same = [words[m][1] for m in order if ch[m] == "same"]
    noise = (f"; {' and '.join(same)} {'is' if len(same) == 1 else 'are'} within noise" if same else "")
    helped = bool(better) and not worse
    if helped:
        sentence = f"{policy} binding cut {' and '.join(better)} on {shape}{noise}."
    elif worse:
        fell = [w.replace(" from ", " fell from ", 1) for w in better]
        sentence = (f"{policy} binding did not help on {shape}: {' and '.join(worse)}"
                    + (f" while {' and '.join(fell)}" if fell else "") + f"{noise}.")
    else:
        sentence = f"{policy} binding did not help on {shape}: {' and '.join(same)} are within noise."
    return dict(base, helped=helped, sentence=sentence, **ch,
                unbound={k: u[k] for k in ("median_s", "cv", "slowdown")},
                bound={k: b[k] for k in ("median_s", "cv", "slowdown")})


def verdicts(table, shape_keys=None):
    """One verdict per (bound policy, shape) against concurrent_unbound, policies in run order.
    table: summary(c). [] without a concurrent_unbound phase or without bound phases."""
    shape_keys = shape_keys or [k for k in SHAPE_KEYS if k in table]
    phase = KEYS["phase"]
    unbound = {tuple(r[k] for k in shape_keys): r for _, r in table[table[phase] == UNBOUND].iterrows()}
    out = []
    for ph in dict.fromkeys(table[phase]):
        policy = policy_of(ph)
        if policy is None:
            continue
        for _, b in table[table[phase] == ph].iterrows():
            u = unbound.get(tuple(b[k] for k in shape_keys))
            if u is not None:
                out.append(verdict(policy, shape_label(b, shape_keys), u, b))
    return out


# ---- monitor panels -----------------------------------------------------------------------
# What each panel draws: (title, y label, [(series column, label, scale, style, rate)],
# families: the heads of the Monitor::unavailable lines that explain it). rate: plot
# d(counter)/dt. A line "<family>: why" explains every panel of the family, "<family> <dataset>:
# why" (e.g. "gpu power_w: ...") the panels drawing that dataset, "monitor: why" every panel.
PANELS = [
    ("GPU clocks", "clock (MHz)",
     [(MONITOR["sm_clock"], "SM", 1e-6, "-", False), (MONITOR["mem_clock"], "memory", 1e-6, "--", False)],
     ("gpu",)),
    ("GPU power", "power (W)", [(MONITOR["power"], "power", 1, "-", False)],
     ("gpu",)),
    ("GPU temperature", "temperature (°C)", [(MONITOR["temperature"], "temperature", 1, "-", False)],
     ("gpu",)),
    ("PCIe throughput", "throughput (GB/s)",
     [(MONITOR["pcie_tx"], "TX", 1e-9, "-", False), (MONITOR["pcie_rx"], "RX", 1e-9, "--", False)],
     ("gpu",)),
    ("CPU utilisation (node)", "busy (% of a CPU)",
     [(MONITOR["cpu_busy"] + "_mean", "mean over CPUs", 100, "-", False),
      (MONITOR["cpu_busy"] + "_max", "max over CPUs", 100, "--", False)],
     ("cpu_busy",)),
    ("Context switches per rank", "switches per second",
     [(MONITOR["involuntary"], "involuntary", 1, "-", True),
      (MONITOR["voluntary"], "voluntary", 1, ":", True)],
     ("context switches",)),
    ("CPU migrations per rank", "migrations per second",
     [(MONITOR["migrations"], "migrations", 1, "-", True)],
     ("migrations",)),
]
PANEL_YLIM = {"CPU utilisation (node)": (0, 105)}  # a full scale: 100 % must look full
MAX_RANK_LINES = 8  # more ranks than this: the per-rank counters are summed into one line


def _rate(t, v):
    ok = np.isfinite(t) & np.isfinite(v)
    t, v = t[ok], v[ok]
    if len(t) < 2:
        return np.array([]), np.array([])
    dt = np.diff(t)
    good = dt > 0
    return t[1:][good], (np.diff(v)[good] / dt[good])


def _panel_lines(c, series, roles):
    """[(label, t, y, style, rank)] of one panel: every rank whose series has a finite value
    (rank -1: a sum over ranks). The plot gives each rank one colour, each series a style."""
    lines = []
    many = len(c.monitor["rank"].unique()) > MAX_RANK_LINES
    for name, what, scale, style, rate in series:
        if name not in c.monitor:
            continue
        per = []
        for r, g in c.monitor.groupby("rank"):
            t, v = g["t_s"].to_numpy(float), g[name].to_numpy(float)
            t, v = _rate(t, v) if rate else (t, v)
            if np.isfinite(v).any():
                per.append((r, t, v * scale))
        if many and rate and per:  # a sum over ranks on a common time grid
            grid = per[0][1]
            total = sum(np.interp(grid, t, v) for _, t, v in per)
            lines.append((f"{what}, sum of {len(per)} ranks", grid, total, style, -1))
            continue
        for r, t, v in per:
            tag = _whose(name, r, roles)
            lines.append((f"{what}, {tag}" if len(series) > 1 else tag, t, v, style, r))
    return lines


def _whose(name, rank, roles):
    """Legend words for a rank's series: the GPU it watches, its node, or the rank itself."""
    if name.startswith(MONITOR["cpu_busy"]):
        return f"node of rank {rank}"
    if name in _GPU_SERIES:
        return f"GPU of rank {rank}"
    return f"rank {rank}" + (f" ({roles[rank]})" if roles.get(rank, MEASURE) != MEASURE else "")


_GPU_SERIES = {MONITOR[k] for k in ("sm_clock", "mem_clock", "power", "energy", "temperature",
                                    "gpu_util", "mem_util", "throttle", "pcie_tx", "pcie_rx",
                                    "memory_used")}


def _explains(head, families, names):
    if head in families or head == "monitor":
        return True
    family, _, what = head.partition(" ")
    return family in families and any(n in what.split("/") for n in names)


def _why_unavailable(c, names, tags, backend):
    """The Monitor::unavailable lines that name this panel's metrics, else a plain reason."""
    if c.monitor_missing:
        return c.monitor_missing
    found = []
    for lines in c.unavailable.values():
        for line in lines:
            if _explains(line.split(":", 1)[0].strip().lower(), tags, names) and line not in found:
                found.append(line)
    if found:
        return "; ".join(found)
    if not any(n in c.monitor_group for n in names):
        return f"{', '.join(names)} not in {MONITOR_GROUP}/"
    if "gpu" in tags and (MONITOR["gpu_bus"] in c.monitor_group and not c.gpu_watchers()):
        return ("no rank watched a GPU (" + (f"backend {backend}" if backend else "no GPU") + ")")
    return "every sample is NaN and the file gives no reason"


def monitor_panels(c, backend=""):
    """[{title, ylabel, lines: [(label, t_s, y, style, rank)], unavailable: reason or None}] in
    PANELS order; a panel whose series are all NaN (or absent) gets its reason, no lines."""
    roles = {}
    if len(c.placement):
        for r, g in c.placement.groupby("rank"):
            roles[int(r)] = MEASURE if (g["role"] == MEASURE).any() else str(g["role"].iloc[0])
    out = []
    for title, ylabel, series, tags in PANELS:
        lines = _panel_lines(c, series, roles) if len(c.monitor) else []
        why = None if lines else _why_unavailable(c, [s[0].replace("_mean", "").replace("_max", "")
                                                      for s in series], tags, backend)
        out.append({"title": title, "ylabel": ylabel, "lines": lines, "unavailable": why,
                    "ylim": PANEL_YLIM.get(title)})
    return out


# ---- the report's "Contention" section -----------------------------------------------------
def box_data(c, table):
    """[(shape label, [(phase, per-iteration times of measuring ranks, slowdown, cv)])]."""
    shape = c.shape_keys
    out = {}
    for _, row in table.iterrows():
        label = shape_label(row, shape)
        t = c.samples.loc[c.samples["point"] == row["point"], "time_s"].to_numpy(float)
        out.setdefault(label, []).append((row[KEYS["phase"]], t, float(row["slowdown"]),
                                          float(row["cv"])))
    return list(out.items())


def _md_table(headers, rows):
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return out + ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]


def _num(v, fmt):
    return fmt(v) if v is not None and isinstance(v, (int, float)) and math.isfinite(v) else "-"


def _phase_rows(c, table, mismatch):
    """Rows of the per-phase table (one per point, in run order)."""
    shape = c.shape_keys
    mis = {} if mismatch is None else {r["phase"]: r for _, r in mismatch.iterrows()}
    rows = []
    for _, r in table.iterrows():
        m = mis.get(r[KEYS["phase"]])
        mtxt = ("-" if m is None or not m["shapes"] else "reference" if m["phase"] == m["reference"]
                else f"{m['mismatched']}/{m['shapes']}")
        rows.append([r[KEYS["phase"]], r[KEYS["binding"]] or "-", shape_label(r, shape),
                     r["ranks"], _num(r["median_s"], fmt_time), _num(r["cv"], _cv),
                     _num(r["p95_s"], fmt_time), _num(r["p99_s"], fmt_time),
                     _num(r["slowdown"], _pct), _num(r["worst_slowdown"], _pct),
                     _num(r["spread"], lambda v: f"{v:.3f}")]
                    + ([mtxt] if mismatch is not None else []))
    return rows


def _binding_rows(c, max_ranks=16):
    """Per rank and phase: the cpuset (and nodeset) applied, as recorded."""
    rows = []
    pl = c.placement.drop_duplicates(["rank", KEYS["phase"]])
    for r in sorted(pl["rank"].unique())[:max_ranks]:
        mine = pl[pl["rank"] == r].set_index(KEYS["phase"])
        role = "measure" if (c.placement[c.placement["rank"] == r]["role"] == MEASURE).any() else "feeder"
        cells = []
        for ph in c.phases:
            x = mine.loc[ph] if ph in mine.index else None
            cells.append("-" if x is None or not str(x["cpuset"]) else
                         f"{x['cpuset']}" + (f" (mem {x['nodeset']})" if str(x["nodeset"]) else ""))
        rows.append([r, role] + cells)
    return rows


def _json_rows(df):
    if df is None:
        return None
    return [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
            for row in df.to_dict("records")]


def section(c, out_dir, tag, backend="", heading="###"):
    """(markdown lines, json dict, {plot name: file}, {plot name: why not}) for one sweep."""
    stats = rank_stats(c)
    table = summary(c, stats)
    by_rank = per_rank(c, stats)
    found = verdicts(table)
    mismatch = tuning_mismatch(c, table)
    disagree = mismatch_disagreement(mismatch, stored_tuning_mismatch(c))
    ranks = c.measuring_ranks()
    feeders = sorted(set(c.placement["rank"]) - set(ranks))
    md = [f"Sweep `{c.name}` ({c.sweep.status}): {len(ranks)} measuring rank(s)"
          + (f", {len(feeders)} feeder(s) (ranks {', '.join(map(str, feeders))}) loading the node"
             if feeders else "") + f"; phases {', '.join(c.phases)}.", ""]
    md += _verdict_lines(found, heading) + _error_lines(c)
    md += _table_lines(c, table, mismatch, heading)
    md += _per_rank_lines(c, by_rank, heading)
    if disagree:
        md += ["**Warning:** the file's tuning_mismatch/ differs from the one computed here: "
               + "; ".join(disagree) + ".", ""]
    lines, drawn, why, gone = _plot_lines(c, table, out_dir, tag, backend, heading)
    md += lines
    js = {"file": c.path, "sweep": c.name, "table": _json_rows(table), "per_rank": _json_rows(by_rank),
          "verdicts": found,
          "tuning_mismatch": _json_rows(mismatch),
          "tuning_mismatch_disagrees": disagree,
          "unavailable": {p["title"]: p["unavailable"] for p in gone}}
    return md, js, {f"contention_{tag}_{k}": v for k, v in drawn.items()}, \
        {f"contention_{tag}_{k}": v for k, v in why.items()}


def _verdict_lines(found, heading):
    md = [f"{heading} Verdicts", ""]
    if not found:
        return md + [f"No verdict: the sweep needs a `{UNBOUND}` phase and at least one "
                     "`concurrent_bound:<policy>` phase of the same workload."]
    md += [f"- {v['sentence']}" for v in found]
    return md + ["", f"Each bound policy against `{UNBOUND}` on the same workload. A change "
                 f"counts only beyond the noise: {Z:g} combined standard errors of the two values "
                 f"and at least {TIME_NOISE_FLOOR:.0%} of the median time or {CV_NOISE_FLOOR} of CV "
                 "(docs/analysis.md, \"Contention\")."]


def _table_lines(c, table, mismatch, heading):
    """The per-phase table, the tuning mismatch (with `path`) and the bindings applied."""
    md = ["", f"{heading} Per phase", "",
          "Per workload and phase, the median over the measuring ranks of each rank's statistic "
          "of its per-iteration times; slowdown = rank median / the same rank's `alone` median "
          "(worst: the largest over ranks); spread = slowest / fastest rank median.", ""]
    headers = ["phase", "binding", "workload", "ranks", "median", "CV", "p95", "p99", "slowdown",
               "worst rank", "spread"] + (["path mismatches"] if mismatch is not None else [])
    md += _md_table(headers, _phase_rows(c, table, mismatch)) + [""]
    if mismatch is not None:
        md += _mismatch_lines(mismatch)
    md += [f"{heading} Bindings applied", "",
           "The cpuset (and memory policy) each rank ran under, per phase:", ""]
    return md + _md_table(["rank", "role"] + c.phases, _binding_rows(c)) + [""]


def _per_rank_lines(c, by_rank, heading):
    """Per GPU (measuring rank) and phase: the rank's own median, CV and slowdown, so one GPU
    that suffers more than the others shows (the per-phase table gives medians over ranks)."""
    if len(c.measuring_ranks()) < 2 or not len(by_rank):
        return []
    gpus = by_rank["gpu_index"].notna().any()
    md = [f"{heading} Per {'GPU' if gpus else 'rank'}", "",
          "Each measuring rank's own statistics of its per-iteration times: median (CV, slowdown "
          "against its own `alone` median) per phase.", ""]
    headers = ["workload", "GPU (rank)" if gpus else "rank"] + c.phases
    rows = []
    for _, r in by_rank.iterrows():
        who = (f"GPU {int(r['gpu_index'])} (rank {r['rank']})" if gpus and pd.notna(r["gpu_index"])
               else f"rank {r['rank']}")
        cells = []
        for ph in c.phases:
            med, cv, slow = (r.get(f"{ph} {m}", math.nan) for m in ("median_s", "cv", "slowdown"))
            cells.append("-" if not math.isfinite(med) else
                         f"{fmt_time(med)} ({_num(cv, _cv)}" + ("" if ph == ALONE else f", {_num(slow, _pct)}") + ")")
        rows.append([shape_label(r, c.shape_keys), who] + cells)
    return md + _md_table(headers, rows) + [""]


def _plot_lines(c, table, out_dir, tag, backend, heading):
    """(markdown, drawn {name: file}, not drawn {name: why}, the unavailable panels)."""
    drawn, why, panels = _section_plots(c, table, out_dir, tag, backend)
    md = []
    for name, title in (("boxes", "Per-iteration times per phase"), ("monitor", "Monitors")):
        md += [f"{heading} {title}", ""]
        md += [f"![{title}]({drawn[name]})" if name in drawn else f"Not plotted: {why[name]}", ""]
    gone = [p for p in panels if p["unavailable"]]
    if gone and "monitor" in drawn:
        by_reason = {}
        for p in gone:
            by_reason.setdefault(p["unavailable"], []).append(p["title"])
        md += ["Monitor panels without data:", ""]
        md += [f"- {', '.join(titles)}: unavailable: {reason}" for reason, titles in by_reason.items()]
        md.append("")
    return md, drawn, why, gone


def _error_lines(c, most=20):
    """The workloads that failed on a rank (the `error` metric), most lines at most."""
    bad = c.placement[c.placement["error"].str.len() > 0]
    if not len(bad):
        return []
    out = ["", f"**Failed on some ranks** ({len(bad)} rank-points; their iterations are not "
               "in the numbers):", ""]
    out += [f"- rank {r['rank']}, {r[KEYS['phase']]}, {r[KEYS['workload']]}: {r['error']}"
            for _, r in bad.head(most).iterrows()]
    return out + ([f"- ... {len(bad) - most} more"] if len(bad) > most else [])


def _mismatch_lines(mismatch):
    md = ["Tuning mismatch (shapes timed with more than one kernel path whose fastest path "
          f"differs from `{mismatch['reference'].iloc[0]}`):", ""]
    md += _md_table(["phase", "shapes", "mismatched", "fraction", "changes"],
                    [[r["phase"], r["shapes"], r["mismatched"], _num(r["fraction"], lambda v: f"{v:.0%}"),
                      "; ".join(r["changes"]) or "-"] for _, r in mismatch.iterrows()])
    return md + [""]


def _section_plots(c, table, out_dir, tag, backend):
    from . import plots  # matplotlib only when a report is drawn
    drawn, why = {}, {}
    panels = monitor_panels(c, backend)
    jobs = (("boxes", lambda: plots.contention_boxes(
                box_data(c, table), c.phases, out_dir, f"contention_{tag}_boxes.png",
                f"Contention sweep '{c.name}': per-iteration times per phase")),
            ("monitor", lambda: plots.contention_monitor(
                panels, phase_spans(c), c.phases, out_dir, f"contention_{tag}_monitor.png",
                f"Contention sweep '{c.name}': monitors (phases shaded; rank clocks "
                "start together)")))
    for name, job in jobs:
        try:
            drawn[name] = os.path.basename(job())
        except plots.NoData as e:
            why[name] = str(e)
    return drawn, why, panels


def report_section(runs, out_dir, summary_json):
    """The report's "Contention" section: [] when no file has a contention sweep. Adds
    summary_json["contention"], its plots, and a problem for a sweep it cannot read."""
    found = [(run, s) for run in runs for s in run.sweeps_of_type(reader.CONTENTION_TYPES)]
    if not found:
        return []
    md = ["## Contention", ""]
    for i, (run, s) in enumerate(found):
        label = f"`{s.name}` of `{os.path.basename(run.path)}`"
        tag = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in
                      (s.name if len(found) == 1 else f"{i}_{s.name}"))
        if len(found) > 1:
            md += [f"### {label}", ""]
        try:
            c = read(s)
        except ContentionError as e:
            md += [f"Sweep {label} not analysed: {e}", ""]
            summary_json["problems"].append(f"{os.path.basename(run.path)}: contention sweep "
                                            f"'{s.name}' not analysed: {e}")
            continue
        lines, js, drawn, why = section(c, out_dir, tag, str(run.attrs.get("backend", "")),
                                        heading="####" if len(found) > 1 else "###")
        md += lines
        summary_json.setdefault("contention", []).append(js)
        summary_json["plots"].update(drawn)
        summary_json["not_plotted"].update(why)
    return md
