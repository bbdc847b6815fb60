#!/usr/bin/env python3
"""End-to-end check of the ring_attention sweep: runs ringbench under mpiexec on a small ring
config, then reads the HDF5 file back and
  * checks every point's per-rank datasets (shapes, status, parity errors under tolerance),
  * recounts the attending (query, key) pairs by brute force against step_pairs / flops,
  * re-computes O, dQ, dK, dV from the validate dump with numpy (float64, written from the
    documented semantics, independent of the C++ code) and compares.
Exit 0 = pass, 1 = fail, 77 = skipped (no h5py/numpy).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import check  # noqa: E402
import harness  # noqa: E402

h5py, np = harness.h5py_and_numpy()

# Each config's sweep keys, after harness.RING_CONFIG_HEAD.
CONFIG = """
    batch: 2
    seq_lengths: [{S}]
    num_heads: 3
    head_dim: 8
    dtype: {dtype}
    causal: true
    layout: [zigzag, striped, contiguous]
    segment_lengths: [{w1}, {S}]
    dilation_rates: [1, 2]
    ring_sizes: {rings}
    warmup: 1
    iterations: 2
    backward: true
    validate: {{dump: true}}
"""


def allowed(p, k, h, causal, w, r):
    """Boolean [len(p), len(k)] mask of docs/ring-attention.md's pattern for head h."""
    P, K = np.meshgrid(p, k, indexing="ij")
    m = np.ones(P.shape, dtype=bool)
    if causal:
        m &= K <= P
    if w > 0:
        off = h % r
        m &= (P // w) == (K // w)
        m &= (P % r == off) & (K % r == off)
    return m


def reference(q, k, v, do, causal, branches):
    """Full attention of one (batch, head) over global arrays [S, d], several branches merged
    by their softmax denominators (one softmax over every (branch, key) term)."""
    S, d = q.shape
    pos = np.arange(S)
    scale = 1.0 / np.sqrt(d)
    s = q @ k.T * scale
    logits = []
    for (w, r, h) in branches:
        m = allowed(pos, pos, h, causal, w, r)
        logits.append(np.where(m, s, -np.inf))
    L = np.stack(logits)                       # [branches, S, S]
    mx = np.max(L, axis=(0, 2), keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    e = np.exp(L - mx)
    den = e.sum(axis=(0, 2), keepdims=True)
    P = np.where(den > 0, e / np.where(den > 0, den, 1), 0.0)  # [B, S, S]
    o = P.sum(0) @ v
    delta = (do * o).sum(1, keepdims=True)
    dP = do @ v.T                              # [S, S]
    dS = P * (dP[None] - delta[None]) * scale
    dq = dS.sum(0) @ k
    dk = dS.sum(0).T @ q
    dv = P.sum(0).T @ do
    return o, dq, dk, dv


def strings(ds):
    """A fixed-length string dataset of any shape as nested lists of str."""
    return ds.asstr()[()].tolist()


def steps_of(g, i, name):
    """Point i's per-step metric [world, R] from its ring size's step table (steps/R<R>, every
    rank a row at these world sizes)."""
    R = int(g["points/ring_size"][i])
    t = g[f"steps/R{R}"]
    q = list(t["points/sweep_point"][()]).index(i)
    x = t[name][()]
    check(x.shape[0::2] == (world_of(g), R), f"steps/R{R}/{name} shape {x.shape}")
    return x[:, q, :]


def world_of(g):
    return g["rank"].shape[0]


def check_point_metrics(g, i, world, iters):
    """Shapes and parity of point i's metrics ([world, P, ...] datasets) and its steps."""
    R = int(g["points/ring_size"][i])
    tol = float(g["points/tolerance"][i])
    where = f"point {i} (R={R})"
    for name in ("forward_time_s", "backward_time_s", "total_time_s"):
        x = g[name][()]
        check(x.shape[0::2] == (world, iters), f"{name} shape {x.shape}")
        check(np.all(x[:, i] > 0), f"{where} {name} positive")
    for name, total in (("step_compute_s", "forward_compute_s"), ("step_wait_s", "forward_wait_s"),
                        ("backward_step_compute_s", "backward_compute_s"),
                        ("backward_step_wait_s", "backward_wait_s")):
        x = steps_of(g, i, name)
        check(np.all(np.isfinite(x)), f"{where} {name}: R finite steps")
        check(np.allclose(g[total][()][:, i], x.sum(axis=1)), f"{where} {total} = the steps' sum")
    for t in ("out", "dq", "dk", "dv"):
        for kind in ("abs", "rel"):
            e = g[f"{t}_max_{kind}"][()][:, i]
            check(e.shape == (world,) and np.all(np.isfinite(e)), f"{where} {t}_max_{kind} finite")
        check(np.all(g[f"{t}_max_rel"][()][:, i] < tol), f"{where} {t}_max_rel under {tol}")
    check(np.all(g["bytes_sent_bytes"][()][:, i] > 0) if R > 1 else True, f"{where} bytes_sent_bytes")
    check(np.all(g["peak_memory_bytes"][()][:, i] > 0), f"{where} peak memory")
    check(np.all(g["total_tflops"][()][:, i] > 0), f"{where} total_tflops")
    check(list(g["ring_id"][()][:, i]) == [r // R for r in range(world)], f"{where} ring_id")
    check(list(g["ring_rank"][()][:, i]) == [r % R for r in range(world)], f"{where} ring_rank")


def check_pairs(g, i, world):
    """Brute-force pair count of one ring == the ring's sum of step_pairs; forward_flop = 4 d pairs."""
    S, R = int(g["points/seq_len"][i]), int(g["points/ring_size"][i])
    b, H, d = int(g.attrs["batch"]), int(g.attrs["num_heads"]), int(g.attrs["head_dim"])
    causal = bool(g.attrs["causal"])
    segs, rates = list(g.attrs["segment_lengths"]), list(g.attrs["dilation_rates"])
    pos = np.arange(S)
    brute = b * sum(int(allowed(pos, pos, h, causal, int(w), int(r)).sum())
                    for h in range(H) for w, r in zip(segs, rates))
    pairs = steps_of(g, i, "step_pairs")
    for ring in range(world // R):
        got = int(pairs[ring * R:(ring + 1) * R].sum())
        check(got == brute, f"point {i} ring {ring} step_pairs {got} vs brute force {brute}")
    check(np.allclose(g["forward_flop"][()][:, i], 4 * d * pairs.sum(1)), f"point {i} forward_flop = 4 d pairs")


def check_dump(g, world):
    """Offline re-check of the dumped first point with numpy."""
    dump = g["dump"]
    b, H, d = int(g.attrs["batch"]), int(g.attrs["num_heads"]), int(g.attrs["head_dim"])
    causal = bool(g.attrs["causal"])
    segs, rates = list(g.attrs["segment_lengths"]), list(g.attrs["dilation_rates"])
    i = int(dump.attrs["point"])
    S, R = int(g["points/seq_len"][i]), int(g["points/ring_size"][i])
    positions = dump["positions"][()]
    for ring in range(world // R):
        ranks = range(ring * R, (ring + 1) * R)

        def gather(name):
            x = dump[name][()]                 # [world, b, h, n, d]
            out = np.zeros((b, H, S, d))
            for r in ranks:
                out[:, :, positions[r], :] = x[r]
            return out
        q, k, v, do = (gather(n) for n in ("q", "k", "v", "do"))
        got = {n: gather(n) for n in ("o", "dq", "dk", "dv")}
        worst = {}
        for bi in range(b):
            for h in range(H):
                branches = [(int(w), int(r), h) for w, r in zip(segs, rates)]
                want = reference(q[bi, h], k[bi, h], v[bi, h], do[bi, h], causal, branches)
                for name, ref in zip(("o", "dq", "dk", "dv"), want):
                    err = np.abs(got[name][bi, h] - ref).max() / max(np.abs(ref).max(), 1e-30)
                    worst[name] = max(worst.get(name, 0.0), err)
        print(f"dump ring {ring}: max rel error vs numpy {worst}")
        for name, e in worst.items():
            check(e < 1e-4, f"dump ring {ring}: {name} rel error {e} vs numpy")


def check_file(path, world, rings):
    f = h5py.File(path, "r")
    g = f["/sweeps/ra"]
    check(g.attrs["status"] == "complete", f"sweep status {g.attrs['status']}")
    status = strings(g["status"])              # [world, P], the same on every rank
    check(all(s == "ok" for row in status for s in row), f"point status {status}")
    npoints = int(g.attrs["points"])
    check(npoints == 3 * len(rings), f"{npoints} points")
    check(g["points/label"].shape == (npoints,), "points/label")
    paths = {k for row in strings(g["kernel_path"]) for k in row}
    check(paths == {"kokkos"}, f"kernel_path {paths}")
    check(not any(k.startswith("point_") for k in g.keys()), "no point_NNNN groups")
    scales = {"rank": world, "point": npoints, "iteration": int(g.attrs["iterations"]),
              "tensor": 4}  # the axes' dimension scales (docs/hdf5-schema.md)
    for name, ds in g.items():
        if isinstance(ds, h5py.Dataset) and ds.attrs["role"] == "dimension":
            check(name in scales and ds.shape == (scales[name],), f"scale {name}: shape {ds.shape}")
        elif isinstance(ds, h5py.Dataset):
            check(ds.attrs["role"] == "metric" and ds.shape[:2] == (world, npoints),
                  f"{name}: role {ds.attrs['role']}, shape {ds.shape}")
            check([d.label for d in ds.dims][:2] == ["rank", "point"], f"{name}: axes rank, point")
    for i in range(npoints):
        check_point_metrics(g, i, world, int(g.attrs["iterations"]))
        check_pairs(g, i, world)
    check_dump(g, world)


# A tolerance no real computation meets: every point must be marked parity_failed and the run
# failed, naming the first point.
PARITY_FAIL_CONFIG = """
    seq_lengths: [32, 64]
    num_heads: 2
    head_dim: 8
    warmup: 0
    iterations: 1
    validate: {tolerance: 1.0e-15}
"""

# The first point needs ~256 GiB per buffer: it must be recorded as oom and the sweep must
# go on with the second point.
OOM_CONFIG = """
    seq_lengths: [17179869184, 64]
    num_heads: 1
    head_dim: 8
    warmup: 0
    iterations: 1
"""


def run_ringbench(args, world, sweep_keys, stem):
    config = harness.RING_CONFIG_HEAD.format(stem=stem, out=args.workdir) + sweep_keys
    return harness.ringbench_on(args, world, config, stem, tail=4000)


def main():
    ap = harness.arg_parser(source=False)
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--mode", choices=["normal", "parity_fail", "oom"], default="normal")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    world = args.ranks
    if args.mode == "normal":
        rings = [world] if world < 4 else [2, 4]
        S = 96
        cfg = CONFIG.format(S=S, w1=S // 3, rings=rings, dtype="bf16" if world >= 4 else "fp32")
        res, out_path = run_ringbench(args, world, cfg, "ring_check")
        if check(res.returncode == 0, f"ringbench exit code {res.returncode}"):
            check_file(out_path, world, rings)
    elif args.mode == "parity_fail":
        res, out_path = run_ringbench(args, world, PARITY_FAIL_CONFIG,
                                      "ring_parity_fail")
        check(res.returncode == 1, f"exit code {res.returncode} (expected 1: failed run)")
        with h5py.File(out_path, "r") as f:
            g = f["/sweeps/ra"]
            check(strings(g["status"]) == [["parity_failed"] * 2] * world,
                  f"statuses {strings(g['status'])}")
            failure = str(g.attrs["failure"])
            print("failure:", failure)
            check(failure.startswith("point 0 (S=32 R=") and "tolerance 1e-15" in failure,
                  f"failure names the point and tolerance: {failure!r}")
    else:
        with open("/proc/sys/vm/overcommit_memory") as fh:
            if fh.read().strip() == "1":
                print("SKIPPED: vm.overcommit_memory=1 accepts any allocation; no oom to provoke")
                return 77
        res, out_path = run_ringbench(args, world, OOM_CONFIG, "ring_oom")
        check(res.returncode == 0, f"exit code {res.returncode} (oom is not a failure)")
        with h5py.File(out_path, "r") as f:
            g = f["/sweeps/ra"]
            check(strings(g["status"]) == [["oom", "ok"]] * world, f"statuses {strings(g['status'])}")
            requested = g["oom_requested_bytes"][()]
            check(np.any(requested[:, 0] > 2**37), "oom_requested_bytes recorded")
            check(np.all(requested[:, 1] == -1), "oom_requested_bytes -1 where no oom")
            check(np.all(np.isnan(g["forward_time_s"][()][:, 0])), "oom point has no timings")
            check("out of memory" in " ".join(row[0] for row in strings(g["oom_message"])), "oom_message")
            check(np.all(g["out_max_rel"][()][:, 1] < 2e-4), "point 1 ran and passed parity")
    return harness.exit_code()


if __name__ == "__main__":
    sys.exit(main())
