"""The per-point statistics computed for a block of points at once (pointstats.py,
compare_samples.py, tune.measurements) against a straightforward point-by-point computation
(rank by rank, np.median / np.percentile of each rank's finite samples) on files whose ranks
measured unevenly (synthetic.make_uneven: ranks with fewer iterations, ranks without a value,
single NaNs, a point nobody measured), one of them in schema 4's sampled rows (test_rows), with
the default cache and with one that cuts every metric into blocks of a point or two. The numbers
must be the same to the bit.
"""
import os
import sys
import unittest
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tempdir_case  # noqa: E402  (first: analysis/ on the path, skip without h5py)

import h5py  # noqa: E402
import numpy as np  # noqa: E402

import synthetic  # noqa: E402
import test_rows  # noqa: E402
import test_tune_cli  # noqa: E402
from ringbench_analysis import compare_samples, pointstats, reader, tune  # noqa: E402

TINY_CACHE = 4096


def finite(a):
    a = np.asarray(a, dtype=float).ravel()
    return a[np.isfinite(a)]


def rank_samples(sweep, name, p):
    """{rank: its finite samples at point p} of the ranks that have any."""
    return {r: finite(sweep.array(name)[r, p]) for r in range(sweep.nrows) if finite(sweep.array(name)[r, p]).size}


def rank_values(sweep, name, p):
    """Each rank's value (an array metric: the median of its samples), ranks without one out."""
    return np.array([np.median(a) for a in rank_samples(sweep, name, p).values()])


def over_ranks(sweep, name, how, positive, p):
    v = rank_values(sweep, name, p)
    v = v[v > 0] if positive else v
    return getattr(np, how)(v) if v.size else np.nan


def slowest(sweep, name, p):
    """(n, p25, p75, cv) of the samples of the first rank with the largest median."""
    rows = rank_samples(sweep, name, p)
    if not rows:
        return 0, np.nan, np.nan, np.nan
    worst = max(np.median(a) for a in rows.values())
    a = next(a for a in rows.values() if np.median(a) == worst)
    cv = a.std(ddof=1) / a.mean() if a.size >= 2 and a.mean() != 0 else np.nan
    return a.size, np.percentile(a, 25), np.percentile(a, 75), cv


def limiting(sweep, name, p, d):
    """Per iteration, the limiting rank's sample among the ranks with any sample."""
    v = np.asarray(sweep.array(name)[:, p], dtype=float).reshape(sweep.nrows, -1)
    v = v[np.isfinite(v).any(axis=1)]
    cols = [v[:, i][np.isfinite(v[:, i])] for i in range(v.shape[1]) if v.size]
    return np.array([(c.max() if d < 0 else c.min()) for c in cols if c.size])


def spread(value, t, d):
    """value x t_i / median t for times, value / (t_i / median t) for rates."""
    s = t / np.median(t)
    return value * s if d < 0 else value / s


def samples(sweep, name, p):
    """What compare judges for one metric of one point (docs/analysis.md, compare: Samples)."""
    d = sweep.direction_of(name) or -1
    each = sweep.ranks_of(name) == "each"
    times = compare_samples.iteration_time_metric(sweep)
    if sweep.metrics.columns[name].ndim > 2:
        return np.concatenate(list(rank_samples(sweep, name, p).values()) or [[]]) if each \
            else limiting(sweep, name, p, d)
    vals = reader.numbers(sweep.array(name)[:, p])
    if each and times:
        out = [spread(v, finite(sweep.array(times)[r, p]), d) for r, v in enumerate(vals)
               if np.isfinite(v) and finite(sweep.array(times)[r, p]).size
               and np.median(finite(sweep.array(times)[r, p])) > 0]
        return np.concatenate(out) if out else np.array([])
    t = limiting(sweep, times, p, -1) if times else np.array([])
    vals = vals[np.isfinite(vals)]
    if not t.size or not vals.size or np.median(t) <= 0:
        return vals
    return spread(vals.max() if d < 0 else vals.min(), t, d)


