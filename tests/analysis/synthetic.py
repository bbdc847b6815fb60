"""Small synthetic ringbench files in the schema_version 2 layout (docs/hdf5-schema.md), for the
analysis unit tests: keys under <sweep>/points/ [P] (role key), metrics [world, P, ...] (role
metric), units and description on every dataset, fixed-length strings. The numbers come from
a known model so tests can check what the analysis computes from them (the end-to-end tests
use files from the real program).
"""
import shutil
import warnings

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


# ---- contention sweep (docs/sweeps/contention.md, /work/notes/contention.md layout) ----
# Known model: a measuring rank r's per-iteration times of workload w in phase ph have median
# CONTENTION_BASE[w] * (1 + 0.01 r) * slowdown(ph) and coefficient of variation cv(ph)
# exactly (samples = median * (1 + cv * z), z symmetric with mean 0, median 0, sample std 1).
CONTENTION_BASE = {"triad": 0.010, "host_attention": 0.020, "attention": 0.004}
CONTENTION_MODEL = {  # phase -> (slowdown against alone, CV)
    "alone": (1.0, 0.02),
    "concurrent_unbound": (1.18, 0.12),
    "concurrent_bound:core": (1.30, 0.12),   # worse than unbound
    "concurrent_bound:numa": (1.02, 0.03),   # better on both
    "concurrent_bound:gpu-near": (1.175, 0.119),  # the same within noise
}
CONTENTION_ITERATIONS = 30
CONTENTION_COOLDOWN_S = 1.0
MONITOR_INTERVAL_S = 0.1


def contention_z(n):
    """n values, symmetric around 0 (mean and median 0), sample standard deviation (ddof 1) 1."""
    z = np.linspace(-1.0, 1.0, n)
    return z / np.std(z, ddof=1)


def contention_median(phase, workload, rank, path_factor=1.0, model=None):
    model = model or CONTENTION_MODEL
    return CONTENTION_BASE[workload] * (1 + 0.01 * rank) * model[phase][0] * path_factor


def _contention_points(phases, workloads, paths):
    """(phase, workload, binding, path) in phase-major order; paths: {phase: {path: factor}}."""
    pts = []
    for ph in phases:
        binding = ("launcher" if ph == "alone" else "unbound" if ph == "concurrent_unbound"
                   else ph.split(":", 1)[1])
        for w in workloads:
            for path in (paths[ph] if paths else [""]):
                pts.append((ph, w, binding, path))
    return pts


def _contention_timeline(pts, world, measuring, iters, model, paths):
    """time_s [world, P, I], phase_start_s / phase_end_s [world, P] and the phase spans."""
    npts = len(pts)
    times = np.full((world, npts, iters), np.nan)
    start, end = np.full((world, npts), np.nan), np.full((world, npts), np.nan)
    z = contention_z(iters)
    t = 0.5

    def measure(p, r, t0):
        ph, w, _, path = pts[p]
        pf = paths[ph][path] if paths else 1.0
        m = contention_median(ph, w, r, pf, model)
        times[r, p] = m * (1 + model[ph][1] * z)
        start[r, p], end[r, p] = t0, t0 + times[r, p].sum()
        return end[r, p]

    for ph in dict.fromkeys(p[0] for p in pts):
        mine = [p for p in range(npts) if pts[p][0] == ph]
        if ph == "alone":
            for r in measuring:  # one rank at a time, a cooldown between ranks
                for p in mine:
                    t = measure(p, r, t)
                t += CONTENTION_COOLDOWN_S
            continue
        t0 = t
        for p in mine:  # every rank at once, a barrier between workloads
            t = max(measure(p, r, t) for r in measuring)
        for r in range(world):
            if r not in measuring:  # feeders load the machine for the whole phase
                start[r, mine], end[r, mine] = t0, t
        t += CONTENTION_COOLDOWN_S
    return times, start, end, t


