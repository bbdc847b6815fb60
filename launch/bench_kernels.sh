#!/usr/bin/env bash
# Builds the CUDA attention kernels, their standalone benchmark (ringbench_kernel_bench) and
# optionally the standalone GPU kernel tests with plain nvcc (no MPI/HDF5/Kokkos needed), then
# runs the tests and a benchmark sweep. Logs (ptxas resource report, SASS instruction counts,
# test output, benchmark tables) go to $LOG.
#
#   launch/bench_kernels.sh [--tests] [--doctest DIR] [--sweep quick|full|variants|none[,...]] [--ncu]
#   launch/bench_kernels.sh --help   (this text, then the benchmark's options and kernel paths)
#
# Environment: NVCC (nvcc), ARCH (default -gencode=arch=compute_90a,code=sm_90a),
# BUILD (build-kernels), LOG ($BUILD/logs), JOBS (parallel compiles, 8).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-kernels}
LOG=${LOG:-$BUILD/logs}
NVCC=${NVCC:-nvcc}
ARCH=${ARCH:--gencode=arch=compute_90a,code=sm_90a}
TESTS=0; DOCTEST=""; SWEEP=quick; NCU=0; HELP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --tests) TESTS=1 ;;
    --doctest) DOCTEST="$2"; shift ;;
    --sweep) SWEEP="$2"; shift ;;
    --ncu) NCU=1 ;;
    --help|-h) HELP=1 ;;
    *) echo "bench_kernels.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
