"""rb-analysis report (issue #16): the numbers of report.md and report.json against the
synthetic files' known model, recomputed from the files with h5py; the device peaks; every plot
drawn from data (no empty panel); points_<sweep>.csv per sweep; untrustworthy numbers flagged."""
import contextlib
import io
import json
import os
import sys
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tempdir_case  # noqa: E402  (analysis/ on the path; skip without h5py)

import h5py  # noqa: E402
import matplotlib.figure  # noqa: E402
import numpy as np  # noqa: E402

import synthetic  # noqa: E402
from ringbench_analysis import fmt, peaks, report  # noqa: E402
from ringbench_analysis.__main__ import main as cli  # noqa: E402

H100 = "NVIDIA H100 80GB HBM3"


def axes_with_data(fig):
    """For each visible axes of a figure (colour bars aside): how many data artists it has
    (lines with finite points, not the peak and ideal reference lines; bars and boxes, also of height 0: a
    measured zero; images; scatter/error-bar collections)."""
    out = []
    for ax in fig.axes:
        if not ax.get_visible() or ax.get_label() == "<colorbar>":
            continue
        lines = [ln for ln in ax.get_lines() if np.isfinite(np.asarray(ln.get_ydata(), dtype=float)).any()
                 and len(ln.get_xdata()) and not any(w in ln.get_label() for w in ("peak", "ideal"))]
        out.append(len(lines) + len(ax.patches) + len(ax.images) + len(ax.collections))
    return out


def saved_name(path):
    """The plot's file name from what Figure.savefig was handed: outfile.save_figure passes its
    open temp file, .NAME.png.XXXX.tmp, whose name is NAME.png once renamed."""
    name = os.path.basename(str(getattr(path, "name", path)))
    return name[1:].rsplit(".", 2)[0] if name.endswith(".tmp") else name


class Base(tempdir_case.TempDirCase):
    def build(self, files, *extra):
        """rb-analysis report FILES --out DIR: (report.md, report.json, {png: [data per axes]})."""
        out = self.path("rep")
        drawn = {}
        real = matplotlib.figure.Figure.savefig

        def spy(fig, path, *a, **kw):
            drawn[saved_name(path)] = axes_with_data(fig)
            return real(fig, path, *a, **kw)
        with mock.patch.object(matplotlib.figure.Figure, "savefig", spy), \
                contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            rc = cli(["report"] + list(files) + ["--out", out] + list(extra))
        self.assertEqual(rc, 0)
        with open(os.path.join(out, "report.md")) as f:
            md = f.read()
        with open(os.path.join(out, "report.json")) as f:
            js = json.load(f)
        return md, js, drawn

    def gpu_pair(self, gpu=H100, **kw):
        """np1.h5 (one rank) and np2.h5 (two ranks, with collectives/compute/memory sweeps)."""
        one = synthetic.make_run(self.path("np1.h5"), 1, ring_sizes=[1], collectives=False, **kw)
        two = synthetic.make_run(self.path("np2.h5"), 2, ring_sizes=[1, 2], collectives=False, **kw)
        synthetic.add_profile_sweeps(two, gpu_name=gpu)
        return one, two


class PeaksTest(tempdir_case.TempDirCase):
    def test_known_gpus(self):
        for name, model in ((H100, "NVIDIA H100 SXM5"), ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe"),
                            ("NVIDIA H100 NVL", "NVIDIA H100 NVL"), ("NVIDIA H200", "NVIDIA H200 SXM"),
                            ("NVIDIA A100-SXM4-40GB", "NVIDIA A100 SXM4 40GB"),
                            ("NVIDIA A100 80GB PCIe", "NVIDIA A100 PCIe"),
                            ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 SXM4 80GB"), ("NVIDIA B200", "NVIDIA B200"),
                            ("NVIDIA GH200 480GB", "NVIDIA GH200 96GB HBM3"),
                            ("NVIDIA GH200 144G HBM3e", "NVIDIA GH200 144GB HBM3e")):
            self.assertEqual(peaks.lookup(name)["model"], model, name)
        self.assertIsNone(peaks.lookup("Acme Tensor 9000"))
        self.assertEqual(peaks.tflops(peaks.lookup(H100), "bf16"), 989.4)  # ring's name for bfloat16

    def test_override_file(self):
        got = peaks.load_override(tempdir_case.write_text(
            self.path("p.yaml"), "model: Acme X\ntflops: {bf16: 100, float32: 10}\nhbm_GBps: 1000\n"))
        self.assertEqual(got["tflops"], {"bfloat16": 100.0, "float32": 10.0})
        self.assertEqual((got["hbm_GBps"], got["pcie_GBps"]), (1000.0, None))
        self.assert_refused(peaks.load_override, "tflops: {bf16: -1}\n", peaks.PeaksError,
                            "tflops.bf16 must be a positive number")
        self.assert_refused(peaks.load_override, "hbm: 3\n", peaks.PeaksError, "unknown: hbm")


