"""Packaging of rb-analysis: one version with ringbench, the in-tree build backend's wheel and
sdist, and the message that names missing modules (docs/analysis.md, install)."""
import base64
import csv
import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
ANALYSIS = os.path.join(SOURCE, "analysis")
sys.path.insert(0, os.path.join(ANALYSIS, "_build_backend"))
import ringbench_build  # noqa: E402

import ringbench_analysis  # noqa: E402


def cmake_version():
    with open(os.path.join(SOURCE, "CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"^project\(ringbench VERSION ([0-9.]+)", f.read(), re.M)
    assert m, "no project(ringbench VERSION ...) in CMakeLists.txt"
    return m.group(1)


def package_files(root):
    """Archive names of the package's files under `root` (caches left out)."""
    out = set()
    for d, dirs, files in os.walk(os.path.join(root, "ringbench_analysis")):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        out |= {os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/")
                for f in files if not f.endswith(".pyc")}
    return out


class Version(unittest.TestCase):
    def test_one_version_with_ringbench(self):
        v = cmake_version()
        self.assertEqual(ringbench_analysis.__version__, v)
        self.assertEqual(ringbench_build.version(), v)

    def test_cli_prints_it(self):
        r = subprocess.run([sys.executable, "-m", "ringbench_analysis", "--version"],
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ANALYSIS})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), f"rb-analysis {cmake_version()}")


class Backend(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def check_wheel(self, path, want_files):
        """Checks the wheel at `path` (files, RECORD, metadata); returns {name: bytes}."""
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
            info = f"ringbench_analysis-{cmake_version()}.dist-info"
            self.assertEqual({n for n in names if not n.startswith(info)}, want_files)
            rows = list(csv.reader(io.StringIO(z.read(f"{info}/RECORD").decode())))
            self.assertEqual({r[0] for r in rows}, names)  # every file recorded, RECORD too
            for name, digest, size in rows:
                if name == f"{info}/RECORD":
                    continue
                data = z.read(name)
                want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                self.assertEqual((digest, int(size)), (f"sha256={want}", len(data)), name)
            meta = z.read(f"{info}/METADATA").decode()
            self.assertIn(f"Version: {cmake_version()}\n", meta)
            self.assertIn("Requires-Dist: numpy\n", meta)
            self.assertNotIn("h5py", meta)  # Debian's h5py is invisible to pip (deps.py says why)
            self.assertIn("rb-analysis = ringbench_analysis.__main__:main",
                          z.read(f"{info}/entry_points.txt").decode())
            return {n: z.read(n) for n in names}

    def test_wheel_holds_the_package_and_nothing_lands_in_the_tree(self):
        before = sorted(os.listdir(ANALYSIS))
        name = ringbench_build.build_wheel(self.tmp.name)
        self.assertEqual(os.listdir(self.tmp.name), [name])
        self.assertEqual(name, f"ringbench_analysis-{cmake_version()}-py3-none-any.whl")
        files = self.check_wheel(os.path.join(self.tmp.name, name), package_files(ANALYSIS))
        with open(os.path.join(ANALYSIS, "ringbench_analysis", "reader.py"), "rb") as f:
            self.assertEqual(files["ringbench_analysis/reader.py"], f.read())
        self.assertEqual(sorted(os.listdir(ANALYSIS)), before)

    def test_sdist_rebuilds_the_same_wheel(self):
        sdist = ringbench_build.build_sdist(self.tmp.name)
        with tarfile.open(os.path.join(self.tmp.name, sdist)) as t:
            t.extractall(os.path.join(self.tmp.name, "src"))
        root = os.path.join(self.tmp.name, "src", sdist[:-len(".tar.gz")])
        self.assertTrue(os.path.isfile(os.path.join(root, "PKG-INFO")))
        out = os.path.join(self.tmp.name, "out")
        os.mkdir(out)
        # The unpacked backend, in a fresh interpreter, builds from the unpacked tree alone.
        code = ("import sys; sys.path.insert(0, sys.argv[1]); import ringbench_build as b; "
                "print(b.build_wheel(sys.argv[2]))")
        r = subprocess.run([sys.executable, "-c", code, os.path.join(root, "_build_backend"), out],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.check_wheel(os.path.join(out, r.stdout.strip()), package_files(ANALYSIS))

    def test_editable_wheel_points_at_the_checkout(self):
        name = ringbench_build.build_editable(self.tmp.name)
        pth = "__editable__.ringbench_analysis.pth"
        files = self.check_wheel(os.path.join(self.tmp.name, name), {pth})
        self.assertEqual(files[pth].decode().strip(), ANALYSIS)

    def test_metadata_hook_matches_the_wheel(self):
        info = ringbench_build.prepare_metadata_for_build_wheel(self.tmp.name)
        with open(os.path.join(self.tmp.name, info, "METADATA")) as f:
            meta = f.read()
        with zipfile.ZipFile(os.path.join(self.tmp.name, ringbench_build.build_wheel(self.tmp.name))) as z:
            self.assertEqual(z.read(f"{info}/METADATA").decode(), meta)


class MissingModules(unittest.TestCase):
    """A Python without h5py (a venv from another python3) gets one message naming it, exit 2;
    an ImportError that is not a missing module stays a traceback (a bug to see)."""

    def run_blocked(self, blocked):
        code = ("import sys\n"
                f"for m in {blocked!r}: sys.modules[m] = None  # import of m raises ImportError\n"
                "from ringbench_analysis.__main__ import main\n"
                "sys.exit(main(['table', 'x.h5']))\n")
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": ANALYSIS}, cwd=self.tmp)

    def setUp(self):
        t = tempfile.TemporaryDirectory()
        self.addCleanup(t.cleanup)
        self.tmp = t.name

    def test_names_exactly_the_missing_module(self):
        r = self.run_blocked(["h5py"])
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(f"({sys.executable}, ", r.stderr)
        self.assertIn("cannot import h5py; ", r.stderr)
        self.assertIn("apt-get install python3-h5py,", r.stderr)
        self.assertNotIn("Traceback", r.stderr)

    def test_other_import_errors_keep_their_traceback(self):
        r = self.run_blocked(["ringbench_analysis.reader"])
        self.assertEqual(r.returncode, 1)
        self.assertIn("Traceback", r.stderr)
        self.assertNotIn("rb-analysis: this Python", r.stderr)


if __name__ == "__main__":
    unittest.main()
