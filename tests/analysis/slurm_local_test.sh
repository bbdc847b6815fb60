#!/usr/bin/env bash
# A real Slurm test: starts a single-node Slurm cluster on this machine (Debian's slurm-wlm
# with munge: munged, slurmctld and slurmd on localhost, CPU-only, no cgroups), submits
# batch jobs with host-path configs, waits for each, checks their files and exit codes, and
# always stops the daemons. JOBS (default scaling):
#   scaling  slurm/ring_scaling.sbatch at 1 and 2 ranks (HDF5 files, report), then
#            slurm/nightly.sbatch: verdicts 0-3 and 5, the baseline store kept and promoted
#            (CTest analysis_slurm)
#   tune     slurm/tune.sbatch on inputs/tuning_host.yaml: the policy and report, and the
#            verdicts 0, 1, 2, 3, 4 (CTest analysis_slurm_tune)
#   slurm_local_test.sh RINGBENCH_BIN SOURCE_DIR WORK_DIR [JOBS]
# Exit: 0 pass, 1 fail, 77 skipped (only when Slurm cannot be installed here).
set -uo pipefail
bin="$1"
src="$2"
work="$3"
jobs="${4:-scaling}"
py="${RINGBENCH_PYTHON:-/usr/bin/python3}"
case "$jobs" in scaling|tune) ;; *) echo "slurm_local_test.sh: JOBS '$jobs' is not scaling or tune" >&2; exit 1 ;; esac

need_install=()
for cmd in slurmctld slurmd sbatch munged; do
  command -v "$cmd" >/dev/null 2>&1 || need_install=(slurm-wlm munge)
done
if [ ${#need_install[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "SKIPPED: Slurm (slurm-wlm, munge) is not installed and cannot be installed here (needs root and apt-get)"
    exit 77
  fi
  echo "installing ${need_install[*]}"
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_install[@]}" >/dev/null 2>&1; then
    apt-get update -qq >/dev/null 2>&1
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_install[@]}" >/dev/null 2>&1; then
      echo "SKIPPED: apt-get install ${need_install[*]} failed; Slurm cannot be installed here"
      exit 77
    fi
  fi
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIPPED: starting a local Slurm cluster needs root (slurmd runs jobs as their user)"
  exit 77
fi

rm -rf "$work"
mkdir -p "$work"/{state,spool,log,munge,results}
work="$(cd "$work" && pwd)"
host="$(hostname -s)"
cpus="$(nproc)"
[ "$cpus" -ge 2 ] || cpus=2  # two ranks; config_overrides lets a 1-core machine claim 2
mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))
conf="$work/slurm.conf"

