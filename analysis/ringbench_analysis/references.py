"""Absolute reference values per machine kind (ReFrame-style), checked by `compare --reference`.

A baseline says "no worse than last time"; a reference says "what this GPU should do": a slow
drift that every nightly lets through still fails its bounds. The file (YAML, or JSON):

    version: 1
    kind: ringbench-reference
    references:
      NVIDIA H100 80GB HBM3:                  # rank 0's /ranks/gpu_name; "host" on the host path
        - sweep: ring
          point: {seq_len: 65536, ring_size: 4}   # keys selecting the points (each match is checked)
          metric: total_time_s
          reference: [0.0812, null, 0.10, s]      # value, lower, upper (fractions), unit

`reference` is ReFrame's tuple: the bounds are value x (1 + lower) and value x (1 + upper),
lower <= 0 <= upper, null for no bound; the unit must be the dataset's `units`. A point's value
is values.value (the slowest rank's median, as the report and export). A point outside its
bounds, not measured, or an entry that matches no point is a failure naming the file, the GPU
key, the entry and the bound.
"""
import math

import numpy as np

from . import values

KIND = "ringbench-reference"


class ReferenceFileError(Exception):
    """A reference file that cannot be used (missing, not YAML, invalid entry)."""


def _entry_error(path, where, what):
    return ReferenceFileError(f"{path}: {where}: {what}")


def _check_tuple(path, where, ref):
    if not (isinstance(ref, (list, tuple)) and len(ref) == 4):
        raise _entry_error(path, where, f"reference must be [value, lower, upper, unit], got {ref!r}")
    value, lo, hi, unit = ref
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _entry_error(path, where, f"reference value {value!r} is not a finite number")
    for name, b, sign in (("lower", lo, -1), ("upper", hi, 1)):
        if b is None:
            continue
        if isinstance(b, bool) or not isinstance(b, (int, float)) or not math.isfinite(b) or b * sign < 0:
            raise _entry_error(path, where, f"{name} bound {b!r} must be a fraction "
                               f"{'<= 0' if sign < 0 else '>= 0'} (e.g. {sign * 0.1:+g}) or null")
    if not isinstance(unit, str) or not unit:
        raise _entry_error(path, where, f"unit {unit!r} must be the dataset's units text (s, B/s, TFLOP/s, ...)")


def _check_entry(path, gpu, i, e):
    where = f"references.{gpu!r}[{i}]"
    if not isinstance(e, dict):
        raise _entry_error(path, where, "an entry must be a mapping with sweep, point, metric, reference")
    missing = [k for k in ("sweep", "metric", "reference") if k not in e]
    unknown = [k for k in e if k not in ("sweep", "point", "metric", "reference")]
    if missing or unknown:
        raise _entry_error(path, where, (f"missing {', '.join(missing)}" if missing else "")
                           + ("; " if missing and unknown else "")
                           + (f"unknown key(s) {', '.join(unknown)}" if unknown else ""))
    if not isinstance(e.get("point", {}), dict):
        raise _entry_error(path, where, "point must be a mapping of point keys to values")
    _check_tuple(path, where, e["reference"])


def load(path):
    """The validated file as {gpu: [entry]}."""
    try:
        import yaml
        with open(path) as f:
            doc = yaml.safe_load(f)
    except OSError as e:
        raise ReferenceFileError(f"{path}: {e.strerror or e}")
    except ImportError:
        raise ReferenceFileError(f"{path}: reading a reference file needs PyYAML (Debian: python3-yaml)")
    except yaml.YAMLError as e:
        raise ReferenceFileError(f"{path}: not YAML: {e}")
    except RecursionError:
        raise ReferenceFileError(f"{path}: not a reference file (YAML nested too deeply)") from None
    if not isinstance(doc, dict) or doc.get("kind") != KIND or doc.get("version") != 1:
        raise ReferenceFileError(f"{path}: not a reference file (needs kind: {KIND} and version: 1)")
    refs = doc.get("references")
    if not isinstance(refs, dict) or not refs:
        raise ReferenceFileError(f"{path}: references: a mapping of GPU model to a list of entries is needed")
    for gpu, entries in refs.items():
        if not isinstance(entries, list):
            raise _entry_error(path, f"references.{gpu!r}", "must be a list of entries")
        for i, e in enumerate(entries):
            _check_entry(path, gpu, i, e)
    return {str(k): v for k, v in refs.items()}


def _same(a, b):
    """A point key's value against the entry's: numbers by value, the rest as text."""
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a) == str(b)


