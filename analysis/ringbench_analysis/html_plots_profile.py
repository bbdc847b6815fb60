"""report.html's figures of the profiling sweeps (html_plots.py): collectives' bus bandwidth
and small-message times, the p2p matrices, compute and memory rates, from results.py's frames."""
import numpy as np

from . import figures, fmt, reader, results
from .html_plots import cell_labels, colour, cv_line, figure, go_module, hover, pow2_axis, scatter


def _panel_grid(titles):
    """A figure of one panel per title, two to a row (one alone spans the width), and each
    panel's (row, col), both from 1."""
    cols = 1 if len(titles) == 1 else 2
    rows = -(-len(titles) // cols)
    return (figure(rows, cols, titles, height=330 * rows + 60),
            [(i // cols + 1, i % cols + 1) for i in range(len(titles))])


def _panels_by(frame, column):
    """_panel_grid's figure with a panel per value of frame[column] (first seen, first drawn),
    and (value, its rows, row, col) per panel."""
    values = list(dict.fromkeys(frame[column]))
    fig, cells = _panel_grid(values)
    return fig, [(v, frame[frame[column] == v], row, col) for v, (row, col) in zip(values, cells)]


def _variant_traces(fig, sub, files, y, what, row, col, shown):
    """One line per (file, group, dtype, in-place) of an operation's points; the hover says
    the value, the time's CV and 25th-75th percentile over iterations, and the point."""
    for key, g in sub.groupby(["file", "group", "dtype", "in_place"], sort=False):
        g = g.sort_values("size")
        lab = figures.variant_label(dict(zip(["file", "group", "dtype", "in_place"], key)), files)
        text = [hover(f"{r.get('operation', 'ping-pong')} {lab} at {fmt.size(r['size'])}", [
            what(r), f"time {fmt.time(r['time'])} (p25 {fmt.time(r['t_p25'])}, p75 {fmt.time(r['t_p75'])})",
            cv_line(r["cv"]), f"{int(r['wrong'])} wrong elements" if r.get("wrong") else ""])
            for r in fmt.records(g)]
        fig.add_trace(scatter(g["size"], g[y], text, lab, legendgroup=lab, showlegend=lab not in shown,
                              marker=dict(size=5, color=colour(lab))), row=row, col=col)
        shown.add(lab)


def bandwidth(rep):
    cp, variants = rep.frames["cpoints"], rep.frames["variants"]
    linked = cp[~cp["one_rank"] & cp["busbw"].notna()] if len(cp) else cp
    if not len(linked):
        return None
    fig, panels = _panels_by(linked, "operation")
    shown = set()
    for op, sub, row, col in panels:
        _variant_traces(fig, sub, linked["file"].nunique(), "busbw",
                        lambda x: f"busbw {fmt.si(x['busbw'], 'B/s')}, algbw {fmt.si(x['algbw'], 'B/s')}",
                        row, col, shown)
        for lp in (variants[variants["operation"] == op]["link_peak"].dropna().unique() if len(variants) else []):
            fig.add_hline(y=lp, line_dash="dash", line_color="black", row=row, col=col,
                          annotation_text="link peak (NVLink, one direction)")
        pow2_axis(fig, sub["size"], "message size", row=row, col=col, binary=True)
        fig.update_yaxes(type="log", title_text="bus bandwidth (B/s)" if col == 1 else None, row=row, col=col)
    return fig


def latency(rep):
    cp, pp = rep.frames["cpoints"], rep.frames["pingpong"]
    panels = []
    if len(cp):
        small = cp[~cp["one_rank"] & (cp["size"] <= figures.SMALL_MESSAGE) & cp["time"].notna()]
        panels += [(op, small[small["operation"] == op]) for op in dict.fromkeys(small["operation"])]
    if len(pp) and (pp["size"] <= figures.SMALL_MESSAGE).any():
        panels.append(("host_pingpong (one way)", pp[pp["size"] <= figures.SMALL_MESSAGE].assign(
            group="ping-pong pair", dtype="", in_place=0, wrong=0)))
    if not panels:
        return None
    fig, cells = _panel_grid([t for t, _ in panels])
    shown = set()
    files = max(p["file"].nunique() for _, p in panels)
    for (_, sub), (row, col) in zip(panels, cells):
        _variant_traces(fig, sub, files, "time", lambda x: f"time per operation {fmt.time(x['time'])}",
                        row, col, shown)
        pow2_axis(fig, sub["size"], "message size", row=row, col=col, binary=True)
        fig.update_yaxes(type="log", title_text="time (s, slowest rank)" if col == 1 else None, row=row, col=col)
    return fig


def p2p_matrix(rep):
    go = go_module()
    found = [(f"{s.name}, {run.world_size} ranks", s, results.p2p_matrices(s))
             for run in rep.runs for s in run.sweeps_of_type(reader.P2P_TYPES)]
    found = [f for f in found if f[2]][-2:]
    if not found:
        return None
    panels = [(f"{title}: {name}", name, m) for title, _, mats in found for name, m in mats.items()]
    fig = figure(1, len(panels), [p[0] for p in panels], height=420)
    for i, (_, name, m) in enumerate(panels, start=1):
        unit = "B/s" if name == "bandwidth" else "s"
        text = [["-" if a == b else (fmt.si(v, "B/s") if unit == "B/s" else fmt.time(v)) if np.isfinite(v) else "n/a"
                 for b, v in enumerate(row)] for a, row in enumerate(m)]
        fig.add_trace(go.Heatmap(z=m, text=text, colorscale="Viridis", zmin=0,  # from zero, as the PNG:
                                 zmax=float(np.nanmax(m)),  # 10 and 10.1 GB/s are not opposite colours
                                 reversescale=name != "bandwidth", showscale=False,
                                 hovertemplate=f"rank %{{y}} -> rank %{{x}}: {name} %{{text}}<extra></extra>"),
                      row=1, col=i)
        cell_labels(fig, list(range(len(m))), list(range(len(m))), text, row=1, col=i)
        fig.update_xaxes(title_text="receiving rank", dtick=1, row=1, col=i)
        fig.update_yaxes(title_text="sending rank", dtick=1, autorange="reversed", row=1, col=i)
    return fig


def compute(rep):
    frame = rep.frames["compute"]
    if not len(frame):
        return None
    fig, panels = _panels_by(frame, "dtype")
    shown = set()
    for dt, sub, row, col in panels:
        for (op, eng), g in sub.groupby(["operation", "engine"], sort=False):
            g, lab = g.sort_values("size"), f"{op} ({eng})"
            text = [hover(f"{lab} {dt} n={x['size']}", [
                f"{fmt.tflops(x['tflops'])} TFLOP/s (slowest rank)" + (f", {fmt.pct(x['pct_of_peak'])} of peak"
                                                                     if not fmt.missing(x["pct_of_peak"]) else ""),
                f"p25 {fmt.tflops(x['r_p25'])}, p75 {fmt.tflops(x['r_p75'])} TFLOP/s", cv_line(x["cv"])])
                for x in fmt.records(g)]
            fig.add_trace(scatter(g["size"], g["tflops"], text, lab, legendgroup=lab, showlegend=lab not in shown,
                                  error_y=_error(g["tflops"], g["r_p25"], g["r_p75"])), row=row, col=col)
            shown.add(lab)
        peak = sub["peak_tflops"].dropna()
        if len(peak):
            fig.add_hline(y=peak.iloc[0], line_dash="dash", line_color="black", row=row, col=col,
                          annotation_text="device peak (dense)")
        pow2_axis(fig, sub["size"], "n (GEMM n x n x n) / rows", row=row, col=col)
        fig.update_yaxes(title_text="TFLOP/s" if col == 1 else None, rangemode="tozero", row=row, col=col)
    return fig


def _error(value, p25, p75):
    return dict(type="data", symmetric=False, array=list(np.clip(p75 - value, 0, None).fillna(0)),
                arrayminus=list(np.clip(value - p25, 0, None).fillna(0)), thickness=1)


def memory_bandwidth(rep):
    go = go_module()
    frame = rep.frames["memory"]
    if not len(frame):
        return None
    fig = figure(height=400)
    files = frame["file"].nunique()
    x = [f"{r['kind']} {fmt.size(r['size'])}" + (f" [{r['file']}]" if files > 1 else "") for r in fmt.records(frame)]
    text = [hover(name, [f"{fmt.si(r['bandwidth'], 'B/s')} (slowest rank)",
                         f"p25 {fmt.si(r['b_p25'], 'B/s')}, p75 {fmt.si(r['b_p75'], 'B/s')}", cv_line(r["cv"]),
                         f"{fmt.pct(r['pct_of_peak'])} of the {r['peak_name']} peak" if r["peak_name"]
                         else "no known peak"])
            for name, r in zip(x, fmt.records(frame))]
    fig.add_trace(go.Bar(x=x, y=frame["bandwidth"], text=text, textposition="none",
                         hovertemplate="%{text}<extra></extra>",
                         error_y=_error(frame["bandwidth"], frame["b_p25"], frame["b_p75"]),
                         marker_color=[colour(f"memory {k}") for k in frame["kind"]], name="bandwidth"))
    fig.update_yaxes(title_text="bandwidth (B/s, slowest rank)")
    return fig


BUILDERS = {"bandwidth": bandwidth, "latency": latency, "p2p_matrix": p2p_matrix, "compute": compute,
            "memory_bandwidth": memory_bandwidth}
