#!/usr/bin/env bash
# The measurement plan behind docs/performance.md, for one GPU node, from a bundle made by
# launch/device_bundle.sh (or a build folder holding ringbench and ringbench_kernel_bench):
#   launch/perf_node.sh BUNDLE OUT_DIR NGPUS [NCCL_TESTS_DIR]
# Steps (RB_PERF_STEPS picks them, default "topo,kernels,weak,coll"; each has its own time limit
# so one hang cannot eat the allocation, and a line per step goes to OUT_DIR/summary.txt):
#   topo        nvidia-smi topo -m, the GPUs, the CPUs and NUMA nodes, ringbench --version
#   kernels     single-GPU block kernels (ringbench_kernel_bench, median of 10 after 3 warmups)
#   weak        inputs/ring_weak_scaling.yaml cut to NGPUS (32K tokens per GPU, ring 1 -> NGPUS)
#   large       inputs/large.yaml on NGPUS ranks (ring 1 -> NGPUS, the cluster profile)
#   coll        collectives at 64 MiB..1 GiB over all GPUs, then, with NCCL_TESTS_DIR, nccl-tests
#               on the same sizes right after (then: rb-analysis nccl-tests OUT/coll.h5 OUT/nccl_tests_*.txt)
#   tuning      inputs/tuning.yaml on every GPU at once (the per-GPU spread of each path)
#   contention  inputs/contention_node.yaml, one measuring and one feeder rank per GPU
#   gputests    the GPU ring and scheme tests at 2 and NGPUS ranks (the bundle's test_ring_mpi_gpu,
#               test_cp_schemes_gpu: NCCL collectives, the copy-engine transport, parity)
#   overlap     inputs/ring_overlap.yaml, the sweeps whose ring fits NGPUS (issue #26: NCCL vs copy
#               engines, overlap efficiency, kernel slowdown); RB_OVERLAP_PRIORITY=1 adds the R = 4
#               cuDNN sweeps with NCCL's stream at the highest priority
#   mixed       the R = 4 cuDNN sweeps of inputs/ring_overlap.yaml on two simulated nodes of 2 GPUs
#               (RINGBENCH_RANKS_PER_NODE=2): NCCL against copy_engine+nccl, the copy engines on the
#               hops inside each node and NCCL on the two between them (issue #26; 4 GPUs)
# RB_GPU_TESTS and RB_GPU_TEST_RANKS narrow the gputests step.
#   schemes     inputs/cp_schemes.yaml (4 GPUs: ring, all-gather, Ulysses, hybrid; issue #27; on 2 GPUs
#               the same tokens per GPU on a ring of 2, without hybrid)
#   ulysses     inputs/ulysses_transports.yaml (issue #27: Ulysses' all-to-alls by NCCL and by the
#               copy engines, in 1, 2, 4 head groups, beside one local cuDNN call per GPU)
#   cpgrid      inputs/cp_grid.yaml (4 GPUs: the same schemes at 4K/16K/48K tokens per GPU, the
#               grid a CP policy is tuned on; launch/cp_policy_check.py checks it on schemes.h5;
#               2 GPUs: as schemes)
#   torch       launch/torch_cp.py on NGPUS: PyTorch's context_parallel ring, a plain Ulysses and one
#               local SDPA call at the overlap plan's shapes (needs python3 with torch)
#   heldout     after tuning: the policy `rb-analysis tune` makes of tuning.h5 (where python3 here
#               has h5py, pandas and yaml; else the shipped inputs/tuned_h100.yaml), then
#               inputs/kernel_auto_heldout.yaml with it, its shapes shared out over the GPUs (one
#               single-rank run per GPU at once, heldout_<gpu>.h5; issue #28)
# The steps run in this order: topo kernels weak large coll contention gputests overlap mixed
# schemes ulysses cpgrid torch tuning heldout.
# RB_STEP_LIMIT_<STEP>=seconds overrides a step's limit.
set -uo pipefail
bundle="$1"; out="$2"; ngpus="$3"; nccl_tests="${4:-}"
source "$(dirname "$0")/gpu_node.sh"
rb_gpu_node_start "$out"
steps=",${RB_PERF_STEPS:-topo,kernels,weak,coll},"
mpi=(mpirun -np "$ngpus" --bind-to numa)
rb=("$bundle/ringbench")