def _percentile_rows(times, q):
    out = np.full(times.shape[:2], np.nan)
    for r in range(times.shape[0]):
        for p in range(times.shape[1]):
            v = times[r, p][np.isfinite(times[r, p])]
            if v.size:
                out[r, p] = np.percentile(v, q)
    return out


def _contention_metrics(pts, world, measuring, times, start, end):
    npts = len(pts)
    with warnings.catch_warnings():  # feeders' all-NaN rows: NaN is the right answer
        warnings.simplefilter("ignore", RuntimeWarning)
        med = np.nanmedian(times, axis=2)
        cv = np.nanstd(times, axis=2, ddof=1) / np.nanmean(times, axis=2)
    slow = np.full((world, npts), np.nan)
    for p, (ph, w, _, path) in enumerate(pts):
        alone = [q for q, x in enumerate(pts) if x[0] == "alone" and x[1] == w and x[3] == path]
        if alone:
            slow[:, p] = med[:, p] / med[:, alone[0]]
    role = np.array([["measure" if r in measuring else "feeder"] * npts for r in range(world)],
                    dtype=object)
    cpus = {ph: ("0-3" if not ph.startswith("concurrent_bound") else None) for ph, *_ in pts}
    cpuset = np.array([[cpus[ph] or str(r) for ph, *_ in pts] for r in range(world)], dtype=object)
    nodeset = np.array([["0"] * npts for _ in range(world)], dtype=object)
    return {"time_s": (times, "s"), "median_s": (med, "s"), "cv": (cv, "1"),
            "p95_s": (_percentile_rows(times, 95), "s"), "p99_s": (_percentile_rows(times, 99), "s"),
            "slowdown": (slow, "1"), "rate_Bps": (np.full((world, npts), np.nan), "B/s"),
            "rate_tflops": (np.full((world, npts), np.nan), "TFLOP/s"),
            "cpuset": (cpuset, "1"), "nodeset": (nodeset, "1"), "role": (role, "1"),
            "binding_note": (np.full((world, npts), "why", dtype=object), "1"),
            "error": (np.full((world, npts), "", dtype=object), "1"),
            "phase_start_s": (start, "s"), "phase_end_s": (end, "s")}


def _active_ranks(t, world, start, end):
    """How many ranks work at time t (from their phase stamps)."""
    busy = np.zeros(len(t))
    for r in range(world):
        for s, e in zip(start[r], end[r]):
            if np.isfinite(s):
                busy += (t >= s) & (t < e)
    return np.minimum(busy, world)


