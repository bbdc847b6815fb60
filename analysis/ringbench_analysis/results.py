"""The report's numbers, one pandas DataFrame per kind of result (ring attention, collectives,
ping-pong, p2p, compute, memory). Every number the report shows comes from here, and
report.json holds these frames as records, so the two cannot disagree.

Conventions (docs/analysis.md, "The report"):
- a point's value is the slowest rank's: the largest time, the smallest rate (a ring, a
  collective, a GPU in a data-parallel job waits for its slowest member);
- the overlap calibration's: the lowest rank's overlap efficiency and the highest rank's
  kernel slowdown (the worst, as the run's own table has them);
- a rank's value of per-iteration samples is their median; the CV (std/mean of the slowest
  rank's samples) says how much one iteration differs from the next;
- one-rank collective groups (inter_node on one node) are local copies and measure no link:
  they are left out of every bandwidth number and listed instead.
"""
import math
import os
import re

import numpy as np
import pandas as pd

from . import model, peaks as peaks_mod, pointstats, reader

CV_LIMIT = 0.05          # above: a number is flagged untrustworthy (issue #16)
EFFICIENCY_LIMIT = 1.0   # strong-scaling efficiency or % of peak above 1: a measurement problem



def scheme_name(keys):
    """A point's scheme as the comparisons tell them apart: Ulysses in head groups (the
    point's ulysses_head_groups above 1) as ulysses(G=2), a scheme of its own beside ulysses."""
    scheme = str(keys.get("scheme", "ring"))
    groups = int(keys.get("ulysses_head_groups", 1) or 1)
    return f"{scheme}(G={groups})" if groups > 1 else scheme

def _finite(a):
    a = np.asarray(a, dtype=float).ravel()
    return a[np.isfinite(a)]


def cv(samples):
    """Coefficient of variation (sample std / mean) of finite samples; NaN below 2 samples."""
    a = _finite(samples)
    if a.size < 2 or a.mean() == 0:
        return float("nan")
    return float(a.std(ddof=1) / a.mean())


def _slowest_samples(array, point, higher_is_worse=True):
    """Per-iteration samples of the rank whose median is worst at `point` ([world, P, it])."""
    rows = np.asarray(array[:, point], dtype=float)
    if not rows.size:
        return np.array([])
    rows = rows.reshape(len(rows), -1)
    meds = reader.row_median(rows)  # each rank's median of its finite samples, NaN if none
    if not np.isfinite(meds).any():
        return np.array([])
    i = int(np.nanargmax(meds) if higher_is_worse else np.nanargmin(meds))
    return _finite(rows[i])


def backward_factor(sweep):
    """Backward FLOPs per forward FLOP from the sweep's flop_convention ('backward 2.5x forward')."""
    m = re.search(r"backward\s+([0-9.]+)\s*x", str(sweep.attrs.get("flop_convention", "")))
    return float(m.group(1)) if m else 2.5


def _rate(flop, seconds):
    return flop / seconds / 1e12 if flop and seconds and seconds > 0 else float("nan")


def ring_extras(sweep, span=None):
    """Per point of `span` (default every point): times, per-GPU TFLOP/s (mean FLOPs per rank /
    slowest rank's time) and CV."""
    fwd, bwd, total = (pointstats.over_ranks(sweep, n, "max", span=span)
                       for n in ("forward_time_s", "backward_time_s", "total_time_s"))
    flop = pointstats.over_ranks(sweep, "forward_flop", "mean", span=span)
    it = pointstats.slowest_stats(sweep, "total_time_s", span=span)
    k = backward_factor(sweep)
    out = []
    for i, (fw, bw, tot, f) in enumerate(zip(fwd.tolist(), bwd.tolist(), total.tolist(), flop.tolist())):
        has_bwd = bool(sweep.attrs.get("backward", 1)) and math.isfinite(bw)
        out.append({"forward_ms": fw * 1e3, "backward_ms": bw * 1e3 if has_bwd else float("nan"),
                    "total_ms": tot * 1e3, "forward_flop_per_rank": f,
                    "tflops_fwd": _rate(f, fw), "tflops_bwd": _rate(k * f, bw) if has_bwd else float("nan"),
                    "tflops_total": _rate((1 + k) * f if has_bwd else f, tot), "cv": float(it["cv"][i]),
                    "iterations": int(it["n"][i])})
    return out


# The columns ring_extras adds (missing, NaN, for a point that was not measured).
RING_EXTRA = ("forward_ms", "backward_ms", "total_ms", "forward_flop_per_rank", "tflops_fwd", "tflops_bwd",
              "tflops_total", "cv", "iterations")


