#!/usr/bin/env python3
"""Two real runs of one host job, back to back, compared with `rb-analysis compare` (issue #15's
CI check, where timing noise is high: whole runs move 40 % on CI's 2 cores, a shared machine):
  - every run records the share of its node's CPU other processes took (foreign_cpu_fraction);
    a third run beside one busy loop per core records more than 5 %, and compare then judges
    with the shared-machine noise (45 %) and says why;
  - the two runs with --run-noise 0.45 (the shared-machine noise, what CI is): no regression;
    with the defaults each ring point gets the quiet-machine 1 % unless a run shared its node
    (whether two CI runs then agree within +8 % is launch/compare_pairs.py's measurement, not
    a CI assertion);
  - the second run with every per-iteration ring time x 10 (a debug build): a regression;
  - the first run against a copy of itself with the ring times x 1.2, judged as on a steady
    machine (--run-noise 0): every ring point a regression where its interval clears 5 %; with
    the defaults: the same against +8 %, or a warning if the first run shared its node;
  - x 1.03 (within the 5 % tolerance): no regression, on the same run steady (--run-noise 0)
    or against the other run with the shared-machine noise.

    compare_runs_e2e.py --ringbench BIN --mpiexec MPIEXEC --source SRC --workdir DIR
Exit 0 = pass, 1 = fail.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import check, mpirun, run  # noqa: E402
import harness  # noqa: E402

harness.h5py_and_numpy(echo_passes=True)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import h5edit  # noqa: E402

# The README main job's ring and collectives, with the iteration counts of inputs/small.yaml.
JOB = """backend: host
sweeps:
  - {type: ring_attention, name: ring, seq_lengths: [384], num_heads: 4, head_dim: 32, dtype: bf16,
     causal: true, layout: [zigzag, striped], ring_sizes: [1, 2], warmup: 2, iterations: 20}
  - {type: collectives, name: coll, operations: [all_reduce, sendrecv], min_bytes: 1MiB,
     max_bytes: 4MiB, factor: 4, warmup: 2, iterations: 20}
