"""Tests of `rb-analysis export` (values.py, export.py) on a synthetic file with known numbers:
each exported value, unit and label is checked against what the file's model says, in JSON Lines
(against the JSON Schema, with python3-jsonschema), OpenMetrics (its format rules by hand, and
python3-prometheus-client's OpenMetrics parser where installed) and CSV.
Run: PYTHONPATH=analysis python3 -m unittest tests/analysis/test_export.py
"""
import contextlib
import csv
import hashlib
import io
import json
import math
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from tempdir_case import TempDirCase, rb_analysis  # noqa: E402  (first: analysis/ on the path, skip without h5py)

import h5py  # noqa: E402
import numpy as np  # noqa: E402

import synthetic  # noqa: E402
from ringbench_analysis import export, report  # noqa: E402

try:
    import jsonschema
except ImportError:  # Debian: python3-jsonschema
    jsonschema = None
try:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
except ImportError:  # Debian: python3-prometheus-client
    text_string_to_metric_families = None

GPU = "NVIDIA H100 80GB HBM3"
ENGINE = 'kokkos "host" \\ x\ny'  # a key value that needs every OpenMetrics escape
CONFIG_SHA = hashlib.sha256(json.dumps({"backend": "host"}, sort_keys=True,
                                       separators=(",", ":")).encode()).hexdigest()


def make_file(path):
    """make_run (2 ranks, rank 1 a 30 % straggler, S=2048 oom) + compute and memory sweeps, a
    GPU name, the intra_node collectives made one-rank groups, rank 1's ping-pong half as fast."""
    synthetic.make_run(path, 2, seq_lens=(1024, 2048), bad_points={(2048, 2): "oom"}, straggler=1)
    with h5py.File(path, "r+") as f:
        del f["ranks/gpu_name"]
        synthetic.dataset(f["ranks"], "gpu_name", [GPU, GPU], "1", "gpu", "key")
        coll = f["sweeps/coll"]
        intra = np.array([g == b"intra_node" for g in coll["points/group"][()]])
        gs = coll["group_size"][()]
        gs[:, intra] = 1
        coll["group_size"][...] = gs
        bw = f["sweeps/pingpong/bandwidth_Bps"][()]
        bw[1] *= 0.5
        f["sweeps/pingpong/bandwidth_Bps"][...] = bw
        comp = synthetic._sweep(f["sweeps"], "gemm", "compute")
        synthetic.points_table(comp, {"operation": (["gemm"], "1"), "engine": ([ENGINE], "1"),
                                      "dtype": (["fp32"], "1"), "size": ([256], "1")},
                               {"rate_tflops": (np.array([[1.0], [0.8]]), "TFLOP/s"),
                                "iteration_time_s": (np.full((2, 1, 3), 0.01), "s")})
        mem = synthetic._sweep(f["sweeps"], "mem", "memory")
        synthetic.points_table(mem, {"kind": (["triad"], "1"), "size_bytes": ([1 << 20], "B")},
                               {"bandwidth_Bps": (np.array([[5e9], [4e9]]), "B/s")})
    return path


def ring_expected(seq_len, ring_size):
    """(total time, TFLOP/s per GPU) of a ring point from synthetic's model: each rank's median
    is 3 x ring_size x max(c, t); rank 1 is 1.3 x slower; forward FLOPs 4 d (S/R) S."""
    c, t, _ = synthetic.step_model(seq_len, ring_size)
    slowest = 3 * ring_size * max(c, t) * 1.3
    flop = 4.0 * 16 * (seq_len / ring_size) * seq_len
    return slowest, 3.5 * flop / slowest / 1e12


def run_cli(*args):
    return rb_analysis("export", *args)


class Base(TempDirCase):
    def setUp(self):
        super().setUp()
        self.h5 = make_file(self.path("run.h5"))

    def export(self, fmt):
        rc, out, err = run_cli(self.h5, "--format", fmt)
        self.assertEqual(rc, 0, err)
        return out, err

    def jsonl(self):
        return [json.loads(x) for x in self.export("jsonl")[0].splitlines()]

    @staticmethod
    def find(records, sweep, metric, **keys):
        got = [r for r in records if r["sweep"] == sweep and r["metric"] == metric
               and all(r["point"].get(k) == v for k, v in keys.items())]
        assert len(got) == 1, (sweep, metric, keys, len(got))
        return got[0]


