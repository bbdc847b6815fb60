"""Self-contained HTML pages (report.html, trend.html): a jinja2 template of templates/, the
plotly figures as divs, and plotly.js itself inlined, so a page opens offline and from any
copy (a nightly's results folder, a mail attachment) without fetching anything. Debian's
python3-plotly ships plotly.js unminified (about 8.6 MB): that is the size of every page."""
import base64
import os
import re

from . import doc, outfile

TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")
# The figures' toolbar without the plotly.com links (a page that names no web address) and
# with its PNG export (a figure can still go into a slide).
PLOT_CONFIG = {"displaylogo": False, "responsive": True,
               "modeBarButtonsToRemove": ["sendDataToCloud", "editInChartStudio"]}


class HtmlError(Exception):
    pass


def require():
    """HtmlError now, before an analysis, where the packages a page needs are missing."""
    _modules()


def _modules():
    """jinja2, plotly.io and plotly.offline, or HtmlError naming the Debian packages."""
    try:
        import jinja2
        import plotly.io
        import plotly.offline
    except ImportError as e:
        raise HtmlError(f"an HTML page needs python3-plotly and python3-jinja2 ({e}); "
                        "apt-get install python3-plotly python3-jinja2")
    return jinja2, plotly.io, plotly.offline


def figure_div(fig, name):
    """The figure as a <div> and the script that draws it, with the id plot-<name> (plotly's
    own is random: the same report would differ from one rendering to the next)."""
    _, pio, _ = _modules()
    text = pio.to_html(fig, full_html=False, include_plotlyjs=False, config=PLOT_CONFIG,
                       default_height=f"{int(fig.layout.height or 450)}px")
    found = re.search(r'id="([0-9a-f-]{36})"', text)
    return text.replace(found.group(1), f"plot-{name}") if found else text


def png_data_uri(path):
    with open(path, "rb") as f:
        return "data:image/png;base64," + base64.b64encode(f.read()).decode("ascii")


def render(template, path, **context):
    """Writes the page `template` (a file of templates/) with `context` to `path`."""
    jinja2, _, offline = _modules()
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES),
                             autoescape=jinja2.select_autoescape(["html", "j2"]),
                             trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters["inline"] = lambda text: markup(doc.inline_html(str(text)))
    env.filters["numeric_columns"] = numeric_columns
    env.filters["flagged"] = flagged
    page = env.get_template(template).render(plotly_js=markup(offline.get_plotlyjs()), **context)
    with outfile.replacing(path, encoding="utf-8") as f:
        f.write(page)
    return path


def markup(text):
    """Text the template puts in as it is (HTML made here: figure divs, images, inline marks)."""
    _modules()
    import markupsafe  # jinja2's own dependency
    return markupsafe.Markup(text)


# Bold cells mark a failed point or an untrustworthy number (on the trend page a regression or
# a warning), except in the schemes table, where bold is the fastest scheme: a row is shaded
# only for the former.
FLAG = re.compile(r"\*\*[^*]*(untrustworthy|CV|wrong|oom|fail|parity|timeout|error|skipped|regression|warn)", re.I)


def flagged(row):
    return any(FLAG.search(str(c)) for c in row)


# A cell that reads as a number: "12.5", "-43.0%", "7.79 ktok/s", "1.19 MB".
NUMERIC = re.compile(r"^[-+x]?\d[\d.,]*(e[-+]?\d+)?\s?(%|[a-zA-Z]{0,6}(/s)?)?$")


def numeric_columns(table):
    """Per column of a table block: right-aligned where every cell with a value reads as a
    number (a column of numbers and words, as the headline's values, stays left-aligned)."""
    out = []
    for i in range(max([len(table.headers)] + [len(r) for r in table.rows])):
        cells = [doc.plain(r[i]) for r in table.rows if i < len(r) and doc.plain(r[i]) not in ("", "-")]
        out.append(bool(cells) and all(NUMERIC.match(c) for c in cells))
    return out
