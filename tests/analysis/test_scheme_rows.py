"""schemes.comparison and the report's ring table keep rows apart that differ only by transport
or head groups (issue #27: a Ulysses point over NCCL and one over the copy engines, G = 1, 2,
read alike in the first GPU run's report)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "analysis"))

try:
    import pandas as pd
except ImportError:  # the analysis needs it; the unit runner then skips
    pd = None


def ring_rows():
    """One problem (S 64, R 2) under the ring and Ulysses G = 1, 2, each over two transports."""
    rows = []
    for scheme, transport, ms in (("ring", "nccl", 10.0), ("ring", "copy_engine", 9.0),
                                  ("ulysses", "nccl", 8.0), ("ulysses", "copy_engine", 7.0),
                                  ("ulysses(G=2)", "nccl", 7.5), ("ulysses(G=2)", "copy_engine", 7.2)):
        rows.append({"file": "a.h5", "sweep": "s", "seq_len": 64, "ring_size": 2,
                     "layout": "contiguous", "mask": "full", "dtype": "bf16", "kernel": "cudnn",
                     "scheme": scheme, "transport": transport, "total_ms": ms,
                     "tflops_total": 100 / ms, "exposed_wait_pct": 1.0, "bytes_sent": 1.0,
                     "memory": 1.0, "status": "ok", "measured": True,
                     "overlap_efficiency": float("nan"), "backward_overlap_efficiency": float("nan"),
                     "kernel_slowdown": float("nan"), "backward_kernel_slowdown": float("nan")})
    return pd.DataFrame(rows)


@unittest.skipIf(pd is None, "no pandas")
class SchemeRowsTest(unittest.TestCase):
    def test_a_scheme_over_two_transports_is_two_named_rows(self):
        from ringbench_analysis import schemes
        table = schemes.comparison(ring_rows())
        self.assertEqual(list(table["scheme"]), [
            "ring via nccl", "ring via copy_engine", "ulysses via nccl", "ulysses via copy_engine",
            "ulysses(G=2) via nccl", "ulysses(G=2) via copy_engine"])
        self.assertEqual(list(table.loc[table["fastest"], "scheme"]), ["ulysses via copy_engine"])
        cost = schemes.ring_cost(table)
        self.assertEqual(len(cost), 1)
        self.assertAlmostEqual(cost[0]["ring_vs_fastest"], 10.0 / 7.0)

    def test_one_transport_keeps_the_plain_names(self):
        from ringbench_analysis import schemes
        rows = ring_rows()
        table = schemes.comparison(rows[rows["transport"] == "nccl"])
        self.assertEqual(list(table["scheme"]), ["ring", "ulysses", "ulysses(G=2)"])

    def test_the_ring_table_shows_a_scheme_column_where_schemes_differ(self):
        from ringbench_analysis import report
        rows = ring_rows()
        names = [c[0] for c in report._ring_columns(rows)]  # pylint: disable=protected-access
        self.assertIn("scheme", names)
        one = rows[rows["scheme"] == "ring"]
        self.assertNotIn("scheme", [c[0] for c in report._ring_columns(one)])  # pylint: disable=protected-access


if __name__ == "__main__":
    unittest.main()