class ReportNumbersTest(Base):
    def test_collective_peak_per_variant(self):
        one, two = self.gpu_pair()
        md, js, _ = self.build([one, two])
        rows = {(r["operation"], r["group"], r["dtype"], r["in_place"]): r for r in js["collectives"]}
        with h5py.File(two, "r") as f:  # recomputed from the file: slowest rank, then max over sizes
            g = f["sweeps/coll"]
            bus, gs = g["busbw_Bps"][()], g["group_size"][()]
            keys = [tuple(x) for x in zip(g["points/operation"].asstr()[()], g["points/group"].asstr()[()],
                                          g["points/dtype"].asstr()[()], g["points/in_place"][()])]
        want = {}
        for p, key in enumerate(keys):
            if gs[:, p].max() >= 2:
                want[key] = max(want.get(key, 0.0), float(bus[:, p].min()))
        self.assertEqual(set(rows), set(want))
        for key, peak in want.items():
            self.assertAlmostEqual(rows[key]["peak_busbw"] / peak, 1.0, places=12)
            self.assertEqual(rows[key]["at_size"], synthetic.PROFILE_SIZES[-2])  # not the last size
            self.assertAlmostEqual(rows[key]["pct_of_link"], 100 * peak / 450e9)  # H100 NVLink, one way
            self.assertIn(f"| {key[0]} | {key[1]} | 2 | {key[2]} |", md)
        self.assertFalse(any(k[1] == "inter_node" for k in rows))  # one-rank groups: no link
        self.assertEqual({r["group"] for r in js["one_rank_groups_skipped"]}, {"inter_node"})
        head = {r["result"]: r for r in js["headline"]}
        best = synthetic.profile_bus("float32", 0, synthetic.PROFILE_SIZES[-2], rank=1)
        self.assertEqual(head["all_reduce peak busbw"]["value"], f"{best / 1e9:.3g} GB/s")
        self.assertIn("float32 out-of-place", head["all_reduce peak busbw"]["where"])

    def test_headline_busbw_from_a_group_the_screen_shows(self):
        """On one node intra_node is the world again: the screen leaves its rows out, so the
        headline's peak busbw comes from the world rows even when intra_node measured higher."""
        import pandas as pd  # pylint: disable=import-outside-toplevel
        from ringbench_analysis import headline, results  # pylint: disable=import-outside-toplevel
        rows = [{"file": "a.h5", "sweep": "coll", "operation": "all_reduce", "group": grp, "dtype": "float32",
                 "in_place": 0, "size": 1 << 20, "group_size": 2, "ranks": 2, "nodes": 1, "one_rank": False,
                 "busbw": bw, "algbw": bw, "time": 1e-3, "cv": 0.01, "wrong": 0}
                for grp, bw in (("world", 10e9), ("intra_node", 11e9))]
        variants, _ = results.collective_variants(pd.DataFrame(rows), None)
        got = headline.collective_rows(variants)
        self.assertEqual(len(got), 1)
        self.assertEqual(got[0]["value"], "10 GB/s")
        self.assertIn("world", got[0]["where"])
        alone = results.collective_variants(pd.DataFrame(rows[1:]), None)[0]  # no world group: shown
        self.assertEqual(headline.collective_rows(alone)[0]["value"], "11 GB/s")

    def test_ring_tflops_from_flops_and_time(self):
        one, two = self.gpu_pair()
        _, js, _ = self.build([one, two])
        got = {(p["run"], p["seq_len"], p["ring_size"]): p for p in js["points"]}
        for path in (one, two):
            with h5py.File(path, "r") as f:
                g = f["sweeps/ring"]
                total = np.median(g["total_time_s"][()], axis=2).max(axis=0)
                fwd = np.median(g["forward_time_s"][()], axis=2).max(axis=0)
                flop = g["forward_flop"][()].mean(axis=0)
                for p, key in enumerate(zip(g["points/seq_len"][()], g["points/ring_size"][()])):
                    pt = got[(os.path.basename(path), int(key[0]), int(key[1]))]
                    self.assertAlmostEqual(pt["tflops_total"], 3.5 * flop[p] / total[p] / 1e12, delta=1e-12)
                    self.assertAlmostEqual(pt["tflops_fwd"], flop[p] / fwd[p] / 1e12, delta=1e-12)
                    # fp32 ring: against the study's GPU (the H100 of np2.h5), dense fp32
                    self.assertAlmostEqual(pt["pct_of_peak"], 100 * pt["tflops_total"] / 66.9)
        r2 = [p for p in js["points"] if p["run"] == "np2.h5" and p["ring_size"] == 2]
        r1 = {p["seq_len"]: p for p in js["points"] if p["run"] == "np2.h5" and p["ring_size"] == 1}
        for p in r2:
            self.assertAlmostEqual(p["pct_of_single_gpu"], 100 * p["tflops_total"] / r1[p["seq_len"]]["tflops_total"])
            self.assertAlmostEqual(p["pct_of_peak"], 100 * p["tflops_total"] / 66.9)

    def test_compute_and_memory_against_peaks(self):
        one, two = self.gpu_pair()
        md, js, _ = self.build([one, two])
        gemm = {(r["dtype"], r["size"]): r for r in js["compute"]}
        for dt, top in synthetic.GEMM_TFLOPS.items():
            r = gemm[(dt, 4096)]
            self.assertAlmostEqual(r["tflops"], top / 1.05)  # the slower rank
            self.assertAlmostEqual(r["pct_of_peak"], 100 * top / 1.05 / peaks.lookup(H100)["tflops"][dt])
        mem = {r["kind"]: r for r in js["memory"]}
        self.assertAlmostEqual(mem["d2d"]["pct_of_peak"], 100 * 2 * 1.2e12 / 1.2 / 3350e9)  # reads + writes
        self.assertAlmostEqual(mem["h2d_pinned"]["pct_of_peak"], 100 * 40e9 / 1.2 / 64e9)
        self.assertIsNone(mem["triad"]["pct_of_peak"])  # host memory: no peak known
        first = md[:md.index("## Ring attention")]
        for r in js["headline"]:
            self.assertIn(r["value"], first)
        self.assertIn("| gemm bfloat16 | 571.4 TFLOP/s | 57.8 % |", first)
        self.assertIn("NVIDIA H100 SXM5", first)

    def test_every_plot_from_data(self):
        one, two = self.gpu_pair()
        md, js, drawn = self.build([one, two])
        want = {n for n, *_ in report.EXPECTED_PLOTS + report.PROFILE_PLOTS}
        self.assertEqual(set(js["plots"]), want, js["not_plotted"])
        for png in js["plots"].values():
            self.assertIn(f"({png})", md)
            self.assertTrue(drawn[png] and all(n > 0 for n in drawn[png]), f"{png}: empty panel {drawn[png]}")

    def test_points_csv_per_sweep(self):
        one, two = self.gpu_pair()
        _, js, _ = self.build([one, two])
        out = self.path("rep")
        for name, per_file in (("ring", 2 * 1 + 4 * 2), ("coll", None), ("compute", 4 * 2), ("memory", 3 * 2)):
            with open(os.path.join(out, f"points_{name}.csv")) as f:
                n = len(f.read().strip().splitlines()) - 1
            if per_file is not None:
                self.assertEqual(n, per_file, name)
            self.assertIn(f"points_{name}.csv", js["csv"])


