"""`rb-analysis nccl-tests`: a collectives sweep's busbw beside nccl-tests' on the same node.

nccl-tests prints one line per size with out-of-place and in-place time, algbw, busbw and
#wrong; its size column is what the sweep stores as `size_bytes` (docs/sweeps/collectives.md),
so points match on (operation, size, in-place). A point's busbw is the slowest group's: the
minimum of `busbw_Bps` over ranks, as the sweep's own table prints it.
"""
import json
import math
import re
import sys

import numpy as np

from . import outfile, reader

# nccl-tests' binary names (from the header) to the sweep's operation names
OPERATIONS = {"all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter",
              "alltoall": "all_to_all", "all_to_all": "all_to_all", "sendrecv": "sendrecv",
              "broadcast": "broadcast", "reduce": "reduce"}
TYPES = {"float", "half", "bfloat16", "double", "int8", "uint8", "int32", "uint32", "int64", "uint64"}
_HEADER = re.compile(r"#\s*Collective test starting:\s*(\w+?)_perf")


class NcclTestsError(Exception):
    pass


def parse(path):
    """(operation or None, {(size, in_place): busbw GB/s}) from one nccl-tests stdout file."""
    operation, rows = None, {}
    with open(path, errors="replace") as f:
        for line in f:
            m = _HEADER.search(line)
            if m:
                operation = OPERATIONS.get(m.group(1))
                continue
            tok = line.split()
            if len(tok) < 13 or not tok[0].isdigit() or tok[2] not in TYPES:
                continue
            # size count type redop root | time algbw busbw #wrong (out-of-place) | the same in-place
            for in_place, col in ((0, 7), (1, 11)):
                try:
                    rows[(int(tok[0]), in_place)] = float(tok[col])
                except (ValueError, IndexError):
                    pass
    if not rows:
        raise NcclTestsError(f"{path}: no nccl-tests result line (size count type redop root time algbw busbw ...)")
    return operation, rows


def _pairs(specs):
    """OP=FILE or FILE (the operation from the file's header) -> [(operation, path, rows)]."""
    out = []
    for spec in specs:
        name, _, path = spec.rpartition("=")
        operation, rows = parse(path)
        if name:
            if name not in OPERATIONS:
                known = ", ".join(sorted(set(OPERATIONS.values())))
                raise NcclTestsError(f"{spec}: unknown operation '{name}' (one of {known})")
            operation = OPERATIONS[name]
        if operation is None:
            raise NcclTestsError(f"{path}: no '# Collective test starting: <op>_perf' header; give it as OP={path}")
        out.append((operation, path, rows))
    return out


def _sweep(run, name):
    if name:
        return run.sweep(name)
    found = run.sweeps_of_type(["collectives"])
    if not found:
        raise NcclTestsError(f"{run.path}: no collectives sweep")
    return found[0]


def _over_ranks(fn, metric, fill):
    """fn over the ranks that have a value, per point; NaN where none has."""
    a = np.asarray(metric, dtype=float)
    a = np.where(np.isfinite(a) & (a >= 0), a, fill)
    out = fn(a, axis=0)
    return np.where(np.isfinite(out), out, np.nan)


def compare(run, specs, group="world", dtype="float32", sweep=None, min_bytes=64 << 20, tolerance=0.03):
    """One row per matched (operation, size, in-place): ours, nccl-tests', ratio, checked."""
    s = _sweep(run, sweep)
    pts = s.points
    busbw = _over_ranks(np.min, s.array("busbw_Bps"), np.inf) / 1e9  # the slowest group's
    size = _over_ranks(np.max, s.array("size_bytes"), -np.inf)
    rows = []
    for operation, path, ref in _pairs(specs):
        sel = np.flatnonzero((pts["operation"] == operation).to_numpy() & (pts["group"] == group).to_numpy()
                             & (pts["dtype"] == dtype).to_numpy())
        for i in sel:
            key = (int(size[i]), int(pts["in_place"].iloc[i]))
            theirs = ref.get(key)
            if theirs is None or not theirs > 0 or not math.isfinite(busbw[i]):
                continue
            ratio = busbw[i] / theirs
            checked = key[0] >= min_bytes
            rows.append({"operation": operation, "bytes": key[0], "in_place": key[1], "ours_GBps": float(busbw[i]),
                         "nccl_tests_GBps": theirs, "ratio": float(ratio), "checked": checked,
                         "off": bool(checked and abs(ratio - 1) > tolerance), "nccl_tests_file": path})
    if not rows:
        raise NcclTestsError(f"{s.where}: no point matches the nccl-tests files (group {group}, dtype {dtype}); "
                             "same sizes, group and dtype on both sides?")
    return s, rows


def _print(rows, min_bytes, tolerance, out=None):
    out = out or sys.stdout
    print(f"{'operation':<16}{'bytes':>12} {'place':<6}{'ours GB/s':>11}{'nccl-tests':>12}{'ratio':>8}", file=out)
    for r in rows:
        flag = f"  <-- off by more than {tolerance:.0%}" if r["off"] else ""
        print(f"{r['operation']:<16}{r['bytes']:>12} {'in' if r['in_place'] else 'out':<6}{r['ours_GBps']:>11.2f}"
              f"{r['nccl_tests_GBps']:>12.2f}{r['ratio']:>8.3f}{flag}", file=out)
    checked = [abs(r["ratio"] - 1) for r in rows if r["checked"]]
    worst = max(checked) if checked else float("nan")
    print(f"{len(rows)} point(s) matched, {len(checked)} at >= {min_bytes} B; largest difference there: "
          f"{worst:.2%} (tolerance {tolerance:.0%})", file=out)


def command(args):
    try:
        run = reader.load(args.file)
        _, rows = compare(run, args.outputs, args.group, args.dtype, args.sweep, args.min_bytes, args.tolerance)
    except (NcclTestsError, reader.RingbenchFileError, OSError, KeyError) as e:
        print(f"rb-analysis nccl-tests: {e.args[0] if isinstance(e, KeyError) and e.args else e}", file=sys.stderr)
        return 2
    _print(rows, args.min_bytes, args.tolerance)
    if args.json:
        with outfile.replacing(args.json) as f:
            json.dump({"file": args.file, "group": args.group, "dtype": args.dtype, "min_bytes": args.min_bytes,
                       "tolerance": args.tolerance, "points": rows}, f, indent=1)
    return 1 if any(r["off"] for r in rows) else 0
