#!/usr/bin/env bash
# launch/perf_node.sh without a GPU: a stand-in `mpirun` on PATH records each launch instead of
# running it, so the script's own logic is checked here: the configs it writes for N GPUs are
# valid plans at N ranks (weak) and 2N ranks (contention: N measuring + N feeders), every step
# leaves a summary line, a hung step is ended at its limit (RB_STEP_LIMIT_<STEP>) and the next
# step still runs, the context-parallel steps' 2-GPU configs are valid plans, and an unknown step
# name is refused (exit 2) before anything runs.
#   perf_node_check.sh SRC_DIR RINGBENCH
set -uo pipefail
src="$1"
bin="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

mkdir -p "$work/bin" "$work/bundle"
ln -s "$bin" "$work/bundle/ringbench"
# The stand-in: one line per launch; RB_FAKE_HANG=1 makes it hang like a stuck job.
cat > "$work/bin/mpirun" <<'EOF'
#!/usr/bin/env bash
echo "$*" >> "$RB_FAKE_LOG"
[ "${RB_FAKE_HANG:-0}" = 1 ] && sleep 60
exit 0
EOF
chmod +x "$work/bin/mpirun"
export PATH="$work/bin:$PATH" RB_FAKE_LOG="$work/launches.txt"

for n in 1 2 4 8; do
  out="$work/out$n"
  : > "$RB_FAKE_LOG"
  RB_PERF_STEPS=topo,weak,large,coll,tuning,contention bash "$src/launch/perf_node.sh" "$work/bundle" "$out" "$n" \
    > "$work/stdout$n" 2>&1 || bad "$n GPUs: perf_node.sh exit $?"
  for s in topo weak large coll tuning contention; do
    grep -q "^$s  *rc=0 " "$out/summary.txt" 2>/dev/null || bad "$n GPUs: no 'rc=0' line for step $s in summary.txt"
  done
  grep -q "^ringbench .*commit" "$out/topo.log" || bad "$n GPUs: topo.log lacks ringbench --version"
  grep -q -- "-np $n --bind-to numa .*weak.yaml" "$RB_FAKE_LOG" || bad "$n GPUs: weak not launched on $n ranks"
  grep -q -- "-np $((2 * n)) --bind-to none .*contention.yaml" "$RB_FAKE_LOG" || bad "$n GPUs: contention not launched on $((2 * n)) ranks"
  "$bin" "$out/weak.yaml" --dry-run --world-size "$n" > "$work/dry" 2>&1 || bad "$n GPUs: weak.yaml is not a valid plan at $n ranks: $(tail -2 "$work/dry")"
  want=1; r=2; while [ "$r" -le "$n" ] && [ "$r" -le 4 ]; do want="$want, $r"; r=$((r * 2)); done
  grep -q "ring_sizes: \[$want\]" "$out/weak.yaml" || bad "$n GPUs: weak.yaml ring sizes are not [$want]"
  "$bin" "$out/contention.yaml" --dry-run --world-size $((2 * n)) > "$work/dry" 2>&1 ||
    bad "$n GPUs: contention.yaml is not a valid plan at $((2 * n)) ranks: $(tail -2 "$work/dry")"
  grep -q "feeders: $n\$" "$out/contention.yaml" || bad "$n GPUs: contention.yaml does not have $n feeders"
done

