"""trend.html: the numbers of trend.py's store trend first (per point and headline metric: the
last night, its change from its baseline, the noise and the verdicts), then the nights with
links to what the nightly kept of them, then one figure per sweep and metric: each point's
statistic night by night inside the band compare allows, regressions marked. Also writes
trend.json (every number of the page)."""
import json
import os

from . import doc, html_page, html_plots, outfile, trend

MAX_PANELS = 24   # points per figure: those with a regression or warning first, then the largest changes
COLS = 3
MARKS = {"regression": ("x", "#d62728", 12), "warn": ("triangle-up", "#e6a100", 10),
         "faster": ("circle", "#2ca02c", 8), "ok": ("circle", "#1f77b4", 7), "": ("circle", "#7f7f7f", 7)}


def _last(s):
    return next((n for n in reversed(s["nights"]) if n), None)


def _count(s, verdict):
    return sum(1 for n in s["nights"] if n and n["verdict"] == verdict)


def _change(n):
    if not n or "worse" not in n:
        return "-"
    return f"{100 * (n['worse'] - 1):+.1f} % [{100 * (n['worse_lo'] - 1):+.1f}, {100 * (n['worse_hi'] - 1):+.1f}]"


def _summary_table(k):
    """One row per point and metric, regressions first: a table block (doc.Block)."""
    order = sorted(k["series"], key=lambda s: (-_count(s, "regression"), -_count(s, "warn"), s["sweep"]))
    rows = []
    for s in order:
        n = _last(s)
        verdict = n["verdict"] if n else ""
        rows.append([s["sweep"], s["point"], s["metric"], trend.value_text(n["value"], s["units"]) if n else "-",
                     f"{100 * n['cv']:.1f} %" if n else "-", _change(n),
                     f"{100 * n['noise']:.1f} %" if n and n.get("noise") else "-",
                     f"x{n['limit']:.3f}" if n and "limit" in n else "-",
                     f"**{verdict}**" if verdict in ("regression", "warn") else verdict or "-",
                     str(_count(s, "regression")), str(_count(s, "warn"))])
    heads = ["sweep", "point", "metric", "last night", "CV in night", "worse than baseline [95% CI]",
             "noise", "limit", "verdict", "regressions", "warnings"]
    return doc.Block("table", [], headers=heads, rows=rows)


def _nights_table(k):
    rows = []
    for i, e in enumerate(k["entries"]):
        verdicts = [s["nights"][i]["verdict"] for s in k["series"] if s["nights"][i]]
        reg, warn = verdicts.count("regression"), verdicts.count("warn")
        links = ", ".join(f"[{what}]({path})" for what, path in e["links"].items())
        rows.append([e.get("date", "?"), str(e.get("commit", "?"))[:12], e["role"],
                     f"**{reg}**" if reg else "0", str(warn), links or "-"])
    heads = ["date", "commit", "role", "regressions", "warnings", "kept (report, compare, verdict, stored file)"]
    return doc.Block("table", [], headers=heads, rows=rows)


def _hover(s, n):
    lines = [f"{n['role']} {n['date']} (commit {str(n['commit'])[:12]})",
             f"{s['metric']}: {trend.value_text(n['value'], s['units'])} (compare's statistic)",
             f"CV in the night: {100 * n['cv']:.1f} % over {n['n']} samples"]
    if "worse" in n:
        lines += [f"worse than the baseline of {n['reference']}: {_change(n)}",
                  f"noise {100 * n['noise']:.1f} %, limit x{n['limit']:.3f}", f"verdict: {n['verdict']}"]
    return html_plots.hover(f"{s['sweep']} {s['point']}", lines)


