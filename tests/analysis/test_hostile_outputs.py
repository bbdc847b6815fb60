"""Hostile inputs, round three (issue #31, D12-D18): outputs that are an input, a planted symbolic
link or a FIFO; a memory sweep with an oom point; a bad RB_ANALYSIS_CHECK_TIMEOUT_S; policy files
nested too deeply or made of an alias bomb. Each must end in a one-line message and exit 2 (or a
report), never a traceback, a hang or a file written where it must not be.
Run: PYTHONPATH=analysis:tests/analysis python3 -m unittest discover -s tests/analysis -p 'test_hostile_outputs*.py'
"""
import os
import subprocess
import sys
import time
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(__file__))
from tempdir_case import HostileCase, rb_analysis, write_text  # noqa: E402  (first: analysis/ on the path)

import h5py  # noqa: E402
import numpy as np  # noqa: E402

import synthetic  # noqa: E402
from ringbench_analysis import outfile  # noqa: E402


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


class OutputIsAnInputTest(HostileCase):
    """D12: an output option naming an input file is refused before anything is written."""

    def test_json_onto_an_input(self):
        a = synthetic.make_run(self.path("a.h5"), 2)
        b = synthetic.make_run(self.path("b.h5"), 2)
        before = read_bytes(b)
        rc, _, err = rb_analysis("compare", a, b, "--json", b)
        self.assert_message(rc, err, b, "is the input")
        self.assertEqual(read_bytes(b), before)
        os.symlink(a, self.path("alias.h5"))  # the same file by another name
        rc, _, err = rb_analysis("compare", a, b, "--json", self.path("alias.h5"))
        self.assert_message(rc, err, self.path("alias.h5"), "is the input")

    def test_out_onto_an_input(self):
        a = synthetic.make_run(self.path("a.h5"), 2)
        before = read_bytes(a)
        for argv in (["tune-cp", a, "--safety-margin", "1.1", "--out", a],
                     ["tune", a, "--safety-margin", "1.1", "--out", a],
                     ["export", a, "--format", "csv", "--out", a]):
            with self.subTest(command=argv[0]):
                rc, _, err = rb_analysis(*argv)
                self.assert_message(rc, err, a, "is the input")
                self.assertEqual(read_bytes(a), before)


class FullDiskTest(HostileCase):
    """A full disk under stdout (`rb-analysis export ... > /dev/full`): one line saying so, exit 1,
    no traceback and no "Exception ignored" at exit."""

    def test_export_to_a_full_disk(self):
        if not os.path.exists("/dev/full"):
            self.skipTest("no /dev/full here")
        run = synthetic.make_run(self.path("a.h5"), 2)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        with open("/dev/full", "w") as full:
            r = subprocess.run([sys.executable, "-m", "ringbench_analysis", "export", "--format", "csv", run],
                               stdout=full, stderr=subprocess.PIPE, text=True, timeout=120,
                               env=dict(os.environ, PYTHONPATH=os.path.join(root, "analysis")))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        self.assertNotIn("Exception ignored", r.stderr)
        self.assertEqual(r.stderr.strip(), "rb-analysis: could not write standard output: No space left on device")


class PlantedOutputTest(HostileCase):
    """D13, D17: a symbolic link or a FIFO where an output file goes."""

    def test_report_replaces_a_planted_link_not_its_target(self):
        run = synthetic.make_run(self.path("a.h5"), 2)
        victim = write_text(self.path("victim"), "keep me\n")
        rep = self.path("rep")
        os.makedirs(rep)
        os.symlink("../victim", os.path.join(rep, "report.md"))
        rc, _, err = rb_analysis("report", run, "--out", rep)
        self.assertEqual(rc, 0, err)
        self.assertEqual(read_bytes(victim), b"keep me\n")
        self.assertFalse(os.path.islink(os.path.join(rep, "report.md")))
        self.assertIn(b"# ", read_bytes(os.path.join(rep, "report.md")))

    def test_json_to_a_link_replaces_the_link(self):
        run = synthetic.make_run(self.path("a.h5"), 2)
        victim = write_text(self.path("victim"), "keep me\n")
        link = self.path("j.json")
        os.symlink(victim, link)
        rc, _, err = rb_analysis("compare", run, run, "--json", link)
        self.assertEqual(rc, 0, err)
        self.assertEqual(read_bytes(victim), b"keep me\n")
        self.assertFalse(os.path.islink(link))

    def test_fifo_output_is_refused(self):
        run = synthetic.make_run(self.path("a.h5"), 2)
        fifo = self.path("j.json")
        os.mkfifo(fifo)
        rc, _, err = rb_analysis("compare", run, run, "--json", fifo)
        self.assert_message(rc, err, fifo, "is a FIFO, not a regular file")
        rc, _, err = rb_analysis("tune-cp", run, "--safety-margin", "1.1", "--out", fifo)
        self.assert_message(rc, err, fifo, "is a FIFO, not a regular file")

    def test_replacing_keeps_the_umask_mode_and_cleans_up(self):
        path = self.path("x.txt")
        with outfile.replacing(path) as f:
            f.write("x")
        umask = os.umask(0)
        os.umask(umask)
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o666 & ~umask)
        with self.assertRaises(RuntimeError):
            with outfile.replacing(path) as f:
                f.write("half")
                raise RuntimeError("stop")
        self.assertEqual(read_bytes(path), b"x")
        self.assertEqual(os.listdir(self.dir), ["x.txt"])


