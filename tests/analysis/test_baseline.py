"""The baseline store (analysis/ringbench_analysis/baseline.py, `rb-analysis baseline`): machine
kinds, history kept on promote, the atomic index, and `path`'s exit 3 when a kind has none."""
import datetime
import io
import json
import multiprocessing
import os
import unittest
from unittest import mock

import h5py
import numpy as np

from ringbench_analysis import baseline
import synthetic
from tempdir_case import TempDirCase, rb_analysis

CONFIG = ("run:\n  name: {name}\n  output_dir: {out}\nbackend: {backend}\n"
          "sweeps:\n  - type: ring_attention\n    iterations: {it}\n")


def make(path, name="a", out="results", backend="host", it=3, gpu="", nodes=1, commit="abc123"):
    """A synthetic run with the given config text, GPU name of rank 0, node count and commit."""
    synthetic.make_run(path, 2)
    with h5py.File(path, "r+") as f:
        f["run"].attrs["config_text"] = np.bytes_(CONFIG.format(name=name, out=out, backend=backend, it=it))
        f["run"].attrs["node_count"] = np.int64(nodes)
        f["run"].attrs["git_commit"] = np.bytes_(commit)
        del f["ranks/gpu_name"]
        f["ranks"].create_dataset("gpu_name", data=np.array([gpu.encode()] * 2, dtype=f"S{max(1, len(gpu))}"))
    return path


def _read(path):
    with open(path) as f:
        return f.read()


def at(day):
    return datetime.datetime(2026, 11, day, 2, 0, 0, tzinfo=datetime.timezone.utc)


class KindTest(TempDirCase):
    def test_name_and_output_dir_do_not_change_the_kind(self):
        a = baseline.run_identity(make(self.path("a.h5"), name="a", out="x"))
        b = baseline.run_identity(make(self.path("b.h5"), name="nightly", out="/scratch/y"))
        self.assertEqual(a["kind"], b["kind"])
        self.assertEqual(a["gpu"], "host")

    def test_work_gpu_and_nodes_change_the_kind(self):
        ref = baseline.run_identity(make(self.path("r.h5")))["kind"]
        kinds = {baseline.run_identity(make(self.path("i.h5"), it=5))["kind"],
                 baseline.run_identity(make(self.path("g.h5"), gpu="NVIDIA H100 80GB HBM3"))["kind"],
                 baseline.run_identity(make(self.path("n.h5"), nodes=2))["kind"]}
        self.assertEqual(len(kinds), 3)
        self.assertNotIn(ref, kinds)
        self.assertTrue(any(k.startswith("NVIDIA_H100_80GB_HBM3_1n_") for k in kinds))

    def test_config_file_has_the_kind_of_its_run(self):
        run = baseline.run_identity(make(self.path("r.h5"), name="x"))
        cfg = self.path("c.yaml")
        with open(cfg, "w") as f:
            f.write(CONFIG.format(name="nightly", out="elsewhere", backend="host", it=3))
        # A host-backend config is "host" whatever GPU the node has.
        self.assertEqual(baseline.identity(cfg, gpu="NVIDIA H200", nodes=1)["kind"], run["kind"])
        self.assertNotEqual(baseline.identity(cfg, nodes=2)["kind"], run["kind"])