def _kernel_text(sweep, keys, p):
    """The path asked for and, in brackets, the paths that ran its blocks (paths_ran, rank 0:
    "flash" or "cudnn 6 / flash 2"); files from before paths_ran give the backend's name."""
    kernel = str(keys.get("kernel", sweep.attrs.get("kernel", "")))
    ran = ""
    if "paths_ran" in sweep.metrics:
        ran = str(sweep.metrics["paths_ran"][0, p])
    if not ran or ran == "-":
        ran = str(sweep.attrs.get("attention_backend", ""))
    return f"{kernel} ({ran})" if ran and ran != kernel else kernel


# The overlap calibration (issue #26) and the rank that speaks for a point, as the run's own
# table reduces them: the least hidden, the most slowed down. NaN where not measured (not the
# ring scheme, a ring of one, files from before the calibration).
OVERLAP = (("overlap_efficiency", "min"), ("backward_overlap_efficiency", "min"),
           ("kernel_slowdown", "max"), ("backward_kernel_slowdown", "max"))


def _overlap(sweep):
    """Per point, the OVERLAP calibration as the run's table reduces it over ranks."""
    picks = {name: pointstats.over_ranks(sweep, name, how) for name, how in OVERLAP}
    return [{name: float(v[p]) for name, v in picks.items()} for p in range(sweep.npoints)]


def transports(ring):
    """The distinct transports that ran the frame's points (empty text left out)."""
    if not len(ring) or "transport" not in ring:
        return []
    return sorted({t for t in ring["transport"] if t})


def describe(runs, name):
    """The file's description of a ring attention metric (the first sweep that has one)."""
    for run in runs:
        for s in run.sweeps_of_type(reader.RING_TYPES):
            if s.descriptions.get(name):
                return s.descriptions[name]
    return ""


def _mask_text(sweep):
    """causal | full, + dilated (LongNet segments) where the sweep has dilation rates."""
    text = "causal" if int(sweep.attrs.get("causal", 0) or 0) else "full"
    rates = sweep.attrs.get("dilation_rates", [])
    return text + (" dilated" if isinstance(rates, list) and rates else "")


def _ring_facts(sweep):
    """ring_frame's numbers of every point of one sweep, each computed over all points at once."""
    return {"extra": ring_extras(sweep), "overlap": _overlap(sweep),
            "bytes_sent": pointstats.over_ranks(sweep, "bytes_sent_bytes", "max").tolist(),
            "transport": pointstats.first_text(sweep, "transport"),
            "transport_reason": pointstats.first_text(sweep, "transport_reason")}


def ring_frame(runs, points, peaks):
    """One row per ring attention point (the report's ring table)."""
    sweeps = {(os.path.basename(r.path), s.name): s for r in runs for s in r.sweeps_of_type(reader.RING_TYPES)}
    facts, eff = {}, {}
    for (cfg, seq), pts in model.series(points, "strong").items():
        for r, _, e in model.scaling(pts, "strong"):
            eff[(cfg, seq, r)] = e
    rows = []
    for pt in points:
        key = (pt["run"], pt["sweep"])
        if key not in facts:
            facts[key] = _ring_facts(sweeps[key])
        s, at, p = sweeps[key], facts[key], pt["point"]
        keys = s.points.iloc[p].to_dict()
        row = {"file": pt["run"], "sweep": pt["sweep"], "point": p, "seq_len": pt["seq_len"],
               "ring_size": pt["ring_size"], "ranks": pt["world_size"], "config": pt["config_label"],
               "layout": str(keys.get("layout", "")), "kernel": _kernel_text(s, keys, p),
               "dtype": str(keys.get("dtype", "")), "causal": bool(s.attrs.get("causal", 0)),
               "mask": _mask_text(s), "scheme": scheme_name(keys),
               "transport": at["transport"][p], "transport_reason": at["transport_reason"][p],
               "bytes_sent": at["bytes_sent"][p] if pt["measured"] else float("nan"),
               "memory": pt.get("memory") if pt.get("memory") is not None else float("nan"),
               "status": pt["status"], "measured": pt["measured"], "parity_mode": pt.get("parity_mode", ""),
               "exposed_wait_pct": 100 * pt["exposed_comm"] if pt["exposed_comm"] is not None else float("nan"),
               "tokens_per_s": pt["throughput"] or float("nan"),
               "strong_efficiency": eff.get((pt["config_label"], pt["seq_len"], pt["ring_size"]), float("nan"))
               if pt["measured"] else float("nan")}
        row.update(at["extra"][p] if pt["measured"] else dict.fromkeys(RING_EXTRA, float("nan")))
        row.update(at["overlap"][p] if pt["measured"] else {n: float("nan") for n, _ in OVERLAP})
        peak = peaks_mod.tflops(peaks, row["dtype"])
        row["pct_of_peak"] = 100 * row.get("tflops_total", float("nan")) / peak if peak else float("nan")
        rows.append(row)
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    df["pct_of_single_gpu"] = _pct_of_single(df)
    df["untrustworthy"] = [_ring_flags(r) for r in df.itertuples()]
    return df


