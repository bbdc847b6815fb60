"""launch/torch_cp.py without torch: FLOP count, points, verdicts, launcher environment, CLI,
table and JSON. The script imports torch only inside the functions that run on a GPU node."""
import importlib.util
import json
import os
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "launch", "torch_cp.py")
SHAPE = (1, 16, 128)  # batch, heads, head_dim: ringbench's default problem


def load():
    spec = importlib.util.spec_from_file_location("torch_cp", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


before = set(sys.modules)
tc = load()
imported_on_load = set(sys.modules) - before


class Import(unittest.TestCase):
    def test_no_torch_at_import(self):
        self.assertFalse({m for m in imported_on_load if m == "torch" or m.startswith("torch.")})


class Flops(unittest.TestCase):
    def test_attending_pairs(self):
        self.assertEqual(tc.attending_pairs(4, True), 10)
        self.assertEqual(tc.attending_pairs(4, False), 16)
        self.assertEqual(tc.attending_pairs(1, True), 1)
        self.assertEqual(tc.attending_pairs(32768, True), 32768 * 32769 // 2)

    def test_flops_one_gpu(self):
        f = tc.flops(8192, False, *SHAPE)
        self.assertEqual(f["forward"], 4 * 128 * 8192 * 8192 * 16)
        self.assertEqual(f["backward"], 2.5 * f["forward"])
        self.assertEqual(f["total"], 3.5 * f["forward"])

    def test_flops_split_over_world(self):
        f = tc.flops(32768, True, 2, 16, 64, world=4)
        self.assertEqual(f["forward"], 4 * 64 * (32768 * 32769 / 2) * 2 * 16 / 4)

    def test_points(self):
        ring = tc.new_point("ring", True, 8192, 4, SHAPE, 2, 6)
        self.assertEqual((ring["seq_len"], ring["flop_world"]), (32768, 4))
        self.assertEqual(ring["forward_flop"], 4 * 128 * 32768 * 32769 / 2 * 16 / 4)
        self.assertEqual(ring["backward_flop"], 2.5 * ring["forward_flop"])
        for method in ("local", "local_flash"):
            local = tc.new_point(method, False, 8192, 4, SHAPE, 2, 6)
            self.assertEqual((local["seq_len"], local["flop_world"], local["world"]), (8192, 1, 4))
            self.assertEqual(local["forward_flop"], 4 * 128 * 8192 * 8192 * 16)
        uly = tc.new_point("ulysses", False, 8192, 4, SHAPE, 2, 6)
        self.assertEqual(uly["forward_flop"], 4 * 128 * 32768 * 32768 * 16 / 4)
        self.assertEqual((ring["repeats"], ring["warmup"], ring["status"]), (6, 2, "ok"))
        self.assertEqual(ring["statistic"], "median of iterations of the slowest rank")

    def test_summarize(self):
        p = tc.new_point("local", False, 8192, 1, SHAPE, 2, 3)
        p["forward_flop"], p["backward_flop"] = 1e12, 2.5e12
        tc.summarize(p, [1.0, 2.0, 9.0], [4.0, 5.0, 6.0], [5.0, 7.0, 15.0])
        self.assertEqual((p["forward_ms_median"], p["backward_ms_median"], p["total_ms_median"]),
                         (2.0, 5.0, 7.0))
        self.assertAlmostEqual(p["forward_tflops"], 500.0)
        self.assertAlmostEqual(p["backward_tflops"], 500.0)
        self.assertAlmostEqual(p["total_tflops"], 3.5e12 / 7e-3 / 1e12)
        self.assertIsNone(tc.tflops(1e12, None))


class Verdict(unittest.TestCase):
    def test_all_ok(self):
        self.assertEqual(tc.verdict([("ok", "")] * 4), ("ok", ""))

    def test_same_reason_everywhere(self):
        self.assertEqual(tc.verdict([("skipped", "heads")] * 2), ("skipped", "heads"))

    def test_worst_status_and_ranks(self):
        status, reason = tc.verdict([("ok", ""), ("error", "OOM"), ("skipped", "x"), ("error", "OOM")])
        self.assertEqual(status, "error")
        self.assertIn("ranks 1,3: OOM", reason)
        self.assertIn("rank 2: x", reason)


class LaunchEnv(unittest.TestCase):
    def test_open_mpi(self):
        env = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4",
               "OMPI_COMM_WORLD_LOCAL_RANK": "1", "RANK": "9"}
        e = tc.launch_env(env)
        self.assertEqual((e["launcher"], e["rank"], e["world"], e["local_rank"]), ("mpirun", 3, 4, 1))
        self.assertEqual((e["master_addr"], e["master_port"]), ("127.0.0.1", 29533))
        self.assertEqual(tc.launch_env(env, port=40000)["master_port"], 40000)
        self.assertEqual(tc.launch_env(dict(env, MASTER_PORT="31000"))["master_port"], 31000)

    def test_torchrun_keeps_its_port(self):
        env = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "10.0.0.1",
               "MASTER_PORT": "29500"}
        e = tc.launch_env(env, port=40000)
        self.assertEqual((e["launcher"], e["rank"], e["world"], e["local_rank"]), ("torchrun", 1, 2, 1))
        self.assertEqual((e["master_addr"], e["master_port"]), ("10.0.0.1", 29500))

    def test_single_process(self):
        e = tc.launch_env({})
        self.assertEqual((e["launcher"], e["rank"], e["world"], e["local_rank"]), ("single", 0, 1, 0))


