"""Unit tests of the contention analysis (ringbench_analysis/contention.py and the report's
"Contention" section) on synthetic contention files with known numbers
(synthetic.make_contention_run: medians, CVs and slowdowns from CONTENTION_MODEL).
Run: PYTHONPATH=analysis python3 -m unittest discover -s tests/analysis -p test_contention.py
"""
import contextlib
import io
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from tempdir_case import TempDirCase  # noqa: E402  (first: analysis/ on the path, skip without h5py)

import h5py  # noqa: E402
import numpy as np  # noqa: E402

import synthetic  # noqa: E402
from ringbench_analysis import contention, reader, report  # noqa: E402
from ringbench_analysis.__main__ import main as cli  # noqa: E402

MODEL = synthetic.CONTENTION_MODEL
PNG = b"\x89PNG\r\n\x1a\n"


class Base(TempDirCase):

    def load(self, name="c.h5", **kw):
        p = synthetic.make_contention_run(self.path(name), **kw)
        return contention.read(reader.load(p).sweeps[kw.get("name", "contention")])

    def row(self, table, phase, workload):
        r = table[(table["phase"] == phase) & (table["workload"] == workload)]
        self.assertEqual(len(r), 1, f"{phase} {workload}")
        return r.iloc[0]


class ReadTest(Base):
    def test_tables(self):
        c = self.load(world=4, feeders=1)
        npts = len(MODEL) * 2
        # phase, what was measured, the other keys, binding last
        self.assertEqual(list(c.points.columns), ["phase", "workload", "iterations", "label", "binding"])
        self.assertEqual(c.shape_keys, ["workload"])  # label differs per phase: not a shape key
        self.assertEqual(len(c.points), npts)
        self.assertEqual(c.phases, list(MODEL))
        self.assertEqual(c.measuring_ranks(), [0, 1, 2])
        # every measuring rank times every point (alone in its own turn); the feeder never
        self.assertEqual(len(c.samples), 3 * npts * synthetic.CONTENTION_ITERATIONS)
        self.assertNotIn(3, set(c.samples["rank"]))
        self.assertEqual(len(c.placement), 4 * npts)
        bound = c.placement[(c.placement["phase"] == "concurrent_bound:numa") & (c.placement["rank"] == 2)]
        self.assertEqual(set(bound["cpuset"]), {"2"})
        self.assertEqual(set(c.placement[c.placement["rank"] == 3]["role"]), {"feeder"})
        # monitor: one row per finite sample; the last rank's series is one sample shorter
        per_rank = c.monitor.groupby("rank").size()
        self.assertEqual(per_rank[3], per_rank[0] - 1)
        self.assertIn("cpu_busy_mean", c.monitor)
        self.assertTrue(c.monitor["sm_clock_hz"].isna().all())
        self.assertIn("gpu: cannot load libnvidia-ml.so.1", c.unavailable[0][0])
        self.assertEqual(c.gpu_watchers(), {})

    def test_phase_spans_cover_every_rank_stamp(self):
        c = self.load()
        spans = contention.phase_spans(c)
        self.assertEqual([s[0] for s in spans], c.phases)
        for ph, t0, t1 in spans:
            rows = c.placement[c.placement["phase"] == ph]
            self.assertEqual(t0, np.nanmin(rows["phase_start_s"]))
            self.assertEqual(t1, np.nanmax(rows["phase_end_s"]))
        for (_, _, end), (_, start, _) in zip(spans, spans[1:]):
            self.assertGreaterEqual(start, end)  # phases in order, cooldown between

    def test_layout_error_names_the_dataset(self):
        p = synthetic.make_contention_run(self.path("c.h5"))
        with h5py.File(p, "r+") as f:
            del f["sweeps/contention/time_s"]
        with self.assertRaisesRegex(contention.ContentionError, "time_s"):
            contention.read(reader.load(p).sweeps["contention"])