def _panel(fig, s, row, col):
    go = html_plots.go_module()
    pts = [n for n in s["nights"] if n]
    dates = [n["date"] for n in pts]
    lo = [n["band"][0] if "band" in n else None for n in pts]
    hi = [n["band"][1] if "band" in n else None for n in pts]
    band = dict(mode="lines", line=dict(width=0, shape="hvh"), hoverinfo="skip", showlegend=False)
    fig.add_trace(go.Scatter(x=dates, y=lo, **band), row=row, col=col)
    fig.add_trace(go.Scatter(x=dates, y=hi, fill="tonexty", fillcolor="rgba(31,119,180,0.13)", **band),
                  row=row, col=col)
    marks = [MARKS.get(n["verdict"], MARKS[""]) for n in pts]
    fig.add_trace(go.Scatter(
        x=dates, y=[n["value"] for n in pts], mode="lines+markers", showlegend=False,
        text=[_hover(s, n) for n in pts], hovertemplate="%{text}<extra></extra>", line=dict(color="#1f77b4", width=1),
        marker=dict(symbol=["diamond" if n["role"] == "baseline" and m[0] == "circle" else m[0]
                            for n, m in zip(pts, marks)], color=[m[1] for m in marks], size=[m[2] for m in marks])),
        row=row, col=col)
    fig.update_yaxes(range=_view(pts), row=row, col=col)


def _view(pts):
    """The panel's y range: the values, and the band where it is within a factor 2 of them (a
    wider band, such as the host's 45 % shared-machine noise, only fills the panel)."""
    vals = [n["value"] for n in pts]
    edges = [x for n in pts if "band" in n for x in n["band"]]
    lo = min([min(vals)] + [x for x in edges if x >= 0.5 * min(vals)])
    hi = max([max(vals)] + [x for x in edges if x <= 2 * max(vals)])
    pad = 0.08 * (hi - lo) or 0.05 * abs(hi) or 1.0
    return [max(0.0, lo - pad), hi + pad]


def _wrap(label, width=42):
    """A point label on lines of at most `width` characters, broken after its commas."""
    lines = []
    for part in label.split(", "):
        if lines and len(lines[-1]) + 2 + len(part) <= width:
            lines[-1] += ", " + part
        else:
            lines.append(part)
    return "<br>".join(lines)


def _figure(group):
    """Small multiples of one sweep and metric: one panel per point (at most MAX_PANELS)."""
    shown = sorted(group, key=lambda s: (-_count(s, "regression"), -_count(s, "warn"),
                                         -abs((_last(s) or {}).get("worse", 1.0) - 1)))[:MAX_PANELS]
    rows = -(-len(shown) // COLS)
    cols = min(COLS, len(shown))
    fig = html_plots.figure(rows, cols, [_wrap(s["point"]) for s in shown], height=230 * rows + 40,
                            vertical_spacing=min(0.15, 0.6 / rows))
    for i, s in enumerate(shown):
        _panel(fig, s, i // cols + 1, i % cols + 1)
    fig.update_annotations(font_size=10)
    fig.update_yaxes(title_text=group[0]["units"] or None, title_font_size=10)
    return fig, len(group) - len(shown)


def _plots(k, kind_no):
    groups = {}
    for s in k["series"]:
        groups.setdefault((s["sweep"], s["metric"]), []).append(s)
    out = []
    for n, ((sweep, metric), group) in enumerate(groups.items()):
        fig, left = _figure(group)
        div = html_page.figure_div(fig, f"k{kind_no}-{n}")
        out.append({"div": html_page.markup(div), "left": left, "sweep": sweep, "metric": metric})
    return out


def write(data, out_dir):
    """trend.html and trend.json in out_dir; returns trend.html's path."""
    kinds = [{"k": k, "summary": _summary_table(k), "nights": _nights_table(k), "plots": _plots(k, i)}
             for i, k in enumerate(data["kinds"])]
    regs = sum(_count(s, "regression") for k in data["kinds"] for s in k["series"])
    glance = [(f"{len(data['kinds'])} machine kind(s)", ""),
              (f"{regs} regression(s) among the nights shown" if regs else "no regression among the nights shown",
               "bad" if regs else "good")]
    from .report import _finite_json  # NaN as null: valid JSON for every reader
    with outfile.replacing(os.path.join(out_dir, "trend.json")) as f:
        json.dump(_finite_json(data), f, indent=1, default=str, allow_nan=False)
    return html_page.render("trend.html.j2", os.path.join(out_dir, "trend.html"), title="ringbench nightly trend",
                            data=data, kinds=kinds, glance=glance, plots={})
