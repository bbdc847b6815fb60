"""Unit tests of ringbench_analysis on small synthetic files with known numbers
(tests/analysis/synthetic.py). Run: PYTHONPATH=analysis python3 -m unittest discover -s tests/analysis
"""
import contextlib
import io
import json
import math
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from tempdir_case import TempDirCase  # noqa: E402  (first: analysis/ on the path, skip without h5py)

import h5py  # noqa: E402
import numpy as np  # noqa: E402

import synthetic  # noqa: E402
from ringbench_analysis import compare, model, reader, report  # noqa: E402
from ringbench_analysis.__main__ import main as cli  # noqa: E402


class Base(TempDirCase):

    def read(self, *parts):
        with open(os.path.join(*parts)) as f:
            return f.read()


class ReaderTest(Base):
    def test_tables_one_row_per_point_and_rank(self):
        p = synthetic.make_run(self.path("r4.h5"), 4, seq_lens=(1024, 2048), ring_sizes=[2, 4])
        run = reader.load(p)
        ring = run.sweeps["ring"]
        t = run.table("ring")
        self.assertEqual(len(t), 4 * 4)  # 4 points x 4 ranks
        self.assertEqual(sorted(t["rank"].unique()), [0, 1, 2, 3])
        self.assertIn("seq_len", ring.keys)
        self.assertEqual(len(ring.points), 4)
        self.assertIn("total_tflops", ring.scalar_metrics())
        self.assertIn("total_time_s", ring.array_metrics())
        self.assertEqual(ring.units["total_time_s"], "s")
        self.assertEqual(ring.array("total_time_s").shape, (4, 4, synthetic.ITERATIONS))
        row = t[(t["seq_len"] == 2048) & (t["ring_size"] == 4) & (t["rank"] == 1)].iloc[0]
        c, tr, _ = synthetic.step_model(2048, 4)
        self.assertAlmostEqual(float(np.median(row["forward_time_s"])), 4 * max(c, tr))
        self.assertEqual(row["step_compute_s"].shape, (4,))  # array column
        self.assertEqual(row["status"], "ok")
        self.assertEqual(len(run.table(type="ring_attention")), len(t))

    def test_missing_values_stay_missing(self):
        # an oom point: integer metrics -1 in the file read as <NA>, numbers as NaN, never 0
        run = reader.load(synthetic.make_run(self.path("r2.h5"), 2, seq_lens=(1024,),
                                             bad_points={(1024, 2): "oom"}))
        t = run.table("ring")
        self.assertTrue(t["peak_memory_bytes"].isna().all())
        self.assertTrue(t["total_tflops"].isna().all())
        self.assertEqual(list(t["status"]), ["oom", "oom"])
        self.assertEqual(run.sweeps["ring"].rank_values("total_time_s", 0).size, 0)

    def test_collectives_keys_and_model(self):
        run = reader.load(synthetic.make_run(self.path("r2.h5"), 2))
        coll = run.sweeps["coll"]
        for k in ("operation", "group", "message_size_bytes"):
            self.assertIn(k, coll.keys)
        self.assertEqual(coll.key_with_units("B"), "message_size_bytes")
        self.assertNotIn("time_s", coll.keys)
        sub = coll.subtables["model"]
        self.assertEqual(list(sub.points["operation"]), ["all_reduce", "sendrecv"])
        self.assertEqual(sub.array("alpha_s").shape, (2, 2))
        m = model.ring_comm_model([run])
        self.assertAlmostEqual(m["alpha_s"], synthetic.ALPHA)
        self.assertAlmostEqual(m["beta_Bps"], synthetic.BETA)
        self.assertIn("fitted sendrecv model", m["source"])

    def test_csv_export(self):
        run = reader.load(synthetic.make_run(self.path("r2.h5"), 2))
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            self.assertEqual(cli(["table", run.path, "--sweep", "pingpong"]), 0)
        lines = buf.getvalue().strip().splitlines()
        self.assertEqual(len(lines), 1 + 3 * 2)
        self.assertEqual(lines[0], "sweep,point,rank,message_size_bytes,bandwidth_Bps,partner_rank")
        bw = 8 / (synthetic.ALPHA + 8 / synthetic.BETA)
        first = lines[1].split(",")
        self.assertEqual(first[:4] + first[5:], ["pingpong", "0", "0", "8", "1"])
        self.assertAlmostEqual(float(first[4]), bw)
        self.assertEqual(reader.csv_columns(run.table("ring"))[:3], ["sweep", "point", "rank"])

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

    def test_schema_version(self):
        old = synthetic.make_run(self.path("old.h5"), 1)
        with h5py.File(old, "r+") as f:
            del f["run"].attrs["schema_version"]
        with self.assertRaisesRegex(reader.RingbenchFileError,
                                    r"old\.h5: no /run schema_version .*reads schema_version 2, 3 and 4"):
            reader.load(old)
        with h5py.File(old, "r+") as f:
            f["run"].attrs["schema_version"] = np.int64(5)
        with self.assertRaisesRegex(reader.RingbenchFileError, r"old\.h5: schema_version 5, written by "
                                                               r"ringbench 0\.2\.0, commit abc123"):
            reader.load(old)

    def test_layout_errors_name_the_dataset(self):
        p = synthetic.make_run(self.path("bad.h5"), 2)
        with h5py.File(p, "r+") as f:
            f["sweeps/pingpong/bandwidth_Bps"].attrs["role"] = "key"
            del f["sweeps/coll/busbw_Bps"]
            synthetic.dataset(f["sweeps/coll"], "busbw_Bps", np.zeros(12), "B/s", "x", "metric")
        run = reader.load(p)
        self.assertIn("pingpong/bandwidth_Bps: role 'key', expected 'metric'", run.unreadable["pingpong"])
        self.assertIn("coll/busbw_Bps: shape [12], expected [world=2, points=12, ...]", run.unreadable["coll"])
        self.assertIn("ring", run.sweeps)  # the others are read
        self.assertTrue(any("sweep 'coll' unreadable" in x for x in run.problems()))

    def test_incomplete_run_reports_what_completed(self):
        p = synthetic.make_run(self.path("r2.h5"), 2, status="running", sweep_status={"ring": "running"})
        run = reader.load(p)
        done, other = run.completeness()
        self.assertEqual(sorted(done), ["coll", "p2p", "pingpong"])
        self.assertEqual(other, [("ring", "running", "")])
        text = "\n".join(run.problems())
        self.assertIn("did not finish", text)
        self.assertIn("sweep 'ring' (ring_attention) status 'running'", text)

    def test_end_record_beside_a_running_file(self):
        """A run ended by SIGTERM or the hang guard says so in OUTPUT.end (src/app/end_record.hpp):
        the analysis reports that end, not 'did not finish'; a link at the name is ignored."""
        p = synthetic.make_run(self.path("k.h5"), 2, status="running", sweep_status={"ring": "running"})
        os.symlink(self.path("elsewhere"), p + ".end")
        self.assertEqual(reader.load(p).status, "running")  # a link is not the run's record
        os.remove(p + ".end")
        with open(p + ".end", "w") as f:
            f.write("status: interrupted\nfailure: SIGTERM during sweep ring point 1 (S=2048)\n"
                    "end_time: 2026-11-28T02:00:00Z\nrank: 1\n")
        run = reader.load(p)
        self.assertEqual((run.status, run.failure), ("interrupted", "SIGTERM during sweep ring point 1 (S=2048)"))
        self.assertIn("run status is 'interrupted': SIGTERM during sweep ring point 1", "\n".join(run.problems()))
        done = reader.load(synthetic.make_run(self.path("d.h5"), 2))
        with open(done.path + ".end", "w") as f:
            f.write("status: interrupted\n")
        self.assertEqual(reader.load(done.path).status, "complete")  # a finished file's word stands


    def test_interrupted_sweep_is_read_and_said_cut_short(self):
        """A sweep a signal stopped between points (status 'interrupted', points_planned) is read
        like a complete one of fewer points, and problems() says it was cut short."""
        p = synthetic.make_run(self.path("i.h5"), 2, status="interrupted",
                               sweep_status={"ring": "interrupted"})
        with h5py.File(p, "a") as f:
            f["run"].attrs["failure"] = "SIGTERM during sweep ring: stopped after 2 of 9 points"
            f["sweeps/ring"].attrs["points_planned"] = 9
        run = reader.load(p)
        ring = run.sweep("ring")
        self.assertEqual(ring.points_planned, 9)
        self.assertIn(f"{ring.npoints} of 9 planned points written", ring.cut_short())
        self.assertEqual(len(ring.table), ring.npoints * 2)
        text = "\n".join(run.problems())
        self.assertIn("run status is 'interrupted': SIGTERM during sweep ring", text)
        self.assertIn("sweep 'ring' (ring_attention) status 'interrupted'", text)
        self.assertIn("cut short by a signal", text)
        self.assertEqual(run.sweep("coll").cut_short(), "")


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
        p = synthetic.make_run(self.path("r2.h5"), 2)
        with h5py.File(p, "r+") as f:
            del f["sweeps/coll/model"]
            synthetic.points_table(
                f["sweeps/coll"].create_group("model"),
                {"operation": (["sendrecv", "sendrecv"], "1"), "group": (["inter_node", "world"], "1"),
                 "group_size": ([1, 2], "1")},
                {"alpha_s": (np.tile([6e-6, 8e-6], (2, 1)), "s"),
                 "beta_Bps": (np.tile([1.9e12, 2.9e11], (2, 1)), "B/s")})
        m = model.ring_comm_model([reader.load(p)])
        self.assertEqual(m["group"], "world")
        self.assertAlmostEqual(m["beta_Bps"], 2.9e11)

    def test_ring_comm_model_fits_sendrecv_times_without_a_stored_model(self):
        p = synthetic.make_run(self.path("r2.h5"), 2)
        with h5py.File(p, "r+") as f:
            del f["sweeps/coll/model"]
        m = model.ring_comm_model([reader.load(p)])
        self.assertIn("alpha-beta fit to sendrecv times of coll", m["source"])
        self.assertAlmostEqual(m["alpha_s"], synthetic.ALPHA)
        self.assertAlmostEqual(m["beta_Bps"] / synthetic.BETA, 1.0)

    def test_p2p_matrix_from_pair_points(self):
        run = reader.load(synthetic.make_run(self.path("r3.h5"), 3))
        m, size = model.p2p_bandwidth(run.sweeps["p2p"])
        self.assertEqual(size, 1 << 20)
        self.assertTrue(np.isnan(np.diag(m)).all())
        self.assertAlmostEqual(m[2, 0], synthetic.BETA * 1.02)
        self.assertAlmostEqual(m[0, 1], synthetic.BETA)

    def test_ring_comm_model_fits_pingpong_without_collectives(self):
        run = reader.load(synthetic.make_run(self.path("r2.h5"), 2, collectives=False))
        m = model.ring_comm_model([run])
        self.assertIn("host_pingpong one-way times", m["source"])
        self.assertAlmostEqual(m["alpha_s"], synthetic.ALPHA)
        self.assertAlmostEqual(m["beta_Bps"] / synthetic.BETA, 1.0)

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
        md = self.read(os.path.join(out, "report.md"))
        js = json.loads(self.read(os.path.join(out, "report.json")))
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
        js = json.loads(self.read(os.path.join(out, "report.json")))
        self.assertEqual(sorted(p["ring_size"] for p in js["points"]), [1, 2])
        os.makedirs(self.path("empty"))
        self.assertEqual(cli(["report", self.path("empty"), "--out", out]), 2)

    def test_report_without_ring_sweep(self):
        f = synthetic.make_run(self.path("r2.h5"), 2, drop_ring=True)
        out = self.path("rep")
        self.assertEqual(cli(["report", f, "--out", out]), 0)
        md = self.read(os.path.join(out, "report.md"))
        js = json.loads(self.read(os.path.join(out, "report.json")))
        self.assertIn("No ring attention sweep in the input files.", md)
        self.assertIn("throughput", js["not_plotted"])
        self.assertIn("bandwidth", js["plots"])


