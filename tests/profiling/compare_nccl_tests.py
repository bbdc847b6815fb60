#!/usr/bin/env python3
"""Compare the collectives sweep's busbw with nccl-tests output, point by point.

Usage (after running both on the same node, same NCCL, same sizes):
  mpirun -np 4 all_reduce_perf -b 64M -e 1G -f 2 -g 1 -w 5 -n 20 -a 3 > all_reduce.txt
  ...
  compare_nccl_tests.py run.h5 all_reduce=all_reduce.txt all_gather=all_gather.txt \
      reduce_scatter=reduce_scatter.txt all_to_all=alltoall.txt sendrecv=sendrecv.txt \
      [--sweep collectives] [--group world] [--dtype float32] [--min-bytes 67108864] [--tolerance 0.03]

Prints one row per (operation, size, in-place) with both busbw values in GB/s and their
ratio; exits 1 when any point at or above --min-bytes differs by more than --tolerance.
nccl-tests' size column is matched against the sweep's `bytes` (the same definition).
"""
import argparse
import sys

import h5py
import numpy as np

TYPES = {"float", "half", "bfloat16", "double", "int8", "uint8", "int32", "uint32", "int64", "uint64",
         "float32", "float16", "float64"}


def parse_nccl_tests(path):
    """{(size, in_place): busbw GB/s} from an nccl-tests stdout file."""
    out = {}
    for line in open(path):
        tok = line.split()
        if not tok or tok[0].startswith("#") or not tok[0].isdigit():
            continue
        if not any(t in TYPES for t in tok[1:4]):
            continue
        tail = tok[-8:]  # out-of-place: time algbw busbw #wrong, in-place: the same
        try:
            out[(int(tok[0]), 0)] = float(tail[2])
            out[(int(tok[0]), 1)] = float(tail[6])
        except ValueError:
            continue
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("h5")
    ap.add_argument("pairs", nargs="+", help="operation=nccl-tests-output.txt")
    ap.add_argument("--sweep", default="collectives")
    ap.add_argument("--group", default="world")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--min-bytes", type=int, default=64 << 20)
    ap.add_argument("--tolerance", type=float, default=0.03)
    a = ap.parse_args()

    g = h5py.File(a.h5, "r")["sweeps"][a.sweep]
    op = g["operation"].asstr()[()]
    grp = g["group"].asstr()[()]
    dt = g["dtype"].asstr()[()]
    ip = g["in_place"][()]
    nbytes = g["bytes"][()]
    busbw = g["busbw_Bps"][()] / 1e9
    worst = 0.0
    failed = False
    print(f"{'operation':<16}{'bytes':>12} {'place':<6}{'ours GB/s':>11}{'nccl-tests':>12}{'ratio':>8}")
    for pair in a.pairs:
        name, path = pair.split("=", 1)
        ref = parse_nccl_tests(path)
        for i in np.flatnonzero((op == name) & (grp == a.group) & (dt == a.dtype)):
            key = (int(nbytes[i]), int(ip[i]))
            if key not in ref or ref[key] <= 0:
                continue
            ratio = busbw[i] / ref[key]
            flag = ""
            if nbytes[i] >= a.min_bytes:
                worst = max(worst, abs(ratio - 1))
                if abs(ratio - 1) > a.tolerance:
                    failed = True
                    flag = "  <-- off by more than {:.0%}".format(a.tolerance)
            print(f"{name:<16}{nbytes[i]:>12} {'in' if ip[i] else 'out':<6}{busbw[i]:>11.2f}{ref[key]:>12.2f}{ratio:>8.3f}{flag}")
    print(f"largest difference at >= {a.min_bytes} B: {worst:.2%}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