class ValuesTest(Base):
    def test_every_value_and_unit(self):
        recs = self.jsonl()
        t, tf = ring_expected(1024, 2)
        r = self.find(recs, "ring", "total_time_s", seq_len=1024)
        self.assertAlmostEqual(r["value"], t, delta=1e-12 * t)   # the straggler's median: max over ranks
        self.assertEqual((r["unit"], r["status"]), ("s", "ok"))
        self.assertEqual(r["statistic"], "median over iterations, max over ranks")
        r = self.find(recs, "ring", "total_tflops", seq_len=1024)
        self.assertAlmostEqual(r["value"], tf, delta=1e-9 * tf)
        self.assertEqual(r["unit"], "TFLOP/s")
        size = 65536
        r = self.find(recs, "pingpong", "one_way_time_s", message_size_bytes=size)
        one_way = synthetic.ALPHA + size / synthetic.BETA
        self.assertAlmostEqual(r["value"], one_way, delta=1e-15)
        r = self.find(recs, "pingpong", "bandwidth_Bps", message_size_bytes=size)
        self.assertAlmostEqual(r["value"], 0.5 * size / one_way, delta=1e-3)  # min over ranks
        self.assertEqual((r["unit"], r["statistic"]), ("B/s", "min over ranks"))
        r = self.find(recs, "coll", "busbw_Bps", operation="all_reduce", group="world",
                      message_size_bytes=1048576)
        self.assertAlmostEqual(r["value"], 1048576 / (synthetic.ALPHA + 1048576 / synthetic.BETA), delta=1e-3)
        r = self.find(recs, "p2p", "bandwidth_Bps", sender=1, receiver=0)
        self.assertAlmostEqual(r["value"], synthetic.BETA * 1.01, delta=1e-3)
        self.assertEqual(self.find(recs, "p2p", "latency_s", sender=0, receiver=1)["unit"], "s")
        self.assertEqual(self.find(recs, "gemm", "rate_tflops")["value"], 0.8)
        self.assertEqual(self.find(recs, "mem", "bandwidth_Bps")["value"], 4e9)

    def test_oom_point_is_kept_with_no_value(self):
        r = self.find(self.jsonl(), "ring", "total_time_s", seq_len=2048)
        self.assertIsNone(r["value"])
        self.assertEqual(r["status"], "oom")

    def test_ring_rate_is_the_reports(self):
        out = self.path("rep")
        with contextlib.redirect_stdout(io.StringIO()):
            summary = report.build([self.h5], out)
        ours = self.find(self.jsonl(), "ring", "total_tflops", seq_len=1024)["value"]
        theirs = [p for p in summary["points"] if p["seq_len"] == 1024][0]["tflops_total"]
        self.assertAlmostEqual(ours, theirs, delta=1e-12 * theirs)

    def test_one_rank_groups_left_out_and_said(self):
        recs = self.jsonl()
        self.assertEqual({r["point"]["group"] for r in recs if r["sweep"] == "coll"}, {"world"})
        _, err = self.export("jsonl")
        self.assertIn("6 collective point(s) of one-rank groups left out", err)

    def test_labels(self):
        r = self.find(self.jsonl(), "mem", "bandwidth_Bps")
        self.assertEqual(r["labels"], {
            "file": "run.h5", "gpu": GPU, "host": "node0", "backend": "host", "nodes": 1, "ranks": 2,
            "machine_kind": f"NVIDIA_H100_80GB_HBM3_1n_{CONFIG_SHA[:12]}", "ringbench_version": "0.2.0",
            "git_commit": "abc123", "config_sha256": CONFIG_SHA, "start_time": "2026-11-22T12:00:00Z",
            "run_status": "complete"})
        self.assertEqual((r["sweep"], r["sweep_type"], r["point"]),
                         ("mem", "memory", {"kind": "triad", "size_bytes": 1 << 20}))


class JsonSchemaTest(Base):
    @unittest.skipIf(jsonschema is None, "python3-jsonschema is not installed")
    def test_every_line_valid_and_the_schema_strict(self):
        v = jsonschema.Draft7Validator(export.JSON_SCHEMA)
        recs = self.jsonl()
        self.assertEqual(len(recs), 2 * 2 + 2 * 3 + 6 + 2 * 2 + 1 + 1)
        for r in recs:
            v.validate(r)
        bad = [dict(recs[0], unit="GB/s"), dict(recs[0], value="1.0"),
               dict(recs[0], labels=dict(recs[0]["labels"], config_sha256="x")), dict(recs[0], extra=1)]
        for b in bad:
            self.assertFalse(v.is_valid(b), b)


FAMILY = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*",?)*)\} (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')


def unescape(v):
    return re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), v)


