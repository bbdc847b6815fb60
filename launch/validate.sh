#!/usr/bin/env bash
# Quick validation: a small ring attention run (exact, causal, forward + backward with parity
# against the reference) plus the collectives and p2p profiling, on RB_NP ranks (default 2),
# then the report. Minutes on a laptop (host path), seconds on GPUs.
#   bash launch/validate.sh [extra ringbench args]
# Knobs (environment): docs/launch-and-slurm.md. Output: $RB_OUT_DIR (default
# results/validate_<UTC time>/) with validate.h5, config.yaml and report/.
set -euo pipefail
source "$(dirname "$0")/run_common.sh"
np=$(rb_knob_int RB_NP "${RB_NP:-2}")
rb_job validate quick "$np" "$@"
echo "validation passed: $dir/report/report.md"
