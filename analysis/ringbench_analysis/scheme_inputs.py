"""What the per-scheme cost model (scheme_model.py) reads from ringbench files: one alpha-beta
fit per (collective, link class), the attention rate against kernel call size, and the points
of sweeps that ran one problem under several schemes (docs/analysis.md, "Per-scheme cost model").

Fits, per collective and link class, first found over the files (most ranks first, as links.py):
  sendrecv     links.measured_links (the ring cost model's own choice: collectives sweep, else
               host_pingpong), else an alpha-beta fit to the ring points' own calibrated hops
               (hop_transfer_alone_s: one hop alone, ring scheme, R >= 2, one node);
  all_gather, reduce_scatter, all_to_all
               the collectives sweep's stored model of that operation, else a fit to its times;
               intra: groups inside one node (intra_node, or world in a one-node run); inter:
               inter_node groups of two or more ranks, else world, in a multi-node run.
Out-of-place float32 series are preferred (what the schemes call). Each fit keeps its group
size, so scheme_model can move it to another group size through the busbw factor.

Rate, per (dtype, head dim, causal): the ring-scheme points' step kernels (step_pairs,
step_compute_s, backward_step_compute_s of the ranks whose steps the file keeps, steps.py;
every ring size, a ring of one included), those of the point's own sweep when it has any;
else the compute sweep's attention_forward points (forward only). A rate is FLOP/s against the
pairs one kernel call computes.
"""
import math
import os
import re

import numpy as np

from . import links, model, pointstats, reader
from . import steps as ring_steps
from .scheme_model import BUS_FACTOR, OPS, Rate, Shape

GROUPS = {"intra": ("intra_node", "world"), "inter": ("inter_node", "world")}
COMPUTE_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def _group_ok(run, group, cls):
    """Whether a collectives group of this run measures link class cls."""
    if cls == "intra":
        return group == "intra_node" or (group == "world" and run.node_count <= 1)
    return run.node_count >= 2 and group in ("inter_node", "world")


def _stored(run, sweep, op, cls):
    """The collectives sweep's stored model of op for link class cls: the group order of GROUPS,
    then out-of-place float32 first (what the schemes call)."""
    m = sweep.subtables.get("model")
    if m is None or not {"alpha_s", "beta_Bps"} <= set(m.metrics):
        return None
    best = None
    for p in range(m.npoints):
        keys = m.points.iloc[p]
        group = str(keys.get("group", ""))
        g = int(keys["group_size"]) if "group_size" in keys else 2
        alpha, beta = m.rank_values("alpha_s", p), m.rank_values("beta_Bps", p)
        if str(keys.get("operation", "")) != op or not _group_ok(run, group, cls) or g < 2 \
                or not alpha.size or not beta.size:
            continue
        rank = (GROUPS[cls].index(group),) + _variant_rank(m, p)
        if best is None or rank < best[0]:
            best = (rank, {"alpha_s": float(alpha[0]), "bus_beta_Bps": float(beta[0]) * BUS_FACTOR[op](g),
                           "group_size": g, "source": f"stored {op} model ({group}, {g} ranks) in {sweep.name} "
                                                     f"of {os.path.basename(run.path)}"})
    return best[1] if best else None


def _variant_rank(sweep, p):
    """Out-of-place float32 first: the schemes' collectives are out of place (a sweep's points or
    its model/ sub-table)."""
    pts = sweep.points
    in_place = int(pts["in_place"].iloc[p]) if "in_place" in pts else 0
    dtype = str(pts["dtype"].iloc[p]) if "dtype" in pts else "float32"
    return (in_place != 0, dtype != "float32")


def _fitted(run, sweep, op, cls):
    """An alpha-beta fit to the slowest rank's times of one (group, variant) series of op."""
    for group in GROUPS[cls]:
        pts = [p for p in model._linked_points(sweep, op)
               if _group_ok(run, group, cls) and "group" in sweep.points and sweep.points["group"].iloc[p] == group]
        if not pts:
            continue
        best = min(_variant_rank(sweep, p) for p in pts)
        pts = [p for p in pts if _variant_rank(sweep, p) == best]
        fit = model._fit_slowest(sweep, model.COLLECTIVE_TIME, pts)
        if fit:
            g = int(model.group_size(sweep, pts[0]) or 2)
            return {"alpha_s": fit["alpha_s"], "bus_beta_Bps": fit["beta_Bps"] * BUS_FACTOR[op](g),
                    "group_size": g, "rel_rms_error": fit["rel_rms_error"],
                    "source": f"alpha-beta fit to {op} ({group}, {g} ranks) times of {sweep.name} in "
                              f"{os.path.basename(run.path)}"}
    return None


def _collective_fit(runs, op, cls):
    for run in runs:
        for s in run.sweeps_of_type(reader.COLLECTIVE_TYPES):
            fit = _stored(run, s, op, cls) or _fitted(run, s, op, cls)
            if fit:
                return fit
    return None