if [ "$HELP" = 1 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
  SWEEP=none  # build the benchmark (its --help lists the table), run nothing
fi
mkdir -p "$BUILD" "$LOG"
FLAGS="-O3 -std=c++17 --expt-relaxed-constexpr -lineinfo $ARCH -I$ROOT/kernels -I$ROOT/kernels/cuda -I$ROOT/src"

echo "== build ($NVCC, $ARCH)"
pids=()
# The cudnn path where cuDNN's header and library are found (the GPU machine's own cuDNN).
LIBS="-lcublas"
if "$NVCC" $FLAGS -DRINGBENCH_HAVE_CUDNN=1 -c "$ROOT/kernels/cuda/cudnn_attention.cu" -o "$BUILD/cudnn_attention.o" \
     2>"$BUILD/cudnn_build.txt"; then
  FLAGS="$FLAGS -DRINGBENCH_HAVE_CUDNN=1"; CUDNN_OBJ="$BUILD/cudnn_attention.o"; LIBS="$LIBS -lcudnn"
  echo "cudnn path: built"
else
  CUDNN_OBJ=""
  echo "cudnn path: not built (no cuDNN here; see $BUILD/cudnn_build.txt)"
fi
# The kernels, the backend and the kernel path table (which needs RINGBENCH_HAVE_CUDA to mark
# the CUDA rows built).
FLAGS="$FLAGS -DRINGBENCH_HAVE_CUDA=1"
for f in elementwise naive flash_fwd flash_bwd simple; do
  "$NVCC" $FLAGS -Xptxas -v -c "$ROOT/kernels/cuda/$f.cu" -o "$BUILD/$f.o" 2>"$BUILD/ptxas_$f.txt" &
  pids+=($!)
done
"$NVCC" $FLAGS -x cu -c "$ROOT/kernels/cuda/cuda_backend.cpp" -o "$BUILD/cuda_backend.o" & pids+=($!)
"$NVCC" $FLAGS -x cu -c "$ROOT/kernels/kernel_paths.cpp" -o "$BUILD/kernel_paths.o" & pids+=($!)
for p in "${pids[@]}"; do wait "$p" || { cat "$BUILD"/ptxas_*.txt; echo "build failed" >&2; exit 1; }; done
OBJS="$BUILD/elementwise.o $BUILD/naive.o $BUILD/flash_fwd.o $BUILD/flash_bwd.o $BUILD/simple.o"
OBJS="$OBJS $BUILD/cuda_backend.o $BUILD/kernel_paths.o $CUDNN_OBJ"
"$NVCC" $FLAGS "$ROOT/kernels/cuda/bench_attention.cu" $OBJS $LIBS -o "$BUILD/ringbench_kernel_bench"

# Resources per kernel and which matrix instructions the SASS uses (HMMA = mma.sync,
# HGMMA = wgmma).
{
  grep -h -E "Compiling entry|registers|spill" "$BUILD"/ptxas_flash_*.txt || true
  if command -v cuobjdump >/dev/null; then
    for f in flash_fwd flash_bwd; do
      echo "SASS $f: HMMA $(cuobjdump --dump-sass "$BUILD/$f.o" | grep -c HMMA) HGMMA $(cuobjdump --dump-sass "$BUILD/$f.o" | grep -c HGMMA) LDSM $(cuobjdump --dump-sass "$BUILD/$f.o" | grep -c LDSM) LDL $(cuobjdump --dump-sass "$BUILD/$f.o" | grep -c 'LDL')"
    done
  fi
} >"$LOG/resources.txt"
cat "$LOG/resources.txt"

if [ "$TESTS" = 1 ]; then
  echo "== kernel tests"
  INC=""
  [ -n "$DOCTEST" ] && INC="-I$DOCTEST"
  "$NVCC" $FLAGS $INC -x cu -c "$ROOT/tests/cuda/test_kernels.cpp" -o "$BUILD/test_kernels.o"
  "$NVCC" $FLAGS $INC -x cu -c "$ROOT/tests/cuda/standalone_main.cpp" -o "$BUILD/standalone_main.o"
  "$NVCC" $FLAGS $INC -x cu -c "$ROOT/tests/cuda/test_backend.cpp" -o "$BUILD/test_backend.o"
  "$NVCC" $FLAGS $INC -x cu -c "$ROOT/tests/cuda/test_kernel_paths.cpp" -o "$BUILD/test_kernel_paths.o"
  "$NVCC" $FLAGS "$BUILD/test_kernels.o" "$BUILD/test_backend.o" "$BUILD/test_kernel_paths.o" \
    "$BUILD/standalone_main.o" $OBJS $LIBS -o "$BUILD/ringbench_kernel_tests"
  "$BUILD/ringbench_kernel_tests" >"$LOG/kernel_tests.txt" 2>&1 || echo "kernel tests exit code $?"
  grep -E "MESSAGE|ERROR|values|test cases|assertions|SKIPPED" "$LOG/kernel_tests.txt" | sed -e 's/^.*MESSAGE: //' | head -200
fi

B="$BUILD/ringbench_kernel_bench"
if [ "$HELP" = 1 ]; then "$B" --help; exit 0; fi
run() { echo "-- $*"; "$B" "$@" 2>&1 | tee -a "$LOG/bench.txt"; }
for sweep in ${SWEEP//,/ }; do
case "$sweep" in
  none) ;;
  quick)
    run --seq 8192 --heads 16 --head-dim 128 --dtype bf16 --repeats 5
    run --seq 8192 --heads 16 --head-dim 128 --dtype bf16 --causal --repeats 5 ;;
  variants)
    # every tile variant of the flash row (see --help), bf16 d128 S=16K, each checked
    # against the naive path
    run --seq 16384 --heads 16 --head-dim 128 --dtype bf16 --repeats 5 --kernels flash --all-tiles
    run --seq 16384 --heads 16 --head-dim 128 --dtype bf16 --causal --repeats 5 --kernels flash --all-tiles --no-backward ;;
  full)
    for c in "" "--causal"; do
      run --seq 32768 --heads 16 --head-dim 128 --dtype bf16 $c --repeats 10 --warmup 3
    done
    run --seq 32768 --heads 16 --head-dim 64 --dtype bf16 --repeats 10 --kernels flash --no-check
    run --seq 32768 --heads 16 --head-dim 128 --dtype fp16 --repeats 10 --kernels flash --no-check
    run --seq 16384 --heads 16 --head-dim 128 --dtype bf16 --segment 4096 --rate 4 --repeats 10 ;;
  *) echo "bench_kernels.sh: unknown sweep $sweep" >&2; exit 2 ;;
esac
done

if [ "$NCU" = 1 ] && command -v ncu >/dev/null; then
  echo "== ncu (flash forward and backward, S=8192)"
  ncu --clock-control none --kernel-name regex:flash_ --launch-count 2 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    "$B" --seq 8192 --heads 16 --head-dim 128 --dtype bf16 --kernels flash --no-check --repeats 1 --warmup 0 \
    >"$LOG/ncu.txt" 2>&1 || echo "ncu failed (see ncu.txt)"
  grep -E "flash_|Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Stall|Warp Cycles" "$LOG/ncu.txt" | head -60
fi
