#!/usr/bin/python3
"""Write the ring-program check of a tuned kernel policy (docs/tuning.md, "Check the gain").

    launch/tuning_compare.py inputs/tuning.yaml --policy tuned_h200.yaml > compare.yaml
    mpirun -np 1 build/ringbench compare.yaml
    launch/tuning_gain.py results/tuning_compare_*.h5

For every shape group of the tuning grid (head dim x causal x dilation) it writes four
ring_attention sweeps at ring size 1 over the grid's block rows: kernel flash, kernel cudnn,
kernel auto with the built-in rule, and kernel auto following the policy; plus one LongNet
config with every dilated branch of the grid at once (built-in and tuned). Same layout
(contiguous) and heads as the tuning sweep, so each block call is a shape the tuning measured.
"""
import argparse
import sys

import yaml


class _PlainDumper(yaml.SafeDumper):
    """Writes repeated lists out in full: the config reads better without YAML aliases."""

    def ignore_aliases(self, data):
        return True


def tuning_sweep(path):
    with open(path) as f:
        doc = yaml.safe_load(f)
    sweeps = [s for s in doc.get("sweeps", []) if s.get("type") == "kernel_tuning"]
    if len(sweeps) != 1:
        sys.exit(f"{path}: expected one kernel_tuning sweep, found {len(sweeps)}")
    return sweeps[0]


def as_list(v):
    return v if isinstance(v, list) else [v]


def dilation_name(d):
    return "dense" if d == "none" else f"w{d[0]}r{d[1]}"


def ring_sweep(name, grid, rows, head_dim, causal, dilation, kernel, policy, args):
    s = {"type": "ring_attention", "name": name, "batch": grid.get("batch", 1),
         "seq_lengths": rows, "num_heads": grid.get("num_heads", 8), "head_dim": head_dim,
         "dtype": as_list(grid.get("dtype", "bf16"))[0], "causal": causal,
         "layout": "contiguous", "ring_sizes": [1], "warmup": args.warmup,
         "iterations": args.iterations, "backward": True, "kernel": kernel}
    if dilation != "none":
        s["segment_lengths"] = [d[0] for d in dilation]
        s["dilation_rates"] = [d[1] for d in dilation]
    if policy:
        s["kernel_policy"] = policy
    return s


def variants(base, grid, rows, hd, causal, dilation, args):
    out = []
    for label, kernel, policy in (("flash", "flash", None), ("cudnn", "cudnn", None),
                                  ("builtin", "auto", None), ("tuned", "auto", args.policy)):
        if label in ("flash", "cudnn") and dilation != "none" and len(dilation) > 1:
            continue  # the LongNet mix: only auto's two rules are compared
        out.append(ring_sweep(f"{base}_{label}", grid, rows, hd, causal, dilation, kernel,
                              policy, args))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("tuning_yaml")
    p.add_argument("--policy", required=True, help="policy file, relative to the written config")
    p.add_argument("--iterations", type=int, default=12)
    p.add_argument("--warmup", type=int, default=3)
    args = p.parse_args()
    grid = tuning_sweep(args.tuning_yaml)
    all_rows = as_list(grid["block_rows"])
    dilations = grid.get("dilations", ["none"])
    sweeps = []
    for hd in as_list(grid.get("head_dims", 64)):
        for causal in as_list(grid.get("causal", False)):
            tag = f"d{hd}_{'causal' if causal else 'full'}"
            for d in dilations:
                rows = [r for r in all_rows if d == "none" or (r >= d[0] and r % d[0] == 0)]
                sweeps += variants(f"{tag}_{dilation_name(d)}", grid, rows, hd, causal,
                                   d if d == "none" else [d], args)
            branches = [d for d in dilations if d != "none"]
            if len(branches) > 1:
                top = max(b[0] for b in branches)
                rows = [r for r in all_rows if r >= top and r % top == 0]
                sweeps += variants(f"{tag}_longnet", grid, rows, hd, causal, branches, args)
    doc = {"run": {"name": "tuning_compare", "output_dir": "results"}, "backend": "cuda",
           "binding": {"policy": "gpu-near"}, "sweeps": sweeps}
    print("# Written by launch/tuning_compare.py from " + args.tuning_yaml + "; see docs/tuning.md")
    yaml.dump(doc, sys.stdout, Dumper=_PlainDumper, sort_keys=False, default_flow_style=None,
              width=100)


if __name__ == "__main__":
    main()
