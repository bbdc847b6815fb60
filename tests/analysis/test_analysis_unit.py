"""Unit tests of ringbench_analysis on small synthetic files with known numbers
(tests/analysis/synthetic.py). Run: PYTHONPATH=analysis python3 -m unittest discover -s tests/analysis
"""
import io
import json
import math
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "analysis"))

try:
    import h5py
    import numpy as np
except ImportError as exc:  # pragma: no cover
    print(f"SKIPPED: {exc}")
    sys.exit(77)

import synthetic  # noqa: E402
from ringbench_analysis import compare, model, reader, report  # noqa: E402
from ringbench_analysis.__main__ import main as cli  # noqa: E402


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)


class ReaderTest(Base):
    def test_tables_one_row_per_point_and_rank(self):
        p = synthetic.make_run(self.path("r4.h5"), 4, seq_lens=(1024, 2048), ring_sizes=[2, 4])
        run = reader.load(p)
        t = run.table("ring")
        self.assertEqual(len(t), 4 * 4)  # 4 points x 4 ranks
        self.assertEqual(sorted(t.unique("rank")), [0, 1, 2, 3])
        self.assertIn("seq_len", t.keys)
        self.assertIn("num_heads", t.keys)  # sweep-level attribute copied into every row
        self.assertNotIn("label", t.keys)
        self.assertIn("total_time_median", t.metrics())
        self.assertEqual(t.units["total_time_median"], "s")
        row = next(t.where(seq_len=2048, ring_size=4, rank=1).rows())
        c, tr, _ = synthetic.step_model(2048, 4)
        self.assertAlmostEqual(row["forward_time_median"], 4 * max(c, tr))
        self.assertEqual(row["step_compute_time"].shape, (4,))  # array column
        by_type = run.table(type="ring_attention")
        self.assertEqual(len(by_type), len(t))

    def test_columnar_layout_when_points_equal_ranks(self):
        # 3 message sizes on 3 ranks: the shapes alone cannot tell per-rank from per-point.
        p = synthetic.make_run(self.path("r3.h5"), 3, ring_sizes=[3])
        t = reader.load(p).table("pingpong")
        self.assertEqual(len(t), 3 * 3)
        self.assertEqual(t.keys, ["sweep", "point", "message_size"])
        self.assertEqual(sorted(t.unique("message_size")), [8, 1024, 65536])
        self.assertEqual(sorted(t.unique("partner_rank")), [0, 1, 2])

    def test_collectives_keys_and_model(self):
        run = reader.load(synthetic.make_run(self.path("r2.h5"), 2))
        t = run.table("coll")
        for k in ("operation", "group", "bytes"):
            self.assertIn(k, t.keys)
        self.assertNotIn("time_s", t.keys)
        m = model.ring_comm_model([run])
        self.assertAlmostEqual(m["alpha_s"], synthetic.ALPHA)
        self.assertAlmostEqual(m["beta_Bps"], synthetic.BETA)
        self.assertIn("fitted sendrecv model", m["source"])

    def test_memory_and_compute_layouts(self):
        p = synthetic.make_run(self.path("r2.h5"), 2, pingpong=False, collectives=False, p2p=False,
                               drop_ring=True)
        with h5py.File(p, "r+") as f:
            m = f["sweeps"].create_group("memory")
            m.attrs["type"] = "memory"
            m.attrs["status"] = "complete"
            synthetic._ds(m, "triad_Bps", [1e10, 2e10], "B/s", "best triad")
            synthetic._ds(m, "triad_iteration_s", np.ones((2, 7)), "s", "each triad")
            c = f["sweeps"].create_group("compute")
            c.attrs["type"] = "compute"
            c.attrs["status"] = "complete"
            synthetic._ds(c, "gemm_size", [128, 256, 512], "1", "n")
            synthetic._ds(c, "gemm_dtype", ["float32", "float64"], "1", "types")
            synthetic._ds(c, "gemm_tflops", np.arange(12.0).reshape(2, 2, 3), "TFLOP/s", "rate")
            synthetic._ds(c, "attention_rows", [64], "1", "rows")
            synthetic._ds(c, "attention_tflops", [[1.0], [2.0]], "TFLOP/s", "rate")
        run = reader.load(p)
        mem = run.table("memory")
        self.assertEqual(len(mem), 2)  # one point: the 7 iterations are an array, not points
        self.assertEqual(mem["triad_iteration_s"][1].shape, (7,))
        comp = run.table("compute")
        self.assertEqual(len(comp), 2 * 3 * 2 + 1 * 2)
        row = next(comp.where(gemm_dtype="float64", gemm_size=256, rank=1).rows())
        self.assertEqual(row["gemm_tflops"], 10.0)  # [rank 1, float64, 256]
        self.assertEqual(next(comp.where(kind="attention", rank=1).rows())["attention_tflops"], 2.0)

    def test_csv_export(self):
        run = reader.load(synthetic.make_run(self.path("r2.h5"), 2))
        buf = io.StringIO()
        run.table("pingpong").to_csv(buf)
        lines = buf.getvalue().strip().splitlines()
        self.assertEqual(len(lines), 1 + 3 * 2)
        self.assertTrue(lines[0].startswith("sweep,point,rank,message_size"))
        self.assertNotIn("one_way_time", lines[0].split(","))  # array columns are not CSV cells

    def test_errors(self):
        with self.assertRaisesRegex(reader.RingbenchFileError, "no such file"):
            reader.load(self.path("missing.h5"))
        with open(self.path("x.h5"), "w") as f:
            f.write("text")
        with self.assertRaisesRegex(reader.RingbenchFileError, "not an HDF5 file"):
            reader.load(self.path("x.h5"))
        with h5py.File(self.path("y.h5"), "w") as f:
            f["a"] = 1
        with self.assertRaisesRegex(reader.RingbenchFileError, "not one written by ringbench.*top level has a"):
            reader.load(self.path("y.h5"))
        with self.assertRaisesRegex(KeyError, "no sweep named 'nope'"):
            reader.load(synthetic.make_run(self.path("r1.h5"), 1)).table("nope")

    def test_incomplete_run_reports_what_completed(self):
        p = synthetic.make_run(self.path("r2.h5"), 2, status="running", sweep_status={"ring": "running"})
        run = reader.load(p)
        done, other = run.completeness()
        self.assertEqual(sorted(done), ["coll", "p2p", "pingpong"])
        self.assertEqual(other, [("ring", "running", "")])
        text = "\n".join(run.problems())
        self.assertIn("did not finish", text)
        self.assertIn("sweep 'ring' (ring_attention) status 'running'", text)


