"""compare's statistics (analysis/ringbench_analysis/verdict.py, compare.py) on synthetic files
with noisy per-iteration samples (synthetic.make_noisy_run): identical distributions are no
regression, 20 % slower is, 3 % within noise is not; different work exits 2; one-rank groups
are skipped. Run: PYTHONPATH=analysis python3 -m unittest discover -s tests/analysis
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
from ringbench_analysis import verdict  # noqa: E402
from ringbench_analysis.__main__ import main as cli  # noqa: E402


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli(["compare"] + [str(a) for a in argv])
    return rc, out.getvalue(), err.getvalue()


class JudgeTest(unittest.TestCase):
    def test_interval_brackets_the_ratio_and_is_reproducible(self):
        rng = np.random.default_rng(5)
        b, n = 1 + 0.02 * rng.standard_normal(20), 1.2 * (1 + 0.02 * rng.standard_normal(20))
        r1, r2 = verdict.bootstrap_ratio(b, n), verdict.bootstrap_ratio(b, n)
        self.assertEqual(r1, r2)  # fixed seed
        ratio, lo, hi = r1
        self.assertAlmostEqual(ratio, np.median(n) / np.median(b))
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