class StatsTest(Base):
    def test_median_cv_percentiles_slowdown_spread(self):
        c = self.load(world=4, feeders=1)
        t = contention.summary(c)
        z = synthetic.contention_z(synthetic.CONTENTION_ITERATIONS)
        for phase, (slow, cv) in MODEL.items():
            for w in ("triad", "host_attention"):
                r = self.row(t, phase, w)
                mid = synthetic.contention_median(phase, w, 1)  # the middle one of ranks 0, 1, 2
                self.assertEqual(r["ranks"], 3)
                self.assertAlmostEqual(r["median_s"], mid, places=12)
                self.assertAlmostEqual(r["cv"], cv, places=9)
                self.assertAlmostEqual(r["p95_s"], mid * (1 + cv * np.percentile(z, 95)), places=12)
                self.assertAlmostEqual(r["p99_s"], mid * (1 + cv * np.percentile(z, 99)), places=12)
                self.assertAlmostEqual(r["slowdown"], slow, places=9)
                self.assertAlmostEqual(r["worst_slowdown"], slow, places=9)
                self.assertAlmostEqual(r["spread"], 1.02, places=9)  # ranks 1 % apart

    def test_per_rank_keeps_each_gpu_apart(self):
        """per_rank: one row per (shape, measuring rank), the rank's own median, CV and slowdown
        per phase (the synthetic ranks are 1 % apart: rank r's median is base x (1 + r/100))."""
        c = self.load(world=4, feeders=1)
        t = contention.per_rank(c)
        self.assertEqual(len(t), 2 * 3)  # 2 workloads x 3 measuring ranks, no feeder
        self.assertEqual(sorted(set(t["rank"])), [0, 1, 2])
        for _, r in t.iterrows():
            for phase, (slow, cv) in MODEL.items():
                self.assertAlmostEqual(r[f"{phase} median_s"],
                                       synthetic.contention_median(phase, r["workload"], r["rank"]), places=12)
                self.assertAlmostEqual(r[f"{phase} slowdown"], slow, places=9)
                self.assertAlmostEqual(r[f"{phase} cv"], cv, places=9)
        g = synthetic.make_contention_run(self.path("g.h5"), world=4, feeders=1)
        with h5py.File(g, "r+") as f:  # the ranks on GPUs 3, 2, 1, 0 (a new file: the reader
            f["ranks/gpu_index"][...] = np.array([3, 2, 1, 0])  # may hold c.h5 open)
        c = contention.read(reader.load(g).sweeps["contention"])
        t = contention.per_rank(c)
        self.assertEqual(dict(zip(t["rank"], t["gpu_index"])), {0: 3, 1: 2, 2: 1})

    def test_agrees_with_the_files_own_per_rank_statistics(self):
        # the synthetic file stores per-rank median_s / cv / slowdown computed with numpy
        p = synthetic.make_contention_run(self.path("c.h5"), world=3, feeders=0)
        c = contention.read(reader.load(p).sweeps["contention"])
        st = contention.rank_stats(c)
        with h5py.File(p, "r") as f:
            for col, name in (("median_s", "median_s"), ("cv", "cv"), ("slowdown", "slowdown"),
                              ("p95_s", "p95_s"), ("p99_s", "p99_s")):
                stored = f[f"sweeps/contention/{name}"][()]
                got = stored[st["rank"].to_numpy(), st["point"].to_numpy()]
                np.testing.assert_allclose(st[col].to_numpy(), got, rtol=1e-12)

    def test_slowdown_missing_without_alone(self):
        c = self.load(phases=["concurrent_unbound", "concurrent_bound:numa"])
        t = contention.summary(c)
        self.assertTrue(t["slowdown"].isna().all())
        self.assertAlmostEqual(self.row(t, "concurrent_unbound", "triad")["cv"], 0.12, places=9)

    def test_tuning_mismatch_with_a_path_key(self):
        paths = {"alone": {"flash": 1.0, "cudnn": 1.1},
                 "concurrent_unbound": {"flash": 1.2, "cudnn": 1.0},   # fastest path flips
                 "concurrent_bound:numa": {"flash": 1.0, "cudnn": 1.05}}
        c = self.load(phases=list(paths), workloads=("attention", "triad"), paths=paths)
        self.assertIn("path", c.points)
        m = contention.tuning_mismatch(c).set_index("phase")
        self.assertEqual(list(m["shapes"]), [2, 2, 2])
        self.assertEqual(m.loc["concurrent_unbound", "mismatched"], 2)
        self.assertEqual(m.loc["concurrent_unbound", "fraction"], 1.0)
        self.assertEqual(m.loc["concurrent_bound:numa", "mismatched"], 0)
        self.assertIn("attention: flash -> cudnn", m.loc["concurrent_unbound", "changes"])
        self.assertIsNone(contention.tuning_mismatch(self.load("plain.h5")))

    def test_counter_rates(self):
        # migrations: 25/s on every rank while two or more ranks run, scaled by 1 + 0.1 * rank
        c = self.load(world=2, feeders=0, phases=["alone", "concurrent_unbound"], workloads=("triad",))
        mig = [p for p in contention.monitor_panels(c) if p["title"].startswith("CPU migrations")][0]
        peaks = {label: float(np.max(y)) for label, _, y, _, _ in mig["lines"]}
        self.assertAlmostEqual(peaks["rank 0"], 25.0, places=6)
        self.assertAlmostEqual(peaks["rank 1"], 27.5, places=6)


