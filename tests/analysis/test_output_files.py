"""The rule for every file rb-analysis writes (docs/analysis.md, "Output files"): it goes through
ringbench_analysis/outfile.py, a temp file in the destination's folder renamed over the path when
whole. So an existing file there is replaced without --force (these files are derived from
inputs that stay), and a command that fails while writing leaves the old file as it was and no
temp file. Issue #31 round two, item 4: `tune --out` replaced an existing file, and whether that
was meant was written nowhere.
Run: PYTHONPATH=analysis:tests/analysis python3 -m unittest tests/analysis/test_output_files.py
"""
import ast
import os
import sys
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(__file__))
from tempdir_case import TempDirCase, rb_analysis, write_text  # noqa: E402  (first: analysis/ on the path)

import synthetic  # noqa: E402
from ringbench_analysis import outfile  # noqa: E402
from test_scheme_model import make_scheme_file  # noqa: E402
from test_tune_cli import make_tuning_file  # noqa: E402

PACKAGE = os.path.join(os.path.dirname(os.path.abspath(outfile.__file__)))


def _read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


class ReplacedWholeTest(TempDirCase):
    """Each kind of output option, on a path that holds a file already."""

    def commands(self):
        a = synthetic.make_run(self.path("a.h5"), 2)
        b = synthetic.make_run(self.path("b.h5"), 2)
        kt = make_tuning_file(self.path("kt.h5"))
        schemes = make_scheme_file(self.path("schemes.h5"))[0]
        out = self.path("out.file")
        return out, [["export", a, "--format", "csv", "--out", out],
                     ["compare", a, b, "--json", out],
                     ["tune", kt, "--safety-margin", "1.2", "--out", out],
                     ["tune-cp", schemes, "--safety-margin", "1.1", "--out", out],
                     ["scheme-model", schemes, "--json", out]]

    def leftovers(self):
        return [n for n in os.listdir(self.dir) if n.startswith(".out.file.")]

    def test_an_existing_file_is_replaced_whole(self):
        out, commands = self.commands()
        for argv in commands:
            with self.subTest(command=argv[0]):
                write_text(out, "an earlier output\n")
                rc, _, err = rb_analysis(*argv)
                self.assertIn(rc, (0, 1), err)  # 1: compare's or scheme's verdict, not an error
                self.assertNotIn("an earlier output", _read(out))
                self.assertEqual(self.leftovers(), [])

    def test_a_failed_write_leaves_the_old_file(self):
        out, commands = self.commands()
        for argv in commands:
            with self.subTest(command=argv[0]):
                write_text(out, "an earlier output\n")
                with mock.patch.object(outfile.os, "replace", side_effect=OSError(28, "No space left on device")):
                    try:
                        rb_analysis(*argv)
                    except OSError:
                        pass  # how a command reports it is its business; the file is the point here
                self.assertEqual(_read(out), "an earlier output\n")
                self.assertEqual(self.leftovers(), [])


def _writes_outside_outfile(tree):
    """(line, what) of each call in a module that writes a file by itself: open() (or os.fdopen,
    io.open) in a writing mode, savefig, shutil's copies, os.rename / os.replace."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
        if name in ("open", "fdopen") and owner in ("", "io", "os"):
            mode = node.args[1] if len(node.args) > 1 else next(
                (k.value for k in node.keywords if k.arg == "mode"), None)
            if isinstance(mode, ast.Constant) and any(c in str(mode.value) for c in "wax+"):
                found.append((node.lineno, f"{name}(..., {mode.value!r})"))
        elif name == "savefig" or (owner == "shutil" and name.startswith("copy") and name != "copyfileobj") \
                or (owner == "os" and name in ("rename", "replace")):
            found.append((node.lineno, f"{owner + '.' if owner else ''}{name}"))
    return found


class EveryWriteGoesThroughOutfileTest(unittest.TestCase):
    def test_no_module_writes_a_file_by_itself(self):
        offenders = []
        for name in sorted(os.listdir(PACKAGE)):
            if not name.endswith(".py") or name == "outfile.py":
                continue
            with open(os.path.join(PACKAGE, name), encoding="utf-8") as f:
                tree = ast.parse(f.read(), name)
            offenders += [f"{name}:{line}: {what}" for line, what in _writes_outside_outfile(tree)]
        self.assertEqual(offenders, [], "write through outfile.replacing / save_figure instead")


if __name__ == "__main__":
    unittest.main()
