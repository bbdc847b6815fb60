#!/usr/bin/env bash
# The generated configs fit any allocation (issue #17 item 6): for 1-32 nodes x 8 GPUs, the
# scaling series (1, 2, 4, ..., and the full allocation) of every preset gets sequence lengths
# that a ring of each count can split (divisible by 2 x ranks), and with a ringbench binary the
# config is validated by `ringbench --dry-run` at the full allocation (and at one count of the
# series) where a login-node dry-run (--world-size) is available. Also: RB_SEQ_LENS that do not
# fit are refused with the nearest values, RB_SEQ_PER_RANK gives L x ranks.
#   presets_check.sh SRC_DIR [RINGBENCH]
set -uo pipefail
src="$1"
bin="${2:-}"
source "$src/launch/common.sh" >/dev/null 2>&1 || true
source "$src/launch/knobs.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

dry_world=0
if [ -n "$bin" ] && "$bin" --help 2>&1 | grep -q -- "--world-size"; then dry_world=1; fi
for preset in quick sweep large; do
  for nodes in 1 2 3 4 6 8 12 16 24 32; do
    alloc=$((8 * nodes))
    counts="$(rb_series "$alloc")"
    cfg="$work/$preset-$nodes.yaml"
    RB_OUT_DIR="$work" rb_write_config "$cfg" "$preset" "$counts" 2>/dev/null || { bad "$preset at $alloc ranks: no config"; continue; }
    seqs="$(sed -n 's/^    seq_lengths: \[\(.*\)\]$/\1/p' "$cfg")"
    [ -n "$seqs" ] || { bad "$preset at $alloc ranks: no seq_lengths in $cfg"; continue; }
    for s in ${seqs//,/ }; do
      for r in $counts; do
        [ $((s % (2 * r))) -eq 0 ] || bad "$preset at $alloc ranks: seq $s is not divisible by 2 x $r"
      done
    done
    if [ "$dry_world" = 1 ]; then
      for np in "$alloc" 2; do
        out="$("$bin" "$cfg" --dry-run --world-size "$np" --ranks-per-node "$((np < 8 ? np : 8))" 2>&1)" \
          || bad "$preset: ringbench --dry-run --world-size $np refused the config: $(echo "$out" | tail -n 3)"
      done
    fi
  done
done
echo "checked presets quick/sweep/large at 8-256 ranks (series 1, 2, 4, ..., allocation)$([ "$dry_world" = 1 ] && echo ', with ringbench --dry-run --world-size')"

# User lengths are never changed: a misfit is refused with the nearest lengths that fit.
msg="$(RB_SEQ_LENS=4096 rb_write_config "$work/u.yaml" sweep "1 2 4 8 12" 2>&1)" && bad "RB_SEQ_LENS=4096 at 12 ranks was accepted"
[[ "$msg" == *"4096 is not a multiple of 48"*"nearest: 4080 or 4128"* ]] || bad "RB_SEQ_LENS misfit message: $msg"
RB_SEQ_LENS=4800 rb_write_config "$work/u.yaml" sweep "1 2 4 8 12" 2>/dev/null || bad "RB_SEQ_LENS=4800 (a multiple of 48) refused"
# Weak scaling: one count, L x ranks.
RB_SEQ_PER_RANK=2048 rb_write_config "$work/w.yaml" sweep "24" 2>/dev/null || bad "RB_SEQ_PER_RANK=2048 at 24 refused"
grep -q "seq_lengths: \[49152\]" "$work/w.yaml" || bad "RB_SEQ_PER_RANK=2048 at 24 ranks: $(grep seq_lengths "$work/w.yaml")"
RB_SEQ_PER_RANK=1023 rb_write_config "$work/w.yaml" sweep "4" 2>/dev/null && bad "an odd RB_SEQ_PER_RANK was accepted"
# With explicit ring sizes the counts do not constrain the lengths (the sweep checks them).
RB_RING_SIZES=2 rb_write_config "$work/r.yaml" sweep "1 2 4 8 12" 2>/dev/null || bad "RB_RING_SIZES=2 refused"
grep -q "seq_lengths: \[4096, 16384, 65536\]" "$work/r.yaml" || bad "RB_RING_SIZES=2 changed the preset lengths"
[ "$fail" = 0 ] && echo "PASS" || exit 1