# The context-parallel steps: on 4 GPUs the shipped configs; on 2 the same tokens per GPU on a
# ring of 2 without hybrid (INPUT_2gpu.yaml, a valid plan at 2 ranks); below 2 nothing launched.
for n in 1 2 4; do
  out="$work/cp$n"
  : > "$RB_FAKE_LOG"
  RB_PERF_STEPS=schemes,ulysses,cpgrid bash "$src/launch/perf_node.sh" "$work/bundle" "$out" "$n" \
    > /dev/null 2>&1 || bad "$n GPUs: perf_node.sh (cp steps) exit $?"
  for input in cp_schemes ulysses_transports cp_grid; do
    if [ "$n" = 4 ]; then
      grep -q -- "-np 4 .*inputs/$input.yaml" "$RB_FAKE_LOG" || bad "4 GPUs: inputs/$input.yaml not launched"
    elif [ "$n" = 2 ]; then
      cfg="$out/${input}_2gpu.yaml"
      grep -q -- "-np 2 .*$cfg" "$RB_FAKE_LOG" || bad "2 GPUs: $cfg not launched"
      "$bin" "$cfg" --dry-run --world-size 2 > "$work/dry" 2>&1 || bad "2 GPUs: $cfg is not a valid plan: $(tail -2 "$work/dry")"
      grep -v "^ *#" "$cfg" | grep -q "ring_sizes: \[4\]\|hybrid" && bad "2 GPUs: $cfg keeps a ring of 4 or hybrid"
      cmp -s "$cfg" "$src/inputs/$input.yaml" && bad "2 GPUs: $cfg is the 4-GPU config unchanged"
    else
      [ ! -s "$RB_FAKE_LOG" ] || bad "1 GPU: a cp step launched: $(cat "$RB_FAKE_LOG")"
    fi
  done
done

# The mixed step: on 4 GPUs the R = 4 cuDNN overlap sweeps on two simulated nodes of 2 (a valid
# plan there); below 4 nothing launched.
for n in 2 4; do
  : > "$RB_FAKE_LOG"
  RB_PERF_STEPS=mixed bash "$src/launch/perf_node.sh" "$work/bundle" "$work/mixed$n" "$n" > /dev/null 2>&1 ||
    bad "$n GPUs: perf_node.sh (mixed) exit $?"
  if [ "$n" = 4 ]; then
    grep -q -- "-np 4 .*-x RINGBENCH_RANKS_PER_NODE .*ring_overlap.yaml --only r4_cudnn_full,r4_cudnn_zigzag" "$RB_FAKE_LOG" ||
      bad "4 GPUs: the mixed step did not launch ring_overlap.yaml's R = 4 cuDNN sweeps: $(cat "$RB_FAKE_LOG")"
    "$bin" "$src/inputs/ring_overlap.yaml" --only r4_cudnn_full,r4_cudnn_zigzag --dry-run --world-size 4 \
      --ranks-per-node 2 > "$work/dry" 2>&1 || bad "the mixed step's plan is not valid on 2 nodes of 2: $(tail -2 "$work/dry")"
  else
    [ ! -s "$RB_FAKE_LOG" ] || bad "2 GPUs: the mixed step launched: $(cat "$RB_FAKE_LOG")"
  fi
done

# A hung step ends at its limit (rc 124), the next step still runs.
out="$work/hang"
: > "$RB_FAKE_LOG"
start=$SECONDS
RB_FAKE_HANG=1 RB_STEP_LIMIT_WEAK=2 RB_STEP_LIMIT_LARGE=2 RB_PERF_STEPS=weak,large \
  bash "$src/launch/perf_node.sh" "$work/bundle" "$out" 2 > /dev/null 2>&1
took=$((SECONDS - start))
grep -q "^weak  *rc=124 " "$out/summary.txt" || bad "a hung weak step is not ended with rc=124: $(cat "$out/summary.txt" 2>/dev/null)"
grep -q "^large  *rc=124 " "$out/summary.txt" || bad "the step after a hung one did not run"
[ "$took" -lt 40 ] || bad "two hung steps with 2 s limits took $took s"

# An unknown step is refused before anything runs.
: > "$RB_FAKE_LOG"
RB_PERF_STEPS=weak,wek bash "$src/launch/perf_node.sh" "$work/bundle" "$work/bad" 2 > "$work/err" 2>&1
rc=$?
[ "$rc" = 2 ] || bad "an unknown step: exit $rc, want 2"
grep -q "unknown step 'wek'" "$work/err" || bad "an unknown step is not named: $(cat "$work/err")"
[ ! -s "$RB_FAKE_LOG" ] || bad "an unknown step still launched: $(cat "$RB_FAKE_LOG")"

[ "$fail" = 0 ] && echo "perf_node.sh: steps, limits, generated configs for 1-8 GPUs: ok"
exit "$fail"
