#!/usr/bin/python3
"""Issue #26's targets, measured: reads the file of an inputs/ring_overlap.yaml run (and,
with --torch, launch/torch_cp.py's JSON from the same machine) and prints one line per
target and point with the measured value and pass/fail.

    launch/overlap_targets.py results/ring_overlap_*.h5 [--torch torch_cp.json] [--markdown]

  a  every ring point with R >= 2 at >= 8K tokens per GPU, per transport and kernel path:
     exposed wait <= 2 % of the forward and of the backward (exposed = the slowest rank's sum
     over ring steps of its waits, forward_wait_s, resp. backward_wait_s (files before schema
     4: step_wait_s, resp. backward_step_wait_s, summed), over the slowest rank's median
     forward_time_s, resp. backward_time_s; of the ranks the file keeps, the slowest first);
  b  per transport, kernel path, layout and mask, at the largest ring size: the per-GPU
     forward+backward rate (see `rate` below) >= 95 % of the same kernel path's
     and layout's ring-size-1 rate at 32K tokens per GPU, >= 90 % at 8K (the best ring-size-1
     point where there are several);
  c  with --torch: the ring at R = torch's world (4 on a 4-GPU node), per transport, cudnn
     path, at 8K tokens per GPU >= 1.15 x PyTorch context_parallel's `ring` (its total_tflops),
     non-causal and causal (ringbench's causal points: the zigzag layout); and R = 1 causal
     zigzag cudnn >= 97 % of torch's `local` causal at 8K and 32K.

rate: the mean FLOPs per rank over the slowest rank's median forward+backward time (each rank's
FLOPs: its total_tflops x its median time), as rb-analysis report and torch_cp.py count; a mean
of each rank's own rate would flatter a point whose ranks differ, against torch's slowest rank.
Tokens per GPU = points/seq_len / points/ring_size; the kernel path is rank 0's paths_ran
(kernel_path in files without it); the mask is the sweep's `causal` attribute (the point's
label where it has none). Only ring-scheme points count. A point that did not finish (status
other than ok) or a missing baseline fails its line.

Exit 0 when every line passes, 1 when one fails, 2 when the file is not such a run (no ring
attention sweep with the datasets read here, or no ring of 2 or more) or the --torch file is
not torch_cp.py's.
"""
import argparse
import json
import sys
from collections import namedtuple

import h5py
import numpy as np

EXPOSED_LIMIT = 0.02     # a: exposed wait / pass time
MIN_TOKENS = 8192        # a: from this many tokens per GPU
SCALING = {8192: 0.90, 32768: 0.95}  # b: tokens per GPU -> share of the ring-size-1 rate
TORCH_RING = 1.15        # c: ringbench's ring / torch's ring at TORCH_TOKENS
TORCH_TOKENS = 8192
TORCH_LOCAL = 0.97       # c: ringbench R = 1 / torch local, causal, at LOCAL_TOKENS
LOCAL_TOKENS = (8192, 32768)

# What this script reads of a ring_attention sweep (besides the points/ keys), and each rank's
# waits summed over the ring steps: schema 4's sums, else (older files) the steps.
NEEDED = ("points/seq_len", "points/ring_size", "forward_time_s", "backward_time_s", "total_tflops")
WAITS = (("forward_wait_s", "backward_wait_s"), ("step_wait_s", "backward_step_wait_s"))

Point = namedtuple("Point", "sweep seq_len ring_size tokens layout causal path transport status "
                            "fwd_exposed bwd_exposed rate")
Line = namedtuple("Line", "target what measured required ok")


def _text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def _rank_text(group, name, p):
    """The first rank's non-empty text of a [world, P] text metric ("" when absent)."""
    if name not in group:
        return ""
    return next((t for t in (_text(x) for x in group[name][:, p]) if t), "")


def _key(group, name, p, default=""):
    return _text(group["points"][name][p]) if name in group["points"] else default


def _exposed(wait, time):
    """The slowest rank's summed wait over the slowest rank's median time (wait [rows] of sums,
    or [rows, steps]; time [rows, iterations]); NaN where either is missing."""
    wait = np.asarray(wait, dtype=float).reshape(len(wait), -1)
    sums = [np.nansum(r) for r in wait if np.isfinite(r).any()]
    meds = [np.nanmedian(r) for r in time if np.isfinite(r).any()]
    return max(sums) / max(meds) if sums and meds and max(meds) > 0 else float("nan")


