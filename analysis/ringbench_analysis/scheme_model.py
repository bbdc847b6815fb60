"""A cost model per context-parallel scheme (docs/analysis.md, "Per-scheme cost model"):
for one attention shape, tokens per rank n and group size R, the forward and backward time of
ring, allgather, ulysses and hybrid as compute + exposed communication. Fit-free: the caller
gives the attention rate (Rate) and one alpha-beta fit per (collective, link class)
(scheme_inputs.py reads both from files), so every formula here can be checked by hand.

Compute: FlashAttention's convention, forward 4 d FLOPs per attending (query, key) pair (a
causal mask keeps S(S+1)/2 pairs per head), backward 2.5x forward, at the measured rate for a
kernel call of that many pairs (a big call runs nearer the peak than a small one):
  ring / allgather  R calls of n x n blocks, every head          (the ring's steps)
  ulysses           one call over S = n R positions, H/R heads
  hybrid            the inner ring over R/U ranks of U n rows, H/U heads
A contiguous causal layout leaves the last rank the most pairs (the others wait for it); zigzag,
striped and the head split of ulysses share them evenly.

Communication, t(m) = alpha + m f(G) / bus_beta with m the collective's message size as
nccl-tests counts it (docs/sweeps/collectives.md), G the group, f the busbw factor (1 for
sendrecv, (G-1)/G for all_gather, reduce_scatter, all_to_all): the bus bandwidth is what stays
constant as a group grows, so a fit at one group size extends to another (alpha does not grow:
a lower bound for large groups). Bytes as src/ring/cp_attention.cpp's bytes_sent_per_iteration:
  ring       forward R-1 K/V hops, backward R-2 K/V and R-1 fp32 dK/dV hops
             (RingAttention::backward_hop_bytes per step); each hop overlaps its step's
             kernels, so a step exposes max(0, hop - step compute)
  allgather  one all_gather of R K/V blocks before the kernels, one reduce_scatter of R fp32
             dK/dV blocks after them: nothing hidden
  ulysses    all-to-alls, nothing hidden: forward Q|K|V out and O|LSE (fp32) back, backward
             dO out and dQ|dK|dV (fp32) back; K/V carry num_kv_heads heads
  hybrid     ulysses' all-to-alls inside subgroups of U, the ring across R/U of them
A missing fit is named in the prediction's `missing` list and its times are None, never 0.
"""
import math
from dataclasses import dataclass

import numpy as np

SCHEMES = ("ring", "allgather", "ulysses", "hybrid")
F32 = 4                      # dK, dV, dQ, O, LSE travel in fp32
BACKWARD_FLOP_FACTOR = 2.5   # the sweeps' flop_convention
# busbw factor per collective and group size (src/profiling/collective_table.cpp)
BUS_FACTOR = {"sendrecv": lambda g: 1.0, "all_gather": lambda g: (g - 1) / g,
              "reduce_scatter": lambda g: (g - 1) / g, "all_to_all": lambda g: (g - 1) / g}
OPS = tuple(BUS_FACTOR)


@dataclass(frozen=True)
class Shape:
    """What the times depend on besides n and R. elem: bytes per element of Q, K, V, dO."""
    batch: int
    heads: int
    kv_heads: int
    head_dim: int
    elem: int
    causal: bool
    layout: str = "zigzag"


class Rate:
    """Attention FLOP/s per GPU against the pairs one kernel call computes: log-log interpolation
    between measured samples, the end values beyond them. A backward rate of None is taken
    equal to the forward's (a source that timed only the forward)."""

    def __init__(self, samples, source=""):
        pts = sorted(((float(p), float(f), None if b is None else float(b)) for p, f, b in samples
                      if p > 0 and f > 0), key=lambda t: t[0])
        if not pts:
            raise ValueError("a Rate needs at least one sample with pairs > 0 and a rate > 0")
        self.source = source
        self.pairs = np.log([p for p, _, _ in pts])
        self._fwd = np.log([f for _, f, _ in pts])
        # a sample without a backward rate lends its forward one
        self._bwd = np.log([b if b else f for _, f, b in pts])
        self.has_backward = any(b for _, _, b in pts)

    @classmethod
    def constant(cls, fwd_flops, bwd_flops=None, source="constant"):
        return cls([(1.0, fwd_flops, bwd_flops)], source)

    def _at(self, table, pairs):
        return float(np.exp(np.interp(math.log(max(pairs, 1e-300)), self.pairs, table)))

    def fwd(self, pairs):
        return self._at(self._fwd, pairs)

    def bwd(self, pairs):
        return self._at(self._bwd, pairs)