class CompareTest(Base):
    def run_compare(self, *argv):
        # The synthetic files model a steady machine: no run-to-run noise unless a test says.
        if "--run-noise" not in argv:
            argv = argv + ("--run-noise", "0")
        buf = io.StringIO()
        old, sys.stdout = sys.stdout, buf
        try:
            rc = cli(["compare"] + list(argv))
        finally:
            sys.stdout = old
        return rc, buf.getvalue()

    def test_verdicts(self):
        # noisy per-iteration samples (20 iterations): verdicts come from a bootstrap interval
        base = synthetic.make_noisy_run(self.path("base.h5"), 2, seed=1)
        same = synthetic.make_noisy_run(self.path("same.h5"), 2, seed=2)
        slow = synthetic.make_noisy_run(self.path("slow.h5"), 2, seed=3, factor=1.2)
        slight = synthetic.make_noisy_run(self.path("slight.h5"), 2, seed=4, factor=1.03, noise=0.005)
        self.assertEqual(self.run_compare(base, same)[0], 0)
        rc, out = self.run_compare(base, slow)
        self.assertEqual(rc, 1)
        self.assertIn("REGRESSION: ", out)
        self.assertRegex(out, r"ring\s+seq_len=1024\s+total_time_s\s+\S+\s+\S+\s+\+2\d\.\d% \[")
        self.assertEqual(self.run_compare(base, slight)[0], 0)       # 3% < 5%
        self.assertEqual(self.run_compare(base, slight, "--tolerance", "1%")[0], 1)
        self.assertEqual(self.run_compare(base, slow, "--tolerance", "0.30")[0], 0)
        rc, out = self.run_compare(slow, base)
        self.assertEqual(rc, 0)                                      # faster is fine
        self.assertIn("faster", out)
        rc, out = self.run_compare(base, same, "--metric", "peak_memory_bytes", "--all")
        self.assertIn("peak_memory_bytes", out)                     # --metric widens the set
        self.assertIn("total_time_s", out)
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
        base = synthetic.make_noisy_run(self.path("base.h5"), 2, seed=1)
        new = synthetic.make_noisy_run(self.path("new.h5"), 2, seed=2)
        with h5py.File(new, "r+") as f:  # only the 1 KiB collectives got slower
            g = f["sweeps/coll"]
            small = g["points/message_size_bytes"][()] == 1024
            for name, factor in (("time_s", 2.0), ("algbw_Bps", 0.5), ("busbw_Bps", 0.5),
                                 ("iteration_time_s", 2.0)):
                v = g[name][()]
                v[:, small] *= factor
                g[name][...] = v
        quiet = lambda *a, **k: None
        self.assertEqual(compare.compare(base, new, out=quiet, tolerance=0.05, min_bytes=0, run_noise=0),
                         compare.EXIT_REGRESSION)
        self.assertEqual(compare.compare(base, new, out=quiet, tolerance=0.05, min_bytes=65536, run_noise=0),
                         compare.EXIT_OK)
        self.assertEqual(compare.compare(base, new, out=quiet, tolerance=0.05, run_noise=0), compare.EXIT_OK)  # 1 MiB

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
        # A schema 2 file (synthetic.py writes that layout) is judged by legacy.py's rules.
        run = reader.load(synthetic.make_run(self.path("d.h5"), 2))
        ring, coll = run.sweeps["ring"], run.sweeps["coll"]
        self.assertEqual(ring.direction_of("total_time_s"), -1)
        self.assertEqual(coll.direction_of("busbw_Bps"), 1)
        self.assertEqual(ring.direction_of("total_tflops"), 1)
        self.assertEqual(ring.direction_of("peak_memory_bytes"), -1)
        self.assertEqual(ring.direction_of("bytes_sent_bytes"), 0)
        self.assertEqual(ring.direction_of("out_max_rel"), 0)
        self.assertEqual(coll.message_size_key(), "message_size_bytes")
        self.assertEqual(ring.iteration_times, "total_time_s")

    def test_default_metrics_and_reduction(self):
        run = reader.load(synthetic.make_run(self.path("r2.h5"), 2, straggler=1))
        ring = run.sweeps["ring"]
        self.assertEqual(compare.default_metrics(ring), ["total_time_s"])  # the headline
        self.assertEqual(compare.default_metrics(run.sweeps["coll"]), ["busbw_Bps"])
        pts, _, skipped = compare._points(run, ["total_tflops"], min_bytes=1 << 20)
        self.assertEqual(skipped, {"below --min-bytes": 8 + 3})  # collectives + pingpong sizes
        rec = pts[("ring",) + tuple((k, reader._py(ring.points[k].iloc[0])) for k in ring.keys)]
        c, t, _ = synthetic.step_model(1024, 2)
        times = rec["metrics"]["total_time_s"]  # per iteration, the slowest rank (the straggler)
        np.testing.assert_allclose(times, 1.3 * 3 * 2 * max(c, t) * np.array([0.9, 1.0, 1.2]))
        tflops = rec["metrics"]["total_tflops"]  # the slowest rank's rate, spread by the times
        self.assertAlmostEqual(float(np.median(tflops)), float(ring.rank_values("total_tflops", 0).min()))


if __name__ == "__main__":
    unittest.main()
