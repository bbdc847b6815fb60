"""Reads a file written by tests/metrics/test_h5.cpp (write_everything) with h5py, the way
analysis/ scripts do, and checks types, shapes and values. Usage: check_h5py.py FILE WORLD."""
import sys

import h5py
import numpy as np


def dval(r, i):
    return r * 100.0 + i + 0.25


def ival(r, i):
    return (1 << 40) * (r + 1) - i


def sval(r):
    return "" if r == 0 else "rank \u03c1 " + "x" * (3 * r)


def main():
    path, world = sys.argv[1], int(sys.argv[2])
    errors = []

    def check(cond, what):
        if not cond:
            errors.append(what)

    with h5py.File(path, "r") as f:
        status = f["run"].attrs["status"]
        check(isinstance(status, str) and status == "complete", f"/run status is str 'complete': {status!r}")
        for name, ds in list(f["data"].items()) + list(f["table"].items()) + list(f["table/points"].items()):
            if not isinstance(ds, h5py.Dataset):
                continue
            for key in ("units", "description", "role"):
                v = ds.attrs.get(key)
                check(isinstance(v, str) and v != "", f"{name}.{key} is a non-empty str: {v!r}")

        d = f["data/d2x3"][()]
        expect = np.array([[dval(r, i) for i in range(6)] for r in range(world)]).reshape(world, 2, 3)
        check(d.dtype == np.float64 and d.shape == (world, 2, 3) and np.array_equal(d, expect), "d2x3")
        i6 = f["data/i6"][()]
        check(i6.dtype == np.int64 and np.array_equal(i6, [[ival(r, i) for i in range(6)] for r in range(world)]), "i6")
        check(np.array_equal(f["data/dscalar"][()], [dval(r, 7) for r in range(world)]), "dscalar")
        check(np.array_equal(f["data/iscalar"][()], [ival(r, 7) for r in range(world)]), "iscalar")
        check(f["data/empty"].shape == (world, 0), "empty shape")
        check(f["data/empty3x0"].shape == (world, 3, 0), "empty3x0 shape")

        raw = f["data/name"][()]
        check(isinstance(raw[0], bytes), f"fixed-length strings come back as bytes: {type(raw[0])}")
        names = list(f["data/name"].asstr()[()])
        check(names == [sval(r) for r in range(world)], f"name via asstr: {names!r}")
        check(list(f["data/blank"].asstr()[()]) == [""] * world, "blank")
        check(list(f["data/shared_s"].asstr()[()]) == ["alpha", "", "\u00fc longer one"], "shared_s")

        check(np.array_equal(f["data/shared_d"][()], np.arange(6).reshape(3, 2) + 0.5), "shared_d")
        check(list(f["data/shared_i"][()]) == [-1, 0, 1 << 50], "shared_i")
        check(f["data/shared_empty"].shape == (0,), "shared_empty")

        # Schema v2 points table: keys [P] role key, metrics [world, P, ...] role metric,
        # missing values NaN / -1 / "" (rank 0 skipped point 1).
        t = f["table"]
        check(int(t.attrs["points"]) == 2, "table points attribute")
        check(list(t["points/message_size_bytes"][()]) == [8, 1024], "key values")
        check(list(t["points/dtype"].asstr()[()]) == ["float32", "bfloat16"], "text key values")
        for name in ("message_size_bytes", "dtype"):
            check(t["points"][name].attrs["role"] == "key", f"points/{name} role key")
        for name in ("time_s", "peer", "status"):
            check(t[name].attrs["role"] == "metric", f"{name} role metric")
        times = t["time_s"][()]
        check(times.shape == (world, 2, 3), f"time_s shape {times.shape}")
        check(np.all(np.isnan(times[0, 1])), "missing double is NaN")
        check(times[0, 0, 0] == 0.0 and times[0, 0, 1] == 2.0, "rank 0 point 0")
        check(t["peer"][0, 1] == -1, "missing int is -1")
        status = t["status"].asstr()[()]
        check(status[0, 1] == "" and status[0, 0] == "ok", f"missing text is empty: {status!r}")
        if world > 1:
            check(times[1, 1, 0] == 1.0 and t["peer"][1, 1] == 2 % world, "rank 1 point 1")

        # Dimension scales (written the same way by every rank): rank, point and the inner axes,
        # each a 0 .. n-1 dataset in the table's group, attached to and labelling every axis.
        for scale, n in (("rank", world), ("point", 2), ("time_s_axis2", 3), ("lane", 2)):
            s = t.get(scale)
            check(s is not None and s.attrs.get("CLASS") == b"DIMENSION_SCALE"
                  and s.attrs.get("role") == "dimension" and list(s[()]) == list(range(n)),
                  f"dimension scale {scale} of {n}")
        for name, labels in (("time_s", ["rank", "point", "time_s_axis2"]), ("peer", ["rank", "point"]),
                             ("status", ["rank", "point"]), ("lane_s", ["rank", "point", "lane"]),
                             ("points/dtype", ["point"])):
            dims = t[name].dims
            check([d.label for d in dims] == labels, f"{name} axis labels {[d.label for d in dims]}")
            check(all(len(d) == 1 and d[0].name == t.name + "/" + lab for d, lab in zip(dims, labels)),
                  f"{name}: each axis has its scale attached")

    if errors:
        for e in errors:
            print("h5py check failed:", e, file=sys.stderr)
        return 1
    print(f"h5py check passed for {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
