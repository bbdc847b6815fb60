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

import numpy as np

from . import reader

DTYPE_BYTES = {"fp32": 4, "float32": 4, "float": 4, "fp16": 2, "float16": 2, "half": 2,
               "bf16": 2, "bfloat16": 2, "fp64": 8, "float64": 8, "double": 8, "fp8": 1}

# Point attributes that are not part of a point's configuration for scaling series.
NON_CONFIG = {"sweep", "point", "rank", "run", "world_size", "ring_size", "seq_len", "num_rings",
              "sequence_length", "status", "failure", "index", "label", "seed"}


def col(table, key):
    """The column for a NAMES key (first accepted name present), or None."""
    n = reader.first_name(key, table.columns)
    return n


def _num(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return float("nan")
    return f


def point_table(runs):
    """One row per (run, ring sweep, point): the reduced metrics above, as a list of dicts."""
    t = reader.combined_table(runs, reader.RING_TYPES)
    if not len(t):
        return []
    c_seq, c_ring = col(t, "seq_len"), col(t, "ring_size")
    c_total, c_fwd, c_bwd = col(t, "total_time"), col(t, "forward_time"), col(t, "backward_time")
    c_comp, c_wait = col(t, "step_compute_time"), col(t, "step_wait_time")
    c_tok, c_tfl, c_mem = col(t, "tokens_per_s"), col(t, "tflops"), col(t, "peak_memory")
    c_batch, c_status = col(t, "batch"), col(t, "point_status")
    c_kv = col(t, "kv_bytes")
    config_keys = [k for k in t.keys if k not in NON_CONFIG and k != c_seq and k != c_ring]
    points = []
    for key, g in t.groups(["run", "sweep", "point"]):
        first = next(g.rows())
        p = {"run": key["run"], "sweep": key["sweep"], "point": key["point"],
             "world_size": int(first["world_size"]),
             "seq_len": int(first[c_seq]) if c_seq else None,
             "ring_size": int(first[c_ring]) if c_ring and first[c_ring] is not None
             else int(first["world_size"]),
             "config": {k: first[k] for k in config_keys if first.get(k) is not None},
             "status": str(first[c_status]) if c_status and first[c_status] is not None else "ok",
             "failure": str(first.get("failure") or "")}
        p["config_label"] = ", ".join(f"{k}={v}" for k, v in sorted(p["config"].items()))
        c_dtype, c_heads, c_hd = col(t, "dtype"), col(t, "heads"), col(t, "head_dim")
        p["dtype_bytes"] = DTYPE_BYTES.get(str(first.get(c_dtype, "") if c_dtype else "").lower())
        p["batch"] = int(first[c_batch]) if c_batch and first[c_batch] is not None else None

        def ranks_of(name):
            if not name:
                return None
            vals = [_num(v) for v in g[name] if not isinstance(v, np.ndarray)]
            vals = [v for v in vals if not math.isnan(v)]
            return np.array(vals) if vals else None

        total = ranks_of(c_total)
        if total is None and c_fwd:
            f, b = ranks_of(c_fwd), ranks_of(c_bwd)
            total = f + b if f is not None and b is not None and len(f) == len(b) else f
        fwd = ranks_of(c_fwd)
        p["time"] = float(np.max(total)) if total is not None and len(total) else None
        p["median_rank_time"] = float(np.median(total)) if total is not None and len(total) else None
        p["forward_time"] = float(np.max(fwd)) if fwd is not None and len(fwd) else None
        p["rank_times"] = total.tolist() if total is not None else []
        p["spread"] = (p["time"] / p["median_rank_time"]) if p["time"] and p["median_rank_time"] else None
        tok = ranks_of(c_tok)
        if p["batch"] and p["seq_len"] and p["time"]:
            p["throughput"] = p["batch"] * p["seq_len"] / p["time"]
        elif tok is not None:
            p["throughput"] = float(np.min(tok))
        elif p["seq_len"] and p["time"]:
            p["throughput"] = p["seq_len"] / p["time"]
        else:
            p["throughput"] = None
        # Forward flops per rank (after masking and dilation): the work a weak-scaling series
        # must normalise by, since attention work per rank grows with the global length.
        work = ranks_of(col(t, "flops_forward"))
        p["work_per_rank"] = float(np.mean(work)) if work is not None and len(work) else None
        tfl = ranks_of(c_tfl)
        p["tflops"] = float(np.sum(tfl)) if tfl is not None else None
        mem = ranks_of(c_mem)
        p["memory"] = float(np.max(mem)) if mem is not None else None
        comp = [np.asarray(v, dtype=float) for v in g[c_comp]] if c_comp else []
        wait = [np.asarray(v, dtype=float) for v in g[c_wait]] if c_wait else []
        comp = [v for v in comp if v.ndim and v.size and np.isfinite(v).any()]
        wait = [v for v in wait if v.ndim and v.size and np.isfinite(v).any()]
        if comp and wait:
            sc = float(sum(np.nansum(v) for v in comp))
            sw = float(sum(np.nansum(v) for v in wait))
            p["exposed_comm"] = sw / (sc + sw) if sc + sw > 0 else None
            allc = np.concatenate([v.ravel() for v in comp])
            p["step_compute"] = float(np.nanmedian(allc))
            p["steps"] = int(np.median([v.size for v in comp]))
        else:
            p["exposed_comm"] = p["step_compute"] = p["steps"] = None
        kv = ranks_of(c_kv)
        if kv is not None:
            p["kv_bytes"] = float(np.max(kv))
        elif first.get(c_kv) is not None if c_kv else False:
            p["kv_bytes"] = _num(first[c_kv])
        elif p["batch"] and p["seq_len"] and p["dtype_bytes"] and c_heads and c_hd \
                and first.get(c_heads) is not None and first.get(c_hd) is not None:
            # K and V of this rank's S/R positions travel together in one message per step.
            per_rank_tokens = p["seq_len"] / max(p["ring_size"], 1)
            p["kv_bytes"] = (2.0 * p["batch"] * int(first[c_heads]) * per_rank_tokens
                             * int(first[c_hd]) * p["dtype_bytes"])
        else:
            p["kv_bytes"] = None
        p["measured"] = p["status"] == "ok" and p["time"] is not None and p["time"] > 0
        points.append(p)
    # Label series by the configuration keys that differ between points; the fixed ones are
    # stated once in the report's configuration section.
    varying = [k for k in config_keys if len({str(p["config"].get(k)) for p in points}) > 1]
    for p in points:
        p["config_label"] = ", ".join(f"{k}={p['config'].get(k)}" for k in varying)
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


def _stored_models(sweep):
    """Models written by the collectives sweep under <sweep>/model, in whatever of the two
    documented shapes: parallel arrays (op, group, alpha_s, beta_Bps) or one subgroup per
    operation/group with alpha_s/beta_Bps attributes or scalar datasets."""
    arrays = sweep.group_arrays("model")
    found = []
    ops = arrays.get("op", arrays.get("operation"))
    if ops is not None and "alpha_s" in arrays and "beta_Bps" in arrays:
        groups = arrays.get("group", arrays.get("group_name", ["world"] * len(ops)))
        sizes = arrays.get("group_size")
        for i, op in enumerate(ops):
            found.append({"op": str(op), "group": str(groups[i]),
                          "alpha_s": float(np.ravel(arrays["alpha_s"])[i]),
                          "beta_Bps": float(np.ravel(arrays["beta_Bps"])[i]),
                          "group_size": int(np.ravel(sizes)[i]) if sizes is not None else None})
    for key, val in arrays.items():
        if key.endswith("@attrs") and isinstance(val, dict) and "alpha_s" in val and "beta_Bps" in val:
            parts = key[:-len("@attrs")].split("/")
            op = str(val.get("op", parts[0] if parts else "?"))
            group = str(val.get("group", parts[1] if len(parts) > 1 else "world"))
            found.append({"op": op, "group": group, "alpha_s": float(val["alpha_s"]),
                          "beta_Bps": float(val["beta_Bps"])})
    if not found and sweep.attrs.get("alpha_s") is not None:
        found.append({"op": str(sweep.attrs.get("op", "?")), "group": "world",
                      "alpha_s": float(sweep.attrs["alpha_s"]), "beta_Bps": float(sweep.attrs["beta_Bps"])})
    return found


def one_rank_groups(group_sizes):
    """True when every group had one rank (inter_node on a single node): its operations are
    local copies at memory speed and measure no link."""
    sizes = [_num(v) for v in group_sizes]
    return bool(sizes) and all(v < 2 for v in sizes)


def ring_comm_model(runs):
    """The best available model of one ring-neighbour transfer, with where it came from:
    1. the collectives sweep's fitted sendrecv model (stored in the file),
    2. a fit to the collectives sweep's sendrecv times,
    3. a fit to host_pingpong's one-way times (the host path),
    or None. The run with the most ranks is asked first: a one-rank run's "sendrecv" is a
    copy to itself and says nothing about the links."""
    runs = sorted(runs, key=lambda r: -r.world_size)
    for run in runs:
        for s in run.sweeps_of_type(reader.COLLECTIVE_TYPES):
            # A group of one rank (inter_node on a single node) "sends" to itself: a local
            # copy at memory speed that says nothing about links.
            models = [m for m in _stored_models(s) if m["op"] == "sendrecv"
                      and math.isfinite(m["alpha_s"]) and not math.isnan(m["beta_Bps"])
                      and not one_rank_groups([m.get("group_size") or 2])]
            # The slowest link sets a ring's pace, and rings beyond one node cross nodes:
            # inter_node first (docs/cost-model.md), then the whole job, then within a node.
            order = {"inter_node": 0, "world": 1, "intra_node": 2}
            models.sort(key=lambda m: order.get(m["group"], 3))
            for m in models:
                if m["op"] == "sendrecv":
                    m = dict(m)
                    m["source"] = f"fitted sendrecv model ({m['group']}) in {s.name} of {run.path}"
                    return m
    for run in runs:
        for s in run.sweeps_of_type(reader.COLLECTIVE_TYPES):
            t = s.table
            c_op, c_size, c_time = col(t, "op"), col(t, "size"), col(t, "coll_time")
            if not (c_op and c_size and c_time):
                continue
            sub = t.where(t.mask(**{c_op: "sendrecv"}))
            if "group_size" in t.columns and len(sub):
                sub = sub.where(np.array([not one_rank_groups([v]) for v in sub["group_size"]]))
            if len(sub):
                fit = _fit_table(sub, c_size, c_time)
                if fit:
                    fit["source"] = f"alpha-beta fit to sendrecv times of {s.name} in {run.path}"
                    return fit
    for run in runs:
        for s in run.sweeps_of_type(reader.PINGPONG_TYPES):
            t = s.table
            c_size, c_time = col(t, "size"), col(t, "coll_time")
            if c_size and c_time and len(t):
                fit = _fit_table(t, c_size, c_time)
                if fit:
                    fit["source"] = (f"alpha-beta fit to host_pingpong one-way times of {s.name} "
                                     f"in {run.path}")
                    return fit
    return None


def _fit_table(t, c_size, c_time):
    sizes, times = [], []
    for key, g in t.groups([c_size]):
        vals = np.array([_num(v) for v in g[c_time]], dtype=float)
        vals = vals[np.isfinite(vals)]
        if len(vals):
            sizes.append(float(key[c_size]))
            times.append(float(np.max(vals)))  # the slowest link sets the ring's pace
    return fit_alpha_beta(sizes, times)


def predict(base, ring_size, comm):
    """Predicted ring time and efficiency at `ring_size` from one measured point `base`."""
    if base.get("step_compute") is None or base.get("steps") is None or base.get("kv_bytes") is None:
        return None
    r0, r = base["ring_size"], ring_size
    c = base["step_compute"] * (r0 / r) ** 2
    steps = base["steps"] * r / r0
    nbytes = base["kv_bytes"] * r0 / r
    t_comm = comm_time(comm, nbytes) if r > 1 else 0.0
    if t_comm is None:
        return None
    step = max(c, t_comm)
    return {"ring_size": r, "step_compute": c, "step_comm": t_comm, "step_time": step,
            "time": steps * step, "efficiency": c / step if step > 0 else None,
            "comm_bound": t_comm > c}


def predictions(points, comm, extra_sizes=(8, 64, 512)):
    """For each strong-scaling series with step data: predicted vs measured at the measured
    ring sizes (with relative error) and predictions at extra_sizes."""
    out = []
    if comm is None:
        return out
    for (label, seq), pts in series(points, "strong").items():
        base = pts[0]
        if predict(base, base["ring_size"], comm) is None:
            continue
        # The step data (step_compute_time) is the forward pass's, so the model predicts the
        # forward time. The measured forward time also holds work outside the steps (the
        # final normalisation, launch overheads): the prediction is calibrated by the ratio of
        # measured to modelled time at the base ring size, so the errors at the other sizes
        # measure how well the model's scaling holds.
        def fwd(p):
            return p["forward_time"] if p.get("forward_time") else p["time"]
        base_pred = predict(base, base["ring_size"], comm)
        calib = fwd(base) / base_pred["time"] if base_pred["time"] > 0 else 1.0
        rows = []
        for p in pts:
            pr = predict(base, p["ring_size"], comm)
            if pr is None or not fwd(p):
                continue
            t_pred = pr["time"] * calib
            rows.append({"ring_size": p["ring_size"], "measured_time": fwd(p),
                         "predicted_time": t_pred, "error": (t_pred - fwd(p)) / fwd(p),
                         "predicted_efficiency": pr["efficiency"], "comm_bound": pr["comm_bound"]})
        extra = []
        for r in sorted(set(extra_sizes) - {p["ring_size"] for p in pts}):
            if r > seq:  # fewer than one position per rank
                continue
            pr = predict(base, r, comm)
            extra.append({"ring_size": r, "predicted_time": pr["time"] * calib,
                          "predicted_step_time": pr["step_time"] * calib,
                          "predicted_efficiency": pr["efficiency"], "comm_bound": pr["comm_bound"]})
        out.append({"config": label, "seq_len": seq, "base_ring_size": base["ring_size"],
                    "calibration": calib, "measured": rows, "extrapolated": extra})
    return out