def collective_time(fits, op, cls, nbytes, group):
    """(seconds, None) of one collective of `nbytes` (nccl-tests' size) over `group` ranks on
    link class `cls`, or (None, reason) when there is no fit. A group of one sends nothing."""
    if group <= 1 or nbytes <= 0:
        return 0.0, None
    fit = fits.get((op, cls))
    if fit is None:
        return None, f"no {op} fit ({cls}-node)"
    bus = fit["bus_beta_Bps"]
    return fit["alpha_s"] + (nbytes * BUS_FACTOR[op](group) / bus if bus and math.isfinite(bus) else 0.0), None


# ---- bytes ---------------------------------------------------------------------------------

def kv_bytes(shape, rows):
    """One K|V packet of `rows` positions (GQA: num_kv_heads heads)."""
    return 2 * shape.batch * shape.kv_heads * rows * shape.head_dim * shape.elem


def dkdv_bytes(shape, rows):
    return 2 * shape.batch * shape.kv_heads * rows * shape.head_dim * F32


def exchange_sizes(shape, n):
    """The four all-to-alls of a head exchange, each as nccl-tests' size (one rank's whole send
    buffer, its own chunk included), for shards of n rows (HeadExchange, ulysses_attention.cpp)."""
    elems = shape.batch * shape.heads * n * shape.head_dim
    kv = shape.batch * shape.kv_heads * n * shape.head_dim
    rows = shape.batch * shape.heads * n
    return {"fwd_in": (elems + 2 * kv) * shape.elem, "fwd_out": (elems + rows) * F32,
            "bwd_in": elems * shape.elem, "bwd_out": (elems + 2 * kv) * F32}


def inner_ring(shape, n, R, U):
    """(shape, rows per rank, ring size) of hybrid's inner ring: H/U heads, U n rows, R/U ranks."""
    inner = Shape(shape.batch, shape.heads // U, shape.kv_heads // U, shape.head_dim, shape.elem,
                  shape.causal, shape.layout)
    return inner, U * n, R // U


def backward_hops(shape, rows, R):
    """Bytes of the hop in flight during each backward ring step (RingAttention::backward_hop_bytes)."""
    if R <= 1:
        return [0] * max(R, 1)
    kv, dkdv = kv_bytes(shape, rows), dkdv_bytes(shape, rows)
    return [(kv if R >= 3 else 0) if s == 0 else kv + dkdv if s <= R - 3 else dkdv for s in range(R)]


def bytes_sent(shape, n, R, scheme, U=1):
    """Bytes one rank sends per iteration (forward + backward): cp_attention.cpp's
    bytes_sent_per_iteration restated, to check against a file's bytes_sent_bytes."""
    if R <= 1:
        return 0
    if scheme == "ring":
        return (R - 1) * kv_bytes(shape, n) + sum(backward_hops(shape, n, R))
    if scheme == "allgather":
        return (R - 1) * (kv_bytes(shape, n) + dkdv_bytes(shape, n))
    if scheme == "ulysses":
        return sum(exchange_sizes(shape, n).values()) * (R - 1) // R
    inner, rows, ring = inner_ring(shape, n, R, U)
    return sum(exchange_sizes(shape, n).values()) * (U - 1) // U + bytes_sent(inner, rows, ring, "ring")


# ---- compute -------------------------------------------------------------------------------

def rank_pairs(shape, rows, R):
    """Attending pairs of the busiest rank of a ring of R ranks holding `rows` positions each:
    an even share of S(S+1)/2 per head when causal (zigzag, striped), the last rank's
    R-1 full blocks and its own causal block for a contiguous causal layout."""
    heads = shape.batch * shape.heads
    S = rows * R
    if not shape.causal:
        return heads * rows * S
    if shape.layout == "contiguous":
        return heads * (rows * rows * (R - 1) + rows * (rows + 1) / 2)
    return heads * S * (S + 1) / 2 / R


