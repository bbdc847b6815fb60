"""report: one or more ringbench files -> DIR/report.md, DIR/*.png, DIR/report.json,
DIR/points.csv (ring attention) and DIR/points_<sweep>.csv (every sweep).

report.md leads with one screen: what ran and where, the headline numbers against the device
peaks (peaks.py, or --peaks), and the verdicts. Then a section per kind of result (ring
attention, cost model, collectives, point-to-point, compute, memory, contention), the status
and parity details, and an appendix with the machine and the configuration.

Several files (e.g. a scaling series at 1, 2, 4, ... ranks) are combined into one study:
points are matched by configuration and sequence length, and the ring size axis spans
every file. Failed, oom or parity-failed points are listed and drawn as red crosses, never
silently left out. Every number comes from results.py's frames, and report.json holds them.
"""
import json
import os

import numpy as np

from . import (contention, figures, fmt, headline, links, model, outfile, peaks as peaks_mod, plots, reader, results,
               schemes)
from . import doc, rows_csv, scheme_report

TITLE = "# ringbench report"

# Drawn whenever the files have ring attention, collectives, p2p or ping-pong points.
# The ring attention points' plots are named as the plots function that draws them.
EXPECTED_PLOTS = [(draw.__name__, title, draw, "points") for title, draw in (
    ("Throughput against ring size", plots.throughput),
    ("Strong scaling: speedup and efficiency", plots.strong_scaling),
    ("Weak scaling: scaled speedup and efficiency", plots.weak_scaling),
    ("Exposed communication fraction", plots.exposed_comm),
    ("Memory per rank", plots.memory),
    ("Efficiency over sequence length x ring size", plots.efficiency_heatmap),
    ("Per-rank spread (stragglers)", plots.rank_spread),
)] + [
    ("ring_timeline", "Per ring step: compute and exposed wait", figures.ring_timeline, "runs_ring"),
    ("ring_variance", "Per-iteration times", figures.ring_variance, "runs_ring"),
    ("bandwidth", "Bus bandwidth per collective", figures.collectives_busbw, "coll"),
    ("latency", "Small messages: time per operation", figures.latency_small, "coll_pp"),
    ("p2p_matrix", "Point-to-point bandwidth and latency", figures.p2p_heatmaps, "runs"),
    ("cost_model", "Cost model: prediction against measurement", plots.cost_model, "preds"),
]
# Drawn only when a sweep ran one problem under several schemes (no "not plotted" line else).
COMPARISON_PLOTS = [
    ("schemes", "Context-parallel schemes side by side", figures.scheme_times, "ring"),
]
# Drawn when the files have compute or memory sweeps.
PROFILE_PLOTS = [
    ("compute", "GEMM throughput against the device peak", figures.compute_rates, "compute"),
    ("memory_bandwidth", "Memory bandwidth against the peaks", figures.memory_rates, "memory_frame"),
]
SECTION_PLOTS = {"ring": ["throughput", "strong_scaling", "weak_scaling", "efficiency_heatmap",
                          "exposed_comm", "ring_timeline", "ring_variance", "rank_spread", "memory"],
                 "cost": ["cost_model"], "coll": ["bandwidth", "latency"], "p2p": ["p2p_matrix"],
                 "compute": ["compute"], "mem": ["memory_bandwidth"]}


def _parity_rows(runs):
    """[file, sweep, error, max, tolerance] per ring sweep and error metric (*_max_rel,
    *_max_abs: errors against the reference)."""
    rows = []
    for run in runs:
        for s in run.sweeps_of_type(reader.RING_TYPES):
            tol = reader.numbers(s.points["tolerance"]) if "tolerance" in s.points else np.array([])
            for c in s.scalar_metrics():
                if not (c.endswith("_max_rel") or c.endswith("_max_abs")):
                    continue
                vals = reader.numbers(s.metrics[c].ravel())
                vals = vals[np.isfinite(vals)]
                if len(vals):
                    tol_txt = f"{np.nanmin(tol):.3g}" if c.endswith("_rel") and len(tol) else "-"
                    rows.append([os.path.basename(run.path), s.name, c, f"{vals.max():.3g}", tol_txt])
    return rows


def _table(headers, rows):
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return out + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]


