#!/usr/bin/env python3
"""The kernel-tuning round trip on the host path, as a user runs it: the real ringbench tunes
(inputs/tuning_host.yaml, 2 ranks), `rb-analysis tune` writes the policy, and a ring_attention
run with `kernel_policy:` reads it back. Checked from the output file: every point's block
calls ran on the path the policy gives for its shape and block rows (tuning.lookup, the same
rule as the C++ reader), all of them counted as the policy's; blocks the policy does not cover
ran the built-in path; the point names the file and its sha256.

Two tunings: one as measured (whatever it chose), and one with the built-in path (kokkos) made
to fail parity (RINGBENCH_FAULT_PARITY_PATH): its policy must send every tuned block to
materialized, so the read-back visibly changes what `auto` runs against a run without policy.

    tuning_roundtrip.py --ringbench BIN --mpiexec MPIEXEC --source DIR --workdir DIR
Exit 0 = pass, 1 = fail, 77 = skipped.
"""
import hashlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import check, mpirun, run  # noqa: E402
import harness  # noqa: E402

h5py, np = harness.h5py_and_numpy(echo_passes=True)

# The ring shapes of the tuning grid of inputs/tuning_host.yaml (fp32, d 16, 2 heads, LongNet
# (32, 2)); sequence lengths and ring sizes give block rows 32..256: inside, below and above
# the tuned 64..128.
RING_CONFIG = """run: {{name: roundtrip, output_dir: {out}}}
backend: host
{policy}
sweeps:
""" + "".join(
    """  - {{type: ring_attention, name: {name}, seq_lengths: [64, 128, 256], ring_sizes: [1, 2],
      num_heads: 2, head_dim: 16, dtype: fp32, causal: {causal}, layout: contiguous,
      segment_lengths: [32], dilation_rates: [2], warmup: 1, iterations: 2}}
""".replace("{name}", name).replace("{causal}", causal)
    for name, causal in (("full", "false"), ("causal", "true")))


def tune(args, tuning, name, fault=None):
    h5 = os.path.join(args.workdir, name + ".h5")
    policy = os.path.join(args.workdir, name + ".yaml")
    config = os.path.join(args.source, "inputs", "tuning_host.yaml")
    r = mpirun(args, 2, [args.ringbench, config, "--output", h5, "--force"],
               env={"RINGBENCH_FAULT_PARITY_PATH": fault} if fault else None)
    check(os.path.isfile(h5) and (r.returncode != 0) == bool(fault),
          f"tuning run {name}: file written, exit {r.returncode}")
    r = run([os.path.join(args.source, "analysis", "rb-analysis"), "tune", h5,
             "--safety-margin", "1.2", "--hysteresis", "1", "--out", policy])
    check(r.returncode == 0, f"rb-analysis tune {name}: exit {r.returncode} {r.stderr[-500:]}")
    return tuning.read_policy_yaml(policy), policy


def ring_run(args, name, policy_file):
    out = os.path.join(args.workdir, name)
    config = os.path.join(args.workdir, name + ".yaml")
    with open(config, "w") as f:
        line = f"kernel_policy: {os.path.basename(policy_file)}" if policy_file else ""
        f.write(RING_CONFIG.format(out=out, policy=line))
    h5 = os.path.join(args.workdir, name + "_run.h5")
    r = mpirun(args, 2, [args.ringbench, config, "--output", h5, "--force"])
    check(r.returncode == 0, f"ring run {name}: exit 0 ({r.returncode}) {r.stderr[-800:]}")
    return h5, r.stdout + r.stderr  # the policy's notes are stderr's, the tables stdout's


def text(ds):
    return [x.decode() if isinstance(x, bytes) else str(x) for x in ds[()]]


def point_calls(f, sweep):
    """[(block rows, {path: calls} of rank 0, policy calls, kernel_policy)] per point."""
    g = f["sweeps"][sweep]
    seq, ring = g["points/seq_len"][()], g["points/ring_size"][()]
    paths = {k[len("block_calls_"):]: g[k][()] for k in g if k.startswith("block_calls_")}
    policy, source = g["policy_block_calls"][()], text(g["points/kernel_policy"])
    out = []
    for p in range(len(seq)):
        for rank in range(policy.shape[0]):  # every rank runs the same blocks at ring size R
            calls = {k: int(v[rank, p]) for k, v in paths.items() if v[rank, p] > 0}
            out.append((int(seq[p] // ring[p]), calls, int(policy[rank, p]), source[p]))
    return out


def check_follows(h5, policy, policy_file, tuning):
    """Every point ran where tuning.lookup says; returns how many blocks the policy placed on
    each path."""
    digest = hashlib.sha256(open(policy_file, "rb").read()).hexdigest()
    placed = {}
    with h5py.File(h5, "r") as f:
        for sweep, causal in (("full", False), ("causal", True)):
            for rows, calls, by_policy, source in point_calls(f, sweep):
                want = tuning.lookup(policy, ("fp32", 16, causal, 32, 2), rows)
                total = sum(calls.values())
                ran = want or "kokkos"
                check(calls == {ran: total} and total > 0,
                      f"{sweep} rows {rows}: all {total} block calls on {ran} ({calls})")
                check(by_policy == (total if want else 0),
                      f"{sweep} rows {rows}: {by_policy} calls counted as the policy's")
                check(digest in source, f"{sweep}: point names the policy's sha256 ({source})")
                if want:
                    placed[want] = placed.get(want, 0) + total
    return placed


def main():
    args = harness.arg_parser().parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    sys.path.insert(0, os.path.join(args.source, "analysis"))
    from ringbench_analysis import tuning

    measured, measured_file = tune(args, tuning, "measured")
    h5, _ = ring_run(args, "measured_ring", measured_file)
    check_follows(h5, measured, measured_file, tuning)

    faulted, faulted_file = tune(args, tuning, "faulted", fault="kokkos")
    h5, stdout = ring_run(args, "faulted_ring", faulted_file)
    check("is followed by kernel: auto" in stdout, "the run says it follows the policy")
    placed = check_follows(h5, faulted, faulted_file, tuning)
    check(set(placed) == {"materialized"} and placed["materialized"] > 0,
          f"with kokkos failing tuning parity, the policy sends tuned blocks to materialized ({placed})")

    h5, _ = ring_run(args, "builtin_ring", None)
    with h5py.File(h5, "r") as f:
        for sweep in ("full", "causal"):
            for rows, calls, by_policy, source in point_calls(f, sweep):
                check(set(calls) == {"kokkos"} and by_policy == 0 and source == "built-in",
                      f"without a policy {sweep} rows {rows} runs kokkos only ({calls}, {source})")
    return harness.exit_code()


if __name__ == "__main__":
    sys.exit(main())
