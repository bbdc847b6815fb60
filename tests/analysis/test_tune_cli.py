"""Tests of `rb-analysis tune` and `rb-analysis compare-tuning` on small synthetic kernel_tuning
files (the layout of docs/sweeps/kernel_tuning.md, schema_version 2) with known timings.
Run: PYTHONPATH=analysis python3 -m unittest tests/analysis/test_tune_cli.py
"""
import contextlib
import io
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from tempdir_case import TempDirCase  # noqa: E402  (first: analysis/ on the path, skip without h5py)

try:
    import yaml
except ImportError as exc:  # pragma: no cover
    print(f"SKIPPED: {exc}")
    sys.exit(77)
import h5py  # noqa: E402
import numpy as np  # noqa: E402

import synthetic  # noqa: E402
from ringbench_analysis import tune_report, tuning  # noqa: E402
from ringbench_analysis.__main__ import main as cli  # noqa: E402

GRID = [512, 1024, 2048, 4096, 8192]
# SHAPE_KEYS order: dtype, head_dim, causal, segment, rate
DENSE = ("bf16", 128, False, 0, 0)
DILATED = ("fp16", 64, True, 2048, 2)
SPREAD = np.array([0.9, 1.0, 1.1])  # per-iteration factors: the median is the given time
LIBRARIES = {"cudnn": "9.14.0", "cuda_driver": "13.0", "cuda_runtime": "13.0", "nccl": "2.28.9"}


def timings():
    """shape -> (default path, {path: time per GRID point in s, None: no point there})."""
    return {DENSE: ("cudnn", {"cudnn": [1.0] * 5, "flash": [1.5, 1.2, 0.7, 0.6, 0.6],
                              "naive": [3.0] * 5}),
            DILATED: ("flash", {"flash": [1.0] * 5, "cudnn": [None, None, 0.9, 0.9, 0.9]})}


def _run_group(f, world, gpu, backend, libraries):
    run = f.create_group("run")
    for k, v in {"ringbench_version": "0.1.0", "git_commit": "9c77d16fc404",
                 "config_file": "tune.yaml", "config_text": "sweeps: []\n",
                 "command_line": "ringbench tune.yaml", "start_time": "2026-11-23T10:00:00Z",
                 "end_time": "2026-11-23T10:05:00Z", "backend": backend, "status": "complete",
                 "failure": "", "mpi_thread_level": "MPI_THREAD_FUNNELED"}.items():
        synthetic._sattr(run, k, v)
    run.attrs["schema_version"] = np.int64(2)
    run.attrs["world_size"] = np.int64(world)
    run.attrs["node_count"] = np.int64(1)
    libs = run.create_group("libraries")
    for k, v in libraries.items():
        synthetic._sattr(libs, k, v)
    ranks = f.create_group("ranks")
    for name, v in (("rank", np.arange(world, dtype=np.int64)), ("hostname", ["node0"] * world),
                    ("node_index", np.zeros(world, dtype=np.int64)),
                    ("gpu_index", np.arange(world, dtype=np.int64) if gpu else -np.ones(world, dtype=np.int64)),
                    ("gpu_name", [gpu] * world), ("gpu_arch", ["9.0" if gpu else ""] * world)):
        synthetic.dataset(ranks, name, v, "1", name, "key")


