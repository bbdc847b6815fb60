"""report: one or more ringbench files -> DIR/report.md, DIR/*.png, DIR/report.json, DIR/points.csv.

Several files (e.g. a scaling series at 1, 2, 4, ... ranks) are combined into one study:
points are matched by configuration and sequence length, and the ring size axis spans
every file. Failed, oom or parity-failed points are listed and drawn as red crosses, never
silently left out.
"""
import json
import math
import os

import numpy as np

from . import contention, model, plots, reader

EXPECTED_PLOTS = [
    ("throughput", "Throughput against ring size", plots.throughput, "points"),
    ("strong_scaling", "Strong scaling: speedup and efficiency", plots.strong_scaling, "points"),
    ("weak_scaling", "Weak scaling: scaled speedup and efficiency", plots.weak_scaling, "points"),
    ("exposed_comm", "Exposed communication fraction", plots.exposed_comm, "points"),
    ("memory", "Memory per rank", plots.memory, "points"),
    ("efficiency_heatmap", "Efficiency over sequence length x ring size", plots.efficiency_heatmap, "points"),
    ("rank_spread", "Per-rank spread (stragglers)", plots.rank_spread, "points"),
    ("bandwidth", "Bandwidth per collective and group", plots.bandwidth_curves, "runs"),
    ("p2p_matrix", "Point-to-point matrix", plots.p2p_matrix, "runs"),
    ("cost_model", "Cost model: prediction against measurement", plots.cost_model, "preds"),
]


def _fmt(v, unit="", digits=4):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}g}{unit}"
    return f"{v}{unit}"


def _si(v, unit):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    for f, p in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= f:
            return f"{v / f:.3g} {p}{unit}"
    return f"{v:.3g} {unit}"


def _time(v):
    if v is None:
        return "-"
    if v >= 1:
        return f"{v:.3g} s"
    if v >= 1e-3:
        return f"{v * 1e3:.3g} ms"
    return f"{v * 1e6:.3g} us"


def _table(headers, rows):
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return out


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


