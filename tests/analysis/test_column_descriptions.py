"""The file describes its columns (issue #29 item 1, docs/hdf5-schema.md "What a column says"):
compare judges what a schema 3 file marks, with no analysis change for a new metric or sweep.

The files here are synthetic.py's, turned into schema 3 by writing each metric's judging
attributes the way rb::h5::PointsTable writes them (tests/metrics/test_h5.cpp checks the C++
side; tests/analysis/e2e_analysis.py checks a real file against schema 2's rules).
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
from ringbench_analysis import compare  # noqa: E402

DEFAULTS = {"direction": "none", "judged": "no", "ranks": "limiting", "noise": "*"}


def as_schema_3(path, judging, iteration_times):
    """Every metric gets DEFAULTS and its inner axis, then judging[sweep][metric]'s words;
    iteration_times: {sweep: metric}."""
    with h5py.File(path, "r+") as f:
        f["run"].attrs["schema_version"] = np.int64(3)
        for name, g in f["sweeps"].items():
            g.attrs["iteration_times"] = iteration_times.get(name, "")
            for m, d in g.items():
                if isinstance(d, h5py.Dataset) and d.attrs.get("role") == "metric":
                    words = dict(DEFAULTS, inner_axis="iteration" if d.ndim > 2 else "none")
                    words.update(judging.get(name, {}).get(m, {}))
                    for a, v in words.items():
                        d.attrs[a] = v
    return path


def add_metric(path, sweep, name, values, units):
    with h5py.File(path, "r+") as f:
        synthetic.dataset(f["sweeps"][sweep], name, values, units, f"metric {name}", "metric")


def add_kernel_tuning(path, slower=1.0, iterations=5):
    """A kernel_tuning sweep 'kt' of two block sizes, forward and backward times per iteration."""
    with h5py.File(path, "r+") as f:
        world = int(f["run"].attrs["world_size"])
        g = synthetic._sweep(f["sweeps"], "kt", "kernel_tuning")
        base = np.array([1e-3, 4e-3])[None, :, None] * (1 + 0.001 * np.arange(iterations))[None, None, :]
        times = np.broadcast_to(base, (world, 2, iterations)).copy()
        synthetic.points_table(g, {"block_rows": (np.array([1024, 2048]), "1"), "path": (["flash", "flash"], "1")},
                               {"forward_time_s": (times * slower, "s"), "backward_time_s": (2 * times, "s")})
    return path


RING = {"total_time_s": {"direction": "lower", "judged": "headline", "noise": "ring"}}
KT = {m: {"direction": "lower", "judged": "headline", "ranks": "each", "noise": "compute"}
      for m in ("forward_time_s", "backward_time_s")}


class ColumnDescriptionTest(TempDirCase):

    def compare(self, base, new):
        out = []
        with contextlib.redirect_stderr(io.StringIO()):
            code = compare.compare(base, new, out=out.append, json_to=self.path("c.json"))
        with open(self.path("c.json")) as f:
            return code, json.load(f)["rows"]

    def pair(self, widgets, judged):
        """Base and new with a `widgets_Bps` column (new: widgets x base's), marked as asked."""
        paths = []
        for tag, factor in (("base", 1.0), ("new", widgets)):
            p = synthetic.make_run(self.path(f"{tag}.h5"), 2, pingpong=False, collectives=False, p2p=False)
            add_metric(p, "ring", "widgets_Bps", np.full((2, 2), 1e9 * factor), "B/s")
            add_metric(p, "ring", "widget_count", np.full((2, 2), 7), "1")
            ring = dict(RING, widgets_Bps={"direction": "higher", "judged": judged, "noise": "ring"})
            paths.append(as_schema_3(p, {"ring": ring}, {"ring": "total_time_s"}))
        return paths

    def test_a_new_column_marked_headline_is_judged(self):
        code, rows = self.compare(*self.pair(0.3, "headline"))
        widgets = [r for r in rows if r["metric"] == "widgets_Bps"]
        self.assertEqual(len(widgets), 2)  # both ring points, with no analysis change
        self.assertTrue(all(r["verdict"] == "regression" for r in widgets), widgets)
        self.assertEqual(code, compare.EXIT_REGRESSION)
        self.assertFalse([r for r in rows if r["metric"] == "widget_count"])  # not marked

    def test_the_same_column_not_marked_is_not_judged(self):
        code, rows = self.compare(*self.pair(0.3, "no"))
        self.assertFalse([r for r in rows if r["metric"] == "widgets_Bps"])
        self.assertEqual(code, compare.EXIT_OK)

    def test_direction_comes_from_the_file(self):
        """The same drop read as an improvement where the file says lower is better."""
        base, new = self.pair(0.3, "headline")
        for p in (base, new):
            with h5py.File(p, "r+") as f:
                f["sweeps/ring/widgets_Bps"].attrs["direction"] = "lower"
        _, rows = self.compare(base, new)
        widgets = [r for r in rows if r["metric"] == "widgets_Bps"]
        # 0.3 x read as 0.3 x the time: better (3 samples a side are too few to say "faster").
        self.assertTrue(widgets and all(r["worse"] < 0.5 and r["verdict"] in ("ok", "faster") for r in widgets))

    def test_kernel_tuning_and_contention_are_judged(self):
        paths = []
        for tag, slower in (("base", 1.0), ("new", 1.3)):
            p = synthetic.make_contention_run(self.path(f"{tag}.h5"))
            add_kernel_tuning(p, slower)
            judging = {"kt": KT, "contention": {"time_s": {"direction": "lower", "judged": "headline"}}}
            paths.append(as_schema_3(p, judging, {"contention": "time_s"}))
        code, rows = self.compare(*paths)
        by_sweep = {}
        for r in rows:
            by_sweep.setdefault((r["sweep"], r["metric"]), []).append(r["verdict"])
        self.assertEqual(by_sweep[("kt", "forward_time_s")], ["regression", "regression"])
        self.assertEqual(by_sweep[("kt", "backward_time_s")], ["ok", "ok"])
        self.assertTrue(by_sweep[("contention", "time_s")])
        self.assertTrue(all(v == "ok" for v in by_sweep[("contention", "time_s")]))
        self.assertEqual(code, compare.EXIT_REGRESSION)


if __name__ == "__main__":
    unittest.main()