class VerdictTest(Base):
    def sentences(self, c):
        return {(v["policy"], v["shape"]): v for v in contention.verdicts(contention.summary(c))}

    def test_improvement_and_no_improvement(self):
        v = self.sentences(self.load())
        numa = v[("numa", "triad")]
        self.assertTrue(numa["helped"])
        self.assertEqual(numa["sentence"],
                         "numa binding cut CV from 0.12 to 0.03 and slowdown from 18 % to 2 % on triad.")
        core = v[("core", "triad")]  # slower than unbound, same CV
        self.assertFalse(core["helped"])
        self.assertEqual(core["sentence"], "core binding did not help on triad: slowdown rose from "
                                           "18 % to 30 %; CV 0.12 -> 0.12 is within noise.")
        near = v[("gpu-near", "host_attention")]  # the same as unbound within noise
        self.assertFalse(near["helped"])
        self.assertEqual(near["sentence"], "gpu-near binding did not help on host_attention: "
                                           "CV 0.12 -> 0.12 and slowdown 18 % -> 17 % are within noise.")
        self.assertEqual(len(v), 3 * 2)  # one per bound policy and workload

    def test_mixed_change_did_not_help(self):
        model = {"alone": (1.0, 0.02), "concurrent_unbound": (1.05, 0.12),
                 "concurrent_bound:core": (1.15, 0.03)}  # steadier but slower
        v = self.sentences(self.load(model=model, workloads=("triad",)))[("core", "triad")]
        self.assertFalse(v["helped"])
        self.assertEqual(v["sentence"], "core binding did not help on triad: slowdown rose from 5 % "
                                        "to 15 % while CV fell from 0.12 to 0.03.")

    def test_noise_floor(self):
        # steady timings (CV 0.001): the statistical band is tiny, so the 2 % floor decides
        model = {"alone": (1.0, 0.001), "concurrent_unbound": (1.10, 0.001),
                 "concurrent_bound:core": (1.10 * 0.985, 0.001),   # 1.5 % faster: noise
                 "concurrent_bound:numa": (1.10 * 0.975, 0.001)}   # 2.5 % faster: counts
        v = self.sentences(self.load(model=model, workloads=("triad",)))
        self.assertFalse(v[("core", "triad")]["helped"])
        self.assertIn("within noise", v[("core", "triad")]["sentence"])
        self.assertTrue(v[("numa", "triad")]["helped"])
        self.assertTrue(v[("numa", "triad")]["sentence"].startswith(
            "numa binding cut slowdown from 10 % to 7.3 % on triad; CV"))

    def test_median_time_without_alone(self):
        v = self.sentences(self.load(phases=["concurrent_unbound", "concurrent_bound:numa"],
                                     workloads=("triad",)))[("numa", "triad")]
        self.assertTrue(v["helped"])
        self.assertEqual(v["sentence"], "numa binding cut CV from 0.12 to 0.03 and median time "
                                        "from 11.9 ms to 10.3 ms on triad.")

    def test_no_unbound_phase_no_verdict(self):
        c = self.load(phases=["alone", "concurrent_bound:numa"])
        self.assertEqual(contention.verdicts(contention.summary(c)), [])