def _pct_of_single(df):
    """Per-GPU total TFLOP/s as % of the ring-size-1 rate of the same sweep (a scaling series
    keeps its sweep name across files), configuration and S: the same kernel on one GPU."""
    key = ["sweep", "config", "seq_len"]
    base = df[(df["ring_size"] == 1) & df["measured"]].groupby(key)["tflops_total"].max()
    return [100 * r.tflops_total / base[(r.sweep, r.config, r.seq_len)]
            if (r.sweep, r.config, r.seq_len) in base.index and r.measured else float("nan")
            for r in df.itertuples()]


def _ring_flags(r):
    out = []
    if getattr(r, "cv", float("nan")) > CV_LIMIT:
        out.append(f"CV {100 * r.cv:.0f} % > {100 * CV_LIMIT:.0f} %")
    if r.strong_efficiency > EFFICIENCY_LIMIT + 1e-9:
        out.append(f"efficiency {r.strong_efficiency:.2f} > 1")
    if r.pct_of_peak > 100:
        out.append(f"{r.pct_of_peak:.0f} % of peak")
    return "; ".join(out)


# ---- collectives ---------------------------------------------------------------------------

VARIANT_KEYS = ["file", "sweep", "operation", "group", "dtype", "in_place"]


def collective_points(runs):
    """One row per collectives point: the slowest rank's busbw/algbw/time and the slowest
    rank's per-iteration time quartiles and CV. one_rank marks groups that measure no link."""
    rows = []
    for run in runs:
        for s in run.sweeps_of_type(reader.COLLECTIVE_TYPES):
            size_key = s.key_with_units("B")
            if size_key is not None and "busbw_Bps" in s.metrics:
                rows += _collective_rows(run, s, size_key)
    return pd.DataFrame(rows)


def _group_sizes(sweep):
    """model.group_size of every point at once."""
    if "group_size" in sweep.points:
        return [float(g) for g in sweep.points["group_size"].to_numpy()]
    return [float(g) if np.isfinite(g) else None for g in pointstats.over_ranks(sweep, "group_size", "max")]


def _collective_rows(run, s, size_key):
    """collective_points' rows of one sweep, each statistic computed over every point at once."""
    bus, alg = (pointstats.over_ranks(s, m, "min", positive=True) for m in ("busbw_Bps", "algbw_Bps"))
    t = pointstats.over_ranks(s, "time_s", "max")
    wrong = pointstats.over_ranks(s, "wrong_elements", "sum", positive=True)
    it = pointstats.slowest_stats(s, "iteration_time_s")
    rows = []
    for p, (k, gs) in enumerate(zip(pointstats.point_keys(s), _group_sizes(s))):
        rows.append({"file": os.path.basename(run.path), "sweep": s.name,
                     "operation": str(k.get("operation", s.name)), "group": str(k.get("group", "")),
                     "dtype": str(k.get("dtype", "")), "in_place": int(k.get("in_place", 0)),
                     "size": int(k[size_key]), "group_size": gs, "ranks": run.world_size,
                     "nodes": run.node_count, "one_rank": bool(gs is not None and gs < 2),
                     "busbw": float(bus[p]), "algbw": float(alg[p]), "time": float(t[p]),
                     "t_p25": float(it["p25"][p]), "t_p75": float(it["p75"][p]), "cv": float(it["cv"][p]),
                     "wrong": int(wrong[p]) if np.isfinite(wrong[p]) else 0})
    return rows


def link_peak(row, peaks):
    """GB/s of the link a collective group uses, where known: NVLink (per direction) for groups
    within one node of a GPU run; None across nodes (no NIC table) and on host runs."""
    if not peaks or not peaks.get("nvlink_GBps"):
        return None
    within = row["group"] == "intra_node" or (row["group"] == "world" and row["nodes"] <= 1)
    return float(peaks["nvlink_GBps"]) if within else None