def md_rows(md, heading):
    """{header: cell} per row of the first table under `heading`."""
    lines = md[md.index(heading):].splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("| "))
    head = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = []
    for ln in lines[start + 2:]:
        if not ln.startswith("| "):
            break
        rows.append(dict(zip(head, [c.strip() for c in ln.strip("|").split("|")])))
    return rows


class TablesMatchJsonTest(Base):
    def test_tables_show_the_json_numbers(self):
        one, two = self.gpu_pair()
        md, js, _ = self.build([one, two])
        ring = {(p["run"], p["seq_len"], p["ring_size"]): p for p in js["points"]}
        rows = md_rows(md, "## Ring attention")
        self.assertEqual(len(rows), len(ring))
        for r in rows:
            p = ring[(r["file"], int(r["S"]), int(r["R"]))]
            self.assertEqual(r["total"], fmt.tflops(p["tflops_total"]))
            self.assertEqual(r["TFLOP/s/GPU fwd"], fmt.tflops(p["tflops_fwd"]))
            self.assertEqual(r["total ms"], fmt.ms(p["total_ms"]))
            self.assertEqual(r["% of peak"], fmt.pct(p["pct_of_peak"]))
        gemm = {(r["dtype"], r["size"]): r for r in js["compute"]}
        for r in md_rows(md, "## Compute"):
            g = gemm[(r["dtype"], int(r["n / rows"]))]
            self.assertEqual((r["TFLOP/s"], r["% of peak"]), (fmt.tflops(g["tflops"]), fmt.pct(g["pct_of_peak"])))
        mem = {r["kind"]: r for r in js["memory"]}
        for r in md_rows(md, "## Memory"):
            self.assertEqual(r["bandwidth"], fmt.si(mem[r["kind"]]["bandwidth"], "B/s"))
        coll = {(r["operation"], r["group"], r["dtype"], "in-place" if r["in_place"] else "out-of-place"): r
                for r in js["collectives"]}
        rows = md_rows(md, "## Collectives")
        self.assertEqual(len(rows), len(coll))
        for r in rows:
            c = coll[(r["operation"], r["group"], r["dtype"], r["variant"])]
            self.assertEqual((r["peak busbw"], r["at size"]), (fmt.si(c["peak_busbw"], "B/s"), fmt.size(c["at_size"])))