def _monitor_group(g, world, start, end, t_end, gpu, migrations, cpus=4, numa=1):
    """monitor/: [world, T] series padded with NaN (the last rank stops one sample early)."""
    n = int(np.ceil(t_end / MONITOR_INTERVAL_S)) + 1
    t = np.arange(n) * MONITOR_INTERVAL_S
    active = _active_ranks(t, world, start, end)
    concurrent = active > 1
    series = {}

    def per_rank(fill):
        a = np.full((world, n), np.nan)
        for r in range(world):
            a[r] = fill(r)
        a[world - 1, -1] = np.nan  # padding: a shorter series
        return a

    ts = per_rank(lambda r: t + 0.001 * r)
    series["t_s"] = (ts, "s")
    gpu_rank = (lambda r, v: v if r == 0 and gpu else np.full(n, np.nan))
    for name, units, quiet, loaded in (("sm_clock_hz", "Hz", 1.98e9, 1.755e9),
                                       ("mem_clock_hz", "Hz", 2.619e9, 2.619e9),
                                       ("power_w", "W", 120.0, 310.0), ("temperature_c", "C", 41.0, 58.0),
                                       ("gpu_util", "1", 0.1, 0.95), ("mem_util", "1", 0.05, 0.6),
                                       ("throttle_reasons", "1", 0.0, 4.0),
                                       ("pcie_tx_Bps", "B/s", 0.5e9, 3e9), ("pcie_rx_Bps", "B/s", 1e9, 11e9),
                                       ("memory_used_bytes", "B", 2e9, 9e9)):
        v = np.where(concurrent, loaded, np.where(active > 0, (quiet + loaded) / 2, quiet))
        series[name] = (per_rank(lambda r, v=v: gpu_rank(r, v)), units)
    series["energy_j"] = (per_rank(lambda r: gpu_rank(r, np.cumsum(series["power_w"][0][0] * 0.1)
                                                       if gpu else None)), "J")
    busy = np.full((world, n, cpus), np.nan)
    busy[0] = np.clip(active[:, None] / cpus + np.linspace(-0.05, 0.05, cpus)[None, :], 0, 1)
    series["cpu_busy"] = (busy, "1")
    hit = np.full((world, n, numa), np.nan)
    hit[0] = np.cumsum(1000 * (1 + active))[:, None]
    series["numa_hit"], series["numa_miss"] = (hit, "1"), (hit * 0.01, "1")
    rate = {"voluntary_switches": np.where(active > 0, 40.0, 100.0),
            "involuntary_switches": np.where(concurrent, 300.0, 10.0),
            "migrations": np.where(concurrent, 25.0, 1.0)}
    for name, r_s in rate.items():
        c = np.cumsum(r_s * MONITOR_INTERVAL_S)
        series[name] = (per_rank(lambda r, c=c: c * (1 + 0.1 * r)), "1")
    if not migrations:
        series["migrations"] = (np.full((world, n), np.nan), "1")
    for name, (v, units) in series.items():
        dataset(g, name, v, units, f"monitor {name}", "metric")
    why = []
    if not gpu:
        why.append("gpu: cannot load libnvidia-ml.so.1 (libnvidia-ml.so.1: cannot open shared "
                   "object file: No such file or directory)")
    if not migrations:
        why.append("migrations: /proc/self/sched has no se.nr_migrations")
    dataset(g, "unavailable", ["\n".join(why)] * world, "1", "monitor unavailable", "metric")
    dataset(g, "gpu_pci_bus_id", ["00000000:01:00.0" if gpu and r == 0 else "" for r in range(world)],
            "1", "GPU whose series this rank recorded", "key")
    dataset(g, "watches_node", np.array([1] + [0] * (world - 1), dtype=np.int64), "1",
            "1: this rank recorded the node series", "key")
    g.attrs["unavailable"] = np.bytes_("\n".join(why))


def make_contention_run(path, world=4, feeders=1, phases=None, workloads=("triad", "host_attention"),
                        iterations=CONTENTION_ITERATIONS, gpu=False, migrations=True, paths=None,
                        model=None, monitor=True, name="contention"):
    """A file with one contention sweep of `world` ranks (the last `feeders` only load).

    phases: default every phase of CONTENTION_MODEL; paths: {phase: {path: time factor}} adds
    the `path` key (one point per path); gpu: GPU monitor series (else NaN, "unavailable")."""
    model = model or CONTENTION_MODEL
    phases = list(phases or model)
    pts = _contention_points(phases, workloads, paths)
    measuring = list(range(world - feeders))
    times, start, end, t_end = _contention_timeline(pts, world, measuring, iterations, model, paths)
    make_run(path, world, pingpong=False, collectives=False, p2p=False, drop_ring=True)
    with h5py.File(path, "r+") as f:
        g = _sweep(f["sweeps"], name, "contention")
        g.attrs["feeders"] = np.int64(feeders)
        g.attrs["iterations"] = np.int64(iterations)
        g.attrs["monitor_interval_ms"] = np.int64(MONITOR_INTERVAL_S * 1000)
        keys = {"phase": ([p[0] for p in pts], "1"), "workload": ([p[1] for p in pts], "1"),
                "binding": ([p[2] for p in pts], "1"),
                "iterations": (np.full(len(pts), iterations, dtype=np.int64), "1"),
                "label": ([f"{p[0]} {p[1]} {p[3]}".strip() for p in pts], "1")}
        if paths:
            keys["path"] = ([p[3] for p in pts], "1")
        points_table(g, keys, _contention_metrics(pts, world, measuring, times, start, end))
        if monitor:
            _monitor_group(g.create_group("monitor"), world, start, end, t_end, gpu, migrations)
    return path


