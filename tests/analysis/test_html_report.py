"""rb-analysis report --html and rb-analysis trend (issue #32): what can be checked without a
browser. report.html has every section and table of report.md with the same cells, its plots
are interactive where a builder exists (else the PNG inlined) and carry their variance in the
hover text, and it fetches nothing (no http(s) script, link, image); report.md is unchanged by
the HTML (doc.py reads the blocks it is written from). The trend page marks the slow night of a
synthetic store as a regression and no other, and links each night's report where kept.
tests/analysis/browser_check.py opens both pages in Chromium."""
import contextlib
import html.parser
import io
import json
import os
import re
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tempdir_case  # noqa: E402  (analysis/ on the path; skip without h5py)

try:  # imported to see that they load (else the tests skip); report --html imports them itself
    import jinja2  # noqa: F401  # pylint: disable=unused-import
    import plotly  # noqa: F401  # pylint: disable=unused-import
except ImportError as exc:  # pragma: no cover
    raise unittest.SkipTest(f"report --html needs python3-plotly and python3-jinja2 ({exc})")

import synthetic  # noqa: E402
import synthetic_store  # noqa: E402
from ringbench_analysis import doc, report  # noqa: E402
from ringbench_analysis.__main__ import main as cli  # noqa: E402


class Page(html.parser.HTMLParser):
    """The parts of a page the tests read: headings, tables (cell texts), elements with a
    src or href, script bodies, ids."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.headings, self.tables, self.refs, self.scripts, self.ids = [], [], [], [], set()
        self._cell = self._head = self._script = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.ids.add(a.get("id"))
        self.refs += [(tag, k, v) for k, v in attrs if k in ("src", "href") and v]
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = ""
        elif re.fullmatch(r"h[1-6]", tag):
            self._head = ""
        elif tag == "script":
            self._script = ""

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append(self._cell.strip())
            self._cell = None
        elif re.fullmatch(r"h[1-6]", tag) and self._head is not None:
            self.headings.append(self._head.strip())
            self._head = None
        elif tag == "script" and self._script is not None:
            self.scripts.append(self._script)
            self._script = None

    def handle_data(self, data):
        for name in ("_cell", "_head", "_script"):
            if getattr(self, name) is not None:
                setattr(self, name, getattr(self, name) + data)


def md_tables(md_text):
    return [[b.headers] + b.rows for b in doc.parse(md_text.split("\n")) if b.kind == "table"]


class HtmlReport(tempdir_case.TempDirCase):
    """One report of a scaling series (ring sizes 1, 2, 4: an oom point, a straggler) and a
    profile file (collectives, compute, memory on an H100), written once."""

    @classmethod
    def setUpClass(cls):
        cls.tmpdir = tempfile.TemporaryDirectory()
        d = cls.tmpdir.name
        files = [synthetic.make_run(os.path.join(d, "r1.h5"), 1, ring_sizes=[1]),
                 synthetic.make_run(os.path.join(d, "r4.h5"), 4, ring_sizes=[1, 2, 4],
                                    bad_points={(2048, 4): "oom"}, straggler=3),
                 synthetic.make_run(os.path.join(d, "prof.h5"), 2, collectives=False)]
        synthetic.add_profile_sweeps(files[2], gpu_name="NVIDIA H100 80GB HBM3")
        cls.out = os.path.join(d, "rep")
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            cls.code = cli(["report"] + files + ["--out", cls.out, "--html"])
        with open(os.path.join(cls.out, "report.md")) as f:
            cls.md = f.read()
        with open(os.path.join(cls.out, "report.html")) as f:
            cls.html = f.read()
        with open(os.path.join(cls.out, "report.json")) as f:
            cls.json = json.load(f)
        cls.page = Page(cls.html)
        cls.files = files

    @classmethod
    def tearDownClass(cls):
        cls.tmpdir.cleanup()

    def test_written(self):
        self.assertEqual(self.code, 0)
        self.assertTrue(self.html.startswith("<!DOCTYPE html>"))

    def test_every_section_and_heading(self):
        heads = [line.lstrip("#").strip() for line in self.md.split("\n") if line.startswith("#")]
        for h in heads:
            self.assertIn(doc.plain(h), self.page.headings)
        for key in ("Summary", "Ring attention", "Cost-model prediction", "Collectives", "Point-to-point",
                    "Compute", "Memory", "Plots", "Status and parity"):
            self.assertIn(key, self.page.headings)

    def test_leads_with_the_numbers(self):
        """The first table of the page is the summary's headline table, before any figure."""
        self.assertEqual(self.page.tables[0][0][:3], ["result", "value", "% of peak"])
        self.assertLess(self.html.index("<table>"), self.html.index("plotly-graph-div"))
        self.assertLess(self.html.index("Verdicts:"), self.html.index("plotly-graph-div"))

    def test_tables_match_the_markdown(self):
        """Every table of report.md is in the page, in order, with the same cell texts."""
        md = md_tables(self.md)
        self.assertGreater(len(md), 8)
        self.assertEqual(len(self.page.tables), len(md))
        for m, h in zip(md, self.page.tables):
            self.assertEqual([[doc.plain(c) for c in row] for row in m], h)

    def test_numbers_are_the_json_numbers(self):
        """A ring point's total ms and a collective's peak busbw as report.json has them."""
        ring = next(t for t in self.page.tables if "total ms" in t[0])
        col = ring[0].index("total ms")
        shown = sorted(float(r[col]) for r in ring[1:] if r[col] != "-")
        want = sorted(float(f"{p['total_ms']:.3g}") for p in self.json["points"] if p["total_ms"] is not None)
        self.assertEqual(shown, want)
        coll = next(t for t in self.page.tables if "peak busbw" in t[0])
        self.assertEqual(len(coll) - 1, len(self.json["collectives"]))

    def test_offline(self):
        """No http(s) address in any src or href, plotly.js is inline, no script is fetched."""
        remote = [r for r in self.page.refs if re.match(r"^\s*(https?:)?//", r[2])]
        self.assertEqual(remote, [])
        self.assertFalse(re.search(r"<script[^>]*\bsrc=", self.html))
        self.assertFalse(re.search(r"<link[^>]*\bhref=", self.html))
        self.assertTrue(any("plotly.js v" in s[:500] for s in self.page.scripts))

    def test_plots_interactive_or_inlined(self):
        """Each plot of report.md is in the page: a plotly div for those with a builder, the PNG as
        data otherwise (the ring timeline); none is missing."""
        interactive = {"throughput", "strong_scaling", "exposed_comm", "memory", "efficiency_heatmap",
                       "ring_variance", "rank_spread", "bandwidth", "latency", "p2p_matrix", "compute",
                       "memory_bandwidth", "cost_model"}
        for name in self.json["plots"]:
            if name in interactive:
                self.assertIn(f"plot-{name}", self.page.ids, name)
        self.assertIn("ring_timeline", self.json["plots"])
        imgs = [v for t, k, v in self.page.refs if t == "img"]
        self.assertTrue(imgs and all(v.startswith("data:image/png;base64,") for v in imgs))

    def test_hover_says_value_variance_and_label(self):
        """A ring point's hover text names it and gives its CV and spread; a collective's its CV
        and quartiles; a failed point its status."""
        body = self.html[self.html.index('id="plot-throughput"'):]
        body = body[:body.index("</script>")]
        self.assertRegex(body, r"ring S=1024 R=2 [^\"]*CV between iterations: \d")
        self.assertIn("spread: slowest rank", body)
        self.assertIn("status oom", body)
        bw = self.html[self.html.index('id="plot-bandwidth"'):]
        self.assertRegex(bw[:bw.index("</script>")], r"CV between iterations: [\d.]+ %.*p25")

    def test_markdown_is_its_blocks(self):
        """report.md read into blocks and written back is the same text (the HTML's source)."""
        lines = self.md.split("\n")
        self.assertEqual([x for b in doc.parse(lines) for x in b.lines], lines)
        for b in doc.parse(lines):
            if b.kind == "table":
                self.assertTrue(all(len(r) == len(b.headers) for r in b.rows), b.headers)

    def test_markdown_unchanged_by_html(self):
        out = self.path("plain")
        report.build(self.files, out)
        with open(os.path.join(out, "report.md")) as f:
            self.assertEqual(f.read(), self.md)
        self.assertFalse(os.path.exists(os.path.join(out, "report.html")))


