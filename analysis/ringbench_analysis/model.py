"""Point-level scaling numbers and the ring attention cost model.

Per-rank rows (reader tables) are reduced to one row per measured point:
  time        = slowest rank's total time (a ring step ends when its slowest rank does)
  throughput  = tokens processed per second by the whole ring
  exposed comm fraction = sum of step wait / (sum of step compute + step wait), all ranks
  memory      = largest per-rank peak memory
  spread      = slowest rank's time / median rank's time (stragglers show as > 1)

Cost model (docs/analysis.md has the derivation): a ring of R ranks over a global sequence S
runs n(R) steps; in each step a rank computes attention of its S/R queries against one S/R
key/value block while it passes that block (bytes(R)) to its neighbour, overlapped, so
  step(R) = max(c(R), t_comm(R)),  c(R) = c(R0) * (R0/R)^2,  t_comm(R) = alpha + bytes(R)/beta,
  T(R) = n(R) * step(R),  n(R) = n(R0) * R / R0,  bytes(R) = bytes(R0) * R0 / R,
with c(R0) the measured per-step compute time at the smallest measured ring size R0 and
(alpha, beta) the fitted send/recv (ring neighbour) model. Strong-scaling efficiency is
E(R) = T(1) / (R * T(R)) = c(R) / step(R).
"""
import math
import os

import numpy as np

from . import placement, reader
from . import steps as ring_steps

DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp64": 8, "fp8": 1}

# Sweep parameters (attributes of a ring_attention sweep, docs/sweeps/ring_attention.md) that
# change a point's work, so points differing in them are not one scaling series.
RING_CONFIG_ATTRS = ("batch", "num_heads", "head_dim", "causal", "backward", "segment_lengths",
                     "dilation_rates")
# Keys of a ring_attention point that are not its configuration: where it sits in a series
# (seq_len, ring_size, num_rings) or derived from the others (label, tolerance).
NOT_CONFIG_KEYS = ("seq_len", "ring_size", "num_rings", "label", "tolerance")


def _finite(values):
    a = np.asarray(values, dtype=float).ravel()
    return a[np.isfinite(a)]


def _ranks(sweep, name, p):
    """Each rank's value of a metric at point p (array metrics: the rank's median), or None."""
    if name not in sweep.metrics:
        return None
    v = sweep.rank_values(name, p)
    return v if v.size else None


def _step_numbers(sweep, p):
    """exposed comm fraction (every rank's step waits over their compute + waits), median step
    compute time and steps per rank (of the ranks whose steps the file keeps: steps.py)."""
    sc, sw = ring_steps.total(sweep, p, "step_compute_s"), ring_steps.total(sweep, p, "step_wait_s")
    got = ring_steps.point_steps(sweep, p, ("step_compute_s",))
    if sc is None or sw is None or got is None:
        return None, None, None
    comp = got[1]["step_compute_s"]
    allc = _finite(comp)
    if not allc.size:
        return None, None, None
    per_rank = [int(np.isfinite(r).sum()) for r in comp if np.isfinite(r).any()]
    return (sw / (sc + sw) if sc + sw > 0 else None), float(np.median(allc)), int(np.median(per_rank))


def _over_ranks(sweep, name, p, stat):
    """A statistic over every rank (reader.PointsTable.over_ranks) of a metric, or None."""
    if name not in sweep.metrics:
        return None
    v = sweep.over_ranks(name, p)[stat]
    return float(v) if np.isfinite(v) else None


def _slowest_quartiles(sweep, p, names=("total_time_s", "forward_time_s")):
    """25th and 75th percentile of the slowest rank's per-iteration times (the first of `names`
    the sweep has per iteration: total, else forward): the point's iteration-to-iteration
    spread around the time the plots draw (None, None without samples)."""
    name = next((n for n in names if n in sweep.metrics and sweep.metrics[n].ndim > 2), None)
    if name is None:
        return None, None
    rows = [_finite(r) for r in np.asarray(sweep.metrics[name][:, p], dtype=float)]
    rows = [r for r in rows if r.size]
    if not rows:
        return None, None
    slowest = max(rows, key=np.median)
    return float(np.percentile(slowest, 25)), float(np.percentile(slowest, 75))