# ---- noisy per-iteration samples, for compare's statistics (tests/analysis/test_compare_stats.py) ----
NOISY_SAMPLES = {"ring": ("forward_time_s", "backward_time_s", "total_time_s"),
                 "coll": ("iteration_time_s",), "pingpong": ("one_way_time_s",)}


def make_noisy_run(path, world=2, iterations=20, noise=0.02, factor=1.0, seed=0, config_text=None,
                   **kw):
    """make_run's file with every per-iteration time sample (NOISY_SAMPLES) replaced by
    `iterations` samples of (the rank's median) x factor x (1 + noise x z), z standard normal
    from `seed`, and the collectives' scalar times and rates scaled by factor to match.
    config_text: replaces /run config_text (a run of different work)."""
    make_run(path, world, **kw)
    rng = np.random.default_rng(seed)
    with h5py.File(path, "r+") as f:
        if config_text is not None:
            _sattr(f["run"], "config_text", config_text)
        for sweep, names in NOISY_SAMPLES.items():
            if sweep not in f["sweeps"]:
                continue
            g = f["sweeps"][sweep]
            for name in names:
                old = g[name][()]
                med = np.median(old, axis=2, keepdims=True)
                new = med * factor * (1.0 + noise * rng.standard_normal(old.shape[:2] + (iterations,)))
                units = g[name].attrs["units"]
                del g[name]
                dataset(g, name, new, units, f"metric {name}", "metric")
        if "coll" in f["sweeps"]:
            g = f["sweeps/coll"]
            for name, power in (("time_s", 1), ("group_time_s", 1), ("algbw_Bps", -1), ("busbw_Bps", -1)):
                g[name][...] = g[name][()] * factor ** power
    return path


# ---- profiling sweeps with known peaks per variant (tests/analysis/test_report.py) ----------
# busbw of a collectives variant at message size m: PROFILE_BUS[(dtype, in_place)] * m / MAX_M
# for every size but the largest, where it is 0.9x that (so the peak is not at the last size);
# rank 1 is 10 % slower than rank 0 (the point's value is the slowest rank's).
PROFILE_BUS = {("float32", 0): 8e9, ("float32", 1): 4e9, ("bfloat16", 0): 6e9, ("bfloat16", 1): 2e9}
PROFILE_SIZES = (1024, 65536, 1 << 20, 1 << 24)
GEMM_TFLOPS = {"bfloat16": 600.0, "float32": 40.0}   # at the largest size; half at the smallest
MEMORY_BPS = {"triad": 20e9, "d2d": 1.2e12, "h2d_pinned": 40e9}


def profile_bus(dtype, in_place, size, rank=0):
    top = PROFILE_BUS[(dtype, in_place)] * size / PROFILE_SIZES[-2]
    return (0.9 * PROFILE_BUS[(dtype, in_place)] if size == PROFILE_SIZES[-1] else top) / (1.1 if rank else 1.0)


def add_profile_sweeps(path, gpu_name=""):
    """Adds to a make_run(..., collectives=False) file of 2 ranks: a collectives sweep 'coll'
    (all_reduce and sendrecv; world and a one-rank inter_node group; float32 and bfloat16;
    out-of-place and in-place), a compute sweep and a memory sweep with the numbers above,
    and, with gpu_name, that GPU on every rank."""
    with h5py.File(path, "r+") as f:
        world = int(f["run"].attrs["world_size"])
        if gpu_name:
            del f["ranks/gpu_name"]
            dataset(f["ranks"], "gpu_name", [gpu_name] * world, "1", "gpu_name", "key")
        sweeps = f["sweeps"]
        _profile_collectives(sweeps, world)
        _profile_compute(sweeps, world)
        _profile_memory(sweeps, world)
    return path


