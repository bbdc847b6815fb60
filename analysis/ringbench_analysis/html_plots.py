"""Interactive plotly figures of report.html, drawn from the same frames as the PNGs
(report.analyse: model.point_table's points, results.py's frames, the predictions). Each
point's hover text says its value, its variance where the file has samples (CV between
iterations, the spread between ranks, the 25th-75th percentile) and which point it is.
A plot without a builder here (the ring timeline, contention) stays the PNG in the page.
Series keep the PNGs' colours (plots.series_colour)."""
import html

import numpy as np

from . import fmt, plots


def _go():
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots
    return go, make_subplots


def go_module():
    return _go()[0]


def colour(label):
    r, g, b = plots.series_colour(label)[:3]
    return f"#{int(255 * r):02x}{int(255 * g):02x}{int(255 * b):02x}"


def hover(title, lines):
    """Hover text: the point's name in bold, then one line per fact ('-' lines left out)."""
    return "<b>" + html.escape(str(title)) + "</b><br>" + "<br>".join(
        html.escape(str(x)) for x in lines if x)


def cv_line(cv, n=None, what="between iterations"):
    if fmt.missing(cv):
        return "CV: not measured (one sample)"
    return f"CV {what}: {100 * cv:.1f} %" + (f" ({n} samples)" if n else "")


def figure(rows=1, cols=1, titles=(), height=420, **kw):
    """A figure of rows x cols panels in the pages' style."""
    _, make_subplots = _go()
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=list(titles) or None, **kw)
    fig.update_layout(template="plotly_white", height=height, hovermode="closest",
                      margin=dict(l=60, r=20, t=50 if titles else 30, b=50),
                      legend=dict(font=dict(size=11)), hoverlabel=dict(align="left"))
    fig.update_yaxes(exponentformat="SI")  # 10G, not plotly's 10B (billions read as bytes)
    return fig


def scatter(x, y, text, label, mode="lines+markers", key=None, **kw):
    """A line of points; key: the series' colour key where it is not the label (the ring
    plots key a series by (kind, configuration, length), as plots.py does)."""
    go, _ = _go()
    kw.setdefault("line", dict(color=colour(label if key is None else key)))
    kw.setdefault("marker", dict(color=colour(label if key is None else key), size=7))
    return go.Scatter(x=list(x), y=list(y), text=list(text), name=label, mode=mode,
                      hovertemplate="%{text}<extra></extra>", **kw)


def pow2_axis(fig, values, title, row=None, col=None, log=True, binary=False):
    """An x axis of ring sizes or message sizes: log 2, ticks at the values (binary: bytes, as
    KiB/MiB)."""
    vals = sorted({float(v) for v in values if not fmt.missing(v) and float(v) > 0})
    fig.update_xaxes(type="log" if log and len(vals) > 1 else "linear", title_text=title,
                     tickvals=vals if len(vals) <= 16 else None,
                     ticktext=[fmt.size(v) if binary else f"{v:g}" for v in vals] if len(vals) <= 16 else None,
                     row=row, col=col)


def figures(rep):
    """{plot name: plotly figure} for every drawn plot that has a builder."""
    from . import html_plots_profile, html_plots_ring
    builders = dict(html_plots_ring.BUILDERS, **html_plots_profile.BUILDERS)
    out = {}
    for name in rep.summary["plots"]:
        if name in builders:
            fig = builders[name](rep)
            if fig is not None:
                out[name] = fig
    return out


def cell_labels(fig, xs, ys, text, row=None, col=None, limit=16):
    """Each heatmap cell's text written on it (this plotly has no heatmap texttemplate); up to
    limit x limit cells, beyond that the hover alone says it."""
    if len(xs) > limit or len(ys) > limit:
        return
    for i, y in enumerate(ys):
        for j, x in enumerate(xs):
            if text[i][j]:
                red = not any(ch.isdigit() for ch in text[i][j]) and text[i][j] not in ("-", "n/a")
                fig.add_annotation(x=x, y=y, text=html.escape(text[i][j]), showarrow=False,
                                   font=dict(size=11, color="#b3261e" if red else "black"),
                                   bgcolor="rgba(255,255,255,0.7)", row=row, col=col)


def finite(v):
    return v is not None and not fmt.missing(v) and np.isfinite(float(v))