def _problems(runs, points):
    out = [f"{os.path.basename(run.path)}: {line}" for run in runs for line in run.problems()]
    for p in points:
        if not p["measured"]:
            cfg = f", {p['config_label']}" if p["config_label"] else ""
            out.append(f"{p['run']}: {p['sweep']} point {p['point']} (S={p['seq_len']}, ring size "
                       f"{p['ring_size']}{cfg}): status {p['status']}" + (f": {p['failure']}" if p["failure"] else ""))
    return out


def _frames(runs, points, peaks):
    ring = results.ring_frame(runs, points, peaks)
    cpoints = results.collective_points(runs)
    variants, skipped = results.collective_variants(cpoints, peaks)
    return {"ring": ring, "cpoints": cpoints, "variants": variants, "skipped": skipped,
            "pingpong": results.pingpong_points(runs), "p2p": results.p2p_frame(runs),
            "compute": results.compute_frame(runs, peaks), "memory": results.memory_frame(runs, peaks)}


def _draw(runs, points, preds, fr, out_dir, summary):
    """Every plot; {name: markdown lines} for the sections to place, reasons in not_plotted."""
    args = {"points": (points,), "runs": (runs,), "preds": (preds,), "runs_ring": (runs, fr["ring"]),
            "ring": (fr["ring"],),
            "coll": (fr["cpoints"], fr["variants"]), "coll_pp": (fr["cpoints"], fr["pingpong"]),
            "compute": (fr["compute"],), "memory_frame": (fr["memory"],)}
    plots.reset_colours()
    shown = {}
    for name, title, fn, what in EXPECTED_PLOTS + PROFILE_PLOTS + COMPARISON_PLOTS:
        try:
            path = fn(*args[what], out_dir)
        except plots.NoData as why:
            if (name, title, fn, what) not in COMPARISON_PLOTS:
                summary["not_plotted"][name] = str(why)
            continue
        summary["plots"][name] = os.path.basename(path)
        shown[name] = [f"![{title}]({os.path.basename(path)})", ""]
    return shown


def _section_plots(shown, summary, key, section=True):
    """The section's plots, and why the others are missing (when the section is shown)."""
    if not section:
        return []
    md = []
    for name in SECTION_PLOTS[key]:
        md += shown.get(name, [])
    missing = [f"{n}: {summary['not_plotted'][n]}" for n in SECTION_PLOTS[key] if n in summary["not_plotted"]]
    if missing:
        md += ["Not plotted: " + "; ".join(missing) + ".", ""]
    return md


class Report:
    """What both renderers show: the runs, the per-point table (model.point_table), the
    cost-model predictions, the result frames (results.py), summary (report.json) and the
    sections (doc.Section: report.md's blocks)."""

    def __init__(self, **parts):
        self.__dict__.update(parts)


def analyse(paths, out_dir, predict_sizes=(8, 64, 512), peaks_file=None, given_links=(),
            ranks_per_node=None):
    """Every number and section of the report, and the PNG plots in out_dir; writes no report.
    given_links: (class, model) pairs from --link; ranks_per_node: for the projections
    (default: the files' own)."""
    runs = reader.load_many(paths)
    os.makedirs(out_dir, exist_ok=True)
    override = peaks_mod.load_override(peaks_file) if peaks_file else None
    peaks, gpu_names = peaks_mod.for_runs(runs, override)
    points = model.point_table(runs)
    lk = links.links(runs, given_links)
    per_node = ranks_per_node or links.ranks_per_node(runs)
    preds = model.predictions(points, lk if any(lk.values()) else None, predict_sizes, per_node)
    fr = _frames(runs, points, peaks)
    summary = {"files": [_file_json(r) for r in runs], "points": [], "predictions": preds,
               "links": lk, "ranks_per_node": per_node, "plots": {}, "not_plotted": {}, "peaks": peaks,
               "gpu_names": gpu_names, "problems": _problems(runs, points)}
    shown = _draw(runs, points, preds, fr, out_dir, summary)
    contention_md = contention.report_section(runs, out_dir, summary)
    # Built in this order: each part may add to summary what a later one reads.
    parts = [("summary", _first_screen(runs, fr, summary, peaks, gpu_names)),
             ("ring", _ring_section(runs, points, fr["ring"], summary) + _section_plots(shown, summary, "ring")),
             ("schemes", _schemes_section(fr["ring"], shown, summary)),
             ("cost", _cost_section(lk, preds, per_node) + _section_plots(shown, summary, "cost")),
             ("scheme_model", _scheme_model_section(runs, predict_sizes, given_links, summary))]
    for key, fn, plot_key in (("collectives", _collectives_section, "coll"), ("p2p", _p2p_section, "p2p"),
                              ("compute", _compute_section, "compute"), ("memory", _memory_section, "mem")):
        part = fn(fr, summary)
        parts.append((key, part + _section_plots(shown, summary, plot_key, bool(part))))
    parts += [("contention", contention_md), ("plots", _plot_index(summary)),
              ("status", _status_section(runs, points, summary)), ("appendix", _appendix(runs))]
    return Report(runs=runs, points=points, preds=preds, frames=fr, summary=summary, out_dir=out_dir,
                  sections=doc.sections(parts))