def _kv_bytes(cfg, seq_len, ring_size):
    """K and V of one rank's S/R positions travel together in one message per ring step."""
    elem = DTYPE_BYTES.get(str(cfg.get("dtype", "")).lower())
    if not (elem and seq_len and all(cfg.get(k) is not None for k in ("batch", "num_heads", "head_dim"))):
        return None
    return 2.0 * cfg["batch"] * cfg["num_heads"] * (seq_len / max(ring_size, 1)) * cfg["head_dim"] * elem


def _one_point(run, sweep, p):
    keys = sweep.points.iloc[p].to_dict()
    cfg = {k: reader._py(v) for k, v in keys.items() if k not in NOT_CONFIG_KEYS}
    cfg.update({k: sweep.attrs[k] for k in RING_CONFIG_ATTRS if k in sweep.attrs})
    pt = {"run": os.path.basename(run.path), "sweep": sweep.name, "point": p,
          "world_size": run.world_size, "seq_len": int(keys["seq_len"]),
          "ring_size": int(keys["ring_size"]), "config": cfg,
          "status": sweep.point_status(p), "failure": "", "parity_mode": sweep.parity_mode(p)}
    total, fwd = _ranks(sweep, "total_time_s", p), _ranks(sweep, "forward_time_s", p)
    if total is None:
        total = fwd
    pt["time"] = float(total.max()) if total is not None else None
    pt["median_rank_time"] = float(np.median(total)) if total is not None else None
    pt["forward_time"] = float(fwd.max()) if fwd is not None else None
    pt["rank_times"] = total.tolist() if total is not None else []
    pt["spread"] = pt["time"] / pt["median_rank_time"] if pt["time"] and pt["median_rank_time"] else None
    pt["time_p25"], pt["time_p75"] = _slowest_quartiles(sweep, p)
    pt["forward_p25"], pt["forward_p75"] = _slowest_quartiles(sweep, p, ("forward_time_s",))
    batch = cfg.get("batch") or 1
    pt["throughput"] = batch * pt["seq_len"] / pt["time"] if pt["time"] else None
    # Forward flops per rank (after masking and dilation): the work a weak-scaling series
    # must normalise by, since attention work per rank grows with the global length.
    # Over every rank, also where the file keeps a sample of them.
    pt["work_per_rank"] = _over_ranks(sweep, "forward_flop", p, "mean")
    pt["tflops"] = _over_ranks(sweep, "total_tflops", p, "sum")
    pt["memory"] = _over_ranks(sweep, "peak_memory_bytes", p, "max")
    pt["exposed_comm"], pt["step_compute"], pt["steps"] = _step_numbers(sweep, p)
    pt["kv_bytes"] = _kv_bytes(cfg, pt["seq_len"], pt["ring_size"])
    pt["measured"] = pt["status"] == "ok" and pt["time"] is not None and pt["time"] > 0
    return pt


def point_table(runs):
    """One row per (run, ring sweep, point): the reduced metrics above, as a list of dicts."""
    points = [_one_point(run, s, p) for run in runs for s in run.sweeps_of_type(reader.RING_TYPES)
              for p in range(s.npoints)]
    # Label series by the configuration that differs between points; the fixed part is
    # stated once in the report's configuration section.
    names = sorted({k for p in points for k in p["config"]})
    varying = [k for k in names if len({str(p["config"].get(k)) for p in points}) > 1]
    for p in points:
        # an empty list or text (no dilation, no segments) says nothing: left out of the label
        p["config_label"] = ", ".join(f"{k}={p['config'].get(k)}" for k in varying
                                      if p["config"].get(k) not in ([], "", None))
    return points