def _points(table, world, parity_fail, oom, straggler, path_factor=None):
    """The points table's keys and metrics for `table` (timings() layout)."""
    pts = [(shape, rows, path, t, default) for shape, (default, paths) in table.items()
           for i, rows in enumerate(GRID) for path, ts in paths.items()
           for t in [ts[i]] if t is not None]
    n, it = len(pts), len(SPREAD)
    m = {"status": np.full((world, n), "ok", dtype=object),
         "kernel_path": np.array([[p[2] for p in pts]] * world, dtype=object),
         "forward_time_s": np.full((world, n, it), np.nan),
         "backward_time_s": np.full((world, n, it), np.nan),
         "max_rel_error": np.full((world, n), 1e-3), "parity_ok": np.ones((world, n), np.int64)}
    for p, (shape, rows, path, t, _) in enumerate(pts):
        for r in range(world):
            if (shape, path, rows, r) in oom:
                m["status"][r, p], m["parity_ok"][r, p], m["max_rel_error"][r, p] = "oom", -1, np.nan
                continue
            scale = t * (1.3 if r == straggler else 1.0) * (path_factor or {}).get((r, path), 1.0)
            m["forward_time_s"][r, p] = scale * SPREAD / 3  # forward + backward = t * SPREAD
            m["backward_time_s"][r, p] = scale * SPREAD * 2 / 3
            if (shape, path, rows, r) in parity_fail:
                m["status"][r, p], m["parity_ok"][r, p], m["max_rel_error"][r, p] = \
                    "parity_failed", 0, 0.5
    keys = {k: ([p[0][i] for p in pts], "1") for i, k in enumerate(tuning.SHAPE_KEYS)}
    keys["causal"] = ([int(p[0][2]) for p in pts], "1")
    keys.update(block_rows=([p[1] for p in pts], "1"), path=([p[2] for p in pts], "1"),
                auto_path=([p[4] for p in pts], "1"),
                label=([f"rows={p[1]} {p[2]}" for p in pts], "1"), tolerance=([2e-2] * n, "1"))
    units = {"forward_time_s": "s", "backward_time_s": "s"}
    return keys, {k: (v, units.get(k, "1")) for k, v in m.items()}


def make_tuning_file(path, world=2, table=None, parity_fail=(), oom=(), straggler=None,
                     gpu="NVIDIA H200", backend="cuda", libraries=None, sweeps=("tuning",),
                     drop_keys=(), other_sweep=False, path_factor=None):
    """A ringbench file with kernel_tuning sweep(s) of known timings (timings() by default).
    parity_fail, oom: {(shape, path, block_rows, rank)}; straggler: a rank 30% slower;
    path_factor: {(rank, path): factor} on that rank's times of that path."""
    with h5py.File(path, "w") as f:
        _run_group(f, world, gpu if backend == "cuda" else "", backend,
                   LIBRARIES if libraries is None else libraries)
        group = f.create_group("sweeps")
        for name in sweeps:
            g = synthetic._sweep(group, name, "kernel_tuning")
            for k, v in (("iterations", len(SPREAD)), ("warmup", 1), ("batch", 1), ("num_heads", 4)):
                g.attrs[k] = np.int64(v)
            keys, metrics = _points(table or timings(), world, set(parity_fail), set(oom), straggler,
                                    path_factor)
            synthetic.points_table(g, {k: v for k, v in keys.items() if k not in drop_keys}, metrics)
        if other_sweep:
            synthetic._pingpong_sweep(group, world, 1.0)
    return path


def paths_at(rule):
    """block_rows -> path for every grid point a rule's ranges cover."""
    return {g: r["path"] for r in rule["ranges"] for g in GRID
            if r["block_rows_min"] <= g <= r["block_rows_max"]}


class Base(TempDirCase):

    def cli(self, *argv):
        """(exit code, stdout, stderr) of rb-analysis."""
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli([str(a) for a in argv])
            except SystemExit as exc:  # argparse's own usage errors
                code = exc.code
        return code, out.getvalue(), err.getvalue()

    def tune(self, h5, *extra, margin="1.2", name="tuned.yaml"):
        code, out, err = self.cli("tune", h5, "--safety-margin", margin, "--out",
                                  self.path(name), *extra)
        self.assertEqual(code, 0, err)
        with open(self.path(name)) as f:
            return yaml.safe_load(f), out

    @staticmethod
    def read(path):
        with open(path) as f:
            return f.read()

    def rules(self, policy):
        return {tuple(r[k] for k in tuning.SHAPE_KEYS): r for r in policy["rules"]}


