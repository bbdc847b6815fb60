"""Analysis in bounded memory (issue #30 item 2): report and compare read a file a block of points
at a time (reader.Column, the cache of RB_ANALYSIS_CACHE_MB), never whole, and give the same
output whatever the cache's size. The memory test runs on a 64-rank file of today's layout
(synthetic_large.py, scaled down) in a child process and bounds the peak of traced memory
(tracemalloc counts numpy's arrays) by a few of the file's largest columns; reading whole
files, as the analysis did before, peaks above the whole file."""
import contextlib
import io
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tempdir_case  # noqa: E402  (analysis/ on the path; skip without h5py)

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import synthetic_large  # noqa: E402
import ringbench_analysis  # noqa: E402
from ringbench_analysis import compare, reader, report, rows_csv  # noqa: E402

CACHE_MB = 1.0
# Run in the child: the command once to warm up (imports, the checking process), then again
# under tracemalloc. The figures are left out (each draws a bounded number of ranks and steps,
# whatever the file) and the bootstrap draws 50 resamples, not 2000 (its resamples x one
# point's samples are per point): what is left grows with what is read.
CHILD = """
import contextlib, functools, io, json, sys, tracemalloc
from ringbench_analysis import plots, report, verdict
from ringbench_analysis.__main__ import main
def none(*a, **k):
    raise plots.NoData("not drawn in this test")
for name in ("EXPECTED_PLOTS", "PROFILE_PLOTS", "COMPARISON_PLOTS"):
    setattr(report, name, [(n, t, none, w) for n, t, _, w in getattr(report, name)])
verdict.bootstrap_ratio = functools.partial(verdict.bootstrap_ratio, resamples=50)
argv = json.loads(sys.argv[1])
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    main(argv)
    tracemalloc.start()
    code = main(argv)
print(json.dumps([code, tracemalloc.get_traced_memory()[1]]))
"""


