#!/usr/bin/env python3
"""GPU check of the kernel_tuning sweep: the real ringbench runs tests/e2e/tuning_gpu.yaml on
one GPU, and every shape of the grid must have a point on every CUDA path this build has
(flash, naive, and cudnn unless `ringbench --version` says it is not built), each with status
ok, parity ok and positive forward and backward times.

    tuning_gpu_check.py --ringbench BIN --mpiexec MPIEXEC --source DIR --workdir DIR
    tuning_gpu_check.py --check-file RUN.h5 --ringbench BIN ...   (check a file made elsewhere)
Exit 0 = pass, 1 = fail, 77 = skipped (no GPU visible).
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import check, mpirun, run  # noqa: E402
import harness  # noqa: E402

SHAPE = ("block_rows", "head_dim", "dtype", "causal", "segment", "rate")


def gpu_visible():
    try:
        r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0 and "GPU " in r.stdout


def built_paths(ringbench):
    version = run([ringbench, "--version"]).stdout
    cudnn = [line for line in version.splitlines() if line.strip().startswith("cudnn")]
    return {"flash", "naive"} | (set() if cudnn and "not built" in cudnn[0] else {"cudnn"})


def check_file(path, expected):
    h5py, np = harness.h5py_and_numpy()
    with h5py.File(path, "r") as f:
        g = f["sweeps/tuning"]
        keys = {k: g["points/" + k][()] for k in SHAPE + ("path",)}
        text = lambda v: v.decode() if isinstance(v, bytes) else str(v)
        shapes = {}
        for p in range(len(keys["path"])):
            shape = tuple(text(keys[k][p]) for k in SHAPE)
            shapes.setdefault(shape, set()).add(text(keys["path"][p]))
        check(len(shapes) > 0, f"{len(shapes)} shapes in the grid")
        missing = {s: expected - paths for s, paths in shapes.items() if expected - paths}
        check(not missing, f"every shape timed on every built path {sorted(expected)} ({missing})")
        status = [text(s) for s in g["status"][()].ravel()]
        check(all(s == "ok" for s in status), f"every point ok ({sorted(set(status))})")
        check(bool(np.all(g["parity_ok"][()] == 1)), "parity ok on every point")
        for name in ("forward_time_s", "backward_time_s"):
            t = g[name][()]
            check(bool(np.all(np.isfinite(t) & (t > 0))), f"{name} > 0 everywhere")


def main():
    ap = harness.arg_parser()
    ap.add_argument("--check-file")
    args = ap.parse_args()
    expected = built_paths(args.ringbench)
    if args.check_file:
        check_file(args.check_file, expected)
        return harness.exit_code()
    if not gpu_visible():
        print("no GPU visible: skipped")
        return 77
    os.makedirs(args.workdir, exist_ok=True)
    out = os.path.join(args.workdir, "tuning_gpu.h5")
    config = os.path.join(args.source, "tests", "e2e", "tuning_gpu.yaml")
    r = mpirun(args, 1, [args.ringbench, config, "--output", out, "--force"], timeout=600)
    if not check(r.returncode == 0 and os.path.isfile(out), f"ringbench {config}: exit 0"):
        print(r.stdout[-3000:], r.stderr[-3000:])
        return harness.exit_code()
    check_file(out, expected)
    return harness.exit_code()


if __name__ == "__main__":
    sys.exit(main())