# run_step NAME DEFAULT_LIMIT_S: runs the step's function when NAME is in RB_PERF_STEPS, as a
# fresh process of this script (timeout runs programs, not functions) so the limit ends it all.
# SIGKILL follows SIGTERM only after 30 s: ringbench, told to stop, ends at the next point
# boundary within 20 s and keeps the sweep's finished points (killed sooner, the file has only
# the sweeps finished before, as runs K2 and K3 found).
run_step() {
  local name="$1" limit="$2"
  case "$steps" in *",$name,"*) ;; *) return 0 ;; esac
  local var="RB_STEP_LIMIT_${name^^}"; limit="${!var:-$limit}"
  local t0=$SECONDS rc=0
  timeout --kill-after=30 "$limit" bash "${BASH_SOURCE[0]}" "$bundle" "$out" "$ngpus" "$nccl_tests" \
    --step "$name" > "$out/$name.log" 2>&1 || rc=$?
  printf '%-11s rc=%-3d %5d s (limit %d s)\n' "$name" "$rc" $((SECONDS - t0)) "$limit" | tee -a "$out/summary.txt"
}

topo() {
  nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.max.sm,memory.total --format=csv
  echo; nvidia-smi topo -m
  echo; lscpu
  echo; for n in /sys/devices/system/node/node[0-9]*; do
    [ -d "$n" ] && echo "$(basename "$n"): cpus $(cat "$n/cpulist"), $(awk '/MemTotal/{print $4, $5}' "$n/meminfo")"
  done
  for g in /sys/bus/pci/devices/*; do
    [ "$(cat "$g/vendor" 2>/dev/null)" = 0x10de ] && [ "$(cat "$g/class" 2>/dev/null)" = 0x030200 ] &&
      echo "GPU $(basename "$g"): numa_node $(cat "$g/numa_node"), local_cpulist $(cat "$g/local_cpulist")"
  done
  echo; "${rb[@]}" --version
}

kernels() {
  local kb="$bundle/ringbench_kernel_bench"
  for c in "" "--causal"; do
    echo "-- S=32768 h=16 d=128 bf16 $c"
    timeout 120 "$kb" --seq 32768 --heads 16 --head-dim 128 --dtype bf16 $c --repeats 10 --warmup 3
  done
  echo "-- S=32768 h=16 d=64 bf16"
  timeout 120 "$kb" --seq 32768 --heads 16 --head-dim 64 --dtype bf16 --repeats 10 --kernels flash,cudnn --no-check
}

weak() {
  local sizes=1 seqs=32768 r=2 s=65536
  while [ "$r" -le "$ngpus" ] && [ "$r" -le 4 ]; do sizes="$sizes, $r"; seqs="$seqs, $s"; r=$((r*2)); s=$((s*2)); done
  sed -e "s/ring_sizes: \[1, 2, 4\]/ring_sizes: [$sizes]/" -e "s/seq_lengths: \[32768, 65536, 131072\]/seq_lengths: [$seqs]/" \
    "$RB_ROOT/inputs/ring_weak_scaling.yaml" > "$out/weak.yaml"
  "${mpi[@]}" "${rb[@]}" "$out/weak.yaml" --output "$out/weak.h5" --force
}

coll() {
  cat > "$out/coll.yaml" <<YAML
run: {name: coll_vs_nccl_tests}
backend: cuda
binding: {policy: gpu-near}
sweeps:
  - type: collectives
    operations: [all_reduce, all_gather, reduce_scatter, all_to_all, sendrecv]
    min_bytes: 64MiB
    max_bytes: 1GiB
    factor: 2
    dtypes: [float32]
    in_place: [false, true]
    groups: [world]
    warmup: 5
    iterations: 20
YAML
  "${mpi[@]}" "${rb[@]}" "$out/coll.yaml" --output "$out/coll.h5" --force || return
  [ -n "$nccl_tests" ] || return 0
  # -a 3: the slowest rank's time, as the collectives sweep reports (docs/sweeps/collectives.md)
  for op in all_reduce all_gather reduce_scatter alltoall sendrecv; do
    timeout 120 "${mpi[@]}" "$nccl_tests/${op}_perf" -b 64M -e 1G -f 2 -g 1 -w 5 -n 20 -c 1 -a 3 \
      > "$out/nccl_tests_$op.txt" 2>&1 || return
  done
}

# Twice as many ranks as GPUs: one measuring and one feeder rank per GPU, the feeders' threads
# sharing about 3/4 of the cores; the sweep binds every rank itself, phase by phase.
contention() {
  local threads=$(( $(nproc) * 3 / 4 / ngpus )); [ "$threads" -ge 1 ] || threads=1
  sed -e "s/feeders: 4/feeders: $ngpus/" -e "s/threads: 12}/threads: $threads}/" \
    "$RB_ROOT/inputs/contention_node.yaml" > "$out/contention.yaml"
  mpirun -np $((2 * ngpus)) --bind-to none "${rb[@]}" "$out/contention.yaml" --output "$out/contention.h5" --force
}

large() { "${mpi[@]}" "${rb[@]}" "$RB_ROOT/inputs/large.yaml" --output "$out/large.h5" --force; }
tuning() { "${mpi[@]}" "${rb[@]}" "$RB_ROOT/inputs/tuning.yaml" --output "$out/tuning.h5" --force; }

gputests() {
  local rc=0 n
  for n in ${RB_GPU_TEST_RANKS:-2 $ngpus}; do
    for t in ${RB_GPU_TESTS:-test_ring_mpi_gpu test_cp_schemes_gpu}; do
      echo "-- $t on $n ranks"
      timeout 300 mpirun -np "$n" --bind-to none "$bundle/$t" || rc=1
    done
  done
  return $rc
}

overlap() {
  local only=r1_cudnn_full,r1_cudnn_zigzag,r1_flash_full,r1_flash_zigzag
  [ "$ngpus" -ge 2 ] && only="$only,r2_cudnn_full,r2_cudnn_zigzag"
  [ "$ngpus" -ge 4 ] && only="$only,r4_cudnn_full,r4_cudnn_zigzag,r4_flash_full,r4_flash_zigzag"
  "${mpi[@]}" "${rb[@]}" "$RB_ROOT/inputs/ring_overlap.yaml" --only "$only" --output "$out/overlap.h5" --force \
    --json "$out/overlap.json" || return
  # What the NCCL path can do: its send/recv kernels on the highest-priority stream.
  [ "$ngpus" -ge 4 ] && [ -n "${RB_OVERLAP_PRIORITY:-}" ] &&
    RINGBENCH_NCCL_STREAM_PRIORITY=high "${mpi[@]}" -x RINGBENCH_NCCL_STREAM_PRIORITY "${rb[@]}" \
      "$RB_ROOT/inputs/ring_overlap.yaml" --only r4_cudnn_full,r4_cudnn_zigzag \
      --output "$out/overlap_priority.h5" --force
  return 0
}

mixed() {
  [ "$ngpus" -ge 4 ] || { echo "mixed: needs 4 GPUs"; return 0; }
  RINGBENCH_RANKS_PER_NODE=2 "${mpi[@]}" -x RINGBENCH_RANKS_PER_NODE "${rb[@]}" \
    "$RB_ROOT/inputs/ring_overlap.yaml" --only r4_cudnn_full,r4_cudnn_zigzag \
    --output "$out/mixed.h5" --force --json "$out/mixed.json"
}

# cp_run INPUT NAME SEQS_4 SEQS_2: a context-parallel plan written for 4 GPUs (inputs/INPUT.yaml,
# ring_sizes [4], seq_lengths [SEQS_4]) into NAME.h5. On 2 GPUs the same tokens per GPU on a ring
# of 2 (seq_lengths [SEQS_2], INPUT_2gpu.yaml), without hybrid: it needs a ring across pairs, and
# a one-hop ring is not what it measures.
cp_run() {
  local cfg="$RB_ROOT/inputs/$1.yaml"
  if [ "$ngpus" -eq 2 ]; then
    cfg="$out/$1_2gpu.yaml"
    sed -e 's/ring_sizes: \[4\]/ring_sizes: [2]/' -e "s/seq_lengths: \[$3\]/seq_lengths: [$4]/" \
      -e 's/scheme: \[ring, allgather, ulysses, hybrid\], ulysses_degree: 2,/scheme: [ring, allgather, ulysses],/' \
      "$RB_ROOT/inputs/$1.yaml" > "$cfg"
  elif [ "$ngpus" -lt 4 ]; then
    echo "$2: needs 2 or 4 GPUs"; return 0
  fi
  "${mpi[@]}" "${rb[@]}" "$cfg" --output "$out/$2.h5" --force --json "$out/$2.json"
}

schemes() { cp_run cp_schemes schemes "32768, 131072" "16384, 65536"; }
ulysses() { cp_run ulysses_transports ulysses "32768, 131072" "16384, 65536"; }
cpgrid() { cp_run cp_grid cp_grid "16384, 65536, 196608" "8192, 32768, 98304"; }

heldout() {
  local policy="$RB_ROOT/inputs/tuned_h100.yaml" cfg="$out/heldout.yaml" g=0 rc=0
  if [ -f "$out/tuning.h5" ] && python3 -c "import h5py, pandas, yaml" 2>/dev/null &&
     "$RB_ROOT/analysis/rb-analysis" tune "$out/tuning.h5" --safety-margin 1.05 --hysteresis 1 \
       --out "$out/tuned.yaml" --report "$out/tuned_report/tuning.md"; then
    policy="$out/tuned.yaml"
  fi
  echo "heldout: kernel_policy $policy"
  sed "s|kernel_policy: tuned_h100.yaml|kernel_policy: $policy|" "$RB_ROOT/inputs/kernel_auto_heldout.yaml" > "$cfg"
  # Whole shapes (their flash, cudnn, builtin and tuned sweeps) per GPU, so each file compares.
  local -a groups=()
  for shape in $(grep -oP '^\s*name: \K\S+' "$cfg" | sed 's/_[a-z]*$//' | uniq); do
    groups[g]+="${groups[g]:+,}$(grep -oP "^\s*name: \K${shape}_[a-z]+\$" "$cfg" | paste -sd,)"
    g=$(( (g + 1) % ngpus ))
  done
  for g in "${!groups[@]}"; do
    CUDA_VISIBLE_DEVICES=$g mpirun -np 1 --bind-to none "${rb[@]}" "$cfg" --only "${groups[g]}" \
      --output "$out/heldout_$g.h5" --force > "$out/heldout_$g.log" 2>&1 &
  done
  for g in "${!groups[@]}"; do wait -n || rc=1; done
  return $rc
}

torch() {
  mpirun -np "$ngpus" --bind-to none -x NCCL_NVLS_ENABLE python3 "$RB_ROOT/launch/torch_cp.py" \
    --out "$out/torch" --tokens-per-gpu 8192 32768 --iterations 6 --warmup 2 --methods local ring ulysses
}

if [ "${5:-}" = --step ]; then "$6"; exit; fi
for s in ${steps//,/ }; do
  case "$s" in topo|kernels|weak|large|coll|tuning|contention|gputests|overlap|mixed|schemes|ulysses|cpgrid|torch|heldout) ;; *) echo "perf_node: unknown step '$s' in RB_PERF_STEPS" >&2; exit 2 ;; esac
done
run_step topo 60
run_step kernels 300
run_step weak 480
run_step large 420
run_step coll 300
run_step contention 360
run_step gputests 300
run_step overlap 420
run_step mixed 240
run_step schemes 450
run_step ulysses 300
run_step cpgrid 420
run_step torch 300
run_step tuning 900
run_step heldout 300
exit 0
