# Shared start of validate.sh, sweep.sh, large_seq.sh and scaling.sh: setup (unless
# RB_SKIP_BUILD=1), the knobs, and the GPU count of this machine.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$(dirname "${BASH_SOURCE[0]}")/knobs.sh"
if [ "${RB_SKIP_BUILD:-0}" = 1 ]; then
  rb_mpi_env
else
  rb_setup
fi
RB_ANALYSIS="$RB_ROOT/analysis/rb-analysis"
RB_GPUS=0
if command -v nvidia-smi >/dev/null 2>&1; then
  RB_GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
fi
rb_stamp() { date -u +%Y%m%dT%H%M%SZ; }
# On a GPU machine ringbench binds each rank near its GPU itself; mpirun must not pin first.
if [ "$RB_GPUS" -gt 0 ]; then
  : "${RB_BINDING:=gpu-near}"
  : "${RB_MPI_BIND:=none}"
fi
