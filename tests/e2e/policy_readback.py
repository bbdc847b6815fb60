#!/usr/bin/env python3
"""End-to-end checks of the tuned kernel policy read-back (issue #13): the real ringbench on 2
ranks with `kernel_policy:` in its config, on the host path.

    unknown_path   a policy naming an unknown kernel path: every rank exits non-zero, the error
                   is printed once (rank 0), names the policy file and the key inside it, and no
                   output file is created
    other_machine  a policy tuned on the cuda path, run on the host: exit 0, one warning line,
                   points/kernel_policy says "built-in (FILE not applied: WHY)", no block counted
                   as the policy's
    strict         the same with {file: ..., strict: true}: every rank exits 1, the refusal is
                   printed once, no output file
    applies        a host policy: each point's blocks ran where the policy's lookup rule (done
                   here, independently of the C++ reader) puts its block rows, policy_block_calls
                   counts exactly those, points/kernel_policy names the file and its sha256, and
                   paths_ran and the screen's table name the path that ran, not the backend
    mixed          a policy that sends one LongNet branch to materialized and two to kokkos:
                   paths_ran is "kokkos 4 / materialized 2" on every rank, as on the screen

    policy_readback.py CHECK --ringbench BIN --mpiexec MPIEXEC --workdir DIR
Exit 0 = pass, 1 = fail, 77 = skipped.
"""
import glob
import hashlib
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import check, mpirun  # noqa: E402
import harness  # noqa: E402

h5py, np = harness.h5py_and_numpy(echo_passes=True)

RANKS = 2
# Block rows S/R of the points: 4 8 16 32 64 128 256 512 1024 2048 — out of reach below,
# within reach below (8: half the first range), inside, between (256 is the ratio tie of 128
# and 512), on the null range and above the ranges of HOST_RANGES (1024: the null range's reach;
# 2048: out of reach).
SEQ_LENGTHS = [8, 16, 64, 256, 512, 1024, 2048]
RING_SIZES = [1, 2]
HOST_RANGES = [(16, 32, "kokkos"), (64, 128, "materialized"), (512, 512, None)]


def policy_text(device, ranges, head_dim=16, dtype="fp32", heads=2):
    """A policy file as `rb-analysis tune` writes it (docs/analysis.md, format version 2),
    tuned at batch 1 and `heads` heads."""
    machine = ("{device: host, gpu: null, cuda_driver: null, cuda_runtime: null, cudnn: null}"
               if device == "host" else
               "{device: cuda, gpu: NVIDIA H200, cuda_driver: '13.0', cuda_runtime: '13.0', "
               "cudnn: 9.14.0}")
    lines = ["version: 2", "kind: ringbench-kernel-policy", f"machine: {machine}",
             "source: tune.h5", "sweep: tuning", "margin: 1.2", "hysteresis: 1",
             f"grid: {{batch: 1, num_heads: {heads}}}", "rules:",
             f"- dtype: {dtype}", f"  head_dim: {head_dim}", "  causal: false", "  segment: 0",
             "  rate: 0", "  ranges:"]
    for lo, hi, path in ranges:
        lines += [f"  - block_rows_min: {lo}", f"    block_rows_max: {hi}",
                  f"    path: {path if path else 'null'}"]
    return "\n".join(lines) + "\n"


def config_text(policy_value, sweep=None):
    sweep = sweep or ("  - {type: ring_attention, name: ring, seq_lengths: %s, ring_sizes: %s, num_heads: 2,\n"
                      "     head_dim: 16, dtype: fp32, causal: false, layout: contiguous, warmup: 0,\n"
                      "     iterations: 1}\n" % (SEQ_LENGTHS, RING_SIZES))
    return ("run: {name: readback, output_dir: results}\nbackend: host\n"
            f"kernel_policy: {policy_value}\nsweeps:\n" + sweep)


def lookup(ranges, rows):
    """The lookup rule of docs/analysis.md for an exact block of `rows` queries and keys at the
    tuned heads: inside a range; between two, the nearer by ratio (a tie: the lower range);
    beyond the first or last range by at most a factor 2 (rows and keys: two log2 steps, the
    reach), that range; further out or a null path: None (built-in)."""
    lo_all, hi_all = ranges[0][0], ranges[-1][1]
    if rows < lo_all / 2 or rows > hi_all * 2:
        return None
    best, best_d = None, None
    for lo, hi, path in ranges:
        d = math.log2(lo / rows) if rows < lo else math.log2(rows / hi) if rows > hi else 0.0
        if best_d is None or d < best_d:
            best, best_d = path, d
    return best


