"""Tests of absolute reference values (references.py, `compare --reference`) on synthetic files
with known numbers: inside its bounds passes, above the upper or below the lower bound fails
(exit 1) with the file, the GPU key, the entry and the bound named; unusable reference files
are exit 2; inputs/reference_cp_schemes.yaml is a valid file.
Run: PYTHONPATH=analysis python3 -m unittest tests/analysis/test_reference.py
"""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from tempdir_case import TempDirCase, rb_analysis  # noqa: E402  (first: analysis/ on the path, skip without h5py)

import synthetic  # noqa: E402
from ringbench_analysis import references  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def ring_time(seq_len, ring_size):
    """The slowest rank's median total time of a synthetic point (no straggler)."""
    c, t, _ = synthetic.step_model(seq_len, ring_size)
    return 3 * ring_size * max(c, t)


def pingpong_bw(size):
    return size / (synthetic.ALPHA + size / synthetic.BETA)


class Base(TempDirCase):
    def setUp(self):
        super().setUp()
        self.h5 = synthetic.make_run(self.path("run.h5"), 2, seq_lens=(1024, 2048),
                                     bad_points={(2048, 2): "oom"})

    def write(self, text):
        path = self.path("ref.yaml")
        with open(path, "w") as f:
            f.write("version: 1\nkind: ringbench-reference\nreferences:\n" + text)
        return path

    def compare(self, ref, *more):
        return rb_analysis("compare", self.h5, self.h5, "--reference", ref, *more)


def entry(sweep, point, metric, ref):
    return f"    - {{sweep: {sweep}, point: {point}, metric: {metric}, reference: {ref}}}\n"


class BoundsTest(Base):
    def test_within_bounds_passes(self):
        t, bw = ring_time(1024, 2), pingpong_bw(65536)
        rc, out, _ = self.compare(self.write(
            "  host:\n" + entry("ring", "{seq_len: 1024}", "total_time_s", f"[{t * 1.05!r}, -0.10, 0.10, s]")
            + entry("pingpong", "{message_size_bytes: 65536}", "bandwidth_Bps", f"[{bw!r}, -0.05, null, B/s]")))
        self.assertEqual(rc, 0, out)
        self.assertIn("2 value(s) checked, 0 outside their bounds", out)
        self.assertIn("OK:", out.splitlines()[-1])

    def test_above_the_upper_bound_fails_naming_file_key_and_bound(self):
        t = ring_time(1024, 2)
        ref = self.write("  host:\n" + entry("ring", "{seq_len: 1024}", "total_time_s",
                                              f"[{t / 1.2!r}, null, 0.10, s]"))
        rc, out, _ = self.compare(ref)
        self.assertEqual(rc, 1)
        fail = [x for x in out.splitlines() if x.startswith("REFERENCE FAIL")]
        self.assertEqual(len(fail), 1, out)
        self.assertIn(f"{ref}: 'host'[0] ring seq_len=1024 total_time_s: {t:.4g} s above the upper bound "
                      f"{t / 1.2 * 1.1:.4g} s (reference {t / 1.2:.4g} s +10%)", fail[0])
        self.assertTrue(out.splitlines()[-1].startswith("FAIL: 1 value(s) outside their reference bounds"))

    def test_below_the_lower_bound_fails(self):
        bw = pingpong_bw(65536)
        rc, out, _ = self.compare(self.write("  host:\n" + entry(
            "pingpong", "{message_size_bytes: 65536}", "bandwidth_Bps", f"[{bw * 2!r}, -0.25, null, B/s]")))
        self.assertEqual(rc, 1)
        self.assertIn(f"bandwidth_Bps: {bw:.4g} B/s below the lower bound {bw * 1.5:.4g} B/s "
                      f"(reference {bw * 2:.4g} B/s -25%)", out)

    def test_a_partial_point_checks_every_match_and_an_oom_point_fails(self):
        t = ring_time(1024, 2)
        rc, out, _ = self.compare(self.write("  host:\n" + entry(
            "ring", "{ring_size: 2}", "total_time_s", f"[{t!r}, null, 100, s]")), "--json", "-")
        self.assertEqual(rc, 1)
        rows = json.loads(out)["reference"]["rows"]
        self.assertEqual([(r["point"]["seq_len"], r["ok"]) for r in rows], [(1024, True), (2048, False)])
        self.assertIn("not measured (status oom)", rows[1]["why"])
        self.assertIn("ring ring_size=2,seq_len=2048 total_time_s", rows[1]["why"])

    def test_an_entry_matching_nothing_fails(self):
        rc, out, _ = self.compare(self.write(
            "  host:\n" + entry("ring", "{seq_len: 999}", "total_time_s", "[1.0, null, 0.1, s]")
            + entry("gone", "{}", "total_time_s", "[1.0, null, 0.1, s]")))
        self.assertEqual(rc, 1)
        self.assertIn("'host'[0] ring seq_len=999 total_time_s: no point of NEW matches", out)
        self.assertIn("'host'[1] gone (every point) total_time_s: NEW has no sweep 'gone'", out)

    def test_another_gpu_is_a_note(self):
        rc, out, _ = self.compare(self.write("  NVIDIA H100 80GB HBM3:\n" + entry(
            "ring", "{seq_len: 1024}", "total_time_s", "[1.0e-9, null, 0.1, s]")))
        self.assertEqual(rc, 0)
        self.assertIn("no entry for GPU 'host' (it has: 'NVIDIA H100 80GB HBM3'): nothing checked", out)


class InvalidFileTest(Base):
    def check_exit_2(self, body, words):
        rc, _, err = self.compare(self.write(body))
        self.assertEqual(rc, 2, err)
        self.assertIn(words, err)

    def test_unit_mismatch(self):
        self.check_exit_2("  host:\n" + entry("ring", "{seq_len: 1024}", "total_time_s", "[1.0, null, 0.1, ms]"),
                          "'host'[0]: unit 'ms' of total_time_s, the file's is 's'")

    def test_bad_bounds_and_keys(self):
        self.check_exit_2("  host:\n" + entry("ring", "{}", "total_time_s", "[1.0, 0.1, 0.2, s]"),
                          "references.'host'[0]: lower bound 0.1 must be a fraction <= 0")
        self.check_exit_2("  host:\n    - {sweep: ring, metric: total_time_s}\n",
                          "references.'host'[0]: missing reference")
        self.check_exit_2("  host:\n" + entry("ring", "{}", "no_such_s", "[1.0, null, 0.1, s]"),
                          "sweep 'ring' has no metric 'no_such_s'")

    def test_not_a_reference_file(self):
        path = self.path("x.yaml")
        with open(path, "w") as f:
            f.write("version: 2\n")
        rc, _, err = self.compare(path)
        self.assertEqual(rc, 2)
        self.assertIn("not a reference file", err)
        rc, _, err = self.compare(self.path("missing.yaml"))
        self.assertEqual(rc, 2)
        self.assertIn("missing.yaml", err)


class ExampleTest(unittest.TestCase):
    def test_the_example_in_inputs_is_valid(self):
        refs = references.load(os.path.join(ROOT, "inputs", "reference_cp_schemes.yaml"))
        self.assertEqual(list(refs), ["NVIDIA H100 80GB HBM3"])
        self.assertEqual({e["reference"][3] for e in refs["NVIDIA H100 80GB HBM3"]}, {"s", "TFLOP/s"})


if __name__ == "__main__":
    unittest.main()
