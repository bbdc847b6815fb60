"""Unit tests of ringbench_analysis.tuning (choose / decide / policy_dict / validate_policy /
lookup / compare_policies) on synthetic timings with known answers."""
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tempdir_case import TempDirCase  # noqa: E402  (a temporary folder per test)

GRID = [64, 128, 256, 512, 1024, 2048]
# SHAPE_KEYS order: dtype, head_dim, causal, segment, rate
SHAPE = ("bf16", 128, True, 0, 0)


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
        self.assertEqual({r.default_path for r in loose + strict}, {"default"})

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
        other = ("fp16", 64, False, 512, 2)
        df = pd.concat([frame({"default": [1.0] * 6, "fast": [0.5] * 6}),
                        frame({"default": [1.0] * 6, "fast": [0.95] * 6}, shape=other)])
        df["forward_time_s"] = df["time_s"] / 3
        df["backward_time_s"] = df["time_s"] * 2 / 3
        choices = tuning.choose(df.drop(columns="time_s"), "default", 1.2)
        self.assertEqual([r.path for r in choices[SHAPE]], ["fast"])
        self.assertEqual([r.path for r in choices[other]], ["default"])

    def test_default_is_per_shape(self):
        # the same timings under two shapes: only the shape whose default is the slow path
        # switches; as a mapping and as a default_path column
        a, b = SHAPE, ("fp16", 64, False, 0, 0)
        df = pd.concat([frame({"slow": [1.0] * 6, "quick": [0.7] * 6}, shape=s) for s in (a, b)])
        by_map = tuning.choose(df, {a: "slow", b: "quick"}, 1.2)
        self.assertEqual([(r.path, r.default_path) for r in by_map[a]], [("quick", "slow")])
        self.assertEqual([(r.path, r.default_path) for r in by_map[b]], [("quick", "quick")])
        self.assertAlmostEqual(by_map[a][0].speedup_vs_default, 1.0 / 0.7)
        self.assertAlmostEqual(by_map[b][0].speedup_vs_default, 1.0)
        self.assertIn("default quick is the fastest", by_map[b][0].why)
        df["default_path"] = ["slow" if r.head_dim == 128 else "quick" for r in df.itertuples()]
        self.assertEqual(tuning.choose(df, None, 1.2), by_map)

    def test_default_must_be_known_and_one_per_point(self):
        df = frame({"slow": [1.0] * 6, "quick": [0.7] * 6})
        with self.assertRaisesRegex(tuning.TuningError, "no default path for shape"):
            tuning.choose(df, {("fp16", 64, False, 0, 0): "slow"}, 1.2)
        with self.assertRaisesRegex(tuning.TuningError, "default_path column"):
            tuning.choose(df, None, 1.2)
        df["default_path"] = df["path"]  # two defaults at every block_rows
        with self.assertRaisesRegex(tuning.TuningError, "block_rows 64: expected one default path.*quick.*slow"):
            tuning.choose(df, None, 1.2)

    def test_default_may_change_with_block_rows(self):
        # The built-in rule decides by kernel shape: flash for small blocks, cudnn for large.
        df = frame({"flash": [0.5, 0.5, 0.5, 1.0, 1.0, 0.5], "cudnn": [1.0, 1.0, 1.0, 0.5, 0.5, 1.0]})
        df["default_path"] = ["flash" if r.block_rows <= 256 else "cudnn" for r in df.itertuples()]
        ranges = tuning.choose(df, None, 1.2, hysteresis=1)[SHAPE]
        self.assertEqual([(r.path, r.default_path, r.rows_lo, r.rows_hi) for r in ranges],
                         [("flash", "flash", 64, 256), ("cudnn", "cudnn", 512, 1024),
                          ("flash", "cudnn", 2048, 2048)])
        self.assertEqual([r.speedup_vs_default for r in ranges], [1.0, 1.0, 2.0])
        self.assertEqual(tuning.defaults_text(ranges), "flash 64-256, cudnn 512-2048")
        d = tuning.policy_dict({SHAPE: ranges}, {}, 1.2, grid=GRID_AT)
        self.assertEqual([r["default_path"] for r in d["rules"][0]["ranges"]], ["flash", "cudnn", "cudnn"])
        self.assertEqual(tuning.validate_policy(d), [])
        # Hysteresis measures each point against its own default: the isolated flash at 2048
        # is smoothed to the current cudnn, which is that point's default.
        smoothed = tuning.choose(df, None, 1.2, hysteresis=2)[SHAPE]
        self.assertEqual([(r.path, r.rows_lo, r.rows_hi) for r in smoothed],
                         [("flash", 64, 256), ("cudnn", 512, 2048)])

    def test_decide_gives_each_point_its_own_reason(self):
        df = frame({"default": [1.0] * 6, "fast": [1.0, 1.0, 0.5, 0.5, 1.0, 1.0]})
        decisions = tuning.decide(df, "default", 1.2)[SHAPE]
        self.assertEqual([d.block_rows for d in decisions], GRID)
        self.assertEqual([d.path for d in decisions], paths_per_point(
            tuning.choose(df, "default", 1.2)[SHAPE]))
        self.assertIn("2.00x faster", decisions[2].why)
        self.assertAlmostEqual(decisions[2].speedup_vs_default, 2.0)
        self.assertIn("default default", decisions[0].why)

    def test_bad_input_is_refused(self):
        df = frame({"default": [1.0] * 6})
        with self.assertRaisesRegex(tuning.TuningError, "parity_ok"):
            tuning.choose(df.drop(columns="parity_ok"), "default", 1.2)
        with self.assertRaisesRegex(tuning.TuningError, "margin"):
            tuning.choose(df, "default", 0.9)
        with self.assertRaisesRegex(tuning.TuningError, "hysteresis"):
            tuning.choose(df, "default", 1.2, hysteresis=0)


