#!/usr/bin/env bash
# A scaling series: the same config at 1, 2, 4, ... ranks (up to RB_MAX_NP, default the GPU
# count or 4), one file per rank count in one directory, then one report over all of them.
#   bash launch/scaling.sh [extra ringbench args]
# RB_RANK_COUNTS="1 2 3 6" picks the rank counts instead. The ring spans all ranks of each run
# (no ring_sizes in the generated config), so the report's ring-size axis is the rank count.
# A rank count that fails does not stop the series; the exit code is then 1.
# Output: $RB_OUT_DIR (default results/scaling_<UTC time>/) with np<N>.h5, config.yaml, report/.
set -euo pipefail
source "$(dirname "$0")/run_common.sh"
default_max=$([ "$RB_GPUS" -gt 0 ] && echo "$RB_GPUS" || echo 4)
max=$(rb_knob_int RB_MAX_NP "${RB_MAX_NP:-$default_max}")
counts="${RB_RANK_COUNTS:-$(rb_series "$max")}"
counts=$(rb_knob_list RB_RANK_COUNTS "$counts")
default_preset=$([ "$RB_GPUS" -gt 0 ] && echo sweep || echo quick)
rb_job_dir scaling "${RB_PRESET:-$default_preset}" "${counts//,/}"
status=0
files=()
for np in ${counts//,/ }; do
  rb_mpirun_cmd "$np"
  if rb_run "${RB_CMD[@]}" "$(rb_ringbench_bin)" "$config" --output "$dir/np$np.h5" --force "$@"; then
    :
  else
    echo "scaling.sh: the run on $np ranks failed (exit $?); going on with the series" >&2
    status=1
  fi
  [ -f "$dir/np$np.h5" ] && files+=("$dir/np$np.h5")
done
if [ ${#files[@]} -eq 0 ]; then
  echo "scaling.sh: no run produced a file" >&2
  exit 1
fi
rb_run "$RB_ANALYSIS" report "${files[@]}" --out "$dir/report" || status=1
echo "scaling series: $dir (report: $dir/report/report.md)"
exit "$status"