class OpenMetricsTest(Base):
    def samples(self):
        """{family: [(labels, value)]} read by hand, checking the format rules on the way."""
        text = self.export("openmetrics")[0]
        lines = text.split("\n")
        self.assertEqual(lines[-2:], ["# EOF", ""])
        fams, order, current = {}, {}, None
        for line in lines[:-2]:
            if line.startswith("# "):
                kind, name, *rest = line[2:].split(" ", 2)
                self.assertRegex(name, FAMILY)
                if kind == "TYPE":
                    self.assertNotIn(name, fams, "a family must be contiguous")
                    fams[name], order[name], current = [], [], name
                    self.assertEqual(rest, ["gauge"])
                self.assertEqual(name, current)
                order[name].append(kind)
                if kind == "UNIT":
                    self.assertTrue(name.endswith("_" + rest[0]), line)
                continue
            m = SAMPLE.match(line)
            self.assertIsNotNone(m, line)
            self.assertEqual(m.group(1), current)
            labels = {k: unescape(v) for k, v in LABEL.findall(m.group(2))}
            fams[current].append((labels, float(m.group(3))))
        for name, kinds in order.items():
            self.assertEqual([k for k in kinds if k != "UNIT"], ["TYPE", "HELP"], name)
        return fams, text

    def test_names_units_values_and_escaping(self):
        fams, _ = self.samples()
        t, tf = ring_expected(1024, 2)
        ring = {s[0]["seq_len"]: s[1] for s in fams["ringbench_ring_attention_total_time_seconds"]}
        self.assertAlmostEqual(ring["1024"], t, delta=1e-12 * t)
        self.assertTrue(math.isnan(ring["2048"]))
        rate = fams["ringbench_ring_attention_total_flops_per_second"]
        self.assertAlmostEqual([v for lab, v in rate if lab["seq_len"] == "1024"][0], tf * 1e12, delta=1e-9 * tf * 1e12)
        (labels, v), = fams["ringbench_compute_rate_flops_per_second"]
        self.assertEqual(v, 0.8e12)
        self.assertEqual(labels["engine"], ENGINE)
        self.assertEqual((labels["gpu"], labels["git_commit"], labels["config_sha256"], labels["sweep"]),
                         (GPU, "abc123", CONFIG_SHA, "gemm"))
        self.assertIn("ringbench_p2p_matrix_latency_seconds", fams)
        self.assertIn("ringbench_memory_bandwidth_bytes_per_second", fams)

    @unittest.skipIf(text_string_to_metric_families is None, "python3-prometheus-client is not installed")
    def test_the_openmetrics_parser_reads_it(self):
        _, text = self.samples()
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        f = fams["ringbench_compute_rate_flops_per_second"]  # the parser drops no suffix: a gauge
        self.assertEqual((f.type, f.unit), ("gauge", "flops_per_second"))
        self.assertEqual(f.samples[0].labels["engine"], ENGINE)
        self.assertEqual(f.samples[0].value, 0.8e12)
        self.assertEqual(fams["ringbench_ring_attention_total_time_seconds"].unit, "seconds")
        self.assertIn("max over ranks", fams["ringbench_ring_attention_total_time_seconds"].documentation)


class CsvTest(Base):
    def test_rows(self):
        rows = list(csv.DictReader(io.StringIO(self.export("csv")[0])))
        self.assertEqual(len(rows), len(self.jsonl()))
        row = [r for r in rows if r["sweep"] == "ring" and r["metric"] == "total_time_s"
               and r["seq_len"] == "2048"][0]
        self.assertEqual((row["value"], row["status"], row["unit"]), ("", "oom", "s"))
        row = [r for r in rows if r["sweep"] == "gemm"][0]
        self.assertEqual((float(row["value"]), row["unit"], row["engine"], row["gpu"], row["seq_len"]),
                         (0.8, "TFLOP/s", ENGINE, GPU, ""))


class CliTest(Base):
    def test_out_file_and_errors(self):
        out = self.path("x.om")
        rc, stdout, err = run_cli(self.h5, "--format", "openmetrics", "--out", out)
        self.assertEqual((rc, stdout), (0, ""))
        with open(out) as f:
            self.assertTrue(f.read().endswith("# EOF\n"))
        rc, _, err = run_cli(self.path("missing.h5"), "--format", "csv")
        self.assertEqual(rc, 2)
        self.assertIn("missing.h5: no such file", err)
        rc, _, err = run_cli(self.h5, "--format", "csv", "--out", self.path("no/dir/x.csv"))
        self.assertEqual(rc, 2)
        self.assertIn("--out", err)

    def test_same_file_twice_is_exported_once(self):
        _, out, _ = run_cli(self.h5, self.h5, "--format", "jsonl")
        self.assertEqual(len(out.splitlines()), len(self.jsonl()))


if __name__ == "__main__":
    unittest.main()
