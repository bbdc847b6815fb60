"""Context-parallel schemes side by side (docs/ring-attention.md, schemes): the ring
attention points of one sweep that differ only by `scheme` (same S, ring size, layout, mask,
dtype, kernel) form a comparison; per scheme its time, per-GPU rate, exposed communication,
bytes sent and memory, the fastest marked, and what running the ring costs against it.

    from ringbench_analysis import model, reader, results, schemes
    runs = reader.load_many(["cp.h5"])
    ring = results.ring_frame(runs, model.point_table(runs), peaks={})
    table = schemes.comparison(ring)      # one row per (problem, scheme)
    schemes.ring_cost(table)              # per problem: the ring's time / the fastest's
"""
import math

import pandas as pd

from . import fmt

# What makes two points the same problem under different schemes.
SAME_PROBLEM = ("file", "sweep", "seq_len", "ring_size", "layout", "mask", "dtype", "kernel")


def comparison(ring):
    """One row per (problem, scheme) where a problem was run under two or more schemes (or one
    scheme over two or more transports), in file order; columns: the problem's keys, scheme,
    total_ms, tflops_total, exposed_wait_pct, bytes_sent, memory, status, fastest (bool),
    vs_fastest (time / the fastest's: 1 = fastest)."""
    if ring is None or ring.empty or "scheme" not in ring:
        return pd.DataFrame()
    rows = []
    for _, g in ring.groupby(list(SAME_PROBLEM), sort=False):
        # A scheme run over several transports (transport: [nccl, copy_engine]) is a row per
        # transport, named "ulysses via copy_engine": rows that read alike would hide which is which.
        twice = g["scheme"].value_counts()
        names = [f"{r.scheme} via {r.transport}" if twice[r.scheme] > 1 and "transport" in g
                 else r.scheme for r in g.itertuples()]
        if len(set(names)) < 2:
            continue
        ok = g[g["measured"] & (g["status"] == "ok")]
        best = ok["total_ms"].min() if len(ok) else math.nan
        for r, name in zip(g.itertuples(), names):
            rows.append({k: getattr(r, k) for k in SAME_PROBLEM} |
                        {"scheme": name, "total_ms": r.total_ms, "tflops_total": r.tflops_total,
                         "exposed_wait_pct": r.exposed_wait_pct, "bytes_sent": r.bytes_sent,
                         "memory": r.memory, "status": r.status,
                         "fastest": bool(r.measured and r.status == "ok" and r.total_ms == best),
                         "vs_fastest": r.total_ms / best if best and math.isfinite(best) and r.measured else math.nan})
    return pd.DataFrame(rows)


def ring_cost(table):
    """Per problem: the ring's time over the fastest scheme's (1 = the ring is fastest)."""
    out = []
    for key, g in table.groupby(list(SAME_PROBLEM), sort=False):
        ring = g[g["scheme"].str.split(" via ").str[0] == "ring"]
        fastest = g[g["fastest"]]
        if len(ring) and len(fastest):
            out.append(dict(zip(SAME_PROBLEM, key)) | {"fastest": fastest.iloc[0]["scheme"],
                                                       "ring_vs_fastest": float(ring.iloc[0]["vs_fastest"])})
    return out


def section_lines(table, plot_lines=()):
    """The report's "Context-parallel schemes" subsection (Markdown), or [] without a comparison."""
    if table.empty:
        return []
    md = ["### Context-parallel schemes", "",
          "The same problem (S, ring size R, layout, mask, dtype, kernel) under each scheme: time is "
          "the slowest rank's median iteration (forward + backward), TFLOP/s per GPU as above, exposed "
          "communication the share of the time spent in the scheme's transfers, bytes sent and peak "
          "memory per rank (the slowest / largest rank). **Bold**: the fastest scheme that passed "
          "parity; \"x fastest\" = time / its time.", ""]
    view = table.copy()
    view["scheme_md"] = [f"**{r.scheme}**" if r.fastest else r.scheme for r in view.itertuples()]
    view["layout_md"] = view["layout"] + " " + view["mask"]
    md += fmt.md_table(view, [
        ("sweep", "sweep", None), ("seq_len", "S", None), ("ring_size", "R", None),
        ("layout_md", "layout", None), ("scheme_md", "scheme", None),
        ("total_ms", "time", lambda v: fmt.time(v / 1e3)), ("tflops_total", "TFLOP/s/GPU", fmt.tflops),
        ("exposed_wait_pct", "exposed comm", fmt.pct), ("bytes_sent", "sent/iteration", lambda v: fmt.si(v, "B")),
        ("memory", "memory/rank", lambda v: fmt.si(v, "B")), ("status", "status", None),
        ("vs_fastest", "x fastest", lambda v: fmt.num(v, 3))]) + [""]
    cost = ring_cost(table)
    if cost:
        worst = max(cost, key=lambda c: c["ring_vs_fastest"])
        slower = [c for c in cost if c["fastest"] != "ring"]
        md += [f"The ring is the fastest on {len(cost) - len(slower)} of {len(cost)} problem(s)"
               + (f"; elsewhere it takes up to x{worst['ring_vs_fastest']:.2f} the time of "
                  f"{worst['fastest']} ({worst['sweep']} S={worst['seq_len']} R={worst['ring_size']} "
                  f"{worst['layout']})." if slower else "."), ""]
    return md + list(plot_lines)