def build(paths, out_dir, predict_sizes=(8, 64, 512), peaks_file=None, given_links=(),
          ranks_per_node=None, html=False):
    """report.md, report.json, the CSVs and the plots in out_dir (and report.html with html);
    returns report.json's content."""
    rep = analyse(paths, out_dir, predict_sizes, peaks_file, given_links, ranks_per_node)
    summary = rep.summary
    with outfile.replacing(os.path.join(out_dir, "report.md")) as f:
        f.write("\n".join([TITLE, ""] + doc.markdown(rep.sections)) + "\n")
    summary["csv"] = rows_csv.write(rep.runs, out_dir)
    with outfile.replacing(os.path.join(out_dir, "report.json")) as f:
        json.dump(_finite_json(summary), f, indent=1, default=_json_default, allow_nan=False)
    if html:
        from . import html_report  # plotly and jinja2 only where an HTML page is asked for
        html_report.write(rep, os.path.join(out_dir, "report.html"))
    return summary


def _file_json(run):
    done, other = run.completeness()
    return {"path": run.path, "status": run.status, "failure": run.failure,
            "world_size": run.world_size, "node_count": run.node_count,
            "backend": run.attrs.get("backend"), "gpu_names": run.gpu_names(), "hosts": run.hosts(),
            "start_time": run.attrs.get("start_time"), "ringbench_version": run.attrs.get("ringbench_version"),
            "git_commit": run.attrs.get("git_commit"), "completed_sweeps": done,
            "sweeps": [{"name": s.name, "type": s.type, "points": s.npoints, "status": s.status}
                       for s in run.sweeps.values()],
            "other_sweeps": [{"name": n, "status": s, "failure": f} for n, s, f in other]}


def _first_screen(runs, fr, summary, peaks, gpu_names):
    rows = (headline.ring_rows(fr["ring"]) + headline.collective_rows(fr["variants"])
            + headline.p2p_rows(fr["p2p"], fr["pingpong"])
            + headline.compute_memory_rows(fr["compute"], fr["memory"]))
    md = ["## Summary", "", "What ran, and where:", ""]
    md += headline.what_ran(runs, peaks, gpu_names)
    md += ["", "Headline numbers (each the slowest rank's; \"% of peak\" against the device peak, "
           "for collectives against the link's):", ""]
    md += headline.table(rows)
    parity = _parity_rows(runs)
    md += ["", "Verdicts:", ""]
    summary["untrustworthy"] = headline.untrustworthy(fr["ring"], rows)
    ring = fr["ring"]
    parity_off = int((ring["parity_mode"] == "off").sum()) if len(ring) and "parity_mode" in ring else 0
    md += headline.verdicts(summary["problems"], summary["untrustworthy"], parity, len(fr["skipped"]),
                            parity_off)
    md += headline.contention_lines(summary.get("contention", []))
    md += ["", "Details: ring attention, cost model, collectives, point-to-point, compute, memory, "
           "status and parity below; the machine, placement and configuration in the appendix.", ""]
    summary["headline"] = rows
    return md


