"""Link-aware projections (analysis/ringbench_analysis/links.py, model.predictions): --link
parsing, the nodes and node-crossing hops of a projected ring, the inter-node link taking over
beyond one node, the stand-in warning without one, forward + backward, and the model's own
error. Run: PYTHONPATH=analysis python3 -m unittest discover -s tests/analysis -p test_links.py
"""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from tempdir_case import TempDirCase, rb_analysis  # noqa: E402  (first: analysis/ on the path, skip without h5py)

import synthetic  # noqa: E402
from ringbench_analysis import links, model, reader  # noqa: E402


class LinkParseTest(unittest.TestCase):
    def test_units_and_errors(self):
        cls, m = links.parse_link("inter=5us,25GB/s")
        self.assertEqual(cls, "inter")
        self.assertAlmostEqual(m["alpha_s"], 5e-6)
        self.assertAlmostEqual(m["beta_Bps"], 25e9)
        self.assertAlmostEqual(links.parse_link("intra=2e-6,1.5e11")[1]["beta_Bps"], 1.5e11)
        for bad in ("inter=5us", "wan=1us,1GB/s", "inter=5 parsecs,1GB/s", "inter=1us,0GB/s", "inter"):
            with self.assertRaises(links.LinkError, msg=bad):
                links.parse_link(bad)

    def test_ring_placement(self):
        lk = {"intra": {"alpha_s": 1e-6, "beta_Bps": 4e11}, "inter": {"alpha_s": 5e-6, "beta_Bps": 5e10}}
        self.assertEqual(links.ring_link(8, 8, lk)[:3], (1, 0, "intra"))
        self.assertEqual(links.ring_link(16, 8, lk)[:3], (2, 2, "inter"))
        self.assertEqual(links.ring_link(512, 8, lk)[:3], (64, 64, "inter"))
        _, _, cls, m, note = links.ring_link(16, 8, {"intra": lk["intra"], "inter": None})
        self.assertEqual((cls, m), ("intra", lk["intra"]))
        self.assertIn("no inter-node link", note)


class ProjectionTest(TempDirCase):
    def preds(self, lk, per_node):
        runs = [reader.load(synthetic.make_run(self.path(f"r{n}.h5"), n, seq_lens=(4096,)))
                for n in (1, 2, 4)]
        if lk is None:
            return runs, None
        return runs, model.predictions(model.point_table(runs), lk, (8, 16, 64), per_node)[0]

    def test_inter_node_link_beyond_one_node(self):
        runs, _ = self.preds(None, 8)
        lk = links.links(runs)
        self.assertIsNotNone(lk["intra"])
        self.assertIsNone(lk["inter"])  # one-node files: no network measured
        slow = {"alpha_s": lk["intra"]["alpha_s"] * 10, "beta_Bps": lk["intra"]["beta_Bps"] / 100,
                "source": "test"}
        _, pr = self.preds(dict(lk, inter=slow), 8)
        ext = {e["ring_size"]: e for e in pr["extrapolated"]}
        self.assertEqual((ext[8]["nodes"], ext[8]["link"]), (1, "intra"))
        self.assertEqual((ext[16]["nodes"], ext[16]["crossing_hops"], ext[16]["link"]), (2, 2, "inter"))
        # the same ring over the slow network: the step is the transfer, efficiency c / t_inter
        c, _, kv = synthetic.step_model(4096, 16)
        t_inter = slow["alpha_s"] + kv / slow["beta_Bps"]
        self.assertAlmostEqual(ext[16]["predicted_efficiency"], c / max(c, t_inter))
        self.assertTrue(ext[16]["comm_bound"])
        self.assertFalse(pr["warnings"])
        # forward + backward: present, and above the forward alone
        self.assertGreater(ext[16]["predicted_total_time"], ext[16]["predicted_time"])
        # without an inter-node link: the intra link stands in, with a warning
        _, pr = self.preds(dict(lk, inter=None), 8)
        self.assertTrue(any("no inter-node link" in w for w in pr["warnings"]))
        # the model's own error at the measured sizes (exact synthetic model: ~0)
        self.assertLess(pr["model_error"], 1e-9)

    def test_report_link_options(self):
        files = [synthetic.make_run(self.path(f"r{n}.h5"), n, seq_lens=(4096,)) for n in (1, 2)]
        rc, _, err = rb_analysis("report", *files, "--out", self.path("rep"), "--predict", "16",
                                 "--ranks-per-node", "8", "--link", "inter=5us,25GB/s")
        self.assertEqual(rc, 0, err)
        with open(os.path.join(self.path("rep"), "report.json")) as f:
            js = json.load(f)
        self.assertEqual(js["links"]["inter"]["source"], "--link inter=5us,25GB/s")
        (ext,) = js["predictions"][0]["extrapolated"]
        self.assertEqual((ext["nodes"], ext["link"]), (2, "inter"))
        with open(os.path.join(self.path("rep"), "report.md")) as f:
            self.assertIn("- inter-node: alpha = 5 us", f.read())
        rc, _, err = rb_analysis("report", *files, "--out", self.path("rep2"), "--link", "inter=fast")
        self.assertEqual(rc, 2)
        self.assertIn("CLASS=ALPHA,BETA", err)


if __name__ == "__main__":
    unittest.main()