class MonitorPanelTest(Base):
    def panels(self, c, backend="host"):
        return {p["title"]: p for p in contention.monitor_panels(c, backend)}

    def test_nan_series_give_an_unavailable_panel_with_the_reason(self):
        p = self.panels(self.load(gpu=False, migrations=False))
        for title in ("GPU clocks", "GPU power", "GPU temperature", "PCIe throughput"):
            self.assertEqual(p[title]["lines"], [])
            self.assertIn("gpu: cannot load libnvidia-ml.so.1", p[title]["unavailable"])
        self.assertEqual(p["CPU migrations per rank"]["unavailable"],
                         "migrations: /proc/self/sched has no se.nr_migrations")
        self.assertIsNone(p["CPU utilisation (node)"]["unavailable"])
        self.assertIsNone(p["Context switches per rank"]["unavailable"])
        self.assertEqual(len(p["Context switches per rank"]["lines"]), 2 * 4)  # 2 kinds x 4 ranks

    def test_gpu_series_drawn_and_a_metric_line_explains_only_its_panel(self):
        path = synthetic.make_contention_run(self.path("g.h5"), gpu=True)
        with h5py.File(path, "r+") as f:  # power unsupported on this GPU
            g = f["sweeps/contention/monitor"]
            g["power_w"][...] = np.nan
            synthetic_line = "gpu power_w: nvmlDeviceGetPowerUsage not supported on this GPU"
            del g["unavailable"]
            synthetic.dataset(g, "unavailable", [synthetic_line] + [""] * 3, "1", "why", "metric")
        c = contention.read(reader.load(path).sweeps["contention"])
        p = self.panels(c, "cuda")
        self.assertEqual(p["GPU power"]["unavailable"], synthetic_line)
        self.assertIsNone(p["GPU clocks"]["unavailable"])
        sm = [ln for ln in p["GPU clocks"]["lines"] if ln[0].startswith("SM")]
        self.assertEqual([ln[0] for ln in sm], ["SM, GPU of rank 0"])
        self.assertAlmostEqual(float(np.max(sm[0][2])), 1980.0)  # MHz
        self.assertEqual(c.gpu_watchers(), {0: "00000000:01:00.0"})

    def test_no_rank_watched_a_gpu(self):
        path = synthetic.make_contention_run(self.path("h.h5"))
        with h5py.File(path, "r+") as f:
            g = f["sweeps/contention/monitor"]
            del g["unavailable"]
            synthetic.dataset(g, "unavailable", [""] * 4, "1", "why", "metric")
        c = contention.read(reader.load(path).sweeps["contention"])
        self.assertEqual(self.panels(c, "host")["GPU power"]["unavailable"],
                         "no rank watched a GPU (backend host)")

    def test_unavailable_panel_is_drawn(self):
        from ringbench_analysis import plots
        c = self.load(gpu=False)
        out = plots.contention_monitor(contention.monitor_panels(c, "host"), contention.phase_spans(c),
                                       c.phases, self.dir, "m.png", "monitors")
        with open(out, "rb") as f:
            self.assertEqual(f.read(8), PNG)

    def test_without_monitor_group(self):
        c = self.load(monitor=False)
        p = contention.monitor_panels(c)
        self.assertTrue(all(x["unavailable"] and "monitor" in x["unavailable"] for x in p))