class ModelTest(Base):
    def test_alpha_beta_fit_recovers_parameters(self):
        sizes = [8, 64, 1024, 65536, 1 << 20, 1 << 24]
        times = [3e-6 + m / 25e9 for m in sizes]
        fit = model.fit_alpha_beta(sizes, times)
        self.assertAlmostEqual(fit["alpha_s"], 3e-6, delta=1e-9)
        self.assertAlmostEqual(fit["beta_Bps"] / 25e9, 1.0, delta=1e-6)
        self.assertLess(fit["rel_rms_error"], 1e-9)
        flat = model.fit_alpha_beta([8, 1024], [2e-6, 2e-6])
        self.assertTrue(math.isinf(flat["beta_Bps"]))
        self.assertIsNone(model.fit_alpha_beta([8], [1e-6]))

    def test_scaling_series_and_flags(self):
        runs = [reader.load(synthetic.make_run(self.path(f"r{n}.h5"), n, seq_lens=(1024, 2048),
                                               bad_points={(2048, 2): "oom"} if n == 2 else None))
                for n in (1, 2, 4)]
        pts = model.point_table(runs)
        self.assertEqual(len(pts), 6)
        bad = [p for p in pts if not p["measured"]]
        self.assertEqual([(p["seq_len"], p["ring_size"], p["status"]) for p in bad], [(2048, 2, "oom")])
        strong = model.series(pts, "strong")
        self.assertEqual([p["ring_size"] for p in strong[("", 1024)]], [1, 2, 4])
        self.assertEqual([p["ring_size"] for p in strong[("", 2048)]], [1, 4])
        sc = dict((r, (s, e)) for r, s, e in model.scaling(strong[("", 1024)], "strong"))
        t1 = 3 * synthetic.step_model(1024, 1)[0]
        t4 = 3 * 4 * max(*synthetic.step_model(1024, 4)[:2])
        self.assertAlmostEqual(sc[4][0], t1 / t4)
        self.assertAlmostEqual(sc[4][1], t1 / t4 / 4)
        weak = model.series(pts, "weak")
        self.assertIn(("", 512), weak)  # S/R = 512: (1024, 2) and (2048, 4)

    def test_ring_comm_model_ignores_one_rank_groups(self):
        # inter_node on one node: groups of one rank whose "sendrecv" is a local copy.
        class FakeSweep:
            name, table = "collectives", reader.Table()
            def group_arrays(self, prefix):
                return {"operation": np.array(["sendrecv", "sendrecv"]),
                        "group": np.array(["inter_node", "world"]),
                        "group_size": np.array([1, 2]),
                        "alpha_s": np.array([6e-6, 8e-6]), "beta_Bps": np.array([1.9e12, 2.9e11])}
        class FakeRun:
            world_size, path = 2, "x.h5"
            def sweeps_of_type(self, types):
                return [FakeSweep()] if types == reader.COLLECTIVE_TYPES else []
        m = model.ring_comm_model([FakeRun()])
        self.assertEqual(m["group"], "world")
        self.assertAlmostEqual(m["beta_Bps"], 2.9e11)

    def test_weak_scaling_normalises_by_work_per_rank(self):
        # Attention at a fixed length per rank: doubling the ring doubles each rank's work
        # (every query meets every key), so twice the time is perfect weak scaling.
        base = {"ring_size": 1, "time": 1.0, "work_per_rank": 1e12}
        ideal = {"ring_size": 2, "time": 2.0, "work_per_rank": 2e12}
        slow = {"ring_size": 4, "time": 8.0, "work_per_rank": 4e12}
        sc = {r: (s, e) for r, s, e in model.scaling([base, ideal, slow], "weak")}
        self.assertAlmostEqual(sc[2][1], 1.0)
        self.assertAlmostEqual(sc[2][0], 2.0)
        self.assertAlmostEqual(sc[4][1], 0.5)
        # Without recorded work the plain time ratio stands.
        plain = [{"ring_size": 1, "time": 1.0}, {"ring_size": 2, "time": 2.0}]
        self.assertAlmostEqual(model.scaling(plain, "weak")[1][2], 0.5)

    def test_prediction_matches_known_model(self):
        # No straggler: the synthetic times follow the model exactly, so the error is ~0
        # at every measured size and the extrapolation follows max(c, t).
        runs = [reader.load(synthetic.make_run(self.path(f"r{n}.h5"), n, seq_lens=(4096,)))
                for n in (1, 2, 4)]
        pts = model.point_table(runs)
        comm = model.ring_comm_model(runs)
        preds = model.predictions(pts, comm, (8, 64, 512))
        self.assertEqual(len(preds), 1)
        for m in preds[0]["measured"]:
            self.assertLess(abs(m["error"]), 1e-9, m)
        ext = {e["ring_size"]: e for e in preds[0]["extrapolated"]}
        self.assertEqual(sorted(ext), [8, 64, 512])
        c, t, _ = synthetic.step_model(4096, 512)
        self.assertAlmostEqual(ext[512]["predicted_efficiency"], c / max(c, t))
        self.assertEqual(ext[512]["comm_bound"], t > c)


