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
# rb_job_dir NAME PRESET [COUNTS]: the output directory ($RB_OUT_DIR, else results/NAME_<UTC
# time>/), created, in $dir; and the config in $config: $RB_CONFIG, else $dir/config.yaml
# written from PRESET with sequence lengths that fit every rank count of COUNTS.
rb_job_dir() {
  dir="${RB_OUT_DIR:-$RB_ROOT/results/$1_$(rb_stamp)}"
  mkdir -p "$dir"
  config="${RB_CONFIG:-$dir/config.yaml}"
  [ -n "${RB_CONFIG:-}" ] || RB_OUT_DIR="$dir" rb_write_config "$config" "$2" "${3:-}"
}
# rb_job NAME PRESET NP [ringbench args]: one run on NP ranks into $dir/NAME.h5, then its
# report in $dir/report. A failed run (a parity failure, an oom point) still gets its report,
# which says what failed; returns the run's exit code.
rb_job() {
  local name="$1" np="$3" status=0
  rb_job_dir "$1" "$2" "$np"
  shift 3
  rb_mpirun_cmd "$np"
  rb_run "${RB_CMD[@]}" "$(rb_ringbench_bin)" "$config" --output "$dir/$name.h5" "$@" || status=$?
  [ -f "$dir/$name.h5" ] && rb_run "$RB_ANALYSIS" report "$dir/$name.h5" --out "$dir/report"
  return "$status"
}