class PointStatsTest(tempdir_case.TempDirCase):
    def setUp(self):
        super().setUp()
        noisy = synthetic.make_noisy_run(self.path("noisy.h5"), world=5, iterations=9, seed=3)
        profile = synthetic.make_run(self.path("profile.h5"), 2, collectives=False)
        synthetic.add_profile_sweeps(profile)
        tuning = test_tune_cli.make_tuning_file(self.path("tuning.h5"), world=3, straggler=1,
                                                oom={(test_tune_cli.DENSE, "flash", 4096, 2)})
        wide = synthetic.make_run(self.path("wide.h5"), test_rows.WORLD, ring_sizes=[1, 4, 16],
                                  straggler=test_rows.STRAGGLER, pingpong=False)
        self.files = [synthetic.make_uneven(self.path(f"uneven_{i}.h5"), src, seed=i)
                      for i, src in enumerate((noisy, profile, tuning, wide))]
        with warnings.catch_warnings():  # test_rows' own reductions meet the points nobody measured
            warnings.simplefilter("ignore", RuntimeWarning)
            self.files[-1] = test_rows.sampled_copy(self.files[-1], self.path("sampled.h5"))
        with h5py.File(self.files[0], "r+") as f:  # ranks that disagree about a point's status
            status = f["sweeps/ring/status"].asstr()[()].astype(object)
            status[2, 0], status[0, 1], status[1, 1] = "oom", "", "parity_failed"
            del f["sweeps/ring/status"]
            synthetic.dataset(f["sweeps/ring"], "status", status, "1", "status", "metric")

    def tearDown(self):
        reader.set_cache_bytes(int(float(os.environ.get("RB_ANALYSIS_CACHE_MB", "") or 256) * 2**20))
        super().tearDown()

    def sweeps(self, cache_bytes):
        reader.set_cache_bytes(cache_bytes)
        return [s for path in self.files for s in reader.load(path).sweeps.values()]

    def numeric(self, sweep):
        return [m for m, c in sweep.metrics.columns.items() if c.dtype.kind in "fi"]

    def test_over_ranks_and_slowest_rank(self):
        self.assertTrue(any(s.nrows < s.world for s in self.sweeps(TINY_CACHE)))  # a sample of rows
        for cache in (TINY_CACHE, 256 << 20):
            for s in self.sweeps(cache):
                self.assertTrue(s.npoints)
                for m in self.numeric(s):
                    where = f"cache {cache} {s.name}/{m}"
                    for how in ("max", "min", "mean", "sum"):
                        for positive in (False, True):
                            want = [over_ranks(s, m, how, positive, p) for p in range(s.npoints)]
                            np.testing.assert_array_equal(pointstats.over_ranks(s, m, how, positive), want,
                                                          f"{where} {how} positive={positive}")
                    got = pointstats.slowest_stats(s, m)
                    want = np.array([slowest(s, m, p) for p in range(s.npoints)]).T
                    for i, k in enumerate(("n", "p25", "p75", "cv")):
                        np.testing.assert_array_equal(got[k], want[i], f"{where} slowest {k}")

    def test_point_status_and_keys(self):
        for s in self.sweeps(TINY_CACHE):
            got = pointstats.first_text(s, "status", ("", "ok"))
            self.assertEqual([g or "ok" for g in got], [s.point_status(p) for p in range(s.npoints)])
            self.assertEqual(pointstats.point_keys(s), [{k: reader._py(s.points[k].iloc[p]) for k in s.keys}
                                                        for p in range(s.npoints)])
        ring = reader.load(self.files[0]).sweeps["ring"]
        self.assertEqual([ring.point_status(p) for p in (0, 1)], ["oom", "parity_failed"])

    def test_compare_samples(self):
        judged = 0
        for cache in (TINY_CACHE, 256 << 20):
            for s in self.sweeps(cache):
                for m in self.numeric(s):
                    got = compare_samples.point_samples(s, m)
                    self.assertEqual(len(got), s.npoints)
                    for p in range(s.npoints):
                        np.testing.assert_array_equal(got[p], samples(s, m, p), f"cache {cache} {s.name}/{m} {p}")
                        judged += bool(got[p].size)
        self.assertGreater(judged, 100)

    def test_tuning_measurements(self):
        for cache in (TINY_CACHE, 256 << 20):
            s = next(s for s in self.sweeps(cache) if s.type == "kernel_tuning")
            for ranks in (None, [1], [0, 2]):
                frame = tune.measurements(s, ranks)
                for p in range(s.npoints):
                    asked = range(s.world) if ranks is None else ranks
                    measured = [r for r in asked if str(s.array("status")[r, p]) != "oom"]
                    total = [np.asarray(s.array("forward_time_s")[r, p], dtype=float)
                             + np.asarray(s.array("backward_time_s")[r, p], dtype=float) for r in measured]
                    pooled = finite(total)
                    self.assertEqual(frame["time_s"][p], np.median(pooled)) if pooled.size else \
                        self.assertTrue(np.isnan(frame["time_s"][p]))
                    meds = np.array([np.median(finite(t)) for t in total if finite(t).size])
                    spread_want = meds.max() / meds.min() if meds.size > 1 and meds.min() > 0 else np.nan
                    np.testing.assert_array_equal(frame["rank_spread"][p], spread_want, f"{ranks} point {p}")
                    self.assertEqual(frame["ranks_measured"][p], len(measured))


if __name__ == "__main__":
    unittest.main()
