#!/usr/bin/python3
"""Issue #27's check of a CP policy on shapes it was not tuned on: for every (shape, tokens per
rank) of a run that measured several schemes (e.g. inputs/cp_schemes.yaml), the scheme
`scheme: auto` would pick under the policy (rb-analysis tune-cp on another grid, e.g.
inputs/cp_grid.yaml) against the fastest scheme measured there (slowest rank's median
fwd+bwd time, parity passed).

    launch/cp_policy_check.py POLICY.yaml RUN.h5 [--markdown] [--limit 1.05]

Exit 0 when every pick is within the limit of the fastest, 1 otherwise, 2 on unusable input.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "analysis"))

from ringbench_analysis import reader, tune, tune_cp  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("policy")
    ap.add_argument("run")
    ap.add_argument("--markdown", action="store_true", help="a Markdown table instead of text")
    ap.add_argument("--limit", type=float, default=1.05, help="largest pick / fastest that passes")
    args = ap.parse_args(argv)
    try:
        picks = tune_cp.policy_picks(tune_cp.read_policy(args.policy),
                                     tune_cp.measurements(reader.load(args.run)))
    except (tune.TuneError, reader.RingbenchFileError) as exc:
        print(f"cp_policy_check: {exc}", file=sys.stderr)
        return 2
    header = ["heads (K/V)", "causal", "tokens/rank", "pick", "pick ms", "fastest", "fastest ms", "pick / fastest"]
    lines = []
    for _, r in picks.iterrows():
        lines.append([f"{r.num_heads} ({r.num_kv_heads})", f"{r.layout}" if r.causal else "no", str(r.tokens),
                      r.pick, f"{r.pick_s * 1e3:.2f}", str(r.fastest), f"{r.fastest_s * 1e3:.2f}", f"{r.ratio:.3f}"])
    if args.markdown:
        print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
        print("\n".join("| " + " | ".join(l) + " |" for l in lines))
    else:
        widths = [max(len(h), *(len(l[i]) for l in lines)) for i, h in enumerate(header)]
        for row in [header] + lines:
            print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
    worst = picks["ratio"].max(skipna=False)
    ok = bool((picks["ratio"] <= args.limit).all())
    print(f"worst pick / fastest: {worst:.3f} ({'within' if ok else 'beyond'} {args.limit})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
