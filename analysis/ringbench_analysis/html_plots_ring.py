"""report.html's ring attention figures (html_plots.py): throughput, scaling, exposed
communication, memory, the efficiency heatmap, per-iteration times, stragglers, the cost
model and the schemes, from the points and ring frame report.analyse computed."""
import os

import numpy as np

from . import fmt, model, plots, results, schemes
from .html_plots import cell_labels, colour, cv_line, figure, finite, go_module, hover, pow2_axis, scatter


def _rows(rep):
    ring = rep.frames["ring"]
    return {(r["file"], r["sweep"], r["point"]): r for r in fmt.records(ring)} if len(ring) else {}


def point_name(r, files=1):
    return (f"{r['sweep']} S={r['seq_len']} R={r['ring_size']} {r['layout']} {r['kernel']} {r['dtype']}"
            + (f" [{r['file']}]" if files > 1 else ""))


def point_lines(p, r):
    """The variance and status lines of a ring point's hover text."""
    spread = p.get("spread")
    return [f"time {fmt.ms(r.get('total_ms'))} ms per iteration (slowest rank's median)",
            cv_line(r.get("cv"), r.get("iterations")),
            f"spread: slowest rank {fmt.num((spread - 1) * 100, 3, ' %')} above the median rank"
            if spread is not None else "",
            f"status {r['status']}; "
            + (f"untrustworthy: {r['untrustworthy']}" if r.get("untrustworthy") else "trusted")]


