#!/usr/bin/env bash
# Runs the GPU test binaries and a GPU job from a bundle made by launch/device_bundle.sh, on a
# GPU node that has MPI, CUDA and NCCL but perhaps not the rest (no ctest tree needed):
#   launch/gpu_node_check.sh BUNDLE OUT_DIR NGPUS [CONFIG]
# Each step has its own time limit, so one hang cannot eat the whole allocation; a summary
# line per step goes to OUT_DIR/summary.txt. Exit status: the number of failed steps.
set -uo pipefail
bundle="$1"; out="$2"; ngpus="$3"; config="${4:-inputs/large.yaml}"
source "$(dirname "$0")/gpu_node.sh"
rb_gpu_node_start "$out"
failed=0
step() {  # step NAME LIMIT_S COMMAND...
  local name="$1" limit="$2"; shift 2
  local t0; t0=$(date +%s%N)
  timeout --kill-after=10 "$limit" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  local dt=$(( ($(date +%s%N) - t0) / 1000000 ))
  local verdict=pass; [ $rc -eq 77 ] && verdict=skip; [ $rc -ne 0 ] && [ $rc -ne 77 ] && { verdict=FAIL; failed=$((failed+1)); }
  printf '%-28s %-4s rc=%-3d %6d ms\n' "$name" "$verdict" "$rc" "$dt" | tee -a "$out/summary.txt"
}
mpi="mpirun --oversubscribe --bind-to none"
nvidia-smi --query-gpu=index,name,pci.bus_id,clocks.sm,clocks.max.sm,memory.total --format=csv > "$out/gpus.csv" 2>&1
nvidia-smi topo -m > "$out/topo.txt" 2>&1
for t in ringbench_test_cuda_kernels ringbench_test_cuda_backend ringbench_test_cuda_views; do
  [ -x "$bundle/$t" ] && step "$t" 150 $mpi -np 1 "$bundle/$t"
done
for n in 1 2; do
  [ "$n" -le "$ngpus" ] || continue
  for t in ringbench_test_cuda_nccl test_runtime_gpu test_profiling_gpu test_ring_mpi_gpu; do
    [ -x "$bundle/$t" ] && step "${t}_np$n" 120 $mpi -np "$n" "$bundle/$t"
  done
done
# GPU-path behaviour: an out-of-memory point is recorded and skipped, dilated causal rings pass
# parity over NCCL. The step fails on a parity failure or a crash; an oom point does not fail
# a run, so whether the 8M-token point really was `oom` is read from gpu_checks.h5
# (/sweeps/oom_then_ok/status[:, 0]) or the log's "out of memory, skipped" line.
step gpu_checks 240 mpirun -np "$ngpus" --bind-to numa "$bundle/ringbench" "$RB_ROOT/inputs/gpu_checks.yaml" \
  --output "$out/gpu_checks.h5" --force
cp "$config" "$out/job.yaml"
step job_dry_run 60 mpirun -np "$ngpus" --bind-to numa "$bundle/ringbench" "$out/job.yaml" --dry-run
[ "${RB_SKIP_JOB:-0}" = 1 ] && exit "$failed"
step job "${RB_JOB_LIMIT_S:-400}" mpirun -np "$ngpus" --bind-to numa "$bundle/ringbench" "$out/job.yaml" \
  --output "$out/job.h5" --force ${RB_JOB_ARGS:-}
exit "$failed"
