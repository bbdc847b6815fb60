"""Small synthetic ringbench files in the schema_version 2 layout (docs/hdf5-schema.md), for the
analysis unit tests: keys under <sweep>/points/ [P] (role key), metrics [world, P, ...] (role
metric), units and description on every dataset, fixed-length strings. The numbers come from
a known model so tests can check what the analysis computes from them (the end-to-end tests
use files from the real program).
"""
import h5py
import numpy as np


def dataset(g, name, data, units, desc, role):
    data = np.asarray(data)
    if data.dtype.kind in ("U", "O"):
        width = max([1] + [len(str(x).encode()) for x in data.ravel()])
        d = g.create_dataset(name, data=np.array([str(x).encode() for x in data.ravel()],
                                                 dtype=f"S{width}").reshape(data.shape))
    else:
        d = g.create_dataset(name, data=data)
    d.attrs["units"] = units
    d.attrs["description"] = desc
    d.attrs["role"] = role
    return d


def points_table(g, keys, metrics):
    """keys: {name: (values [P], units)}; metrics: {name: (values [world, P, ...], units)}."""
    npoints = len(next(iter(keys.values()))[0])
    g.attrs["points"] = np.int64(npoints)
    kg = g.create_group("points")
    for name, (values, units) in keys.items():
        dataset(kg, name, values, units, f"key {name}", "key")
    for name, (values, units) in metrics.items():
        dataset(g, name, values, units, f"metric {name}", "metric")


def _sattr(obj, name, value):
    obj.attrs[name] = np.bytes_(value)


def _sweep(sweeps, name, typ, status="complete"):
    g = sweeps.create_group(name)
    _sattr(g, "type", typ)
    _sattr(g, "status", status)
    _sattr(g, "failure", "")
    g.attrs["wall_time_s"] = 1.0
    return g


# Known machine model of the synthetic files: per-step compute c = C0 * (S/R)^2 / 1e6 seconds
# per (batch*heads), transfer t = ALPHA + bytes / BETA, step = max(c, t) (overlapped).
C0 = 2.0e-3
ALPHA = 5.0e-6
BETA = 10.0e9
ITERATIONS = 3


def step_model(seq_len, ring_size, batch=1, heads=2, head_dim=16, elem=4):
    local = seq_len / ring_size
    c = C0 * batch * heads * (local ** 2) / 1e6
    kv = 2.0 * batch * heads * local * head_dim * elem
    t = ALPHA + kv / BETA if ring_size > 1 else 0.0
    return c, t, kv


