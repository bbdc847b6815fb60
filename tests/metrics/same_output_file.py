#!/usr/bin/env python3
"""Every rank must see the one output file (issue #17 item 7): rank 1 runs in a mount namespace
of its own with a private tmpfs over the output directory, as a rank on another node with a
node-local /tmp would. Checks: the run stops before any sweep with a message naming rank 1,
rank 0's host and the path, exit non-zero on every rank within seconds, and rank 0's claim is
removed (no stray output). Then rank 1's private directory holds a stale file of the same
name (another run's): refused too. Skips (77) where it cannot unshare and mount (not root).

    same_output_file.py --ringbench BIN --mpiexec MPIEXEC --workdir DIR
"""
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import check, run  # noqa: E402
import harness  # noqa: E402

JOB = "backend: host\nsweeps:\n  - {type: host_pingpong, message_sizes: [8], iterations: 2}\n"


def can_private_mount(path):
    r = subprocess.run(["unshare", "-m", "sh", "-c", f"mount -t tmpfs none {path}"],
                       capture_output=True)
    return os.geteuid() == 0 and r.returncode == 0


def run_split(args, out_dir, rank1_setup):
    """rank 0 as usual; rank 1 under a private tmpfs on out_dir, after `rank1_setup`."""
    cfg = os.path.join(args.workdir, "job.yaml")
    with open(cfg, "w") as f:
        f.write(JOB)
    out = os.path.join(out_dir, "run.h5")
    rank1 = f"mount -t tmpfs none {out_dir} && {rank1_setup} exec \"$0\" \"$@\""
    cmd = [args.mpiexec, "--oversubscribe", "-np", "1", args.ringbench, cfg, "--output", out,
           ":", "-np", "1", "unshare", "-m", "sh", "-c", rank1, args.ringbench, cfg,
           "--output", out]
    t0 = time.monotonic()
    try:
        r = run(cmd, timeout=120, env=harness.MPI_AS_ROOT)
    except subprocess.TimeoutExpired as e:  # each rank wrote its own file and waited: a hang
        r = subprocess.CompletedProcess(cmd, -9, str(e.stdout or ""), "timed out after 120 s")
    return r, time.monotonic() - t0, out


def main():
    args = harness.arg_parser(source=False).parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    out_dir = os.path.join(args.workdir, "out")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    if not can_private_mount(out_dir):
        print("SKIP: cannot unshare a mount namespace and mount a tmpfs here (not root?)")
        return 77
    for setup, why in (("", "No such file or directory"),
                       ("echo stale > {d}/run.h5 &&", "another run's or another node's file")):
        r, secs, out = run_split(args, out_dir, setup.format(d=out_dir))
        text = r.stdout + r.stderr
        check(r.returncode != 0 and secs < 60 and "rank 1 (host " in text
              and f"does not see the output file '{out}' that rank 0 (host " in text and why in text
              and "file system all nodes share" in text,
              f"rank 1 with a private output directory ({why}): exit {r.returncode} in "
              f"{secs:.1f} s naming rank 1, rank 0's host and the path")
        check("sweep" not in r.stdout.split("does not see")[0].lower().replace("sweeps", ""),
              "stopped before any sweep ran")
        check(not os.path.exists(out), "rank 0's claimed file was removed")
        if r.returncode == 0 or why not in text:
            print(text[-3000:])
    return harness.exit_code()


if __name__ == "__main__":
    sys.exit(main())