class TunePolicy(Base):
    def test_policy_file_ranges_defaults_machine_and_settings(self):
        h5 = make_tuning_file(self.path("run.h5"))
        policy, out = self.tune(h5, "--hysteresis", "2")
        self.assertEqual(tuning.validate_policy(policy), [])
        self.assertEqual((policy["version"], policy["kind"]), (2, "ringbench-kernel-policy"))
        self.assertEqual(policy["grid"], {"batch": 1, "num_heads": 4})  # the sweep's attributes
        self.assertEqual(policy["machine"], {
            "device": "cuda", "gpu": "NVIDIA H200", "gpu_arch": "9.0", "cuda_driver": LIBRARIES["cuda_driver"],
            "cuda_runtime": LIBRARIES["cuda_runtime"], "cudnn": LIBRARIES["cudnn"],
            "ringbench_version": "0.1.0", "commit": "9c77d16fc404"})
        self.assertEqual((policy["source"], policy["sweep"], policy["date"]),
                         (h5, "tuning", "2026-11-23"))
        self.assertEqual((policy["margin"], policy["hysteresis"]), (1.2, 2))
        rules = self.rules(policy)
        self.assertEqual(set(rules), set(timings()))
        for shape, (default, paths) in timings().items():
            with self.subTest(shape=shape):
                self.assertEqual({r["default_path"] for r in rules[shape]["ranges"]}, {default})
                # each range's path is the one that beats the default by the margin there
                for i, g in enumerate(GRID):
                    times = {p: ts[i] for p, ts in paths.items() if ts[i] is not None}
                    fast = min(times, key=times.get)
                    want = fast if times[default] / times[fast] >= 1.2 else default
                    self.assertEqual(paths_at(rules[shape])[g], want, g)
        flash = [r for r in rules[DENSE]["ranges"] if r["path"] == "flash"]
        self.assertEqual([(r["block_rows_min"], r["block_rows_max"]) for r in flash],
                         [(2048, 8192)])
        self.assertAlmostEqual(flash[0]["speedup"], round(1.0 / 0.7, 4))
        self.assertIn("2 shape(s), 1 non-default choice(s)", out)
        self.assertIn("2048..8192 flash (1.43x)", out)

    def test_margin_moves_the_switch_point(self):
        h5 = make_tuning_file(self.path("run.h5"))
        loose, _ = self.tune(h5, margin="1.2", name="a.yaml")
        strict, _ = self.tune(h5, margin="1.5", name="b.yaml")
        self.assertEqual(paths_at(self.rules(loose)[DENSE])[2048], "flash")
        self.assertEqual(paths_at(self.rules(strict)[DENSE])[2048], "cudnn")  # 1.43x < 1.5
        self.assertEqual(paths_at(self.rules(strict)[DENSE])[4096], "flash")  # 1.67x
        self.assertEqual(strict["margin"], 1.5)

    def test_parity_failure_on_one_rank_is_never_chosen(self):
        failed = {(DENSE, "flash", g, 1) for g in (2048, 4096)}
        h5 = make_tuning_file(self.path("run.h5"), parity_fail=failed)
        policy, _ = self.tune(h5, "--hysteresis", "1")
        chosen = paths_at(self.rules(policy)[DENSE])
        for _, path, rows, _ in failed:
            self.assertNotEqual(chosen[rows], path)
        self.assertEqual(chosen[8192], "flash")  # passed on every rank there

    def test_oom_rank_did_not_measure_and_all_oom_is_unusable(self):
        # rank 0 oom at 8192: rank 1's samples decide; both ranks oom: flash not measured
        oom = {(DENSE, "flash", 8192, 0), (DENSE, "flash", 4096, 0), (DENSE, "flash", 4096, 1)}
        h5 = make_tuning_file(self.path("run.h5"), oom=oom)
        policy, _ = self.tune(h5, "--hysteresis", "1", "--report", self.path("r.md"))
        chosen = paths_at(self.rules(policy)[DENSE])
        self.assertEqual((chosen[4096], chosen[8192]), ("cudnn", "flash"))
        with open(self.path("r.md")) as f:
            md = f.read()
        self.assertIn("oom", md)
        self.assertIn("ok (oom on 1 of 2 ranks)", md)

    def test_host_file_has_no_gpu(self):
        table = {("fp32", 16, True, 32, 2): ("kokkos", {"kokkos": [1.0] * 5,
                                                         "materialized": [2.0] * 5})}
        h5 = make_tuning_file(self.path("host.h5"), table=table, backend="host",
                              libraries={"hdf5": "1.10.8"})
        policy, _ = self.tune(h5)
        self.assertEqual(policy["machine"]["device"], "host")
        for key in ("gpu", "cudnn", "cuda_driver", "cuda_runtime"):
            self.assertIsNone(policy["machine"][key], key)
        self.assertIs(policy["rules"][0]["causal"], True)

    def test_sweep_is_chosen_by_name_among_several(self):
        h5 = make_tuning_file(self.path("two.h5"), sweeps=("first", "second"))
        policy, _ = self.tune(h5, "--sweep", "second")
        self.assertEqual(policy["sweep"], "second")