CV_COLUMN = ("cv", "CV", lambda v: fmt.pct(100 * v))
RING_COLUMNS = [
    ("sweep", "sweep", None), ("seq_len", "S", None), ("ring_size", "R", None),
    ("scheme", "scheme", None),
    ("transport", "transport", None), ("mask", "mask", None), ("layout", "layout", None),
    ("kernel", "kernel", None), ("dtype", "dtype", None), ("status_md", "status", None),
    ("forward_ms", "fwd ms", fmt.ms), ("backward_ms", "bwd ms", fmt.ms),
    ("total_ms", "total ms", fmt.ms), ("tflops_fwd", "TFLOP/s/GPU fwd", fmt.tflops),
    ("tflops_bwd", "bwd", fmt.tflops), ("tflops_total", "total", fmt.tflops),
    ("pct_of_single_gpu", "% of 1 GPU", fmt.pct), ("pct_of_peak", "% of peak", fmt.pct),
    ("throughput_md", "throughput", None), ("strong_efficiency", "efficiency", fmt.num),
    ("exposed_wait_pct", "exposed wait", fmt.pct), ("hidden_md", "hidden % fwd/bwd", None),
    ("slowdown_md", "kernel x alone fwd/bwd", None), ("memory_md", "memory/rank", None),
    ("spread_md", "spread", None), CV_COLUMN,
    ("trust_md", "trust", None), ("file", "file", None)]


def _any_measured(*names):
    return lambda v: bool(v[list(names)].notna().to_numpy().any())


# Columns shown only where they tell points apart or were measured: the file with several
# files, the scheme (ulysses(G=2), ...) where points differ by it, the transport where the
# points used more than one, the overlap where a ring travelled.
RING_OPTIONAL = {"file": lambda v: v["file"].nunique() > 1,
                 "scheme": lambda v: "scheme" in v and v["scheme"].nunique() > 1,
                 "transport": lambda v: len(results.transports(v)) > 1,
                 "hidden_md": _any_measured("overlap_efficiency", "backward_overlap_efficiency"),
                 "slowdown_md": _any_measured("kernel_slowdown", "backward_kernel_slowdown")}
# Said above the table when its column is shown: the metric whose description the file has,
# and how the column reduces it over ranks.
RING_WORDS = (("transport", "transport", "rank 0's `transport`"),
              ("hidden_md", "overlap_efficiency", "the lowest rank's `overlap_efficiency` / "
               "`backward_overlap_efficiency`, in %"),
              ("slowdown_md", "kernel_slowdown", "the highest rank's `kernel_slowdown` / "
               "`backward_kernel_slowdown`"))


def _ring_columns(view):
    return [c for c in RING_COLUMNS if c[0] not in RING_OPTIONAL or RING_OPTIONAL[c[0]](view)]


def _overlap_lines(runs, cols):
    """What the transport and overlap columns are, in the file's own words (descriptions)."""
    heads = {c[0]: c[1] for c in cols}
    lines = [f"- {heads[col]} ({how}): {results.describe(runs, name)}"
             for col, name, how in RING_WORDS if col in heads]
    return ["Per point, in the file's words:", ""] + lines + [""] if lines else []