def collective_variants(cpoints, peaks):
    """One row per (file, sweep, operation, group, dtype, in-place variant): the peak busbw is
    the maximum over message sizes of that variant alone (never a minimum over variants)."""
    if cpoints.empty:
        return cpoints, cpoints
    linked = cpoints[~cpoints["one_rank"] & cpoints["busbw"].notna()]
    with_world = set(zip(*[cpoints[cpoints["group"] == "world"][c] for c in ("file", "sweep")]))
    skipped = cpoints[cpoints["one_rank"]][VARIANT_KEYS].drop_duplicates()
    rows = []
    for key, g in linked.groupby(VARIANT_KEYS, sort=False):
        best = g.loc[g["busbw"].idxmax()]
        small = g.loc[g["size"].idxmin()]
        row = dict(zip(VARIANT_KEYS, key))
        # On one node intra_node is the world group again: the screen leaves its rows out
        # (collectives.cpp), so the headline does too, to name only numbers the screen shows.
        row["same_as_world"] = bool(key[VARIANT_KEYS.index("group")] != "world"
                                    and best["group_size"] == best["ranks"] and key[:2] in with_world)
        row.update({"group_size": best["group_size"], "peak_busbw": best["busbw"],
                    "peak_algbw": best["algbw"], "at_size": int(best["size"]), "cv_at_peak": best["cv"],
                    "smallest_size": int(small["size"]), "latency": small["time"],
                    "wrong": int(g["wrong"].sum())})
        lp = link_peak(best, peaks)
        row["link_peak"] = lp * 1e9 if lp else float("nan")
        row["pct_of_link"] = 100 * best["busbw"] / (lp * 1e9) if lp else float("nan")
        rows.append(row)
    return pd.DataFrame(rows), skipped


# ---- ping-pong, p2p ------------------------------------------------------------------------

def pingpong_points(runs):
    """One row per host_pingpong message size (runs of one rank left out: no partner, no link)."""
    rows = []
    for run in runs:
        for s in run.sweeps_of_type(reader.PINGPONG_TYPES) if run.world_size > 1 else []:
            size_key = s.key_with_units("B")
            if size_key is None or model.PINGPONG_TIME not in s.metrics:
                continue
            it = pointstats.slowest_stats(s, model.PINGPONG_TIME)
            for x in model.pingpong_summary(s):
                p = list(s.points[size_key]).index(x["message_size"])
                rows.append({"file": os.path.basename(run.path), "sweep": s.name, "size": x["message_size"],
                             "time": x["max_one_way_time"], "bandwidth": x["min_bandwidth"],
                             "t_p25": float(it["p25"][p]), "t_p75": float(it["p75"][p]), "cv": float(it["cv"][p])})
    return pd.DataFrame(rows)


def p2p_matrices(sweep):
    """{'bandwidth': [sender, receiver] B/s (slower rank of the pair), 'latency': s (slower)}."""
    out = {}
    if not {"sender", "receiver"} <= set(sweep.keys):
        return out
    sender, receiver = (sweep.points[k].to_numpy().astype(np.int64) for k in ("sender", "receiver"))
    pair = (sender >= 0) & (receiver >= 0)
    for name, metric, how in (("bandwidth", "bandwidth_Bps", "min"), ("latency", "latency_s", "max")):
        if metric not in sweep.metrics:
            continue
        v = pointstats.over_ranks(sweep, metric, how, positive=True)
        at = pair & np.isfinite(v)
        m = np.full((sweep.world, sweep.world), np.nan)
        m[sender[at], receiver[at]] = v[at]  # a pair measured twice: its last point, as in point order
        if np.isfinite(m).any():
            out[name] = m
    return out


def p2p_frame(runs):
    rows = []
    for run in runs:
        for s in run.sweeps_of_type(reader.P2P_TYPES):
            mats = p2p_matrices(s)
            row = {"file": os.path.basename(run.path), "sweep": s.name, "ranks": run.world_size,
                   "bandwidth_bytes": int(s.attrs.get("bandwidth_bytes", 0)),
                   "latency_bytes": int(s.attrs.get("latency_bytes", 0))}
            for name, m in mats.items():
                v = _finite(m)
                row.update({f"{name}_min": v.min(), f"{name}_median": float(np.median(v)), f"{name}_max": v.max()})
            if "concurrent_bandwidth_Bps" in s.metrics and "pattern" in s.keys:
                conc = pointstats.over_ranks(s, "concurrent_bandwidth_Bps", "min")
                conc = _finite(conc[s.points["pattern"].to_numpy() == "concurrent"])
                if conc.size:
                    row["concurrent_min"] = float(conc.min())
            if mats:
                rows.append(row)
    return pd.DataFrame(rows)


# ---- compute, memory -----------------------------------------------------------------------

