#!/usr/bin/env python3
"""End-to-end checks of `scheme: auto` and its CP policy (issue #27 item 4) on the host path, 4
ranks, as a user runs them:

    measured   a ring_attention sweep over [ring, allgather, ulysses] -> `rb-analysis tune-cp`
               -> a run with `scheme: auto` and `cp_policy:` over more sequence lengths: every
               point ran the scheme tune_cp.lookup (the C++ rule restated) gives, or the ring
               where it gives none, and records scheme_asked auto and where the choice came from
    written    a hand-written policy sending 64-128 tokens per rank to ulysses, 256 to allgather
               and 512 to hybrid(U=2): exactly those ran, with parity ok, beside the ring
               further out (cp_policy "no measured shape within reach")
    other      a policy tuned on the cuda path: one warning, every auto point runs the ring and
               records "built-in (FILE not applied: ...)"; with strict: true every rank exits 1

    cp_policy_readback.py CHECK --ringbench BIN --mpiexec MPIEXEC --source DIR --workdir DIR
Exit 0 = pass, 1 = fail, 77 = skipped.
"""
import glob
import hashlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import check, mpirun, run  # noqa: E402
import harness  # noqa: E402

h5py, np = harness.h5py_and_numpy(echo_passes=True)
RANKS = 4

SWEEP = """  - type: ring_attention
    name: {name}
    seq_lengths: {seqs}
    num_heads: 4
    head_dim: 16
    dtype: fp32
    ring_sizes: [4]
    scheme: {scheme}
    warmup: 1
    iterations: 2
"""


def config(work, name, seqs, scheme, extra=""):
    path = os.path.join(work, name + ".yaml")
    with open(path, "w") as f:
        f.write(f"run: {{name: {name}, output_dir: {work}}}\nbackend: host\nsweeps:\n"
                + SWEEP.format(name=name, seqs=seqs, scheme=scheme) + extra)
    return path


def ringbench(args, work, cfg, name, exits=None):
    h5 = os.path.join(work, name + ".h5")
    r = mpirun(args, RANKS, [args.ringbench, cfg, "--output", h5, "--force"], per_rank_exit_dir=exits)
    print(r.stdout[-2500:], r.stderr[-2500:], sep="\n")
    return r, h5


def text(ds):
    return [x.decode() if isinstance(x, bytes) else str(x) for x in ds[()]]


def points(h5, sweep):
    """[(S, R, scheme, ulysses_degree, scheme_asked, cp_policy, status)] of a sweep."""
    with h5py.File(h5, "r") as f:
        g = f["sweeps"][sweep]
        p = g["points"]
        status = text(g["status"])[:len(p["seq_len"])] if g["status"].ndim == 1 else \
            [str(x.decode() if isinstance(x, bytes) else x) for x in g["status"][0]]
        return list(zip(p["seq_len"][()].tolist(), p["ring_size"][()].tolist(), text(p["scheme"]),
                        p["ulysses_degree"][()].tolist(), text(p["scheme_asked"]), text(p["cp_policy"]),
                        status))


def shape(R):
    return ("fp32", 16, 4, 4, False, "contiguous", "none", R, "node")