class Inline(unittest.TestCase):
    def test_marks_and_escapes(self):
        self.assertEqual(doc.inline_html("**a < b** `x&y` [r](report.md)"),
                         '<strong>a &lt; b</strong> <code>x&amp;y</code> <a href="report.md">r</a>')

    def test_web_links_stay_text(self):
        self.assertEqual(doc.inline_html("[site](https://example.org)"), "site (https://example.org)")


class Trend(tempdir_case.TempDirCase):
    def build(self, *extra):
        store = synthetic_store.make_store(self.path("nights"), nights=8, slow_night=6,
                                           report=lambda p, d: report.build([p], d))
        out = self.path("trend")
        with contextlib.redirect_stdout(io.StringIO()) as so, contextlib.redirect_stderr(io.StringIO()) as se:
            code = cli(["trend", store, "--out", out, "--min-bytes", "0"] + list(extra))
        self.assertEqual(code, 0, so.getvalue() + se.getvalue())
        with open(os.path.join(out, "trend.json")) as f:
            data = json.load(f)
        with open(os.path.join(out, "trend.html")) as f:
            return data, f.read(), out

    def test_slow_night_is_the_regression(self):
        data, page, _ = self.build()
        (kind,) = data["kinds"]
        ring = [s for s in kind["series"] if s["sweep"] == "ring"]
        self.assertEqual(len(ring), 4)
        for s in ring:
            regressions = [i for i, n in enumerate(s["nights"]) if n and n["verdict"] == "regression"]
            self.assertEqual(regressions, [6], s["point"])
            n = s["nights"][6]
            lo, hi = n["band"]
            self.assertGreater(n["value"], hi)  # above the band's worse edge (a time)
            self.assertLess(lo, n["ref_value"])
        everything = [n["verdict"] for s in kind["series"] for i, n in enumerate(s["nights"]) if n and i != 6]
        self.assertNotIn("regression", everything)
        self.assertIn("ring: total_time_s", Page(page).headings)

    def test_links_and_nights(self):
        data, page, out = self.build()
        entries = data["kinds"][0]["entries"]
        self.assertEqual([e["role"] for e in entries][:2], ["baseline", "night"])
        self.assertEqual(entries[0]["links"]["report"], os.path.relpath(
            os.path.join(self.path("nights"), "nightly_0", "report", "report.md"), out))
        self.assertNotIn("report", entries[4]["links"])  # no report was kept for that night
        hrefs = [v for t, k, v in Page(page).refs if t == "a"]
        self.assertIn(entries[0]["links"]["report"], hrefs)
        self.assertFalse([v for v in hrefs if v.startswith(("http:", "https:"))])

    def test_nights_limit(self):
        data, _, _ = self.build("--nights", "3")
        (kind,) = data["kinds"]
        self.assertEqual(len(kind["entries"]), 3)
        self.assertEqual(kind["total_entries"], 8)

    def test_judged_as_compare_judges(self):
        """The last night's verdict and limit per point are compare's, given the nights before
        it as --history (what the nightly runs before recording it)."""
        data, _, _ = self.build()
        store = os.path.join(self.path("nights"), "store")
        with open(os.path.join(store, "index.json")) as f:
            entries = next(iter(json.load(f).values()))
        base = next(e for e in reversed(entries) if e["role"] == "baseline")
        history = [a for e in entries[:-1] for a in ("--history", os.path.join(store, e["file"]))]
        out = self.path("compare.json")
        with contextlib.redirect_stdout(io.StringIO()):
            cli(["compare", os.path.join(store, base["file"]), os.path.join(store, entries[-1]["file"]),
                 "--min-bytes", "0", "--json", out] + history)
        with open(out) as f:
            rows = {(r["sweep"], r["point"], r["metric"]): r for r in json.load(f)["rows"]}
        series = data["kinds"][0]["series"]
        self.assertEqual(len(series), len(rows))
        for s in series:
            r, n = rows[(s["sweep"], s["point"], s["metric"])], s["nights"][-1]
            self.assertEqual((n["verdict"], round(n["limit"], 9)), (r["verdict"], round(r["limit"], 9)), s["point"])

    def test_lost_nights_left_out(self):
        """A night's file removed and another cut in half cost those nights, named, not the page."""
        store = synthetic_store.make_store(self.path("nights"), nights=5, slow_night=4)
        with open(os.path.join(store, "index.json")) as f:
            files = [e["file"] for e in next(iter(json.load(f).values()))]
        os.unlink(os.path.join(store, files[2]))
        with open(os.path.join(store, files[3]), "r+b") as f:
            f.truncate(os.path.getsize(os.path.join(store, files[3])) // 2)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            self.assertEqual(cli(["trend", store, "--out", self.path("t"), "--min-bytes", "0"]), 0)
        with open(self.path("t/trend.json")) as f:
            kind = json.load(f)["kinds"][0]
        self.assertEqual(len(kind["entries"]), 3)
        self.assertEqual(len(kind["left_out"]), 2)
        self.assertIn("missing", kind["left_out"][0])

    def test_unusable_store(self):
        for store in (self.path("none"), __file__):
            with contextlib.redirect_stderr(io.StringIO()) as err:
                self.assertEqual(cli(["trend", store, "--out", self.path("t")]), 2)
            self.assertIn("rb-analysis trend:", err.getvalue())


if __name__ == "__main__":
    unittest.main()