def _hop_fit(runs):
    """sendrecv (intra) from the ring points' calibrated hops: the ring's own transport, alone."""
    sizes, times = [], []
    for run in runs:
        if run.node_count > 1:
            continue
        for s, p, shape, n, R, scheme, _, _ in _ring_points(run):
            if scheme != "ring" or R < 2 or "hop_transfer_alone_s" not in s.metrics:
                continue
            t = s.rank_values("hop_transfer_alone_s", p)
            if t.size:
                sizes.append(2 * shape.batch * shape.kv_heads * n * shape.head_dim * shape.elem)
                times.append(float(t.max()))
    fit = model.fit_alpha_beta(sizes, times) if len(set(sizes)) >= 2 else None
    if not fit:
        return None
    return {"alpha_s": fit["alpha_s"], "bus_beta_Bps": fit["beta_Bps"], "group_size": 2,
            "rel_rms_error": fit["rel_rms_error"],
            "source": f"alpha-beta fit to the ring points' calibrated hops (hop_transfer_alone_s, "
                      f"{fit['points']} points): the ring's own transport, not a collectives sweep"}


def collective_fits(runs, given_links=()):
    """{(op, cls): fit or None} for every collective the schemes use and both link classes.
    given_links: --link pairs (class, model) for sendrecv, as the ring cost model takes them."""
    runs = sorted(runs, key=lambda r: -r.world_size)
    fits = {}
    ring_links = links.links(runs, given_links)
    for cls in links.CLASSES:
        m = ring_links.get(cls)
        fits[("sendrecv", cls)] = None if m is None else {
            "alpha_s": m["alpha_s"], "bus_beta_Bps": m["beta_Bps"], "group_size": 2, "source": m["source"]}
        for op in OPS:
            if op != "sendrecv":
                fits[(op, cls)] = _collective_fit(runs, op, cls)
    if fits[("sendrecv", "intra")] is None:
        fits[("sendrecv", "intra")] = _hop_fit(runs)
    return fits


# ---- points and shapes ---------------------------------------------------------------------

def _dilated(attrs):
    """Whether a sweep has LongNet branches (a one-branch list reads back as a plain number)."""
    rates = attrs.get("dilation_rates")
    return rates is not None and rates != [] and np.atleast_1d(rates).size > 0


def sweep_shape(sweep, p):
    """The Shape of point p of a ring_attention sweep, or None for what the model does not
    cover (dilated branches, an unknown dtype, missing sizes)."""
    a, keys = sweep.attrs, sweep.points.iloc[p]
    if _dilated(a):
        return None
    elem = model.DTYPE_BYTES.get(str(keys.get("dtype", "")).lower())
    if not elem or any(a.get(k) is None for k in ("batch", "num_heads", "head_dim")):
        return None
    heads = int(a["num_heads"])
    kv = int(a.get("num_kv_heads") or heads)
    return Shape(int(a["batch"]), heads, kv, int(a["head_dim"]), elem, bool(int(a.get("causal", 0) or 0)),
                 str(keys.get("layout", "contiguous")))


def _ring_points(run):
    """(sweep, point, shape, tokens per rank, R, scheme, U, head groups) of every modelled ring
    point."""
    for s in run.sweeps_of_type(reader.RING_TYPES):
        for p in range(s.npoints):
            shape = sweep_shape(s, p)
            if shape is None:
                continue
            keys = s.points.iloc[p]
            R = int(keys["ring_size"])
            U = int(keys["ulysses_degree"]) if "ulysses_degree" in keys else 1
            G = int(keys["ulysses_head_groups"]) if "ulysses_head_groups" in keys else 1
            yield s, p, shape, int(keys["seq_len"]) // R, R, str(keys.get("scheme", "ring")), U, G


def unmodelled(runs):
    """[(sweep, why)] of the scheme sweeps with points the model leaves out."""
    out = []
    for _, s in scheme_sweeps(runs):
        if any(sweep_shape(s, p) is None for p in range(s.npoints)):
            why = ("dilated branches (the pairs per call differ from the exact mask's)" if _dilated(s.attrs)
                   else "an unknown dtype or missing batch, num_heads, head_dim")
            out.append((s.name, why))
    return out


def scheme_sweeps(runs):
    """(run, sweep) of the ring_attention sweeps that ran two or more schemes."""
    return [(r, s) for r in runs for s in r.sweeps_of_type(reader.RING_TYPES)
            if "scheme" in s.points and s.points["scheme"].nunique() >= 2]


def _exposed(sweep, p):
    """The slowest rank's exposed communication: its forward and backward step waits summed
    (the ranks the sweep's table keeps: every rank, or a sample led by the slowest)."""
    per_rank = np.zeros(sweep.nrows)
    seen = False
    for name in ("step_wait_s", "backward_step_wait_s"):
        w = ring_steps.rank_sums(sweep, p, name)
        if w is not None:
            per_rank += np.nan_to_num(w)
            seen = seen or bool(np.isfinite(w).any())
    return float(per_rank.max()) if seen else math.nan