class ReportTest(Base):
    def test_report_flags_failed_points_and_writes_plots(self):
        files = [synthetic.make_run(self.path(f"r{n}.h5"), n, seq_lens=(1024, 2048, 4096),
                                    bad_points={(4096, 2): "oom", (2048, 2): "parity_failed"} if n == 2 else None,
                                    straggler=n - 1 if n == 4 else None)
                 for n in (1, 2, 4)]
        out = self.path("rep")
        self.assertEqual(cli(["report"] + files + ["--out", out]), 0)
        md = open(os.path.join(out, "report.md")).read()
        js = json.load(open(os.path.join(out, "report.json")))
        self.assertEqual(set(js["plots"]), {n for n, *_ in report.EXPECTED_PLOTS})
        self.assertIn("**oom**", md)
        self.assertIn("**parity_failed**", md)
        self.assertIn("status oom", md)
        spread = {(p["seq_len"], p["ring_size"]): p["spread"] for p in js["points"]}
        self.assertAlmostEqual(spread[(1024, 4)], 1.3)  # the straggler
        self.assertEqual(cli(["report"] + files + ["--out", out, "--strict"]), 1)

    def test_report_on_a_directory(self):
        series = self.path("series")
        os.makedirs(series)
        for n in (1, 2):
            synthetic.make_run(os.path.join(series, f"np{n}.h5"), n, seq_lens=(1024,))
        out = self.path("rep")
        self.assertEqual(cli(["report", series, "--out", out]), 0)
        js = json.load(open(os.path.join(out, "report.json")))
        self.assertEqual(sorted(p["ring_size"] for p in js["points"]), [1, 2])
        os.makedirs(self.path("empty"))
        self.assertEqual(cli(["report", self.path("empty"), "--out", out]), 2)

    def test_report_without_ring_sweep(self):
        f = synthetic.make_run(self.path("r2.h5"), 2, drop_ring=True)
        out = self.path("rep")
        self.assertEqual(cli(["report", f, "--out", out]), 0)
        md = open(os.path.join(out, "report.md")).read()
        js = json.load(open(os.path.join(out, "report.json")))
        self.assertIn("No ring attention sweep in the input files.", md)
        self.assertIn("throughput", js["not_plotted"])
        self.assertIn("bandwidth", js["plots"])