def _ring_section(runs, points, ring, summary):
    md = ["## Ring attention", ""]
    if not points:
        return md + ["No ring attention sweep in the input files.", ""]
    by = {(p["run"], p["sweep"], p["point"]): p for p in points}
    view = ring.sort_values(["sweep", "config", "seq_len", "ring_size", "file", "point"]).copy()
    pts = [by[(r.file, r.sweep, r.point)] for r in view.itertuples()]
    view["status_md"] = [p["status"] if p["measured"] else f"**{p['status']}**" for p in pts]
    view["throughput_md"] = [fmt.si(p["throughput"], "tok/s") for p in pts]
    view["memory_md"] = [fmt.si(p["memory"], "B") for p in pts]
    view["spread_md"] = [fmt.num(None if p["spread"] is None else (p["spread"] - 1) * 100, 3, "%") for p in pts]
    view["trust_md"] = [f"**{t}**" if t else "ok" for t in view["untrustworthy"]]
    view["hidden_md"] = [fmt.pair(f, b, lambda v: f"{100 * v:.1f}") for f, b in
                         zip(view["overlap_efficiency"], view["backward_overlap_efficiency"])]
    view["slowdown_md"] = [fmt.pair(f, b, lambda v: f"{v:.2f}") for f, b in
                           zip(view["kernel_slowdown"], view["backward_kernel_slowdown"])]
    factor = "/".join(f"{x:g}" for x in sorted({results.backward_factor(s) for run in runs
                                                   for s in run.sweeps_of_type(reader.RING_TYPES)}))
    md += ["Per point: time is the slowest rank's median iteration (forward + backward); TFLOP/s "
           f"per GPU is the mean FLOPs per rank (forward_flop; backward = {factor} x forward, the "
           "sweep's flop_convention) over the slowest rank's median time of that pass; \"% of 1 GPU\" "
           "compares with the same kernel and configuration at ring size 1; efficiency is strong scaling against the "
           "smallest ring size of the same S; exposed wait is the share of step time spent "
           "waiting for the next K/V block; spread is how much slower the slowest rank is than "
           f"the median rank; CV is between iterations (above {100 * results.CV_LIMIT:.0f} % flagged).", ""]
    configs = sorted({p["config_label"] for p in points if p["config_label"]})
    if configs:
        md += ["Configurations that differ between points: " + "; ".join(f"`{c}`" for c in configs) + ".", ""]
    cols = _ring_columns(view)
    md += _overlap_lines(runs, cols)
    md += fmt.md_table(view, cols) + [""]
    ring_by = {(r["file"], r["sweep"], r["point"]): r for r in fmt.records(ring)}
    for p in points:
        extra = ring_by.get((p["run"], p["sweep"], p["point"]), {})
        summary["points"].append({k: v for k, v in p.items() if k != "config"} | extra |
                                 {"config": {k: str(v) for k, v in p["config"].items()}})
    return md + _weak_table(points, summary)


def _schemes_section(ring, shown, summary):
    """Context-parallel schemes side by side, when a sweep ran one problem under several."""
    table = schemes.comparison(ring)
    summary["schemes"] = fmt.records(table)
    summary["ring_vs_fastest_scheme"] = schemes.ring_cost(table) if not table.empty else []
    return schemes.section_lines(table, shown.get("schemes", []))


def _scheme_model_section(runs, sizes, given_links, summary):
    """The per-scheme cost model (scheme_report.py), when a sweep ran several schemes."""
    result = scheme_report.evaluate(runs, sizes, given_links)
    summary["scheme_model"] = scheme_report.to_json(result)
    return scheme_report.section_lines(result)


def _weak_table(points, summary):
    weak = {k: v for k, v in model.series(points, "weak").items() if len(v) >= 2}
    summary["weak_scaling"] = [{"seq_len_per_rank": spr, "ring_size": r, "config": cfg, "scaled_speedup": sp,
                                "efficiency": e} for (cfg, spr), pts in sorted(weak.items())
                               for r, sp, e in model.scaling(pts, "weak")]
    if not weak:
        return []
    rows = [[x["seq_len_per_rank"], x["ring_size"], x["config"], fmt.num(x["scaled_speedup"]),
             fmt.num(x["efficiency"])] for x in summary["weak_scaling"]]
    return (["Weak scaling (same sequence length per rank; ideal efficiency 1):", ""]
            + _table(["seq len per rank", "ring size", "config", "scaled speedup", "efficiency"], rows) + [""])


def _link_line(cls, m):
    if m is None:
        return f"- {cls}-node: not measured (give one with --link {cls}=ALPHA,BETA)"
    fit = f", relative RMS error of the fit {m['rel_rms_error']:.2g}" if "rel_rms_error" in m else ""
    return (f"- {cls}-node: alpha = {fmt.time(m['alpha_s'])}, beta = {fmt.si(m['beta_Bps'], 'B/s')} "
            f"({m['source']}{fit})")


def _prediction_rows(pr):
    def pct(v):
        return f"{100 * v:+.1f}%" if v is not None else "-"
    rows = []
    for x in pr["measured"] + pr["extrapolated"]:
        measured = "measured_time" in x
        rows.append([x["ring_size"], x["nodes"], f"{x['link']}" + (" (stand-in)" if x["link_note"] else ""),
                     fmt.time(x["measured_time"]) if measured else "(not run)",
                     fmt.time(x["predicted_time"]), pct(x.get("error")),
                     fmt.time(x.get("measured_total_time")) if measured else "-",
                     fmt.time(x["predicted_total_time"]) if x["predicted_total_time"] else "-",
                     pct(x.get("total_error")), fmt.num(x["predicted_efficiency"]),
                     "comm" if x["comm_bound"] else "compute"])
    return rows


