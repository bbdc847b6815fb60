"""Small synthetic ringbench files following docs/hdf5-schema.md's conventions, for the
analysis unit tests: every dataset carries units and description, per-rank datasets have the
rank first, strings are fixed length. The numbers come from a known model so tests can check
what the analysis computes from them (the end-to-end tests use files from the real program).
"""
import h5py
import numpy as np


def _ds(g, name, data, units, desc):
    data = np.asarray(data)
    if data.dtype.kind in ("U", "O"):
        width = max(1, max(len(str(x).encode()) for x in data.ravel()))
        d = g.create_dataset(name, data=np.array([str(x).encode() for x in data.ravel()],
                                                 dtype=f"S{width}").reshape(data.shape))
    else:
        d = g.create_dataset(name, data=data)
    d.attrs["units"] = units
    d.attrs["description"] = desc
    return d


def _sattr(obj, name, value):
    obj.attrs[name] = np.bytes_(value)


# Known machine model of the synthetic files: per-step compute c = C0 * (S/R)^2 / 1e6 seconds
# per (batch*heads), transfer t = ALPHA + bytes / BETA, step = max(c, t) (overlapped).
C0 = 2.0e-3
ALPHA = 5.0e-6
BETA = 10.0e9


def step_model(seq_len, ring_size, batch=1, heads=2, head_dim=16, elem=4):
    local = seq_len / ring_size
    c = C0 * batch * heads * (local ** 2) / 1e6
    kv = 2.0 * batch * heads * local * head_dim * elem
    t = ALPHA + kv / BETA if ring_size > 1 else 0.0
    return c, t, kv