def policy(ranges, margin=1.2, default="default", shape=SHAPE):
    """ranges: list of (lo, hi, path) for `shape`."""
    choices = {shape: [tuning.Range(lo, hi, p, 1.5, "", default) for lo, hi, p in ranges]}
    return tuning.policy_dict(choices, {"gpu": "H100"}, margin, grid=GRID_AT, date="2026-01-01",
                              source="run.h5", sweep="tuning")


GRID_AT = {"batch": 1, "num_heads": 2}


class BuiltinQuality(unittest.TestCase):
    def test_counts_points_within_tolerance_the_worst_and_the_missed(self):
        df = frame({"flash": [1.0, 1.0, 1.0, 1.0, 1.0, 1.0], "cudnn": [1.04, 1.2, 0.5, 2.0, 1.0, 1.0]},
                   parity_fail={("cudnn", 1024), ("flash", 2048), ("cudnn", 2048)})
        df["default_path"] = "cudnn"
        q = tuning.builtin_quality(df)
        # 64: 1.04 within; 128: 1.2 not; 256: cudnn fastest; 512: 2.0 worst; 1024: cudnn failed
        # parity (missed); 2048: nothing passed (not a point).
        self.assertEqual((q["points"], q["within"], q["missed"]), (5, 2, 1))
        self.assertEqual(q["worst"][1:], (SHAPE, 512))
        self.assertAlmostEqual(q["worst"][0], 2.0)
        text = tuning.builtin_quality_text(q)
        self.assertIn("within 5 % of the fastest passing path on 2 of 5 grid point(s)", text)
        self.assertIn("worst 2.00x slower", text)
        self.assertIn("failed parity or was not measured on 1", text)


class Policy(unittest.TestCase):
    def test_policy_dict_schema(self):
        d = policy([(64, 256, "default"), (512, 2048, "fast")])
        self.assertEqual(list(d), ["version", "kind", "machine", "source", "sweep", "date",
                                   "margin", "hysteresis", "grid", "rules"])
        self.assertEqual((d["version"], d["kind"]), (2, "ringbench-kernel-policy"))
        self.assertEqual(d["grid"], {"batch": 1, "num_heads": 2})
        self.assertEqual(list(d["machine"]), list(tuning.MACHINE_KEYS))
        self.assertEqual(d["machine"]["gpu"], "H100")
        self.assertIsNone(d["machine"]["commit"])
        self.assertEqual((d["source"], d["sweep"], d["hysteresis"]), ("run.h5", "tuning", 2))
        rule = d["rules"][0]
        self.assertEqual(list(rule), ["dtype", "head_dim", "causal", "segment", "rate", "ranges"])
        self.assertEqual([rule[k] for k in tuning.SHAPE_KEYS], list(SHAPE))
        self.assertEqual(rule["ranges"][1], {"block_rows_min": 512, "block_rows_max": 2048,
                                             "path": "fast", "default_path": "default",
                                             "speedup": 1.5})
        self.assertEqual(tuning.validate_policy(d), [])

    def test_causal_is_a_yaml_bool_and_each_rule_has_its_own_default(self):
        a, b = ("fp32", 16, 1, 32, 2), ("fp32", 16, 0, 0, 0)  # causal as the file's 0/1
        df = pd.concat([frame({"x": [1.0] * 6, "y": [0.9] * 6}, shape=a),
                        frame({"x": [1.0] * 6, "y": [0.9] * 6}, shape=b)])
        d = tuning.policy_dict(tuning.choose(df, {a: "x", b: "y"}, 1.2), {}, 1.2, grid=GRID_AT)
        rules = {r["causal"]: r for r in d["rules"]}
        self.assertIs(rules[True]["causal"], True)
        self.assertEqual((rules[True]["ranges"][0]["default_path"],
                          rules[False]["ranges"][0]["default_path"]), ("x", "y"))
        self.assertEqual([r["path"] for r in rules[True]["ranges"]], ["x"])
        self.assertEqual([r["path"] for r in rules[False]["ranges"]], ["y"])

    def test_yaml_round_trip_with_and_without_pyyaml(self):
        df = frame({"default": [1.0] * 6, "fast": [0.5, 0.5, 0.5, None, 1.0, 1.0]})
        d = tuning.policy_dict(tuning.choose(df, "default", 1.2), {"cuda_driver": "13.0"}, 1.2,
                               grid=GRID_AT, hysteresis=3, source="x.h5", sweep="tuning")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "tuned.yaml")
            tuning.write_policy_yaml(d, out)
            self.assertEqual(tuning.read_policy_yaml(out), d)
            with open(out) as f:
                text = f.read()
            # version-like text stays text for the C++ reader, not a float or a date
            self.assertRegex(text, r"cuda_driver: ['\"]13.0['\"]")
            self.assertRegex(text, r"date: ['\"]\d{4}-\d\d-\d\d['\"]")
            with mock.patch.dict(sys.modules, {"yaml": None}):
                tuning.write_policy_yaml(d, out)
                self.assertEqual(tuning.read_policy_yaml(out), d)
            self.assertEqual(tuning.read_policy_yaml(out), d)  # JSON fallback is YAML too


