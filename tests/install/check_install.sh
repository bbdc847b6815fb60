#!/usr/bin/env bash
# `cmake --install` into a fresh prefix gives a working program, kernel benchmark (CUDA builds),
# analysis command (the program's version), inputs, Slurm jobs and docs; the installed files run
# from the prefix alone, a Slurm job included.
set -euo pipefail
build="$1" prefix="$2"
rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" > "$prefix.log" 2>&1 || { cat "$prefix.log"; exit 1; }
fail() { echo "install check: $*" >&2; exit 1; }
[ -x "$prefix/bin/ringbench" ] || fail "bin/ringbench missing"
[ -L "$prefix/bin/rb-analysis" ] || fail "bin/rb-analysis missing"
for f in share/doc/ringbench/README.md share/doc/ringbench/architecture.md \
         share/doc/ringbench/hdf5-schema.md share/ringbench/inputs/small.yaml \
         share/ringbench/analysis/ringbench_analysis/__main__.py \
         share/ringbench/analysis/pyproject.toml share/ringbench/analysis/_build_backend/ringbench_build.py \
         share/ringbench/slurm/job_lib.sh share/ringbench/launch/common.sh share/ringbench/launch/knobs.sh; do
  [ -f "$prefix/$f" ] || fail "$f missing"
done
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
for job in "$src"/slurm/*.sbatch; do
  [ -x "$prefix/share/ringbench/slurm/$(basename "$job")" ] || fail "share/ringbench/slurm/$(basename "$job") missing or not executable"
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
# One release: rb-analysis --version names ringbench --version's (CMakeLists.txt's project VERSION).
version="$("$prefix/bin/ringbench" --version | sed -n '1s/^ringbench \([^ ]*\).*/\1/p')"
[ -n "$version" ] && [ "$("$prefix/bin/rb-analysis" --version)" = "rb-analysis $version" ] \
  || fail "rb-analysis --version '$("$prefix/bin/rb-analysis" --version)' is not ringbench's '$version'"
# A Slurm job from the prefix (outside Slurm: one task): RINGBENCH_ROOT=share/ringbench, the
# installed bin/ringbench found beside it, the host tuning grid, results under RB_SCRATCH.
jobs="$prefix.jobs"
rm -rf "$jobs"
env -u RINGBENCH_BIN -u RINGBENCH_BUILD_DIR RINGBENCH_ROOT="$prefix/share/ringbench" RB_LAUNCHER=mpirun \
  RB_TUNING_CONFIG="$prefix/share/ringbench/inputs/tuning_host.yaml" RB_SCRATCH="$jobs" \
  bash "$prefix/share/ringbench/slurm/tune.sbatch" > "$prefix.tune.log" 2>&1 \
  || { cat "$prefix.tune.log"; fail "the installed slurm/tune.sbatch failed"; }
grep -q "^+ mpirun .* $prefix/bin/ringbench " "$prefix.tune.log" || fail "the installed tune.sbatch did not run $prefix/bin/ringbench"
grep -q "^tune: VERDICT 0: " "$jobs/tune_nojob/verdict.txt" && [ -f "$jobs/tune_nojob/tuned.yaml" ] \
  || fail "the installed tune.sbatch wrote no policy or verdict in RB_SCRATCH"
"$prefix/bin/ringbench" "$prefix/share/ringbench/inputs/small.yaml" --dry-run --only nothing-here \
  >/dev/null 2>&1 && fail "--only with an unknown sweep should be refused"
echo "install check: ok ($prefix)"