def series(points, kind):
    """Scaling series: {(config_label, seq or tokens-per-rank): [points sorted by ring size]}.

    kind 'strong': same global sequence length; 'weak': same sequence length per rank.
    Only measured points; a ring size measured twice (two files) keeps the faster one.
    """
    out = {}
    for p in points:
        if not p["measured"] or p["seq_len"] is None:
            continue
        if kind == "strong":
            k = (p["config_label"], p["seq_len"])
        else:
            if p["seq_len"] % p["ring_size"]:
                continue
            k = (p["config_label"], p["seq_len"] // p["ring_size"])
        best = out.setdefault(k, {})
        r = p["ring_size"]
        if r not in best or p["time"] < best[r]["time"]:
            best[r] = p
    return {k: [v[r] for r in sorted(v)] for k, v in out.items() if len(v) >= 1}


def scaling(seq_points, kind):
    """[(ring_size, speedup, efficiency)] relative to the smallest ring size of the series.

    strong: speedup = T(R0)/T(R) * R0 (ideal: R), efficiency = speedup / R.
    weak:   efficiency = (W(R)/W(R0)) * T(R0)/T(R) (ideal: 1), scaled speedup = efficiency * R,
            with W the mean forward flops per rank. Attention work per rank grows with the global
            sequence length even at a fixed length per rank (each query meets every key), so a
            constant time would be super-linear; without recorded flops W is taken as constant.
    """
    if not seq_points:
        return []
    base = seq_points[0]
    r0 = base["ring_size"]
    out = []
    for p in seq_points:
        r = p["ring_size"]
        if kind == "strong":
            speedup = base["time"] / p["time"] * r0
            eff = speedup / r
        else:
            eff = base["time"] / p["time"]
            w0, w = base.get("work_per_rank"), p.get("work_per_rank")
            if w0 and w:
                eff *= w / w0
            speedup = eff * r
        out.append((r, speedup, eff))
    return out


# ---- the alpha-beta communication model ----------------------------------------------

def fit_alpha_beta(sizes, times):
    """t = alpha + m/beta, least squares on the relative error (as src/sweeps/cost_model.hpp).

    Returns dict(alpha_s, beta_Bps, rel_rms_error, points) or None with fewer than 2 points.
    """
    pts = [(float(m), float(t)) for m, t in zip(sizes, times) if m >= 0 and t > 0
           and math.isfinite(t)]
    if len(pts) < 2:
        return None
    m = np.array([p[0] for p in pts])
    t = np.array([p[1] for p in pts])
    w = 1.0 / t
    a_mat = np.stack([w, m * w], axis=1)
    sol, *_ = np.linalg.lstsq(a_mat, np.ones_like(t), rcond=None)
    alpha, g = float(sol[0]), float(sol[1])
    if g < 0:  # time does not grow with size: latency only
        g = 0.0
        alpha = float(np.sum(w) / np.sum(w * w))
    if alpha < 0:
        alpha = 0.0
        g = float(np.sum(m * w) / np.sum((m * w) ** 2)) if np.any(m > 0) else 0.0
    pred = alpha + m * g
    rel = float(np.sqrt(np.mean(((pred - t) / t) ** 2)))
    return {"alpha_s": alpha, "beta_Bps": (1.0 / g) if g > 0 else float("inf"),
            "rel_rms_error": rel, "points": len(pts)}


def comm_time(model, nbytes):
    if model is None or nbytes is None:
        return None
    beta = model["beta_Bps"]
    return model["alpha_s"] + (nbytes / beta if beta and math.isfinite(beta) else 0.0)


# Dataset names of the profiling sweeps the model reads (docs/sweeps/collectives.md,
# docs/sweeps/host_pingpong.md). The message size is the key measured in B.
COLLECTIVE_TIME = "time_s"          # collectives: time of one operation, per rank and point
PINGPONG_TIME = "one_way_time_s"    # host_pingpong: one-way time samples per iteration


def _stored_models(sweep):
    """The collectives sweep's fitted models: the model/ sub-table (one point per operation
    and group; every rank holds the same fitted values)."""
    m = sweep.subtables.get("model")
    if m is None or not {"alpha_s", "beta_Bps"} <= set(m.metrics):
        return []
    found = []
    for p in range(m.npoints):
        keys = m.points.iloc[p].to_dict()
        alpha, beta = m.rank_values("alpha_s", p), m.rank_values("beta_Bps", p)
        if not alpha.size or not beta.size:
            continue
        found.append({"op": str(keys.get("operation", "")), "group": str(keys.get("group", "")),
                      "group_size": reader._py(keys["group_size"]) if "group_size" in keys else None,
                      "alpha_s": float(alpha[0]), "beta_Bps": float(beta[0])})
    return found


def one_rank_groups(group_sizes):
    """True when every group had one rank (inter_node on a single node): its operations are
    local copies at memory speed and measure no link."""
    sizes = reader.numbers(list(group_sizes))
    return bool(len(sizes)) and bool(np.all(sizes < 2))


def group_size(sweep, p):
    """Ranks per group at point p of a collectives sweep (a metric: each rank's group; the
    model sub-table has it as a key), or None."""
    if "group_size" in sweep.points:
        return float(sweep.points["group_size"].iloc[p])
    if "group_size" in sweep.metrics:
        v = sweep.rank_values("group_size", p)
        return float(v.max()) if v.size else None
    return None


def _linked_points(sweep, operation):
    """Points of a collectives sweep running `operation` in groups of more than one rank."""
    if "operation" not in sweep.points:
        return []
    return [p for p in range(sweep.npoints) if sweep.points["operation"].iloc[p] == operation
            and not one_rank_groups([group_size(sweep, p) or 2])]


def _fit_slowest(sweep, time_metric, points):
    """alpha-beta fit to the slowest rank's time per message size (the slowest link sets a
    ring's pace)."""
    size_key = sweep.key_with_units("B")
    if size_key is None or time_metric not in sweep.metrics:
        return None
    by_size = {}
    for p in points:
        v = sweep.rank_values(time_metric, p)
        if v.size:
            size = float(sweep.points[size_key].iloc[p])
            by_size[size] = max(by_size.get(size, 0.0), float(v.max()))
    return fit_alpha_beta(list(by_size), list(by_size.values()))


def ring_comm_model(runs):
    """The best available model of one ring-neighbour transfer, with where it came from:
    1. the collectives sweep's fitted sendrecv model (stored in the file),
    2. a fit to the collectives sweep's sendrecv times,
    3. a fit to host_pingpong's one-way times (the host path),
    or None. The run with the most ranks is asked first: a one-rank run's "sendrecv" is a
    copy to itself and says nothing about the links."""
    runs = sorted(runs, key=lambda r: -r.world_size)
    # The slowest link sets a ring's pace, and rings beyond one node cross nodes:
    # inter_node first (docs/cost-model.md), then the whole job, then within a node.
    order = {"inter_node": 0, "world": 1, "intra_node": 2}
    for run in runs:
        for s in run.sweeps_of_type(reader.COLLECTIVE_TYPES):
            models = [m for m in _stored_models(s) if m["op"] == "sendrecv"
                      and math.isfinite(m["alpha_s"]) and not math.isnan(m["beta_Bps"])
                      and not one_rank_groups([m["group_size"] or 2])]
            models.sort(key=lambda m: order.get(m["group"], 3))
            if models:
                return dict(models[0], source=f"fitted sendrecv model ({models[0]['group']}) in "
                                              f"{s.name} of {run.path}")
    for run in runs:
        for s in run.sweeps_of_type(reader.COLLECTIVE_TYPES):
            fit = _fit_slowest(s, COLLECTIVE_TIME, _linked_points(s, "sendrecv"))
            if fit:
                return dict(fit, source=f"alpha-beta fit to sendrecv times of {s.name} in {run.path}")
    for run in runs:
        for s in run.sweeps_of_type(reader.PINGPONG_TYPES):
            fit = _fit_slowest(s, PINGPONG_TIME, range(s.npoints))
            if fit:
                return dict(fit, source=f"alpha-beta fit to host_pingpong one-way times of {s.name} "
                                        f"in {run.path}")
    return None


def predict(base, ring_size, lk, per_node=None):
    """Predicted forward and backward ring times at `ring_size` from one measured point `base`,
    with the link its transfers take (placement.ring_link). lk: {intra, inter} link models, or one
    model for every ring (the old single-link form). per_node: ranks per node (default: the
    whole ring on one node)."""
    if base.get("step_compute") is None or base.get("steps") is None or base.get("kv_bytes") is None:
        return None
    if not isinstance(lk, dict) or "alpha_s" in lk:
        lk = {"intra": lk, "inter": lk}
    r0, r = base["ring_size"], ring_size
    nodes, crossing, cls, comm, note = placement.ring_link(r, per_node or r, lk)
    c = base["step_compute"] * (r0 / r) ** 2
    steps = base["steps"] * r / r0
    nbytes = base["kv_bytes"] * r0 / r
    t_comm = comm_time(comm, nbytes) if r > 1 else 0.0
    if t_comm is None:
        return None
    step = max(c, t_comm)
    out = {"ring_size": r, "nodes": nodes, "crossing_hops": crossing, "link": cls,
           "link_note": note, "step_compute": c, "step_comm": t_comm, "step_time": step,
           "time": steps * step, "efficiency": c / step if step > 0 else None,
           "comm_bound": t_comm > c, "bwd_time": None, "total_efficiency": None}
    # Backward: the same ring steps, its compute the measured backward/forward ratio of the
    # base point times the forward's, and K, V with dK, dV travelling (twice the bytes).
    ratio = base.get("bwd_ratio")
    if ratio:
        cb = c * ratio
        tb = comm_time(comm, 2 * nbytes) if r > 1 else 0.0
        stepb = max(cb, tb)
        out.update(bwd_time=steps * stepb, bwd_comm_bound=tb > cb,
                   total_efficiency=(c + cb) / (step + stepb) if step + stepb > 0 else None)
    return out


def _bwd_ratio(p):
    if p.get("forward_time") and p.get("time") and p["time"] > p["forward_time"]:
        return (p["time"] - p["forward_time"]) / p["forward_time"]
    return None


def _series_prediction(pts, lk, extra_sizes, per_node):
    """One strong-scaling series: predicted vs measured at the measured ring sizes and the
    predictions at extra_sizes, or None without step data."""
    base = dict(pts[0], bwd_ratio=_bwd_ratio(pts[0]))
    base_pred = predict(base, base["ring_size"], lk, per_node)
    if base_pred is None:
        return None
    # The step data is the forward pass's; the measured times also hold work outside the
    # steps (the final normalisation, launch overheads): each pass is calibrated by its ratio
    # of measured to modelled time at the base ring size, so the errors at the other sizes
    # measure how well the model's scaling holds.
    def fwd(p):
        return p["forward_time"] if p.get("forward_time") else p["time"]
    calib = fwd(base) / base_pred["time"] if base_pred["time"] > 0 else 1.0
    bwd_base = base["time"] - fwd(base) if base.get("bwd_ratio") else None
    calib_b = bwd_base / base_pred["bwd_time"] if bwd_base and base_pred["bwd_time"] else None

    def row(pr):
        d = {k: pr[k] for k in ("ring_size", "nodes", "crossing_hops", "link", "link_note",
                                "comm_bound")}
        d.update(predicted_time=pr["time"] * calib, predicted_step_time=pr["step_time"] * calib,
                 predicted_efficiency=pr["efficiency"], predicted_total_efficiency=pr["total_efficiency"],
                 predicted_total_time=(pr["time"] * calib + pr["bwd_time"] * calib_b)
                 if calib_b and pr["bwd_time"] is not None else None)
        return d

    rows = []
    for p in pts:
        pr = predict(base, p["ring_size"], lk, per_node)
        if pr is None or not fwd(p):
            continue
        d = row(pr)
        d.update(measured_time=fwd(p), error=(d["predicted_time"] - fwd(p)) / fwd(p),
                 measured_p25=p.get("forward_p25") if p.get("forward_time") else p.get("time_p25"),
                 measured_p75=p.get("forward_p75") if p.get("forward_time") else p.get("time_p75"),
                 measured_total_time=p["time"],
                 total_error=(d["predicted_total_time"] - p["time"]) / p["time"]
                 if d["predicted_total_time"] and p.get("time") else None)
        rows.append(d)
    extra = [row(predict(base, r, lk, per_node))
             for r in sorted(set(extra_sizes) - {p["ring_size"] for p in pts}) if r <= base["seq_len"]]
    others = [x for x in rows if x["ring_size"] != base["ring_size"]]
    errs = [abs(x["error"]) for x in others]
    terrs = [abs(x["total_error"]) for x in others if x["total_error"] is not None]
    return {"base_ring_size": base["ring_size"], "calibration": calib, "measured": rows,
            "extrapolated": extra, "model_error": max(errs) if errs else None,
            "model_total_error": max(terrs) if terrs else None,
            "warnings": sorted({x["link_note"] for x in extra + rows if x["link_note"]})}


def predictions(points, lk, extra_sizes=(8, 64, 512), per_node=None):
    """For each strong-scaling series with step data: predicted vs measured (forward, and
    forward + backward where measured) at the measured ring sizes with relative errors (the
    model's own error: the largest at the sizes other than the base), and predictions at
    extra_sizes over the link each ring's placement gives (links.py)."""
    out = []
    if lk is None:
        return out
    for (label, seq), pts in series(points, "strong").items():
        pr = _series_prediction(pts, lk, extra_sizes, per_node)
        if pr is not None:
            out.append(dict(pr, config=label, seq_len=seq))
    return out


# ---- p2p matrix and host_pingpong (report tables) ------------------------------------------

def p2p_bandwidth(sweep):
    """(matrix [sender, receiver] in B/s, message size) of a p2p_matrix sweep's pair points
    (the slower of the pair's two ranks), or None."""
    need = {"sender", "receiver"}
    if "bandwidth_Bps" not in sweep.metrics or not need <= set(sweep.keys):
        return None
    m = np.full((sweep.world, sweep.world), np.nan)
    for p in range(sweep.npoints):
        a, b = int(sweep.points["sender"].iloc[p]), int(sweep.points["receiver"].iloc[p])
        v = sweep.rank_values("bandwidth_Bps", p)
        if a >= 0 and b >= 0 and v.size:
            m[a, b] = v.min()
    if not np.isfinite(m).any():
        return None
    return m, float(sweep.attrs.get("bandwidth_bytes", 0))


def pingpong_summary(sweep):
    """Per message size: the slowest rank's median one-way time and the slowest pair's
    bandwidth (host_pingpong)."""
    size_key = sweep.key_with_units("B")
    if size_key is None or PINGPONG_TIME not in sweep.metrics:
        return []
    out = []
    for p in range(sweep.npoints):
        t = sweep.rank_values(PINGPONG_TIME, p)
        bw = sweep.rank_values("bandwidth_Bps", p) if "bandwidth_Bps" in sweep.metrics else np.array([])
        if t.size:
            out.append({"message_size": int(sweep.points[size_key].iloc[p]),
                        "max_one_way_time": float(t.max()),
                        "min_bandwidth": float(bw.min()) if bw.size else float("nan")})
    return out