class ReportTest(Base):
    def build(self, *files):
        out = self.path("report")
        with contextlib.redirect_stdout(io.StringIO()):
            summary = report.build(list(files), out)
        with open(os.path.join(out, "report.md")) as f:
            return out, f.read(), summary

    def test_contention_section(self):
        out, md, summary = self.build(synthetic.make_contention_run(self.path("c.h5")))
        self.assertIn("## Contention", md)
        sec = md[md.index("## Contention"):md.index("## Plots")]
        # verdicts lead, then the table, then the plots
        self.assertLess(sec.index("### Verdicts"), sec.index("### Per phase"))
        self.assertIn("- numa binding cut CV from 0.12 to 0.03 and slowdown from 18 % to 2 % on triad.", sec)
        self.assertIn("| concurrent_bound:numa | numa | triad | 3 | 10.3 ms | 0.03 |", sec)
        self.assertIn("GPU clocks, GPU power, GPU temperature, PCIe throughput: unavailable: gpu: "
                      "cannot load libnvidia-ml.so.1", sec)
        for name in ("contention_contention_boxes", "contention_contention_monitor"):
            self.assertIn(f"({name}.png)", sec)
            self.assertEqual(summary["plots"][name], f"{name}.png")
            with open(os.path.join(out, f"{name}.png"), "rb") as f:
                self.assertEqual(f.read(8), PNG)
        # per rank: rank 1's triad, 1 % slower than rank 0 in every phase, its own slowdown
        self.assertLess(sec.index("### Per phase"), sec.index("### Per rank"))
        tri = synthetic.contention_median("alone", "triad", 1)
        self.assertIn(f"| triad | rank 1 | {contention.fmt_time(tri)} (0.02) | "
                      f"{contention.fmt_time(tri * 1.18)} (0.12, 18 %) |", sec)
        with open(os.path.join(out, "report.json")) as f:
            js = json.load(f)["contention"][0]
        self.assertEqual(len(js["per_rank"]), 6)
        self.assertEqual(len(js["verdicts"]), 6)
        self.assertAlmostEqual(js["table"][2]["slowdown"], 1.18)

    def test_path_mismatch_column(self):
        paths = {"alone": {"flash": 1.0, "cudnn": 1.1}, "concurrent_unbound": {"flash": 1.2, "cudnn": 1.0}}
        _, md, _ = self.build(synthetic.make_contention_run(
            self.path("c.h5"), phases=list(paths), workloads=("attention",), paths=paths))
        self.assertIn("path mismatches |", md)
        self.assertIn("| concurrent_unbound | 1 | 1 | 100% | attention: flash -> cudnn |", md)

    def test_failed_workload_is_listed(self):
        p = synthetic.make_contention_run(self.path("c.h5"), world=2, feeders=0, workloads=("triad",))
        with h5py.File(p, "r+") as f:  # rank 1 failed the numa point: no times, an error text
            g = f["sweeps/contention"]
            phases = g["points/phase"].asstr()[()].tolist()
            point = phases.index("concurrent_bound:numa")
            err = g["error"].asstr()[()].astype(object)
            err[1, point] = "cannot allocate 64 MiB"
            del g["error"]
            synthetic.dataset(g, "error", err, "1", "why", "metric")
            t = g["time_s"][()]
            t[1, point] = np.nan
            g["time_s"][...] = t
        _, md, _ = self.build(p)
        self.assertIn("- rank 1, concurrent_bound:numa, triad: cannot allocate 64 MiB", md)
        self.assertIn("| concurrent_bound:numa | numa | triad | 1 |", md)  # one rank measured

    def test_no_section_without_a_contention_sweep(self):
        _, md, summary = self.build(synthetic.make_run(self.path("r.h5"), 2))
        self.assertNotIn("## Contention", md)
        self.assertNotIn("contention", summary)

    def test_unreadable_contention_sweep_is_a_problem_not_a_crash(self):
        p = synthetic.make_contention_run(self.path("c.h5"))
        with h5py.File(p, "r+") as f:
            del f["sweeps/contention/time_s"]
        out = self.path("report")
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            self.assertEqual(cli(["report", p, "--out", out, "--strict"]), 1)
        with open(os.path.join(out, "report.md")) as f:
            self.assertIn("not analysed", f.read())


# ---- the sweep's own rows key and tuning_mismatch/ group (src/sweeps/contention.cpp) ----
FLIP = {"alone": {"flash": 1.0, "cudnn": 1.1}, "concurrent_unbound": {"flash": 1.2, "cudnn": 1.0}}


def add_rows(path, rows_of_path):
    """points/rows as the sweep writes it: rows per point from its path."""
    with h5py.File(path, "r+") as f:
        g = f["sweeps/contention/points"]
        rows = [rows_of_path[p] for p in g["path"].asstr()[()]]
        d = g.create_dataset("rows", data=np.asarray(rows, dtype=np.int64))
        d.attrs["role"], d.attrs["units"], d.attrs["description"] = "key", "1", "rows"


def add_stored_mismatch(path, fractions):
    with h5py.File(path, "r+") as f:
        g = f["sweeps/contention"].create_group("tuning_mismatch")
        g.attrs["reference"] = "alone"
        n = len(fractions)
        g["phase"] = np.asarray(list(FLIP)[:n], dtype=h5py.string_dtype())
        g["shapes"] = np.full(n, 1, dtype=np.int64)
        g["mismatched"] = np.asarray([round(x) for x in fractions], dtype=np.int64)
        g["fraction"] = np.asarray(fractions, dtype=float)
        g["changes"] = np.asarray([""] * n, dtype=h5py.string_dtype())


