#!/usr/bin/env bash
# The generated configs fit any allocation (issue #17 item 6) with distinct points (issue #30
# item 6): for every allocation of 1-2,048 nodes x 1-8 GPUs (every rank count 1-16,384 that such
# an allocation has), by arithmetic on launch/knobs.sh's functions,
#   - the default scaling series (rb_series) runs from 1 to the allocation, ascending, one
#     length can serve it without growing much (2 x lcm(series) <= max(2 x allocation, 4096)),
#     and each count divides or fills whole nodes of gcd(allocation, 8) ranks;
#   - every preset's lengths, for the series and for one run on the whole allocation (the
#     nightly, sweep.sh), are splittable by every rank count R of it (divisible by 2 R),
#     strictly increasing (no two points with the same length and ring size), never below the
#     asked length, and each either the asked length rounded up to the unit or twice the one
#     before (the documented rule, docs/launch-and-slurm.md);
# and with a ringbench binary that has the login-node dry-run (--world-size), for a sample of
# allocations up to 2,048 x 8 GPUs, `ringbench CONFIG --dry-run --world-size N --ranks-per-node K
# --verbose` accepts the written config and lists no point (S, R) twice. Also: RB_SEQ_LENS that
# do not fit are refused with the nearest values, a value listed twice is refused,
# RB_SEQ_PER_RANK gives L x ranks, RB_RING_SIZES leaves the preset lengths alone.
#   presets_check.sh SRC_DIR [RINGBENCH]
set -uo pipefail
src="$1"
bin="${2:-}"
source "$src/launch/common.sh" >/dev/null 2>&1 || true
source "$src/launch/knobs.sh"
work="$(mktemp -d)"
fail=0
nfail=0
shown=0  # failures printed in this part of the check (20 at most)
bad() {
  fail=1
  nfail=$((nfail + 1))
  shown=$((shown + 1))
  [ "$shown" -le 20 ] && echo "FAIL: $*"
  [ "$shown" -eq 21 ] && echo "FAIL: ... (more failures in this part: only counted)"
  return 0
}
# Function output through a file in memory, not $(...): a subshell per call (or a file on a
# disk) would make the 8,579 allocations x 3 presets x 2 modes take minutes.
shm="$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)"
trap 'rm -rf "$work" "$shm"' EXIT
tmp="$shm/out"
call() {
  "$@" > "$tmp" 2>/dev/null || return 1
  IFS= read -r got < "$tmp" || true
}
gcd() {
  local a=$1 b=$2 t
  while [ "$b" -ne 0 ]; do t=$((a % b)); a=$b; b=$t; done
  g=$a
}
# unit_of COUNTS: sets u = 2 x lcm(COUNTS) (the test's own arithmetic, not knobs.sh's).
unit_of() {
  local l=1 c
  for c in $1; do gcd "$l" "$c"; l=$((l / g * c)); done
  u=$((2 * l))
}

presets="quick sweep large"
declare -A asked
for preset in $presets; do
  asked[$preset]=""
  RB_OUT_DIR="$work" rb_write_config "$work/d.yaml" "$preset" "" 2>/dev/null || { bad "$preset: no config"; continue; }
  asked[$preset]="$(sed -n 's/^    seq_lengths: \[\(.*\)\]$/\1/p' "$work/d.yaml")"
  asked[$preset]="${asked[$preset]//,/}"
done

