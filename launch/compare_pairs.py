#!/usr/bin/env python3
"""How often does `rb-analysis compare` cry wolf, and does it catch a real slowdown? (#15)

Runs the main host job (inputs/small.yaml, 2 ranks, as launch/quickstart.sh) N times back to
back, then for each consecutive pair (run i-1 as BASE, run i as NEW):
  - compares them with compare's defaults: a pair with any `regression` is a false alarm;
  - compares BASE with a copy of NEW whose ring attention per-iteration times
    (forward/backward/total_time_s) are x FACTOR (default 1.10): detected when a ring point
    is a `regression`.
Prints both counts (and the warnings) and writes every compare's JSON under WORKDIR.

    /usr/bin/python3 launch/compare_pairs.py [-n 20] [--build build] [--workdir DIR]
Exit 0 when no pair regressed and every injected pair was detected, 1 otherwise.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import h5py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RING_TIMES = ("forward_time_s", "backward_time_s", "total_time_s")


def run_job(args, i):
    out = os.path.join(args.workdir, f"run{i:02d}.h5")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = [args.mpiexec, "-np", str(args.np), "--oversubscribe",
           os.path.join(args.build, "ringbench"), args.config, "--output", out, "--force"]
    r = subprocess.run(cmd, cwd=args.workdir, env=env, capture_output=True, text=True)
    if r.returncode != 0 or not os.path.isfile(out):
        sys.exit(f"run {i}: {' '.join(cmd)} exited {r.returncode}\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return out


def inject(src, dst, factor):
    """Copy of src with every ring_attention sweep's per-iteration times x factor (as
    tests/analysis/h5edit.py's scale, but only these: the slowdown compare must find)."""
    shutil.copyfile(src, dst)
    with h5py.File(dst, "r+") as f:
        for g in f["sweeps"].values():
            t = g.attrs.get("type", b"")
            if (t.decode() if isinstance(t, bytes) else str(t)) != "ring_attention":
                continue
            for name in RING_TIMES:
                if name in g:
                    g[name][...] = g[name][()] * factor
    return dst


def compare(args, base, new, tag):
    """(exit code, JSON document) of rb-analysis compare BASE NEW with its defaults."""
    js = os.path.join(args.workdir, f"{tag}.json")
    r = subprocess.run([sys.executable, "-m", "ringbench_analysis", "compare", base, new,
                        "--tolerance", args.tolerance, "--json", js],
                       env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "analysis")),
                       capture_output=True, text=True)
    if r.returncode not in (0, 1):
        sys.exit(f"compare {base} {new}: exit {r.returncode}\n{r.stderr}")
    with open(js) as f:
        return r.returncode, json.load(f)


def summarise(doc, sweep_type_rows=None):
    rows = [x for x in doc["rows"] if sweep_type_rows is None or x["sweep"] in sweep_type_rows]
    return ([x for x in rows if x["verdict"] == "regression"],
            [x for x in rows if x["verdict"] == "warn"])


def ring_sweeps(path):
    with h5py.File(path, "r") as f:
        return {n for n, g in f["sweeps"].items()
                if (g.attrs.get("type", b"").decode() if isinstance(g.attrs.get("type", b""), bytes)
                    else str(g.attrs.get("type", ""))) == "ring_attention"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--runs", type=int, default=20, help="runs back to back (N-1 pairs)")
    ap.add_argument("--build", default=os.environ.get("RB_BUILD", os.path.join(ROOT, "build")))
    ap.add_argument("--config", default=os.path.join(ROOT, "inputs", "small.yaml"))
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--mpiexec", default="mpirun")
    ap.add_argument("--factor", type=float, default=1.10, help="injected ring slowdown")
    ap.add_argument("--tolerance", default="5%")
    ap.add_argument("--workdir", default=os.path.join(ROOT, "results", "compare_pairs"))
    args = ap.parse_args()
    if args.runs < 2:
        ap.error("--runs must be at least 2 (one pair)")
    args.config, args.build = os.path.abspath(args.config), os.path.abspath(args.build)
    os.makedirs(args.workdir, exist_ok=True)
    runs = [run_job(args, i) for i in range(args.runs)]
    rings = ring_sweeps(runs[0])
    alarms, detected, warned, ring_alarms = 0, 0, 0, 0
    for i in range(1, len(runs)):
        _, doc = compare(args, runs[i - 1], runs[i], f"pair{i:02d}")
        reg, warn = summarise(doc)
        alarms += bool(reg)
        warned += bool(warn)
        ring_alarms += any(x["sweep"] in rings for x in reg)
        slow = inject(runs[i], os.path.join(args.workdir, f"run{i:02d}_x{args.factor:g}.h5"), args.factor)
        _, doc = compare(args, runs[i - 1], slow, f"pair{i:02d}_injected")
        ireg, iwarn = summarise(doc, rings)
        detected += bool(ireg)
        nring = sum(1 for x in doc["rows"] if x["sweep"] in rings)
        print(f"pair {i:2d}: {len(reg)} regression(s), {len(warn)} warning(s); injected "
              f"x{args.factor:g}: {len(ireg)} of {nring} ring rows regression, {len(iwarn)} warn",
              flush=True)
    pairs = len(runs) - 1
    print(f"pairs with any regression: {alarms} of {pairs} (pairs with a warning: {warned})")
    print(f"injected x{args.factor:g} pairs detected (a ring regression): {detected} of {pairs}")
    # A pair whose ring already regressed without the injection counts as detected too:
    # this says how many of the detections the machine's own drift could explain.
    print(f"pairs with a ring regression without injection: {ring_alarms} of {pairs}")
    return 0 if alarms == 0 and detected == pairs else 1


if __name__ == "__main__":
    sys.exit(main())
