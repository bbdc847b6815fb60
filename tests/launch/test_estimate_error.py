"""launch/estimate_error.py on synthetic output files: the dry-run re-planned at the file's world
size and --only, each sweep's error against its wall time, the --max-error verdict (--min-seconds
leaving short sweeps out), a file's phases and the plan's phase table read, and exit 2 for a run
that did not complete. Needs the ringbench binary (RINGBENCH_BIN) for the dry-run."""
import os
import subprocess
import sys
import tempfile
import unittest

try:
    import h5py
except ImportError:  # the script needs it; CTest reads 77 as skipped
    print("SKIP: no h5py")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "launch", "estimate_error.py")
BIN = os.environ.get("RINGBENCH_BIN", os.path.join(ROOT, "build", "ringbench"))
CONFIG = """backend: host
sweeps:
  - {type: memory, name: mem_small, bytes: 16MiB, iterations: 100}
  - {type: memory, name: mem_large, bytes: 256MiB, iterations: 100}
"""


def write_run(path, walls, status="complete", command_line="ringbench job.yaml"):
    with h5py.File(path, "w") as f:
        run = f.create_group("run")
        run.attrs.update({"config_text": CONFIG, "world_size": 2, "node_count": 1,
                          "status": status, "command_line": command_line})
        for name, wall in walls.items():
            g = f.create_group("sweeps/" + name)
            g.attrs.update({"status": "complete", "wall_time_s": wall})


def run_script(*args):
    return subprocess.run([sys.executable, SCRIPT, "--ringbench", BIN, *args],
                          capture_output=True, text=True, timeout=120)


def rows(stdout):
    """{sweep: (measured, estimate, error %)} from the plain table."""
    out = {}
    for line in stdout.splitlines()[1:]:
        cols = line.split()
        if len(cols) >= 7 and cols[3].startswith("mem_"):
            out[cols[3]] = (float(cols[4]), float(cols[5]), float(cols[6]))
    return out


class EstimateError(unittest.TestCase):
    def setUp(self):
        if not os.access(BIN, os.X_OK):
            self.skipTest(f"no ringbench binary at {BIN}")
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "run.h5")

    def tearDown(self):
        self.dir.cleanup()

    def estimates(self):
        write_run(self.path, {"mem_small": 1.0, "mem_large": 1.0})
        r = run_script(self.path)
        self.assertEqual(r.returncode, 0, r.stderr)
        return {k: v[1] for k, v in rows(r.stdout).items()}

    def test_error_is_estimate_against_wall_time(self):
        est = self.estimates()
        self.assertEqual(set(est), {"mem_small", "mem_large"})
        self.assertGreater(est["mem_large"], est["mem_small"])  # the dry-run's own numbers
        write_run(self.path, {"mem_small": 4 * est["mem_small"], "mem_large": est["mem_large"]})
        r = run_script(self.path, "--max-error", "25")
        got = rows(r.stdout)
        self.assertAlmostEqual(got["mem_small"][2], -75, delta=1)
        self.assertAlmostEqual(got["mem_large"][2], 0, delta=1)
        self.assertEqual(r.returncode, 1, "a sweep 75 % off fails --max-error 25")
        self.assertIn("largest |error| 75 %", r.stdout)

    def test_within_the_limit_passes(self):
        est = self.estimates()
        write_run(self.path, {k: v * 1.1 for k, v in est.items()})
        r = run_script(self.path, "--max-error", "25", "--markdown")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertTrue(r.stdout.startswith("| file | GPU | ranks | sweep |"))

    def test_min_seconds_leaves_short_sweeps_out_of_the_verdict(self):
        est = self.estimates()
        write_run(self.path, {"mem_small": 4 * est["mem_small"], "mem_large": est["mem_large"]})
        limit = str(4 * est["mem_small"] + 0.01)
        r = run_script(self.path, "--max-error", "25", "--min-seconds", limit)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("(1 under", r.stdout)
        self.assertEqual(set(rows(r.stdout)), {"mem_small", "mem_large"}, "both still listed")

    def test_phases_of_a_file(self):
        """measured_phases: the slowest rank's phases per point, summed; outside: the rest."""
        sys.path.insert(0, os.path.join(ROOT, "launch"))
        import estimate_error  # noqa: E402  pylint: disable=import-outside-toplevel
        with h5py.File(self.path, "w") as f:
            g = f.create_group("sweeps/ra")
            g.attrs["wall_time_s"] = 10.0
            g["wall_s"] = [[2.0, 1.0], [3.0, 0.5]]  # [ranks, points]: rank 1, then 0
            for i, p in enumerate(estimate_error.PHASES):
                g[f"phase_{p}_s"] = [[0.1 * (i + 1), 0.2], [0.5, 0.01 * (i + 1)]]
            f.create_group("sweeps/plain").attrs["wall_time_s"] = 1.0
        got = estimate_error.measured_phases(self.path)
        self.assertEqual(set(got), {"ra"}, "sweeps without the columns are left out")
        # The slowest ranks' walls (3 + 1) overlap: scaled to the busiest rank's (3 + 0.5).
        self.assertAlmostEqual(got["ra"]["setup"], (0.5 + 0.2) * 3.5 / 4.0)
        self.assertAlmostEqual(got["ra"]["outside"], 10.0 - 3.5)
        plan = ["by phase (...):", "", "   sweep  " + "  ".join(estimate_error.PHASES) + "  outside  model",
                "   (s)", "   ra  " + "  ".join(["1.000"] * 8), "suggested: ..."]
        self.assertEqual(estimate_error.phase_table(plan)["ra"]["check"], 1.0)

    def test_only_plans_the_sweeps_that_ran(self):
        write_run(self.path, {"mem_large": 1.0}, command_line="ringbench job.yaml --only mem_large")
        r = run_script(self.path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(set(rows(r.stdout)), {"mem_large"})

    def test_a_run_that_did_not_complete_is_refused(self):
        write_run(self.path, {"mem_small": 1.0}, status="running")
        r = run_script(self.path)
        self.assertEqual(r.returncode, 2)
        self.assertIn("not complete", r.stderr)


class GpuRunsCalibration(unittest.TestCase):
    """The CUDA cost model against real runs (tests/data/gpu_runs: 1, 2 and 4 x H200,
    2026-11-28): every sweep of at least a second within 35 % (issue #30 asks 25 %;
    docs/performance.md has the table and where the rest is). A model change that drifts from
    what a GPU node does fails."""

    def test_every_sweep_within_the_limit(self):
        if not os.access(BIN, os.X_OK):
            self.skipTest(f"no ringbench binary at {BIN}")
        data = os.path.join(ROOT, "tests", "data", "gpu_runs")
        files = sorted(os.path.join(data, f) for f in os.listdir(data) if f.endswith(".h5"))
        r = run_script(*files, "--min-seconds", "1", "--max-error", "35")
        if "built without" in r.stdout + r.stderr:
            self.skipTest("this ringbench plans no cuda backend: " + r.stderr[-300:])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("51 sweep(s)", r.stdout)


if __name__ == "__main__":
    unittest.main()