class RowsAndStoredMismatchTest(Base):
    build = ReportTest.build

    def run_file(self, rows_of_path, fractions=None):
        p = synthetic.make_contention_run(self.path("c.h5"), phases=list(FLIP),
                                          workloads=("attention",), paths=FLIP)
        add_rows(p, rows_of_path)
        if fractions is not None:
            add_stored_mismatch(p, fractions)
        return p

    def test_rows_is_a_shape_key(self):
        c = contention.read(reader.load(self.run_file({"flash": 2048, "cudnn": 8192})).sweeps["contention"])
        self.assertEqual(c.shape_keys, ["workload", "path", "rows"])
        # each (workload, rows) has one path: nothing to choose between, so no mismatch table
        self.assertIsNone(contention.tuning_mismatch(c))
        t = contention.summary(c)
        self.assertTrue((t[t["phase"] == "alone"]["slowdown"] == 1.0).all())
        self.assertEqual(contention.shape_label(t.iloc[0], c.shape_keys), "attention (flash, rows 2048)")

    def test_stored_mismatch_agrees(self):
        p = self.run_file({"flash": 2048, "cudnn": 2048}, fractions=[0.0, 1.0])
        c = contention.read(reader.load(p).sweeps["contention"])
        m = contention.tuning_mismatch(c)
        self.assertEqual(list(m["fraction"]), [0.0, 1.0])
        self.assertIn("attention, 2048: flash -> cudnn", m["changes"].iloc[1])
        self.assertEqual(contention.mismatch_disagreement(m, contention.stored_tuning_mismatch(c)), [])
        _, md, _ = self.build(p)
        self.assertNotIn("tuning_mismatch/ differs", md)

    def test_stored_mismatch_that_differs_is_reported(self):
        p = self.run_file({"flash": 2048, "cudnn": 2048}, fractions=[0.0, 0.0])
        out, md, _ = self.build(p)
        self.assertIn("tuning_mismatch/ differs from the one computed here: concurrent_unbound: "
                      "file 0, analysis 1", md)
        with open(os.path.join(out, "report.json")) as f:
            js = json.load(f)["contention"][0]
        self.assertEqual(len(js["tuning_mismatch_disagrees"]), 1)


# ---- issue #31: what the run allows a verdict to say ----
def set_run_attr(path, name, value):
    with h5py.File(path, "r+") as f:
        f["run"].attrs[name] = value


def rewrite_text(path, name, fn):
    """Replace the text metric sweeps/contention/<name> [world, P]: fn(rank, phase, old) -> new."""
    with h5py.File(path, "r+") as f:
        g = f["sweeps/contention"]
        phases = g["points/phase"].asstr()[()].tolist()
        old = g[name].asstr()[()].astype(object)
        new = np.array([[fn(r, phases[p], old[r, p]) for p in range(old.shape[1])]
                        for r in range(old.shape[0])], dtype=object)
        del g[name]
        synthetic.dataset(g, name, new, "1", name, "metric")


def set_numa_nodes(path, n):
    """monitor/numa_hit and numa_miss with n NUMA node columns on the node-watching rank."""
    with h5py.File(path, "r+") as f:
        g = f["sweeps/contention/monitor"]
        for name in ("numa_hit", "numa_miss"):
            old = g[name][()]
            new = np.full(old.shape[:2] + (n,), np.nan)
            new[0] = old[0, :, :1]
            del g[name]
            synthetic.dataset(g, name, new, "1", name, "metric")


