#!/usr/bin/env python3
"""How often does `rb-analysis compare` cry wolf, and does it catch a real slowdown? (#15)

Runs the main host job (inputs/small.yaml, 2 ranks, as launch/quickstart.sh) K + N + 1 times
back to back, then for each of the last N consecutive pairs (run i-1 as BASE, run i as NEW):
  - compares them with compare's defaults: a pair with any `regression` is a false alarm;
  - compares BASE with a copy of NEW whose ring attention per-iteration times
    (forward/backward/total_time_s) are x FACTOR (default 1.10): detected when a ring point
    is a `regression`.
With --history K > 0 each pair is also compared as the nightly job does, with the K runs
before BASE as history nights (compare --history: each point's night-to-night noise).
--reuse judges runs already in WORKDIR (run00.h5 ...; e.g. a series made on a GPU machine).
--repeats K makes each night K back-to-back runs (pairs of nights, each point judged on each
side's fastest run: compare --base-repeat/--new-repeat), (history + N + 1) x K runs in all.
Prints the counts (and the warnings) and writes every compare's JSON under WORKDIR.

    /usr/bin/python3 launch/compare_pairs.py [-n 20] [--history K] [--build build] [--workdir DIR]
Exit 0 when no pair regressed and every injected pair was detected (in every mode), 1 otherwise.
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


def compare(args, base, new, tag, history=()):
    """(exit code, JSON document) of rb-analysis compare with its defaults (and the history
    files, if any). base, new: a night's runs (the first, then its repeats)."""
    js = os.path.join(args.workdir, f"{tag}.json")
    extra = [a for h in history for a in ("--history", h)]
    extra += [a for r in base[1:] for a in ("--base-repeat", r)]
    extra += [a for r in new[1:] for a in ("--new-repeat", r)]
    base, new = base[0], new[0]
    r = subprocess.run([sys.executable, "-m", "ringbench_analysis", "compare", base, new,
                        "--tolerance", args.tolerance, "--json", js] + extra
                       + (["--run-noise", args.run_noise] if args.run_noise else []),
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


def judge_pairs(args, nights, rings, first, history_k):
    """Counts over pairs of nights (nights[i-1], nights[i]) for i >= first (a night: K runs
    back to back, --repeats): false alarms, detections of the injected slowdown, pairs with a
    warning, pairs whose ring regressed without injection."""
    c = dict(alarms=0, detected=0, warned=0, ring_alarms=0, pairs=0)
    mode = f"history {history_k}" if history_k else "plain"
    for i in range(first, len(nights)):
        hist = [n[0] for n in nights[max(0, i - 1 - history_k):i - 1]] if history_k else []
        tag = f"pair{i:02d}" + (f"_h{history_k}" if history_k else "")
        _, doc = compare(args, nights[i - 1], nights[i], tag, hist)
        reg, warn = summarise(doc)
        c["alarms"] += bool(reg)
        c["warned"] += bool(warn)
        c["ring_alarms"] += any(x["sweep"] in rings for x in reg)
        slow = []
        for run in nights[i]:
            slow.append(run[:-3] + f"_x{args.factor:g}.h5")
            if not os.path.exists(slow[-1]):
                inject(run, slow[-1], args.factor)
        _, doc = compare(args, nights[i - 1], slow, tag + "_injected", hist)
        ireg, iwarn = summarise(doc, rings)
        c["detected"] += bool(ireg)
        c["pairs"] += 1
        nring = sum(1 for x in doc["rows"] if x["sweep"] in rings)
        print(f"[{mode}] pair {i:2d}: {len(reg)} regression(s) "
              + "".join(f"[{x['sweep']} {x['point'][:40]} {x['metric']} {x['worse'] - 1:+.1%}]"
                        for x in reg)
              + f", {len(warn)} warning(s); injected x{args.factor:g}: {len(ireg)} of {nring} "
              f"ring rows regression, {len(iwarn)} warn", flush=True)
    print(f"[{mode}] pairs with any regression: {c['alarms']} of {c['pairs']} "
          f"(pairs with a warning: {c['warned']})")
    print(f"[{mode}] injected x{args.factor:g} pairs detected (a ring regression): "
          f"{c['detected']} of {c['pairs']}")
    # A pair whose ring already regressed without the injection counts as detected too:
    # this says how many of the detections the machine's own drift could explain.
    print(f"[{mode}] pairs with a ring regression without injection: {c['ring_alarms']} of {c['pairs']}")
    return c["alarms"] == 0 and c["detected"] == c["pairs"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--pairs", type=int, default=20, help="pairs judged (default 20)")
    ap.add_argument("--history", type=int, default=0, metavar="K",
                    help="also judge each pair with the K runs before BASE as history nights")
    ap.add_argument("--build", default=os.environ.get("RB_BUILD", os.path.join(ROOT, "build")))
    ap.add_argument("--config", default=os.path.join(ROOT, "inputs", "small.yaml"))
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--mpiexec", default="mpirun")
    ap.add_argument("--factor", type=float, default=1.10, help="injected ring slowdown")
    ap.add_argument("--tolerance", default="5%")
    ap.add_argument("--run-noise", metavar="SIGMA",
                    help="compare --run-noise (default: compare's, by the files' backend)")
    ap.add_argument("--workdir", default=os.path.join(ROOT, "results", "compare_pairs"))
    ap.add_argument("--repeats", type=int, default=1, metavar="K",
                    help="runs per night (default 1): each side of a pair is K back-to-back runs, "
                         "compared with --base-repeat/--new-repeat (each point's fastest run)")
    ap.add_argument("--reuse", action="store_true",
                    help="judge the runs already in WORKDIR (run??.h5) instead of running the job")
    args = ap.parse_args()
    if args.pairs < 1 or args.history < 0 or args.repeats < 1:
        ap.error("--pairs and --repeats must be at least 1 and --history at least 0")
    args.config, args.build = os.path.abspath(args.config), os.path.abspath(args.build)
    os.makedirs(args.workdir, exist_ok=True)
    total = (args.history + args.pairs + 1) * args.repeats
    if args.reuse:
        runs = [os.path.join(args.workdir, f"run{i:02d}.h5") for i in range(total)]
        missing = [r for r in runs if not os.path.isfile(r)]
        if missing:
            ap.error(f"--reuse: {len(missing)} run file(s) missing, e.g. {missing[0]}")
    else:
        runs = [run_job(args, i) for i in range(total)]
    rings = ring_sweeps(runs[0])
    nights = [runs[j:j + args.repeats] for j in range(0, total, args.repeats)]
    first = args.history + 1
    ok = judge_pairs(args, nights, rings, first, 0)
    if args.history:
        ok = judge_pairs(args, nights, rings, first, args.history) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