def _ring_sweep(sweeps, world, seq_lens, ring_sizes, bad_points, slow_factor, straggler, status):
    g = _sweep(sweeps, "ring", "ring_attention", status)
    for k, v in (("batch", 1), ("num_heads", 2), ("head_dim", 16), ("causal", 0), ("backward", 1)):
        g.attrs[k] = np.int64(v)
    pts = [(s, r) for s in seq_lens for r in ring_sizes]
    npts, rmax, it = len(pts), max(ring_sizes), ITERATIONS
    nan = np.full((world, npts), np.nan)
    m = {"status": np.full((world, npts), "ok", dtype=object),
         "forward_time_s": np.full((world, npts, it), np.nan),
         "backward_time_s": np.full((world, npts, it), np.nan),
         "total_time_s": np.full((world, npts, it), np.nan),
         "step_compute_s": np.full((world, npts, rmax), np.nan),
         "step_wait_s": np.full((world, npts, rmax), np.nan),
         "peak_memory_bytes": np.full((world, npts), -1, dtype=np.int64),
         "forward_flop": nan.copy(), "total_tflops": nan.copy(), "out_max_rel": nan.copy(),
         "parity_time_s": nan.copy()}
    for p, (s, r) in enumerate(pts):
        st = bad_points.get((s, r), "ok")
        m["status"][:, p] = st
        if st == "oom":
            continue
        c, t, _ = step_model(s, r)
        times = np.full(world, r * max(c, t) * slow_factor)
        if straggler is not None:
            times[straggler] *= 1.3
        # iterations around the value: the median is exactly `times`
        spread = np.array([0.9, 1.0, 1.2])[:it]
        m["forward_time_s"][:, p] = times[:, None] * spread
        m["backward_time_s"][:, p] = 2 * times[:, None] * spread
        m["total_time_s"][:, p] = 3 * times[:, None] * spread
        m["step_compute_s"][:, p, :r] = c * slow_factor
        m["step_wait_s"][:, p, :r] = max(0.0, t - c) * slow_factor
        m["peak_memory_bytes"][:, p] = int(4 * 16 * 2 * s / r * 8)
        m["forward_flop"][:, p] = 4.0 * 16 * (s / r) * s
        m["total_tflops"][:, p] = 3.5 * m["forward_flop"][:, p] / (3 * times) / 1e12
        m["out_max_rel"][:, p] = 1e-6
        m["parity_time_s"][:, p] = 0.01
    units = {"status": "1", "peak_memory_bytes": "B", "forward_flop": "FLOP",
             "total_tflops": "TFLOP/s", "out_max_rel": "1"}
    points_table(g, {"seq_len": ([s for s, _ in pts], "1"), "ring_size": ([r for _, r in pts], "1"),
                     "num_rings": ([world // r for _, r in pts], "1"),
                     "layout": (["contiguous"] * npts, "1"), "dtype": (["fp32"] * npts, "1"),
                     "label": ([f"S={s} R={r}" for s, r in pts], "1"),
                     "tolerance": ([2e-4] * npts, "1")},
                 {n: (v, units.get(n, "s")) for n, v in m.items()})


def _pingpong_sweep(sweeps, world, slow_factor):
    g = _sweep(sweeps, "pingpong", "host_pingpong")
    sizes = np.array([8, 1024, 65536], dtype=np.int64)
    one = np.tile(ALPHA + sizes / BETA, (world, 1)) * slow_factor
    points_table(g, {"message_size_bytes": (sizes, "B")},
                 {"one_way_time_s": (np.repeat(one[:, :, None], 5, axis=2), "s"),
                  "bandwidth_Bps": (sizes / one, "B/s"),
                  "partner_rank": (np.tile((np.arange(world) + 1) % world, (3, 1)).T, "1")})


def _collectives_sweep(sweeps, world, slow_factor):
    g = _sweep(sweeps, "coll", "collectives")
    rows = [(op, grp, m) for op in ("all_reduce", "sendrecv") for grp in ("world", "intra_node")
            for m in (1024, 65536, 1048576)]
    n = len(rows)
    sizes = np.array([m for *_, m in rows], dtype=np.int64)
    t = np.tile((ALPHA + sizes / BETA) * slow_factor, (world, 1))
    points_table(g, {"operation": ([r[0] for r in rows], "1"), "group": ([r[1] for r in rows], "1"),
                     "dtype": (["float32"] * n, "1"), "in_place": (np.zeros(n, dtype=np.int64), "1"),
                     "message_size_bytes": (sizes, "B")},
                 {"time_s": (t, "s"), "group_time_s": (t, "s"), "algbw_Bps": (sizes / t, "B/s"),
                  "busbw_Bps": (sizes / t, "B/s"),
                  "group_size": (np.full((world, n), world, dtype=np.int64), "1"),
                  "iteration_time_s": (np.repeat(t[:, :, None], 4, axis=2), "s")})
    points_table(g.create_group("model"),
                 {"operation": (["all_reduce", "sendrecv"], "1"), "group": (["world", "world"], "1"),
                  "dtype": (["float32"] * 2, "1"), "group_size": ([world, world], "1")},
                 {"alpha_s": (np.full((world, 2), ALPHA), "s"), "beta_Bps": (np.full((world, 2), BETA), "B/s")})


def _p2p_sweep(sweeps, world):
    """One pair point per ordered pair (sender != receiver); both ranks of a pair report."""
    g = _sweep(sweeps, "p2p", "p2p_matrix")
    g.attrs["bandwidth_bytes"] = np.int64(1 << 20)
    pairs = [(a, b) for a in range(world) for b in range(world) if a != b]
    bw = np.full((world, len(pairs)), np.nan)
    for p, (a, b) in enumerate(pairs):
        bw[[a, b], p] = BETA * (1 + 0.01 * a)
    points_table(g, {"pattern": (["pair"] * len(pairs), "1"), "sender": ([a for a, _ in pairs], "1"),
                     "receiver": ([b for _, b in pairs], "1"),
                     "shift": ([(b - a) % world for a, b in pairs], "1")},
                 {"bandwidth_Bps": (bw, "B/s"), "latency_s": (bw * 0 + ALPHA, "s")})


def make_run(path, world, seq_lens=(1024, 2048), ring_sizes=None, status="complete",
             bad_points=None, slow_factor=1.0, straggler=None, pingpong=True, collectives=True,
             p2p=True, sweep_status=None, drop_ring=False):
    """One file as ringbench would write it for `world` ranks.

    bad_points: {(seq_len, ring_size): "oom"|"parity_failed"}; straggler: rank made 30% slower.
    """
    bad_points = bad_points or {}
    with h5py.File(path, "w") as f:
        run = f.create_group("run")
        for k, v in {"ringbench_version": "0.2.0", "git_commit": "abc123", "config_file": "x.yaml",
                     "config_text": f"run:\n  name: synth{world}\nbackend: host\n",
                     "command_line": "ringbench x.yaml", "start_time": "2026-11-22T12:00:00Z",
                     "end_time": "2026-11-22T12:01:00Z" if status != "running" else "",
                     "backend": "host", "mpi_thread_level": "funneled", "status": status,
                     "failure": "ring: parity" if status == "failed" else ""}.items():
            _sattr(run, k, v)
        run.attrs["schema_version"] = np.int64(2)
        run.attrs["world_size"] = np.int64(world)
        run.attrs["node_count"] = np.int64(1)
        ranks = f.create_group("ranks")
        for name, v in (("rank", np.arange(world, dtype=np.int64)), ("hostname", ["node0"] * world),
                        ("node_index", np.zeros(world, dtype=np.int64)),
                        ("local_rank", np.arange(world, dtype=np.int64)),
                        ("gpu_index", -np.ones(world, dtype=np.int64)), ("gpu_name", [""] * world),
                        ("cpuset", [f"{r}" for r in range(world)]),
                        ("numa_node", np.zeros(world, dtype=np.int64))):
            dataset(ranks, name, v, "1", name, "key")
        sweeps = f.create_group("sweeps")
        if not drop_ring:
            ring_status = (sweep_status or {}).get("ring", "failed" if bad_points else "complete")
            _ring_sweep(sweeps, world, seq_lens, ring_sizes or [world], bad_points, slow_factor,
                        straggler, ring_status)
        if pingpong:
            _pingpong_sweep(sweeps, world, slow_factor)
        if collectives:
            _collectives_sweep(sweeps, world, slow_factor)
        if p2p and world > 1:
            _p2p_sweep(sweeps, world)
    return path