class OverlapColumnsTest(Base):
    """Issue #26: the transport that ran (a column only where the points used more than one, as
    on the run's screen) and the overlap calibration (hidden: the lowest rank's overlap
    efficiency in %; kernel x alone: the highest rank's kernel slowdown), described in the
    file's own words."""
    # Per rank (2) and point ((1024, 1), (1024, 2), (2048, 1), (2048, 2)): NaN at R=1 (no
    # calibration), no backward figure at (2048, 2).
    NAN = np.nan
    METRICS = {"overlap_efficiency": [[NAN, 0.97, NAN, 0.42], [NAN, 0.91, NAN, 0.88]],
               "backward_overlap_efficiency": [[NAN, 0.995, NAN, NAN], [NAN, 0.993, NAN, NAN]],
               "kernel_slowdown": [[NAN, 1.04, NAN, 1.01], [NAN, 1.09, NAN, 1.003]],
               "backward_kernel_slowdown": [[NAN, 1.02, NAN, NAN], [NAN, 1.005, NAN, NAN]]}

    def overlap_file(self, transports):
        """A 2-rank host-like file with the calibration and `transports` per point (every rank)."""
        f = synthetic.make_run(self.path("ov.h5"), 2, seq_lens=(1024, 2048), ring_sizes=[1, 2],
                               collectives=False, pingpong=False, p2p=False)
        with h5py.File(f, "r+") as h:
            g = h["sweeps/ring"]
            for name, v in self.METRICS.items():
                synthetic.dataset(g, name, np.array(v), "1", f"{name}: said by the file", "metric")
            synthetic.dataset(g, "transport", np.array([transports] * 2, dtype=object), "1",
                              "transport: said by the file", "metric")
            synthetic.dataset(g, "transport_reason", np.array([["asked for"] * 4] * 2, dtype=object), "1",
                              "why", "metric")
        return f

    def test_overlap_worst_rank(self):
        md, js, _ = self.build([self.overlap_file(["mpi"] * 4)])
        rows = {(int(r["S"]), int(r["R"])): r for r in md_rows(md, "## Ring attention")}
        self.assertNotIn("transport", rows[(1024, 1)])  # one transport: no column
        self.assertEqual(rows[(1024, 2)]["hidden % fwd/bwd"], "91.0/99.3")  # lowest rank's
        self.assertEqual(rows[(1024, 2)]["kernel x alone fwd/bwd"], "1.09/1.02")  # highest rank's
        self.assertEqual(rows[(2048, 2)]["hidden % fwd/bwd"], "42.0")  # no backward figure
        self.assertEqual(rows[(2048, 2)]["kernel x alone fwd/bwd"], "1.01")
        for key in ((1024, 1), (2048, 1)):
            self.assertEqual((rows[key]["hidden % fwd/bwd"], rows[key]["kernel x alone fwd/bwd"]), ("-", "-"))
        got = {(p["seq_len"], p["ring_size"]): p for p in js["points"]}
        with h5py.File(self.path("ov.h5"), "r") as h:  # recomputed from the file
            g = h["sweeps/ring"]
            for p, key in enumerate(zip(g["points/seq_len"][()], g["points/ring_size"][()])):
                pt = got[(int(key[0]), int(key[1]))]
                self.assertEqual(pt["transport"], "mpi")
                self.assertEqual(pt["transport_reason"], "asked for")
                for name, pick in (("overlap_efficiency", np.nanmin), ("backward_overlap_efficiency", np.nanmin),
                                   ("kernel_slowdown", np.nanmax), ("backward_kernel_slowdown", np.nanmax)):
                    v = g[name][:, p]
                    if np.isfinite(v).any():
                        self.assertAlmostEqual(pt[name], float(pick(v)), places=12)
                    else:
                        self.assertIsNone(pt[name])
        words = md[md.index("## Ring attention"):md.index("| sweep |")]
        self.assertIn("overlap_efficiency: said by the file", words)  # the file's description
        self.assertIn("kernel_slowdown: said by the file", words)
        self.assertNotIn("transport: said by the file", words)  # no transport column

    def test_transport_column_where_several(self):
        md, js, _ = self.build([self.overlap_file(["mpi", "nccl", "mpi", "copy_engine"])])
        rows = md_rows(md, "## Ring attention")
        self.assertEqual({(int(r["S"]), int(r["R"])): r["transport"] for r in rows},
                         {(1024, 1): "mpi", (1024, 2): "nccl", (2048, 1): "mpi", (2048, 2): "copy_engine"})
        self.assertIn("transport: said by the file", md[md.index("## Ring attention"):md.index("| sweep |")])
        where = [r["where"] for r in js["headline"] if r["result"].startswith("ring attention")]
        self.assertTrue(where and all(" via " in w for w in where), where)

    def test_headline_names_the_scheme(self):
        # A scheme sweep's best point may be Ulysses: "ring attention, best point" must say so.
        import pandas as pd
        from ringbench_analysis import headline
        row = pd.Series({"sweep": "schemes", "seq_len": 131072, "ring_size": 4, "layout": "contiguous",
                         "kernel": "cudnn", "dtype": "bf16", "scheme": "ulysses", "transport": "nccl",
                         "tflops_total": 530.2, "tflops_fwd": 594.1, "total_ms": 232.0,
                         "pct_of_single_gpu": float("nan"), "pct_of_peak": 53.6, "untrustworthy": ""})
        self.assertTrue(headline._ring_row("best", row)["where"].endswith(" scheme ulysses"))
        self.assertNotIn(" scheme ", headline._ring_row("best", row.replace("ulysses", "ring"))["where"])

    def test_files_without_the_calibration(self):
        f = synthetic.make_run(self.path("old.h5"), 2, seq_lens=(1024,), ring_sizes=[2],
                               collectives=False, pingpong=False, p2p=False)
        md, js, _ = self.build([f])
        head = md_rows(md, "## Ring attention")[0]
        self.assertFalse({"transport", "hidden % fwd/bwd", "kernel x alone fwd/bwd"} & set(head))
        self.assertNotIn("in the file's words", md)
        self.assertIsNone(js["points"][0]["overlap_efficiency"])
        self.assertEqual(js["points"][0]["transport"], "")