class Validate(TempDirCase):
    def broken(self, edit):
        d = policy([(64, 256, "default"), (512, 2048, "fast")])
        edit(d)
        return tuning.validate_policy(d)

    def test_each_broken_field_is_named(self):
        cases = {
            "kind": lambda d: d.pop("kind"),
            "version": lambda d: d.update(version=1),
            "grid must be": lambda d: d.pop("grid"),
            "grid must be {batch": lambda d: d["grid"].update(num_heads=0),
            "margin": lambda d: d.update(margin=0.5),
            "hysteresis": lambda d: d.update(hysteresis=0),
            "causal": lambda d: d["rules"][0].update(causal=1),
            "default_path": lambda d: d["rules"][0]["ranges"][0].pop("default_path"),
            "not above the previous": lambda d: d["rules"][0]["ranges"][1].update(
                block_rows_min=128),
            "block_rows_min/max": lambda d: d["rules"][0]["ranges"][0].update(block_rows_max=32),
            "path must be": lambda d: d["rules"][0]["ranges"][0].update(path=3),
            "second rule": lambda d: d["rules"].append(d["rules"][0]),
            "ranges must be": lambda d: d["rules"][0].update(ranges=[]),
        }
        for needle, edit in cases.items():
            with self.subTest(needle):
                problems = self.broken(edit)
                self.assertTrue(any(needle in p for p in problems), problems)

    def test_read_names_the_file_and_the_problem(self):
        self.assert_refused(tuning.read_policy_yaml, "version: 1\nkind: something-else\n", tuning.TuningError,
                            "bad.yaml.*kind")
        self.assert_refused(tuning.read_policy_yaml, "version: [1\n", tuning.TuningError,
                            "bad.yaml: not valid YAML")
        with self.assertRaisesRegex(tuning.TuningError, "missing.yaml: cannot read"):
            tuning.read_policy_yaml(self.path("missing.yaml"))


