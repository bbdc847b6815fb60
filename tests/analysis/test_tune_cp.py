"""Unit tests of ringbench_analysis.tune_cp: the CP decision on synthetic scheme timings (ring
the default), the policy dict, and lookup (ringbench's CpPolicy::pick restated)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "analysis"))

try:
    import pandas as pd
except ImportError as exc:  # pragma: no cover
    print(f"SKIPPED: {exc}")
    sys.exit(77)

from ringbench_analysis import tune_cp, tuning  # noqa: E402

SHAPE = ("bf16", 128, 16, 16, False, "contiguous", "none", 4, "node")
TOKENS = [2048, 4096, 8192, 16384, 32768]


def frame(times, failed=()):
    """times: scheme -> time per TOKENS point; failed: (scheme, tokens) that failed parity."""
    rows = []
    for scheme, ts in times.items():
        for tokens, t in zip(TOKENS, ts):
            rows.append(dict(zip(tune_cp.CP_KEYS, SHAPE), block_rows=tokens, path=scheme,
                             default_path="ring", time_s=t, parity_ok=(scheme, tokens) not in failed))
    return pd.DataFrame(rows)


def policy(times, failed=(), margin=1.05):
    decisions = tuning.decide(frame(times, failed), None, margin, 1, keys=tune_cp.CP_KEYS)
    choices = {s: tuning.ranges_from(d) for s, d in decisions.items()}
    return tune_cp.policy_dict(choices, {"device": "cuda", "gpu": "H100"}, margin, 1, "2026-11-27",
                               "run.h5", "schemes")


class Picks(unittest.TestCase):
    """policy_picks: what auto runs at measured points against the fastest (cp_policy_check.py)."""

    def test_picks_between_grid_points_and_their_ratio(self):
        # A policy from the even points only; the odd ones (4096, 16384) are held out.
        pol = policy({"ring": [1.0] * 5, "ulysses": [0.8, 0.8, 0.8, 1.1, 1.1]})
        measured = frame({"ring": [1.0] * 5, "ulysses": [0.8, 0.9, 0.8, 1.1, 1.1]},
                         failed={("ulysses", 32768)})
        picks = tune_cp.policy_picks(pol, measured).set_index("tokens")
        self.assertEqual(list(picks["pick"]), ["ulysses", "ulysses", "ulysses", "ring", "ring"])
        self.assertAlmostEqual(picks.loc[4096, "ratio"], 1.0)  # its ulysses 0.9 is still the fastest
        self.assertEqual(picks.loc[32768, "fastest"], "ring")  # ulysses failed parity there
        pol["rules"][0]["ranges"][0]["scheme"] = "allgather"  # never measured: no time, NaN ratio
        self.assertTrue(tune_cp.policy_picks(pol, measured)["ratio"].isna().iloc[0])

    def test_a_slower_pick_shows_its_ratio(self):
        pol = policy({"ring": [1.0] * 5, "ulysses": [0.5] * 5})
        picks = tune_cp.policy_picks(pol, frame({"ring": [1.0] * 5, "ulysses": [0.5, 1.2, 0.5, 0.5, 0.5]}))
        self.assertAlmostEqual(picks.set_index("tokens").loc[4096, "ratio"], 1.2)


class Decide(unittest.TestCase):
    def test_a_scheme_replaces_the_ring_only_by_the_margin_and_with_parity(self):
        d = policy({"ring": [1.0] * 5, "ulysses": [0.8, 0.8, 0.98, 1.2, 1.2], "hybrid:2": [0.7] + [2.0] * 4},
                   failed={("hybrid:2", 2048)})
        ranges = d["rules"][0]["ranges"]
        self.assertEqual([(r["tokens_min"], r["tokens_max"], r["scheme"]) for r in ranges],
                         [(2048, 4096, "ulysses"), (8192, 32768, "ring")])
        self.assertEqual(ranges[0]["speedup"], 1.25)
        self.assertEqual({r["default_scheme"] for r in ranges}, {"ring"})
        self.assertEqual({k: d["rules"][0][k] for k in tune_cp.CP_KEYS}, dict(zip(tune_cp.CP_KEYS, SHAPE)))
        self.assertEqual((d["version"], d["kind"]), (1, "ringbench-cp-policy"))

    def test_hybrid_carries_its_degree_and_a_failed_ring_is_replaced_whatever_the_margin(self):
        d = policy({"ring": [1.0] * 5, "hybrid:2": [0.99] * 5}, failed={("ring", t) for t in TOKENS})
        (r,) = d["rules"][0]["ranges"]
        self.assertEqual((r["scheme"], r["ulysses_degree"]), ("hybrid", 2))
        self.assertEqual(tune_cp.candidate("hybrid", 2), "hybrid:2")
        self.assertEqual(tune_cp.candidate("ulysses", 4), "ulysses")

    def test_the_ring_only_measure(self):
        q = tuning.builtin_quality(frame({"ring": [1.0] * 5, "ulysses": [0.5, 1.0, 1.0, 1.0, 1.0]}),
                                   keys=tune_cp.CP_KEYS)
        self.assertEqual((q["points"], q["within"]), (5, 4))
        self.assertAlmostEqual(q["worst"][0], 2.0)


class Lookup(unittest.TestCase):
    def test_inside_between_reach_null_and_other_shapes(self):
        d = policy({"ring": [1.0] * 5, "ulysses": [0.5, 0.5, 2.0, 2.0, 2.0]})
        self.assertEqual(tune_cp.lookup(d, SHAPE, 2048), ("ulysses", 4))
        self.assertEqual(tune_cp.lookup(d, SHAPE, 5792), ("ulysses", 4))  # nearer 4096 by ratio
        self.assertEqual(tune_cp.lookup(d, SHAPE, 5793), ("ring", 1))
        self.assertEqual(tune_cp.lookup(d, SHAPE, 1024), ("ulysses", 4))  # a factor 2 below
        self.assertIsNone(tune_cp.lookup(d, SHAPE, 1023))
        self.assertEqual(tune_cp.lookup(d, SHAPE, 65536), ("ring", 1))
        self.assertIsNone(tune_cp.lookup(d, SHAPE, 65537))
        self.assertIsNone(tune_cp.lookup(d, SHAPE[:-1] + ("nodes",), 2048))
        d["rules"][0]["ranges"][0]["scheme"] = None
        self.assertIsNone(tune_cp.lookup(d, SHAPE, 2048))

    def test_dilation_text_matches_ringbench(self):
        self.assertEqual(tune_cp.dilation_text([], []), "none")
        self.assertEqual(tune_cp.dilation_text([2048, 4096], [1, 2]), "2048/1, 4096/2")


if __name__ == "__main__":
    unittest.main()
