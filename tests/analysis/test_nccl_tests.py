"""Tests of `rb-analysis nccl-tests` on a stored 4 x H200 collectives sweep and the nccl-tests
2.19.6 outputs taken right after it on the same node (tests/data/nccl_tests/README.md).
Run: PYTHONPATH=analysis python3 -m unittest tests/analysis/test_nccl_tests.py
"""
import json
import os
import shutil
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from tempdir_case import TempDirCase, rb_analysis  # noqa: E402  (first: analysis/ on the path, skip without h5py)

import h5py  # noqa: E402

from ringbench_analysis import nccl_tests  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "nccl_tests")
H5 = os.path.join(DATA, "coll_4xh200.h5")
OPS = ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"]


def outputs():
    return [os.path.join(DATA, f"{op}.txt") for op in OPS]


def run_cli(*args):
    return rb_analysis("nccl-tests", *args)


class ParseTest(TempDirCase):
    def test_reads_both_columns_and_the_operation_from_the_header(self):
        op, rows = nccl_tests.parse(os.path.join(DATA, "all_reduce.txt"))
        self.assertEqual(op, "all_reduce")
        self.assertEqual(len(rows), 10)  # 5 sizes x out-of-place / in-place
        self.assertAlmostEqual(rows[(67108864, 0)], 309.74)
        self.assertAlmostEqual(rows[(1073741824, 1)], 353.54)

    def test_alltoall_is_the_sweeps_all_to_all(self):
        op, rows = nccl_tests.parse(os.path.join(DATA, "alltoall.txt"))
        self.assertEqual(op, "all_to_all")
        self.assertAlmostEqual(rows[(268435456, 0)], 319.92)

    def test_a_file_without_result_lines_is_refused(self):
        p = self.path("empty.txt")
        with open(p, "w") as f:
            f.write("# nccl-tests version 2.19.6\n# Collective test starting: all_reduce_perf\n")
        with self.assertRaises(nccl_tests.NcclTestsError) as e:
            nccl_tests.parse(p)
        self.assertIn("no nccl-tests result line", str(e.exception))


class CompareTest(TempDirCase):
    def test_schema2_file_matches_every_size_and_place(self):
        _, rows = nccl_tests.compare(nccl_tests.reader.load(H5), outputs())
        # 5 sizes x (out + in) for the three with in-place points, out only for all_to_all and sendrecv
        self.assertEqual(len(rows), 5 * 2 * 3 + 5 * 2)
        close = [r for r in rows if abs(r["ratio"] - 1) <= 0.01]
        self.assertEqual(len(close), 39)
        odd = [r for r in rows if abs(r["ratio"] - 1) > 0.03]
        self.assertEqual([(r["operation"], r["bytes"]) for r in odd], [("all_to_all", 268435456)])

    def test_exit_codes_follow_the_tolerance(self):
        rc, out, _ = run_cli(H5, *outputs())
        self.assertEqual(rc, 1)
        self.assertIn("<-- off by more than 3%", out)
        self.assertIn("40 point(s) matched", out)
        rc, out, _ = run_cli(H5, *outputs(), "--tolerance", "0.1")
        self.assertEqual(rc, 0, out)
        self.assertNotIn("<--", out)

    def test_a_slower_ringbench_is_caught(self):
        """The same nccl-tests lines with every all_reduce busbw 20 % higher: each all_reduce point
        of the sweep is then 17 % low and flagged, the others are not."""
        src = open(os.path.join(DATA, "all_reduce.txt")).read().splitlines()
        faster = []
        for line in src:
            tok = line.split()
            if len(tok) >= 13 and tok[0].isdigit():
                tok[7] = f"{float(tok[7]) * 1.2:.2f}"
                tok[11] = f"{float(tok[11]) * 1.2:.2f}"
                line = "  ".join(tok)
            faster.append(line)
        p = self.path("all_reduce_fast.txt")
        with open(p, "w") as f:
            f.write("\n".join(faster) + "\n")
        rc, _, _ = run_cli(H5, p, os.path.join(DATA, "sendrecv.txt"), "--json", self.path("r.json"))
        self.assertEqual(rc, 1)
        points = json.load(open(self.path("r.json")))["points"]
        flagged = {r["operation"] for r in points if r["off"]}
        self.assertEqual(flagged, {"all_reduce"})
        self.assertTrue(all(abs(r["ratio"] - 1 / 1.2) < 0.01 for r in points if r["operation"] == "all_reduce"))

    def test_operation_given_explicitly_for_a_file_without_header(self):
        body = [ln for ln in open(os.path.join(DATA, "sendrecv.txt")) if not ln.startswith("#")]
        p = self.path("plain.txt")
        with open(p, "w") as f:
            f.writelines(body)
        rc, _, err = run_cli(H5, p)
        self.assertEqual(rc, 2)
        self.assertIn("give it as OP=", err)
        rc, out, _ = run_cli(H5, f"sendrecv={p}")
        self.assertEqual(rc, 0, out)
        self.assertIn("5 point(s) matched", out)

    def test_no_matching_group_or_a_file_without_the_sweep_is_an_error(self):
        rc, _, err = run_cli(H5, *outputs(), "--group", "intra_node")
        self.assertEqual(rc, 2)
        self.assertIn("no point matches", err)
        p = self.path("nocoll.h5")
        shutil.copy(H5, p)
        with h5py.File(p, "a") as f:
            f["sweeps"].move("collectives", "other")
            f["sweeps/other"].attrs["type"] = "memory"
        rc, _, err = run_cli(p, *outputs())
        self.assertEqual(rc, 2)
        self.assertIn("no collectives sweep", err)


if __name__ == "__main__":
    unittest.main()
