#!/usr/bin/env bash
# The contention experiment (issue #14, docs/sweeps/contention.md): one mpirun runs every phase
# of the config, then `rb-analysis report` writes the report (with its Contention section).
#   launch/contention.sh [CONFIG.yaml] [extra ringbench args]
# CONFIG defaults to inputs/contention.yaml on a machine with GPUs, else
# inputs/contention_host.yaml. Environment: RB_NP (ranks; default 4 for contention.yaml, 2
# otherwise), RB_OUT_DIR (default results/contention_<UTC time>/), RB_SKIP_BUILD=1 (use the
# build as it is), RINGBENCH_BIN, RB_MPIRUN, RB_MPI_ARGS. Ranks are launched with --bind-to none
# (RB_MPI_BIND): the sweep binds them itself, phase by phase.
set -euo pipefail
source "$(dirname "$0")/run_common.sh"
if [ $# -gt 0 ] && [[ "$1" == *.yaml || "$1" == *.yml ]]; then
  config="$1"; shift
elif [ "$RB_GPUS" -gt 0 ]; then
  config="$RB_ROOT/inputs/contention.yaml"
else
  config="$RB_ROOT/inputs/contention_host.yaml"
fi
default_np=$([ "$(basename "$config")" = contention.yaml ] && echo 4 || echo 2)
np=$(rb_knob_int RB_NP "${RB_NP:-$default_np}")
RB_MPI_BIND="${RB_MPI_BIND:-none}"
dir="${RB_OUT_DIR:-$RB_ROOT/results/contention_$(rb_stamp)}"
mkdir -p "$dir"
cp "$config" "$dir/config.yaml"
rb_mpirun_cmd "$np"
status=0
rb_run "${RB_CMD[@]}" "$(rb_ringbench_bin)" "$config" --output "$dir/contention.h5" "$@" || status=$?
if [ -f "$dir/contention.h5" ]; then
  rb_run "$RB_ANALYSIS" report "$dir/contention.h5" --out "$dir/report"
fi
exit "$status"
