"""Set-up shared by the analysis unit tests: analysis/ on the import path, a skip (exit 77)
where h5py or numpy is missing, and a temporary folder per test (TempDirCase). Import it first,
after putting this folder on sys.path."""
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


class TempDirCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)
