#!/usr/bin/env bash
# The full sweep: ring attention over RB_SEQ_LENS (default 4096,16384,65536) on RB_NP ranks
# (default: one per GPU of this machine, 2 without GPUs), with the collectives and p2p
# profiling that feed the cost model, then the report.
#   bash launch/sweep.sh [extra ringbench args]
# Knobs (environment): docs/launch-and-slurm.md. Output: $RB_OUT_DIR (default
# results/sweep_<UTC time>/) with sweep.h5, config.yaml and report/.
set -euo pipefail
source "$(dirname "$0")/run_common.sh"
default_np=$([ "$RB_GPUS" -gt 0 ] && echo "$RB_GPUS" || echo 2)
np=$(rb_knob_int RB_NP "${RB_NP:-$default_np}")
rb_job sweep sweep "$np" "$@"