def pass_compute(shape, rows, R, rate):
    """(forward s, backward s, pairs per call) of R kernel calls (one per ring step)."""
    pairs = rank_pairs(shape, rows, R)
    per_call = pairs / R
    flop = 4.0 * shape.head_dim * pairs
    return flop / rate.fwd(per_call), BACKWARD_FLOP_FACTOR * flop / rate.bwd(per_call), per_call


def ring_exposed(shape, rows, R, step_fwd, step_bwd, fits, cls):
    """(forward, backward exposed seconds, missing reasons) of a ring's hops, each hidden behind
    its step's kernels: a step exposes max(0, hop - step compute)."""
    if R <= 1:
        return 0.0, 0.0, []
    hop, why = collective_time(fits, "sendrecv", cls, kv_bytes(shape, rows), 2)
    if hop is None:
        return None, None, [why]
    fwd = (R - 1) * max(0.0, hop - step_fwd)
    bwd = 0.0
    for b in backward_hops(shape, rows, R):
        t, _ = collective_time(fits, "sendrecv", cls, b, 2)
        bwd += max(0.0, t - step_bwd)
    return fwd, bwd, []


def _ring_pass(shape, rows, R, rate, fits, cls):
    """{compute_fwd, compute_bwd, exposed_fwd, exposed_bwd, pairs_per_call, missing} of a ring."""
    cf, cb, per_call = pass_compute(shape, rows, R, rate)
    ef, eb, missing = ring_exposed(shape, rows, R, cf / R, cb / R, fits, cls)
    return {"compute_fwd": cf, "compute_bwd": cb, "exposed_fwd": ef, "exposed_bwd": eb,
            "pairs_per_call": per_call, "missing": missing}


def _exchange(shape, n, members, fits, cls):
    """(forward, backward seconds, missing) of a head exchange over `members` ranks: two
    all-to-alls each way, none hidden (the kernels need their result)."""
    sizes = exchange_sizes(shape, n)
    t = {}
    missing = []
    for k, m in sizes.items():
        t[k], why = collective_time(fits, "all_to_all", cls, m, members)
        if why:
            missing = [why]
    if missing:
        return None, None, missing
    return t["fwd_in"] + t["fwd_out"], t["bwd_in"] + t["bwd_out"], []


def _allgather(shape, n, R, rate, fits, cls):
    cf, cb, per_call = pass_compute(shape, n, R, rate)  # the ring's blocks, from memory
    ag, why_ag = collective_time(fits, "all_gather", cls, R * kv_bytes(shape, n), R)
    rs, why_rs = collective_time(fits, "reduce_scatter", cls, R * dkdv_bytes(shape, n), R)
    return {"compute_fwd": cf, "compute_bwd": cb, "exposed_fwd": ag, "exposed_bwd": rs,
            "pairs_per_call": per_call, "missing": [w for w in (why_ag, why_rs) if w]}


def _headsplit(shape, n, R, U, rate, fits, cls, ring_cls):
    """ulysses (U = R) and hybrid: the exchange inside U ranks, the inner ring over R/U."""
    inner, rows, ring = inner_ring(shape, n, R, U)
    out = _ring_pass(inner, rows, ring, rate, fits, ring_cls)
    xf, xb, missing = _exchange(shape, n, U, fits, cls)
    out["missing"] += missing
    if out["exposed_fwd"] is not None and xf is not None:
        out["exposed_fwd"] += xf
        out["exposed_bwd"] += xb
    else:
        out["exposed_fwd"] = out["exposed_bwd"] = None
    return out


def feasible(shape, R, scheme, U=1):
    """None, or why the scheme cannot split this shape over R ranks (the sweep's own checks)."""
    if scheme == "ulysses" and (shape.heads % R or shape.kv_heads % R):
        return f"ulysses needs heads ({shape.heads}) and K/V heads ({shape.kv_heads}) divisible by R={R}"
    if scheme == "hybrid" and (U < 2 or R % U or shape.heads % U or shape.kv_heads % U):
        return f"hybrid U={U} must divide R={R}, heads ({shape.heads}) and K/V heads ({shape.kv_heads})"
    return None


