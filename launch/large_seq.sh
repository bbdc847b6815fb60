#!/usr/bin/env bash
# A large-sequence run on N GPUs: ring attention at RB_SEQ_LENS (default 262144,1048576) with
# one ring over all N ranks, backend cuda, each rank bound near its GPU; then the report.
#   bash launch/large_seq.sh N [extra ringbench args]      (N defaults to RB_NP or the GPU count)
# Knobs (environment): docs/launch-and-slurm.md. RB_BACKEND=host runs it on the host path
# (with small RB_SEQ_LENS) for a dry test. Output: $RB_OUT_DIR (default results/large_<UTC time>/).
set -euo pipefail
source "$(dirname "$0")/run_common.sh"
n="${1:-${RB_NP:-$RB_GPUS}}"
[ $# -gt 0 ] && shift
if [ "$n" = 0 ]; then
  echo "large_seq.sh: no GPU found here; give the number of ranks: launch/large_seq.sh N" >&2
  exit 2
fi
n=$(rb_knob_int N "$n")
: "${RB_BACKEND:=cuda}"
export RB_BACKEND
rb_job large large "$n" "$@"
