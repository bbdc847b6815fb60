"""Unit tests of ringbench_analysis.tuning (choose / policy_dict / compare_policies) on
synthetic timings with known answers."""
import math
import os
import sys
import tempfile
import unittest
from unittest import mock

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "analysis"))

try:
    import pandas as pd
except ImportError as exc:  # pragma: no cover
    print(f"SKIPPED: {exc}")
    sys.exit(77)

from ringbench_analysis import tuning  # noqa: E402

GRID = [64, 128, 256, 512, 1024, 2048]
SHAPE = ("bf16", 128, True, 1, 0)


def frame(times, parity_fail=(), shape=SHAPE):
    """times: path -> list of time_s per GRID point (None = not measured);
    parity_fail: (path, block_rows) pairs that failed parity."""
    rows = []
    for path, per_point in times.items():
        for rows_, t in zip(GRID, per_point):
            if t is None:
                continue
            rows.append(dict(zip(tuning.SHAPE_KEYS, shape), block_rows=rows_, path=path,
                             time_s=t, parity_ok=(path, rows_) not in parity_fail))
    return pd.DataFrame(rows)


def paths_per_point(ranges):
    out = []
    for r in ranges:
        out += [r.path for g in GRID if r.rows_lo <= g <= r.rows_hi]
    return out


class Choose(unittest.TestCase):
    def test_margin_decides_a_15_percent_faster_path(self):
        df = frame({"default": [1.0] * 6, "fast": [1.0 / 1.15] * 6})
        loose = tuning.choose(df, "default", 1.1)[SHAPE]
        strict = tuning.choose(df, "default", 1.5)[SHAPE]
        self.assertEqual([(r.path, r.rows_lo, r.rows_hi) for r in loose], [("fast", 64, 2048)])
        self.assertAlmostEqual(loose[0].speedup_vs_default, 1.15)
        self.assertEqual([r.path for r in strict], ["default"])
        self.assertIn("only 1.15x", strict[0].why)

    def test_hysteresis_smooths_a_single_point_flip(self):
        fast = [1.0, 1.0, 0.5, 1.0, 1.0, 1.0]  # 2x faster only at block_rows 256
        df = frame({"default": [0.9] * 6, "fast": fast})
        smoothed = tuning.choose(df, "default", 1.2)[SHAPE]
        self.assertEqual([r.path for r in smoothed], ["default"])
        self.assertIn("hysteresis", smoothed[0].why)
        raw = tuning.choose(df, "default", 1.2, hysteresis=1)[SHAPE]
        self.assertEqual([r.path for r in raw], ["default", "fast", "default"])

    def test_two_point_run_switches_and_flip_flop_is_removed(self):
        df = frame({"default": [1.0] * 6, "fast": [1.0, 1.0, 0.5, 0.5, 1.0, 1.0]})
        self.assertEqual([(r.path, r.rows_lo, r.rows_hi) for r in
                          tuning.choose(df, "default", 1.2)[SHAPE]],
                         [("default", 64, 128), ("fast", 256, 512), ("default", 1024, 2048)])
        alternating = frame({"default": [1.0] * 6, "fast": [0.5, 1.0, 0.5, 1.0, 0.5, 1.0]})
        self.assertEqual([r.path for r in tuning.choose(alternating, "default", 1.2)[SHAPE]],
                         ["default"])

    def test_per_point_choices_respect_parity_and_the_default(self):
        # (timings, parity failures, expected path at each grid point)
        cases = {
            "hysteresis never keeps a path slower than the default":
                ({"default": [1.0] * 6, "fast": [0.5, 0.5, 0.5, 1.5, 0.5, 0.5]}, set(),
                 ["fast", "fast", "fast", "default", "fast", "fast"]),
            "a parity-failed faster path is never chosen":
                ({"default": [1.0] * 6, "fast": [0.2] * 6, "ok": [0.7] * 6},
                 {("fast", g) for g in GRID}, ["ok"] * 6),
            "a parity failure overrides hysteresis":
                ({"default": [1.0] * 6, "fast": [0.5] * 6}, {("fast", 256)},
                 ["fast", "fast", "default", "fast", "fast", "fast"]),
        }
        for name, (times, failed, expected) in cases.items():
            with self.subTest(name):
                df = frame(times, parity_fail=failed)
                self.assertEqual(paths_per_point(tuning.choose(df, "default", 1.2)[SHAPE]), expected)

    def test_failed_default_picks_fastest_passing_and_says_why(self):
        df = frame({"default": [1.0] * 6, "a": [1.1] * 6, "b": [1.05] * 6},
                   parity_fail={("default", g) for g in GRID})
        ranges = tuning.choose(df, "default", 1.2)[SHAPE]
        self.assertEqual([r.path for r in ranges], ["b"])
        self.assertIn("failed parity", ranges[0].why)
        self.assertLess(ranges[0].speedup_vs_default, 1.0)

    def test_unusable_points_and_contiguous_cover(self):
        df = frame({"default": [1.0, 1.0, 1.0, None, 1.0, 1.0], "fast": [0.5] * 6},
                   parity_fail={("fast", 512), ("fast", 1024), ("fast", 2048)})
        ranges = tuning.choose(df, "default", 1.2)[SHAPE]
        self.assertEqual([(r.path, r.rows_lo, r.rows_hi) for r in ranges],
                         [("fast", 64, 256), (None, 512, 512), ("default", 1024, 2048)])
        self.assertIn("unusable", ranges[1].why)
        self.assertTrue(math.isnan(ranges[1].speedup_vs_default))
        covered = paths_per_point(ranges)
        self.assertEqual(len(covered), len(GRID))
        for a, b in zip(ranges, ranges[1:]):
            self.assertEqual(GRID.index(b.rows_lo), GRID.index(a.rows_hi) + 1)

    def test_shape_groups_are_separate_and_fwd_bwd_columns_are_summed(self):
        other = ("fp16", 64, False, 2, 512)
        df = pd.concat([frame({"default": [1.0] * 6, "fast": [0.5] * 6}),
                        frame({"default": [1.0] * 6, "fast": [0.95] * 6}, shape=other)])
        df["forward_time_s"] = df["time_s"] / 3
        df["backward_time_s"] = df["time_s"] * 2 / 3
        choices = tuning.choose(df.drop(columns="time_s"), "default", 1.2)
        self.assertEqual([r.path for r in choices[SHAPE]], ["fast"])
        self.assertEqual([r.path for r in choices[other]], ["default"])

    def test_bad_input_is_refused(self):
        df = frame({"default": [1.0] * 6})
        with self.assertRaisesRegex(tuning.TuningError, "parity_ok"):
            tuning.choose(df.drop(columns="parity_ok"), "default", 1.2)
        with self.assertRaisesRegex(tuning.TuningError, "margin"):
            tuning.choose(df, "default", 0.9)


