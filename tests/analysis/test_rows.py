"""Schema 4's rows (docs/hdf5-schema.md "Rows"): a synthetic run of 16 ranks (one straggler)
rewritten as ringbench writes it on many ranks, its tables keeping a sample of ranks per point
(the slowest first, row_rank, over_ranks/) and the ring's steps in one table per ring size
(steps/R<R>) with their sums in the ring table. What the report reads from the sample must be
what it reads from every rank: the slowest rank's time, the sums and extremes over every rank,
the exposed wait, the p2p matrix, the collectives' figures."""
import math
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tempdir_case import TempDirCase  # noqa: E402  (analysis/ on the path; skip without h5py)

import h5py  # noqa: E402
import numpy as np  # noqa: E402

import synthetic  # noqa: E402
from ringbench_analysis import model, reader, results  # noqa: E402
from ringbench_analysis import steps as ring_steps  # noqa: E402

WORLD, STRAGGLER = 16, 5
ROWS, STEP_ROWS = 4, 2
STEPS = ("step_compute_s", "step_wait_s")


def pick_rows(order, rows):
    """src/metrics/table_rows.cpp's pick_rows: the ranks at evenly spaced quantiles of `order`
    (larger slower), slowest first; -1 past the ranks with a value."""
    valued = sorted((r for r in range(len(order)) if np.isfinite(order[r])), key=lambda r: -order[r])
    if not valued:
        valued = list(range(len(order)))
    if len(valued) <= rows:
        return valued + [-1] * (rows - len(valued))
    return [valued[(k * (len(valued) - 1) + (rows - 1) // 2) // (rows - 1)] for k in range(rows)]


def over_ranks(values):
    """[4, P, ...]: min, mean, max, sum over axis 0, NaN (and integer -1) left out."""
    v = np.asarray(values, dtype=float)
    if np.asarray(values).dtype.kind in "iu":
        v[np.asarray(values) == -1] = np.nan
    has = np.isfinite(v).any(axis=0)
    with np.errstate(all="ignore"):
        out = [np.nanmin(np.where(has, v, 0), axis=0), np.nanmean(v, axis=0),
               np.nanmax(np.where(has, v, 0), axis=0), np.nansum(v, axis=0)]
    return np.stack([np.where(has, x, np.nan) for x in out])


def write_table(g, keys, metrics, judging, rows, order):
    """A points table in g as table_rows.cpp writes it: every rank when rows is None, else the
    sample of `rows` ranks per point by `order` [world, P] and over_ranks/."""
    npts = len(next(iter(keys.values()))[0])
    g.attrs["points"] = np.int64(npts)
    kg = g.create_group("points")
    for name, (values, units) in keys.items():
        synthetic.dataset(kg, name, values, units, f"key {name}", "key")
    picked = None if rows is None else np.array([pick_rows(order[:, p], rows) for p in range(npts)]).T
    if picked is not None:
        synthetic.dataset(g, "row_rank", picked.astype(np.int64), "1", "which rank", "key")
        og = g.create_group("over_ranks")
    for name, (values, units) in metrics.items():
        values = np.asarray(values)
        kept = values if picked is None else np.stack(
            [values[np.maximum(picked[k], 0), np.arange(npts)] for k in range(rows)])
        if picked is not None and kept.dtype.kind == "f":
            kept[picked < 0] = np.nan
        d = synthetic.dataset(g, name, kept, units, f"metric {name}", "metric")
        for a, v in judging.get(name, {}).items():
            d.attrs[a] = v
        if picked is not None and values.dtype.kind in "fiu":
            synthetic.dataset(og, name, over_ranks(values), units, f"over ranks {name}", "metric")


def read_table(t):
    """{name: [world, P, ...]} and {name: units} of every metric of a full (schema 2) table."""
    return ({n: np.asarray(t.metrics[n]) for n in t.metrics},
            {n: t.units[n] for n in t.metrics})


def keys_of(t):
    return {k: (t.points[k].to_numpy(), t.units[k]) for k in t.keys}


def medians(values):
    v = np.asarray(values, dtype=float)
    return np.nanmedian(v.reshape(v.shape[0], v.shape[1], -1), axis=2) if v.ndim > 2 else v


def ring_steps_tables(g, sweep, metrics, order):
    """The ring's steps: a table per ring size of STEP_ROWS sampled ranks, the sums beside."""
    sizes = sweep.points["ring_size"].to_numpy()
    for name, total in (("step_compute_s", "forward_compute_s"), ("step_wait_s", "forward_wait_s")):
        v = metrics.pop(name)
        metrics[total] = np.where(np.isfinite(v).any(axis=2), np.nansum(v, axis=2), np.nan)
    for R in sorted(set(sizes)):
        pts = np.flatnonzero(sizes == R)
        write_table(g.create_group(f"steps/R{R}"), {"sweep_point": (pts.astype(np.int64), "1")},
                    {n: (np.asarray(sweep.metrics[n])[:, pts, :R], "s") for n in STEPS}, {},
                    STEP_ROWS, order[:, pts])


def sampled_copy(src, dst):
    """src (a synthetic schema-2 file) as ringbench writes schema 4 on many ranks."""
    run = reader.load(src)
    with h5py.File(src, "r") as f, h5py.File(dst, "w") as out:
        f.copy("run", out)
        f.copy("ranks", out)
        out["run"].attrs["schema_version"] = np.int64(4)
        sweeps = out.create_group("sweeps")
        for name, s in run.sweeps.items():
            g = sweeps.create_group(name)
            for a, v in f["sweeps"][name].attrs.items():
                g.attrs[a] = v
            metrics, units = read_table(s)
            if s.type == "ring_attention":
                order = medians(metrics["total_time_s"])
                ring_steps_tables(g, s, metrics, order)
                units.update(forward_compute_s="s", forward_wait_s="s")
            elif s.type == "collectives":
                order = medians(metrics["time_s"])
            else:  # p2p: the slower end of a pair first
                order = -medians(metrics["bandwidth_Bps"])
            write_table(g, keys_of(s), {n: (v, units[n]) for n, v in metrics.items()},
                        {n: {a: v for a, v in j.items()} for n, j in s.judging.items()}, ROWS, order)
            for sub, t in s.subtables.items():
                mt, mu = read_table(t)
                write_table(g.create_group(sub), keys_of(t), {n: (v, mu[n]) for n, v in mt.items()},
                            {}, None, None)
    return dst


class SampledRows(TempDirCase):
    def files(self):
        full = synthetic.make_run(self.path("full.h5"), WORLD, ring_sizes=[1, 2, 4, 8, 16],
                                  straggler=STRAGGLER, pingpong=False)
        return reader.load(full), reader.load(sampled_copy(full, self.path("sampled.h5")))

    def test_the_sample_begins_with_the_slowest_rank(self):
        _, sampled = self.files()
        ring = sampled.sweeps["ring"]
        self.assertEqual(ring.nrows, ROWS)
        self.assertEqual(ring.world, WORLD)
        self.assertEqual(ring.array("total_time_s").shape, (ROWS, ring.npoints, synthetic.ITERATIONS))
        for p in range(ring.npoints):
            self.assertEqual(int(ring.ranks_at(p)[0]), STRAGGLER)
        table = ring.table
        self.assertEqual(len(table), ROWS * ring.npoints)
        self.assertEqual(list(table[table["point"] == 0]["rank"]), list(ring.ranks_at(0)))

    def test_over_ranks_is_every_rank_s(self):
        full, sampled = self.files()
        a, b = full.sweeps["ring"], sampled.sweeps["ring"]
        for p in range(a.npoints):
            for name in ("total_tflops", "peak_memory_bytes", "forward_flop", "total_time_s"):
                want, got = a.over_ranks(name, p), b.over_ranks(name, p)
                for stat in reader.OVER_RANKS:
                    np.testing.assert_allclose(got[stat], want[stat], rtol=1e-12, err_msg=f"{name} {stat}")

    def test_the_report_s_ring_numbers_are_every_rank_s(self):
        full, sampled = self.files()
        want, got = model.point_table([full]), model.point_table([sampled])
        self.assertEqual(len(want), len(got))
        for a, b in zip(want, got):
            for k in ("time", "forward_time", "throughput", "tflops", "memory", "work_per_rank",
                      "exposed_comm", "step_compute", "steps", "time_p25", "time_p75"):
                if a[k] is None or (isinstance(a[k], float) and math.isnan(a[k])):
                    self.assertTrue(b[k] is None or math.isnan(b[k]), k)
                else:
                    self.assertAlmostEqual(b[k], a[k], places=12, msg=f"{k} R={a['ring_size']}")

    def test_the_steps_of_a_point_in_either_layout(self):
        full, sampled = self.files()
        a, b = full.sweeps["ring"], sampled.sweeps["ring"]
        self.assertTrue(ring_steps.has_steps(a, STEPS) and ring_steps.has_steps(b, STEPS))
        for p in range(a.npoints):
            R = int(a.points["ring_size"].iloc[p])
            ranks_a, all_steps = ring_steps.point_steps(a, p, STEPS)
            ranks_b, kept = ring_steps.point_steps(b, p, STEPS)
            self.assertEqual(list(ranks_a), list(range(WORLD)))
            self.assertEqual(ranks_b[0], STRAGGLER)
            self.assertEqual(kept["step_wait_s"].shape, (STEP_ROWS, R))
            for n in STEPS:
                np.testing.assert_array_equal(kept[n], all_steps[n][ranks_b])
                self.assertAlmostEqual(ring_steps.total(b, p, n), ring_steps.total(a, p, n), places=12)
                np.testing.assert_allclose(ring_steps.rank_sums(b, p, n),
                                           ring_steps.rank_sums(a, p, n)[b.ranks_at(p)])

    def test_collectives_and_p2p_figures(self):
        full, sampled = self.files()
        want, got = results.collective_points([full]), results.collective_points([sampled])
        for col in ("busbw", "algbw", "time", "t_p25", "t_p75"):
            np.testing.assert_allclose(got[col].to_numpy(), want[col].to_numpy(), err_msg=col)
        a, b = results.p2p_matrices(full.sweeps["p2p"]), results.p2p_matrices(sampled.sweeps["p2p"])
        self.assertEqual(set(a), set(b))
        for name in a:
            np.testing.assert_array_equal(b[name], a[name])
        # a pair point keeps its two ranks, the slower end first, then empty rows
        p2p = sampled.sweeps["p2p"]
        for p in range(p2p.npoints):
            pair = {int(p2p.points["sender"].iloc[p]), int(p2p.points["receiver"].iloc[p])}
            ranks = p2p.ranks_at(p)
            self.assertEqual(set(int(r) for r in ranks[:2]), pair)
            self.assertTrue((ranks[2:] == -1).all())

    def test_csv_rows_of_a_sampled_table(self):
        _, sampled = self.files()
        ring = sampled.sweeps["ring"]
        chunks = list(ring.scalar_row_chunks())
        self.assertEqual(sum(len(c) for c in chunks), ROWS * ring.npoints)


if __name__ == "__main__":
    unittest.main()
