#!/usr/bin/env python3
"""Storage proportional to work (issue #30 item 1, docs/hdf5-schema.md "Rows"):

  growth   real host runs at 8 and 16 ranks (simulated nodes of 4) of one small config (ring
           attention over every power-of-two ring size, collectives, p2p_matrix): each sweep's
           dataset bytes per rank and point grow at most 25 % from 8 to 16 ranks (schema 3's
           padded step arrays grew them 2x: the largest ring doubles); the dry-run's estimate
           of each file is within 25 % of its size (it counts every dataset); the 16-rank file's
           sampled tables (ring steps of 8 ranks, p2p rows of 8) hold their sample, row_rank and
           over_ranks; rb-analysis report reads both files.
  targets  inputs/large.yaml planned (--dry-run --world-size) at 1,024 and 16,384 ranks, 8 per
           node: at most 100 MiB and 2 GiB of output. A build without CUDA plans its host
           twin (backend host, the compute sweep's float32 only: the sizes of the other sweeps
           do not depend on the backend).

Exit 0 = pass, 1 = fail, 77 = skipped (no h5py/numpy).
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import check  # noqa: E402
import harness  # noqa: E402

h5py, np = harness.h5py_and_numpy()

PER_NODE = 4
GROWTH = 1.25     # bytes per rank and point, 16 ranks over 8
ESTIMATE = 0.25   # |estimate / file size - 1|
TARGETS = {1024: 100 * 2**20, 16384: 2 * 2**30}

CONFIG = """run: {{name: {stem}, output_dir: {out}}}
backend: host
binding: {{policy: none}}
sweeps:
  - type: ring_attention
    name: ring
    seq_lengths: [64]
    ring_sizes: powers_of_two
    num_heads: 1
    head_dim: 8
    causal: true
    layout: [contiguous, zigzag]
    warmup: 0
    iterations: 2
  - type: collectives
    operations: [all_reduce, all_gather]
    min_bytes: 8
    max_bytes: 1KiB
    factor: 8
    groups: [world, intra_node]
    warmup: 1
    iterations: 3
  - type: p2p_matrix
    bandwidth_bytes: 4KiB
    warmup: 1
    iterations: 2
    latency_iterations: 2
"""

UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def planned_bytes(text):
    """The dry-run's 'about N UNIT of output' in bytes (None when absent)."""
    m = re.search(r"about ([0-9.]+) (B|KiB|MiB|GiB|TiB) of output", text)
    return float(m.group(1)) * UNITS[m.group(2)] if m else None


def dataset_bytes(path):
    """{sweep: (bytes of its datasets' values, its points)} of a file."""
    out = {}
    with h5py.File(path, "r") as f:
        for name, g in f["sweeps"].items():
            sizes = []
            g.visititems(lambda _, o: sizes.append(o.id.get_storage_size())
                         if isinstance(o, h5py.Dataset) else None)
            out[name] = (sum(sizes), int(g.attrs["points"]))
    return out


def run_world(args, world):
    stem = f"storage_np{world}"
    config = CONFIG.format(stem=stem, out=args.workdir)
    res, out = harness.ringbench_on(args, world, config, stem, ["--ranks-per-node", str(PER_NODE)],
                                    timeout=600, tail=600)
    check(res.returncode == 0, f"{world} ranks: exit code {res.returncode}")
    plan = harness.run([args.ringbench, os.path.join(args.workdir, stem + ".yaml"), "--dry-run",
                        "--world-size", str(world), "--ranks-per-node", str(PER_NODE)])
    check(plan.returncode == 0, f"{world} ranks: the dry-run plans it ({plan.stderr[-300:]})")
    return out, planned_bytes(plan.stdout)


