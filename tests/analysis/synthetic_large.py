"""A large synthetic ringbench file in today's layout (schema_version 2, docs/hdf5-schema.md) for
N ranks, as a GPU run on nodes of 8 ranks would write it, for the analysis's bounded-memory
checks (test_large_files.py at 64 ranks; the 1,024-rank measurement of docs/analysis.md#large-files):

    PYTHONPATH=analysis /usr/bin/python3 tests/analysis/synthetic_large.py --ranks 1024 --out big.h5
    PYTHONPATH=analysis /usr/bin/python3 tests/analysis/synthetic_large.py --perturb big.h5 --out slow.h5

Sweeps (every dataset of docs/sweeps/<type>.md that the analysis or a reader would meet):
- ring: ring_attention, 3 lengths x ring sizes 1, 2, 4, ..., N; per-step arrays [N, P, N];
- ring_causal: ring_attention, causal zigzag, 2 lengths x ring sizes 8, 64, 512, ... and N;
- coll: collectives, 7 operations x groups world, intra_node, inter_node x 8 B .. 64 MiB, out of
  place and in place, iteration_time_s [N, P, 20], and the fitted model/;
- p2p: p2p_matrix, the default pair set at this size (every ordered pair up to 64 ranks, else
  per_node_pair: node 0's pairs and the node leaders' pairs) and every shift at once;
- compute, memory: synthetic.py's profile sweeps (GEMMs, memory bandwidth).
Datasets are written a block of ranks at a time, so making the file needs little memory.
--perturb copies a file with the "ring" sweep's iteration times x --factor (a regression).
"""
import argparse
import os
import shutil
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import synthetic  # noqa: E402

RANKS_PER_NODE = 8
GPU = "NVIDIA H100 80GB HBM3"
ITERATIONS = 20
HEADS, HEAD_DIM, ELEM = 32, 128, 2          # bf16
TFLOPS = 400e12                             # block kernel rate of the model
LINK = {"intra": (5e-6, 150e9), "inter": (12e-6, 25e9)}  # (alpha s, beta B/s)
SPREAD = 1.0 + 0.01 * np.sin(np.arange(ITERATIONS))      # per-iteration jitter, median ~1
NOTE = ("sampled, streamed reference: heads (b,h)=(0,0) and (0,31), out on 32 rows per rank, "
        "gradients on 32 rows per rank; dK/dV use the ring's own log-sum-exp")


def _ds(g, name, shape, dtype, units, role="metric"):
    d = g.create_dataset(name, shape=shape, dtype=dtype)
    d.attrs.update({"units": units, "description": f"metric {name}", "role": role})
    return d


def _write(g, world, block, specs, npoints):
    """specs: [(name, units, dtype, trailing shape, fill(ranks, p) -> [len(ranks), *trailing])];
    every dataset [world, P, *trailing] written block rows at a time."""
    sets = [(_ds(g, n, (world, npoints) + tuple(tr), dt, u), dt, tr, fill) for n, u, dt, tr, fill in specs]
    for r0 in range(0, world, block):
        ranks = np.arange(r0, min(world, r0 + block))
        for d, dt, tr, fill in sets:
            a = np.empty((len(ranks), npoints) + tuple(tr), dtype=dt)
            for p in range(npoints):
                a[:, p] = fill(ranks, p)
            d[r0:r0 + len(ranks)] = a


def _keys(g, keys):
    g.attrs["points"] = np.int64(len(next(iter(keys.values()))[0]))
    kg = g.create_group("points")
    for name, (values, units) in keys.items():
        synthetic.dataset(kg, name, values, units, f"key {name}", "key")


# ---- ring attention --------------------------------------------------------------------------

def _ring_model(s, r, causal):
    """(per-step compute s, per-step transfer s, K/V bytes, pairs per step) of one point."""
    local = s // r
    pairs = HEADS * local * local // (2 if causal else 1)
    kv = 2 * HEADS * local * HEAD_DIM * ELEM
    alpha, beta = LINK["intra" if r <= RANKS_PER_NODE else "inter"]
    return 4.0 * HEAD_DIM * pairs / TFLOPS, (alpha + kv / beta if r > 1 else 0.0), kv, pairs


def _jitter(ranks):
    return 1.0 + 0.02 * ((ranks * 7919) % 101) / 100.0