def traced_peak(argv):
    """(exit code, peak traced bytes) of `rb-analysis argv` in a child with CACHE_MB of cache."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(ringbench_analysis.__file__)))
    env = dict(os.environ, PYTHONPATH=package, RB_ANALYSIS_CACHE_MB=str(CACHE_MB), MPLBACKEND="Agg")
    r = subprocess.run([sys.executable, "-c", CHILD, json.dumps(argv)], env=env, capture_output=True,
                       text=True, timeout=300)
    if r.returncode:
        raise AssertionError(r.stderr[-3000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def dataset_bytes(path):
    """(largest dataset, all datasets) of a file, in bytes."""
    sizes = []
    with h5py.File(path, "r") as f:
        f.visititems(lambda _, o: sizes.append(o.size * o.dtype.itemsize) if isinstance(o, h5py.Dataset) else None)
    return max(sizes), sum(sizes)


class BoundedMemoryTest(tempdir_case.TempDirCase):
    def test_peak_follows_a_column_not_the_file(self):
        big = synthetic_large.make_large(self.path("big.h5"), 64, coll_sizes=4, most_pairs=64)
        slow = synthetic_large.perturb(big, self.path("slow.h5"))
        column, whole = dataset_bytes(big)
        bound = CACHE_MB * 2**20 + 3 * column
        self.assertGreater(whole, 2 * bound)  # the file is far beyond the bound
        code, peak = traced_peak(["report", big, "--out", self.path("rep")])
        self.assertEqual(code, 0)
        self.assertLess(peak, bound, f"report: peak {peak} B, largest column {column} B, file {whole} B")
        code, peak = traced_peak(["compare", big, slow])
        self.assertEqual(code, 1)  # the ring's times x1.10: regressions, so every point was read
        self.assertLess(peak, bound, f"compare: peak {peak} B, largest column {column} B, file {whole} B")


class SameOutputTest(tempdir_case.TempDirCase):
    """A cache of a few KiB (every metric a Column, read in blocks of a point or two) gives the
    report's files and compare's output byte for byte as the default cache (whole arrays)."""

    def tearDown(self):
        reader.set_cache_bytes(int(float(os.environ.get("RB_ANALYSIS_CACHE_MB", "") or 256) * 2**20))
        super().tearDown()

    def outputs(self, cache_bytes, big, slow, tag):
        reader.set_cache_bytes(cache_bytes)
        ring = reader.load(big).sweeps["ring"]
        kind = type(ring.metrics["step_compute_s"])
        out = self.path(tag)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            report.build([big], out)
        files = {n: open(os.path.join(out, n), "rb").read() for n in sorted(os.listdir(out))
                 if not n.endswith(".png")}
        lines = []
        code = compare.compare(big, slow, out=lines.append, show_all=True)
        return kind, files, lines, code

    def test_tiny_cache_same_bytes(self):
        big = synthetic_large.make_large(self.path("b8.h5"), 8, seq_lens=(4096, 16384), coll_sizes=3,
                                         most_pairs=24)
        slow = synthetic_large.perturb(big, self.path("s8.h5"))
        kind_small, files_small, lines_small, code_small = self.outputs(4096, big, slow, "tiny")
        kind_big, files_big, lines_big, code_big = self.outputs(256 << 20, big, slow, "default")
        self.assertIs(kind_small, reader.Column)
        self.assertIs(kind_big, np.ndarray)
        self.assertIn("points_p2p.csv", files_big)
        self.assertEqual(sorted(files_small), sorted(files_big))
        for name in files_big:
            self.assertEqual(files_small[name], files_big[name], name)
        self.assertEqual((code_small, lines_small), (code_big, lines_big))
        self.assertEqual(code_big, 1)


class ColumnTest(tempdir_case.TempDirCase):
    def setUp(self):
        super().setUp()
        self.path_ = self.path("c.h5")
        rng = np.random.default_rng(3)
        self.data = rng.random((5, 7, 3))
        self.text = np.array([[f"r{r}p{p}" for p in range(7)] for r in range(5)], dtype=object)
        with h5py.File(self.path_, "w") as f:
            g = f.create_group("t")
            for name, values in (("a", self.data), ("s", self.text.astype("S6"))):
                d = g.create_dataset(name, data=values)
                d.attrs.update({"role": "metric", "units": "s", "description": name})
            k = g.create_group("points").create_dataset("k", data=np.arange(7))
            k.attrs.update({"role": "key", "units": "1", "description": "k"})
            # a dimension scale of the point axis (an HDF5 scale the writer may attach): no metric
            scale = g.create_dataset("point_index", data=np.arange(7))
            scale.make_scale("point")
            g["a"].dims[1].attach_scale(scale)
        reader.set_cache_bytes(16 * 3 * 5 * 8)  # one point of `a` per block (16 blocks in the cache)

    def tearDown(self):
        reader.set_cache_bytes(256 << 20)
        super().tearDown()

    def table(self):
        with h5py.File(self.path_, "r") as f:  # the metrics are read later, the file closed
            return reader.PointsTable(f["t"], 5, "c.h5:/t", (reader._Source(self.path_), -1))

    def test_indexing_reads_the_same_values(self):
        t = self.table()
        self.assertEqual(sorted(t.metrics), ["a", "s"])  # the scale is not a metric
        a, s = t.metrics["a"], t.metrics["s"]
        self.assertIsInstance(a, reader.Column)
        np.testing.assert_array_equal(a[:, 3], self.data[:, 3])
        np.testing.assert_array_equal(a[:, -1], self.data[:, -1])
        self.assertEqual(a[2, 4, 1], self.data[2, 4, 1])
        np.testing.assert_array_equal(a[:, 1:6], self.data[:, 1:6])   # across blocks
        np.testing.assert_array_equal(a[1:3, 2:5, 0], self.data[1:3, 2:5, 0])
        np.testing.assert_array_equal(np.asarray(a), self.data)
        np.testing.assert_array_equal(a.ravel(), self.data.ravel())
        self.assertEqual((a.shape, a.ndim, len(a)), (self.data.shape, 3, 5))
        self.assertEqual(list(s[:, 2]), list(self.text[:, 2]))  # str, not bytes
        with self.assertRaises(IndexError):
            _ = a[:, 7]

    def test_a_file_changed_after_loading_is_refused(self):
        t = self.table()
        with h5py.File(self.path_, "r+") as f:
            f["t/a"][0, 0, 0] = 5.0
        os.utime(self.path_, ns=(1, 1))
        with self.assertRaisesRegex(reader.RingbenchFileError, "changed on disk since it was loaded"):
            _ = t.metrics["a"][:, 0]


class CsvTest(unittest.TestCase):
    """rows_csv writes what pandas' to_csv writes, on the values that differ in how they are
    written: floats (shortest repr, exponents, inf), missing values, <NA>, quoted text."""

    def test_same_as_to_csv(self):
        world, points = 3, 4
        n = world * points
        floats = np.array([0.1, 1e-5, 1e16, 2.5e-7, np.inf, -0.0, np.nan, 123456789012.0, 1 / 3, 5e-324,
                           np.nan, 7.0])
        df = pd.DataFrame({
            "sweep": ["p2p"] * n, "point": np.repeat(np.arange(points), world),
            "rank": np.tile(np.arange(world), points),
            "label": np.repeat(['a, "quoted" one', "line\nbreak", "cr\rhere", "plain"], world),
            "big": np.repeat(np.array([70000, -3, 0, 2**40]), world),
            "value": floats, "count": pd.array([1, None, 3, 70000, -1, 0, 5, None, 2, 3, 4, 5], dtype="Int64"),
            "text": np.array(["ok", np.nan, "x,y", "", "ok", "z", "ok", None, '"', "ok", "ok", "ok"], dtype=object),
            "flag": np.array([True, False] * 6), "f32": np.arange(n, dtype=np.float32) / 3})
        got = rows_csv._text(df, {"rank", "value", "count", "text", "flag", "f32"}, world)
        self.assertEqual(got, df.to_csv(index=False, header=False, lineterminator="\n"))
        self.assertIsNone(rows_csv._text(df.assign(when=pd.Timestamp("2026-01-01")), {"rank"}, world))


if __name__ == "__main__":
    unittest.main()
