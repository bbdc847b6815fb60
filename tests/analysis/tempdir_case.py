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

from ringbench_analysis.__main__ import main  # noqa: E402  (analysis/ is on the path from here)


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