def oom_memory_run(path):
    """A run with compute and memory sweeps whose first memory point is oom on every rank: its
    bandwidth, moved bytes and iteration times NaN (what ringbench writes for a point not run)."""
    synthetic.make_run(path, 2, collectives=False)
    synthetic.add_profile_sweeps(path)
    with h5py.File(path, "r+") as f:
        g = f["sweeps/memory"]
        status = np.full((2, int(g.attrs["points"])), "ok", dtype=object)
        status[:, 0] = "oom"
        synthetic.dataset(g, "status", status, "1", "metric status", "metric")
        for name in ("bandwidth_Bps", "moved_bytes", "iteration_time_s"):
            data, attrs = g[name][...].astype(float), dict(g[name].attrs)
            data[:, 0] = np.nan
            del g[name]
            d = g.create_dataset(name, data=data)
            for k, v in attrs.items():
                d.attrs[k] = v
    return path


class OomMemoryPointTest(HostileCase):
    """D14: an oom point of a memory sweep is shown as oom, not a NaN-to-int traceback."""

    def test_report_shows_the_oom_point(self):
        run = oom_memory_run(self.path("o.h5"))
        rep = self.path("rep")
        rc, _, err = rb_analysis("report", run, "--out", rep)
        self.assertEqual(rc, 0, err)
        self.assertNotIn("Traceback", err)
        with open(os.path.join(rep, "report.md")) as f:
            md = f.read()
        self.assertIn("| triad | 1 GiB | **oom** |", md)
        self.assertTrue(os.path.exists(os.path.join(rep, "memory_bandwidth.png")))


class CheckTimeoutEnvTest(HostileCase):
    """D16: RB_ANALYSIS_CHECK_TIMEOUT_S that is not a positive number: one line, exit 2."""

    def test_bad_values_are_refused(self):
        run = synthetic.make_run(self.path("a.h5"), 2)
        for value in ("abc", "0", "-1", "nan", "inf"):
            with self.subTest(value=value), mock.patch.dict(os.environ, {"RB_ANALYSIS_CHECK_TIMEOUT_S": value}):
                rc, _, err = rb_analysis("report", run, "--out", self.path("rep"))
                self.assert_message(rc, err, "RB_ANALYSIS_CHECK_TIMEOUT_S", "a positive number of seconds expected")
        with mock.patch.dict(os.environ, {"RB_ANALYSIS_CHECK_TIMEOUT_S": "30"}):
            rc, _, err = rb_analysis("table", run)
            self.assertEqual(rc, 0, err)


def alias_bomb(path):
    """a0: 10 values, a1: 10 x a0, ... a9: 10^10 values once expanded; then `sweeps: []`."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    with open(path, "w") as f:
        f.write("\n".join(lines + ["sweeps: []", ""]))
    return path


def deep(path):
    with open(path, "w") as f:
        f.write("[" * 100000 + "]" * 100000 + "\n")
    return path


class HostileYamlTest(HostileCase):
    """D15, D18: YAML nested 100000 deep, and an alias bomb given to baseline path."""

    def test_compare_tuning_too_deep(self):
        g = deep(self.path("g.yaml"))
        rc, _, err = rb_analysis("compare-tuning", g, g)
        self.assert_message(rc, err, g, "not a tuned kernel policy (YAML nested too deeply)")

    def test_baseline_path_too_deep(self):
        g = deep(self.path("g.yaml"))
        rc, _, err = rb_analysis("baseline", "path", g, "--store", self.path("st"))
        self.assert_message(rc, err, g, "not a ringbench config (nested too deeply)")

    def test_baseline_path_alias_bomb(self):
        bomb = alias_bomb(self.path("bomb.yaml"))
        start = time.monotonic()
        rc, _, err = rb_analysis("baseline", "path", bomb, "--store", self.path("st"))
        self.assertLess(time.monotonic() - start, 2.0)
        self.assert_message(rc, err, bomb, "an alias bomb?")

    def test_shared_aliases_of_a_real_size_pass(self):
        from ringbench_analysis import baseline
        self.assertEqual(baseline._expanded_nodes({"a": [1, 2], "b": [3]}), 8)  # pylint: disable=protected-access
        loop = []
        loop.append(loop)
        self.assertGreater(baseline._expanded_nodes(loop), baseline.MAX_EXPANDED_NODES)  # pylint: disable=protected-access


if __name__ == "__main__":
    unittest.main()