class ConditionsTest(Base):
    build = ReportTest.build

    def verdicts(self, path):
        c = contention.read(reader.load(path).sweeps["contention"])
        found = contention.verdicts(contention.summary(c), conditions=contention.conditions(c))
        return {(v["policy"], v["shape"]): v for v in found}

    def numa_as_unbound(self, name="c.h5", memory="preferred_many:0"):
        """The numa phase bound every rank to the CPUs it had unbound ('0-3'), with another
        memory policy: numa on a one-NUMA-node machine."""
        p = synthetic.make_contention_run(self.path(name))
        rewrite_text(p, "cpuset", lambda r, ph, old: "0-3" if ph == "concurrent_bound:numa" else old)
        rewrite_text(p, "nodeset", lambda r, ph, old: memory if ph.startswith("concurrent_bound:")
                     else "default")
        return p

    def test_foreign_load_gives_no_verdict(self):
        p = synthetic.make_contention_run(self.path("c.h5"))
        set_run_attr(p, "foreign_cpu_fraction", 0.95)
        v = self.verdicts(p)
        self.assertEqual(len(v), 3 * 2)
        self.assertTrue(all(x["helped"] is None and x["no_verdict"] == "foreign_load" for x in v.values()))
        self.assertEqual(v[("numa", "triad")]["sentence"],
                         "numa binding: no verdict on triad: other processes took 95 % of the CPUs "
                         "during the run; rerun on a quiet node.")
        out, md, _ = self.build(p)
        sec = md[md.index("## Contention"):md.index("### Per phase")]
        self.assertIn("**No verdict: other processes took 95 % of the CPUs during the run** "
                      "(`/run` foreign_cpu_fraction, above the 5 % limit)", sec)
        self.assertNotIn("binding cut", md)  # neither here nor on the first screen
        self.assertIn("6 verdict(s) (binding policy x workload); 6 without a verdict (other "
                      "processes took 95 % of the CPUs during the run).", md)
        with open(os.path.join(out, "report.json")) as f:
            js = json.load(f)["contention"][0]
        self.assertEqual(js["conditions"]["foreign_cpu_fraction"], 0.95)
        self.assertEqual(js["conditions"]["foreign_cpu_limit"], contention.FOREIGN_CPU_LIMIT)

    def test_quiet_or_unrecorded_foreign_load_judges(self):
        p = synthetic.make_contention_run(self.path("c.h5"))
        set_run_attr(p, "foreign_cpu_fraction", 0.01)  # under the limit: the timings decide
        self.assertTrue(self.verdicts(p)[("numa", "triad")]["helped"])
        _, md, _ = self.build(p)
        self.assertIn("Other processes took 1.0 % of the CPUs during the run", md)
        q = synthetic.make_contention_run(self.path("q.h5"))  # no figure (a run that did not end)
        self.assertTrue(self.verdicts(q)[("numa", "triad")]["helped"])
        n = synthetic.make_contention_run(self.path("n.h5"))  # NaN: /proc/stat unreadable
        set_run_attr(n, "foreign_cpu_fraction", float("nan"))
        self.assertTrue(self.verdicts(n)[("numa", "triad")]["helped"])
        _, md, _ = self.build(n)
        self.assertIn("Other processes' share of the CPUs is not in the file", md)

    def test_foreign_limit_is_compares_shared_machine(self):
        from ringbench_analysis import verdict as V
        self.assertEqual(contention.FOREIGN_CPU_LIMIT, V.SHARED_CPU_FRACTION)
        p = synthetic.make_contention_run(self.path("c.h5"))
        set_run_attr(p, "foreign_cpu_fraction", V.SHARED_CPU_FRACTION)  # at the limit: judged
        self.assertTrue(self.verdicts(p)[("numa", "triad")]["helped"])

    def test_policy_placed_as_unbound_has_no_difference_possible(self):
        p = self.numa_as_unbound()
        v = self.verdicts(p)
        numa = v[("numa", "triad")]
        self.assertIsNone(numa["helped"])
        self.assertEqual(numa["no_verdict"], "same_as_unbound")
        self.assertEqual(numa["sentence"], "numa binding: no difference possible on triad: numa gave "
                         "every rank the same CPUs as unbound; its memory policy differs, but the "
                         "node has one NUMA node.")
        self.assertTrue(v[("core", "triad")]["helped"] is False)  # core moved the ranks: judged
        _, md, _ = self.build(p)
        self.assertIn("- numa binding: no difference possible on host_attention:", md)
        self.assertNotIn("numa binding cut", md)
        self.assertIn("`numa` gave every rank the same CPUs as `concurrent_unbound`; its memory "
                      "policy differs, but the node has one NUMA node: its timings can differ from "
                      "unbound's only by noise.", md)

    def test_same_memory_policy_needs_no_numa_count(self):
        p = self.numa_as_unbound(memory="default")  # the same text as unbound's
        with h5py.File(p, "r+") as f:
            del f["sweeps/contention/monitor/numa_hit"]
        self.assertEqual(self.verdicts(p)[("numa", "triad")]["sentence"],
                         "numa binding: no difference possible on triad: numa gave every rank the "
                         "same CPUs as unbound.")

    def test_same_cpus_but_memory_bound_on_two_numa_nodes_is_judged(self):
        p = self.numa_as_unbound()
        set_numa_nodes(p, 2)  # preferred_many:0 then places memory differently from default
        v = self.verdicts(p)[("numa", "triad")]
        self.assertTrue(v["helped"])
        self.assertIsNone(v["no_verdict"])

    def test_one_rank_placed_otherwise_is_judged(self):
        p = self.numa_as_unbound()
        rewrite_text(p, "cpuset", lambda r, ph, old: "0-1" if ph == "concurrent_bound:numa" and r == 3
                     else old)  # the feeder moved: the policy did change something
        self.assertTrue(self.verdicts(p)[("numa", "triad")]["helped"])

    def test_a_blank_cpuset_is_never_taken_for_the_same(self):
        p = synthetic.make_contention_run(self.path("c.h5"))
        rewrite_text(p, "cpuset", lambda r, ph, old: "")
        c = contention.read(reader.load(p).sweeps["contention"])
        self.assertEqual(contention.same_as_unbound(c), {})

    def test_phase_cpu_busy_is_every_process_per_phase(self):
        # synthetic cpu_busy: (ranks working) / 4 CPUs; alone runs one rank at a time, with
        # cooldowns between the ranks' turns
        c = self.load()
        busy = contention.conditions(c)["phase_cpu_busy"]
        self.assertEqual(list(busy), c.phases)
        self.assertTrue(0.1 < busy["alone"] <= 0.25, busy)
        self.assertAlmostEqual(busy["concurrent_unbound"], 1.0, delta=0.03)