def _cost_section(lk, preds, per_node):
    md = ["## Cost-model prediction", ""]
    if not any(lk.values()):
        return md + ["No communication model: the files have no collectives sweep (sendrecv) and no "
                     "host_pingpong sweep to fit one from, and no --link was given.", ""]
    md += ["Ring-neighbour transfer t(m) = alpha + m/beta per link class (docs/cost-model.md):",
           _link_line("intra", lk.get("intra")), _link_line("inter", lk.get("inter")), "",
           f"Projected rings are placed node by node with {per_node} ranks per node "
           "(--ranks-per-node): a ring spanning n > 1 nodes crosses n node boundaries and "
           "its transfers take the inter-node link. Per ring step: step(R) = max(c(R), "
           "alpha + bytes(R)/beta) with c(R) = c(R0)(R0/R)^2 from the measured per-step compute "
           "at the smallest ring size R0; the backward is the same with its measured compute "
           "ratio and twice the bytes (K, V with dK, dV). Each pass is scaled by its measured "
           "to modelled ratio at R0; the errors at the other measured sizes are the model's own.", ""]
    if not preds:
        md += ["No prediction: the ring attention points lack per-step compute times or the "
               "sizes needed for the key/value block (batch, heads, head_dim, dtype).", ""]
    for pr in preds:
        err = (f"; the model's own error at the other measured sizes: forward "
               f"{100 * pr['model_error']:.1f}%" if pr["model_error"] is not None else "")
        if pr["model_total_error"] is not None:
            err += f", forward + backward {100 * pr['model_total_error']:.1f}%"
        md += [f"**S={pr['seq_len']}** ({pr['config'] or 'default config'}), base ring size "
               f"{pr['base_ring_size']}{err}:", ""]
        md += [f"**Warning**: {w}." for w in pr["warnings"]] + ([""] if pr["warnings"] else [])
        md += _table(["ring size", "nodes", "link", "measured fwd", "predicted fwd", "error",
                      "measured fwd+bwd", "predicted fwd+bwd", "error", "predicted efficiency",
                      "bound by"], _prediction_rows(pr)) + [""]
    return md


COLLECTIVE_COLUMNS = [
    ("operation", "operation", None), ("group", "group", None),
    ("group_size", "ranks/group", lambda v: fmt.num(int(v)) if not fmt.missing(v) else "-"),
    ("dtype", "dtype", None), ("variant", "variant", None),
    ("peak_busbw", "peak busbw", lambda v: fmt.si(v, "B/s")),
    ("peak_algbw", "algbw there", lambda v: fmt.si(v, "B/s")), ("at_size", "at size", fmt.size),
    ("pct_of_link", "% of link", fmt.pct), ("cv_at_peak", "CV", lambda v: fmt.pct(100 * v)),
    ("latency", "time at smallest", fmt.time), ("smallest_size", "smallest", fmt.size),
    ("wrong", "#wrong", fmt.num), ("trust", "trust", None), ("file", "file", None)]


def _collectives_section(fr, summary):
    v, skipped = fr["variants"], fr["skipped"]
    summary["collectives"] = fmt.records(v)
    summary["collective_points"] = fmt.records(fr["cpoints"])
    summary["one_rank_groups_skipped"] = fmt.records(skipped)
    if not len(fr["cpoints"]):
        return []
    md = ["## Collectives", "",
          "One row per operation, group, dtype and in-place variant: the peak bus bandwidth is "
          "the largest over message sizes of that variant's slowest-rank busbw (nccl-tests' "
          "definition); \"% of link\" is against NVLink's one-direction peak for groups within "
          "one node of a known GPU; CV is between iterations at the peak's size.", ""]
    if len(v):
        view = v.assign(variant=["in-place" if x else "out-of-place" for x in v["in_place"]],
                        trust=[f"**CV {100 * c:.0f} %**" if c > results.CV_LIMIT else
                               ("**wrong elements**" if w else "ok") for c, w in zip(v["cv_at_peak"], v["wrong"])])
        md += fmt.md_table(view, COLLECTIVE_COLUMNS) + [""]
    if len(skipped):
        groups = sorted(set(skipped["group"]))
        md += [f"Left out: {len(skipped)} variant(s) of the group(s) {', '.join(groups)} had one rank per "
               "group (e.g. inter_node on one node): their operations are local copies and measure no "
               "link, so they are in no table or plot (their points stay in the file and points CSV).", ""]
    return md


