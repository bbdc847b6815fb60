#!/usr/bin/env python3
"""Dimension scales in a real output file (#32 item 9, docs/hdf5-schema.md "Axes"): a 2-rank
host run, then every key and metric of every points table has an HDF5 dimension scale on each
axis (rank, point, iteration, step, ...) labelled with its name, as do /ranks' datasets; and,
where Debian's python3-xarray and python3-h5netcdf are installed, xarray opens each sweep group
with those names and no phony_dims, and the docs' pandas snippet runs.

Run by CTest (tests/analysis.cmake, analysis_h5_dims) or by hand:
    RINGBENCH_BIN=build/ringbench python3 tests/analysis/h5_dims_e2e.py -v
Environment: RINGBENCH_BIN (default build/ringbench), RINGBENCH_MPIEXEC (mpiexec),
RINGBENCH_WORKDIR (a temporary folder). Exit 77: h5py, numpy or the program is missing.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tempdir_case  # noqa: E402,F401  # pylint: disable=unused-import,wrong-import-position  (exit 77 without h5py)
import h5py  # noqa: E402  # pylint: disable=wrong-import-position
import numpy as np  # noqa: E402  # pylint: disable=wrong-import-position

try:
    import xarray as xr  # Debian: python3-xarray, python3-h5netcdf
    import h5netcdf  # noqa: F401  # pylint: disable=unused-import
except ImportError:
    xr = None

SOURCE = os.path.dirname(os.path.dirname(HERE))
BIN = os.path.abspath(os.environ.get("RINGBENCH_BIN", os.path.join(SOURCE, "build", "ringbench")))
MPIEXEC = os.environ.get("RINGBENCH_MPIEXEC", "mpiexec")

# Every kind of axis a host run writes: iterations (ring, ping-pong, collectives, compute),
# ring steps (a table per ring size under steps/), the four checked tensors, and a points table
# in a subgroup (the collectives' alpha-beta fits under model/).
CONFIG = """run: {name: dims, output_dir: .}
backend: host
binding: {policy: none}
sweeps:
  - {type: ring_attention, name: ring, seq_lengths: [64], num_heads: 2, head_dim: 16,
     ring_sizes: [1, 2], causal: true, warmup: 1, iterations: 3, backward: true}
  - {type: host_pingpong, message_sizes: [8, 1024], warmup: 1, iterations: 4}
  - {type: collectives, operations: [all_reduce], groups: [world], max_bytes: 1KiB, iterations: 3}
  - {type: compute, sizes: [32], iterations: 2}
"""

# Inner axes this run must name (dataset under /sweeps -> its axes).
EXPECTED = {
    "ring/forward_time_s": ("rank", "point", "iteration"),
    "ring/steps/R2/step_wait_s": ("rank", "point", "step"),
    "ring/steps/R1/step_pairs": ("rank", "point", "step"),
    "ring/parity_elements": ("rank", "point", "tensor"),
    "ring/status": ("rank", "point"),
    "host_pingpong/one_way_time_s": ("rank", "point", "iteration"),
    "collectives/iteration_time_s": ("rank", "point", "iteration"),
    "collectives/model/alpha_s": ("rank", "point"),
    "compute/iteration_time_s": ("rank", "point", "iteration"),
}


def run_once():
    """Runs CONFIG on 2 ranks in the work folder; the output file's path."""
    work = os.environ.get("RINGBENCH_WORKDIR") or tempfile.mkdtemp(prefix="h5dims_")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    with open(os.path.join(work, "dims.yaml"), "w") as f:
        f.write(CONFIG)
    out = os.path.join(work, "dims.h5")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = subprocess.run([MPIEXEC, "-np", "2", "--oversubscribe", BIN, "dims.yaml", "--output", out,
                        "--quiet"], cwd=work, env=env, capture_output=True, text=True, timeout=300,
                       check=False)
    if r.returncode != 0:
        raise RuntimeError(f"ringbench failed ({r.returncode}): {r.stderr[-2000:]}")
    return out


def points_tables(f):
    """Every group holding a points table: (its path, the group)."""
    found = []
    f.visititems(lambda name, obj: found.append((name, obj))
                 if isinstance(obj, h5py.Group) and "points" in obj and "point" in obj else None)
    return found