def _rate(rate, fwd, bwd):
    """Mean FLOPs per rank / the slowest rank's median fwd+bwd time (rate [rows], fwd and bwd
    [rows, iterations]); NaN where no rank has both."""
    rate = np.asarray(rate, dtype=float)
    med = np.array([np.nanmedian(t) if np.isfinite(t).any() else np.nan
                    for t in np.asarray(fwd, dtype=float) + np.asarray(bwd, dtype=float)])
    ok = np.isfinite(rate) & np.isfinite(med) & (med > 0)
    return float(np.mean(rate[ok] * med[ok]) / np.max(med[ok])) if ok.any() else float("nan")


def _causal(group, p):
    if "causal" in group.attrs:
        return bool(int(group.attrs["causal"]))
    return " causal " in f" {_key(group, 'label', p)} "


def _point(name, group, data, p):
    seq, ring = int(group["points/seq_len"][p]), int(group["points/ring_size"][p])
    return Point(sweep=name, seq_len=seq, ring_size=ring, tokens=seq // ring,
                 layout=_key(group, "layout", p), causal=_causal(group, p),
                 path=_rank_text(group, "paths_ran", p) or _rank_text(group, "kernel_path", p),
                 transport=_rank_text(group, "transport", p),
                 status=_rank_text(group, "status", p) or "ok",
                 fwd_exposed=_exposed(data["fwd_wait"][:, p], data["forward_time_s"][:, p]),
                 bwd_exposed=_exposed(data["bwd_wait"][:, p], data["backward_time_s"][:, p]),
                 rate=_rate(data["total_tflops"][:, p], data["forward_time_s"][:, p],
                            data["backward_time_s"][:, p]))


def _waits(group):
    """The sweep's (forward, backward) wait datasets: the sums or the steps; None without."""
    return next(((group[f], group[b]) for f, b in WAITS if f in group and b in group), None)


def _is_ring_sweep(group):
    return (isinstance(group, h5py.Group) and _text(group.attrs.get("type", "")) == "ring_attention"
            and all(n in group for n in NEEDED) and _waits(group) is not None)


def load(path):
    """The ring-scheme points of every ring_attention sweep of the file; None when it is not
    such a run."""
    try:
        f = h5py.File(path, "r")
    except OSError:
        return None
    with f:
        points = []
        for name, group in (f["sweeps"].items() if "sweeps" in f else []):
            if not _is_ring_sweep(group):
                continue
            data = {n: group[n][()] for n in NEEDED if not n.startswith("points/")}
            data["fwd_wait"], data["bwd_wait"] = (w[()] for w in _waits(group))
            for p in range(group["points/seq_len"].shape[0]):
                if _key(group, "scheme", p, "ring") == "ring":
                    points.append(_point(name, group, data, p))
    return points if any(pt.ring_size >= 2 for pt in points) else None


def load_torch(path):
    """torch_cp.py's points that finished, {(method, causal, tokens per GPU): point}; None
    when the file is not torch_cp.py's."""
    try:
        with open(path) as f:
            doc = json.load(f)
        return {(p["method"], bool(p["causal"]), int(p["tokens_per_gpu"])): p
                for p in doc["points"] if p.get("status", "ok") == "ok"}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def where(pt):
    mask = "causal" if pt.causal else "full"
    via = f" via {pt.transport}" if pt.ring_size > 1 and pt.transport else ""
    return (f"{pt.sweep} S={pt.seq_len} R={pt.ring_size} ({pt.tokens // 1024}K/GPU) "
            f"{pt.path} {pt.layout} {mask}{via}")


def _ratio(r, times):
    """A ratio as "x1.142" (times) or "94.97 %": enough digits that a miss never reads as the limit."""
    return f"x{r:.3f}" if times else f"{100 * r:.2f} %"


def _ratio_line(target, what, value, base, limit, times=False):
    """A line for value / base >= limit, rates in TFLOP/s (a missing value or base fails)."""
    need = ">= " + (f"x{limit:g}" if times else f"{100 * limit:g} %")
    if not (np.isfinite(value) and base and np.isfinite(base)):
        return Line(target, what, "no measurement" if base else "no baseline", need, False)
    r = value / base
    return Line(target, what, f"{value:.1f} / {base:.1f} TFLOP/s = {_ratio(r, times)}", need, r >= limit)


def exposed_lines(points):
    """a: every ring point with R >= 2 at >= MIN_TOKENS per GPU, forward and backward."""
    lines = []
    for pt in points:
        if pt.ring_size < 2 or pt.tokens < MIN_TOKENS:
            continue
        for name, v in (("forward", pt.fwd_exposed), ("backward", pt.bwd_exposed)):
            ok = pt.status == "ok" and np.isfinite(v) and v <= EXPOSED_LIMIT
            said = f"{100 * v:.2f} %" if pt.status == "ok" else f"status {pt.status}"
            lines.append(Line("a", f"{where(pt)}, {name}", said, f"<= {100 * EXPOSED_LIMIT:g} %", ok))
    return lines