def _profile_collectives(sweeps, world):
    g = _sweep(sweeps, "coll", "collectives")
    rows = [(op, grp, dt, ip, m) for op in ("all_reduce", "sendrecv") for grp in ("world", "inter_node")
            for (dt, ip) in PROFILE_BUS for m in PROFILE_SIZES]
    n = len(rows)
    bus = np.array([[profile_bus(dt, ip, m, r) for (_, _, dt, ip, m) in rows] for r in range(world)])
    sizes = np.array([r[-1] for r in rows], dtype=np.int64)
    t = sizes / bus
    gsize = np.array([[world if r[1] == "world" else 1 for r in rows]] * world, dtype=np.int64)
    samples = t[:, :, None] * np.array([0.98, 1.0, 1.02, 1.0])
    points_table(g, {"operation": ([r[0] for r in rows], "1"), "group": ([r[1] for r in rows], "1"),
                     "dtype": ([r[2] for r in rows], "1"), "in_place": (np.array([r[3] for r in rows]), "1"),
                     "message_size_bytes": (sizes, "B")},
                 {"time_s": (t, "s"), "algbw_Bps": (bus, "B/s"), "busbw_Bps": (bus, "B/s"),
                  "group_size": (gsize, "1"), "iteration_time_s": (samples, "s"),
                  "wrong_elements": (np.zeros((world, n), dtype=np.int64), "1")})


def _profile_compute(sweeps, world):
    g = _sweep(sweeps, "compute", "compute")
    rows = [(dt, n) for dt in GEMM_TFLOPS for n in (1024, 4096)]
    rate = np.array([[GEMM_TFLOPS[dt] * (1.0 if n == 4096 else 0.5) / (1.05 if r else 1.0)
                      for dt, n in rows] for r in range(world)])
    t = np.array([[2.0 * n ** 3 / (rt * 1e12) for (dt, n), rt in zip(rows, rr)] for rr in rate])
    points_table(g, {"operation": (["gemm"] * len(rows), "1"), "engine": (["cublaslt"] * len(rows), "1"),
                     "dtype": ([dt for dt, _ in rows], "1"), "size": (np.array([n for _, n in rows]), "1")},
                 {"rate_tflops": (rate, "TFLOP/s"), "iteration_time_s": (np.repeat(t[:, :, None], 3, axis=2), "s")})


def _profile_memory(sweeps, world):
    g = _sweep(sweeps, "memory", "memory")
    kinds = list(MEMORY_BPS)
    bw = np.array([[MEMORY_BPS[k] / (1.2 if r else 1.0) for k in kinds] for r in range(world)])
    size = 1 << 30
    t = size / bw
    points_table(g, {"kind": (kinds, "1"), "size_bytes": (np.full(len(kinds), size, dtype=np.int64), "B")},
                 {"bandwidth_Bps": (bw, "B/s"), "moved_bytes": (np.full((world, len(kinds)), size), "B"),
                  "iteration_time_s": (np.repeat(t[:, :, None], 4, axis=2), "s")})


# ---- uneven samples, for the per-point statistics (tests/analysis/test_pointstats.py) ----------

def make_uneven(path, src, seed=0):
    """A copy of src with holes in every float metric, as a run whose ranks measured unevenly
    would leave: a rank's last iterations missing (fewer iterations than the others), a rank
    without any value at a point, single NaNs, and one point no rank measured."""
    shutil.copyfile(src, path)
    rng = np.random.default_rng(seed)
    with h5py.File(path, "r+") as f:
        for g in f["sweeps"].values():
            for ds in [d for d in g.values() if isinstance(d, h5py.Dataset) and d.dtype.kind == "f"]:
                a = ds[()]
                world, npoints = a.shape[:2]
                for r, p in zip(rng.integers(0, world, npoints), rng.integers(0, npoints, npoints)):
                    if a.ndim > 2:
                        a[r, p, rng.integers(1, a.shape[2] + 1):] = np.nan
                    a[rng.integers(0, world), p] = np.nan
                a.reshape(a.size)[rng.integers(0, a.size, a.size // 20)] = np.nan
                a[:, npoints - 1] = np.nan
                ds[...] = a
    return path