class TunePerGpu(Base):
    def test_a_gpu_whose_flash_is_slower_would_choose_otherwise(self):
        """3 GPUs; GPU 2's flash takes 2x. Dense shape (default cudnn 1.0, flash 0.7, 0.6, 0.6
        from 2048 rows): the pooled policy keeps flash, GPU 2 alone would keep cudnn. Dilated
        shape (default flash 1.0, cudnn 0.9): GPU 2's slow flash lifts the pooled flash median
        to 1.1, so the pool switches to cudnn (1.22x >= 1.2), which GPUs 0 and 1 alone would
        not (1.11x): pooling let one GPU flip a choice, and the table shows it."""
        h5 = make_tuning_file(self.path("run.h5"), world=3, path_factor={(2, "flash"): 2.0})
        report = self.path(os.path.join("out", "tuning.md"))
        _, out = self.tune(h5, "--hysteresis", "1", "--report", report)
        self.assertIn("per GPU (3 ranks): 4 of 10 grid point(s) get the same path on every GPU tuned alone; "
                      "largest rank spread 2.000", out)
        sec = self.read(report)
        sec = sec[sec.index("## Per GPU"):]
        self.assertIn("**4 of 10** grid points", sec)
        self.assertIn("| flash | 10 | 2.000 | 2.000 |", sec)  # every flash point: GPU 2 twice as slow
        for shape, pooled, gpus in ((DENSE, "flash (", ("flash (", "flash (", "cudnn")),
                                    (DILATED, "cudnn (1.22x)", ("flash", "flash", "cudnn (2.22x)"))):
            lines = [ln for ln in sec.splitlines() if ln.startswith(f"| {tune_report.shape_words(shape)} |")]
            self.assertEqual([ln.split(" | ")[1] for ln in lines], ["2048", "4096", "8192"])
            for ln in lines:
                cells = [c.strip() for c in ln.strip(" |").split(" | ")]
                self.assertTrue(cells[2].startswith(pooled), ln)
                for cell, want in zip(cells[3:], gpus):  # "flash (": any speedup; else exact
                    self.assertTrue(cell.startswith(want) if want.endswith("(") else cell == want, ln)

    def test_the_same_choice_everywhere_lists_no_difference(self):
        h5 = make_tuning_file(self.path("run.h5"), world=2, straggler=1)
        report = self.path("tuning.md")
        _, out = self.tune(h5, "--report", report)
        self.assertIn("10 of 10 grid point(s) get the same path on every GPU", out)
        self.assertNotIn("would choose otherwise", self.read(report))

    def test_one_rank_has_no_per_gpu_section(self):
        h5 = make_tuning_file(self.path("run.h5"), world=1)
        report = self.path("tuning.md")
        _, out = self.tune(h5, "--report", report)
        self.assertNotIn("per GPU", out)
        self.assertNotIn("## Per GPU", self.read(report))


