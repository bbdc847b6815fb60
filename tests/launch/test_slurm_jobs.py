"""Every Slurm job (slurm/*.sbatch) is benchmark-grade (docs/launch-and-slurm.md): the node to
itself, a CPU share per rank, a warning before the time limit with a trap that writes the
verdict, the site's environment hook first, results where RB_SCRATCH says; and the helpers of
slurm/job_lib.sh behave as the jobs rely on. The jobs themselves run on a real Slurm in
tests/analysis/slurm_local_test.sh."""
import glob
import os
import re
import subprocess
import tempfile
import unittest

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JOBS = sorted(glob.glob(os.path.join(SOURCE, "slurm", "*.sbatch")))
LIB = os.path.join(SOURCE, "slurm", "job_lib.sh")


def directives(text):
    """The #SBATCH options sbatch reads: those before the first command line."""
    out = []
    for line in text.splitlines()[1:]:
        if line.startswith("#SBATCH"):
            out.append(line.split(None, 1)[1].strip())
        elif line.strip() and not line.startswith("#"):
            break
    return out


class Directives(unittest.TestCase):
    def test_there_are_jobs(self):
        names = {os.path.basename(j) for j in JOBS}
        self.assertTrue({"nightly.sbatch", "ring_scaling.sbatch", "tune.sbatch"} <= names, names)

    def test_every_job(self):
        for job in JOBS:
            with self.subTest(job=os.path.basename(job)), open(job) as f:
                text = f.read()
                d = directives(text)
                self.assertIn("--exclusive", d)
                self.assertTrue(any(re.fullmatch(r"--cpus-per-task=[1-9][0-9]*", x) for x in d), d)
                # B: the signal goes to the batch shell (its trap), not to the job steps.
                self.assertTrue(any(re.fullmatch(r"--signal=B:USR1@[1-9][0-9]*", x) for x in d), d)
                self.assertTrue(any(x.startswith("--time=") for x in d), d)
                trap = re.search(r"^trap (\w+) USR1$", text, re.M)
                self.assertIsNotNone(trap, "no USR1 trap")
                body = re.search(r"^%s\(\) \{\n(.*?)^\}" % trap.group(1), text, re.M | re.S)
                self.assertIsNotNone(body, f"no function {trap.group(1)}")
                self.assertRegex(body.group(1), r"(rb_job_)?verdict 6 ", "the trap writes no verdict 6")
                self.assertRegex(body.group(1), r"rb_job_stop_child", "the trap does not stop the step")
                # The site hook runs before anything of the repository is read.
                hook = text.find('source "$RB_ENV_SCRIPT"')
                self.assertGreater(hook, 0, "no RB_ENV_SCRIPT hook")
                self.assertLess(hook, text.find('source "$root/launch/common.sh"'))
                self.assertIn('source "$root/slurm/job_lib.sh"', text)
                self.assertIn('rb_job_results_parent "$root"', text)  # RB_SCRATCH honoured
                self.assertIn("rb_job_run_bg", text)  # long steps in the background: the trap acts at once
                header = text.split("set -uo pipefail")[0]
                for var in ("RB_ENV_SCRIPT", "RB_SCRATCH"):
                    self.assertIn(var, header, f"{var} not documented in the header")
                self.assertRegex(header, r"\n#\s+6\s", "exit code 6 not documented")


class JobLib(unittest.TestCase):
    def bash(self, script, env=None):
        return subprocess.run(["bash", "-c", f'source "{LIB}"\n{script}'], capture_output=True,
                              text=True, env={"PATH": os.environ["PATH"], **(env or {})})

    def test_results_parent(self):
        for env, want in (({"RB_SCRATCH": "/s", "RB_RESULTS_DIR": "/r"}, "/s"),
                          ({"RB_RESULTS_DIR": "/r"}, "/r"), ({}, "/repo/results")):
            self.assertEqual(self.bash('rb_job_results_parent /repo', env).stdout, want)

    def test_verdict_file_and_exit_code(self):
        with tempfile.TemporaryDirectory() as d:
            r = self.bash(f'RB_JOB_NAME=job RB_JOB_DIR="{d}"; rb_job_verdict 6 "time limit"; echo after')
            self.assertEqual(r.returncode, 6)
            self.assertNotIn("after", r.stdout)
            self.assertEqual(r.stderr, "job: VERDICT 6: time limit\n")
            with open(os.path.join(d, "verdict.txt")) as f:
                self.assertEqual(f.read(), "job: VERDICT 6: time limit\n")

    def test_installed_program(self):
        # cmake --install: PREFIX/share/ringbench is the root, PREFIX/bin/ringbench the program.
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "bin"))
            os.makedirs(os.path.join(d, "share", "ringbench"))
            prog = os.path.join(d, "bin", "ringbench")
            with open(prog, "w") as f:
                f.write("#!/bin/sh\n")
            os.chmod(prog, 0o755)
            root = os.path.join(d, "share", "ringbench")
            stub = 'rb_ringbench_bin() { printf %s "${RINGBENCH_BIN:-$RB_BUILD/ringbench}"; }\n'
            got = self.bash(stub + f'RB_BUILD="{root}/build"; rb_job_ringbench_bin "{root}"').stdout
            self.assertEqual(got, prog)
            got = self.bash(stub + f'RB_BUILD="{root}/build"; rb_job_ringbench_bin "{root}"',
                            {"RINGBENCH_BIN": "/x/ringbench"}).stdout
            self.assertEqual(got, "/x/ringbench")  # an explicit choice is kept, even if missing

    def test_trap_runs_during_a_long_step(self):
        # bash defers a trap while a foreground command runs; rb_job_run_bg must not.
        script = ('trap "echo trapped; rb_job_stop_child; exit 6" USR1\n'
                  '(sleep 1; kill -USR1 $$) &\n'
                  'SECONDS=0; rb_job_run_bg sleep 30; echo "not stopped after $SECONDS s"')
        r = self.bash(script)
        self.assertEqual(r.returncode, 6, r.stdout + r.stderr)
        self.assertIn("trapped", r.stdout)
        self.assertIn("+ sleep 30", r.stdout)


if __name__ == "__main__":
    unittest.main()