class BindingsTest(Base):
    build = ReportTest.build

    def test_bindings_table_lists_each_rank_and_phase(self):
        p = synthetic.make_contention_run(self.path("c.h5"))
        rewrite_text(p, "nodeset", lambda r, ph, old: "default" if not ph.startswith("concurrent_bound")
                     else f"bind:{r % 2}")
        out, md, _ = self.build(p)
        lines = md[md.index("### Bindings applied"):].splitlines()
        table = [ln for ln in lines[:12] if ln.startswith("| ")]
        self.assertEqual(table[0], "| rank | role | " + " | ".join(MODEL) + " |")
        self.assertEqual(table[1], "| 0 | measure | 0-3 (mem default) | 0-3 (mem default) | "
                                   "0 (mem bind:0) | 0 (mem bind:0) | 0 (mem bind:0) |")
        self.assertEqual(table[4], "| 3 | feeder | 0-3 (mem default) | 0-3 (mem default) | "
                                   "3 (mem bind:1) | 3 (mem bind:1) | 3 (mem bind:1) |")
        with open(os.path.join(out, "report.json")) as f:
            js = json.load(f)["contention"][0]["bindings"]
        self.assertEqual(len(js), 4 * len(MODEL))  # every rank, every phase
        self.assertEqual(js[len(MODEL) + 3], {"rank": 1, "role": "measure", "phase": "concurrent_bound:numa",
                                              "cpuset": "1", "nodeset": "bind:1", "binding_note": "why"})

    def test_without_cpusets_says_so(self):
        p = synthetic.make_contention_run(self.path("c.h5"))
        with h5py.File(p, "r+") as f:
            del f["sweeps/contention/cpuset"]
        _, md, _ = self.build(p)
        self.assertIn("The file records no cpuset for any rank and phase (metric `cpuset`)", md)

    def test_failed_binding_and_ranks_past_the_table(self):
        from ringbench_analysis import contention_report
        p = synthetic.make_contention_run(self.path("c.h5"))
        rewrite_text(p, "binding_note", lambda r, ph, old: "binding failed: hwloc_set_cpubind: EPERM"
                     if ph == "concurrent_bound:core" and r == 2 else old)
        keep = contention_report.MAX_BINDING_RANKS
        contention_report.MAX_BINDING_RANKS = 2
        try:
            _, md, _ = self.build(p)
        finally:
            contention_report.MAX_BINDING_RANKS = keep
        self.assertIn("- rank 2, concurrent_bound:core: binding failed: hwloc_set_cpubind: EPERM", md)
        self.assertIn("Ranks 2-3 not shown (report.json has every rank).", md)


if __name__ == "__main__":
    unittest.main()