def check_sampled(path):
    """The 16-rank file: the ring's step tables and the p2p table keep 8 rows, the slowest
    first, and every rank's statistics beside them; the main ring table every rank."""
    with h5py.File(path, "r") as f:
        ring, p2p = f["sweeps/ring"], f["sweeps/p2p_matrix"]
        check("row_rank" not in ring and ring["forward_time_s"].shape[0] == 16,
              "ring main table: every rank a row at 16 ranks")
        for R in (1, 2, 4, 8, 16):
            t = ring[f"steps/R{R}"]
            rows = t["row_rank"][()]
            check(t["step_wait_s"].shape == (8, 2, R), f"steps/R{R}: [8 rows, 2 points, {R} steps]")
            check(all(len(set(rows[:, q])) == 8 and rows[:, q].min() >= 0 for q in range(2)),
                  f"steps/R{R}: 8 distinct ranks per point")
            total = ring["total_time_s"][()]
            for q, p in enumerate(t["points/sweep_point"][()]):
                slowest = int(np.argmax(np.median(total[:, p], axis=1)))
                check(rows[0, q] == slowest, f"steps/R{R} point {p}: row 0 is the slowest rank")
                waits = t["over_ranks/step_wait_s"][3, q]  # sum over every rank, per step
                check(np.isclose(waits.sum(), np.nansum(ring["forward_wait_s"][:, p])),
                      f"steps/R{R} point {p}: over_ranks sums every rank's steps")
        rows = p2p["row_rank"][()]
        pattern = p2p["points/pattern"].asstr()[()]
        check(p2p["bandwidth_Bps"].shape[0] == 8, "p2p: 8 rows at 16 ranks")
        pairs = [p for p, x in enumerate(pattern) if x == "pair"]
        check(all(sorted(rows[:2, p]) == sorted((p2p["points/sender"][p], p2p["points/receiver"][p]))
                  and (rows[2:, p] == -1).all() for p in pairs), "p2p pair points: rows 0-1 the pair")
        bw = p2p["bandwidth_Bps"][()]
        check(all(bw[0, p] <= bw[1, p] for p in pairs), "p2p pair points: the slower end first")


def report(args, path, where):
    env = {"PYTHONPATH": os.path.join(args.source, "analysis"), "MPLBACKEND": "Agg"}
    res = harness.run([sys.executable, "-m", "ringbench_analysis", "report", path, "--out", where],
                      env=env, timeout=600)
    check(res.returncode == 0, f"rb-analysis report {os.path.basename(path)}: {res.stderr[-800:]}")
    check(os.path.exists(os.path.join(where, "ring_timeline.png")),
          f"{os.path.basename(path)}: the report draws the ring steps")


def growth(args):
    files = {w: run_world(args, w) for w in (8, 16)}
    got = {w: dataset_bytes(path) for w, (path, _) in files.items()}
    for name in got[8]:
        (b8, p8), (b16, p16) = got[8][name], got[16][name]
        per8, per16 = b8 / (8 * p8), b16 / (16 * p16)
        print(f"{name}: {b8} B at 8 ranks x {p8} points ({per8:.0f} B each), "
              f"{b16} B at 16 x {p16} ({per16:.0f} B each)")
        check(per16 <= GROWTH * per8, f"{name}: bytes per rank and point {per16:.0f} at 16 ranks "
                                      f"<= {GROWTH} x {per8:.0f} at 8")
    for w, (path, planned) in files.items():
        size = os.path.getsize(path)
        print(f"{w} ranks: file {size} B, dry-run estimate {planned} B")
        check(planned is not None and abs(planned / size - 1) <= ESTIMATE,
              f"{w} ranks: the estimate {planned} B is within {ESTIMATE:.0%} of the file's {size} B")
    check_sampled(files[16][0])
    for w, (path, _) in files.items():
        report(args, path, os.path.join(args.workdir, f"report_np{w}"))


def large_config(args):
    """inputs/large.yaml, or (a build without CUDA) its host twin in the work folder."""
    path = os.path.join(args.source, "inputs", "large.yaml")
    probe = harness.run([args.ringbench, path, "--dry-run", "--world-size", "8"])
    if probe.returncode == 0:
        return path
    with open(path) as f:
        text = f.read()
    text = text.replace("backend: cuda", "backend: host")
    text = text.replace("dtypes: [bfloat16, float16, tf32, float32]", "dtypes: [float32]")
    text = text.replace("dtype: bfloat16}", "dtype: float32}")
    twin = os.path.join(args.workdir, "large_host.yaml")
    with open(twin, "w") as f:
        f.write(text)
    return twin


def targets(args):
    config = large_config(args)
    for world, limit in TARGETS.items():
        res = harness.run([args.ringbench, config, "--dry-run", "--world-size", str(world),
                           "--ranks-per-node", "8", "--wide"], timeout=120)
        print(res.stdout[-2500:])
        planned = planned_bytes(res.stdout)
        check(res.returncode == 0 and planned is not None, f"{world} ranks: planned ({res.stderr[-300:]})")
        check(planned is not None and planned <= limit,
              f"{world} ranks: {planned} B of output <= {limit} B")


def main():
    ap = harness.arg_parser()
    ap.add_argument("check", choices=("growth", "targets"))
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    {"growth": growth, "targets": targets}[args.check](args)
    return harness.exit_code()


if __name__ == "__main__":
    sys.exit(main())
