#!/usr/bin/env bash
# The README's test command (and CI's): install what is missing, build, run every test.
# GPU tests report "skipped" on machines without a GPU.
set -euo pipefail
source "$(dirname "$0")/common.sh"
rb_setup
cd "$RB_BUILD"
rb_run ctest --output-on-failure --timeout 900 "$@"
