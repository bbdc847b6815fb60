#!/usr/bin/env bash
# `cmake --install` into a fresh prefix gives a working program, kernel benchmark (CUDA builds),
# analysis command, inputs and docs; the installed files run from the prefix alone.
set -euo pipefail
build="$1" prefix="$2"
rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" > "$prefix.log" 2>&1 || { cat "$prefix.log"; exit 1; }
fail() { echo "install check: $*" >&2; exit 1; }
[ -x "$prefix/bin/ringbench" ] || fail "bin/ringbench missing"
[ -L "$prefix/bin/rb-analysis" ] || fail "bin/rb-analysis missing"
for f in share/doc/ringbench/README.md share/doc/ringbench/architecture.md \
         share/doc/ringbench/hdf5-schema.md share/ringbench/inputs/small.yaml \
         share/ringbench/analysis/ringbench_analysis/__main__.py; do
  [ -f "$prefix/$f" ] || fail "$f missing"
done
if grep -q '^RINGBENCH_HAVE_CUDA:INTERNAL=ON' "$build/CMakeCache.txt" 2>/dev/null ||
   [ -f "$build/kernels/cuda/ringbench_kernel_bench" ]; then
  [ -x "$prefix/bin/ringbench_kernel_bench" ] || fail "bin/ringbench_kernel_bench missing in a CUDA build"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Run from elsewhere so nothing is found through the source or build tree.
cd /
"$prefix/bin/ringbench" --version | grep -q '^ringbench ' || fail "ringbench --version"
help="$("$prefix/bin/ringbench" --help)" || fail "ringbench --help exited non-zero"
case "$help" in [Uu]sage*) ;; *) fail "ringbench --help does not start with its usage";; esac
"$prefix/bin/rb-analysis" --help | grep -q 'report' || fail "rb-analysis --help"
"$prefix/bin/ringbench" "$prefix/share/ringbench/inputs/small.yaml" --dry-run --only nothing-here \
  >/dev/null 2>&1 && fail "--only with an unknown sweep should be refused"
echo "install check: ok ($prefix)"
