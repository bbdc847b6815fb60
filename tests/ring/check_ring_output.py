#!/usr/bin/env python3
"""End-to-end check of the ring_attention sweep: runs ringbench under mpiexec on a small ring
config, then reads the HDF5 file back and
  * checks every point's per-rank datasets (shapes, status, parity errors under tolerance),
  * recounts the attending (query, key) pairs by brute force against step_pairs / flops,
  * re-computes O, dQ, dK, dV from the validate dump with numpy (float64, written from the
    documented semantics, independent of the C++ code) and compares.
Exit 0 = pass, 1 = fail, 77 = skipped (no h5py/numpy).
"""
import argparse
import os
import subprocess
import sys

try:
    import h5py
    import numpy as np
except ImportError as exc:
    print(f"SKIPPED: {exc}")
    sys.exit(77)

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print(f"FAIL: {what}")
    return cond


CONFIG = """
run: {{name: ring_check, output_dir: {out}}}
backend: host
sweeps:
  - type: ring_attention
    name: ra
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


def check_file(path, world, rings):
    f = h5py.File(path, "r")
    g = f["/sweeps/ra"]
    check(g.attrs["status"] == "complete", f"sweep status {g.attrs['status']}")
    status = [s.decode() if isinstance(s, bytes) else s for s in g["points/status"][()]]
    check(all(s == "ok" for s in status), f"point status {status}")
    iters = int(g.attrs["iterations"])
    b, H, d = int(g.attrs["batch"]), int(g.attrs["num_heads"]), int(g.attrs["head_dim"])
    segs, rates = list(g.attrs["segment_lengths"]), list(g.attrs["dilation_rates"])
    npoints = len(status)
    check(npoints == 3 * len(rings), f"{npoints} points")
    for i in range(npoints):
        p = g[f"point_{i:04d}"]
        S, R = int(p.attrs["seq_len"]), int(p.attrs["ring_size"])
        causal = bool(p.attrs["causal"])
        tol = float(p.attrs["tolerance"])
        for name in ("forward_time", "backward_time", "total_time"):
            check(p[name].shape == (world, iters), f"{p.name}/{name} shape {p[name].shape}")
            check(np.all(p[name][()] > 0), f"{p.name}/{name} positive")
        for name in ("step_compute_time", "step_wait_time", "step_pairs",
                     "backward_step_compute_time", "backward_step_wait_time"):
            check(p[name].shape == (world, R), f"{p.name}/{name} shape")
        for t in ("out", "dq", "dk", "dv"):
            for kind in ("abs", "rel"):
                e = p[f"{t}_max_{kind}"][()]
                check(e.shape == (world,) and np.all(np.isfinite(e)), f"{p.name}/{t}_max_{kind} finite")
            check(np.all(p[f"{t}_max_rel"][()] < tol), f"{p.name}/{t}_max_rel under {tol}")
        check(np.all(p["bytes_sent"][()] > 0) if R > 1 else True, f"{p.name} bytes_sent")
        check(np.all(p["peak_memory_bytes"][()] > 0), f"{p.name} peak memory")
        check(np.all(p["tflops_total"][()] > 0), f"{p.name} tflops")
        ring_id, ring_rank = p["ring_id"][()], p["ring_rank"][()]
        check(list(ring_id) == [r // R for r in range(world)], f"{p.name} ring_id {ring_id}")
        check(list(ring_rank) == [r % R for r in range(world)], f"{p.name} ring_rank")
        # Brute-force pair count of one ring == the ring's sum of step_pairs.
        pos = np.arange(S)
        brute = 0
        for h in range(H):
            for w, r in zip(segs, rates):
                brute += int(allowed(pos, pos, h, causal, int(w), int(r)).sum())
        brute *= b
        pairs = p["step_pairs"][()]
        for ring in range(world // R):
            check(int(pairs[ring * R:(ring + 1) * R].sum()) == brute,
                  f"{p.name} ring {ring} step_pairs {pairs.sum()} vs brute force {brute}")
        flops = p["flops_forward"][()]
        check(np.allclose(flops, 4 * d * pairs.sum(1)), f"{p.name} flops_forward = 4 d pairs")

    # Offline re-check of the dumped first point with numpy.
    dump = g["dump"]
    p0 = g["point_0000"]
    S, R = int(p0.attrs["seq_len"]), int(p0.attrs["ring_size"])
    causal = bool(p0.attrs["causal"])
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


# A tolerance no real computation meets: every point must be marked parity_failed and the run
# failed, naming the first point.
PARITY_FAIL_CONFIG = """
run: {{name: ring_parity_fail, output_dir: {out}}}
backend: host
sweeps:
  - type: ring_attention
    name: ra
    seq_lengths: [32, 64]
    num_heads: 2
    head_dim: 8
    warmup: 0
    iterations: 1
    validate: {{tolerance: 1.0e-15}}