class Run:
    """One ringbench run on RANKS ranks in `work`, with a policy file and a config there."""

    def __init__(self, args, work, policy, policy_value, sweep=None):
        self.work = work
        self.policy = os.path.join(work, "policies", "tuned.yaml")
        os.makedirs(os.path.dirname(self.policy), exist_ok=True)
        with open(self.policy, "w") as f:
            f.write(policy)
        self.config = os.path.join(work, "run.yaml")
        with open(self.config, "w") as f:
            f.write(config_text(policy_value, sweep))
        self.h5 = os.path.join(work, "out.h5")
        exits = os.path.join(work, "exits")
        os.makedirs(exits, exist_ok=True)
        self.r = mpirun(args, RANKS, [args.ringbench, self.config, "--output", self.h5],
                        per_rank_exit_dir=exits)
        self.codes = [int(open(p).read()) for p in sorted(glob.glob(exits + "/exit.*"))]
        self.lines = (self.r.stdout + self.r.stderr).splitlines()
        print(self.r.stdout[-3000:], self.r.stderr[-3000:], sep="\n")

    def lines_with(self, *needles):
        return [line for line in self.lines if all(n in line for n in needles)]

    def no_output(self, what):
        written = glob.glob(os.path.join(self.work, "**", "*.h5"), recursive=True)
        check(not written, f"{what}: no output file created ({written})")


def policy_line(config_text_, key="kernel_policy"):
    return next(i + 1 for i, line in enumerate(config_text_.splitlines()) if line.startswith(key + ":"))


def check_unknown_path(args, work):
    bad = [(16, 32, "kokkos"), (64, 128, "materialised")]
    run = Run(args, work, policy_text("host", bad), "policies/tuned.yaml")
    check(len(run.codes) == RANKS and all(c != 0 for c in run.codes),
          f"unknown path: every rank exits non-zero ({run.codes})")
    errors = run.lines_with("unknown kernel path 'materialised'")
    check(len(errors) == 1, f"unknown path: the error is printed once ({len(errors)})")
    if errors:
        check(run.policy + ":" in errors[0], f"unknown path: names the policy file: {errors[0]}")
        check("key 'rules[0].ranges[1].path'" in errors[0], f"unknown path: names the key: {errors[0]}")
        check("did you mean 'materialized'?" in errors[0], "unknown path: suggests materialized")
    run.no_output("unknown path")


def cuda_policy():
    return policy_text("cuda", [(512, 4096, "flash")], head_dim=128, dtype="bf16")


def check_other_machine(args, work):
    run = Run(args, work, cuda_policy(), "policies/tuned.yaml")
    check(run.codes == [0] * RANKS, f"cuda policy on the host: every rank exits 0 ({run.codes})")
    why = "it was tuned on the cuda path and this run is on the host path"
    warnings = run.lines_with("warning:", "not applied")
    check(len(warnings) == 1, f"one warning line ({len(warnings)})")
    if warnings:
        where = f"{run.config}:{policy_line(config_text('x'))}: key 'kernel_policy'"
        check(warnings[0].startswith(f"warning: {where}: tuned policy {run.policy} not applied: {why}"),
              f"the warning names the config line, the key, the file and why: {warnings[0]}")
        check("strict: true refuses instead" in warnings[0], "the warning says what strict does")
    if not check(os.path.isfile(run.h5), "the output file is written"):
        return
    with h5py.File(run.h5, "r") as f:
        g = f["sweeps/ring"]
        sources = set(text(g["points/kernel_policy"]))
        want = f"built-in ({run.policy} not applied: {why})"
        check(sources == {want}, f"every point records {want!r} ({sources})")
        check(int(np.sum(g["policy_block_calls"][()])) == 0, "no block call is the policy's")
        check(int(np.sum(g["block_calls_kokkos"][()])) > 0, "the built-in rule ran kokkos")


def check_strict(args, work):
    run = Run(args, work, cuda_policy(), "{file: policies/tuned.yaml, strict: true}")
    check(run.codes == [1] * RANKS, f"strict: every rank exits 1 ({run.codes})")
    refusals = run.lines_with("refused (strict)")
    check(len(refusals) == 1, f"strict: the refusal is printed once ({len(refusals)})")
    if refusals:
        check(refusals[0].startswith("ringbench: invalid config: " + run.config + ":"),
              f"strict: an invalid-config error at the config file: {refusals[0]}")
        check(run.policy in refusals[0] and "tuned on the cuda path" in refusals[0],
              f"strict: names the policy file and why: {refusals[0]}")
    check(not run.lines_with("warning:", "not applied"), "strict: no warning besides the error")
    run.no_output("strict")


def text(ds):
    return [x.decode() if isinstance(x, bytes) else str(x) for x in ds[()]]


def check_point(g, p, rows, ring, digest_source):
    """One point of the applying run: every rank's blocks on the path lookup gives."""
    want = lookup(HOST_RANGES, rows)
    ran = want or "kokkos"  # the built-in rule on the host for fp32 d 16
    paths = [k[len("block_calls_"):] for k in g if k.startswith("block_calls_")]
    for rank in range(RANKS):
        calls = {path: int(g["block_calls_" + path][rank, p]) for path in paths}
        total = sum(calls.values())
        # Non-causal exact attention: R forward and R backward block calls per iteration.
        check(total == 2 * ring, f"rows {rows} R={ring} rank {rank}: {total} block calls, want {2 * ring}")
        check(calls[ran] == total, f"rows {rows} rank {rank}: all on {ran} ({calls})")
        policy_calls = int(g["policy_block_calls"][rank, p])
        check(policy_calls == (total if want else 0),
              f"rows {rows} rank {rank}: policy_block_calls {policy_calls} (policy path: {want})")
    check(text(g["points/kernel_policy"])[p] == digest_source,
          f"rows {rows}: points/kernel_policy is {digest_source!r}")
    check(set(str(x) for x in g["paths_ran"].asstr()[:, p]) == {ran},
          f"rows {rows}: paths_ran is {ran!r} on every rank")
    return ran, int(g["block_calls_" + ran][0, p])


