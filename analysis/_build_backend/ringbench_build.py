"""PEP 517 build backend of ringbench-analysis: in the tree, standard library only.

Why not setuptools: pip runs the backend with the Python it installs into. With
--no-build-isolation that Python must bring setuptools and, below setuptools 70.1, wheel:
pyenv's and python.org's Pythons 3.9-3.11 make venvs without wheel ("invalid command
'bdist_wheel'"), 3.12 and later without setuptools; with build isolation pip would download
them, which an offline cluster cannot. This backend needs neither, so `pip install ./analysis`
works offline with or without build isolation, on any Python 3.9+ and pip 21.3+. It writes
only into the directories pip hands it: no build/ or *.egg-info appears in the checkout.

The package is pure Python: the wheel is its files, the metadata below and the console script.
"""
import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile

NAME = "ringbench-analysis"
SUMMARY = "Reads ringbench HDF5 files (schema_version 2), writes reports with plots, compares runs"
REQUIRES_PYTHON = ">=3.9"
# h5py is needed too but not declared: Debian's python3-h5py registers as
# "h5py._debian_h5py_serial", so pip would not see it and, offline, fail to download one.
# rb-analysis names every missing module itself (ringbench_analysis/deps.py).
REQUIRES = ["numpy", "matplotlib", "pandas"]
EXTRAS = {"yaml": ["PyYAML"]}
SCRIPTS = {"rb-analysis": "ringbench_analysis.__main__:main"}
PACKAGE = "ringbench_analysis"

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # analysis/
DIST = NAME.replace("-", "_")
TAG = "py3-none-any"
# Fixed times inside the archives (SOURCE_DATE_EPOCH when set): the same tree, the same bytes.
EPOCH = max(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")), 315532800)  # >= 1980 for zip


def version():
    """ringbench_analysis/_version.py's __version__ (read, not imported: no dependency runs)."""
    with open(os.path.join(ROOT, PACKAGE, "_version.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    if not m:
        raise RuntimeError(f"no __version__ = \"...\" line in {PACKAGE}/_version.py")
    return m.group(1)


def _metadata():
    lines = ["Metadata-Version: 2.1", f"Name: {NAME}", f"Version: {version()}",
             f"Summary: {SUMMARY}", f"Requires-Python: {REQUIRES_PYTHON}"]
    lines += [f"Requires-Dist: {r}" for r in REQUIRES]
    for extra, reqs in EXTRAS.items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {r}; extra == "{extra}"' for r in reqs]
    return "\n".join(lines) + "\n"


def _dist_info():
    """{name: bytes} of the .dist-info folder, RECORD excepted."""
    wheel = f"Wheel-Version: 1.0\nGenerator: ringbench_build\nRoot-Is-Purelib: true\nTag: {TAG}\n"
    scripts = "[console_scripts]\n" + "".join(f"{k} = {v}\n" for k, v in SCRIPTS.items())
    return {"METADATA": _metadata().encode(), "WHEEL": wheel.encode(),
            "entry_points.txt": scripts.encode(), "top_level.txt": f"{PACKAGE}\n".encode()}


def _package_files(top):
    """(archive name, path) of every file under analysis/<top>, caches left out."""
    out = []
    for d, dirs, files in os.walk(os.path.join(ROOT, top)):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for f in sorted(files):
            if not f.endswith((".pyc", ".pyo")):
                p = os.path.join(d, f)
                out.append((os.path.relpath(p, ROOT).replace(os.sep, "/"), p))
    return out


def _write_wheel(directory, entries):
    """entries: {archive name: bytes} -> the wheel's file name in `directory`, with its RECORD."""
    info = f"{DIST}-{version()}.dist-info"
    entries = dict(entries)
    entries.update({f"{info}/{k}": v for k, v in _dist_info().items()})
    record = []
    for name, data in entries.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    entries[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = f"{DIST}-{version()}-{TAG}.whl"
    tmp = os.path.join(directory, wheel + ".part")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in entries.items():  # dist-info last, as the wheel spec recommends
            zi = zipfile.ZipInfo(name, time.gmtime(EPOCH)[:6])
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    os.replace(tmp, os.path.join(directory, wheel))
    return wheel


def _read(path):
    with open(path, "rb") as f:
        return f.read()


# ---- PEP 517 hooks ----

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = f"{DIST}-{version()}.dist-info"
    os.makedirs(os.path.join(metadata_directory, info), exist_ok=True)
    for name, data in _dist_info().items():
        with open(os.path.join(metadata_directory, info, name), "wb") as f:
            f.write(data)
    return info


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, {n: _read(p) for n, p in _package_files(PACKAGE)})


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """PEP 660 (pip install -e): a .pth file that puts analysis/ on sys.path, so edits apply."""
    return _write_wheel(wheel_directory, {f"__editable__.{DIST}.pth": (ROOT + "\n").encode()})


def build_sdist(sdist_directory, config_settings=None):
    base = f"{DIST}-{version()}"
    files = [("pyproject.toml", os.path.join(ROOT, "pyproject.toml")),
             ("rb-analysis", os.path.join(ROOT, "rb-analysis"))]
    files += _package_files("_build_backend") + _package_files(PACKAGE)
    name = base + ".tar.gz"
    tmp = os.path.join(sdist_directory, name + ".part")
    with tarfile.open(tmp, "w:gz", format=tarfile.PAX_FORMAT) as t:
        for arc, data in [("PKG-INFO", _metadata().encode())] + [(a, _read(p)) for a, p in files]:
            ti = tarfile.TarInfo(f"{base}/{arc}")
            ti.size, ti.mtime = len(data), EPOCH
            ti.mode = 0o755 if arc == "rb-analysis" else 0o644
            t.addfile(ti, io.BytesIO(data))
    os.replace(tmp, os.path.join(sdist_directory, name))
    return name
