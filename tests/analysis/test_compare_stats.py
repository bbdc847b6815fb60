"""compare's statistics (analysis/ringbench_analysis/verdict.py, compare.py) on synthetic files
with noisy per-iteration samples (synthetic.make_noisy_run): identical distributions are no
regression, 20 % slower is, 3 % within noise is not; bursts of interference that slow some
iterations are not, a 10 % slowdown under bursts is; a point's night-to-night noise from
--history turns a change within it into a warning; compute and memory pool every rank's
iterations; different work exits 2; one-rank groups are skipped.
Run: PYTHONPATH=analysis python3 -m unittest discover -s tests/analysis
"""
import json
import os
import shutil
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from tempdir_case import TempDirCase, rb_analysis  # noqa: E402  (first: analysis/ on the path, skip without h5py)

import h5py  # noqa: E402
import numpy as np  # noqa: E402

import synthetic  # noqa: E402
from ringbench_analysis import verdict  # noqa: E402


def run_cli(*argv):
    # The synthetic files model a steady machine: no run-to-run noise unless a test says.
    argv = [str(a) for a in argv]
    if "--run-noise" not in argv:
        argv += ["--run-noise", "0"]
    return rb_analysis("compare", *argv)


class JudgeTest(unittest.TestCase):
    def test_interval_brackets_the_ratio_and_is_reproducible(self):
        rng = np.random.default_rng(5)
        b, n = 1 + 0.02 * rng.standard_normal(20), 1.2 * (1 + 0.02 * rng.standard_normal(20))
        r1, r2 = verdict.bootstrap_ratio(b, n), verdict.bootstrap_ratio(b, n)
        self.assertEqual(r1, r2)  # fixed seed
        ratio, lo, hi = r1
        self.assertAlmostEqual(ratio, np.quantile(n, 0.2) / np.quantile(b, 0.2))
        self.assertAlmostEqual(verdict.bootstrap_ratio(b, n, 0.5)[0], np.median(n) / np.median(b))
        # rates: the fast end is the high quantile
        self.assertAlmostEqual(verdict.bootstrap_ratio(b, n, 0.2, True)[0],
                               np.quantile(n, 0.8) / np.quantile(b, 0.8))
        self.assertLess(lo, ratio)
        self.assertLess(ratio, hi)
        self.assertGreater(lo, 1.1)

    def test_verdicts(self):
        rng = np.random.default_rng(6)
        b = 1 + 0.02 * rng.standard_normal(30)
        noisy = lambda f, s: f * (1 + 0.02 * np.random.default_rng(s).standard_normal(30))
        self.assertEqual(verdict.judge(b, noisy(1.0, 1), 0.05)["verdict"], verdict.OK)
        self.assertEqual(verdict.judge(b, noisy(1.2, 2), 0.05)["verdict"], verdict.REGRESSION)
        self.assertEqual(verdict.judge(b, noisy(0.8, 3), 0.05)["verdict"], verdict.FASTER)
        # rates: higher is better, so a lower rate is the regression
        self.assertEqual(verdict.judge(b, noisy(0.8, 4), 0.05, True)["verdict"], verdict.REGRESSION)
        self.assertEqual(verdict.judge(b, noisy(1.2, 5), 0.05, True)["verdict"], verdict.FASTER)
        # beyond the tolerance with few samples: a warning, never a regression
        self.assertEqual(verdict.judge([1.0, 1.1, 0.9], [1.25, 1.05, 1.3], 0.05)["verdict"], verdict.WARN)
        # ... unless every new sample is beyond every base sample by the tolerance (3 vs 3: p = 1/20)
        self.assertEqual(verdict.judge([1.0, 1.1, 0.9], [2.0, 2.2, 1.8], 0.05)["verdict"],
                         verdict.REGRESSION)
        self.assertEqual(verdict.judge([1.0, 1.1, 0.9], [0.5, 0.55, 0.45], 0.05, True)["verdict"],
                         verdict.REGRESSION)
        self.assertEqual(verdict.judge([1.0, 1.1], [2.0, 2.2], 0.05)["verdict"], verdict.WARN)  # 1/6
        self.assertEqual(verdict.judge([1.0, 1.1, 0.9], [1.1, 2.2, 1.8], 0.05)["verdict"], verdict.WARN)
        # beyond the tolerance but a wide interval crossing it: a warning
        wide = lambda f, s: f * (1 + 0.3 * np.random.default_rng(s).standard_normal(8))
        j = verdict.judge(wide(1.0, 7), wide(1.08, 8), 0.05)
        if j["worse"] > 1.05:
            self.assertLessEqual(j["worse_lo"], 1.05)
            self.assertEqual(j["verdict"], verdict.WARN)
        self.assertIsNone(verdict.judge([], [1.0], 0.05))

    @staticmethod
    def bursty(factor, seed, n=20, hit=0.6):
        """n iterations of `factor` x (1 + 0.5 % noise), a fraction `hit` of them slowed by
        20-40 % (interference only adds time, as a neighbour's burst on a shared node)."""
        rng = np.random.default_rng(seed)
        x = factor * (1 + 0.005 * rng.standard_normal(n))
        slow = rng.random(n) < hit
        return x * np.where(slow, 1.2 + 0.2 * rng.random(n), 1.0)

    def test_bursts_of_interference(self):
        clean = self.bursty(1.0, 1, hit=0.0)
        hit = self.bursty(1.0, 2)
        self.assertEqual(verdict.judge(clean, hit, 0.05)["verdict"], verdict.OK)
        # the median moves with bursts over ~half the iterations: what the default avoids
        self.assertNotEqual(verdict.judge(clean, hit, 0.05, quantile=0.5)["verdict"], verdict.OK)
        self.assertEqual(verdict.judge(clean, self.bursty(1.1, 3), 0.05)["verdict"],
                         verdict.REGRESSION)

    def test_night_to_night_noise_raises_the_bar(self):
        b = 1 + 0.005 * np.random.default_rng(8).standard_normal(20)
        n = 1.10 * (1 + 0.005 * np.random.default_rng(9).standard_normal(20))
        self.assertEqual(verdict.judge(b, n, 0.05, noise=None)["verdict"], verdict.REGRESSION)
        self.assertEqual(verdict.judge(b, n, 0.05, noise=0.003)["verdict"], verdict.REGRESSION)
        j = verdict.judge(b, n, 0.05, noise=0.03)  # 3 sigma = 9 %: 1.05 x 1.094 > 1.10
        self.assertEqual(j["verdict"], verdict.WARN)
        self.assertAlmostEqual(j["limit"], 1.05 * np.exp(0.09))


