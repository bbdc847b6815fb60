#!/usr/bin/env python3
"""Ring placement and ring communicators of the ring_attention sweep at 8 ranks on simulated
nodes of 4 (--ranks-per-node 4), under block and cyclic placement, with ring_order node_aware
and rank. From the HDF5 file it checks
  * the rings: every ring size partitions the world, a ring's ranks hold the places 0 .. R-1
    (ring_rank) once each, and every point passes parity;
  * the node-crossing hops, recomputed here from the members and /ranks/node_index: node_aware
    crosses the fewest times the layout allows (0 for rings of 2 and 4, 2 for the ring of 8)
    under both placements, rank order under cyclic crosses more (and warns once);
  * the communicators: each ring size's are created once, at its first point, and reused:
    creations == distinct ring sizes.
With --gpu: the CUDA path at 2 ranks on 2 GPUs of one node (ring sizes 1 and 2, two sequence
lengths): every point ok, the NCCL ring communicators created once per ring size, by
ncclCommSplit of the world communicator where NCCL has it.
Exit 0 = pass, 1 = fail, 77 = skipped (no h5py/numpy; --gpu: fewer than 2 GPUs).
"""
import math
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import check  # noqa: E402
import harness  # noqa: E402

h5py, np = harness.h5py_and_numpy()

WORLD = 8
PER_NODE = 4
RING_SIZES = [2, 4, 8]
WARNING = "fits in one node but spans"

CONFIG = harness.RING_CONFIG_HEAD + """    seq_lengths: [32, 64]
    ring_sizes: {rings}
    num_heads: 1
    head_dim: 8
    warmup: 0
    iterations: 1
    backward: true
{order}"""


def fewest_crossings(R, K):
    """The fewest node-crossing hops of a ring of R ranks on nodes of K (R, K dividing each
    other): none when it fits in a node, else one per node it must span."""
    return 0 if R <= K else math.ceil(R / K)


def run(args, placement, order):
    stem = f"place_{placement}_{order or 'default'}"
    config = CONFIG.format(stem=stem, out=args.workdir, rings=RING_SIZES,
                           order=f"    ring_order: {order}\n" if order else "")
    res, out = harness.ringbench_on(args, WORLD, config, stem,
                                    ["--ranks-per-node", str(PER_NODE), "--placement", placement], timeout=600)
    check(res.returncode == 0, f"{stem}: exit code {res.returncode}")
    return res, out


def rings_of(g, node_of, i, where):
    """Point i's rings {ring_id: members}, checked for consistency; and its recorded hops."""
    R = int(g["points/ring_size"][i])
    ring_id, ring_rank = g["ring_id"][()][:, i], g["ring_rank"][()][:, i]
    # A ring's members in ring order: the ranks with its ring_id, by ring_rank (hdf5 schema 4).
    members = {}
    for rank in range(WORLD):
        members.setdefault(int(ring_id[rank]), {})[int(ring_rank[rank])] = rank
    rings = {}
    for rank in range(WORLD):
        places = members[int(ring_id[rank])]
        check(sorted(places) == list(range(R)), f"{where} rank {rank}: ring places 0..{R - 1}: {places}")
        m = [places[j] for j in range(R)]
        check(m[int(ring_rank[rank])] == rank, f"{where} rank {rank}: ring_rank is its place in {m}")
        rings.setdefault(int(ring_id[rank]), m)
        hops = sum(node_of[m[j]] != node_of[m[(j + 1) % R]] for j in range(R))
        check(int(g["ring_crossing_hops"][rank, i]) == hops, f"{where} rank {rank}: crossing hops {hops}")
        check(int(g["ring_nodes"][rank, i]) == len({node_of[x] for x in m}), f"{where} rank {rank}: nodes")
    check(sorted(r for m in rings.values() for r in m) == list(range(WORLD)),
          f"{where}: the rings partition the world: {rings}")
    return R, rings, [int(h) for h in g["ring_crossing_hops"][()][:, i]]


def check_comms(g, where):
    """Each ring size's communicators: created at its first point, reused afterwards."""
    sizes = [int(x) for x in g["points/ring_size"][()]]
    created = g["comm_created"][()]
    seconds = g["comm_create_time_s"][()]
    first = {R: sizes.index(R) for R in set(sizes)}
    for i, R in enumerate(sizes):
        want = 1 if first[R] == i else 0
        check(all(int(c) == want for c in created[:, i]), f"{where} point {i} (R={R}): comm_created {want}")
        check(np.all(seconds[:, i] > 0) if want else np.all(seconds[:, i] == 0),
              f"{where} point {i}: comm_create_time_s {seconds[:, i]}")
    check(int(created[0].sum()) == len(set(sizes)) == int(g.attrs["ring_comm_creations"]),
          f"{where}: creations {int(created[0].sum())} == distinct ring sizes {len(set(sizes))}")