def check_measured(args, work, tune_cp):
    grid = config(work, "grid", "[256, 512, 1024]", "[ring, allgather, ulysses]")
    r, h5 = ringbench(args, work, grid, "grid")
    check(r.returncode == 0, f"the scheme grid runs (exit {r.returncode})")
    policy = os.path.join(work, "cp.yaml")
    r = run([os.path.join(args.source, "analysis", "rb-analysis"), "tune-cp", h5, "--safety-margin", "1.05",
             "--out", policy])
    print(r.stdout, r.stderr)
    check(r.returncode == 0 and "tune-cp: 1 shape(s)" in r.stdout, f"rb-analysis tune-cp exits 0 ({r.returncode})")
    if not os.path.isfile(policy):
        return
    d = tune_cp.read_policy(policy)
    cfg = config(work, "auto", "[128, 256, 512, 1024, 2048, 8192]", "auto", "    cp_policy: cp.yaml\n")
    r, h5 = ringbench(args, work, cfg, "auto")
    check(r.returncode == 0, f"the scheme: auto run exits 0 ({r.returncode})")
    digest = hashlib.sha256(open(policy, "rb").read()).hexdigest()
    for S, R, scheme, _, asked, source, status in points(h5, "auto"):
        want = tune_cp.lookup(d, shape(R), S // R)
        ran = want[0] if want else "ring"
        check(scheme == ran and asked == "auto" and status == "ok",
              f"S={S}: ran {scheme} (policy: {want}), asked {asked}, {status}")
        check((digest in source) if want else source.startswith("built-in"),
              f"S={S}: cp_policy says where the choice came from ({source})")


WRITTEN = """version: 1
kind: ringbench-cp-policy
machine: {{device: {device}, gpu: {gpu}, cudnn: {cudnn}}}
margin: 1.05
hysteresis: 1
rules:
- {{dtype: fp32, head_dim: 16, num_heads: 4, num_kv_heads: 4, causal: false, layout: contiguous,
   dilation: none, ring_size: 4, span: node, ranges: [
   {{tokens_min: 64, tokens_max: 128, scheme: ulysses}},
   {{tokens_min: 256, tokens_max: 256, scheme: allgather}},
   {{tokens_min: 512, tokens_max: 512, scheme: hybrid, ulysses_degree: 2}}]}}
"""


def run_written(args, work, seqs, scheme, **machine):
    """WRITTEN for machine as work/cp.yaml, and a run reading it: (result, output file)."""
    with open(os.path.join(work, "cp.yaml"), "w") as f:
        f.write(WRITTEN.format(**machine))
    return ringbench(args, work, config(work, "auto", seqs, scheme, "    cp_policy: cp.yaml\n"), "auto")


def check_written(args, work):
    r, h5 = run_written(args, work, "[256, 512, 1024, 2048, 8192]", "[ring, auto]", device="host", gpu="null",
                        cudnn="null")
    check(r.returncode == 0, f"exit 0 ({r.returncode})")
    want = {256: ("ulysses", 4), 512: ("ulysses", 4), 1024: ("allgather", 1), 2048: ("hybrid", 2),
            8192: ("ring", 1)}  # 8192: 2048 tokens, a factor 4 beyond the last range
    seen = set()
    for S, R, scheme, degree, asked, source, status in points(h5, "auto"):
        if asked != "auto":
            check(scheme == "ring" and source == "none: scheme ring named", f"S={S} named ring: {scheme}, {source}")
            continue
        seen.add(S)
        check((scheme, degree) == want[S] and status == "ok",
              f"S={S} ({S // R} tokens/rank): ran {scheme} U={degree}, want {want[S]}, parity {status}")
        if S == 8192:
            check("no measured shape within reach" in source, f"S=8192: {source}")
    check(seen == set(want), f"every auto point was recorded ({sorted(seen)})")
    lines = [line for line in r.stdout.splitlines() if "auto:hybrid" in line and "ok" in line]
    check(len(lines) >= 1, "the screen's table shows auto:hybrid")


def check_other(args, work):
    r, h5 = run_written(args, work, "[256, 1024]", "auto", device="cuda", gpu="NVIDIA H100 80GB HBM3",
                        cudnn="9.14.0")
    check(r.returncode == 0, f"a cuda CP policy on the host: exit 0 ({r.returncode})")
    # Warnings are stderr's (stdout keeps the header, tables and summary).
    warnings = [line for line in r.stderr.splitlines() if line.startswith("warning:") and "not applied" in line]
    check(not any("not applied" in line for line in r.stdout.splitlines()), "no warning on stdout")
    check(len(warnings) == 1 and "scheme: auto runs the ring" in warnings[0], f"one warning ({warnings})")
    for S, _, scheme, _, _, source, _ in points(h5, "auto"):
        check(scheme == "ring" and source.startswith("built-in (") and "not applied" in source,
              f"S={S}: the ring, {source}")
    strict = config(work, "strict", "[256]", "auto", "    cp_policy: {file: cp.yaml, strict: true}\n")
    exits = os.path.join(work, "exits")
    os.makedirs(exits, exist_ok=True)
    r, h5 = ringbench(args, work, strict, "strict", exits=exits)
    codes = [int(open(p).read()) for p in sorted(glob.glob(exits + "/exit.*"))]
    # mpiexec may kill a rank still tearing down once another has exited 1: it records no code.
    check(r.returncode != 0 and codes and all(c == 1 for c in codes),
          f"strict: every rank that got to exit exits 1 ({codes}, mpiexec {r.returncode})")
    check(sum("refused (strict)" in line for line in r.stderr.splitlines()) == 1, "strict: one refusal")
    check(not os.path.exists(h5), "strict: no output file")


def main():
    ap = harness.arg_parser()
    ap.add_argument("check", choices=["measured", "written", "other"])
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(args.source, "analysis"))
    from ringbench_analysis import tune_cp
    return harness.run_in_workdir(args, {"measured": lambda a, w: check_measured(a, w, tune_cp),
                                         "written": check_written, "other": check_other}[args.check])


if __name__ == "__main__":
    sys.exit(main())