"""

# The first point needs ~256 GiB per buffer: it must be recorded as oom and the sweep must
# go on with the second point.
OOM_CONFIG = """
run: {{name: ring_oom, output_dir: {out}}}
backend: host
sweeps:
  - type: ring_attention
    name: ra
    seq_lengths: [17179869184, 64]
    num_heads: 1
    head_dim: 8
    warmup: 0
    iterations: 1
"""


def run_ringbench(args, world, cfg, stem):
    cfg_path = os.path.join(args.workdir, stem + ".yaml")
    out_path = os.path.join(args.workdir, stem + ".h5")
    with open(cfg_path, "w") as fh:
        fh.write(cfg)
    if os.path.exists(out_path):
        os.remove(out_path)
    cmd = [args.mpiexec, "-np", str(world), "--oversubscribe", args.ringbench, cfg_path,
           "--output", out_path]
    print("+", " ".join(cmd), flush=True)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    print(res.stdout[-4000:])
    print(res.stderr[-4000:], file=sys.stderr)
    return res, out_path


def strings(ds):
    return [x.decode() if isinstance(x, bytes) else x for x in ds[()]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ringbench", required=True)
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--mode", choices=["normal", "parity_fail", "oom"], default="normal")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    world = args.ranks
    if args.mode == "normal":
        rings = [world] if world < 4 else [2, 4]
        S = 96
        cfg = CONFIG.format(out=args.workdir, S=S, w1=S // 3, rings=rings,
                            dtype="bf16" if world >= 4 else "fp32")
        res, out_path = run_ringbench(args, world, cfg, "ring_check")
        if check(res.returncode == 0, f"ringbench exit code {res.returncode}"):
            check_file(out_path, world, rings)
    elif args.mode == "parity_fail":
        res, out_path = run_ringbench(args, world, PARITY_FAIL_CONFIG.format(out=args.workdir),
                                      "ring_parity_fail")
        check(res.returncode == 1, f"exit code {res.returncode} (expected 1: failed run)")
        with h5py.File(out_path, "r") as f:
            g = f["/sweeps/ra"]
            check(strings(g["points/status"]) == ["parity_failed"] * 2,
                  f"statuses {strings(g['points/status'])}")
            failure = str(g.attrs["failure"])
            print("failure:", failure)
            check(failure.startswith("point 0 (S=32 R=") and "tolerance 1e-15" in failure,
                  f"failure names the point and tolerance: {failure!r}")
            check(g["point_0001"].attrs["status"] == "parity_failed", "point 1 status")
    else:
        with open("/proc/sys/vm/overcommit_memory") as fh:
            if fh.read().strip() == "1":
                print("SKIPPED: vm.overcommit_memory=1 accepts any allocation; no oom to provoke")
                return 77
        res, out_path = run_ringbench(args, world, OOM_CONFIG.format(out=args.workdir), "ring_oom")
        check(res.returncode == 0, f"exit code {res.returncode} (oom is not a failure)")
        with h5py.File(out_path, "r") as f:
            g = f["/sweeps/ra"]
            check(strings(g["points/status"]) == ["oom", "ok"], f"statuses {strings(g['points/status'])}")
            p0 = g["point_0000"]
            check(p0.attrs["status"] == "oom", "point 0 oom")
            check(np.any(p0["oom_requested_bytes"][()] > 2**37), "oom_requested_bytes recorded")
            check("out of memory" in " ".join(strings(p0["oom_message"])), "oom_message")
            check(np.all(g["point_0001/out_max_rel"][()] < 2e-4), "point 1 ran and passed parity")
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