def single_gpu_rates(points):
    """{(path, layout, causal, tokens): the best ring-size-1 rate} of the points that finished."""
    base = {}
    for pt in points:
        if pt.ring_size == 1 and pt.status == "ok" and np.isfinite(pt.rate):
            k = (pt.path, pt.layout, pt.causal, pt.tokens)
            base[k] = max(base.get(k, 0.0), pt.rate)
    return base


def scaling_lines(points):
    """b: at the largest ring size of each (path, layout, mask, transport), against R = 1."""
    base = single_gpu_rates(points)
    groups = {}
    for pt in points:
        if pt.ring_size >= 2:
            groups.setdefault((pt.path, pt.layout, pt.causal, pt.transport), []).append(pt)
    lines = []
    for pts in groups.values():
        rmax = max(pt.ring_size for pt in pts)
        for pt in pts:
            if pt.ring_size == rmax and pt.tokens in SCALING:
                rate = pt.rate if pt.status == "ok" else float("nan")
                b = base.get((pt.path, pt.layout, pt.causal, pt.tokens))
                lines.append(_ratio_line("b", f"{where(pt)} / R=1", rate, b, SCALING[pt.tokens]))
    return lines


def _torch_line(what, pt, ref, limit, times):
    rate = pt.rate if pt is not None and pt.status == "ok" else float("nan")
    line = _ratio_line("c", what, rate, float(ref["total_tflops"]) if ref else None, limit, times)
    return line if ref else line._replace(measured="no torch_cp.py point")


def torch_lines(points, torch):
    """c: the ring against torch's ring at TORCH_TOKENS (non-causal, causal zigzag), per
    transport; R = 1 causal zigzag against torch's local at LOCAL_TOKENS."""
    lines = []
    for causal in (False, True):
        ref = torch.get(("ring", causal, TORCH_TOKENS))
        ring = ref["world"] if ref else 4
        mine = [pt for pt in points if pt.ring_size == ring and pt.path == "cudnn" and pt.causal == causal
                and pt.tokens == TORCH_TOKENS and (not causal or pt.layout == "zigzag")]
        what = f"R={ring} cudnn {'causal zigzag' if causal else 'full'} {TORCH_TOKENS // 1024}K/GPU"
        for pt in mine or [None]:
            lines.append(_torch_line(f"{where(pt) if pt else what} / torch ring", pt, ref, TORCH_RING, True))
    for tokens in LOCAL_TOKENS:
        ref = torch.get(("local", True, tokens))
        mine = [pt for pt in points if pt.ring_size == 1 and pt.path == "cudnn" and pt.causal
                and pt.layout == "zigzag" and pt.tokens == tokens]
        for pt in mine or [None]:
            what = where(pt) if pt else f"R=1 cudnn causal zigzag {tokens // 1024}K/GPU"
            lines.append(_torch_line(f"{what} / torch local", pt, ref, TORCH_LOCAL, False))
    return lines


def render(lines, markdown):
    head = ("target", "point", "measured", "required", "verdict")
    rows = [(ln.target, ln.what, ln.measured, ln.required, "pass" if ln.ok else "FAIL") for ln in lines]
    if markdown:
        return ["| " + " | ".join(r) + " |" for r in [head, ("---",) * len(head)] + rows]
    width = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, width)).rstrip() for r in [head] + rows]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("file", help="the HDF5 file of an inputs/ring_overlap.yaml run")
    p.add_argument("--torch", help="launch/torch_cp.py's JSON from the same machine (target c)")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = p.parse_args(argv)
    points = load(args.file)
    if points is None:
        print(f"{args.file}: not a ring_overlap run (no ring attention sweep with "
              f"{', '.join(NEEDED)} and a ring of 2 or more)", file=sys.stderr)
        return 2
    torch = load_torch(args.torch) if args.torch else {}
    if torch is None:
        print(f"{args.torch}: not a launch/torch_cp.py JSON (points with method, causal, "
              "tokens_per_gpu, total_tflops)", file=sys.stderr)
        return 2
    lines = exposed_lines(points) + scaling_lines(points) + (torch_lines(points, torch) if args.torch else [])
    print("\n".join(render(lines, args.markdown)))
    failed = sum(not ln.ok for ln in lines)
    print(f"\n{len(lines)} lines: {failed} fail. a: exposed wait <= 2 % of each pass (R >= 2, "
          ">= 8K tokens/GPU); b: per-GPU rate at the largest ring >= 90 % (8K) / 95 % (32K) of "
          "R = 1" + ("; c: >= x1.15 torch's ring at 8K, R = 1 >= 97 % of torch's local" if args.torch else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