class CompareStatsTest(TempDirCase):
    def noisy(self, name, **kw):
        return synthetic.make_noisy_run(self.path(name), 2, **kw)

    def test_identical_distributions_no_regression(self):
        base = self.noisy("base.h5", seed=1)
        for seed in (2, 3, 4):
            rc, out, _ = run_cli(base, self.noisy(f"same{seed}.h5", seed=seed))
            self.assertEqual(rc, 0, out)
            self.assertNotIn("REGRESSION", out)

    def test_twenty_percent_slower_is_regression(self):
        base = self.noisy("base.h5", seed=1)
        slow = self.noisy("slow.h5", seed=2, factor=1.2)
        rc, out, _ = run_cli(base, slow, "--json", self.path("r.json"))
        self.assertEqual(rc, 1, out)
        with open(self.path("r.json")) as f:
            doc = json.load(f)
        self.assertEqual(doc["exit_code"], 1)
        ring = [r for r in doc["rows"] if r["sweep"] == "ring"]
        self.assertEqual(len(ring), 2)  # one headline metric per ring point
        for r in ring:
            self.assertEqual((r["metric"], r["verdict"]), ("total_time_s", "regression"))
            self.assertGreater(r["lo"], 1.05)
            self.assertLess(r["lo"], 1.2)
            self.assertGreater(r["hi"], 1.2 * 0.98)
            self.assertEqual((r["n_base"], r["n_new"]), (20, 20))
        coll = [r for r in doc["rows"] if r["sweep"] == "coll"]
        self.assertTrue(coll and all(r["metric"] == "busbw_Bps" and r["verdict"] == "regression"
                                     for r in coll))
        self.assertIn("worst changes:", out)
        self.assertLess(out.index("verdicts:"), out.index("worst changes:"))  # summary first

    def test_three_percent_within_noise_is_not_regression(self):
        base = self.noisy("base.h5", seed=1, noise=0.03)
        rc, out, _ = run_cli(base, self.noisy("slight.h5", seed=2, noise=0.03, factor=1.03))
        self.assertEqual(rc, 0, out)
        self.assertNotIn("REGRESSION", out)

    def test_history_noise_and_trend(self):
        base = self.noisy("base.h5", seed=1, noise=0.005)
        new = self.noisy("new.h5", seed=2, noise=0.005, factor=1.10)
        rc, out, _ = run_cli(base, new, "--json", self.path("plain.json"))
        self.assertEqual(rc, 1, out)  # without history: 10 % beyond 5 % is a regression
        quiet = [self.noisy(f"q{i}.h5", seed=10 + i, noise=0.005) for i in range(4)]
        rc, out, _ = run_cli(base, new, *[a for q in quiet for a in ("--history", q)],
                             "--trend", "ring", "--json", self.path("quiet.json"))
        self.assertEqual(rc, 1, out)  # quiet nights: still a regression
        self.assertIn("history: 4 earlier night(s)", out)
        self.assertIn("trend ring", out)
        with open(self.path("quiet.json")) as f:
            doc = json.load(f)
        ring = [r for r in doc["rows"] if r["sweep"] == "ring"]
        self.assertTrue(all(len(r["history"]) == 4 and r["noise"] < 0.01 for r in ring))
        # nights that moved +-12 %: the same 10 % is within the point's noise
        loud = [self.noisy(f"l{i}.h5", seed=20 + i, noise=0.005, factor=f)
                for i, f in enumerate((0.88, 1.12, 0.9, 1.1))]
        rc, out, _ = run_cli(base, new, *[a for q in loud for a in ("--history", q)],
                             "--json", self.path("loud.json"))
        with open(self.path("loud.json")) as f:
            doc = json.load(f)
        ring = [r for r in doc["rows"] if r["sweep"] == "ring"]
        self.assertTrue(ring and all(r["verdict"] == "warn" and r["noise"] > 0.05 for r in ring), out)
        # the same nights from a baseline store (BASE promoted: its copy is not a night)
        from ringbench_analysis import baseline
        store = self.path("store")
        baseline.promote(base, store)
        for i, q in enumerate(quiet):
            with h5py.File(q, "r+") as f:
                f["run"].attrs["start_time"] = np.bytes_(f"2026-11-1{i}T02:00:00Z")
            baseline.record(q, store)
        rc, out, _ = run_cli(base, new, "--history", store, "--nights", "3")
        self.assertEqual(rc, 1, out)
        self.assertIn("history: 3 earlier night(s)", out)
        # a history run of other work is left out and named
        other = self.noisy("other.h5", seed=3, config_text="backend: host\nsweeps: []\n")
        rc, out, _ = run_cli(base, new, "--history", other)
        self.assertIn("left out (other work", out)

    def test_run_noise_of_the_backend(self):
        base = self.noisy("base.h5", seed=1, noise=0.005)
        new = self.noisy("new.h5", seed=2, noise=0.005, factor=1.10)
        gross = self.noisy("gross.h5", seed=3, noise=0.005, factor=5.0)
        # A host file's default on a quiet machine: ring points 1 % run-to-run noise, so a
        # 10 % slower ring is a regression (limit 1.05 x exp(0.03) = +8 %).
        rc, out, _ = run_cli(base, new, "--run-noise", "default", "--json", self.path("d.json"))
        self.assertEqual(rc, 1, out)
        self.assertIn("run-to-run noise assumed for the host path on a quiet machine", out)
        self.assertIn("ring 1% (+8%)", out)
        with open(self.path("d.json")) as f:
            doc = json.load(f)
        ring = [r for r in doc["rows"] if r["sweep"] == "ring"]
        self.assertTrue(ring and all(r["verdict"] == "regression" and r["noise"] == 0.01 for r in ring), out)
        self.assertEqual(doc["run_noise_source"], "default")
        self.assertEqual(doc["run_noise_by_kind"]["ring"], 0.01)
        # The same files where the new run shared its node (30 % of the CPU went to other
        # processes): judged with the shared-machine noise, 45 %: a warning; 5x still fails.
        shared = self.path("shared.h5")
        shutil.copyfile(new, shared)
        with h5py.File(shared, "r+") as f:
            f["run"].attrs["foreign_cpu_fraction"] = 0.3
        rc, out, _ = run_cli(base, shared, "--run-noise", "default", "--json", self.path("s.json"))
        self.assertEqual(rc, 0, out)
        self.assertIn("shared machine: other processes took new 30% of the nodes' CPU time", out)
        with open(self.path("s.json")) as f:
            doc = json.load(f)
        ring = [r for r in doc["rows"] if r["sweep"] == "ring"]
        self.assertTrue(ring and all(r["verdict"] == "warn" and r["noise"] == 0.45 for r in ring), out)
        self.assertEqual((doc["run_noise"], doc["run_noise_source"]), (0.45, "shared machine"))
        self.assertEqual(doc["foreign_cpu_fraction"]["new"], 0.3)
        self.assertEqual(run_cli(base, gross, "--run-noise", "default")[0], 1)
        # 4 % is a quiet node: the defaults stay
        with h5py.File(shared, "r+") as f:
            f["run"].attrs["foreign_cpu_fraction"] = 0.04
        self.assertEqual(run_cli(base, shared, "--run-noise", "default")[0], 1)
        # --run-noise 0.45 says "shared" by hand
        self.assertEqual(run_cli(base, new, "--run-noise", "0.45")[0], 0)
        # --run-noise 1%: the margin is exp(3 x 0.01), the 10 % change clears it; 2 % does not
        rc, out, _ = run_cli(base, new, "--run-noise", "1%")
        self.assertEqual(rc, 1, out)
        self.assertIn("run-to-run noise 1% (set by --run-noise): a regression must be beyond +8%", out)
        self.assertEqual(run_cli(base, new, "--run-noise", "2%")[0], 0)
        # history nights that moved +-12 % raise a point's noise above a smaller --run-noise
        loud = [self.noisy(f"l{i}.h5", seed=20 + i, noise=0.005, factor=f)
                for i, f in enumerate((0.88, 1.12, 0.9, 1.1))]
        rc, out, _ = run_cli(base, new, "--run-noise", "1%", "--json", self.path("h.json"),
                             *[a for q in loud for a in ("--history", q)])
        self.assertEqual(rc, 0, out)
        rc, _, err = run_cli(base, new, "--run-noise", "lots")
        self.assertEqual(rc, 2)
        self.assertIn("--run-noise: 'lots' is not a number", err)

    def test_repeats_judge_each_sides_fastest_run(self):
        base = self.noisy("base.h5", seed=1, noise=0.005)
        slow_night = self.noisy("n1.h5", seed=2, noise=0.005, factor=1.3)  # one slow run
        steady = self.noisy("n2.h5", seed=3, noise=0.005)
        self.assertEqual(run_cli(base, slow_night)[0], 1)
        rc, out, _ = run_cli(base, slow_night, "--new-repeat", steady, "--json", self.path("r.json"))
        self.assertEqual(rc, 0, out)
        self.assertIn("repeats: base 1 run(s), new 2 run(s)", out)
        with open(self.path("r.json")) as f:
            doc = json.load(f)
        self.assertEqual(doc["runs"], {"base": 1, "new": 2})
        # a real slowdown in every repeat is still found
        slow2 = self.noisy("n3.h5", seed=4, noise=0.005, factor=1.3)
        self.assertEqual(run_cli(base, slow_night, "--new-repeat", slow2)[0], 1)
        # and a fast base repeat cannot hide it either: the base side's fastest run is used
        self.assertEqual(run_cli(slow_night, slow2, "--base-repeat", base)[0], 1)
        # a repeat of other work is refused
        other = self.noisy("other.h5", seed=5, config_text="backend: host\nsweeps: []\n")
        rc, _, err = run_cli(base, steady, "--new-repeat", other)
        self.assertEqual(rc, 2)
        self.assertIn("new repeat", err)

    def with_compute(self, name, rank_factors, seed):
        """A noisy run plus a compute sweep of one point whose rank r's 20 iterations take
        rank_factors[r] x 1 ms (x 0.5 % noise); rate = 2 GFLOP / median time per rank."""
        path = self.noisy(name, seed=seed)
        rng = np.random.default_rng(seed)
        t = np.array([f * 1e-3 * (1 + 0.005 * rng.standard_normal(20)) for f in rank_factors])
        with h5py.File(path, "r+") as f:
            g = synthetic._sweep(f["sweeps"], "gemm", "compute")
            synthetic.points_table(g, {"dtype": (["float32"], ""), "size": ([1024], "1")},
                                   {"iteration_time_s": (t[:, None, :], "s"),
                                    "rate_tflops": (2e-3 / np.median(t, axis=1)[:, None], "TFLOP/s")})
        return path

    def test_compute_pools_every_rank(self):
        base = self.with_compute("b.h5", (1.0, 1.0), seed=1)
        # one rank's device was busy the whole point: the other still shows the code's speed
        one = self.with_compute("one.h5", (1.0, 1.4), seed=2)
        both = self.with_compute("both.h5", (1.1, 1.1), seed=3)  # every device 10 % slower
        verdicts = {}
        for tag, new in (("one", one), ("both", both)):
            run_cli(base, new, "--json", self.path(f"{tag}.json"))
            with open(self.path(f"{tag}.json")) as f:
                (row,) = [r for r in json.load(f)["rows"] if r["sweep"] == "gemm"]
            verdicts[tag] = row
        self.assertEqual(verdicts["one"]["n_new"], 40)  # 2 ranks x 20 iterations
        self.assertNotEqual(verdicts["one"]["verdict"], "regression")
        self.assertEqual(verdicts["both"]["verdict"], "regression")

    def test_min_bytes_default_and_json_stdout(self):
        base = self.noisy("base.h5", seed=1)
        new = self.noisy("new.h5", seed=2)
        with h5py.File(new, "r+") as f:  # only the small collectives got twice as slow
            g = f["sweeps/coll"]
            small = g["points/message_size_bytes"][()] < (1 << 20)
            for name, factor in (("iteration_time_s", 2.0), ("busbw_Bps", 0.5)):
                v = g[name][()]
                v[:, small] *= factor
                g[name][...] = v
        rc, out, _ = run_cli(base, new, "--json")
        doc = json.loads(out)  # --json alone: the JSON document only
        self.assertEqual((rc, doc["exit_code"]), (0, 0))
        self.assertEqual(doc["skipped"]["below --min-bytes"], 8 + 3)  # collectives + pingpong
        self.assertEqual(run_cli(base, new, "--min-bytes", "0")[0], 1)

    def test_different_config_exits_2_unless_allowed(self):
        base = self.noisy("base.h5", seed=1)
        other = self.noisy("other.h5", seed=2, config_text="run:\n  name: x\nbackend: host\n"
                                                           "sweeps:\n  - {type: collectives}\n")
        renamed = self.noisy("renamed.h5", seed=3, config_text="run:\n  name: other\n"
                                                               "  output_dir: elsewhere\nbackend: host\n")
        rc, out, err = run_cli(base, other)
        self.assertEqual(rc, 2)
        self.assertIn("different work", err)
        self.assertIn("config.sweeps", err)
        rc, out, _ = run_cli(base, other, "--allow-different")
        self.assertEqual(rc, 0, out)
        self.assertIn("diff (allowed): config.sweeps", out)
        self.assertEqual(run_cli(base, renamed)[0], 0)  # name and output_dir are not work
        with h5py.File(renamed, "r+") as f:  # another commit: a note, not a difference
            f["run"].attrs["git_commit"] = np.bytes_("def456")
        rc, out, _ = run_cli(base, renamed)
        self.assertEqual(rc, 0)
        self.assertIn("note: git_commit: abc123 -> def456", out)
        wider = synthetic.make_noisy_run(self.path("w4.h5"), 4, seed=4)
        rc, _, err = run_cli(base, wider)
        self.assertEqual(rc, 2)
        self.assertIn("world size: 2 -> 4", err)

    def test_one_rank_groups_skipped(self):
        base = self.noisy("base.h5", seed=1)
        new = self.noisy("new.h5", seed=2)
        for path in (base, new):  # intra_node points as on a one-rank-per-node machine
            with h5py.File(path, "r+") as f:
                g = f["sweeps/coll"]
                one = np.array([x == b"intra_node" for x in g["points/group"][()]])
                gs = g["group_size"][()]
                gs[:, one] = 1
                g["group_size"][...] = gs
                if path == new:  # ... whose (meaningless) times doubled
                    v = g["iteration_time_s"][()]
                    v[:, one] *= 2
                    g["iteration_time_s"][...] = v
        rc, out, _ = run_cli(base, new, "--json")
        doc = json.loads(out)
        self.assertEqual(rc, 0)
        self.assertEqual(doc["skipped"]["one-rank group"], 2)  # intra_node at 1 MiB: 2 operations
        self.assertFalse([r for r in doc["rows"] if "intra_node" in r["point"]])
        self.assertTrue([r for r in doc["rows"] if "group=world" in r["point"]])


if __name__ == "__main__":
    unittest.main()