def _matches(sweep, want):
    return [p for p in range(sweep.npoints)
            if all(k in sweep.points and _same(sweep.points[k].iloc[p], v) for k, v in want.items())]


def _fmt(x, unit):
    return f"{x:.4g} {unit}" if unit != "1" else f"{x:.4g}"


def _judge(value, ref):
    """(ok, why) of one value against [value, lower, upper, unit]."""
    v0, lo, hi, unit = ref
    if not math.isfinite(value):
        return False, "not measured"
    if lo is not None and value < v0 * (1 + lo):
        return False, (f"{_fmt(value, unit)} below the lower bound {_fmt(v0 * (1 + lo), unit)} "
                       f"(reference {_fmt(v0, unit)} {lo:+.0%})")
    if hi is not None and value > v0 * (1 + hi):
        return False, (f"{_fmt(value, unit)} above the upper bound {_fmt(v0 * (1 + hi), unit)} "
                       f"(reference {_fmt(v0, unit)} {hi:+.0%})")
    bounds = ", ".join(_fmt(v0 * (1 + b), unit) if b is not None else "-" for b in (lo, hi))
    return True, f"{_fmt(value, unit)} within [{bounds}]"


def _entry_rows(path, gpu, i, e, run):
    """One row per point the entry selects; a failure row when it selects none."""
    where = f"{path}: {gpu!r}[{i}]"
    want = e.get("point") or {}
    what = f"{e['sweep']} {','.join(f'{k}={v}' for k, v in want.items()) or '(every point)'} {e['metric']}"
    row = {"file": path, "gpu": gpu, "entry": i, "sweep": e["sweep"], "metric": e["metric"],
           "reference": list(e["reference"])}
    sweep = run.sweeps.get(e["sweep"])
    if sweep is None:
        return [dict(row, point=want, ok=False, why=f"{where} {what}: NEW has no sweep '{e['sweep']}'")]
    if e["metric"] not in values.headline_metrics(sweep) and e["metric"] not in sweep.metrics:
        raise ReferenceFileError(f"{where}: sweep '{sweep.name}' has no metric '{e['metric']}' "
                             f"(it has: {', '.join(sorted(sweep.metrics))})")
    unit = values.unit(sweep, e["metric"])
    if unit != e["reference"][3]:
        raise ReferenceFileError(f"{where}: unit {e['reference'][3]!r} of {e['metric']}, the file's is {unit!r}")
    found = _matches(sweep, want)
    if not found:
        return [dict(row, point=want, ok=False, why=f"{where} {what}: no point of NEW matches")]
    out = []
    # The entry's keys, then those that tell its matches apart (a partial selection matches several).
    shown = list(want) + [k for k in sweep.keys if k not in want and k != "label" and sweep.points[k].nunique() > 1]
    for p in found:
        keys = values.point_keys(sweep, p)
        v = values.value(sweep, e["metric"], p)
        ok, why = _judge(v, e["reference"])
        if not math.isfinite(v):
            why += f" (status {sweep.point_status(p)})"
        label = ",".join(f"{k}={keys[k]}" for k in shown) or f"point {p}"
        out.append(dict(row, point=keys, value=None if not np.isfinite(v) else v, ok=ok,
                        why=f"{where} {e['sweep']} {label} {e['metric']}: {why}"))
    return out


def check(path, run):
    """{file, gpu, rows, failures, note} of NEW's values against the file's entries for its GPU."""
    refs = load(path)
    gpu = values.gpu_model(run)
    doc = {"file": path, "gpu": gpu, "rows": [], "failures": 0, "note": ""}
    if gpu not in refs:
        doc["note"] = (f"reference {path}: no entry for GPU {gpu!r} (it has: {', '.join(map(repr, refs))}): "
                       "nothing checked")
        return doc
    for i, e in enumerate(refs[gpu]):
        doc["rows"] += _entry_rows(path, gpu, i, e, run)
    doc["failures"] = sum(1 for r in doc["rows"] if not r["ok"])
    return doc


def lines(doc):
    """The text compare prints before its verdict: a summary, then each failure."""
    if not doc:
        return []
    if doc["note"]:
        return [f"note: {doc['note']}"]
    out = [f"reference {doc['file']} ({doc['gpu']}): {len(doc['rows'])} value(s) checked, "
           f"{doc['failures']} outside their bounds"]
    return out + [f"REFERENCE FAIL: {r['why']}" for r in doc["rows"] if not r["ok"]]
