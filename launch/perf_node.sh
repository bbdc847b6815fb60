#!/usr/bin/env bash
# The measurement plan behind docs/performance.md, for one GPU node, from a bundle made by
# launch/device_bundle.sh (or a build folder holding ringbench and ringbench_kernel_bench):
#   launch/perf_node.sh BUNDLE OUT_DIR NGPUS [NCCL_TESTS_DIR]
# 1. single-GPU block kernels (ringbench_kernel_bench, median of 10 after 3 warmups);
# 2. ring weak scaling, 32K tokens per GPU (inputs/ring_weak_scaling.yaml cut to NGPUS);
# 3. collectives at 64 MiB..1 GiB over all GPUs, and, with NCCL_TESTS_DIR, nccl-tests on the
#    same sizes right after, compared by tests/profiling/compare_nccl_tests.py.
# Logs and HDF5 files go to OUT_DIR; each step has its own time limit. RB_PERF_STEPS picks
# steps (default "kernels,weak,coll"), e.g. to fit one step into a shorter allocation.
set -uo pipefail
bundle="$1"; out="$2"; ngpus="$3"; nccl_tests="${4:-}"
source "$(dirname "$0")/gpu_node.sh"
rb_gpu_node_start "$out"
limit() { local s="$1"; shift; timeout --kill-after=10 "$s" "$@"; }
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,memory.total --format=csv > "$out/gpus.csv" 2>&1

steps=",${RB_PERF_STEPS:-kernels,weak,coll},"
step() { case "$steps" in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

kb="$bundle/ringbench_kernel_bench"
if step kernels && [ -x "$kb" ]; then
  {
    for c in "" "--causal"; do
      echo "-- S=32768 h=16 d=128 bf16 $c"
      limit 120 "$kb" --seq 32768 --heads 16 --head-dim 128 --dtype bf16 $c --repeats 10 --warmup 3
    done
    echo "-- S=32768 h=16 d=64 bf16"
    limit 120 "$kb" --seq 32768 --heads 16 --head-dim 64 --dtype bf16 --repeats 10 --kernels flash,cudnn --no-check
  } > "$out/kernels.txt" 2>&1
fi

if step weak; then
sizes=1; seqs=32768; r=2; s=65536
while [ "$r" -le "$ngpus" ] && [ "$r" -le 4 ]; do sizes="$sizes, $r"; seqs="$seqs, $s"; r=$((r*2)); s=$((s*2)); done
sed -e "s/ring_sizes: \[1, 2, 4\]/ring_sizes: [$sizes]/" -e "s/seq_lengths: \[32768, 65536, 131072\]/seq_lengths: [$seqs]/" \
  "$RB_ROOT/inputs/ring_weak_scaling.yaml" > "$out/weak.yaml"
limit 480 mpirun -np "$ngpus" --bind-to numa "$bundle/ringbench" "$out/weak.yaml" --output "$out/weak.h5" --force \
  > "$out/weak.log" 2>&1
fi
step coll || exit 0

cat > "$out/coll.yaml" <<YAML
run: {name: coll_vs_nccl_tests}
backend: cuda
binding: {policy: gpu-near}
sweeps:
  - type: collectives
    operations: [all_reduce, all_gather, reduce_scatter, all_to_all, sendrecv]
    min_bytes: 64MiB
    max_bytes: 1GiB
    factor: 2
    dtypes: [float32]
    in_place: [false, true]
    groups: [world]
    warmup: 5
    iterations: 20
YAML
limit 180 mpirun -np "$ngpus" --bind-to numa "$bundle/ringbench" "$out/coll.yaml" --output "$out/coll.h5" --force \
  > "$out/coll.log" 2>&1
if [ -n "$nccl_tests" ]; then
  for op in all_reduce all_gather reduce_scatter alltoall sendrecv; do
    limit 120 mpirun -np "$ngpus" --bind-to numa "$nccl_tests/${op}_perf" -b 64M -e 1G -f 2 -g 1 -w 5 -n 20 -c 1 \
      > "$out/nccl_tests_$op.txt" 2>&1
  done
fi