def _ring_specs(pts, rmax, causal):
    m = [_ring_model(s, r, causal) for s, r in pts]

    def steps(value, pad=np.nan):
        """[ranks, rmax]: the point's R steps from value(ranks, p) ([ranks] or [ranks, R]), padded."""
        def fill(ranks, p):
            r = pts[p][1]
            out = np.full((len(ranks), rmax), pad)
            out[:, :r] = np.broadcast_to(np.asarray(value(ranks, p)).reshape(len(ranks), -1), (len(ranks), r))
            return out
        return fill

    def t(ranks, p):  # forward time: R steps, each the longer of compute and transfer
        return pts[p][1] * max(m[p][0], m[p][1]) * _jitter(ranks)

    def members(ranks, p):
        r = pts[p][1]
        return (ranks // r * r)[:, None] + np.arange(r)[None, :]

    def const(v):
        return lambda ranks, p: np.full(len(ranks), v(p) if callable(v) else v)

    fl, i8 = np.float64, np.int64
    flop = (lambda p: 4.0 * HEAD_DIM * m[p][3] * pts[p][1])
    specs = [("forward_time_s", "s", fl, (ITERATIONS,), lambda k, p: t(k, p)[:, None] * SPREAD),
             ("backward_time_s", "s", fl, (ITERATIONS,), lambda k, p: 2.5 * t(k, p)[:, None] * SPREAD),
             ("total_time_s", "s", fl, (ITERATIONS,), lambda k, p: 3.5 * t(k, p)[:, None] * SPREAD)]
    for name, f in (("step_compute_s", 1.0), ("step_compute_alone_s", 0.97),
                    ("backward_step_compute_s", 2.5), ("backward_step_compute_alone_s", 2.4)):
        specs.append((name, "s", fl, (rmax,), steps(lambda k, p, f=f: f * m[p][0] * _jitter(k))))
    for name, f in (("step_wait_s", 1.0), ("backward_step_wait_s", 2.0)):
        wait = (lambda k, p, f=f: np.full(len(k), f * max(0.0, m[p][1] - m[p][0])))
        specs.append((name, "s", fl, (rmax,), steps(wait)))
    specs += [("step_pairs", "1", i8, (rmax,), steps(lambda k, p: np.full(len(k), m[p][3]), -1)),
              ("ring_members", "1", i8, (rmax,), steps(members, -1)),
              ("parity_elements", "1", i8, (4,), lambda k, p: np.full((len(k), 4), 65536))]
    for name, v in (("forward_flop", flop), ("hop_transfer_alone_s", lambda p: m[p][1]),
                    ("forward_transfer_alone_s", lambda p: m[p][1] * (pts[p][1] - 1)),
                    ("backward_transfer_alone_s", lambda p: 2 * m[p][1] * (pts[p][1] - 1)),
                    ("overlap_efficiency", 0.9), ("backward_overlap_efficiency", 0.85),
                    ("kernel_slowdown", 1.03), ("backward_kernel_slowdown", 1.04),
                    ("comm_create_time_s", 0.2), ("parity_time_s", 1.5), ("lse_max_abs", 1e-3)):
        specs.append((name, "FLOP" if "flop" in name else "s" if name.endswith("_s") else "1", fl, (), const(v)))
    for err in ("out", "dq", "dk", "dv"):
        specs += [(f"{err}_max_abs", "1", fl, (), const(2e-3)), (f"{err}_max_rel", "1", fl, (), const(4e-3))]
    for name in ("forward_tflops", "backward_tflops", "total_tflops"):  # 1x, 2.5x, 3.5x the work and time
        specs.append((name, "TFLOP/s", fl, (), lambda k, p: flop(p) / t(k, p) / 1e12))
    ints = {"block_calls_cudnn": lambda p: 2 * pts[p][1], "block_calls_flash": 0, "block_calls_naive": 0,
            "policy_block_calls": 0, "bytes_sent_bytes": lambda p: 3 * m[p][2] * (pts[p][1] - 1),
            "comm_created": 1, "oom_requested_bytes": -1, "oom_free_bytes": -1, "overlap_repeats": 3,
            "parity_sampled": 1, "parity_reference_bytes": 1 << 26,
            "peak_memory_bytes": lambda p: 8 * m[p][2] + (1 << 30),
            "ring_nodes": lambda p: max(1, pts[p][1] // RANKS_PER_NODE),
            "ring_crossing_hops": lambda p: 0 if pts[p][1] <= RANKS_PER_NODE else pts[p][1] // RANKS_PER_NODE}
    specs += [(n, "B" if n.endswith("_bytes") else "1", i8, (), const(v)) for n, v in ints.items()]
    specs += [("ring_id", "1", i8, (), lambda k, p: k // pts[p][1]),
              ("ring_rank", "1", i8, (), lambda k, p: k % pts[p][1])]
    text = {"status": "ok", "kernel_path": "cudnn", "paths_ran": "cudnn", "parity_mode": "sampled",
            "parity_note": NOTE, "oom_message": "", "transport": "nccl",
            "transport_reason": lambda p: ("auto: one node, peer access on every hop" if pts[p][1] > 1
                                           else "ring of one: nothing travels")}
    for n, v in text.items():
        width = max(1, max(len(v(p) if callable(v) else v) for p in range(len(pts))))
        specs.append((n, "1", f"S{width}", (), const(v)))
    return specs


def _ring_sweep(sweeps, name, world, seq_lens, ring_sizes, causal, block):
    g = synthetic._sweep(sweeps, name, "ring_attention")
    for k, v in (("batch", 1), ("num_heads", HEADS), ("num_kv_heads", HEADS), ("head_dim", HEAD_DIM),
                 ("causal", int(causal)), ("backward", 1), ("iterations", ITERATIONS), ("warmup", 2)):
        g.attrs[k] = np.int64(v)
    pts = [(s, r) for s in seq_lens for r in ring_sizes]
    layout = "zigzag" if causal else "contiguous"
    n = len(pts)
    _keys(g, {"seq_len": ([s for s, _ in pts], "1"), "ring_size": ([r for _, r in pts], "1"),
              "num_rings": ([world // r for _, r in pts], "1"), "layout": ([layout] * n, "1"),
              "dtype": (["bf16"] * n, "1"), "compute_dtype": (["bf16"] * n, "1"),
              "kernel": (["cudnn"] * n, "1"), "kernel_tile": (["default"] * n, "1"),
              "kernel_policy": (["none: kernel cudnn named"] * n, "1"),
              "scheme": (["ring"] * n, "1"), "scheme_asked": (["ring"] * n, "1"),
              "cp_policy": (["none: scheme ring named"] * n, "1"), "transport_asked": (["auto"] * n, "1"),
              "ulysses_degree": (np.ones(n, dtype=np.int64), "1"), "tolerance": ([0.02] * n, "1"),
              "label": ([f"S={s} R={r} ({world // r} rings) {'causal ' if causal else ''}{layout} bf16 "
                         f"b=1 h={HEADS} d={HEAD_DIM} fwd+bwd" for s, r in pts], "1")})
    _write(g, world, block, _ring_specs(pts, max(ring_sizes), causal), n)


# ---- collectives -----------------------------------------------------------------------------

BUS = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
       "reduce_scatter": lambda n: (n - 1) / n, "all_to_all": lambda n: (n - 1) / n,
       "broadcast": lambda n: 1.0, "reduce": lambda n: 1.0, "sendrecv": lambda n: 1.0}


def _group(kind, world, ranks):
    """(group size, group id, rank in group) of each rank."""
    if kind == "world":
        return world, np.zeros_like(ranks), ranks
    if kind == "intra_node":
        return RANKS_PER_NODE, ranks // RANKS_PER_NODE, ranks % RANKS_PER_NODE
    return world // RANKS_PER_NODE, ranks % RANKS_PER_NODE, ranks // RANKS_PER_NODE


def _collectives(sweeps, world, block, nsizes):
    g = synthetic._sweep(sweeps, "coll", "collectives")
    sizes = [(64 << 20) >> k for k in reversed(range(nsizes))]  # .. 64 MiB (24: from 8 B)
    groups = ("world", "intra_node", "inter_node") if world > RANKS_PER_NODE else ("world",)
    rows = [(op, grp, ip, m) for op in BUS for grp in groups
            for ip in ((0,) if op in ("all_to_all", "sendrecv") else (0, 1)) for m in sizes]
    n = len(rows)
    _keys(g, {"operation": ([r[0] for r in rows], "1"), "group": ([r[1] for r in rows], "1"),
              "dtype": (["float32"] * n, "1"), "in_place": (np.array([r[2] for r in rows]), "1"),
              "message_size_bytes": (np.array([r[3] for r in rows]), "B")})

    def time(ranks, p):
        op, grp, _, m = rows[p]
        size = _group(grp, world, ranks)[0]
        alpha, beta = LINK["intra" if grp == "intra_node" or size <= RANKS_PER_NODE else "inter"]
        return (alpha * np.log2(max(size, 2)) + m * BUS[op](size) / beta) * _jitter(ranks)

    def rate(bus):
        def f(ranks, p):
            op, grp, _, m = rows[p]
            return m / time(ranks, p) * (BUS[op](_group(grp, world, ranks)[0]) if bus else 1.0)
        return f
    fl, i8 = np.float64, np.int64
    part = (lambda i: lambda k, p: np.broadcast_to(_group(rows[p][1], world, k)[i], k.shape))
    _write(g, world, block, [
        ("time_s", "s", fl, (), time), ("group_time_s", "s", fl, (), time),
        ("algbw_Bps", "B/s", fl, (), rate(False)), ("busbw_Bps", "B/s", fl, (), rate(True)),
        ("group_size", "1", i8, (), part(0)), ("group_id", "1", i8, (), part(1)),
        ("group_rank", "1", i8, (), part(2)),
        ("size_bytes", "B", i8, (), lambda k, p: np.full(len(k), rows[p][3])),
        ("count", "1", i8, (), lambda k, p: np.full(len(k), rows[p][3] // 4)),
        ("wrong_elements", "1", i8, (), lambda k, p: np.zeros(len(k))),
        ("iteration_time_s", "s", fl, (ITERATIONS,), lambda k, p: time(k, p)[:, None] * SPREAD),
        ("status", "1", "S2", (), lambda k, p: np.full(len(k), b"ok")),
        ("oom_requested_bytes", "B", i8, (), lambda k, p: np.full(len(k), -1)),
        ("oom_free_bytes", "B", i8, (), lambda k, p: np.full(len(k), -1)),
        ("oom_message", "1", "S1", (), lambda k, p: np.full(len(k), b""))], n)
    series = [(op, grp, ip) for op in BUS for grp in groups
              for ip in ((0,) if op in ("all_to_all", "sendrecv") else (0, 1))]
    mg = g.create_group("model")
    s = len(series)
    _keys(mg, {"operation": ([x[0] for x in series], "1"), "group": ([x[1] for x in series], "1"),
               "transport": (["nccl"] * s, "1"), "dtype": (["float32"] * s, "1"),
               "in_place": (np.array([x[2] for x in series]), "1"),
               "group_size": (np.array([_group(x[1], world, np.arange(1))[0] for x in series]), "1")})
    for name, units, v in (("alpha_s", "s", LINK["inter"][0]), ("beta_Bps", "B/s", LINK["inter"][1]),
                           ("bus_beta_Bps", "B/s", LINK["inter"][1]), ("fit_rel_error", "1", 0.02),
                           ("fit_points", "1", 24.0)):
        _ds(mg, name, (world, s), np.float64, units)[...] = v


# ---- p2p matrix ------------------------------------------------------------------------------

def _pairs(world, most=None):
    """The default pair set: every ordered pair up to 64 ranks, else per_node_pair (node 0's
    pairs, then the node leaders'); the first `most` of them where given."""
    if world <= 64:
        pairs = [(a, b) for a in range(world) for b in range(world) if a != b]
    else:
        node0 = [(a, b) for a in range(RANKS_PER_NODE) for b in range(RANKS_PER_NODE) if a != b]
        leaders = range(0, world, RANKS_PER_NODE)
        pairs = node0 + [(a, b) for a in leaders for b in leaders if a != b]
    return pairs[:most]


def _p2p(sweeps, world, block, most_pairs):
    g = synthetic._sweep(sweeps, "p2p", "p2p_matrix")
    for k, v in (("latency_bytes", 8), ("bandwidth_bytes", 1 << 22), ("iterations", 20), ("seed", 1)):
        g.attrs[k] = np.int64(v)
    pairs = _pairs(world, most_pairs)
    snd = np.array([a for a, _ in pairs] + [-1] * (world - 1))
    rcv = np.array([b for _, b in pairs] + [-1] * (world - 1))
    shift = np.concatenate([(rcv[:len(pairs)] - snd[:len(pairs)]) % world, np.arange(1, world)])
    n, npair = len(snd), len(pairs)
    _keys(g, {"pattern": (["pair"] * npair + ["concurrent"] * (world - 1), "1"),
              "sender": (snd, "1"), "receiver": (rcv, "1"), "shift": (shift, "1")})
    inter = (snd // RANKS_PER_NODE) != (rcv // RANKS_PER_NODE)
    bw = np.where(inter, LINK["inter"][1], LINK["intra"][1])
    lat = np.where(inter, LINK["inter"][0], LINK["intra"][0])
    rnd = np.arange(n) // max(1, world // 2)
    is_pair = np.arange(n) < npair
    metrics = {"latency_s": ("s", lat, is_pair), "bandwidth_Bps": ("B/s", bw, is_pair),
               "latency_bidir_s": ("s", 1.2 * lat, is_pair & (snd < rcv)),
               "bandwidth_bidir_Bps": ("B/s", 1.8 * bw, is_pair & (snd < rcv)),
               "concurrent_bandwidth_Bps": ("B/s", np.full(n, 0.7 * LINK["inter"][1]), None),
               "round": ("1", rnd.astype(float), is_pair),
               "pairs_in_round": ("1", np.full(n, float(max(1, world // 2))), is_pair)}
    for name, (units, value, where) in metrics.items():
        d = _ds(g, name, (world, n), np.float64, units)
        for r0 in range(0, world, block):
            k = np.arange(r0, min(world, r0 + block))[:, None]
            mine = ((snd == k) | (rcv == k)) & where if where is not None else ~is_pair & (k >= 0)
            d[r0:r0 + len(k)] = np.where(mine, value * _jitter(k), np.nan)


# ---- the file ----------------------------------------------------------------------------------

CONFIG = """run:
  name: large{world}
backend: cuda
sweeps:
  - {{type: ring_attention, name: ring, seq_lengths: {seq}, ring_sizes: {rings}}}
  - {{type: ring_attention, name: ring_causal, causal: true, layout: zigzag, ring_sizes: {causal}}}
  - {{type: collectives, name: coll, groups: [world, intra_node, inter_node]}}
  - {{type: p2p_matrix, name: p2p}}
  - {{type: compute}}
  - {{type: memory}}
"""


def ring_sizes(world):
    return [1 << k for k in range(world.bit_length()) if (1 << k) <= world]


def make_large(path, world, seq_lens=(4096, 16384, 65536), coll_sizes=24, most_pairs=None, block=64):
    """The file for `world` ranks (a power of two, at least 8); returns path. coll_sizes: the
    collectives' message sizes (the largest ones up to 64 MiB); most_pairs: at most this many
    p2p pairs (a smaller file for a quick test)."""
    rings = ring_sizes(world)
    causal = sorted({r for r in rings if r >= 8 and (r == 8 or r % 64 == 0)} | {world})
    synthetic.make_run(path, world, pingpong=False, collectives=False, p2p=False, drop_ring=True)
    with h5py.File(path, "r+") as f:
        synthetic._sattr(f["run"], "backend", "cuda")
        synthetic._sattr(f["run"], "config_text", CONFIG.format(world=world, seq=list(seq_lens),
                                                                 rings=rings, causal=causal))
        f["run"].attrs["node_count"] = np.int64(max(1, world // RANKS_PER_NODE))
        for name in ("hostname", "node_index", "local_rank", "gpu_name"):
            del f["ranks"][name]
        r = np.arange(world)
        synthetic.dataset(f["ranks"], "hostname", [f"gpu{n:04d}" for n in r // RANKS_PER_NODE], "1", "host", "key")
        synthetic.dataset(f["ranks"], "node_index", r // RANKS_PER_NODE, "1", "node", "key")
        synthetic.dataset(f["ranks"], "local_rank", r % RANKS_PER_NODE, "1", "local rank", "key")
        synthetic.dataset(f["ranks"], "gpu_name", [GPU] * world, "1", "GPU", "key")
        sweeps = f["sweeps"]
        _ring_sweep(sweeps, "ring", world, seq_lens, rings, False, block)
        _ring_sweep(sweeps, "ring_causal", world, seq_lens[-2:], causal, True, block)
        _collectives(sweeps, world, block, coll_sizes)
        _p2p(sweeps, world, block, most_pairs)
        synthetic._profile_compute(sweeps, world)
        synthetic._profile_memory(sweeps, world)
    return path


def perturb(src, dst, factor=1.10, sweep="ring", block=64):
    """A copy of src whose sweep's per-iteration times are x factor; returns dst."""
    shutil.copyfile(src, dst)
    with h5py.File(dst, "r+") as f:
        g = f["sweeps"][sweep]
        for name in ("forward_time_s", "backward_time_s", "total_time_s"):
            d = g[name]
            for r0 in range(0, d.shape[0], block):
                d[r0:r0 + block] = d[r0:r0 + block] * factor
    return dst


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--out", required=True)
    ap.add_argument("--perturb", metavar="SRC", help="copy SRC with the ring sweep's times x --factor")
    ap.add_argument("--factor", type=float, default=1.10)
    a = ap.parse_args(argv)
    if a.perturb:
        perturb(a.perturb, a.out, a.factor)
    else:
        make_large(a.out, a.ranks)
    print(f"{a.out}: {os.path.getsize(a.out) / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