cleanup() {
  # Stop exactly the daemons this script started (their pid files), and wait until they
  # are gone, so nothing of the test cluster outlives the test.
  local f pid stop=()
  for f in "$work/slurmd.pid" "$work/slurmctld.pid" "$work/munged.pid"; do
    pid="$(cat "$f" 2>/dev/null)"
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && stop+=("$pid")
  done
  [ ${#stop[@]} -gt 0 ] || return 0
  kill "${stop[@]}" 2>/dev/null
  for _ in $(seq 1 50); do
    local alive=0
    for pid in "${stop[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && return 0
    sleep 0.2
  done
  kill -9 "${stop[@]}" 2>/dev/null
  return 0
}
trap cleanup EXIT INT TERM

fail() {
  echo "FAIL: $*"
  for l in "$work"/log/*.log; do echo "---- $l"; tail -n 30 "$l"; done
  exit 1
}

# Munge: our own daemon, socket and key, so a system munged (if any) is left alone.
key="$work/munge/munge.key"
dd if=/dev/urandom of="$key" bs=1024 count=1 status=none
chmod 400 "$key"
chmod 711 "$work/munge"
sock="$work/munge/munge.socket"
munged --key-file="$key" --socket="$sock" --pid-file="$work/munged.pid" \
       --log-file="$work/log/munged.log" --seed-file="$work/munge/seed" --force \
  || fail "munged did not start"

# Addresses are given as 127.0.0.1 so the test does not depend on the host name resolving.
cat > "$conf" <<EOF
ClusterName=rbtest
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$(( 20000 + RANDOM % 10000 ))
SlurmdPort=$(( 30000 + RANDOM % 10000 ))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/log/slurmctld.log
SlurmdLogFile=$work/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
export SLURM_CONF="$conf"

slurmctld -f "$conf" -i || fail "slurmctld did not start"
slurmd -f "$conf" || fail "slurmd did not start"

echo "waiting for node $host to be idle"
for _ in $(seq 1 60); do
  state="$(sinfo -h -n "$host" -o %T 2>/dev/null | head -n1)"
  case "$state" in idle*|mixed*) break ;; esac
  sleep 1
done
sinfo
case "$state" in idle*|mixed*) ;; *) fail "node $host did not become idle (state '$state')" ;; esac

wait_job() {  # prints "STATE EXITCODE"
  local job="$1" line=""
  for _ in $(seq 1 600); do
    line="$(scontrol show job "$job" 2>/dev/null)"
    case "$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<< "$line" | head -n1)" in
      COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) break ;;
    esac
    sleep 1
  done
  echo "$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<< "$line" | head -n1) $(sed -n 's/.* ExitCode=\([0-9]*\):.*/\1/p' <<< "$line" | head -n1)"
}
# slurm/tune.sbatch on the host grid inputs/tuning_host.yaml (2 ranks, no GPU: one rank per
# task). Its exit code is the verdict; the previous policies that make compare-tuning answer
# 0 and 1 come from the jobs themselves: the host's built-in path (kokkos) is several times
# faster than materialized on this grid, so a normal tuning keeps kokkos, and one with kokkos
# made to fail parity (RINGBENCH_FAULT_PARITY_PATH) chooses materialized everywhere.
tune_job() {  # NAME EXPECTED_EXIT ENV...; sets tune_dir (the job's results) and tune_out (its log)
  local name="$1" expect="$2" job got
  shift 2
  job="$(env "$@" sbatch --parsable --nodes=1 --ntasks=2 --ntasks-per-node=2 --cpus-per-task=1 --gpus-per-node=0 \
          --time=10 --output="$work/tune-$name-%j.out" "$src/slurm/tune.sbatch")" || fail "sbatch refused tune ($name)"
  job="${job%%;*}"
  got="$(wait_job "$job")"
  tune_out="$work/tune-$name-$job.out"
  tune_dir="$work/results/tune_$job"
  echo "tune $name: job $job ended '$got' (expected exit $expect)"
  grep -v '^\[' "$tune_out" | tail -n 25
  [ "${got#* }" = "$expect" ] || fail "tune ($name): exit code ${got#* }, expected $expect"
  grep -q "VERDICT $expect" "$tune_out" || fail "tune ($name) did not print VERDICT $expect"
  grep -q "^tune: VERDICT $expect: " "${RB_OUT_DIR_OF_JOB:-$tune_dir}/verdict.txt" \
    || fail "tune ($name): no verdict.txt with VERDICT $expect"
}
# SIGUSR1 (#SBATCH --signal=B:USR1@...) to a job while its step runs (a stand-in ringbench that
# sleeps): the trap must stop the step and end the job with exit 6 and verdict.txt, in seconds.
# SCRIPT NAME STEP_LINE_REGEX ENV...; sets signal_job and signal_dir (the job's results folder).
signal_job() {
  local script="$1" name="$2" step="$3" job got
  shift 3
  job="$(env "$@" sbatch --parsable --nodes=1 --ntasks=2 --ntasks-per-node=2 --cpus-per-task=1 --gpus-per-node=0 \
          --time=10 --output="$work/$name-signal-%j.out" "$src/slurm/$script")" || fail "sbatch refused $name (signal)"
  job="${job%%;*}"
  for _ in $(seq 1 90); do grep -Eq "$step" "$work/$name-signal-$job.out" 2>/dev/null && break; sleep 1; done
  grep -Eq "$step" "$work/$name-signal-$job.out" || fail "$name (signal) never started the step to interrupt"
  sleep 2
  scancel --signal=USR1 --batch "$job" || fail "scancel --signal=USR1 failed"
  local t0=$SECONDS
  got="$(wait_job "$job")"
  echo "$name signal: job $job ended '$got' $(( SECONDS - t0 ))s after SIGUSR1 (expected exit 6)"
  grep -v '^\[' "$work/$name-signal-$job.out" | tail -n 6
  [ "${got#* }" = 6 ] || fail "$name (signal): exit code ${got#* }, expected 6"
  [ $(( SECONDS - t0 )) -le 60 ] || fail "$name (signal): the trap waited for the step"
  signal_job_id="$job"
}
# PATH (a policy) -> the set of paths its ranges choose, one word per line.
policy_paths() {
  "$py" - "$src" "$1" <<'EOF'
import os, sys
sys.path.insert(0, os.path.join(sys.argv[1], "analysis"))
from ringbench_analysis import tuning
p = tuning.read_policy_yaml(sys.argv[2])
print("\n".join(sorted({str(r["path"]) for rule in p["rules"] for r in rule["ranges"]})))
EOF
}
# DIR of the first tune job: its tuning file (2 ranks, complete), its policy (valid, the
# job's margin and hysteresis, one rule per shape of the file) and its report with plots.
check_first_tuning() {
  "$py" - "$src" "$1" <<'EOF' || fail "tune (first): the tuning file, the policy or the report are wrong"
import filecmp, glob, os, sys
sys.path.insert(0, os.path.join(sys.argv[1], "analysis"))
import h5py
from ringbench_analysis import tuning
src, d = sys.argv[1], sys.argv[2]
bad = []
shapes = set()
with h5py.File(os.path.join(d, "tuning.h5"), "r") as f:
    if f["run"].attrs["status"] != "complete": bad.append(f"run status {f['run'].attrs['status']}")
    if int(f["run"].attrs["world_size"]) != 2: bad.append(f"world_size {f['run'].attrs['world_size']}")
    g = f["sweeps/tuning"]
    if g.attrs["type"] != "kernel_tuning" or g.attrs["status"] != "complete": bad.append("sweep 'tuning'")
    pts = {k: g["points/" + k][()] for k in ("dtype", "head_dim", "causal", "segment", "rate")}
    for i in range(len(pts["dtype"])):
        dt = pts["dtype"][i]
        shapes.add((dt.decode() if isinstance(dt, bytes) else str(dt), int(pts["head_dim"][i]),
                    bool(pts["causal"][i]), int(pts["segment"][i]), int(pts["rate"][i])))
policy = tuning.read_policy_yaml(os.path.join(d, "tuned.yaml"))
bad += tuning.validate_policy(policy)
if policy.get("margin") != 1.3: bad.append(f"margin {policy.get('margin')} (RB_SAFETY_MARGIN=1.3)")
if policy.get("hysteresis") != 1: bad.append(f"hysteresis {policy.get('hysteresis')} (RB_HYSTERESIS=1)")
if policy["machine"]["device"] != "host": bad.append(f"device {policy['machine']['device']}")
ruled = {(r["dtype"], r["head_dim"], r["causal"], r["segment"], r["rate"]) for r in policy["rules"]}
if ruled != shapes: bad.append(f"rules for {sorted(ruled)}, the file has {sorted(shapes)}")
if not os.path.isfile(os.path.join(d, "tuning.md")): bad.append("tuning.md missing")
pngs = glob.glob(os.path.join(d, "tuning_*.png"))
if len(pngs) != len(shapes) or any(open(p, "rb").read(8) != b"\x89PNG\r\n\x1a\n" for p in pngs):
    bad.append(f"{len(pngs)} plot(s) for {len(shapes)} shape(s)")
if not filecmp.cmp(os.path.join(d, "config.yaml"), os.path.join(src, "inputs", "tuning_host.yaml"), False):
    bad.append("config.yaml is not the tuning config")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
EOF
}
tune_jobs() {
  unset RB_OUT_DIR RB_PREVIOUS_POLICY RB_SAFETY_MARGIN RB_HYSTERESIS RINGBENCH_FAULT_PARITY_PATH RB_LAUNCHER
  export RINGBENCH_ROOT="$src" RINGBENCH_BIN="$bin" RB_TUNING_CONFIG="$src/inputs/tuning_host.yaml"
  export RB_RESULTS_DIR="$work/results" RINGBENCH_PYTHON="$py"
  local launcher=mpirun first second
  if srun --mpi=list 2>&1 | grep -qw pmix; then launcher=srun; else echo "note: no PMIx plugin in this Slurm; tune runs with mpirun only"; fi

  # 0: the policy, its report, the settings passed through, one rank per task.
  tune_job first 0 RB_LAUNCHER=mpirun RB_SAFETY_MARGIN=1.3 RB_HYSTERESIS=1
  first="$tune_dir"
  grep -Eq '^\+ mpirun -np 2 --bind-to none .*ringbench .*tuning_host\.yaml --output .*/tuning\.h5' "$tune_out" \
    || fail "tune (first) did not print its mpirun line with 2 ranks"
  check_first_tuning "$first"
  [ "$(policy_paths "$first/tuned.yaml")" = kokkos ] || fail "tune (first): expected kokkos everywhere on the host grid"
  echo "ok: tune (first): tuning.h5, tuned.yaml (margin, hysteresis, one rule per shape), tuning.md and its plots"

  # 3: kokkos fails parity on every rank: the run fails, the policy is written without it.
  tune_job faulted 3 RB_LAUNCHER=mpirun RINGBENCH_FAULT_PARITY_PATH=kokkos RB_PREVIOUS_POLICY="$first/tuned.yaml"
  second="$tune_dir"
  [ "$(policy_paths "$second/tuned.yaml")" = materialized ] || fail "tune (faulted): the policy still chooses kokkos"
  grep -q "changed choice" "$second/compare.txt" || fail "tune (faulted): compare.txt shows no changed choice"
  # 1: a choice changed against the policy in use (materialized -> kokkos).
  tune_job changed 1 RB_LAUNCHER=mpirun RB_PREVIOUS_POLICY="$second/tuned.yaml"
  # 0 against the first policy, into RB_OUT_DIR, with srun where this Slurm has PMIx.
  RB_OUT_DIR_OF_JOB="$work/tune_out" tune_job same 0 RB_LAUNCHER="$launcher" RB_PREVIOUS_POLICY="$first/tuned.yaml" RB_OUT_DIR="$work/tune_out"
  grep -Eq "^\+ $launcher .*ringbench .*--output $work/tune_out/tuning\.h5" "$tune_out" || fail "tune (same) did not run with $launcher into RB_OUT_DIR"
  for f in tuning.h5 tuned.yaml tuning.md compare.txt; do
    [ -f "$work/tune_out/$f" ] || fail "tune (same): no $f in RB_OUT_DIR"
  done
  grep -q "^OK" "$work/tune_out/compare.txt" || fail "tune (same): compare-tuning did not say OK"
  # 2: no previous policy to compare with; 4: a tuning config ringbench refuses (no file).
  tune_job no_previous 2 RB_LAUNCHER=mpirun RB_PREVIOUS_POLICY="$work/none.yaml"
  printf 'sweeps:\n  - type: kernel_tuning\n' > "$work/bad_tuning.yaml"
  tune_job no_file 4 RB_LAUNCHER=mpirun RB_TUNING_CONFIG="$work/bad_tuning.yaml"
  # 6: the time limit's SIGUSR1 during the tuning run: no policy.
  printf '#!/bin/sh\nexec sleep 300\n' > "$work/sleeping_ringbench"
  chmod +x "$work/sleeping_ringbench"
  signal_job tune.sbatch tune '^\+ mpirun .*sleeping_ringbench' RB_LAUNCHER=mpirun RINGBENCH_BIN="$work/sleeping_ringbench"
  grep -q "^tune: VERDICT 6: time limit reached before the policy" "$work/results/tune_$signal_job_id/verdict.txt" \
    || fail "tune (signal): no verdict.txt with VERDICT 6"
  [ ! -e "$work/results/tune_$signal_job_id/tuned.yaml" ] || fail "tune (signal): a policy was written"
  [ "$launcher" = srun ] && launcher="mpirun and srun"
  echo "PASS: sbatch slurm/tune.sbatch wrote the policy and report and gave verdicts 0, 1, 2, 3, 4 and 6 (SIGUSR1) (with $launcher)"
}
if [ "$jobs" = tune ]; then
  tune_jobs
  exit 0
fi

# The host-path config of the analysis tests at 1 and 2 ranks, once with mpirun inside the
# allocation and, where this Slurm has the PMIx plugin, once with srun --mpi=pmix.
cd "$work" || exit 1
export RINGBENCH_ROOT="$src" RINGBENCH_BIN="$bin" RB_CONFIG="$src/tests/analysis/analysis_small.yaml"
export RB_RANK_COUNTS="1 2" RB_RESULTS_DIR="$work/results" RINGBENCH_PYTHON="$py"
launchers=(mpirun)
if srun --mpi=list 2>&1 | grep -qw pmix; then launchers+=(srun); else echo "note: no PMIx plugin in this Slurm; srun variant not tested"; fi

run_job() {
  local launcher="$1" job final
  job="$(RB_LAUNCHER="$launcher" sbatch --parsable --nodes=1 --ntasks=2 --ntasks-per-node=2 --cpus-per-task=1 \
          --gpus-per-node=0 --time=10 --output="$work/job-%j.out" "$src/slurm/ring_scaling.sbatch")" \
    || fail "sbatch refused the job"
  job="${job%%;*}"
  echo "submitted job $job (launcher $launcher)"
  final=""
  for _ in $(seq 1 600); do
    final="$(scontrol show job "$job" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -n1)"
    case "$final" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED) break ;; esac
    sleep 1
  done
  echo "job $job: $final"
  echo "---- job output (without progress lines)"
  grep -v '^\[' "$work/job-$job.out" 2>/dev/null
  [ "$final" = COMPLETED ] || fail "job $job ($launcher) ended $final, not COMPLETED"
  local dir="$work/results/ring_scaling_$job"
  [ -d "$dir" ] || fail "no results directory named after the job id ($dir)"
  grep -Eq "^\+ (mpirun|srun) .*ringbench.*np2\.h5" "$work/job-$job.out" \
    || fail "the job did not print its $launcher line"
  grep -q "^launcher $launcher;" "$work/job-$job.out" || fail "the job did not use $launcher"
  grep -q "^ring_scaling: VERDICT 0: every rank count ran" "$dir/verdict.txt" || fail "job $job: no verdict.txt with VERDICT 0"
  "$py" - "$dir" <<'EOF' || fail "job $job ($launcher): the HDF5 files or the report are wrong"
import json, os, sys
import h5py
d = sys.argv[1]
bad = []
for n in (1, 2):
    p = os.path.join(d, f"np{n}.h5")
    if not os.path.isfile(p):
        bad.append(f"{p} missing"); continue
    with h5py.File(p, "r") as f:
        if f["run"].attrs["status"] != "complete": bad.append(f"{p}: status {f['run'].attrs['status']}")
        if int(f["run"].attrs["world_size"]) != n: bad.append(f"{p}: world_size {f['run'].attrs['world_size']}")
        ring = f["sweeps/ring"]
        if ring.attrs["status"] != "complete": bad.append(f"{p}: ring sweep {ring.attrs['status']}")
        if f["run"].attrs["schema_version"] != 4: bad.append(f"{p}: schema_version {f['run'].attrs['schema_version']}")
        if ring["total_time_s"].shape[:2] != (n, len(ring["points/seq_len"])): bad.append(f"{p}: per-rank times")
rep = os.path.join(d, "report", "report.md")
if not os.path.isfile(rep):
    bad.append("report.md missing")
else:
    js = json.load(open(os.path.join(d, "report", "report.json")))
    for plot in ("throughput", "strong_scaling", "bandwidth", "cost_model"):
        png = os.path.join(d, "report", f"{plot}.png")
        if not (os.path.isfile(png) and open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"):
            bad.append(f"{plot}.png missing or not a PNG")
    sizes = sorted({p["ring_size"] for p in js["points"]})
    if sizes != [1, 2]: bad.append(f"report ring sizes {sizes}")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
EOF
  echo "ok: job $job ($launcher): np1.h5, np2.h5 and the report checked"
  [ -n "${first_job:-}" ] || first_job="$job"
}

for l in "${launchers[@]}"; do run_job "$l"; done
first_series="$work/results/ring_scaling_$first_job"

# 6: SIGUSR1 while the 2-rank run of the series runs (a stand-in that sleeps at 2 ranks and is
# the real ringbench at 1): the trap stops it and reports the 1-rank file, in seconds.
printf '#!/bin/sh\ncase "$*" in *np2.h5*) exec sleep 300 ;; esac\nexec %q "$@"\n' "$bin" > "$work/np2_sleeps"
chmod +x "$work/np2_sleeps"
signal_job ring_scaling.sbatch ring_scaling '^\+ mpirun .*np2_sleeps .*np2\.h5' RB_LAUNCHER=mpirun RINGBENCH_BIN="$work/np2_sleeps"
sdir="$work/results/ring_scaling_$signal_job_id"
grep -q "^ring_scaling: VERDICT 6: time limit" "$sdir/verdict.txt" || fail "ring_scaling (signal): no verdict.txt with VERDICT 6"
[ -f "$sdir/np1.h5" ] && [ -f "$sdir/report/report.md" ] || fail "ring_scaling (signal): no report of the 1-rank file"
echo "ok: ring_scaling (signal): exit 6, verdict.txt, the report of what completed"

# slurm/nightly.sbatch: its exit code is the verdict. The baseline is the 2-rank file of the
# first series (same config), with its times scaled (below).
nightly_job() {  # NAME EXPECTED_EXIT ENV...; sets night_out (its log), night_dir (its results)
  local name="$1" expect="$2" job got
  shift 2
  job="$(env "$@" sbatch --parsable --nodes=1 --ntasks=2 --ntasks-per-node=2 --cpus-per-task=1 \
          --gpus-per-node=0 --time=15 --output="$work/nightly-$name-%j.out" "$src/slurm/nightly.sbatch")" \
    || fail "sbatch refused nightly ($name)"
  job="${job%%;*}"
  got="$(wait_job "$job")"
  night_out="$work/nightly-$name-$job.out"
  night_dir="$work/results/nightly_$job"
  night_secs="$(job_seconds "$job")"
  echo "nightly $name: job $job ended '$got' after ${night_secs}s (expected exit $expect)"
  grep -v '^\[' "$night_out" | tail -n 25
  [ "${got#* }" = "$expect" ] || fail "nightly ($name): exit code ${got#* }, expected $expect"
  grep -q "VERDICT $expect" "$night_out" || fail "nightly ($name) did not print VERDICT $expect"
  grep -q "VERDICT $expect" "$night_dir/verdict.txt" || fail "nightly ($name): no verdict.txt with VERDICT $expect"
}
job_seconds() {  # JOB -> its run time in seconds (scontrol's RunTime=[D-]HH:MM:SS)
  scontrol show job "$1" 2>/dev/null | sed -n 's/.*RunTime=\([0-9:-]*\).*/\1/p' | head -n1 \
    | awk -F'[-:]' '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s }'
}
# A nightly that must end before its benchmark: no mpirun line, no file, within seconds.
ended_early() {  # WHAT
  ! grep -Eq '^\+ (mpirun|srun|ctest) ' "$night_out" || fail "nightly ($1) ran something before refusing"
  [ ! -e "$night_dir/nightly.h5" ] || fail "nightly ($1) wrote a benchmark file"
  [ "${night_secs:-99}" -le 20 ] || fail "nightly ($1) took ${night_secs}s, not seconds"
}
index_entries() {  # STORE [ROLE] -> "<entries of ROLE (default baseline)> <file of current>"
  "$py" - "$1" "${2:-baseline}" <<'EOF'
import json, os, sys
idx = json.load(open(os.path.join(sys.argv[1], "index.json")))
assert len(idx) == 1, f"{len(idx)} kinds in the store"
(entries,) = idx.values()
cur = [e["file"] for e in entries if e["current"]]
assert len(cur) == 1, f"{len(cur)} current entries"
assert all(os.path.isfile(os.path.join(sys.argv[1], e["file"])) for e in entries), "a kept file is missing"
print(len([e for e in entries if e.get("role", "baseline") == sys.argv[2]]), cur[0])
EOF
}
# Host timings on a 2-core CI machine running Slurm's daemons vary a lot between runs
# (we saw 200x between two jobs), so the verdict jobs compare the ring attention metrics
# (milliseconds) against baselines made 1000x slower (this run must pass: it improved) and 1000x
# faster (it must regress), by scaling every time (units s) and rate (B/s, TFLOP/s, Hz) of the first
# series' 2-rank file.
scaled_baseline() {  # FACTOR OUT
  "$py" "$src/tests/analysis/h5edit.py" scale "$first_series/np2.h5" "$2" "$1" \
    || fail "could not write the scaled baseline"
}
scaled_baseline 1000.0 "$work/slow_baseline.h5"
scaled_baseline 0.001 "$work/fast_baseline.h5"
# RB_BASELINE_STORE in the work dir: a passing night is recorded there as history, never in
# the checkout's results/ (where earlier test runs' scaled nights would become the history).
common=(RB_LAUNCHER=mpirun RINGBENCH_BUILD_DIR="$(dirname "$bin")" RB_SCRATCH="$work/results"
        RB_METRICS=total_time_s,forward_time_s,total_tflops RB_BASELINE_STORE="$work/scaled_store")
rm -rf "$work/scaled_store"
# The binary must be the checkout's HEAD. A developer's build directory may be older than the
# checkout: then the other jobs run with RB_COMMIT_CHECK=0, and the refusal is tested below.
bin_commit="$("$bin" --version | sed -n 's/.*(commit \([0-9a-f]*\).*/\1/p' | head -n1)"
head_commit="$(git -C "$src" rev-parse HEAD 2>/dev/null)"
if [ -z "$bin_commit" ] || [[ "$head_commit" != "$bin_commit"* ]] || "$bin" --version | grep -q -- "-dirty"; then
  echo "note: $bin is commit '$bin_commit', the checkout is '$head_commit': nightly jobs run with RB_COMMIT_CHECK=0"
  common+=(RB_COMMIT_CHECK=0)
fi
nightly_job pass 0 "${common[@]}" RB_BASELINE="$work/slow_baseline.h5" RB_SKIP_TESTS="${RB_NIGHTLY_SKIP_TESTS:-0}"
nightly_job regression 1 "${common[@]}" RB_BASELINE="$work/fast_baseline.h5" RB_SKIP_TESTS=1

# 5: a binary of another commit is refused before anything runs (a wrapper reporting commit 0...).
printf '#!/bin/sh\n[ "$1" = --version ] && { echo "ringbench 0.1.0 (commit 000000000000)"; exit 0; }\nexec %q "$@"\n' \
  "$bin" > "$work/old_ringbench"
chmod +x "$work/old_ringbench"
nightly_job old_binary 5 "${common[@]/RB_COMMIT_CHECK=0/RB_COMMIT_CHECK=1}" RINGBENCH_BIN="$work/old_ringbench" \
  RB_BASELINE="$work/slow_baseline.h5"
ended_early old_binary

# 6: SIGUSR1 (what #SBATCH --signal=B:USR1@120 sends before the time limit) while the benchmark
# runs (a wrapper that sleeps): the trap stops it and writes the verdict within seconds.
printf '#!/bin/sh\n[ "$1" = --version ] && exec %q --version\nexec sleep 300\n' "$bin" > "$work/slow_ringbench"
chmod +x "$work/slow_ringbench"
job="$(env "${common[@]}" RINGBENCH_BIN="$work/slow_ringbench" RB_BASELINE="$work/slow_baseline.h5" RB_SKIP_TESTS=1 \
        sbatch --parsable --nodes=1 --ntasks=2 --ntasks-per-node=2 --cpus-per-task=1 --gpus-per-node=0 \
        --time=15 --output="$work/nightly-signal-%j.out" "$src/slurm/nightly.sbatch")" || fail "sbatch refused nightly (signal)"
job="${job%%;*}"
for _ in $(seq 1 60); do grep -q '^+ mpirun' "$work/nightly-signal-$job.out" 2>/dev/null && break; sleep 1; done
grep -q '^+ mpirun' "$work/nightly-signal-$job.out" || fail "nightly (signal) never started its benchmark"
sleep 2
scancel --signal=USR1 --batch "$job" || fail "scancel --signal=USR1 failed"
got="$(wait_job "$job")"
echo "nightly signal: job $job ended '$got' (expected exit 6)"
grep -v '^\[' "$work/nightly-signal-$job.out" | tail -n 8
[ "${got#* }" = 6 ] || fail "nightly (signal): exit code ${got#* }, expected 6"
grep -q "VERDICT 6" "$work/results/nightly_$job/verdict.txt" || fail "nightly (signal): no verdict.txt with VERDICT 6"
[ "$(job_seconds "$job")" -le 60 ] || fail "nightly (signal): the trap waited for the benchmark"

# The baseline store (rb-analysis baseline). 2: none for this machine kind, found in seconds.
store="$work/baselines"
nightly_job no_baseline 2 "${common[@]}" RB_BASELINE_STORE="$store" RB_SKIP_TESTS=0
ended_early no_baseline
[ ! -e "$store/index.json" ] || fail "nightly (no_baseline) created a store index"
# 3 on a GPU partition whose GPU tests all skip (this CPU build's GPU tests skip).
nightly_job all_skipped 3 "${common[@]}" RB_BASELINE_STORE="$store" RB_UPDATE_BASELINE=1 RB_GPU_PARTITION=1
grep -q "no GPU test ran" "$night_out" || fail "nightly (all_skipped) did not say why"
[ ! -e "$night_dir/nightly.h5" ] || fail "nightly (all_skipped) ran the benchmark"
# The first night stores itself; a passing night leaves the baseline alone (it is recorded as a
# history night, which the next night's compare reads); RB_PROMOTE=1 adds a baseline entry and
# moves current, keeping the first file.
loose=("${common[@]}" RB_BASELINE_STORE="$store" RB_SKIP_TESTS=1 RB_TOLERANCE=100000%)
nightly_job first 0 "${loose[@]}" RB_UPDATE_BASELINE=1
[ "$(index_entries "$store")" ] || fail "nightly (first): no valid store index"
first_entry="$(index_entries "$store")"
[ "${first_entry%% *}" = 1 ] || fail "nightly (first): store has '$first_entry', expected 1 entry"
sum_before="$(sha256sum < "$store/${first_entry#* }")"
nightly_job kept 0 "${loose[@]}"
grep -q "baseline $store/${first_entry#* }" "$night_out" || fail "nightly (kept) did not use the store's baseline"
[ "$(sha256sum < "$store/${first_entry#* }")" = "$sum_before" ] && [ "$(index_entries "$store")" = "$first_entry" ] \
  || fail "nightly (kept): a passing night without RB_PROMOTE changed the baseline"
[ "$(index_entries "$store" night)" = "1 ${first_entry#* }" ] || fail "nightly (kept): the night was not recorded as history"
nightly_job history 0 "${loose[@]}" RB_REPEATS=2
grep -q "history: 1 earlier night" "$night_out" || fail "nightly (history): compare did not read the recorded night"
grep -q "repeats: base 1 run(s), new 2 run(s)" "$night_out" && [ -f "$night_dir/nightly_r2.h5" ] \
  || fail "nightly (history, RB_REPEATS=2): the repeat was not run or not compared"
nightly_job promoted 0 "${loose[@]}" RB_PROMOTE=1
after="$(index_entries "$store")" || fail "nightly (promoted): the store index is not valid"
[ "${after%% *}" = 2 ] || fail "nightly (promoted): store has '$after', expected 2 entries"
[ "${after#* }" != "${first_entry#* }" ] || fail "nightly (promoted): current did not move"
"$src/analysis/rb-analysis" baseline show --store "$store"
echo "PASS: sbatch slurm/ring_scaling.sbatch ran the scaling series with: ${launchers[*]} (and gave 6 on SIGUSR1 with its partial report); slurm/nightly.sbatch gave verdicts 0, 1, 2 (fast), 3 (all GPU tests skipped), 5 (fast), 6 (SIGUSR1), kept its baseline, recorded passing nights as history that the next compare read, and promoted only with RB_PROMOTE=1"
exit 0