def check_file(path, placement, order, screen):
    where = f"{placement}/{order}"
    per_ring = {}
    with h5py.File(path, "r") as f:
        g = f["/sweeps/ra"]
        node_of = [int(x) for x in f["ranks/node_index"][()]]
        expect_nodes = ([r // PER_NODE for r in range(WORLD)] if placement == "block"
                        else [r % (WORLD // PER_NODE) for r in range(WORLD)])
        check(node_of == expect_nodes, f"{where}: simulated nodes {node_of}")
        check(str(g.attrs["ring_order"]) == order, f"{where}: ring_order attribute")
        status = [[s.decode() if isinstance(s, bytes) else str(s) for s in row] for row in g["status"][()]]
        check(all(s == "ok" for row in status for s in row), f"{where}: every point ok (parity): {status}")
        for i in range(len(g["points/ring_size"])):
            R, rings, hops = rings_of(g, node_of, i, f"{where} point {i}")
            per_ring[R] = (rings, hops)
        check_comms(g, where)
    warned = screen.count(WARNING)
    return per_ring, warned


GPU_CONFIG = """
run: {{name: ring_gpu, output_dir: {out}}}
backend: cuda
sweeps:
  - type: ring_attention
    name: ra
    seq_lengths: [4096, 8192]
    ring_sizes: [1, 2]
    num_heads: 4
    head_dim: 64
    dtype: bf16
    causal: true
    warmup: 1
    iterations: 3
"""


def gpu_count():
    if shutil.which("nvidia-smi") is None:
        return 0
    r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return sum(line.startswith("GPU ") for line in r.stdout.splitlines()) if r.returncode == 0 else 0


def check_gpu(args):
    """The CUDA path: NCCL ring communicators once per ring size, points ok."""
    if gpu_count() < 2:
        print("SKIPPED: needs 2 GPUs")
        return harness.SKIPPED
    res, out = harness.ringbench_on(args, 2, GPU_CONFIG.format(out=args.workdir), "ring_gpu", timeout=600)
    if not check(res.returncode == 0, f"exit code {res.returncode}"):
        return harness.exit_code()
    with h5py.File(out, "r") as f:
        g = f["/sweeps/ra"]
        status = [[s.decode() if isinstance(s, bytes) else str(s) for s in row] for row in g["status"][()]]
        check(all(s == "ok" for row in status for s in row), f"every point ok: {status}")
        check(str(g.attrs["transport"]) == "nccl", f"transport {g.attrs['transport']}")
        method = str(g.attrs["ring_comm_method"])
        check("ncclComm" in method, f"ring_comm_method {method}")
        if "ncclCommSplit" in method:
            check("world_nccl_create_time_s" in g.attrs, "the world NCCL communicator's creation time recorded")
        check([int(x) for x in g["points/ring_size"][()]] == [1, 2, 1, 2], "points: R = 1, 2, 1, 2")
        check(g["comm_created"][()].tolist() == [[1, 1, 0, 0]] * 2,
              f"comm_created per rank {g['comm_created'][()].tolist()}: once per ring size")
        check(int(g.attrs["ring_comm_creations"]) == 2, "ring_comm_creations == 2 ring sizes")
        t = g["comm_create_time_s"][()]
        check(np.all(t[:, :2] > 0) and np.all(t[:, 2:] == 0), f"comm_create_time_s {t.tolist()}")
        check(np.all(g["ring_crossing_hops"][()] == 0), "one node: no crossing hops")
    return harness.exit_code()


def main():
    ap = harness.arg_parser(source=False)
    ap.add_argument("--gpu", action="store_true", help="the CUDA path at 2 ranks (needs 2 GPUs)")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    if args.gpu:
        return check_gpu(args)
    found = {}
    for placement in ("block", "cyclic"):
        for order in (None, "rank"):  # None: the default, which must be node_aware
            res, out = run(args, placement, order)
            if res.returncode == 0:
                found[placement, order or "node_aware"] = check_file(
                    out, placement, order or "node_aware", res.stderr)  # warnings go to stderr
    if len(found) != 4:
        return harness.exit_code()
    for placement in ("block", "cyclic"):
        per_ring, warned = found[placement, "node_aware"]
        for R in RING_SIZES:
            hops = per_ring[R][1]
            check(all(h == fewest_crossings(R, PER_NODE) for h in hops),
                  f"{placement}/node_aware R={R}: every ring crosses {fewest_crossings(R, PER_NODE)} times: {hops}")
        check(warned == 0, f"{placement}/node_aware: no spread warning ({warned})")
    # Block placement: world order already groups ranks by node.
    block_rank, warned = found["block", "rank"]
    for R in RING_SIZES:
        check(block_rank[R][1] == found["block", "node_aware"][0][R][1],
              f"block R={R}: rank order crosses as node_aware")
    check(warned == 0, f"block/rank: no spread warning ({warned})")
    # Cyclic placement: world order alternates nodes, so every hop crosses.
    cyclic_rank, warned = found["cyclic", "rank"]
    for R in RING_SIZES:
        aware = sum(found["cyclic", "node_aware"][0][R][1])
        check(sum(cyclic_rank[R][1]) > aware,
              f"cyclic R={R}: rank order crosses more ({sum(cyclic_rank[R][1])} > {aware})")
        check(all(h == R for h in cyclic_rank[R][1]), f"cyclic/rank R={R}: every hop crosses: {cyclic_rank[R][1]}")
    check(warned == 1, f"cyclic/rank: the spread warning printed once ({warned})")
    return harness.exit_code()


if __name__ == "__main__":
    sys.exit(main())
