#!/usr/bin/env python3
"""Edits of real ringbench files (schema_version 2) for the analysis tests: slower or faster
copies, and points turned into failures, without running the benchmark again.

    h5edit.py scale SRC DST FACTOR    copy with every time (units s) x FACTOR, every rate / FACTOR
"""
import shutil
import sys

import h5py
import numpy as np

RATE_UNITS = ("B/s", "TFLOP/s", "Hz")


def _text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def scale_times(src, dst, factor):
    """Copy of src with every time (units s) multiplied and every rate divided by factor."""
    shutil.copyfile(src, dst)
    with h5py.File(dst, "r+") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and obj.dtype.kind == "f":
                units = _text(obj.attrs.get("units", ""))
                if units == "s":
                    obj[...] = obj[()] * factor
                elif units in RATE_UNITS:
                    obj[...] = obj[()] / factor
        f.visititems(visit)


RING_TIMES = ("forward_time_s", "backward_time_s", "total_time_s")


def scale_ring_times(src, dst, factor):
    """Copy of src with every ring_attention sweep's per-iteration times x factor: a slowdown of
    the ring alone, as a regression of its kernels would be."""
    shutil.copyfile(src, dst)
    with h5py.File(dst, "r+") as f:
        for g in f["sweeps"].values():
            if _text(g.attrs.get("type", "")) != "ring_attention":
                continue
            for name in RING_TIMES:
                if name in g:
                    g[name][...] = g[name][()] * factor
    return dst


# The attributes HDF5's dimension scales keep on a dataset; its axes are attached anew instead.
SCALE_ATTRS = ("DIMENSION_LIST", "DIMENSION_LABELS")


def _rewrite_text(group, name, values):
    """Fixed-length strings are as wide as their longest value: a longer value needs a new dataset
    (with the old one's attributes and dimension scales)."""
    old = group[name]
    attrs = {k: old.attrs[k] for k in old.attrs if k not in SCALE_ATTRS}
    scales = [(d.label, list(d.values())) for d in old.dims]
    width = max(1, max(len(v.encode()) for v in values.ravel()))
    del group[name]
    new = group.create_dataset(name, data=np.array([v.encode() for v in values.ravel()],
                                                   dtype=f"S{width}").reshape(values.shape))
    for k, v in attrs.items():
        new.attrs[k] = v
    for axis, (label, attached) in enumerate(scales):
        for scale in attached:
            new.dims[axis].attach_scale(scale)
        new.dims[axis].label = label


def set_point_status(path, sweep, point, status):
    """Every rank's status of one point of a sweep (ok | oom | parity_failed)."""
    with h5py.File(path, "r+") as f:
        g = f["sweeps"][sweep]
        values = g["status"].asstr()[()].astype(object)
        values[:, point] = status
        _rewrite_text(g, "status", values)


def unmeasure_point(path, sweep, point, keep=("status", "ring_id", "ring_rank")):
    """Every metric of one point back to "not measured" (NaN, -1, ""), as an oom point is."""
    with h5py.File(path, "r+") as f:
        g = f["sweeps"][sweep]
        for name, ds in g.items():
            if not isinstance(ds, h5py.Dataset) or name in keep or _text(ds.attrs.get("role", "")) == "dimension":
                continue
            v = ds[()]
            v[:, point] = np.nan if v.dtype.kind == "f" else (-1 if v.dtype.kind == "i" else b"")
            ds[...] = v


if __name__ == "__main__":
    if len(sys.argv) != 5 or sys.argv[1] != "scale":
        sys.exit(__doc__)
    scale_times(sys.argv[2], sys.argv[3], float(sys.argv[4]))