def check_applies(args, work):
    policy = policy_text("host", HOST_RANGES)
    run = Run(args, work, policy, "policies/tuned.yaml")
    check(run.codes == [0] * RANKS, f"host policy: every rank exits 0 ({run.codes})")
    digest = hashlib.sha256(policy.encode()).hexdigest()
    source = f"{run.policy} (sha256 {digest})"
    followed = run.lines_with("kernel policy:", "is followed by kernel: auto")
    check(followed == [f"kernel policy: {source} is followed by kernel: auto"],
          f"the run says once that it follows the file ({followed})")
    if not check(os.path.isfile(run.h5), "the output file is written"):
        return
    with h5py.File(run.h5, "r") as f:
        g = f["sweeps/ring"]
        seq, ring = g["points/seq_len"][()], g["points/ring_size"][()]
        check(len(seq) == len(SEQ_LENGTHS) * len(RING_SIZES), f"{len(seq)} points")
        placed = {}
        for p in range(len(seq)):
            rows = int(seq[p] // ring[p])
            path, calls = check_point(g, p, rows, int(ring[p]), source)
            if lookup(HOST_RANGES, rows):
                placed[path] = placed.get(path, 0) + calls
    check(placed.get("materialized", 0) > 0 and placed.get("kokkos", 0) > 0,
          f"the policy placed blocks on both materialized and kokkos ({placed})")
    table = [line.split() for line in run.r.stdout.splitlines()]
    for S, R in ((64, 1), (128 * 2, 2)):  # rows 64 (materialized) and 128 (materialized)
        # A table split to fit 100 columns repeats S and R in each part; the kernel column is in one.
        hits = [t for t in table if t[:2] == [str(S), str(R)]]
        named = [t for t in hits if "materialized" in t]
        check(len(named) == 1 and not any("kokkos" in t for t in hits),
              f"the screen's row S={S} R={R} names materialized, not the backend ({hits})")


def check_mixed(args, work):
    """Three LongNet branches of one point, the policy sending (32, 1) to materialized and
    (16, 2), (32, 4) to kokkos: each branch is one forward and one backward call at ring size 1."""
    rules = []
    for seg, rate, path in ((32, 1, "materialized"), (16, 2, "kokkos"), (32, 4, "kokkos")):
        rules += ["- dtype: fp32", "  head_dim: 16", "  causal: false", f"  segment: {seg}",
                  f"  rate: {rate}", "  ranges:", "  - block_rows_min: 16", "    block_rows_max: 64",
                  f"    path: {path}"]
    head = policy_text("host", [(16, 32, "kokkos")], heads=4).split("rules:")[0]
    policy = head + "rules:\n" + "\n".join(rules) + "\n"
    run = Run(args, work, policy, "policies/tuned.yaml",
              sweep=("  - {type: ring_attention, name: ring, seq_lengths: [32], ring_sizes: [1], num_heads: 4,\n"
                     "     head_dim: 16, dtype: fp32, causal: false, segment_lengths: [32, 16, 32],\n"
                     "     dilation_rates: [1, 2, 4], warmup: 0, iterations: 1}\n"))
    check(run.codes == [0] * RANKS, f"mixed policy: every rank exits 0 ({run.codes})")
    if not check(os.path.isfile(run.h5), "the output file is written"):
        return
    with h5py.File(run.h5, "r") as f:
        g = f["sweeps/ring"]
        ran = [str(x) for x in g["paths_ran"].asstr()[:, 0]]
        calls = {k: [int(x) for x in g[k][:, 0]] for k in ("block_calls_kokkos", "block_calls_materialized")}
    check(ran == ["kokkos 4 / materialized 2"] * RANKS, f"paths_ran {ran}, block calls {calls}")
    rows = [line for line in run.r.stdout.splitlines() if line.split()[:2] == ["32", "1"]]
    check(sum("kokkos 4 / materialized 2" in row for row in rows) == 1,
          f"the screen's row says which paths ran ({rows})")


def main():
    ap = harness.arg_parser(source=False)
    ap.add_argument("check", choices=["unknown_path", "other_machine", "strict", "applies", "mixed"])
    args = ap.parse_args()
    return harness.run_in_workdir(args, {"unknown_path": check_unknown_path, "other_machine": check_other_machine,
                                         "strict": check_strict, "applies": check_applies,
                                         "mixed": check_mixed}[args.check])


if __name__ == "__main__":
    sys.exit(main())