# check_lengths KEY WHAT UNIT ASKED...: the generated lengths ($got) against the asked ones, for
# rank counts whose 2 x lcm is UNIT; duplicates are also counted per KEY (preset and mode).
declare -A dups
check_lengths() {
  local key="$1" what="$2" u="$3" i=0 s prev=0 lim want dup=0
  shift 3
  local seqs=(${got//,/ })
  if [ ${#seqs[@]} -ne $# ]; then
    bad "$what: ${#seqs[@]} lengths ($got) for the $# asked ($*)"
    return
  fi
  for want in "$@"; do
    s=${seqs[i]}
    i=$((i + 1))
    [ $((s % u)) -eq 0 ] || bad "$what: length $s is not divisible by 2 x every rank count (2 x lcm = $u)"
    [ "$s" -gt "$prev" ] || dup=1
    [ "$s" -ge "$want" ] || bad "$what: length $s is below the asked $want"
    lim=$((want + u - 1 > 2 * prev ? want + u - 1 : 2 * prev))
    [ "$s" -le "$lim" ] || bad "$what: length $s is neither $want rounded up to $u nor twice $prev ($got)"
    prev=$s
  done
  if [ "$dup" = 1 ]; then
    # The first three per preset and mode, whatever else failed before.
    dups[$key]=$((${dups[$key]:-0} + 1))
    fail=1
    nfail=$((nfail + 1))
    [ "${dups[$key]}" -le 3 ] && echo "FAIL: $what: duplicate (or decreasing) points: $got"
  fi
  return 0
}

# 1. Arithmetic: every allocation size of 1-2,048 nodes x 1-8 GPUs per node.
declare -A seen
nalloc=0
for ((k = 1; k <= 8; k++)); do
  for ((n = 1; n <= 2048; n++)); do
    alloc=$((n * k))
    [ -n "${seen[$alloc]:-}" ] && continue
    seen[$alloc]=1
    nalloc=$((nalloc + 1))
    call rb_series "$alloc" || { bad "rb_series $alloc failed"; continue; }
    series="$got"
    set -- $series
    [ "$1" = 1 ] && [ "${!#}" = "$alloc" ] || bad "rb_series $alloc: '$series' does not run from 1 to $alloc"
    prev=0
    for c in $series; do
      [ "$c" -gt "$prev" ] || bad "rb_series $alloc: '$series' is not strictly ascending"
      prev=$c
    done
    node=1
    while [ "$node" -lt 8 ] && [ $((alloc % (2 * node))) -eq 0 ]; do node=$((2 * node)); done
    for c in $series; do
      [ $((node % c)) -eq 0 ] || [ $((c % node)) -eq 0 ] || bad "rb_series $alloc: $c ranks neither divide nor fill nodes of $node ($series)"
    done
    unit_of "$series"
    cap=$((2 * alloc > 4096 ? 2 * alloc : 4096))
    [ "$u" -le "$cap" ] || bad "rb_series $alloc: its lengths must be multiples of $u (2 x lcm of $series), more than $cap = max(2 x $alloc, 4096)"
    for preset in $presets; do
      call rb_seq_lens "${asked[$preset]}" "$series" || bad "$preset at the $alloc-rank series $series: refused"
      check_lengths "$preset, scaling series" "$preset at the $alloc-rank series $series" "$u" ${asked[$preset]}
      call rb_seq_lens "${asked[$preset]}" "$alloc" || bad "$preset at $alloc ranks (one run): refused"
      check_lengths "$preset, one run" "$preset at $alloc ranks (one run)" "$((2 * alloc))" ${asked[$preset]}
    done
  done
done
for key in "${!dups[@]}"; do
  echo "FAIL: $key: duplicate points at ${dups[$key]} of the $nalloc allocation sizes (1-2048 nodes x 1-8 GPUs)"
done
echo "checked $nalloc allocation sizes (1-2048 nodes x 1-8 GPUs) x presets $presets, the scaling series and one run on all ranks, by arithmetic"

# The documented examples (docs/launch-and-slurm.md).
call rb_series 1000; [ "$got" = "1 2 4 8 16 40 80 200 400 1000" ] || bad "rb_series 1000: '$got'"
call rb_series 24; [ "$got" = "1 2 4 8 16 24" ] || bad "rb_series 24: '$got'"
call rb_series 2040; [ "$got" = "1 2 4 8 24 40 120 408 680 2040" ] || bad "rb_series 2040: '$got'"
call rb_series 16376; [ "$got" = "1 2 4 8 184 712 16376" ] || bad "rb_series 16376: '$got'"
call rb_series 18 6; [ "$got" = "1 2 3 6 12 18" ] || bad "rb_series 18 6 (6 per node): '$got'"
call rb_series 16384; [ "$got" = "1 2 4 8 16 32 64 128 256 512 1024 2048 4096 8192 16384" ] || bad "rb_series 16384: '$got'"
call rb_seq_lens "4096 16384 65536" "$(rb_series 1000)"; [ "$got" = "8000, 20000, 68000" ] || bad "sweep at the 1000-rank series: '$got'"
call rb_seq_lens "4096 16384 65536" "16384"; [ "$got" = "32768, 65536, 131072" ] || bad "sweep at 16384 ranks: '$got'"

# 2. ringbench itself, on a sample of allocations (NODESxGPUS): the written config is accepted at
# the full allocation and at a count of its series, and its plan has no point (S, R) twice.
shown=0
dry_world=0
if [ -n "$bin" ] && "$bin" --help 2>&1 | grep -q -- "--world-size"; then dry_world=1; fi
if [ "$dry_world" = 1 ]; then
  jobs_file="$work/jobs"
  : > "$jobs_file"
  for nk in 1x1 1x3 1x8 2x8 3x8 5x7 12x8 32x8 125x8 1000x8 1023x6 2039x8 2047x7 2047x8 2048x8; do
    n=${nk%x*} k=${nk#*x} alloc=$((n * k))
    series="$(rb_series "$alloc")"
    set -- $series
    mid=$alloc
    [ $# -ge 2 ] && mid=${@: -2:1}
    for preset in $presets; do
      cfg="$work/$preset-$nk.yaml"
      RB_OUT_DIR="$work" rb_write_config "$cfg" "$preset" "$series" 2>/dev/null || { bad "$preset at $nk: no config"; continue; }
      echo "$cfg $alloc $k" >> "$jobs_file"
      # A count of a series need not fill nodes of K (K = 3, 5, 6, 7): plan it on nodes of the
      # largest divisor of it up to K.
      rpn=$((mid < k ? mid : k))
      while [ $((mid % rpn)) -ne 0 ]; do rpn=$((rpn - 1)); done
      [ "$mid" != "$alloc" ] && echo "$cfg $mid $rpn" >> "$jobs_file"
    done
    cfg="$work/sweep-$nk-one.yaml"
    RB_OUT_DIR="$work" rb_write_config "$cfg" sweep "$alloc" 2>/dev/null || { bad "sweep at $nk (one run): no config"; continue; }
    echo "$cfg $alloc $k" >> "$jobs_file"
  done
  # Two at a time: each dry-run is mostly start-up.
  export bin
  xargs -P 2 -L 1 bash -c '"$bin" "$0" --dry-run --world-size "$1" --ranks-per-node "$2" --verbose \
      > "$0.$1.out" 2>&1; echo $? > "$0.$1.rc"' < "$jobs_file"
  ndry=0
  while read -r cfg np k; do
    ndry=$((ndry + 1))
    what="$(basename "$cfg" .yaml) at --world-size $np --ranks-per-node $k"
    if [ "$(cat "$cfg.$np.rc" 2>/dev/null)" != 0 ]; then
      bad "$what: ringbench --dry-run refused the config: $(tail -n 3 "$cfg.$np.out")"
      continue
    fi
    pts="$(grep -oE '^  S=[0-9]+ R=[0-9]+ ' "$cfg.$np.out")"
    [ -n "$pts" ] || { bad "$what: no ring points in the --verbose plan"; continue; }
    dup="$(sort <<< "$pts" | uniq -d | tr -s ' ' | tr '\n' ';')"
    [ -z "$dup" ] || bad "$what: points listed twice:$dup"
  done < "$jobs_file"
  echo "checked $ndry configs with ringbench --dry-run --world-size --verbose (up to 2048 nodes x 8 GPUs)"
fi

shown=0
# User lengths are never changed: a misfit is refused with the nearest lengths that fit.
msg="$(RB_SEQ_LENS=4096 rb_write_config "$work/u.yaml" sweep "1 2 4 8 12" 2>&1)" && bad "RB_SEQ_LENS=4096 at 12 ranks was accepted"
[[ "$msg" == *"4096 is not a multiple of 48"*"nearest: 4080 or 4128"* ]] || bad "RB_SEQ_LENS misfit message: $msg"
RB_SEQ_LENS=4800 rb_write_config "$work/u.yaml" sweep "1 2 4 8 12" 2>/dev/null || bad "RB_SEQ_LENS=4800 (a multiple of 48) refused"
# The same point twice is refused (lengths, ring sizes, rank counts).
msg="$(RB_SEQ_LENS=4800,9600,4800 rb_write_config "$work/u.yaml" sweep "1 2 4 8 12" 2>&1)" && bad "RB_SEQ_LENS with 4800 twice was accepted"
[[ "$msg" == *"4800 is listed twice"* ]] || bad "RB_SEQ_LENS repeat message: $msg"
RB_RING_SIZES="2 2" rb_write_config "$work/u.yaml" sweep "" 2>/dev/null && bad "RB_RING_SIZES with 2 twice was accepted"
rb_knob_list RB_RANK_COUNTS "1 2 4 4" >/dev/null 2>&1 && bad "RB_RANK_COUNTS with 4 twice was accepted"
# Weak scaling: one count, L x ranks.
RB_SEQ_PER_RANK=2048 rb_write_config "$work/w.yaml" sweep "24" 2>/dev/null || bad "RB_SEQ_PER_RANK=2048 at 24 refused"
grep -q "seq_lengths: \[49152\]" "$work/w.yaml" || bad "RB_SEQ_PER_RANK=2048 at 24 ranks: $(grep seq_lengths "$work/w.yaml")"
RB_SEQ_PER_RANK=1023 rb_write_config "$work/w.yaml" sweep "4" 2>/dev/null && bad "an odd RB_SEQ_PER_RANK was accepted"
# With explicit ring sizes the counts do not constrain the lengths (the sweep checks them).
RB_RING_SIZES=2 rb_write_config "$work/r.yaml" sweep "1 2 4 8 12" 2>/dev/null || bad "RB_RING_SIZES=2 refused"
grep -q "seq_lengths: \[4096, 16384, 65536\]" "$work/r.yaml" || bad "RB_RING_SIZES=2 changed the preset lengths"
if [ "$fail" = 0 ]; then
  echo "PASS"
else
  echo "FAIL: $nfail failure(s)"
  exit 1
fi