def predict(shape, n, R, scheme, rate, fits, cls="intra", U=1, ring_cls=None):
    """One scheme at n tokens per rank over R ranks: {scheme, fwd, bwd, total, compute_fwd,
    compute_bwd, exposed_fwd, exposed_bwd, pairs_per_call, missing}. cls: the link class of
    the group's collectives (hybrid: of its subgroups of U); ring_cls: hybrid's inner ring's
    (default cls). Times are None where a fit is missing or the split is not possible."""
    why = feasible(shape, R, scheme, U)
    if why:
        return {"scheme": scheme, "fwd": None, "bwd": None, "total": None, "missing": [why]}
    if scheme == "ring":
        out = _ring_pass(shape, n, R, rate, fits, cls)
    elif scheme == "allgather":
        out = _allgather(shape, n, R, rate, fits, cls)
    elif scheme in ("ulysses", "hybrid"):
        out = _headsplit(shape, n, R, R if scheme == "ulysses" else U, rate, fits, cls, ring_cls or cls)
    else:
        raise ValueError(f"unknown scheme {scheme!r} ({', '.join(SCHEMES)})")
    ok = not out["missing"]
    out.update(scheme=scheme,
               fwd=out["compute_fwd"] + out["exposed_fwd"] if ok else None,
               bwd=out["compute_bwd"] + out["exposed_bwd"] if ok else None)
    out["total"] = out["fwd"] + out["bwd"] if ok else None
    return out


# ---- crossover -----------------------------------------------------------------------------

def log_grid(lo, hi, per_octave=4):
    return [float(x) for x in np.exp(np.linspace(math.log(lo), math.log(hi), int(per_octave * math.log2(hi / lo)) + 1))]


def sign_changes(diff, lo=128.0, hi=4194304.0, per_octave=4, iterations=60):
    """Where diff(n) changes sign between lo and hi tokens per rank: a log-spaced grid, each
    bracket refined by bisection in log n. [(n, 'below' | 'above')]: 'below' where diff < 0
    below n (the scheme is faster for fewer tokens), 'above' the other way."""
    grid = log_grid(lo, hi, per_octave)
    vals = [diff(x) for x in grid]
    out = []
    for a, b, fa, fb in zip(grid[:-1], grid[1:], vals[:-1], vals[1:]):
        if (fa < 0) == (fb < 0):  # a tie counts for the ring (the default)
            continue
        x0, x1, f0 = math.log(a), math.log(b), fa
        for _ in range(iterations):
            mid = (x0 + x1) / 2
            fm = diff(math.exp(mid))
            if (fm < 0) == (f0 < 0):
                x0, f0 = mid, fm
            else:
                x1 = mid
        out.append((math.exp((x0 + x1) / 2), "below" if fa < 0 else "above"))
    return out


def crossover(shape, R, scheme, rate, fits, cls="intra", U=1, ring_cls=None, lo=128.0, hi=4194304.0,
              at=()):
    """The tokens per rank where `scheme` and the ring take the same forward + backward time:
    {crossings: [(n, 'below'|'above')], faster_at_lo, faster_at_hi, at: [(n, time / ring's
    time)] at the tokens per rank `at`, missing}. 'below': the scheme beats the ring below n.
    cls, U, ring_cls as predict's; the ring it is compared with runs on ring_cls (default cls)."""
    def total(s, n):
        if s == "ring":
            return predict(shape, n, R, "ring", rate, fits, ring_cls or cls)
        return predict(shape, n, R, s, rate, fits, cls, U, ring_cls)

    lo_s, lo_r = total(scheme, lo), total("ring", lo)
    missing = lo_s["missing"] + [m for m in lo_r["missing"] if m not in lo_s["missing"]]
    if missing:
        return {"crossings": [], "missing": missing, "faster_at_lo": None, "faster_at_hi": None, "at": []}

    def diff(n):
        return total(scheme, n)["total"] - total("ring", n)["total"]
    d_lo, d_hi = diff(lo), diff(hi)
    ratios = [(n, total(scheme, n)["total"] / total("ring", n)["total"]) for n in at]
    return {"crossings": sign_changes(diff, lo, hi), "missing": [], "at": ratios,
            "faster_at_lo": scheme if d_lo < 0 else "ring", "faster_at_hi": scheme if d_hi < 0 else "ring"}