def _cls(run, sweep, p, R):
    """The link class point p's group ran on: intra when its ring stayed inside one node."""
    if "ring_nodes" in sweep.metrics:
        nodes = reader.numbers(sweep.metrics["ring_nodes"][:, p])
        if nodes.size and np.nanmax(nodes) > 1:
            return "inter"
        if nodes.size:
            return "intra"
    return "intra" if run.node_count <= 1 or R <= links.ranks_per_node([run]) else "inter"


# scheme_points' keys that are the slowest rank's value (array metrics: its median).
SLOWEST = {"fwd": "forward_time_s", "bwd": "backward_time_s", "total": "total_time_s",
           "bytes_sent": "bytes_sent_bytes"}


def scheme_points(runs):
    """One dict per measured point of the scheme sweeps: where it is, its Shape, n, R, scheme,
    U, link class, status and measured (slowest rank's median) forward, backward, total,
    exposed communication and bytes sent."""
    out = []
    for run, s in scheme_sweeps(runs):
        slowest = {key: pointstats.over_ranks(s, name, "max").tolist() for key, name in SLOWEST.items()}
        status = pointstats.first_text(s, "status", ("", "ok"))
        for sw, p, shape, n, R, scheme, U, G in _ring_points(run):
            if sw is not s:
                continue
            out.append({"file": os.path.basename(run.path), "sweep": s.name, "point": p, "shape": shape,
                        "dtype": str(s.points["dtype"].iloc[p]), "seq_len": n * R, "tokens_per_rank": n,
                        "ring_size": R, "scheme": scheme, "ulysses_degree": U, "head_groups": G,
                        "link": _cls(run, s, p, R),
                        "status": status[p] or "ok", "fwd": slowest["fwd"][p], "bwd": slowest["bwd"][p],
                        "total": slowest["total"][p], "exposed": _exposed(s, p),
                        "bytes_sent": slowest["bytes_sent"][p]})
    return out


# ---- the attention rate --------------------------------------------------------------------

def _step_sample(sweep, p, shape):
    """(pairs per call, forward FLOP/s, backward FLOP/s or None) of one point's step kernels."""
    got = ring_steps.point_steps(sweep, p, ("step_pairs", "step_compute_s", "backward_step_compute_s"))
    if got is None or not {"step_pairs", "step_compute_s"} <= set(got[1]):
        return None
    pairs, comp = got[1]["step_pairs"], got[1]["step_compute_s"]
    ok = np.isfinite(pairs) & np.isfinite(comp) & (pairs > 0) & (comp > 0)
    if not ok.any():
        return None
    flop = 4.0 * shape.head_dim * pairs[ok].sum()
    fwd = flop / comp[ok].sum()
    bwd = None
    if "backward_step_compute_s" in got[1]:
        b = got[1]["backward_step_compute_s"]
        okb = ok & np.isfinite(b) & (b > 0)
        if okb.any():
            bwd = 2.5 * 4.0 * shape.head_dim * pairs[okb].sum() / b[okb].sum()
    return pairs[ok].sum() / ok.sum(), fwd, bwd


def _compute_samples(runs, dtype, head_dim, causal):
    """(pairs, FLOP/s, None) of the compute sweeps' attention_forward points of that kind; the
    batch and heads come from the sweep's `attention` attribute."""
    out = []
    for run in runs:
        for s in run.sweeps_of_type(("compute",)):
            m = re.search(r"forward block \([^)]*\), (\w+), batch (\d+), heads (\d+), head_dim (\d+)(, causal)?",
                          str(s.attrs.get("attention", "")))
            if not m or "operation" not in s.points or "rate_tflops" not in s.metrics:
                continue
            if (COMPUTE_DTYPES.get(m.group(1)), int(m.group(4)), bool(m.group(5))) != (dtype, head_dim, causal):
                continue
            for p in range(s.npoints):
                if s.points["operation"].iloc[p] != "attention_forward":
                    continue
                rate = s.rank_values("rate_tflops", p)
                rows = float(s.points["size"].iloc[p])
                if rate.size:
                    pairs = int(m.group(2)) * int(m.group(3)) * (rows * (rows + 1) / 2 if causal else rows * rows)
                    out.append((pairs, float(rate.min()) * 1e12, None))
    return out


def rate_for(runs, sweep_name, shape, dtype):
    """The Rate for points of this sweep and shape (see the module's docstring), or None."""
    key = (dtype, shape.head_dim, shape.causal)
    own, other = [], []
    for run in runs:
        for s, p, sh, _, _, scheme, _, _ in _ring_points(run):
            if scheme != "ring" or s.point_status(p) != "ok":
                continue
            if (str(s.points["dtype"].iloc[p]), sh.head_dim, sh.causal) != key:
                continue
            smp = _step_sample(s, p, sh)
            if smp:
                (own if s.name == sweep_name else other).append(smp)
    if own or other:
        where = f"the ring points' step kernels of {sweep_name}" if own else \
            f"the ring points' step kernels of other sweeps ({dtype}, head dim {shape.head_dim})"
        return Rate(own or other, where)
    comp = _compute_samples(runs, *key)
    return Rate(comp, "the compute sweep's attention_forward blocks (forward only)") if comp else None
