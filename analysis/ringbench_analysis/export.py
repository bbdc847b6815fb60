"""`rb-analysis export FILE.h5 ... --format jsonl|openmetrics|csv`: every point's headline
values (values.py) with their units and labels, for dashboards and time-series stores.

- jsonl: one JSON object per (file, sweep, point, metric), valid against JSON_SCHEMA;
- openmetrics: one gauge family per (sweep type, metric), named in base units
  (ringbench_ring_attention_total_time_seconds; TFLOP/s exported as FLOP/s), `# TYPE`, `# UNIT`,
  `# HELP` (the file's description and the statistic), escaped label values, `# EOF`;
- csv: one row per value, the labels and point keys as columns (empty where a sweep lacks one).

A value no rank measured (an oom point) is null / NaN / empty, with its status: never left out.
"""
import csv
import io
import json
import math
import os
import re
import sys

from . import outfile, reader, values

FORMAT = "ringbench-export"
VERSION = 1
UNITS = ("s", "B", "B/s", "TFLOP/s", "FLOP", "Hz", "1")  # docs/hdf5-schema.md's unit rule

_SCALAR = {"type": ["string", "number", "integer", "boolean", "null"]}
JSON_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "ringbench export record (rb-analysis export --format jsonl, one per line)",
    "type": "object",
    "additionalProperties": False,
    "required": ["format", "version", "labels", "libraries", "sweep", "sweep_type", "point",
                 "status", "metric", "value", "unit", "statistic", "description"],
    "properties": {
        "format": {"const": FORMAT},
        "version": {"const": VERSION},
        "labels": {
            "type": "object", "additionalProperties": False,
            "required": ["file", "gpu", "host", "backend", "nodes", "ranks", "machine_kind",
                         "ringbench_version", "git_commit", "config_sha256", "start_time", "run_status"],
            "properties": {
                "file": {"type": "string", "minLength": 1}, "gpu": {"type": "string", "minLength": 1},
                "host": {"type": "string"}, "backend": {"type": "string"},
                "nodes": {"type": "integer", "minimum": 0}, "ranks": {"type": "integer", "minimum": 1},
                "machine_kind": {"type": "string", "minLength": 1},
                "ringbench_version": {"type": "string"}, "git_commit": {"type": "string"},
                "config_sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                "start_time": {"type": "string"}, "run_status": {"type": "string"}}},
        "libraries": {"type": "object", "additionalProperties": {"type": "string"}},
        "sweep": {"type": "string", "minLength": 1},
        "sweep_type": {"type": "string", "minLength": 1},
        "point": {"type": "object", "additionalProperties": _SCALAR},
        "status": {"type": "string", "minLength": 1},
        "metric": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
        "value": {"type": ["number", "null"]},
        "unit": {"enum": list(UNITS)},
        "statistic": {"type": "string", "minLength": 1},
        "description": {"type": "string"},
    },
}

# OpenMetrics base units: (name suffix of the family, factor from the file's value).
OM_UNITS = {"s": ("seconds", 1.0), "B": ("bytes", 1.0), "B/s": ("bytes_per_second", 1.0),
            "TFLOP/s": ("flops_per_second", 1e12), "FLOP": ("flops", 1.0), "Hz": ("hertz", 1.0),
            "1": ("", 1.0)}
# The file's unit suffixes (docs/hdf5-schema.md), taken off before the base unit is added.
FILE_SUFFIX = {"s": "_s", "B": "_bytes", "B/s": "_Bps", "TFLOP/s": "_tflops", "FLOP": "_flop", "Hz": "_hz"}
METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


class ExportError(Exception):
    pass


def collect(paths):
    """(records, notes) of every file: each record as the JSON schema has it."""
    files, seen = [], set()
    for f in reader.run_files(paths):
        key = os.path.realpath(f)
        if key not in seen:  # the same file twice would repeat every sample
            seen.add(key)
            files.append(f)
    reader.filecheck.check(files)
    out, notes = [], []
    for path in files:
        run = reader.load(path)
        labels, libs = values.labels(run, path), {k: str(v) for k, v in run.libraries.items()}
        recs, one_rank = values.records(run)
        if one_rank:
            notes.append(f"{path}: {one_rank} collective point(s) of one-rank groups left out "
                         "(a local copy, no link measured)")
        for line in run.problems():
            notes.append(f"{path}: {line}")
        for r in recs:
            rec = dict({"format": FORMAT, "version": VERSION, "labels": labels, "libraries": libs}, **r)
            rec["value"] = r["value"] if math.isfinite(r["value"]) else None
            out.append(rec)
    return out, notes


# ---- JSON Lines ---------------------------------------------------------------------------

def to_jsonl(records):
    return "".join(json.dumps(r, sort_keys=True, allow_nan=False) + "\n" for r in records)


# ---- CSV ----------------------------------------------------------------------------------

def _flat_labels(r):
    """The labels of one record as one flat mapping: run labels, libraries (lib_<name>), the
    sweep, its point keys (prefixed key_ where a key has a run label's name), status."""
    out = dict(r["labels"])
    out.update({f"lib_{k}": v for k, v in r["libraries"].items()})
    out.update(sweep=r["sweep"], sweep_type=r["sweep_type"], status=r["status"])
    for k, v in r["point"].items():
        name = re.sub(r"[^a-zA-Z0-9_]", "_", k)
        out[f"key_{name}" if name in out or not LABEL_NAME.match(name) or name.startswith("__") else name] = v
    return out


def to_csv(records):
    rows = [dict(_flat_labels(r), metric=r["metric"], value="" if r["value"] is None else repr(r["value"]),
                 unit=r["unit"], statistic=r["statistic"]) for r in records]
    head = ["metric", "value", "unit", "statistic"]
    columns = head + list(dict.fromkeys(c for row in rows for c in row if c not in head))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, restval="", lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


# ---- OpenMetrics --------------------------------------------------------------------------

def family_name(sweep_type, metric, unit):
    """ringbench_<sweep type>_<metric without the file's unit suffix>_<base unit>."""
    base = metric
    suffix = FILE_SUFFIX.get(unit)
    if suffix and base.endswith(suffix):
        base = base[:-len(suffix)]
    om_unit = OM_UNITS[unit][0]
    name = re.sub(r"[^a-zA-Z0-9_]", "_", f"ringbench_{sweep_type}_{base}")
    name = f"{name}_{om_unit}" if om_unit else name
    if not METRIC_NAME.match(name):
        raise ExportError(f"cannot name an OpenMetrics family for {sweep_type} {metric}: {name!r}")
    return name


def escape(text):
    """OpenMetrics escaping of a label value or HELP text: backslash, double quote, newline."""
    return str(text).replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def _number(v, factor):
    if v is None:
        return "NaN"
    x = v * factor
    return "+Inf" if x == math.inf else "-Inf" if x == -math.inf else repr(float(x))


def to_openmetrics(records):
    families = {}
    for r in records:
        if r["unit"] not in OM_UNITS:
            raise ExportError(f"{r['sweep']} {r['metric']}: units {r['unit']!r} are not in the unit rule")
        families.setdefault(family_name(r["sweep_type"], r["metric"], r["unit"]), []).append(r)
    lines = []
    for name, recs in families.items():
        om_unit, factor = OM_UNITS[recs[0]["unit"]]
        desc = "; ".join(dict.fromkeys(x["description"] for x in recs if x["description"]))
        help_text = f"{desc} [{recs[0]['statistic']}; file units {recs[0]['unit']}]".strip()
        lines += [f"# TYPE {name} gauge"] + ([f"# UNIT {name} {om_unit}"] if om_unit else [])
        lines.append(f"# HELP {name} {escape(help_text)}")
        seen = set()
        for r in recs:
            labels = _flat_labels(r)
            text = ",".join(f'{k}="{escape(v)}"' for k, v in labels.items())
            if text in seen:
                raise ExportError(f"{name}: two samples with the same labels ({text[:200]})")
            seen.add(text)
            lines.append(f"{name}{{{text}}} {_number(r['value'], factor)}")
    return "\n".join(lines + ["# EOF"]) + "\n"


WRITERS = {"jsonl": to_jsonl, "csv": to_csv, "openmetrics": to_openmetrics}


def command(args):
    """rb-analysis export: exit 0 written, 2 unusable input."""
    try:
        records, notes = collect(args.files)
        text = WRITERS[args.format](records)
    except (reader.RingbenchFileError, ExportError) as e:
        print(f"rb-analysis export: {e}", file=sys.stderr)
        return 2
    if args.out in (None, "-"):
        sys.stdout.write(text)
    else:
        with outfile.replacing(args.out) as f:
            f.write(text)
    for line in notes:
        print(f"note: {line}", file=sys.stderr)
    if args.out not in (None, "-"):
        print(f"export: {len(records)} value(s) as {args.format} to {args.out}", file=sys.stderr)
    return 0
