# Shared by the Slurm jobs (slurm/*.sbatch; sourced from $RINGBENCH_ROOT/slurm, since Slurm runs
# a copy of the batch script from its spool directory): where results go, long steps run so the
# time-limit trap can act at once, and the verdict line and file. Set RB_JOB_NAME (the prefix of
# the job's messages) and RB_JOB_DIR (its results folder) before rb_job_verdict.

RB_JOB_CHILD=""

# rb_job_results_parent ROOT: the parent of a job's results folder: RB_SCRATCH (a scratch file
# system: benchmark files do not belong in a checkout on a home file system), else
# RB_RESULTS_DIR (its older name), else ROOT/results.
rb_job_results_parent() {
  printf '%s' "${RB_SCRATCH:-${RB_RESULTS_DIR:-$1/results}}"
}

# rb_job_run_bg CMD...: prints the command like rb_run (launch/common.sh), runs it in the
# background and waits for it. bash runs a trap only between foreground commands: a SIGUSR1
# arriving during a foreground mpirun would wait for the whole run, past the time limit.
rb_job_run_bg() {
  printf '+'; printf ' %q' "$@"; printf '\n'
  "$@" &
  RB_JOB_CHILD=$!
  wait "$RB_JOB_CHILD"
  local rc=$?
  RB_JOB_CHILD=""
  return "$rc"
}

# rb_job_stop_child: stops the step rb_job_run_bg is waiting for (mpirun and srun pass SIGTERM
# to their ranks), and waits until it is gone, so its file is closed before a report reads it.
rb_job_stop_child() {
  if [ -n "$RB_JOB_CHILD" ]; then
    kill -TERM "$RB_JOB_CHILD" 2>/dev/null && wait "$RB_JOB_CHILD" 2>/dev/null
    RB_JOB_CHILD=""
  fi
  return 0
}

# rb_job_verdict CODE TEXT: "NAME: VERDICT CODE: TEXT" on stderr and in RB_JOB_DIR/verdict.txt
# (what a cron job or sacct user reads later), then exit CODE.
rb_job_verdict() {
  local line="$RB_JOB_NAME: VERDICT $1: $2"
  if [ -n "${RB_JOB_DIR:-}" ] && [ -d "$RB_JOB_DIR" ]; then
    echo "$line" | tee "$RB_JOB_DIR/verdict.txt" >&2
  else
    echo "$line" >&2
  fi
  exit "$1"
}

# rb_job_ringbench_bin ROOT: the program: RINGBENCH_BIN, else the build directory's
# (rb_ringbench_bin), else, where ROOT is an installed PREFIX/share/ringbench (cmake --install),
# PREFIX/bin/ringbench.
rb_job_ringbench_bin() {
  local bin
  bin="$(rb_ringbench_bin)"
  if [ -z "${RINGBENCH_BIN:-}" ] && [ ! -x "$bin" ] && [ -x "$1/../../bin/ringbench" ]; then
    bin="$(cd "$1/../../bin" && pwd)/ringbench"
  fi
  printf '%s' "$bin"
}
