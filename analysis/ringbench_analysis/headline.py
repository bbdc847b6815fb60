"""The report's first screen: what ran and where, the headline numbers against the device
peaks, and the verdicts (what failed, which numbers are not to be trusted)."""
import os

import numpy as np
import pandas as pd

from . import fmt
from .results import CV_LIMIT, transports


def _n(count, word):
    return f"{count} {word}" + ("" if count == 1 else "s")


def what_ran(runs, peaks, gpu_names):
    """Lines: one per file (ranks, nodes, GPU, backend, when, version, sweeps), then the peaks."""
    lines = []
    for run in runs[:4]:
        gpus = run.gpu_names()
        sweeps = ", ".join(f"{s.name} ({s.type}, {_n(s.npoints, 'point')})" for s in run.sweeps.values())
        hosts = run.hosts()
        lines.append(f"- `{os.path.basename(run.path)}`: **{_n(run.world_size, 'rank')} on "
                     f"{_n(run.node_count, 'node')}** ({', '.join(hosts[:2])}{' ...' if len(hosts) > 2 else ''}), "
                     f"**{', '.join(gpus) if gpus else 'no GPU (host path)'}**, backend "
                     f"{run.attrs.get('backend', '?')}, started {run.attrs.get('start_time', '?')}, "
                     f"ringbench {run.attrs.get('ringbench_version', '?')} ({run.attrs.get('git_commit', '?')}), "
                     f"status {run.status}. Sweeps: {sweeps or 'none'}.")
    if len(runs) > 4:
        lines.append(f"- ... and {len(runs) - 4} more files (appendix).")
    if peaks:
        t = ", ".join(f"{k} {v:g}" for k, v in peaks["tflops"].items())
        links = ", ".join(f"{name} {peaks[k]:g} GB/s" for k, name in
                          (("hbm_GBps", "HBM"), ("nvlink_GBps", "NVLink per direction"),
                           ("pcie_GBps", "PCIe per direction")) if peaks.get(k))
        lines.append(f"- Device peaks: **{peaks['model']}** ({peaks['source']}): dense TFLOP/s {t}; {links}.")
    else:
        why = (f"unknown GPU ({', '.join(gpu_names)}): give its peaks with --peaks PEAKS.yaml"
               if gpu_names else "a host run: no device peak is known for CPUs and host memory")
        lines.append(f"- Device peaks: none ({why}); \"% of peak\" columns are empty.")
    return lines


def _row(what, value, pct, where, flag=""):
    return {"result": what, "value": value, "pct_of_peak": pct, "where": where, "flag": flag}


def ring_rows(ring):
    rows = []
    m = ring[ring["measured"] & ring["tflops_total"].notna()] if len(ring) else ring
    if m.empty:
        return rows
    best = m.loc[m["tflops_total"].idxmax()]
    via = len(transports(ring)) > 1  # which transport, where the points compare them
    rows.append(_ring_row("ring attention, best point", best, via))
    rmax = m["ring_size"].max()
    if rmax > 1:
        at = m[m["ring_size"] == rmax]
        top = at.loc[at["tflops_total"].idxmax()]
        if top.name != best.name:
            rows.append(_ring_row(f"ring attention at the largest ring (R={rmax})", top, via))
        else:
            rows[0]["result"] = f"ring attention, best point (also the best at the largest ring, R={rmax})"
    return rows


def _ring_row(what, r, via=False):
    single = (f", {fmt.pct(r['pct_of_single_gpu'])} of 1 GPU" if r["ring_size"] > 1
              and not fmt.missing(r["pct_of_single_gpu"]) else "")
    value = (f"{fmt.tflops(r['tflops_total'])} TFLOP/s per GPU fwd+bwd ({fmt.tflops(r['tflops_fwd'])} fwd), "
             f"{fmt.ms(r['total_ms'])} ms per iteration{single}")
    where = f"{r['sweep']} S={r['seq_len']} R={r['ring_size']} {r['layout']} {r['kernel']} {r['dtype']}"
    scheme = r.get("scheme", "ring")
    if isinstance(scheme, str) and scheme not in ("", "ring"):  # the best point of a scheme sweep
        where += f" scheme {scheme}"
    if via and r.get("transport"):
        where += f" via {r['transport']}"
    return _row(what, value, r["pct_of_peak"], where, r["untrustworthy"])


def collective_rows(variants):
    rows = []
    if variants is None or variants.empty:
        return rows
    for op, g in variants.groupby("operation", sort=False):
        shown = g[~g["same_as_world"]] if "same_as_world" in g and (~g["same_as_world"]).any() else g
        b = shown.loc[shown["peak_busbw"].idxmax()]
        ranks = "" if fmt.missing(b["group_size"]) else f" ({int(b['group_size'])} ranks)"
        where = (f"{b['group']}{ranks} {b['dtype']} "
                 f"{'in-place' if b['in_place'] else 'out-of-place'} at {fmt.size(b['at_size'])}")
        flag = f"CV {100 * b['cv_at_peak']:.0f} %" if b["cv_at_peak"] > CV_LIMIT else ""
        if b["wrong"]:
            flag = (flag + "; " if flag else "") + f"{b['wrong']} wrong elements"
        rows.append(_row(f"{op} peak busbw", fmt.si(b["peak_busbw"], "B/s"), b["pct_of_link"], where, flag))
    return rows