class TrustTest(Base):
    def test_cv_and_efficiency_flags(self):
        # synthetic iterations 0.9, 1.0, 1.2 x the median: CV 15 %; the 2-rank file twice as
        # fast as the model: strong efficiency 2 at ring size 2
        one = synthetic.make_run(self.path("np1.h5"), 1, ring_sizes=[1], seq_lens=(1024,))
        two = synthetic.make_run(self.path("np2.h5"), 2, ring_sizes=[2], seq_lens=(1024,), slow_factor=0.5)
        md, js, _ = self.build([one, two])
        first = md[:md.index("## Ring attention")]
        self.assertIn("**Untrustworthy", first)
        self.assertIn("efficiency 2.00 > 1", first)
        self.assertIn("CV 15 % > 5 %", first)
        self.assertTrue(any("efficiency 2.00 > 1" in x for x in js["untrustworthy"]))

    def test_no_point_measured(self):
        # every ring point failed: the report still says so first, and has no ring numbers
        f = synthetic.make_run(self.path("bad.h5"), 2, seq_lens=(1024,), bad_points={(1024, 2): "parity_failed"},
                               collectives=False, pingpong=False, p2p=False)
        md, js, _ = self.build([f])
        first = md[:md.index("## Ring attention")]
        self.assertIn("**FAILED: ", first)
        self.assertIn("ring point 0 (S=1024, ring size 2): status parity_failed", first)
        self.assertIn("**parity_failed**", md)
        self.assertIsNone(js["points"][0]["tflops_total"])

    def test_parity_off_is_said_first(self):
        # validate.reference: off on one point: the summary and the status section say so in
        # bold; sampled points are counted; "parity passed on every ring point" is not claimed
        f = synthetic.make_run(self.path("off.h5"), 2, seq_lens=(1024, 2048), ring_sizes=[2],
                               collectives=False, pingpong=False, p2p=False)
        with h5py.File(f, "r+") as h:
            modes = np.array([["off", "sampled"]] * 2, dtype=object)
            synthetic.dataset(h["sweeps/ring"], "parity_mode", modes, "1", "full | sampled | off", "metric")
        md, js, _ = self.build([f])
        first = md[:md.index("## Ring attention")]
        self.assertIn("**Parity off for 1 ring point(s)**", first)
        self.assertNotIn("parity passed on every ring point", first)
        self.assertIn("Parity checked: off: 1, sampled: 1 point(s)", md)
        self.assertIn("S=1024 R=2", md[md.index("## Status and parity"):])
        self.assertEqual(js["parity_modes"], {"off": 1, "sampled": 1})

    def test_unknown_gpu_and_peaks_file(self):
        one, two = self.gpu_pair(gpu="Acme Tensor 9000")
        md, js, _ = self.build([one, two])
        self.assertIsNone(js["peaks"])
        self.assertIn("unknown GPU (Acme Tensor 9000): give its peaks with --peaks", md)
        p = self.path("peaks.yaml")
        with open(p, "w") as f:
            f.write("model: Acme Tensor 9000\ntflops: {bfloat16: 1200, float32: 80}\nhbm_GBps: 2400\n")
        md, js, _ = self.build([one, two], "--peaks", p)
        gemm = {(r["dtype"], r["size"]): r for r in js["compute"]}
        self.assertAlmostEqual(gemm[("bfloat16", 4096)]["pct_of_peak"], 100 * 600 / 1.05 / 1200)
        self.assertIn(f"--peaks {p}", md)
        with open(p, "w") as f:
            f.write("tflops: 3\n")
        with contextlib.redirect_stderr(io.StringIO()) as err:
            self.assertEqual(cli(["report", two, "--out", self.path("bad"), "--peaks", p]), 2)
        self.assertIn("tflops must map a dtype", err.getvalue())


if __name__ == "__main__":
    unittest.main()