class DimensionScales(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(BIN, os.X_OK):
            raise unittest.SkipTest(f"no ringbench at {BIN} (set RINGBENCH_BIN)")
        cls.out = run_once()
        cls.f = h5py.File(cls.out, "r")

    @classmethod
    def tearDownClass(cls):
        cls.f.close()

    def assert_scaled(self, ds, names):
        """Axis i of `ds` has exactly one scale, named and labelled names[i], as long as the axis
        and holding 0 .. n-1, in the dataset's group or above it (where netCDF looks)."""
        self.assertEqual(len(ds.dims), len(names), ds.name)
        for axis, (dim, name) in enumerate(zip(ds.dims, names)):
            self.assertEqual(dim.label, name, f"{ds.name} axis {axis}")
            self.assertEqual(len(dim), 1, f"{ds.name} axis {axis}: one scale")
            scale = dim[0]
            self.assertEqual(scale.name.split("/")[-1], name, ds.name)
            self.assertTrue(ds.parent.name.startswith(scale.parent.name), f"{scale.name} above {ds.name}")
            self.assertEqual(scale.attrs["CLASS"], b"DIMENSION_SCALE")
            self.assertEqual(scale.shape, (ds.shape[axis],), f"{ds.name} axis {axis}")
            np.testing.assert_array_equal(scale[()], np.arange(ds.shape[axis]))

    def test_named_inner_axes(self):
        for path, names in EXPECTED.items():
            with self.subTest(path):
                self.assert_scaled(self.f["sweeps"][path], names)

    def test_every_key_and_metric_has_scales(self):
        tables = points_tables(self.f)
        self.assertGreaterEqual(len(tables), 5, [t for t, _ in tables])
        for path, g in tables:
            for name, ds in g["points"].items():
                with self.subTest(f"{path}/points/{name}"):
                    self.assertEqual(ds.attrs["role"], "key")
                    self.assert_scaled(ds, ("point",))
            metrics = [(n, ds) for n, ds in g.items()
                       if isinstance(ds, h5py.Dataset) and ds.attrs.get("role") == "metric"]
            self.assertTrue(metrics, path)
            for name, ds in metrics:
                with self.subTest(f"{path}/{name}"):
                    self.assertEqual([d.label for d in ds.dims][:2], ["rank", "point"])
                    self.assert_scaled(ds, [d.label for d in ds.dims])

    def test_scales_are_documented_dimensions(self):
        for path, g in points_tables(self.f):
            scales = [n for n, ds in g.items() if isinstance(ds, h5py.Dataset)
                      and ds.attrs.get("CLASS") == b"DIMENSION_SCALE"]
            self.assertIn("rank", scales, path)
            self.assertIn("point", scales, path)
            for n in scales:
                self.assertEqual(g[n].attrs["role"], "dimension", f"{path}/{n}")
                self.assertEqual(g[n].attrs["units"], "1")
                self.assertTrue(g[n].attrs["description"])

    def test_ranks_table_is_on_the_rank_axis(self):
        ranks = self.f["ranks"]
        self.assertEqual(ranks["rank"].attrs["role"], "key")  # the scale keeps its role
        self.assertEqual(ranks["rank"].attrs["CLASS"], b"DIMENSION_SCALE")
        others = [(n, ds) for n, ds in ranks.items() if n != "rank"]
        self.assertGreater(len(others), 10)
        for name, ds in others:
            with self.subTest(name):
                self.assert_scaled(ds, ("rank",))

    @unittest.skipIf(xr is None, "python3-xarray / python3-h5netcdf are not installed")
    def test_xarray_opens_every_points_table_without_phony_dims(self):
        for path, _ in points_tables(self.f):
            with self.subTest(path), xr.open_dataset(self.out, group=path, engine="h5netcdf") as ds:
                self.assertEqual(ds.sizes["rank"], 2)
                self.assertTrue(all(not d.startswith("phony_dim") for d in ds.dims), dict(ds.sizes))
        with xr.open_dataset(self.out, group="sweeps/ring", engine="h5netcdf") as ds:
            self.assertEqual(ds["forward_time_s"].dims, ("rank", "point", "iteration"))
        with xr.open_dataset(self.out, group="ranks", engine="h5netcdf") as ds:
            self.assertEqual(list(ds["rank"].values), [0, 1])

    @unittest.skipIf(xr is None, "python3-xarray / python3-h5netcdf are not installed")
    def test_the_docs_snippet(self):
        """docs/hdf5-schema.md's xarray and pandas example, as written there."""
        path = self.out
        # --- the snippet (keep in step with docs/hdf5-schema.md, "Axes") ---
        sweep = xr.open_dataset(path, group="sweeps/ring", engine="h5netcdf")
        keys = xr.open_dataset(path, group="sweeps/ring/points", engine="h5netcdf")
        t = sweep["forward_time_s"].median("iteration").max("rank")   # slowest rank's median
        df = t.to_dataframe("forward_s").join(keys.to_dataframe())     # one row per point
        ranks = xr.open_dataset(path, group="ranks", engine="h5netcdf") # gpu_name, hostname by rank
        # --- end of the snippet ---
        self.assertEqual(ranks.sizes["rank"], 2)
        self.assertIn("hostname", ranks)
        ranks.close()
        self.assertEqual(len(df), 2)  # seq 64 at ring sizes 1 and 2
        self.assertEqual(sorted(df["ring_size"]), [1, 2])
        self.assertTrue((df["forward_s"] > 0).all())
        with h5py.File(path, "r") as f:
            fwd = f["sweeps/ring/forward_time_s"][()]
        np.testing.assert_allclose(df["forward_s"].to_numpy(), np.median(fwd, axis=2).max(axis=0))
        sweep.close()
        keys.close()


if __name__ == "__main__":
    unittest.main()