class CompareTest(Base):
    def run_compare(self, *argv):
        buf = io.StringIO()
        old, sys.stdout = sys.stdout, buf
        try:
            rc = cli(["compare"] + list(argv))
        finally:
            sys.stdout = old
        return rc, buf.getvalue()

    def test_verdicts(self):
        base = synthetic.make_run(self.path("base.h5"), 2)
        same = synthetic.make_run(self.path("same.h5"), 2)
        slow = synthetic.make_run(self.path("slow.h5"), 2, slow_factor=1.2)
        slight = synthetic.make_run(self.path("slight.h5"), 2, slow_factor=1.03)
        self.assertEqual(self.run_compare(base, same)[0], 0)
        rc, out = self.run_compare(base, slow)
        self.assertEqual(rc, 1)
        self.assertIn("REGRESSION", out)
        self.assertIn("+20.0%", out)
        self.assertEqual(self.run_compare(base, slight)[0], 0)       # 3% < 5%
        self.assertEqual(self.run_compare(base, slight, "--tolerance", "2%")[0], 1)
        self.assertEqual(self.run_compare(base, slow, "--tolerance", "0.25")[0], 0)
        self.assertEqual(self.run_compare(slow, base)[0], 0)         # faster is fine
        self.assertEqual(self.run_compare(base, slow, "--metric", "peak_memory_bytes")[0], 0)
        self.assertEqual(self.run_compare(base, slow, "--metric", "bogus")[0], 2)
        self.assertEqual(self.run_compare(base, self.path("nope.h5"))[0], 2)

    def test_status_regression_and_unmatched(self):
        base = synthetic.make_run(self.path("base.h5"), 2, seq_lens=(1024, 2048))
        oom = synthetic.make_run(self.path("oom.h5"), 2, seq_lens=(1024, 4096), bad_points={(1024, 2): "oom"})
        rc, out = self.run_compare(base, oom)
        self.assertEqual(rc, 1)
        self.assertIn("status ok -> oom", out)
        self.assertIn("only in base (not compared)", out)
        self.assertIn("seq_len=2048", out)
        self.assertIn("only in new (not compared)", out)
        self.assertIn("seq_len=4096", out)

    def test_compare_min_bytes_leaves_out_small_messages(self):
        base = synthetic.make_run(self.path("base.h5"), 2)
        new = synthetic.make_run(self.path("new.h5"), 2)
        with h5py.File(new, "r+") as f:  # only the 1 KiB collectives got slower
            g = f["sweeps/coll"]
            small = g["bytes"][()] == 1024
            for name, factor in (("time_s", 2.0), ("algbw_Bps", 0.5), ("busbw_Bps", 0.5)):
                v = g[name][()]
                v[small] *= factor
                g[name][...] = v
            r = g["rank_time_s"][()]
            r[:, small] *= 2.0
            g["rank_time_s"][...] = r
        quiet = lambda *a, **k: None
        self.assertEqual(compare.compare(base, new, 0.05, out=quiet), compare.EXIT_REGRESSION)
        self.assertEqual(compare.compare(base, new, 0.05, out=quiet, min_bytes=65536), compare.EXIT_OK)

    def test_tolerance_parsing(self):
        self.assertAlmostEqual(compare.parse_tolerance("5%"), 0.05)
        self.assertAlmostEqual(compare.parse_tolerance("0.05"), 0.05)
        self.assertAlmostEqual(compare.parse_tolerance("10"), 0.10)
        with self.assertRaises(compare.CompareError):
            compare.parse_tolerance("fast")
        with self.assertRaises(compare.CompareError):
            compare.parse_tolerance("-5%")

    def test_directions(self):
        self.assertEqual(compare.parse_bytes("1MiB"), 1 << 20)
        self.assertEqual(compare.parse_bytes("4096"), 4096)
        with self.assertRaises(compare.CompareError):
            compare.parse_bytes("1.5MiB")
        self.assertEqual(compare.direction("s", "total_time_median"), -1)
        self.assertEqual(compare.direction("B/s", "busbw_Bps"), 1)
        self.assertEqual(compare.direction("1/s", "tokens_per_s"), 1)
        self.assertEqual(compare.direction("B", "peak_memory_bytes"), -1)
        self.assertEqual(compare.direction("1", "out_max_rel"), 0)


if __name__ == "__main__":
    unittest.main()