def make_run(path, world, seq_lens=(1024, 2048), ring_sizes=None, status="complete",
             bad_points=None, slow_factor=1.0, straggler=None, pingpong=True, collectives=True,
             p2p=True, sweep_status=None, drop_ring=False):
    """One file as ringbench would write it for `world` ranks.

    bad_points: {(seq_len, ring_size): "oom"|"parity_failed"}; straggler: rank made 30% slower.
    """
    ring_sizes = ring_sizes or [world]
    bad_points = bad_points or {}
    with h5py.File(path, "w") as f:
        run = f.create_group("run")
        for k, v in {"ringbench_version": "0.1.0", "git_commit": "abc123", "config_file": "x.yaml",
                     "config_text": f"run:\n  name: synth{world}\nbackend: host\n",
                     "command_line": "ringbench x.yaml", "start_time": "2026-11-22T12:00:00Z",
                     "end_time": "2026-11-22T12:01:00Z" if status != "running" else "",
                     "backend": "host", "mpi_thread_level": "funneled", "status": status,
                     "failure": "ring: parity" if status == "failed" else ""}.items():
            _sattr(run, k, v)
        run.attrs["world_size"] = np.int64(world)
        run.attrs["node_count"] = np.int64(1)
        ranks = f.create_group("ranks")
        _ds(ranks, "rank", np.arange(world, dtype=np.int64), "1", "MPI rank")
        _ds(ranks, "hostname", ["node0"] * world, "1", "host the rank ran on")
        _ds(ranks, "node_index", np.zeros(world, dtype=np.int64), "1", "node index")
        _ds(ranks, "local_rank", np.arange(world, dtype=np.int64), "1", "local rank")
        _ds(ranks, "gpu_index", -np.ones(world, dtype=np.int64), "1", "GPU")
        _ds(ranks, "gpu_name", [""] * world, "1", "GPU name")
        _ds(ranks, "cpuset", [f"{r}" for r in range(world)], "1", "cpuset")
        _ds(ranks, "numa_node", np.zeros(world, dtype=np.int64), "1", "NUMA")
        sweeps = f.create_group("sweeps")
        if not drop_ring:
            g = sweeps.create_group("ring")
            _sattr(g, "type", "ring_attention")
            _sattr(g, "status", (sweep_status or {}).get("ring", "failed" if bad_points else "complete"))
            _sattr(g, "failure", "")
            g.attrs["batch"] = np.int64(1)
            g.attrs["num_heads"] = np.int64(2)
            g.attrs["head_dim"] = np.int64(16)
            i = 0
            for s in seq_lens:
                for r in ring_sizes:
                    p = g.create_group(f"point_{i:04d}")
                    i += 1
                    p.attrs["seq_len"] = np.int64(s)
                    p.attrs["ring_size"] = np.int64(r)
                    p.attrs["num_rings"] = np.int64(world // r)
                    _sattr(p, "storage_dtype", "fp32")
                    _sattr(p, "label", f"S={s} R={r}")
                    _sattr(p, "layout", "contiguous")
                    p.attrs["causal"] = np.int64(0)
                    st = bad_points.get((s, r), "ok")
                    _sattr(p, "status", st)
                    if st == "oom":
                        continue
                    c, t, kv = step_model(s, r)
                    step = max(c, t) * slow_factor
                    times = np.full(world, r * step)
                    if straggler is not None:
                        times[straggler] *= 1.3
                    comp = np.full((world, r), c * slow_factor)
                    wait = np.full((world, r), max(0.0, t - c) * slow_factor)
                    _ds(p, "forward_time", np.repeat(times[:, None], 3, axis=1), "s", "each forward time")
                    _ds(p, "forward_time_median", times, "s", "median forward time")
                    _ds(p, "backward_time_median", 2 * times, "s", "median backward time")
                    _ds(p, "total_time_median", 3 * times, "s", "median forward+backward time")
                    _ds(p, "total_time_min", 3 * times, "s", "min forward+backward time")
                    _ds(p, "step_compute_time", comp, "s", "forward compute per ring step")
                    _ds(p, "step_wait_time", wait, "s", "forward exposed wait per ring step")
                    _ds(p, "tokens_per_s", s / r / (3 * times), "1/s", "tokens of this rank's shard per second")
                    _ds(p, "tflops_total", 1e-3 / times, "TFLOP/s", "throughput")
                    _ds(p, "peak_memory_bytes", np.full(world, 4.0 * 16 * 2 * s / r * 8), "B", "peak memory")
                    _ds(p, "out_max_rel", np.full(world, 1e-6), "1", "parity error")
        if pingpong:
            g = sweeps.create_group("pingpong")
            _sattr(g, "type", "host_pingpong")
            _sattr(g, "status", "complete")
            _sattr(g, "failure", "")
            sizes = np.array([8, 1024, 65536], dtype=np.int64)
            g.attrs["points"] = np.int64(len(sizes))
            _ds(g, "message_size", sizes, "B", "message size of each point")
            one = ALPHA + sizes / BETA
            med = np.tile(one, (world, 1)) * slow_factor
            _ds(g, "median_one_way_time", med, "s", "median one-way time")
            _ds(g, "bandwidth", sizes / med, "B/s", "bandwidth")
            _ds(g, "one_way_time", np.repeat(med[:, :, None], 5, axis=2), "s", "one way time per iteration")
            _ds(g, "partner_rank", (np.arange(world) + 1) % world, "1", "the ring neighbour this rank pinged")
            _ds(g, "corrupt_echoes", np.zeros(world, dtype=np.int64), "1", "corrupted echoes")
        if collectives:
            g = sweeps.create_group("coll")
            _sattr(g, "type", "collectives")
            _sattr(g, "status", "complete")
            _sattr(g, "failure", "")
            ops, groups, sizes = [], [], []
            for op in ("all_reduce", "sendrecv"):
                for grp in ("world", "intra_node"):
                    for m in (1024, 65536, 1048576):
                        ops.append(op)
                        groups.append(grp)
                        sizes.append(m)
            sizes = np.array(sizes, dtype=np.int64)
            t = (ALPHA + sizes / BETA) * slow_factor
            _ds(g, "operation", ops, "1", "collective operation of each point")
            _ds(g, "group", groups, "1", "group kind")
            _ds(g, "bytes", sizes, "B", "size")
            _ds(g, "time_s", t, "s", "time of one operation")
            _ds(g, "algbw_Bps", sizes / t, "B/s", "algbw")
            _ds(g, "busbw_Bps", sizes / t, "B/s", "busbw")
            _ds(g, "rank_time_s", np.tile(t, (world, 1)), "s", "this rank's time")
            m = g.create_group("model")
            _ds(m, "operation", ["all_reduce", "sendrecv"], "1", "operation")
            _ds(m, "group", ["world", "world"], "1", "group")
            _ds(m, "alpha_s", [ALPHA, ALPHA], "s", "alpha")
            _ds(m, "beta_Bps", [BETA, BETA], "B/s", "beta")
        if p2p and world > 1:
            g = sweeps.create_group("p2p")
            _sattr(g, "type", "p2p_matrix")
            _sattr(g, "status", "complete")
            _sattr(g, "failure", "")
            g.attrs["bandwidth_bytes"] = np.int64(1 << 20)
            bw = np.ones((world, world)) * BETA
            lat = np.ones((world, world)) * ALPHA
            np.fill_diagonal(bw, np.nan)
            np.fill_diagonal(lat, np.nan)
            _ds(g, "bandwidth_Bps", bw, "B/s", "one-way bandwidth [sender, receiver]")
            _ds(g, "latency_s", lat, "s", "one-way latency [sender, receiver]")
    return path
