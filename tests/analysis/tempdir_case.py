"""Set-up shared by the analysis unit tests: analysis/ on the import path, a skip (exit 77)
where h5py or numpy is missing, a temporary folder per test (TempDirCase) and rb-analysis run in
this process (rb_analysis). Import it first, after putting this folder on sys.path."""
import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "analysis"))

try:  # imported to see that they load (else the tests skip); the tests import them themselves
    import h5py  # noqa: F401  # pylint: disable=unused-import
    import numpy  # noqa: F401  # pylint: disable=unused-import
except ImportError as exc:  # pragma: no cover
    print(f"SKIPPED: {exc}")
    sys.exit(77)

from ringbench_analysis import filecheck  # noqa: E402  (analysis/ is on the path from here)
from ringbench_analysis.__main__ import main  # noqa: E402


def rb_analysis(*argv):
    """(exit code, stdout, stderr) of `rb-analysis ARGV` run in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def write_text(path, text):
    """path, holding text (and nothing else)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


class TempDirCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def assert_refused(self, load, text, error, regex, name="bad.yaml"):
        """load(a file holding text) raises error, its message matching regex."""
        with self.assertRaisesRegex(error, regex):
            load(write_text(self.path(name), text))


class HostileCase(TempDirCase):
    """A TempDirCase whose files filecheck checks afresh (a test may change how its checking
    process starts), with the assertion of a refusal: exit 2 and one line on stderr."""

    def setUp(self):
        super().setUp()
        filecheck.stop()
        filecheck._passed.clear()  # pylint: disable=protected-access

    def tearDown(self):
        filecheck.stop()
        super().tearDown()

    def assert_message(self, rc, err, path, text, code=2):
        """Exit `code`, and stderr one line naming `path` and containing `text`."""
        self.assertEqual(rc, code, err)
        self.assertNotIn("Traceback", err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn(path, err)
        self.assertIn(text, err)
