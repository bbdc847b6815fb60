"""report.html: the report's sections (doc.py, the blocks report.md is written from) as one
self-contained page, its plots interactive (html_plots.py) where a builder exists and the PNG
inlined where not (the contention and ring-timeline plots)."""
import html
import os

from . import html_page, html_plots


def _subtitle(summary):
    files = summary["files"]
    names = ", ".join(os.path.basename(f["path"]) for f in files[:3]) + (" ..." if len(files) > 3 else "")
    first = files[0] if files else {}
    return (f"{names}: {first.get('world_size', '?')} ranks, backend {first.get('backend', '?')}, "
            f"started {first.get('start_time', '?')}, ringbench {first.get('ringbench_version', '?')} "
            f"({first.get('git_commit', '?')})")


def _glance(summary):
    """Badges above everything: what failed and how many numbers are untrustworthy (the
    summary's verdicts, counted)."""
    problems, bad = summary["problems"], summary.get("untrustworthy", [])
    return [(f"{len(problems)} problem(s): see Status and parity" if problems
             else "every run, sweep and point completed", "bad" if problems else "good"),
            (f"{len(bad)} untrustworthy number(s)" if bad else "no untrustworthy number",
             "warn" if bad else "good"),
            (f"{len(summary['plots'])} plots, {len(summary['points'])} ring attention points", "")]


def _plot_html(rep):
    """{image file: HTML} for every image block: the interactive figure, else the PNG."""
    names = {f: n for n, f in rep.summary["plots"].items()}
    figs = html_plots.figures(rep)
    out = {}
    for s in rep.sections:
        for b in s.blocks:
            if b.kind != "image" or b.src in out:
                continue
            name = names.get(b.src, os.path.splitext(b.src)[0])
            if name in figs:
                out[b.src] = html_page.markup(f'<div class="plot">{html_page.figure_div(figs[name], name)}</div>')
            elif os.path.isfile(os.path.join(rep.out_dir, b.src)):
                uri = html_page.png_data_uri(os.path.join(rep.out_dir, b.src))
                out[b.src] = html_page.markup(f'<img src="{uri}" alt="{html.escape(b.title)}">')
            else:
                out[b.src] = html_page.markup(f'<p class="note">{html.escape(b.src)}: not drawn</p>')
    return out


def write(rep, path):
    """Writes report.html for an analysed report (report.analyse)."""
    return html_page.render("report.html.j2", path, title="ringbench report",
                            subtitle=_subtitle(rep.summary), glance=_glance(rep.summary),
                            sections=rep.sections, plots=_plot_html(rep))

