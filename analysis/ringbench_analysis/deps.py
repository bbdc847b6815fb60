"""The third-party modules rb-analysis needs, and one message naming those this Python lacks.

pip cannot check h5py (Debian's python3-h5py registers under another name, so it is not
declared), and a venv made from a Python that is not Debian's sees none of Debian's packages:
a missing module would otherwise surface as a traceback from whichever import ran first.
"""
import importlib
import sys

# module -> Debian package that provides it
REQUIRED = {"h5py": "python3-h5py", "numpy": "python3-numpy", "pandas": "python3-pandas",
            "matplotlib": "python3-matplotlib"}


def missing():
    """The REQUIRED modules this Python cannot import (a found but broken module counts)."""
    lost = []
    for name in REQUIRED:
        try:
            importlib.import_module(name)
        except Exception:  # an ABI mismatch raises ImportError, a broken install anything
            lost.append(name)
    return lost


def message(lost):
    """What to install, for the modules in `lost`, and which Python lacks them."""
    exe = sys.executable or "python3"
    ver = ".".join(map(str, sys.version_info[:3]))
    debian = " ".join(REQUIRED[m] for m in lost)
    return (f"rb-analysis: this Python ({exe}, {ver}) cannot import {', '.join(lost)}; "
            f"rb-analysis needs {', '.join(REQUIRED)}. "
            f"On Debian/Ubuntu: apt-get install {debian}, and run rb-analysis with /usr/bin/python3 "
            f"(a venv made from it with --system-site-packages sees them; one made from another "
            f"python3 does not). Elsewhere: pip install {' '.join(lost)}, or load the site's modules.")
