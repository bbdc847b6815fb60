#!/usr/bin/env bash
# The README's main job: install what is missing, build, and run inputs/small.yaml on the
# host (CPU) path with 2 ranks. Prints where the HDF5 file went. Safe to run again.
set -euo pipefail
source "$(dirname "$0")/common.sh"
rb_setup
cd "$RB_ROOT"
rb_run mpirun -np 2 --oversubscribe "$RB_BUILD/ringbench" inputs/small.yaml "$@"