def policy(ranges, margin=1.2):
    """ranges: list of (lo, hi, path) for SHAPE."""
    choices = {SHAPE: [tuning.Range(lo, hi, p, 1.5, "") for lo, hi, p in ranges]}
    return tuning.policy_dict(choices, {"gpu": "H100"}, margin, date="2026-01-01")


class Policy(unittest.TestCase):
    def test_policy_dict_schema(self):
        d = policy([(64, 256, "default"), (512, 2048, "fast")])
        self.assertEqual(d["version"], 1)
        self.assertEqual(set(d["machine"]), set(tuning.MACHINE_KEYS))
        self.assertEqual(d["machine"]["gpu"], "H100")
        self.assertIsNone(d["machine"]["commit"])
        rule = d["rules"][0]
        self.assertEqual([rule[k] for k in tuning.SHAPE_KEYS], list(SHAPE))
        self.assertEqual(rule["ranges"][1], {"block_rows_min": 512, "block_rows_max": 2048,
                                             "path": "fast", "speedup": 1.5})

    def test_yaml_round_trip_with_and_without_pyyaml(self):
        df = frame({"default": [1.0] * 6, "fast": [0.5, 0.5, 0.5, None, 1.0, 1.0]})
        d = tuning.policy_dict(tuning.choose(df, "default", 1.2), {}, 1.2)
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "tuned.yaml")
            tuning.write_policy_yaml(d, out)
            self.assertEqual(tuning.read_policy_yaml(out), d)
            with mock.patch.dict(sys.modules, {"yaml": None}):
                tuning.write_policy_yaml(d, out)
                self.assertEqual(tuning.read_policy_yaml(out), d)
            self.assertEqual(tuning.read_policy_yaml(out), d)  # JSON fallback is YAML too


class Compare(unittest.TestCase):
    OLD = [(64, 256, "default"), (512, 2048, "fast")]

    def test_identical_policies_have_no_change(self):
        result = tuning.compare_policies(policy(self.OLD), policy(self.OLD), GRID)
        self.assertEqual(result, ([], 0))

    def test_one_step_move_is_reported_but_passes(self):
        new = [(64, 512, "default"), (1024, 2048, "fast")]
        changes, code = tuning.compare_policies(policy(self.OLD), policy(new), GRID)
        self.assertEqual(code, 0)
        self.assertEqual([(c["kind"], c["steps"], c["block_rows_min"]) for c in changes],
                         [("moved switch point", 1, 512)])

    def test_two_step_move_fails(self):
        new = [(64, 64, "default"), (128, 2048, "fast")]
        changes, code = tuning.compare_policies(policy(self.OLD), policy(new), GRID)
        self.assertEqual(code, 1)
        self.assertEqual([(c["kind"], c["steps"]) for c in changes],
                         [("moved switch point", 2)])
        self.assertIn("default -> fast", changes[0]["text"])

    def test_new_path_is_a_changed_choice(self):
        new = [(64, 256, "default"), (512, 2048, "other")]
        changes, code = tuning.compare_policies(policy(self.OLD), policy(new), GRID)
        self.assertEqual(code, 1)
        self.assertEqual(changes[0]["kind"], "changed choice")

    def test_added_shape_is_listed_without_failing(self):
        new = policy(self.OLD)
        new["rules"].append(dict(new["rules"][0], dtype="fp16"))
        changes, code = tuning.compare_policies(policy(self.OLD), new, GRID)
        self.assertEqual(code, 0)
        self.assertEqual([c["kind"] for c in changes], ["added shape"])


if __name__ == "__main__":
    unittest.main()