def p2p_rows(p2p, pingpong):
    rows = []
    for r in (p2p.to_dict("records") if len(p2p) else []):
        if not fmt.missing(r.get("bandwidth_median")):
            rows.append(_row("p2p pair bandwidth", f"median {fmt.si(r['bandwidth_median'], 'B/s')} "
                             f"(slowest pair {fmt.si(r['bandwidth_min'], 'B/s')})", np.nan,
                             f"{r['sweep']}, {r['ranks']} ranks, {fmt.size(r['bandwidth_bytes'])}"))
        if not fmt.missing(r.get("latency_median")):
            rows.append(_row("p2p latency", f"median {fmt.time(r['latency_median'])} "
                             f"(slowest pair {fmt.time(r['latency_max'])})", np.nan,
                             f"{r['sweep']}, {fmt.size(r['latency_bytes'])} messages"))
    if len(pingpong):
        lo, hi = pingpong.loc[pingpong["size"].idxmin()], pingpong.loc[pingpong["size"].idxmax()]
        rows.append(_row("host ping-pong", f"{fmt.time(lo['time'])} one way at {fmt.size(lo['size'])}, "
                         f"{fmt.si(hi['bandwidth'], 'B/s')} at {fmt.size(hi['size'])}", np.nan, lo["sweep"]))
    return rows


def compute_memory_rows(compute, memory):
    rows = []
    if len(compute):
        for (op, dt), g in compute.groupby(["operation", "dtype"], sort=False):
            b = g.loc[g["tflops"].idxmax()]
            rows.append(_row(f"{op} {dt}", f"{fmt.tflops(b['tflops'])} TFLOP/s", b["pct_of_peak"],
                             f"{b['engine']} n={b['size']}",
                             f"CV {100 * b['cv']:.0f} %" if b["cv"] > CV_LIMIT else ""))
    for r in (memory.to_dict("records") if len(memory) else []):
        rows.append(_row(f"memory {r['kind']}", fmt.si(r["bandwidth"], "B/s"), r["pct_of_peak"],
                         f"{fmt.size(r['size'])}" + (" (HBM traffic = 2x the copy)" if r["kind"] == "d2d" else ""),
                         f"CV {100 * r['cv']:.0f} %" if r["cv"] > CV_LIMIT else ""))
    return rows


def table(rows):
    df = pd.DataFrame(rows)
    if df.empty:
        return ["No ring attention, collective, p2p, compute or memory result in the files."]
    df["flag"] = df["flag"].map(lambda f: f"**untrustworthy: {f}**" if f else "")
    return fmt.md_table(df, [("result", "result", None), ("value", "value", None),
                             ("pct_of_peak", "% of peak", fmt.pct), ("where", "where", None),
                             ("flag", "trust", None)])


def untrustworthy(ring, rows):
    """'what: why' for every ring point and headline number flagged untrustworthy."""
    flagged = ring[ring["untrustworthy"] != ""] if len(ring) else ring
    bad = [f"{r.sweep} S={r.seq_len} R={r.ring_size} {r.layout}: {r.untrustworthy}" for r in flagged.itertuples()]
    return bad + [f"{r['result']}: {r['flag']}" for r in rows if r["flag"] and not r["result"].startswith("ring")]


def verdicts(problems, bad, parity_rows, skipped_groups, parity_off=0):
    """Bullets: failures first, then untrustworthy numbers, then what was left out."""
    out = []
    if parity_off:
        out.append(f"- **Parity off for {parity_off} ring point(s)** (validate.reference: off): "
                   "their results were not checked against the reference.")
    if problems:
        out.append(f"- **FAILED: {len(problems)} problem(s)** (all under \"Status and parity\"):")
        out += [f"  - {p}" for p in problems[:5]]
        if len(problems) > 5:
            out.append(f"  - ... {len(problems) - 5} more")
    else:
        out.append("- Every run, sweep and point completed" +
                   (f"; parity passed on every {'checked ' if parity_off else ''}ring point "
                    f"({len(parity_rows)} error metrics checked)." if parity_rows else "."))
    if bad:
        out.append(f"- **Untrustworthy ({len(bad)})**: CV above {100 * CV_LIMIT:.0f} % between iterations, "
                   "efficiency above 1 or above the device peak:")
        out += [f"  - {b}" for b in bad[:6]]
        if len(bad) > 6:
            out.append(f"  - ... {len(bad) - 6} more (flagged in the tables below)")
    if skipped_groups:
        out.append(f"- Left out of every bandwidth number: {skipped_groups} collective variant(s) of "
                   "one-rank groups (local copies, no link measured).")
    return out


def contention_lines(found, limit=4):
    """The contention sweeps' verdicts where a binding changed something beyond noise."""
    if not found:
        return []
    verdicts = [v for c in found for v in c.get("verdicts", [])]
    judged = [v for v in verdicts if v.get("helped") is not None]  # None: no verdict, v["why"]
    changed = [v["sentence"] for v in judged if v.get("time") != "same" or v.get("cv") != "same"]
    parts = []
    if len(judged) < len(verdicts):
        why = "; ".join(w for w in dict.fromkeys(v.get("why") for v in verdicts
                                                 if v.get("helped") is None) if w)
        parts.append(f"{len(verdicts) - len(judged)} without a verdict" + (f" ({why})" if why else "")
                     + ("" if judged else "."))
    if judged:
        parts.append(f"{len(changed)} beyond noise:" if changed else
                     "no binding changed time or CV beyond noise.")
    out = [f"- Contention: {len(verdicts)} verdict(s) (binding policy x workload); " + "; ".join(parts)]
    out += [f"  - {x}" for x in changed[:limit]]
    if len(changed) > limit:
        out.append(f"  - ... {len(changed) - limit} more under \"Contention\"")
    return out