class Lookup(unittest.TestCase):
    """tuning.lookup: ringbench's kernel-shape match (kernels/kernel_policy.cpp) restated."""

    def test_exact_blocks_between_and_beyond_the_ranges(self):
        d = policy([(64, 128, "a"), (1024, 2048, "b"), (8192, 8192, None)])
        # Rows and keys both move: a block twice past a range is two log2 steps (in reach).
        for rows, want in ((64, "a"), (128, "a"), (256, "a"), (362, "a"), (363, "b"),
                           (1024, "b"), (4096, "b"), (8192, None), (32, "a"), (31, None),
                           (16384, None)):
            with self.subTest(rows=rows):
                self.assertEqual(tuning.lookup(d, SHAPE, rows), want)
        self.assertIsNone(tuning.lookup(d, ("fp16",) + SHAPE[1:], 64))  # no rule: built-in
        # Heads per call is an axis too: 2 tuned, 4 and 8 in reach, 16 not.
        self.assertEqual(tuning.lookup(d, SHAPE, 100, heads=8), "a")
        self.assertIsNone(tuning.lookup(d, SHAPE, 100, heads=16))

    def test_dilated_branches_match_by_sub_block_not_by_name(self):
        shape = ("bf16", 128, False)
        choices = {shape + (2048, 1): [tuning.Range(2048, 65536, "cudnn", 1.5, "", "flash")],
                   shape + (8192, 4): [tuning.Range(8192, 65536, "flash", 1.0, "", "flash")]}
        d = tuning.policy_dict(choices, {}, 1.2, grid={"batch": 1, "num_heads": 8})
        self.assertEqual(tuning.kernel_shape(8192, 8, 1, 8192, 4), (2048, 2048, 2, 4))
        self.assertEqual(tuning.kernel_shape(4096, 3, 2, 0, 0), (4096, 4096, 6, 1))
        # Untuned names: w 4096 r 2 at 16 heads is the w 2048 r 1 sub-block; w 16384 r 8 is one
        # step from w 8192 r 4; w 2048 r 4 at 16 heads is out of reach of both.
        self.assertEqual(tuning.lookup(d, shape + (4096, 2), 16384, heads=16), "cudnn")
        self.assertEqual(tuning.lookup(d, shape + (16384, 8), 32768), "flash")
        self.assertIsNone(tuning.lookup(d, shape + (2048, 4), 32768, heads=16))
        self.assertIsNone(tuning.lookup(d, shape + (0, 0), 16384))  # exact: no rule


class Compare(unittest.TestCase):
    OLD = [(64, 256, "default"), (512, 2048, "fast")]
    # the measured grid, and None: the grid derived from the two policies' range bounds
    GRIDS = {"measured grid": GRID, "range bounds": None}

    def compare(self, new, old=None):
        """compare_policies on both grids: they must agree; returns the measured grid's."""
        old = policy(old or self.OLD)
        results = {name: tuning.compare_policies(old, new, grid)
                   for name, grid in self.GRIDS.items()}
        measured, bounds = results.values()
        self.assertEqual(measured.exit_code, bounds.exit_code)
        self.assertEqual([c["kind"] for c in measured.changes], [c["kind"] for c in bounds.changes])
        return measured

    def test_identical_policies_have_no_change(self):
        self.assertEqual(self.compare(policy(self.OLD)), ([], 0))

    def test_one_step_move_is_reported_but_passes(self):
        changes, code = self.compare(policy([(64, 512, "default"), (1024, 2048, "fast")]))
        self.assertEqual(code, 0)
        self.assertEqual([(c["kind"], c["steps"], c["block_rows_min"]) for c in changes],
                         [("moved switch point", 1, 512)])

    def test_two_step_move_fails(self):
        changes, code = self.compare(policy([(64, 64, "default"), (128, 2048, "fast")]))
        self.assertEqual(code, 1)
        self.assertEqual([(c["kind"], c["steps"]) for c in changes],
                         [("moved switch point", 2)])
        self.assertIn("default -> fast", changes[0]["text"])

    def test_three_step_move_on_a_coarse_bounds_grid_still_fails(self):
        # OLD bounds 64, 1024, 2048 and NEW bounds 64, 128, 2048: 256 and 512 are on no bound
        old = [(64, 1024, "default"), (2048, 2048, "fast")]
        _, code = self.compare(policy([(64, 64, "default"), (128, 2048, "fast")]), old)
        self.assertEqual(code, 1)
        self.assertGreater(tuning.compare_policies(policy(old), policy(
            [(64, 64, "default"), (128, 2048, "fast")])).changes[0]["steps"], 1)

    def test_new_path_is_a_changed_choice(self):
        changes, code = self.compare(policy([(64, 256, "default"), (512, 2048, "other")]))
        self.assertEqual(code, 1)
        self.assertEqual(changes[0]["kind"], "changed choice")

    def test_added_shape_is_listed_without_failing(self):
        new = policy(self.OLD)
        new["rules"].append(dict(new["rules"][0], dtype="fp16"))
        changes, code = self.compare(new)
        self.assertEqual(code, 0)
        self.assertEqual([c["kind"] for c in changes], ["added shape"])

    def test_changed_default_is_listed_and_choices_decide(self):
        same = self.compare(policy(self.OLD, default="other"))
        self.assertEqual(([c["kind"] for c in same.changes], same.exit_code),
                         (["changed default"], 0))
        self.assertIn("default -> other", same.changes[0]["text"])

    def test_machine_differences(self):
        old, new = policy(self.OLD), policy(self.OLD)
        self.assertEqual(tuning.machine_differences(old, new), [])
        new["machine"].update(gpu="NVIDIA H200", cudnn="9.14.0", commit="other")
        self.assertEqual(tuning.machine_differences(old, new),
                         ["gpu: H100 -> NVIDIA H200", "cudnn: None -> 9.14.0"])


if __name__ == "__main__":
    unittest.main()