class Cli(unittest.TestCase):
    def test_defaults(self):
        a = tc.parse_args(["--out", "x"])
        self.assertEqual(a.tokens_per_gpu, [8192, 32768])
        self.assertEqual((a.heads, a.head_dim, a.batch, a.dtype), (16, 128, 1, "bf16"))
        self.assertEqual(a.causal, [False, True])
        self.assertEqual((a.warmup, a.iterations), (2, 6))
        self.assertEqual(a.methods, ["local", "local_flash", "ring", "ulysses"])
        self.assertEqual((a.cp_rotate_method, a.port), ("alltoall", None))

    def test_lists_and_errors(self):
        a = tc.parse_args(["--out", "x", "--causal", "on", "--methods", "ring", "ring",
                           "--tokens-per-gpu", "4096", "--cp-rotate-method", "allgather"])
        self.assertEqual((a.causal, a.methods, a.tokens_per_gpu), ([True], ["ring"], [4096]))
        self.assertEqual(a.cp_rotate_method, "allgather")
        for bad in ([], ["--out", "x", "--methods", "zigzag"], ["--out", "x", "--iterations", "0"],
                    ["--out", "x", "--causal", "maybe"]):
            with self.subTest(bad=bad), self.assertRaises(SystemExit):
                with open(os.devnull, "w") as null:
                    stderr, sys.stderr = sys.stderr, null
                    try:
                        tc.parse_args(bad)
                    finally:
                        sys.stderr = stderr


class Output(unittest.TestCase):
    def points(self):
        ok = tc.summarize(tc.new_point("ring", True, 8192, 4, SHAPE, 2, 3), [10.0] * 3, [25.0] * 3,
                          [35.0] * 3)
        ok["backend_used"], ok["note"] = "cudnn", "context_parallel, rotate alltoall"
        skipped = tc.new_point("ulysses", False, 8192, 3, SHAPE, 2, 3)
        skipped["status"], skipped["reason"] = "skipped", "heads 16 not divisible by world 3"
        return [ok, skipped]

    def test_table(self):
        text = tc.format_table(self.points())
        lines = text.splitlines()
        self.assertEqual(len(lines), 4)
        for column in tc.COLUMNS:
            self.assertIn(column, lines[0])
        self.assertTrue(lines[1].startswith("|-"))
        self.assertIn("| ring ", lines[2])
        self.assertIn("| cudnn ", lines[2])
        self.assertIn("35.0", lines[2])
        self.assertIn("skipped: heads 16 not divisible by world 3", lines[3])
        self.assertEqual(lines[3].count("| - "), 5)  # 3 times, TFLOP/s, backend

    def test_numbers(self):
        self.assertEqual([tc.format_number(x) for x in (None, 0, 0.012345, 3.14159, 35.0, 612.4, 12345.6)],
                         ["-", "0", "0.0123", "3.14", "35.0", "612", "12346"])

    def test_json(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "torch_cp.json")
            here = {"method": "ulysses", "causal": False, "tokens_per_gpu": 8192}
            tc.write_json(path, tc.document({"world": 4}, {"heads": 16}, self.points(), here))
            with open(path) as f:
                doc = json.load(f)
        self.assertEqual(set(doc), {"machine", "settings", "points", "in_progress"})
        keys = {"method", "causal", "tokens_per_gpu", "world", "forward_ms_median",
                "backward_ms_median", "total_ms_median", "forward_tflops", "backward_tflops",
                "total_tflops", "repeats", "warmup", "statistic", "backend_used", "status", "reason"}
        for p in doc["points"]:
            self.assertLessEqual(keys, set(p))
        self.assertEqual([p["status"] for p in doc["points"]], ["ok", "skipped"])


if __name__ == "__main__":
    unittest.main()