def _slowest_rates(sweep, metric, p0, p1):
    """[p1 - p0, iterations]: per point the slowest rank's per-iteration rates, the point's rate
    x mean time / each time (the rate metric is work / mean iteration time); NaN: none."""
    rate = pointstats.rank_block(sweep, metric, p0, p1)
    slow = np.argmin(np.where(np.isnan(rate), np.inf, rate), axis=0)
    t = np.asarray(sweep.metrics.columns["iteration_time_s"].points(p0, p1), dtype=float)
    t = t.reshape(t.shape[0], p1 - p0, -1)[slow, np.arange(p1 - p0)]
    rates = np.full(t.shape, np.nan)
    for at, times in reader.finite_groups(t):
        rates[at, :times.shape[1]] = (rate[slow[at], at] * times.mean(axis=1))[:, None] / times
    rates[~np.isfinite(rate).any(axis=0)] = np.nan
    return rates


def _rate_stats(sweep, metric):
    """Per point, pointstats.sample_stats of _slowest_rates (none without iteration times)."""
    if "iteration_time_s" not in sweep.metrics:
        return pointstats.joined([], sweep.npoints)
    return pointstats.joined([pointstats.sample_stats(_slowest_rates(sweep, metric, p0, p1))
                              for p0, p1 in pointstats.blocks(sweep, [metric, "iteration_time_s"])],
                             sweep.npoints)


def _rate_points(runs, sweep_type, metric):
    """Each point of the runs' sweep_type sweeps that recorded the rate metric: its run, sweep
    and keys, the slowest rank's rate (NaN where no rank measured: an oom point), {p25, p75, cv}
    of that rank's per-iteration rates and the point's status (ok, oom, ...)."""
    for run in runs:
        for s in run.sweeps_of_type((sweep_type,)):
            if metric not in s.metrics:
                continue
            rate, st = pointstats.over_ranks(s, metric, "min"), _rate_stats(s, metric)
            status = pointstats.first_text(s, "status", ("", "ok"))
            for p, keys in enumerate(pointstats.point_keys(s)):
                yield (run, s, keys, float(rate[p]), {k: float(st[k][p]) for k in ("p25", "p75", "cv")},
                       status[p] or "ok")


def compute_frame(runs, peaks):
    """One row per compute point: the slowest rank's TFLOP/s, CV, % of the dtype's peak."""
    rows = []
    for run, s, k, rate, st, status in _rate_points(runs, "compute", "rate_tflops"):
        dtype = str(k.get("dtype", ""))
        peak = peaks_mod.tflops(peaks, dtype)
        rows.append({"file": os.path.basename(run.path), "sweep": s.name,
                     "operation": str(k.get("operation", "gemm")), "engine": str(k.get("engine", "")),
                     "dtype": dtype, "size": int(k.get("size", k.get("rows", 0)) or 0),
                     "tflops": rate, "r_p25": st["p25"], "r_p75": st["p75"],
                     "cv": st["cv"], "peak_tflops": peak or float("nan"),
                     "pct_of_peak": 100 * rate / peak if peak else float("nan"), "status": status})
    return pd.DataFrame(rows)


# Which peak a memory kind is measured against, and the factor from the recorded rate to the
# traffic on that link: a d2d copy reads and writes every byte (docs/sweeps/memory.md).
MEMORY_PEAK = {"d2d": ("hbm_GBps", 2.0), "h2d_pinned": ("pcie_GBps", 1.0),
               "d2h_pinned": ("pcie_GBps", 1.0), "h2d_pageable": ("pcie_GBps", 1.0),
               "d2h_pageable": ("pcie_GBps", 1.0)}


def memory_frame(runs, peaks):
    """One row per memory point (triad, copy kinds): the slowest rank's GB/s and % of peak."""
    rows = []
    for run, s, k, bw, st, status in _rate_points(runs, "memory", "bandwidth_Bps"):
        kind = str(k.get("kind", ""))
        which, factor = MEMORY_PEAK.get(kind, (None, 1.0))
        peak = (peaks or {}).get(which) if which else None
        rows.append({"file": os.path.basename(run.path), "sweep": s.name, "kind": kind,
                     "size": int(k.get("size_bytes", 0)), "bandwidth": bw,
                     "b_p25": st["p25"], "b_p75": st["p75"], "cv": st["cv"],
                     "peak_name": which or "", "peak": peak * 1e9 if peak else float("nan"),
                     "pct_of_peak": 100 * factor * bw / (peak * 1e9) if peak else float("nan"),
                     "status": status})
    return pd.DataFrame(rows)