def _series(rep, kind, need=1):
    """[(label, colour key, [(point, ring row)])] per scaling series, labelled and coloured as
    the PNGs."""
    rows, ser = _rows(rep), {k: v for k, v in model.series(rep.points, kind).items() if len(v) >= need}
    n_cfg = len({k[0] for k in ser})
    out = []
    for (cfg, s), pts in sorted(ser.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        lab = plots._label(cfg, n_cfg, f"S={s}" if kind == "strong" else f"S/R={s}", pts)
        out.append((lab, ("S" if kind == "strong" else "S/R", cfg, s),
                    [(p, rows.get((p["run"], p["sweep"], p["point"]), {})) for p in pts]))
    return out


def _unmeasured(rep, fig, y, row=None, col=None):
    """Failed, oom and parity-failed points: red crosses at their ring size, hover says why."""
    bad = [p for p in rep.points if not p["measured"]]
    if bad:
        fig.add_trace(scatter([p["ring_size"] for p in bad], [y] * len(bad),
                              [hover(f"{p['sweep']} S={p['seq_len']} R={p['ring_size']}",
                                     [f"status {p['status']}", p.get("failure") or ""]) for p in bad],
                              "not measured", mode="markers",
                              marker=dict(symbol="x", color="red", size=11)), row=row, col=col)


def _curves(rep, value, what, ytitle, logy=False):
    ser = _series(rep, "strong")
    ser = [(lab, key, [(p, r) for p, r in pts if finite(value(p, r))]) for lab, key, pts in ser]
    ser = [x for x in ser if x[2]]
    if not ser:
        return None
    fig = figure()
    files = len({p["run"] for p in rep.points})
    for lab, key, pts in ser:
        fig.add_trace(scatter([p["ring_size"] for p, _ in pts], [value(p, r) for p, r in pts],
                              [hover(point_name(r, files), [what(value(p, r))] + point_lines(p, r))
                               for p, r in pts], lab, key=key))
    ys = [value(p, r) for _, _, pts in ser for p, r in pts]
    _unmeasured(rep, fig, min(ys) * (0.8 if logy else 0) if ys else 0)
    pow2_axis(fig, [p["ring_size"] for p in rep.points], "ring size (ranks)")
    fig.update_yaxes(title_text=ytitle, type="log" if logy else "linear")
    return fig


def throughput(rep):
    fig = _curves(rep, lambda p, r: p["throughput"], lambda v: f"throughput {fmt.si(v, 'tok/s')}",
                  "throughput (tokens/s, whole ring)", logy=True)
    for lab, key, pts in _series(rep, "strong", need=2) if fig is not None else []:
        r0, y0 = pts[0][0]["ring_size"], pts[0][0]["throughput"]
        fig.add_trace(scatter([p["ring_size"] for p, _ in pts], [y0 * p["ring_size"] / r0 for p, _ in pts],
                              [f"ideal (linear from R={r0}): {fmt.si(y0 * p['ring_size'] / r0, 'tok/s')}"
                               for p, _ in pts], f"{lab} ideal", mode="lines",
                              line=dict(dash="dot", width=1, color=colour(key)), showlegend=False))
    return fig


def _scaling(rep, kind):
    ser = _series(rep, kind, need=2)
    if not ser:
        return None
    fig = figure(1, 2, ("speedup" if kind == "strong" else "scaled speedup", "efficiency"))
    files = len({p["run"] for p in rep.points})
    sizes = []
    for lab, key, pts in ser:
        sc = model.scaling([p for p, _ in pts], kind)
        sizes += [x[0] for x in sc]
        for col, i, what in ((1, 1, "speedup"), (2, 2, "efficiency")):
            fig.add_trace(scatter([x[0] for x in sc], [x[i] for x in sc],
                                  [hover(point_name(r, files), [f"{what} {x[i]:.3g}"] + point_lines(p, r))
                                   for x, (p, r) in zip(sc, pts)], lab, key=key, showlegend=col == 1,
                                  legendgroup=lab), row=1, col=col)
    lo, hi = min(sizes), max(sizes)  # ideal: (scaled) speedup = ring size, efficiency 1
    fig.add_trace(scatter([lo, hi], [lo, hi], ["ideal"] * 2, "ideal", mode="lines",
                          line=dict(dash="dash", color="black", width=1)), row=1, col=1)
    fig.add_trace(scatter([lo, hi], [1, 1], ["ideal"] * 2, "ideal", mode="lines", showlegend=False,
                          line=dict(dash="dash", color="black", width=1)), row=1, col=2)
    for col in (1, 2):
        pow2_axis(fig, sizes, "ring size (ranks)", row=1, col=col)
    return fig


def efficiency_heatmap(rep):
    """Strong-scaling efficiency over (S x ring size) per configuration, failed cells named."""
    go = go_module()
    strong = {k: v for k, v in model.series(rep.points, "strong").items() if len(v) >= 2}
    if not strong:
        return None
    configs = sorted({k[0] for k in strong})
    fig = figure(1, len(configs), [c or "strong-scaling efficiency" for c in configs], height=380)
    for i, cfg in enumerate(configs, start=1):
        seqs = sorted({k[1] for k in strong if k[0] == cfg})
        sizes = sorted({p["ring_size"] for p in rep.points if p["config_label"] == cfg})
        z = np.full((len(seqs), len(sizes)), np.nan)
        text = [["" for _ in sizes] for _ in seqs]
        for a, s in enumerate(seqs):
            for r, _, eff in model.scaling(strong[(cfg, s)], "strong"):
                z[a, sizes.index(r)] = eff
                text[a][sizes.index(r)] = f"{eff:.2f}"
        for p in rep.points:
            if p["config_label"] == cfg and not p["measured"] and p["seq_len"] in seqs:
                text[seqs.index(p["seq_len"])][sizes.index(p["ring_size"])] = p["status"]
        xs, ys = [f"R={s}" for s in sizes], [f"S={s}" for s in seqs]  # words: plotly reads "2" as a number
        fig.add_trace(go.Heatmap(z=z, x=xs, y=ys, text=text, colorscale="Viridis", zmin=0,
                                 zmax=max(1.0, float(np.nanmax(z))), showscale=i == len(configs),
                                 hovertemplate="%{y} %{x}: efficiency %{z:.3f}<extra></extra>"),
                      row=1, col=i)
        cell_labels(fig, xs, ys, text, row=1, col=i)
        fig.update_xaxes(title_text="ring size (ranks)", type="category", row=1, col=i)
    return fig


def ring_variance(rep):
    """Each measured point's per-iteration times (slowest rank) as a box, relative to the
    point's median as in the PNG (points of different lengths share one axis)."""
    go = go_module()
    ring = rep.frames["ring"]
    if not len(ring) or not ring["measured"].any():
        return None
    sweeps = {(os.path.basename(r.path), s.name): s for r in rep.runs for s in r.sweeps.values()}
    fig = figure(height=460)
    files = ring["file"].nunique()
    for r in fmt.records(ring[ring["measured"]]):
        t = results._slowest_samples(sweeps[(r["file"], r["sweep"])].metrics["total_time_s"], r["point"]) * 1e3
        if not len(t):
            continue
        med = float(np.median(t))
        name = (f"{r['sweep']} S={r['seq_len']} R={r['ring_size']} {r['layout']}"
                + (f" [{r['file']}]" if files > 1 else ""))
        bad = finite(r["cv"]) and r["cv"] > results.CV_LIMIT
        fig.add_trace(go.Box(y=100 * (t / med - 1), name=name, boxmean="sd",
                             marker=dict(color="#d62728" if bad else "#4c72b0"),
                             hovertemplate=f"{name}<br>iteration: %{{y:+.1f}} % from the median ({med:.3g} ms)"
                                           f"<br>{cv_line(r['cv'], len(t))}<extra></extra>"))
    fig.update_layout(showlegend=False)
    fig.update_yaxes(title_text="fwd+bwd time per iteration vs the point's median (%)")
    fig.update_xaxes(tickangle=-30)
    return fig


def rank_spread(rep):
    go = go_module()
    good = [p for p in rep.points if p["measured"] and p["spread"] is not None and len(p["rank_times"]) > 1]
    if not good:
        return None
    fig = figure(height=400)
    rows = _rows(rep)
    names = [f"{p['sweep']} S={p['seq_len']} R={p['ring_size']} "
             f"{rows.get((p['run'], p['sweep'], p['point']), {}).get('layout', '')} #{p['point']}" for p in good]
    text = [hover(n, [f"slowest rank {100 * (p['spread'] - 1):.3g} % above the median rank",
                      "per rank (ms): " + ", ".join(f"{1e3 * t:.3g}" for t in p["rank_times"][:16])
                      + (" ..." if len(p["rank_times"]) > 16 else "")]) for n, p in zip(names, good)]
    fig.add_trace(go.Bar(x=names, y=[100 * (p["spread"] - 1) for p in good], text=text, textposition="none",
                         hovertemplate="%{text}<extra></extra>", marker_color="#4c72b0"))
    fig.update_yaxes(title_text="slowest rank vs median rank (% slower)")
    return fig


def cost_model(rep):
    if not rep.preds:
        return None
    fig = figure(1, 2, ("forward time: measured (dots) and predicted (dashed)", "predicted efficiency"))
    n_cfg = len({p["config"] for p in rep.preds})
    sizes = []
    for pr in rep.preds:
        lab = plots._label(pr["config"], n_cfg, f"S={pr['seq_len']}")
        key = ("S", pr["config"], pr["seq_len"])
        both = sorted(pr["measured"] + pr["extrapolated"], key=lambda x: x["ring_size"])
        sizes += [x["ring_size"] for x in both]
        m = pr["measured"]
        fig.add_trace(scatter([x["ring_size"] for x in m], [x["measured_time"] for x in m],
                              [hover(f"{lab} R={x['ring_size']} measured", [f"forward {fmt.time(x['measured_time'])}",
                                     f"predicted {fmt.time(x['predicted_time'])}"]) for x in m],
                              f"{lab} measured", mode="markers", legendgroup=lab,
                              marker=dict(color=colour(key), size=8)), row=1, col=1)
        txt = [hover(f"{lab} R={x['ring_size']} predicted", [
            f"forward {fmt.time(x['predicted_time'])} on {x['nodes']} node(s), {x['link']} link",
            f"error {100 * x['error']:+.1f} %" if x.get("error") is not None else "not run",
            f"bound by {'communication' if x['comm_bound'] else 'compute'}"]) for x in both]
        fig.add_trace(scatter([x["ring_size"] for x in both], [x["predicted_time"] for x in both], txt,
                              f"{lab} predicted", line=dict(dash="dash", color=colour(key)),
                              marker=dict(color=colour(key), size=5), legendgroup=lab), row=1, col=1)
        fig.add_trace(scatter([x["ring_size"] for x in both], [x["predicted_efficiency"] for x in both],
                              [hover(f"{lab} R={x['ring_size']}",
                                     [f"predicted efficiency {x['predicted_efficiency']:.3g}"])
                               for x in both], lab, line=dict(dash="dash", color=colour(key)),
                              marker=dict(color=colour(key), size=5), showlegend=False, legendgroup=lab),
                      row=1, col=2)
    for col in (1, 2):
        pow2_axis(fig, sizes, "ring size (ranks)", row=1, col=col)
    fig.update_yaxes(type="log", title_text="forward time (s)", row=1, col=1)
    fig.update_yaxes(range=[0, 1.05], row=1, col=2)
    return fig


def scheme_bars(rep):
    go = go_module()
    table = schemes.comparison(rep.frames["ring"])
    if table.empty:
        return None
    fig = figure(height=420)
    for name, g in table.groupby("scheme", sort=False):
        g = g[g["status"] == "ok"]
        x = [f"{r.sweep} S={r.seq_len} R={r.ring_size} {r.layout} {r.mask}" for r in g.itertuples()]
        text = [hover(f"{name}: {xx}", [f"{fmt.tflops(r.tflops_total)} TFLOP/s per GPU",
                                        f"time {fmt.time(r.total_ms / 1e3)}, x{r.vs_fastest:.3g} the fastest",
                                        "the fastest" if r.fastest else ""]) for xx, r in zip(x, g.itertuples())]
        fig.add_trace(go.Bar(x=x, y=g["tflops_total"], name=name, text=text, textposition="none",
                             hovertemplate="%{text}<extra></extra>", marker_color=colour(f"scheme {name}"),
                             marker_line=dict(width=[2 if f else 0 for f in g["fastest"]], color="black")))
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text="TFLOP/s per GPU (fwd+bwd)")
    return fig


BUILDERS = {
    "throughput": throughput,
    "strong_scaling": lambda rep: _scaling(rep, "strong"),
    "weak_scaling": lambda rep: _scaling(rep, "weak"),
    "exposed_comm": lambda rep: _curves(rep,
                                        lambda p, r: None if p["exposed_comm"] is None else 100 * p["exposed_comm"],
                                        lambda v: f"exposed communication {v:.1f} % of step time",
                                        "exposed communication (% of step time)"),
    "memory": lambda rep: _curves(rep, lambda p, r: p["memory"], lambda v: f"peak memory per rank {fmt.si(v, 'B')}",
                                  "peak memory per rank (B, largest rank)", logy=True),
    "efficiency_heatmap": efficiency_heatmap,
    "ring_variance": ring_variance,
    "rank_spread": rank_spread,
    "cost_model": cost_model,
    "schemes": scheme_bars,
}