class TuneReport(Base):
    def test_report_names_each_shape_and_writes_its_plot(self):
        h5 = make_tuning_file(self.path("run.h5"), straggler=1)
        report = self.path(os.path.join("out", "tuning.md"))
        _, out = self.tune(h5, "--report", report)
        with open(report) as f:
            md = f.read()
        for text in ("NVIDIA H200", LIBRARIES["cudnn"], "9c77d16fc404", "2026-11-23",
                     "safety margin", "## Switch points"):
            self.assertIn(text, md)
        for shape in timings():
            self.assertIn(f"### {tune_report.shape_words(shape)}", md)
            png = self.path(os.path.join("out", f"tuning_{tune_report.shape_slug(shape)}.png"))
            self.assertTrue(os.path.isfile(png), png)
            with open(png, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            self.assertIn(f"]({os.path.basename(png)})", md)
        # the straggler is 1.3x slower: the rank spread of every measured point
        self.assertIn("(1.30)", md)
        # a time is the median of both ranks' forward + backward samples pooled
        with h5py.File(h5, "r") as f:
            g = f["sweeps/tuning"]
            p = 0  # DENSE, 512 block rows, cudnn: the first point
            self.assertEqual((g["points/path"].asstr()[p], int(g["points/block_rows"][p])),
                             ("cudnn", 512))
            ms = 1e3 * float(np.median(g["forward_time_s"][:, p] + g["backward_time_s"][:, p]))
        row = [line for line in md.splitlines() if line.startswith("| 512 |")][0]
        self.assertIn(f"**{ms:.0f} (1.30)**", row)
        self.assertIn("report:", out)

    def test_report_marks_failed_parity(self):
        h5 = make_tuning_file(self.path("run.h5"), parity_fail={(DENSE, "naive", 512, 0)})
        self.tune(h5, "--report", self.path("t.md"))
        with open(self.path("t.md")) as f:
            row = [line for line in f if line.startswith("| 512 |")][0]
        self.assertIn("FAILED", row)


class TuneErrors(Base):
    def expect_error(self, argv, *needles):
        code, _, err = self.cli(*argv)
        self.assertEqual(code, 2, err)
        for needle in needles:
            self.assertIn(needle, err)
        self.assertFalse(os.path.exists(self.path("x.yaml")), "no policy on error")

    def tune_argv(self, h5, *extra, margin="1.2"):
        return ["tune", h5, "--safety-margin", margin, "--out", self.path("x.yaml")] + list(extra)

    def test_unreadable_input(self):
        self.expect_error(self.tune_argv(self.path("none.h5")), "none.h5: no such file")
        with open(self.path("text.h5"), "w") as f:
            f.write("not hdf5")
        self.expect_error(self.tune_argv(self.path("text.h5")), "not an HDF5 file")

    def test_no_or_several_kernel_tuning_sweeps(self):
        none = synthetic.make_run(self.path("ring.h5"), 2)
        self.expect_error(self.tune_argv(none), "no kernel_tuning sweep", "ring (ring_attention)")
        two = make_tuning_file(self.path("two.h5"), sweeps=("first", "second"))
        self.expect_error(self.tune_argv(two), "2 kernel_tuning sweeps (first, second)", "--sweep")
        self.expect_error(self.tune_argv(two, "--sweep", "third"), "no readable sweep named 'third'")
        mixed = make_tuning_file(self.path("mixed.h5"), other_sweep=True)
        self.expect_error(self.tune_argv(mixed, "--sweep", "pingpong"),
                          "'pingpong' is a host_pingpong sweep")

    def test_file_without_auto_path(self):
        h5 = make_tuning_file(self.path("old.h5"), drop_keys=("auto_path",))
        self.expect_error(self.tune_argv(h5), "no points/auto_path", "run the kernel_tuning sweep again")

    def test_file_without_the_grid_attributes(self):
        h5 = make_tuning_file(self.path("nogrid.h5"))
        with h5py.File(h5, "a") as f:
            del f["sweeps/tuning"].attrs["num_heads"]
        self.expect_error(self.tune_argv(h5), "lacks the attribute(s) num_heads")

    def test_bad_margin_and_hysteresis(self):
        h5 = make_tuning_file(self.path("run.h5"))
        for margin in ("0.9", "nan"):
            self.expect_error(self.tune_argv(h5, margin=margin), "--safety-margin", ">= 1.0")
        self.expect_error(self.tune_argv(h5, "--hysteresis", "0"), "--hysteresis 0")


class CompareTuning(Base):
    def policies(self):
        h5 = make_tuning_file(self.path("run.h5"))
        old, _ = self.tune(h5, name="old.yaml")
        return old, self.path("old.yaml")

    def write(self, name, d):
        with open(self.path(name), "w") as f:
            yaml.safe_dump(d, f, sort_keys=False)
        return self.path(name)

    def test_exit_codes(self):
        old, old_path = self.policies()
        self.assertEqual(self.cli("compare-tuning", old_path, old_path)[0], 0)
        rule = self.rules(old)[DENSE]
        # the cudnn -> flash switch one grid step later (4096 instead of 2048): noise, exit 0
        moved = yaml.safe_load(yaml.safe_dump(old))
        r = self.rules(moved)[DENSE]["ranges"]
        r[0]["block_rows_max"], r[1]["block_rows_min"] = 2048, 4096
        code, out, _ = self.cli("compare-tuning", old_path, self.write("moved.yaml", moved))
        self.assertEqual(code, 0, out)
        self.assertIn("moved switch point, 1 grid step", out)
        self.assertTrue(out.strip().splitlines()[-1].startswith("OK"))
        # a path the old policy never chose there: exit 1
        changed = yaml.safe_load(yaml.safe_dump(old))
        self.rules(changed)[DENSE]["ranges"][1]["path"] = "naive"
        code, out, _ = self.cli("compare-tuning", old_path, self.write("changed.yaml", changed))
        self.assertEqual(code, 1, out)
        self.assertIn("flash -> naive (changed choice)", out)
        self.assertTrue(out.strip().splitlines()[-1].startswith("CHANGED"))
        self.assertEqual(len(rule["ranges"]), 2)

    def test_different_machine_warns_without_failing(self):
        old, old_path = self.policies()
        other = dict(old, machine=dict(old["machine"], gpu="NVIDIA H100"))
        code, _, err = self.cli("compare-tuning", old_path, self.write("h100.yaml", other))
        self.assertEqual(code, 0)
        self.assertIn("different machines: machine.gpu: NVIDIA H200 -> NVIDIA H100", err)

    def test_unreadable_or_invalid_files_exit_2(self):
        old, old_path = self.policies()
        with open(self.path("broken.yaml"), "w") as f:
            f.write("rules: [\n")
        not_policy = self.write("other.yaml", {"version": 2, "kind": "something"})
        overlap = yaml.safe_load(yaml.safe_dump(old))
        self.rules(overlap)[DENSE]["ranges"][1]["block_rows_min"] = 512
        with open(self.path("run.h5"), "wb") as f:  # an HDF5 run file given where a policy goes
            f.write(b"\x89HDF\r\n\x1a\n" + bytes(range(256)))
        cases = [(self.path("missing.yaml"), "missing.yaml: cannot read"),
                 (self.path("run.h5"), "run.h5: not a text file"),
                 (self.path("broken.yaml"), "broken.yaml: not valid YAML"),
                 (not_policy, "other.yaml: not a valid tuned kernel policy: kind"),
                 (self.write("overlap.yaml", overlap), "overlap.yaml: not a valid tuned "
                                                       "kernel policy: rule 0")]
        for bad, needle in cases:
            with self.subTest(bad):
                code, _, err = self.cli("compare-tuning", old_path, bad)
                self.assertEqual(code, 2, err)
                self.assertIn(needle, err)
                self.assertEqual(self.cli("compare-tuning", bad, old_path)[0], 2)


if __name__ == "__main__":
    unittest.main()
