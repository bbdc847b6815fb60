"""Tests of what the report's plots draw (issue #32 item 5), on synthetic points and files:
spread bars from the iteration quartiles (and across files), distinct legend and bar names,
a byte axis with labels and its unit, p2p colour scales from zero, the measured efficiency
overlaid on the model's scale, and monitor panels without data left out and named.
Run: PYTHONPATH=analysis MPLBACKEND=Agg python3 -m unittest tests/analysis/test_plots.py
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from tempdir_case import TempDirCase  # noqa: E402  (first: analysis/ on the path, skip without h5py)

import numpy as np  # noqa: E402

import synthetic  # noqa: E402
from ringbench_analysis import contention, figures, model, plots, reader  # noqa: E402

plt = plots.plt


def point(sweep="ring", seq=1024, r=2, cfg="", run="a.h5", p=0, time=1.0, lo=0.9, hi=1.2):
    return {"sweep": sweep, "seq_len": seq, "ring_size": r, "config_label": cfg, "run": run, "point": p,
            "measured": True, "time": time, "time_p25": lo, "time_p75": hi}


class SpreadTest(TempDirCase):
    def test_quartiles_of_the_slowest_rank(self):
        path = synthetic.make_run(self.path("r.h5"), 2, seq_lens=(1024,), straggler=1)
        pts = model.point_table(reader.load_many([path]))
        c, t, _ = synthetic.step_model(1024, 2)
        slow = 3 * 2 * max(c, t) * 1.3  # rank 1's median; iterations x (0.9, 1.0, 1.2)
        self.assertAlmostEqual(pts[0]["time_p25"], slow * np.percentile([0.9, 1.0, 1.2], 25), delta=1e-12)
        self.assertAlmostEqual(pts[0]["time_p75"], slow * np.percentile([0.9, 1.0, 1.2], 75), delta=1e-12)

    def test_ranges_span_every_file(self):
        r = plots.time_ranges([point(run="a.h5", lo=0.9, hi=1.1), point(run="b.h5", time=1.5, lo=1.4, hi=1.7),
                               point(r=4, lo=0.5, hi=0.6, time=0.55)], "strong")
        self.assertEqual(r[("", 1024, 2)], (0.9, 1.7))
        self.assertEqual(r[("", 1024, 4)], (0.5, 0.6))
        self.assertEqual(plots.time_ranges([point()], "weak"), {("", 512, 2): (0.9, 1.2)})


class NamesTest(unittest.TestCase):
    def test_bar_names_distinct_and_short(self):
        pts = [point(cfg="causal=1, layout=zigzag"), point(cfg="causal=1, layout=striped"),
               point(sweep="other", cfg="causal=1, layout=zigzag"),
               point(cfg="causal=1, layout=zigzag", run="b.h5", p=3)]
        names = plots.point_names(pts)
        self.assertEqual(len(set(names)), 4, names)
        self.assertEqual(names[1], "ring: S=1024 R=2 [layout=striped]")
        self.assertEqual(names[2], "other: S=1024 R=2")
        self.assertIn("(b.h5, point 3)", names[3])

    def test_legend_labels_distinct(self):
        # _label shortens both to the same text: the longest key, the one that differs, goes first
        keys = [("kernel=cudnn, layout=contiguous, num_heads=16, transport_asked=copy_engine", 1024),
                ("kernel=cudnn, layout=contiguous, num_heads=16, transport_asked=nccl_ring_x", 1024)]
        self.assertEqual(*[plots._label(k[0], 2, "S=1024") for k in keys])
        labels = plots._labels(keys, 2, lambda k: f"S={k[1]}")
        self.assertEqual(len(set(labels.values())), 2, labels)
        self.assertTrue(labels[keys[0]].endswith("{transport_asked=copy_engine}"), labels)


class AxesTest(unittest.TestCase):
    def tick_texts(self, fig, ax):
        fig.canvas.draw()
        lo, hi = ax.get_ylim()
        return [t.get_text() for t, v in zip(ax.get_yticklabels(), ax.get_yticks()) if lo <= v <= hi and t.get_text()]

    def test_byte_axis_has_labels_and_unit(self):
        for values, unit in (([1.1 * 2**20, 1.4 * 2**20, 1.9 * 2**20], "(MiB)"), ([3.5 * 2**30, 4.4 * 2**30], "(GiB)")):
            fig, ax = plt.subplots()
            ax.plot([1, 2, 3][:len(values)], values)
            plots._bytes_axis(ax, values, "memory")
            self.assertTrue(ax.get_ylabel().endswith(unit), ax.get_ylabel())
            self.assertEqual(ax.get_ylim()[0], 0)
            self.assertGreaterEqual(len(self.tick_texts(fig, ax)), 3)
            plt.close(fig)

    def test_p2p_colour_scale_starts_at_zero(self):
        fig, ax = plt.subplots()
        m = np.array([[np.nan, 9.6e9], [13.1e9, np.nan]])
        figures._heat(ax, fig, m, "bw", "B/s", "viridis")
        self.assertEqual(ax.images[0].get_clim(), (0.0, 13.1e9))
        plt.close(fig)


class CostModelTest(unittest.TestCase):
    def test_measured_efficiency_on_the_models_scale(self):
        pr = {"base_ring_size": 2, "measured": [
            {"ring_size": 2, "measured_time": 1.0, "predicted_efficiency": 0.8},
            {"ring_size": 4, "measured_time": 0.625, "predicted_efficiency": 0.7}]}
        eff = plots.measured_efficiency(pr)
        self.assertAlmostEqual(eff[2], 0.8)
        self.assertAlmostEqual(eff[4], 0.8 * 2 * 1.0 / (4 * 0.625))  # 0.64


class MonitorTest(TempDirCase):
    def test_panels_without_data_are_named_not_drawn(self):
        path = synthetic.make_contention_run(self.path("c.h5"), gpu=False)
        c = contention.read(reader.load(path).sweeps["contention"])
        panels = contention.monitor_panels(c, "host")
        note = plots.unavailable_note(panels)
        self.assertTrue(note.startswith("GPU clocks, GPU power, GPU temperature, PCIe throughput: gpu: "
                                        "cannot load libnvidia-ml.so.1"), note)
        self.assertNotIn("CPU utilisation", note)
        drawn = {}
        real = plt.subplots

        def spy(n, *a, **k):
            drawn["n"] = n
            return real(n, *a, **k)
        plots.plt.subplots = spy
        try:
            plots.contention_monitor(panels, contention.phase_spans(c), c.phases, self.dir, "m.png", "t")
        finally:
            plots.plt.subplots = real
        self.assertEqual(drawn["n"], len([p for p in panels if not p["unavailable"]]))
        self.assertEqual(drawn["n"], 3)


if __name__ == "__main__":
    unittest.main()
