#!/usr/bin/env python3
"""run.mpiio_hints and run.alignment_bytes reach the output file (issue #17 item 7): a 2-rank
host run with hints and a 64 KiB alignment records the hints MPI-IO reports in effect under
/run/mpiio_hints, and its large datasets start on 64 KiB boundaries (a run without the keys
packs them). A bad hints value is refused naming file, key and line.

    output_hints.py --ringbench BIN --mpiexec MPIEXEC --workdir DIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import check, mpirun  # noqa: E402
import harness  # noqa: E402

harness.h5py_and_numpy()
import h5py  # noqa: E402

SWEEPS = """backend: host
sweeps:
  - {type: memory, bytes: 4KiB, iterations: 20000}
"""
RUN = """run:
  name: hints
  mpiio_hints: {romio_cb_write: enable, striping_unit: 1048576}
  alignment_bytes: 64KiB
"""


def job(args, name, text):
    cfg, out = os.path.join(args.workdir, f"{name}.yaml"), os.path.join(args.workdir, f"{name}.h5")
    with open(cfg, "w") as f:
        f.write(text)
    return mpirun(args, 2, [args.ringbench, cfg, "--output", out, "--force", "--quiet"]), out


def offsets(path):
    """Offsets of the contiguous datasets of at least 64 KiB."""
    found = []
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and obj.id.get_storage_size() >= 65536 \
                    and obj.id.get_offset() is not None:
                found.append((name, obj.id.get_offset()))
        f.visititems(visit)
    return found


def main():
    args = harness.arg_parser(source=False).parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    r, out = job(args, "hints", RUN + SWEEPS)
    check(r.returncode == 0, f"a run with run.mpiio_hints and alignment_bytes completes ({r.returncode})")
    with h5py.File(out, "r") as f:
        hints = {k: (v.decode() if isinstance(v, bytes) else str(v))
                 for k, v in f["run/mpiio_hints"].attrs.items()}
    check(hints.get("striping_unit") == "1048576",
          f"/run/mpiio_hints holds the hints MPI-IO reports in effect ({hints})")
    big = offsets(out)
    check(big and all(off % 65536 == 0 for _, off in big),
          f"every contiguous dataset of 64 KiB or more starts on a 64 KiB boundary ({big})")
    r, plain = job(args, "plain", SWEEPS)
    check(r.returncode == 0 and any(off % 65536 for _, off in offsets(plain)),
          f"without alignment_bytes they are packed ({offsets(plain)})")
    r, _ = job(args, "bad", "run:\n  mpiio_hints:\n    cb_nodes: [1, 2]\n" + SWEEPS)
    check(r.returncode != 0 and "bad.yaml:3" in r.stderr + r.stdout
          and "key 'run.mpiio_hints.cb_nodes'" in r.stderr + r.stdout,
          "a list as a hint's value: refused naming file, line and key")
    return harness.exit_code()


if __name__ == "__main__":
    sys.exit(main())