def build(paths, out_dir, predict_sizes=(8, 64, 512)):
    runs = reader.load_many(paths)
    os.makedirs(out_dir, exist_ok=True)
    points = model.point_table(runs)
    comm = model.ring_comm_model(runs)
    preds = model.predictions(points, comm, predict_sizes)
    md = ["# ringbench report", ""]
    summary = {"files": [], "points": [], "predictions": preds, "comm_model": comm,
               "plots": {}, "not_plotted": {}, "problems": []}

    # ---- inputs, machine, status ----
    md += ["## Runs", ""]
    rows = []
    for run in runs:
        done, other = run.completeness()
        rows.append([os.path.basename(run.path), run.status, run.world_size, run.node_count,
                     run.attrs.get("backend", "?"), run.attrs.get("start_time", "?"),
                     run.attrs.get("ringbench_version", "?") + " " + str(run.attrs.get("git_commit", "")),
                     ", ".join(done) or "none"])
        summary["files"].append({"path": run.path, "status": run.status, "failure": run.failure,
                                 "world_size": run.world_size, "node_count": run.node_count,
                                 "backend": run.attrs.get("backend"), "completed_sweeps": done,
                                 "other_sweeps": [{"name": n, "status": s, "failure": f}
                                                  for n, s, f in other]})
    md += _table(["file", "status", "ranks", "nodes", "backend", "start (UTC)", "version", "completed sweeps"], rows)
    md.append("")
    problems = []
    for run in runs:
        for line in run.problems():
            problems.append(f"{os.path.basename(run.path)}: {line}")
    bad_points = [p for p in points if not p["measured"]]
    for p in bad_points:
        cfg = f", {p['config_label']}" if p["config_label"] else ""
        problems.append(f"{p['run']}: {p['sweep']} point {p['point']} (S={p['seq_len']}, ring size "
                        f"{p['ring_size']}{cfg}): status {p['status']}"
                        + (f": {p['failure']}" if p["failure"] else ""))
    summary["problems"] = problems
    md += ["## Status and parity", ""]
    if problems:
        md.append("**Not everything completed.** What did not:")
        md.append("")
        md += [f"- {x}" for x in problems]
    else:
        md.append("Every run and sweep completed; every point has status ok.")
    md.append("")
    parity_rows = _parity_rows(runs)
    if parity_rows:
        md.append("Parity against the reference (largest over points and ranks):")
        md.append("")
        md += _table(["file", "sweep", "error", "max", "tolerance"], parity_rows)
        md.append("")
    if points:
        by_status = {}
        for p in points:
            by_status[p["status"]] = by_status.get(p["status"], 0) + 1
        md.append("Ring attention points by status: "
                  + ", ".join(f"{k}: {v}" for k, v in sorted(by_status.items())) + ".")
        md.append("")

    md += ["## Machine", ""]
    for run in runs:
        md.append(f"- `{os.path.basename(run.path)}`: {run.machine_summary()}")
    md.append("")
    big = max(runs, key=lambda r: r.world_size)
    rt = big.ranks
    if len(rt):
        cols = [c for c in ("rank", "hostname", "node_index", "local_rank", "gpu_index", "gpu_name",
                            "cpuset", "numa_node", "binding_policy") if c in rt]
        md.append(f"Rank placement of the largest run (`{os.path.basename(big.path)}`):")
        md.append("")
        md += _table(cols, rt[cols].head(32).values.tolist())
        if len(rt) > 32:
            md.append(f"\n... {len(rt) - 32} more ranks in /ranks.")
        md.append("")

    md += ["## Configuration", ""]
    seen = []
    for run in runs:
        if run.config_text not in seen:
            seen.append(run.config_text)
            names = [os.path.basename(r.path) for r in runs if r.config_text == run.config_text]
            md.append(f"Config of {', '.join(names)} ({run.attrs.get('config_file', '?')}):")
            md += ["", "```yaml", run.config_text.rstrip(), "```", ""]

    # ---- ring attention ----
    md += ["## Ring attention", ""]
    if not points:
        md += ["No ring attention sweep in the input files.", ""]
    else:
        strong = model.series(points, "strong")
        eff = {}
        for (cfg, seq), pts in strong.items():
            for r, sp, e in model.scaling(pts, "strong"):
                eff[(cfg, seq, r)] = (sp, e)
        rows = []
        for p in sorted(points, key=lambda p: (p["config_label"], p["seq_len"] or 0, p["ring_size"], p["run"])):
            sp, e = eff.get((p["config_label"], p["seq_len"], p["ring_size"]), (None, None))
            if not p["measured"]:
                sp = e = None
            rows.append([p["seq_len"], p["ring_size"], p["config_label"], p["status"] if p["measured"]
                         else f"**{p['status']}**", _time(p["time"]), _si(p["throughput"], "tok/s"),
                         _fmt(sp), _fmt(e), _fmt(None if p["exposed_comm"] is None else 100 * p["exposed_comm"], "%", 3),
                         _si(p["memory"], "B"), _fmt(None if p["spread"] is None else (p["spread"] - 1) * 100, "%", 3),
                         p["run"]])
            summary["points"].append({k: v for k, v in p.items() if k != "config"} |
                                     {"config": {k: str(v) for k, v in p["config"].items()},
                                      "strong_speedup": sp, "strong_efficiency": e})
        md.append("Time is the slowest rank's median time per iteration; throughput is tokens per "
                  "second for the whole ring; speedup and efficiency are strong scaling against the "
                  "smallest ring size of the same sequence length; spread is how much slower the "
                  "slowest rank is than the median rank.")
        md.append("")
        md += _table(["seq len", "ring size", "config", "status", "time", "throughput", "speedup",
                      "efficiency", "exposed comm", "memory/rank", "spread", "file"], rows)
        md.append("")
        weak = {k: v for k, v in model.series(points, "weak").items() if len(v) >= 2}
        if weak:
            md.append("Weak scaling (same sequence length per rank; ideal efficiency 1):")
            md.append("")
            wrows = []
            for (cfg, spr), pts in sorted(weak.items()):
                for r, sp, e in model.scaling(pts, "weak"):
                    wrows.append([spr, r, cfg, _fmt(sp), _fmt(e)])
            md += _table(["seq len per rank", "ring size", "config", "scaled speedup", "efficiency"], wrows)
            md.append("")

    # ---- cost model ----
    md += ["## Cost-model prediction", ""]
    if comm is None:
        md += ["No communication model: the files have no collectives sweep (sendrecv) and no "
               "host_pingpong sweep to fit one from.", ""]
    else:
        md.append(f"Ring-neighbour transfer model t(m) = alpha + m/beta from the {comm['source']}: "
                  f"alpha = {_time(comm['alpha_s'])}, beta = {_si(comm['beta_Bps'], 'B/s')}"
                  + (f" (relative RMS error of the fit {comm['rel_rms_error']:.2g})" if "rel_rms_error" in comm else "")
                  + ".")
        md.append("")
        md.append("Per ring step: step(R) = max(c(R), alpha + bytes(R)/beta) with c(R) = c(R0)(R0/R)^2 "
                  "from the measured per-step compute time at the smallest measured ring size R0 and "
                  "bytes(R) = the key/value block passed per step; the time is n(R) steps of that, "
                  "scaled by the ratio of measured to modelled time at R0. See docs/analysis.md.")
        md.append("")
        if not preds:
            md += ["No prediction: the ring attention points lack per-step compute times or the "
                   "sizes needed for the key/value block (batch, heads, head_dim, dtype).", ""]
        for pr in preds:
            md.append(f"**S={pr['seq_len']}** ({pr['config'] or 'default config'}), base ring size "
                      f"{pr['base_ring_size']}:")
            md.append("")
            rows = [[x["ring_size"], _time(x["measured_time"]), _time(x["predicted_time"]),
                     f"{100 * x['error']:+.1f}%", _fmt(x["predicted_efficiency"]),
                     "comm" if x["comm_bound"] else "compute"] for x in pr["measured"]]
            rows += [[x["ring_size"], "(not run)", _time(x["predicted_time"]), "-",
                      _fmt(x["predicted_efficiency"]), "comm" if x["comm_bound"] else "compute"]
                     for x in pr["extrapolated"]]
            md += _table(["ring size", "measured forward", "predicted forward", "error",
                          "predicted efficiency", "bound by"], rows)
            md.append("")

    # ---- collectives / pingpong summaries ----
    coll_rows = []
    for run in runs:
        for s in run.sweeps_of_type(reader.COLLECTIVE_TYPES):
            for label, xs, ys in model.bandwidth_curves(s):
                i = int(np.argmax(ys))
                coll_rows.append([os.path.basename(run.path), s.name, label, _si(ys[i], "B/s"), int(xs[i])])
    ping_rows = []
    for run in runs:
        for s in run.sweeps_of_type(reader.PINGPONG_TYPES):
            for x in model.pingpong_summary(s):
                ping_rows.append([os.path.basename(run.path), s.name, x["message_size"],
                                  _time(x["max_one_way_time"]), _si(x["min_bandwidth"], "B/s")])
                summary.setdefault("pingpong", []).append(dict(x, file=run.path, sweep=s.name))
    if coll_rows or ping_rows:
        md += ["## Communication", ""]
    if coll_rows:
        md += _table(["file", "sweep", "operation / group", "peak bus bandwidth", "at size (B)"], coll_rows)
        md.append("")
    if ping_rows:
        md.append("host_pingpong (one-way time of the slowest rank, bandwidth of the slowest pair):")
        md.append("")
        md += _table(["file", "sweep", "message size (B)", "one-way time", "bandwidth"], ping_rows)
        md.append("")

    # ---- contention sweeps: verdicts, per-phase table, box plots, monitors ----
    md += contention.report_section(runs, out_dir, summary)

    # ---- plots ----
    md += ["## Plots", ""]
    args = {"points": points, "runs": runs, "preds": preds}
    for name, title, fn, what in EXPECTED_PLOTS:
        try:
            path = fn(args[what], out_dir)
            summary["plots"][name] = os.path.basename(path)
            md += [f"### {title}", "", f"![{title}]({os.path.basename(path)})", ""]
        except plots.NoData as why:
            summary["not_plotted"][name] = str(why)
    if summary["not_plotted"]:
        md.append("Not plotted:")
        md.append("")
        md += [f"- {n}: {why}" for n, why in summary["not_plotted"].items()]
        md.append("")

    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(out_dir, "report.json"), "w") as f:
        json.dump(summary, f, indent=1, default=_json_default)
    ring = reader.combined_table(runs, reader.RING_TYPES)
    if len(ring):
        ring.to_csv(os.path.join(out_dir, "points.csv"), columns=reader.csv_columns(ring), index=False)
    return summary


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)
