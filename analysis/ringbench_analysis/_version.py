# rb-analysis's version. It follows CMakeLists.txt's project(ringbench VERSION ...): configure
# stops when the two differ, and tests/analysis/test_packaging.py checks them, so
# `rb-analysis --version` and `ringbench --version` name the same release. pip's build
# (analysis/_build_backend) reads this line too.
__version__ = "0.1.0"