def _p2p_section(fr, summary):
    p2p, pp = fr["p2p"], fr["pingpong"]
    summary["p2p"] = fmt.records(p2p)
    summary["pingpong"] = fmt.records(pp)
    if not len(p2p) and not len(pp):
        return []
    md = ["## Point-to-point", ""]
    if len(p2p):
        md += ["p2p_matrix: each ordered pair alone (the slower rank of the pair); concurrent: "
               "every rank sending at once (the slowest rank).", ""]
        md += fmt.md_table(p2p, [
            ("sweep", "sweep", None), ("ranks", "ranks", None),
            ("bandwidth_min", "bandwidth min", lambda x: fmt.si(x, "B/s")),
            ("bandwidth_median", "median", lambda x: fmt.si(x, "B/s")),
            ("bandwidth_max", "max", lambda x: fmt.si(x, "B/s")),
            ("concurrent_min", "concurrent min", lambda x: fmt.si(x, "B/s")),
            ("latency_min", "latency min", fmt.time), ("latency_median", "median", fmt.time),
            ("latency_max", "max", fmt.time), ("file", "file", None)]) + [""]
    if len(pp):
        md += ["host_pingpong (one-way time of the slowest rank, its 25th-75th percentile over "
               "iterations, bandwidth of the slowest pair):", ""]
        md += fmt.md_table(pp, [
            ("sweep", "sweep", None), ("size", "message size", fmt.size), ("time", "one-way time", fmt.time),
            ("t_p25", "p25", fmt.time), ("t_p75", "p75", fmt.time),
            CV_COLUMN, ("bandwidth", "bandwidth", lambda x: fmt.si(x, "B/s")),
            ("file", "file", None)]) + [""]
    return md


def _rate_section(key, title, words, columns, view=lambda frame: frame):
    """The section of one rate frame (compute, memory): its records into the summary, and a
    table of `columns` then % of peak, CV and file, of view(frame), under `title` and `words`."""
    def section(fr, summary):
        frame = fr[key]
        summary[key] = fmt.records(frame)
        if not len(frame):
            return []
        tail = [("pct_of_peak", "% of peak", fmt.pct), CV_COLUMN, ("file", "file", None)]
        return [f"## {title}", "", words, ""] + fmt.md_table(view(frame), columns + tail) + [""]
    return section


_compute_section = _rate_section(
    "compute", "Compute",
    "Each rank runs every point at once; the rate is the slowest rank's (FLOPs / mean call time); "
    "\"% of peak\" is against the device's dense tensor-core peak for the dtype (none for host runs).",
    [("operation", "operation", None), ("engine", "engine", None), ("dtype", "dtype", None),
     ("size", "n / rows", fmt.num), ("tflops", "TFLOP/s", fmt.tflops), ("peak_tflops", "peak", fmt.tflops)])

_memory_section = _rate_section(
    "memory", "Memory",
    "The slowest rank's bandwidth (bytes / mean iteration). d2d counts each byte once: its HBM traffic "
    "is twice that, which is what \"% of peak\" compares with the HBM peak; host<->device copies compare "
    "with PCIe's one-direction peak; the host triad has no known peak.",
    [("kind", "kind", None), ("size", "size", fmt.size), ("bandwidth_md", "bandwidth", None),
     ("peak_md", "peak", None)],
    lambda m: m.assign(peak_md=[f"{n.replace('_GBps', '').upper()} {fmt.si(p, 'B/s')}" if n else "none known"
                                for n, p in zip(m["peak_name"], m["peak"])],
                       bandwidth_md=[fmt.si(b, "B/s") if st == "ok" else f"**{st}**"  # oom: no rank measured
                                     for b, st in zip(m["bandwidth"], m["status"])]))


def _plot_index(summary):
    """Every PNG of the report with its section, and why each missing plot is missing."""
    md = ["## Plots", "", "Every plot is shown in its section above; the files:", ""]
    md += [f"- [{f}]({f})" for f in summary["plots"].values()]
    if summary["not_plotted"]:
        md += ["", "Not plotted:", ""] + [f"- {n}: {why}" for n, why in summary["not_plotted"].items()]
    return md + [""]


