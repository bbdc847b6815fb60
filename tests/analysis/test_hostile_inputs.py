"""Hostile inputs and faults, round two (issue #31, analysis items 12-15): damaged files that
crash or hang the HDF5 library (filecheck.py), compare against a killed run, promoting an
unfinished run, and output paths that cannot be written. Each case must end in a one-line
message naming the path and a defined exit code, never a traceback or a dead process.
Run: PYTHONPATH=analysis python3 -m unittest discover -s tests/analysis -p 'test_*.py'
"""
import json
import os
import random
import shutil
import stat
import struct
import subprocess
import sys
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(__file__))
from tempdir_case import HostileCase, rb_analysis  # noqa: E402  (first: analysis/ on the path, skip without h5py)

import h5py  # noqa: E402
import numpy as np  # noqa: E402

import synthetic  # noqa: E402
from ringbench_analysis import baseline, filecheck, reader  # noqa: E402

ANALYSIS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "analysis")
UNREADABLE = "not a readable ringbench output ("
SUPERBLOCK_V0_EOF = 0x28  # byte offset of the end-of-file address in a version 0 superblock


def run_cli(*argv):
    """(exit code, stdout, stderr) of rb-analysis in a process of its own, for files that
    killed the process inside HDF5 before the fix: that must fail the test, not the test run."""
    env = dict(os.environ, PYTHONPATH=os.path.abspath(ANALYSIS))
    r = subprocess.run([sys.executable, "-m", "ringbench_analysis"] + list(argv), env=env,
                       capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout, r.stderr


def in_process(*argv):
    """rb_analysis, for files that cannot crash rb-analysis."""
    return rb_analysis(*argv)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


class DamagedFileTest(HostileCase):
    """Item 12: report, compare, table and baseline on files HDF5 cannot read."""

    def good(self, name="good.h5"):
        return synthetic.make_run(self.path(name), 2)

    def assert_unreadable(self, bad, text=UNREADABLE, runner=in_process):
        """Each command that opens a run file, on `bad`: exit 2 and one line."""
        good = self.good()
        for argv in (["report", bad, "--out", self.path("rep")], ["compare", good, bad],
                     ["compare", bad, good], ["table", bad],
                     ["baseline", "promote", bad, "--store", self.path("store")],
                     ["baseline", "path", bad, "--store", self.path("store")]):
            with self.subTest(argv=argv[0:2]):
                rc, _, err = runner(*argv)
                self.assert_message(rc, err, bad, text)

    def test_truncated_copy(self):
        data = read_bytes(self.good("src.h5"))
        cut = write_bytes(self.path("cut.h5"), data[:len(data) // 2])
        self.assert_unreadable(cut)
        # The same copy with its superblock's end of file set to the cut: HDF5 opens it and
        # then reads past the end (a traceback before).
        if data[8] == 0:  # superblock version 0, as h5py and ringbench write
            fixed = write_bytes(self.path("cut_eof.h5"), data[:SUPERBLOCK_V0_EOF] + struct.pack("<Q", 1000)
                                + data[SUPERBLOCK_V0_EOF + 8:1000])
            self.assert_unreadable(fixed)

    def test_random_bytes_after_the_signature(self):
        bad = write_bytes(self.path("random.h5"), filecheck.SIGNATURE + random.Random(31).randbytes(64 << 10))
        self.assert_unreadable(bad)

    def test_zero_byte_file(self):
        empty = self.path("empty.h5")
        open(empty, "w").close()
        self.assert_unreadable(empty, "empty file (0 bytes)")

    def test_header_that_crashes_hdf5(self):
        """An attribute whose stored name length is 59 KiB: HDF5 1.10 reads past its buffer
        and dies of SIGSEGV (other releases may refuse it): a message either way."""
        data = bytearray(read_bytes(self.good("src.h5")))
        name = b"schema_version\0"
        at = data.find(name)
        self.assertEqual(data[at - 6:at - 4], bytes([len(name), 0]))  # attribute message v1
        data[at - 5] = 0xE9
        bad = write_bytes(self.path("bad.h5"), bytes(data))
        probe = subprocess.run([sys.executable, "-c", "import h5py, sys; "
                                "dict(h5py.File(sys.argv[1], 'r')['run'].attrs)", bad],
                               capture_output=True)
        self.assert_unreadable(bad, filecheck.CRASHED if probe.returncode < 0 else UNREADABLE, run_cli)

    def test_every_run_file_of_compare_is_checked(self):
        good = self.good()
        empty = self.path("empty.h5")
        open(empty, "w").close()
        for flag in ("--base-repeat", "--new-repeat", "--history"):
            with self.subTest(flag=flag):
                rc, _, err = in_process("compare", good, good, flag, empty)
                self.assert_message(rc, err, empty, "empty file (0 bytes)")


# Stand-ins for the checking process: they read a request and answer as a dying walk would.
CRASH = ("import json, os, signal, sys; sys.stdin.readline(); "
         "print(json.dumps(['start', 0]), flush=True); os.kill(os.getpid(), signal.SIGSEGV)")
HANG = ("import json, sys, time; sys.stdin.readline(); "
        "print(json.dumps(['start', 0]), flush=True); time.sleep(60)")
# The first request's walk dies inside sweep 'ring'; the one that leaves it out gets the real walk.
CRASH_IN_RING = """import itertools, json, os, runpy, signal, sys
line = sys.stdin.readline()
if not json.loads(line)[0][1]:
    print(json.dumps(['start', 0]), flush=True)
    print(json.dumps(['sweep', 0, 'ring']), flush=True)
    os.kill(os.getpid(), signal.SIGSEGV)
runpy.run_path(sys.argv[1])['_serve'](itertools.chain([line], iter(sys.stdin.readline, '')))
"""


class CheckingProcessTest(HostileCase):
    """Item 12, the checking process itself: its death, its hang, a sweep it dies in, and
    that it starts once for many files and walks each file once."""

    def test_a_crash_is_a_message(self):
        p = synthetic.make_run(self.path("r.h5"), 2)
        with mock.patch.object(filecheck, "_CHILD", CRASH):
            with self.assertRaises(reader.RingbenchFileError) as ctx:
                reader.load(p)
        self.assertEqual(str(ctx.exception), f"{p}: {UNREADABLE}{filecheck.CRASHED})")

    def test_a_hang_is_a_message(self):
        p = synthetic.make_run(self.path("r.h5"), 2)
        with mock.patch.object(filecheck, "_CHILD", HANG), \
                mock.patch.object(filecheck, "CHECK_TIMEOUT_S", 0.5):
            with self.assertRaisesRegex(reader.RingbenchFileError,
                                        "did not finish reading its metadata in 0.5 s"):
                reader.load(p)

    def test_a_crash_inside_a_sweep_leaves_only_that_sweep_out(self):
        p = synthetic.make_run(self.path("r.h5"), 2)
        with mock.patch.object(filecheck, "_CHILD", CRASH_IN_RING):
            run = reader.load(p)
        self.assertEqual(run.unreadable, {"ring": filecheck.CRASHED})
        self.assertEqual(sorted(run.sweeps), ["coll", "p2p", "pingpong"])
        self.assertIn(f"sweep 'ring' unreadable: {filecheck.CRASHED}", run.problems())

    def test_one_process_and_one_walk_per_file(self):
        paths = [synthetic.make_run(self.path(f"r{i}.h5"), 2) for i in range(3)]
        with mock.patch.object(filecheck, "_spawn", wraps=filecheck._spawn) as spawn, \
                mock.patch.object(filecheck._CHECKER, "walk", wraps=filecheck._CHECKER.walk) as walk:
            reader.load_many(paths)
            reader.load(paths[0])
            self.assertEqual((spawn.call_count, walk.call_count), (1, 1))
            with h5py.File(paths[0], "r+") as f:  # a file changed since is walked again
                f["run"].attrs["node_count"] = np.int64(1)
            os.utime(paths[0], ns=(0, 0))
            reader.load(paths[0])
            self.assertEqual((spawn.call_count, walk.call_count), (1, 2))
        filecheck.stop()
        filecheck._passed.clear()
        with mock.patch.object(filecheck, "_CHILD", CRASH):
            self.assertRaises(reader.RingbenchFileError, reader.load, paths[1])
        self.assertEqual(sorted(reader.load(paths[1]).sweeps), ["coll", "p2p", "pingpong", "ring"],
                         "the next check starts a new checking process")


class CompareIncompleteTest(HostileCase):
    """Item 13: compare BASE against a NEW that did not finish or lacks what BASE measured."""

    def compare(self, base, new, *extra):
        return in_process("compare", base, new, "--run-noise", "0", "--min-bytes", "0", *extra)

    def test_killed_run_fails_and_names_what_is_missing(self):
        base = synthetic.make_run(self.path("base.h5"), 2)
        killed = synthetic.make_run(self.path("killed.h5"), 2, status="running",
                                    sweep_status={"ring": "running"})
        rc, out, err = self.compare(base, killed)
        self.assertEqual(rc, 1, err)
        self.assertEqual(err, "")
        self.assertIn("NEW is incomplete: run status 'running' (killed, timed out or crashed?)", out)
        self.assertIn("NEW is incomplete: sweep 'ring' (ring_attention) status 'running'", out)
        last = out.strip().splitlines()[-1]
        self.assertTrue(last.startswith("FAIL: NEW is incomplete (2 line(s) above)"), last)
        self.assertNotIn("OK:", out)
        self.assertRegex(out, r"verdicts: .*; NEW incomplete: 2")
        rc, out, _ = self.compare(base, killed, "--json")
        doc = json.loads(out)
        self.assertEqual((rc, doc["exit_code"]), (1, 1))
        self.assertEqual(len(doc["incomplete"]), 2)

    def test_missing_sweep_fails(self):
        base = synthetic.make_run(self.path("base.h5"), 2)
        new = synthetic.make_run(self.path("new.h5"), 2, drop_ring=True)
        rc, out, _ = self.compare(base, new)
        self.assertEqual(rc, 1)
        self.assertIn("NEW is incomplete: sweep 'ring' (ring_attention) is missing (BASE has it)", out)

    def test_missing_verdict_data_fails(self):
        base = synthetic.make_run(self.path("base.h5"), 2)
        new = synthetic.make_run(self.path("new.h5"), 2)
        with h5py.File(new, "r+") as f:
            f["sweeps/ring/total_time_s"][:, 1] = np.nan  # seq_len 2048 never measured
        rc, out, _ = self.compare(base, new)
        self.assertEqual(rc, 1)
        self.assertIn("NEW is incomplete: sweep 'ring': total_time_s not measured at 1 point(s) "
                      "BASE measured: seq_len=2048", out)
        with h5py.File(new, "r+") as f:
            del f["sweeps/ring/total_time_s"]
        rc, out, _ = self.compare(base, new)
        self.assertEqual(rc, 1)
        self.assertIn("NEW is incomplete: sweep 'ring' has no total_time_s (BASE has it)", out)

    def test_incomplete_base_is_a_note(self):
        killed = synthetic.make_run(self.path("killed.h5"), 2, status="running")
        new = synthetic.make_run(self.path("new.h5"), 2)
        rc, out, _ = self.compare(killed, new)
        self.assertEqual(rc, 0, out)
        self.assertIn("note: base: run status is 'running'", out)
        self.assertNotIn("NEW is incomplete", out)


class PromoteUnfinishedTest(HostileCase):
    """Item 14: an unfinished run is never the baseline (nor a history night)."""

    def test_promote_and_record_refuse_an_unfinished_run(self):
        store = self.path("store")
        killed = synthetic.make_run(self.path("killed.h5"), 2, status="running")
        for action, role in (("promote", "the baseline"), ("record", "a history night")):
            with self.subTest(action=action):
                rc, _, err = in_process("baseline", action, killed, "--store", store)
                self.assert_message(rc, err, killed, f"run status 'running' (killed, timed out or "
                                                     f"crashed?): only a complete run can be {role}")
        self.assertEqual(baseline.read_index(store), {})
        failed = synthetic.make_run(self.path("failed.h5"), 2, status="failed")
        rc, _, err = in_process("baseline", "promote", failed, "--store", store)
        self.assert_message(rc, err, failed, "run status 'failed': ring: parity")
        torn = synthetic.make_run(self.path("torn.h5"), 2, sweep_status={"ring": "running"})
        rc, _, err = in_process("baseline", "promote", torn, "--store", store)
        self.assert_message(rc, err, torn, "sweep 'ring' status 'running'")
        done = synthetic.make_run(self.path("done.h5"), 2)
        self.assertEqual(in_process("baseline", "promote", done, "--store", store)[0], 0)


def read_only_dir(path):
    """A directory this process cannot write: mode 0555, and for root (whom modes do not stop)
    the immutable flag. None where neither holds (the test is then skipped)."""
    os.makedirs(path)
    os.chmod(path, stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    if os.geteuid() == 0 and shutil.which("chattr"):
        subprocess.run(["chattr", "+i", path], capture_output=True)
    try:
        open(os.path.join(path, "probe"), "w").close()
    except OSError:
        return path
    os.unlink(os.path.join(path, "probe"))
    return None


class OutputPathTest(HostileCase):
    """Item 15: --out and --store where a file is, or where nothing can be written."""

    def tearDown(self):
        for d in getattr(self, "locked", []):
            subprocess.run(["chattr", "-i", d], capture_output=True)
            os.chmod(d, stat.S_IRWXU)
        super().tearDown()

    def locked_dir(self, name):
        d = read_only_dir(self.path(name))
        self.locked = getattr(self, "locked", []) + [self.path(name)]
        if d is None:
            self.skipTest("no directory this process cannot write (root without chattr?)")
        return d

    def test_report_out_is_a_file(self):
        run = synthetic.make_run(self.path("r.h5"), 2)
        taken = self.path("taken")
        open(taken, "w").close()
        rc, _, err = in_process("report", run, "--out", taken)
        self.assert_message(rc, err, taken, "is a file, not a directory")
        rc, _, err = in_process("report", run, "--out", os.path.join(taken, "sub"))
        self.assert_message(rc, err, os.path.join(taken, "sub"), "cannot write there (Not a directory)")

    def test_output_files_checked_before_reading(self):
        # --json FILE and tune/tune-cp --out: a folder that is missing, a directory at the path.
        run = synthetic.make_run(self.path("r.h5"), 2)
        gone = os.path.join(self.path("missing"), "x.json")
        rc, _, err = in_process("compare", run, run, "--json", gone)
        self.assert_message(rc, err, gone, "no folder")
        rc, _, err = in_process("tune-cp", run, "--safety-margin", "0.05", "--out", self.dir)
        self.assert_message(rc, err, self.dir, "is a directory, not a file")
        rc, _, err = in_process("tune", run, "--safety-margin", "0.05", "--out",
                                os.path.join(self.path("nowhere"), "t.yaml"))
        self.assertEqual(rc, 2, err)
        self.assertIn("no folder", err)

    def test_report_out_read_only(self):
        run = synthetic.make_run(self.path("r.h5"), 2)
        ro = self.locked_dir("ro")
        for out in (ro, os.path.join(ro, "sub")):
            with self.subTest(out=out):
                rc, _, err = in_process("report", run, "--out", out)
                self.assert_message(rc, err, out, "cannot write there")

    def test_baseline_store_is_a_file(self):
        run = synthetic.make_run(self.path("r.h5"), 2)
        taken = self.path("taken")
        open(taken, "w").close()
        for argv in (["show"], ["promote", run], ["record", run], ["path", run]):
            with self.subTest(action=argv[0]):
                rc, _, err = in_process("baseline", *argv, "--store", taken)
                self.assert_message(rc, err, taken, "is a file, not a baseline store directory")

    def test_baseline_store_read_only(self):
        run = synthetic.make_run(self.path("r.h5"), 2)
        ro = self.locked_dir("ro")
        rc, _, err = in_process("baseline", "promote", run, "--store", ro)
        self.assert_message(rc, err, ro, "cannot write to the store")


if __name__ == "__main__":
    unittest.main()