"""


def job(args, name):
    cfg, out = os.path.join(args.workdir, "job.yaml"), os.path.join(args.workdir, f"{name}.h5")
    with open(cfg, "w") as f:
        f.write(JOB)
    r = mpirun(args, 2, [args.ringbench, cfg, "--output", out, "--force"])
    if r.returncode != 0 or not os.path.isfile(out):
        print(r.stdout[-3000:], r.stderr[-3000:])
        raise SystemExit(f"FAIL: ringbench ({name}) exited {r.returncode}")
    return out


def compare(args, base, new, tag, *extra):
    """(exit code, JSON document) of compare with its defaults (and `extra` options)."""
    js = os.path.join(args.workdir, f"{tag}.json")
    r = run([os.path.join(args.source, "analysis", "rb-analysis"), "compare", base, new,
             "--json", js, *extra])
    print(r.stdout[-4000:], r.stderr[-2000:])
    doc = {}
    if os.path.isfile(js):
        with open(js) as f:
            doc = json.load(f)
    return r.returncode, doc


def ring_verdicts(doc):
    return [r["verdict"] for r in doc.get("rows", []) if r["sweep"] == "ring"]


def foreign(path):
    import h5py
    with h5py.File(path, "r") as f:
        return float(f["run"].attrs.get("foreign_cpu_fraction", float("nan")))


def loaded_job(args):
    """The job again beside one busy loop per core (other processes on the node)."""
    import multiprocessing
    import subprocess
    spin = "import time\nt = time.time() + 120\nwhile time.time() < t: pass\n"
    loops = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(multiprocessing.cpu_count())]
    try:
        return job(args, "loaded")
    finally:
        for p in loops:
            p.kill()
            p.wait()


def main():
    args = harness.arg_parser().parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    a, b = job(args, "first"), job(args, "second")
    fa, fb = foreign(a), foreign(b)
    check(all(0.0 <= f <= 1.0 for f in (fa, fb)),
          f"each run records the share of the node's CPU other processes took ({fa:.3f}, {fb:.3f})")
    loaded = loaded_job(args)
    fl = foreign(loaded)
    code, doc = compare(args, a, loaded, "loaded")
    check(fl > 0.05 and doc.get("run_noise_source") == "shared machine"
          and all(r.get("noise") == 0.45 for r in doc.get("rows", []) if r.get("noise") is not None)
          and "shared machine: other processes took" in " ".join(doc.get("notes", [])),
          f"a run beside busy loops: foreign_cpu_fraction {fl:.2f} > 5 %, judged with the "
          f"shared-machine noise ({doc.get('run_noise_source')}, exit {code})")
    code, doc = compare(args, a, b, "same", "--run-noise", "0.45")
    bad = [f"{r['sweep']} {r['point']} {r['metric']} {r.get('worse', 0) - 1:+.1%}"
           for r in doc.get("rows", []) if r["verdict"] == "regression"]
    check(code == 0 and not bad and len(ring_verdicts(doc)) == 4,
          f"two runs of one job, --run-noise 0.45: no regression among {len(doc.get('rows', []))} "
          f"judged metrics (exit {code}; {bad})")
    code, doc = compare(args, a, b, "same_default")
    shared = max(fa, fb) > 0.05
    ring = [r for r in doc.get("rows", []) if r["sweep"] == "ring"]
    check(len(ring) == 4 and all(r["noise"] == (0.45 if shared else 0.01) for r in ring),
          f"two runs, defaults: ring points judged with {'the shared-machine 45 %' if shared else 'the quiet 1 %'} "
          f"run-to-run noise (verdicts {ring_verdicts(doc)}, exit {code})")
    gross = h5edit.scale_ring_times(b, os.path.join(args.workdir, "second_x10.h5"), 10.0)
    code, doc = compare(args, a, gross, "gross")
    check(code == 1 and ring_verdicts(doc) == ["regression"] * 4,
          f"second run, every ring time x 10: each ring point a regression, exit 1 "
          f"({ring_verdicts(doc)}, exit {code})")
    slow = h5edit.scale_ring_times(a, os.path.join(args.workdir, "first_x1.2.h5"), 1.2)
    code, doc = compare(args, a, slow, "slow", "--run-noise", "0")
    # Each ratio is exactly 1.2; the interval's width is the point's own spread (a host point
    # with outlier iterations, on a loaded CI node most of them, can reach below 1.05), so each
    # verdict must agree with its own interval and the exit code with the verdicts; that a
    # clear slowdown is a regression at all is the x10 check's above.
    ring = [r for r in doc.get("rows", []) if r["sweep"] == "ring"]
    check(code == (1 if "regression" in ring_verdicts(doc) else 0) and len(ring) == 4
          and all(abs(r["worse"] - 1.2) < 1e-6 for r in ring)
          and all(r["verdict"] == ("regression" if r["worse_lo"] > 1.05 else "warn") for r in ring),
          f"every ring time x 1.2, --run-noise 0: a regression wherever the interval clears 5 %, "
          f"else a warning; exit 1 exactly with a regression ({ring_verdicts(doc)}, exit {code})")
    code, doc = compare(args, a, slow, "slow_default")
    ring = [r for r in doc.get("rows", []) if r["sweep"] == "ring"]
    expect = ["warn"] * 4 if fa > 0.05 else \
        ["regression" if r["worse_lo"] > r["limit"] else "warn" for r in ring]
    check(len(ring) == 4 and ring_verdicts(doc) == expect and code == (1 if "regression" in expect else 0),
          f"every ring time x 1.2 with the defaults ({'shared node: 45 %' if fa > 0.05 else 'quiet node: +8 %'}): "
          f"{ring_verdicts(doc)}, exit {code}")
    # x 1.03 of the same run, steady: never a regression; of the second run against the first,
    # judged as CI is (a shared machine): never either. (With the quiet defaults the two runs'
    # own difference decides: compare_pairs.py measures that, CI does not assert it.)
    for src, tag, extra in ((a, "first", ("--run-noise", "0")), (b, "second", ("--run-noise", "0.45"))):
        slight = h5edit.scale_ring_times(src, os.path.join(args.workdir, f"{tag}_x1.03.h5"), 1.03)
        code, doc = compare(args, a, slight, f"slight_{tag}", *extra)
        check("regression" not in ring_verdicts(doc),
              f"{tag} run, every ring time x 1.03 (within the 5 % tolerance) {' '.join(extra)}: "
              f"no ring regression ({ring_verdicts(doc)})")
    return harness.exit_code()


if __name__ == "__main__":
    sys.exit(main())