def _status_section(runs, points, summary):
    md = ["## Status and parity", ""]
    problems = summary["problems"]
    if problems:
        md += ["**Not everything completed.** What did not:", ""] + [f"- {x}" for x in problems]
    else:
        md.append("Every run and sweep completed; every point has status ok.")
    md.append("")
    parity_rows = _parity_rows(runs)
    summary["parity"] = [dict(zip(["file", "sweep", "error", "max", "tolerance"], r)) for r in parity_rows]
    if parity_rows:
        md += ["Parity against the reference (largest over points and ranks):", ""]
        md += _table(["file", "sweep", "error", "max", "tolerance"], parity_rows) + [""]
    if points:
        by_status = {}
        for p in points:
            by_status[p["status"]] = by_status.get(p["status"], 0) + 1
        md += ["Ring attention points by status: "
               + ", ".join(f"{k}: {v}" for k, v in sorted(by_status.items())) + ".", ""]
        md += _parity_modes(points, summary)
    return md


def _parity_modes(points, summary):
    """How the ring points were checked: off is said in bold (never silent), sampled counted."""
    modes = {}
    for p in points:
        modes.setdefault(p.get("parity_mode") or "unknown", []).append(p)
    summary["parity_modes"] = {k: len(v) for k, v in modes.items()}
    md = ["Parity checked: " + ", ".join(f"{k}: {len(v)}" for k, v in sorted(modes.items()))
          + " point(s) (full: every element against the full-sequence reference; sampled: two heads "
          "and sampled rows per rank against the streamed reference).", ""]
    off = modes.get("off", [])
    if off:
        md += [f"**Parity off for {len(off)} ring point(s)** (validate.reference: off): their outputs "
               "and gradients were not checked against the reference:", ""]
        md += [f"- {p['run']} [{p['sweep']}] S={p['seq_len']} R={p['ring_size']}" for p in off[:10]]
        if len(off) > 10:
            md.append(f"- ... {len(off) - 10} more")
        md.append("")
    return md


def _appendix(runs):
    md = ["## Appendix: runs, machine and configuration", "", "### Runs", ""]
    rows = []
    for run in runs:
        done, _ = run.completeness()
        rows.append([os.path.basename(run.path), run.status, run.world_size, run.node_count,
                     run.attrs.get("backend", "?"), run.attrs.get("start_time", "?"),
                     run.attrs.get("ringbench_version", "?") + " " + str(run.attrs.get("git_commit", "")),
                     ", ".join(done) or "none"])
    md += _table(["file", "status", "ranks", "nodes", "backend", "start (UTC)", "version", "completed sweeps"], rows)
    md += ["", "### Machine", ""] + [f"- `{os.path.basename(r.path)}`: {r.machine_summary()}" for r in runs] + [""]
    big = max(runs, key=lambda r: r.world_size)
    rt = big.ranks
    if len(rt):
        cols = [c for c in ("rank", "hostname", "node_index", "local_rank", "gpu_index", "gpu_name",
                            "cpuset", "numa_node", "binding_policy") if c in rt]
        md += [f"Rank placement of the largest run (`{os.path.basename(big.path)}`):", ""]
        md += _table(cols, rt[cols].head(32).values.tolist())
        md += ([f"\n... {len(rt) - 32} more ranks in /ranks."] if len(rt) > 32 else []) + [""]
    md += ["### Configuration", ""]
    seen = []
    for run in runs:
        if run.config_text not in seen:
            seen.append(run.config_text)
            names = [os.path.basename(r.path) for r in runs if r.config_text == run.config_text]
            md += [f"Config of {', '.join(names)} ({run.attrs.get('config_file', '?')}):", "",
                   "```yaml", run.config_text.rstrip(), "```", ""]
    return md


def _finite_json(o):
    """NaN and infinities as null: report.json stays valid JSON for every reader."""
    if isinstance(o, dict):
        return {k: _finite_json(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite_json(v) for v in o]
    if isinstance(o, (float, np.floating)):
        return float(o) if np.isfinite(o) else None
    return o


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return None if not np.isfinite(o) else float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)