class StoreTest(TempDirCase):
    def test_promote_keeps_history_and_moves_current(self):
        store = self.path("store")
        run = make(self.path("r.h5"), commit="1111111111111111")
        first = baseline.promote(run, store, now=at(20))
        second = baseline.promote(make(self.path("r2.h5"), commit="2222222222222222"), store, now=at(21))
        kind = baseline.run_identity(run)["kind"]
        idx = baseline.read_index(store)
        self.assertEqual([e["commit"] for e in idx[kind]], ["1111111111111111", "2222222222222222"])
        self.assertEqual([e["current"] for e in idx[kind]], [False, True])
        self.assertTrue(first["file"].startswith(kind + os.sep + "2026-11-20"))
        self.assertTrue(first["file"].endswith("_111111111111.h5"))
        for e in (first, second):  # both dated copies are kept
            self.assertTrue(os.path.isfile(os.path.join(store, e["file"])))
        self.assertEqual(baseline.current(store, kind)["file"], second["file"])

    def test_record_keeps_nights_without_moving_current(self):
        store = self.path("store")
        run = make(self.path("r.h5"), commit="1111111111111111")
        pinned = baseline.promote(run, store, now=at(1))
        nights = [baseline.record(run, store, now=at(2 + i), keep=3) for i in range(5)]
        kind = baseline.run_identity(run)["kind"]
        idx = baseline.read_index(store)[kind]
        self.assertEqual(baseline.current(store, kind)["file"], pinned["file"])
        self.assertEqual([e["role"] for e in idx], ["baseline", "night", "night", "night"])
        self.assertEqual([e["file"] for e in idx[1:]], [n["file"] for n in nights[2:]])
        for n in nights[:2]:  # beyond keep: out of the index and off the disk
            self.assertFalse(os.path.exists(os.path.join(store, n["file"])))
        self.assertTrue(os.path.isfile(os.path.join(store, pinned["file"])))
        out = io.StringIO()
        baseline.show(store, out=out)
        self.assertEqual(out.getvalue().count("\n  n "), 3)

    def test_same_second_and_commit_is_not_overwritten(self):
        store = self.path("store")
        run = make(self.path("r.h5"))
        a = baseline.promote(run, store, now=at(20))
        b = baseline.promote(run, store, now=at(20))
        self.assertNotEqual(a["file"], b["file"])
        self.assertEqual(len(baseline.read_index(store)[baseline.run_identity(run)["kind"]]), 2)

    def test_kinds_are_separate(self):
        store = self.path("store")
        host = make(self.path("h.h5"))
        gpu = make(self.path("g.h5"), gpu="NVIDIA H100")
        baseline.promote(host, store, now=at(20))
        baseline.promote(gpu, store, now=at(21))
        idx = baseline.read_index(store)
        self.assertEqual(len(idx), 2)
        self.assertTrue(all(len(v) == 1 and v[0]["current"] for v in idx.values()))

    def test_index_write_is_atomic(self):
        store = self.path("store")
        run = make(self.path("r.h5"))
        baseline.promote(run, store, now=at(20))
        before = _read(os.path.join(store, "index.json"))
        # A crash while the new index is written leaves the old one whole and no temp file.
        with mock.patch.object(baseline.json, "dump", side_effect=RuntimeError("killed")):
            with self.assertRaises(RuntimeError):
                baseline.promote(run, store, now=at(21))
        self.assertEqual(_read(os.path.join(store, "index.json")), before)
        self.assertEqual([n for n in os.listdir(store) if n.endswith(".tmp")], [])
        json.loads(before)

    def test_concurrent_promotes_keep_every_file_and_entry(self):
        # Two nightly jobs ending together: before the store's lock, both took the same free name
        # and copied through one fixed temp name (.NAME.tmp), and the later index write dropped
        # the other's entry.
        store, run = self.path("store"), make(self.path("r.h5"))
        n = 6
        ctx = multiprocessing.get_context("fork")
        start = ctx.Barrier(n)
        procs = [ctx.Process(target=_promote_after, args=(start, run, store)) for _ in range(n)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        self.assertEqual([p.exitcode for p in procs], [0] * n)
        entries = baseline.read_index(store)[baseline.run_identity(run)["kind"]]
        files = {e["file"] for e in entries}
        self.assertEqual((len(entries), len(files)), (n, n))
        self.assertEqual(sum(1 for e in entries if e["current"]), 1)
        want = _bytes(run)
        self.assertTrue(all(_bytes(os.path.join(store, f)) == want for f in files))
        kind_dir = os.path.join(store, baseline.run_identity(run)["kind"])
        self.assertEqual(sorted(os.listdir(kind_dir)), sorted(os.path.basename(f) for f in files))

    def test_a_killed_copy_leaves_no_file(self):
        store, run = self.path("store"), make(self.path("r.h5"))
        with mock.patch.object(baseline.shutil, "copyfileobj", side_effect=RuntimeError("killed")):
            with self.assertRaises(RuntimeError):
                baseline.promote(run, store, now=at(20))
        kind_dir = os.path.join(store, baseline.run_identity(run)["kind"])
        self.assertEqual(os.listdir(kind_dir), [])
        self.assertEqual(baseline.read_index(store), {})
        baseline.promote(run, store, now=at(20))  # the lock was let go
        self.assertEqual(len(os.listdir(kind_dir)), 1)


def _bytes(path):
    with open(path, "rb") as f:
        return f.read()


def _promote_after(start, run, store):
    """A child process: every child promotes at the same moment, with the same date."""
    start.wait(30)
    baseline.promote(run, store, now=at(20))


class CliTest(TempDirCase):
    def cli(self, *argv):
        return rb_analysis(*argv)

    def test_path_exit_3_then_promote_then_path(self):
        store = self.path("store")
        run = make(self.path("r.h5"))
        rc, out, err = self.cli("baseline", "path", run, "--store", store)
        self.assertEqual((rc, out), (3, ""))
        self.assertIn("no baseline", err)
        self.assertEqual(self.cli("baseline", "promote", run, "--store", store)[0], 0)
        rc, out, _ = self.cli("baseline", "path", run, "--store", store)
        self.assertEqual(rc, 0)
        self.assertTrue(os.path.isfile(out.strip()))
        # Another kind still has none.
        other = make(self.path("o.h5"), nodes=4)
        self.assertEqual(self.cli("baseline", "path", other, "--store", store)[0], 3)
        rc, out, _ = self.cli("baseline", "show", "--store", store)
        self.assertEqual(rc, 0)
        self.assertIn("* 20", out)

    def test_unreadable_file_is_2(self):
        bad = self.path("bad.h5")
        with open(bad, "wb") as f:
            f.write(b"\x89HDF\r\n\x1a\nnot really")
        self.assertEqual(self.cli("baseline", "promote", bad, "--store", self.path("s"))[0], 2)
        self.assertFalse(os.path.exists(os.path.join(self.path("s"), "index.json")))


if __name__ == "__main__":
    unittest.main()
