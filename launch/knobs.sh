# Shared by the run scripts (validate.sh, sweep.sh, large_seq.sh, scaling.sh) and the Slurm jobs:
# turns the usual knobs, given as environment variables, into a ringbench config, and builds
# the mpirun line. Source it after launch/common.sh. docs/launch-and-slurm.md lists the knobs.
#
# Every value is checked before it reaches the YAML file (numbers must be numbers, choices
# must be known words), so an override can never inject text into the config.

# rb_knob_list NAME VALUE: "1024, 2048 4096" -> "1024, 2048, 4096" (positive integers only).
rb_knob_list() {
  local name="$1" value="$2" out="" item
  value="${value//,/ }"
  for item in $value; do
    if ! [[ "$item" =~ ^[0-9]+$ ]] || [ "$item" -eq 0 ]; then
      echo "ringbench: $name='$2': '$item' is not a positive integer" >&2
      return 1
    fi
    out+="${out:+, }$item"
  done
  [ -n "$out" ] || { echo "ringbench: $name is empty" >&2; return 1; }
  printf '%s' "$out"
}

# rb_knob_int NAME VALUE: a positive integer, or an error naming the variable.
rb_knob_int() {
  if ! [[ "$2" =~ ^[0-9]+$ ]] || [ "$2" -eq 0 ]; then
    echo "ringbench: $1='$2' is not a positive integer" >&2
    return 1
  fi
  printf '%s' "$2"
}

# rb_knob_word NAME VALUE ALLOWED...: one of the allowed words.
rb_knob_word() {
  local name="$1" value="$2" w
  shift 2
  for w in "$@"; do [ "$value" = "$w" ] && { printf '%s' "$value"; return 0; }; done
  echo "ringbench: $name='$value' is not one of: $*" >&2
  return 1
}

# rb_knob_name NAME VALUE: a run name / directory-safe word (letters, digits, _ - .).
rb_knob_name() {
  if ! [[ "$2" =~ ^[A-Za-z0-9_.-]+$ ]] || [ "$2" = . ] || [ "$2" = .. ]; then
    echo "ringbench: $1='$2' may contain only letters, digits, '_', '-' and '.'" >&2
    return 1
  fi
  printf '%s' "$2"
}

# rb_yaml_string VALUE: a double-quoted YAML scalar (paths may hold spaces or quotes).
rb_yaml_string() {
  local s="$1"
  s="${s//\\/\\\\}"
  s="${s//\"/\\\"}"
  printf '"%s"' "$s"
}

# rb_lcm N...: the least common multiple of positive integers.
rb_lcm() {
  local l=1 n a b t
  for n in "$@"; do
    a=$l b=$n
    while [ "$b" -ne 0 ]; do t=$((a % b)); a=$b; b=$t; done
    l=$((l / a * n))
  done
  printf '%s' "$l"
}

# rb_seq_lens PRESET_DEFAULT COUNTS: the total sequence lengths of the ring sweep. Without
# ring_sizes one config serves every rank count R of COUNTS (a scaling series, the full
# allocation), and a ring of R ranks needs the length divisible by 2 R (zigzag halves): so by
# unit = 2 x lcm(COUNTS). RB_SEQ_PER_RANK=L (weak scaling, one count) gives L x R; RB_SEQ_LENS
# must already be multiples of unit (an error says the nearest); the preset's defaults are
# rounded up to multiples of unit, with a note. COUNTS empty: no check (ring_sizes decide).
rb_seq_lens() {
  local d_seq="$1" counts="$2" unit item out="" per
  unit=$(( 2 * $(rb_lcm $counts) ))
  if [ -n "${RB_SEQ_PER_RANK:-}" ]; then
    per=$(rb_knob_int RB_SEQ_PER_RANK "$RB_SEQ_PER_RANK") || return 1
    [ $((per % 2)) -eq 0 ] || { echo "ringbench: RB_SEQ_PER_RANK=$per must be even (a zigzag rank holds two halves)" >&2; return 1; }
    set -- $counts
    [ $# -eq 1 ] || { echo "ringbench: RB_SEQ_PER_RANK gives one length per rank count; this config serves counts $counts (write one config per count)" >&2; return 1; }
    printf '%s' "$((per * $1))"
    return 0
  fi
  if [ -n "${RB_SEQ_LENS:-}" ]; then
    out=$(rb_knob_list RB_SEQ_LENS "$RB_SEQ_LENS") || return 1
    [ -z "$counts" ] && { printf '%s' "$out"; return 0; }
    for item in ${out//,/ }; do
      if [ $((item % unit)) -ne 0 ]; then
        echo "ringbench: RB_SEQ_LENS: $item is not a multiple of $unit (2 x the least common multiple of the rank counts $counts: a ring of R ranks splits the sequence into 2 R halves); nearest: $((item / unit * unit)) or $(((item / unit + 1) * unit))" >&2
        return 1
      fi
    done
    printf '%s' "$out"
    return 0
  fi
  for item in $d_seq; do
    [ -n "$counts" ] && item=$(( (item + unit - 1) / unit * unit ))
    out+="${out:+, }$item"
  done
  [ -n "$counts" ] && [ "$out" != "${d_seq// /, }" ] && echo "ringbench: note: the preset's sequence lengths rounded up to multiples of $unit (2 x lcm of the rank counts $counts): $out" >&2
  printf '%s' "$out"
}

# rb_write_config FILE PRESET [COUNTS]: writes a config from the knobs. PRESET (quick|sweep|large)
# only changes the defaults; every knob overrides it:
#   RB_NAME RB_OUT_DIR RB_BACKEND RB_BINDING RB_BATCH RB_SEQ_LENS RB_SEQ_PER_RANK RB_HEADS
#   RB_HEAD_DIM RB_DTYPE RB_CAUSAL RB_LAYOUT RB_RING_SIZES RB_ITERS RB_WARMUP RB_BACKWARD RB_PROFILE
# COUNTS: the rank counts the config will run at (space separated), so that its sequence
# lengths fit every one of them (rb_seq_lens); empty with RB_RING_SIZES or when unknown.
rb_write_config() {
  local file="$1" preset="$2" counts="${3:-}"
  local d_seq d_batch d_heads d_hd d_iters d_warm d_profile
  case "$preset" in
    quick) d_seq="256 512"; d_batch=1; d_heads=2; d_hd=32; d_iters=3; d_warm=1; d_profile=1 ;;
    sweep) d_seq="4096 16384 65536"; d_batch=1; d_heads=16; d_hd=128; d_iters=10; d_warm=3; d_profile=1 ;;
    large) d_seq="262144 1048576"; d_batch=1; d_heads=16; d_hd=128; d_iters=5; d_warm=2; d_profile=1 ;;
    *) echo "rb_write_config: unknown preset '$preset'" >&2; return 1 ;;
  esac
  local name out_dir backend binding batch seqs heads hd causal iters warm backward profile
  name=$(rb_knob_name RB_NAME "${RB_NAME:-$preset}") || return 1
  out_dir="${RB_OUT_DIR:-results}"
  if [[ "$out_dir" == *$'\n'* || "$out_dir" == *$'\r'* ]]; then
    echo "ringbench: RB_OUT_DIR must not contain a line break" >&2
    return 1
  fi
  backend=$(rb_knob_word RB_BACKEND "${RB_BACKEND:-auto}" auto host cuda) || return 1
  binding=$(rb_knob_word RB_BINDING "${RB_BINDING:-none}" none core numa gpu-near) || return 1
  batch=$(rb_knob_int RB_BATCH "${RB_BATCH:-$d_batch}") || return 1
  [ -n "${RB_RING_SIZES:-}" ] && counts=""
  seqs=$(rb_seq_lens "$d_seq" "$counts") || return 1
  heads=$(rb_knob_int RB_HEADS "${RB_HEADS:-$d_heads}") || return 1
  hd=$(rb_knob_int RB_HEAD_DIM "${RB_HEAD_DIM:-$d_hd}") || return 1
  iters=$(rb_knob_int RB_ITERS "${RB_ITERS:-$d_iters}") || return 1
  warm="${RB_WARMUP:-$d_warm}"
  [[ "$warm" =~ ^[0-9]+$ ]] || { echo "ringbench: RB_WARMUP='$warm' is not an integer >= 0" >&2; return 1; }
  causal=$(rb_knob_word RB_CAUSAL "${RB_CAUSAL:-true}" true false) || return 1
  backward=$(rb_knob_word RB_BACKWARD "${RB_BACKWARD:-true}" true false) || return 1
  profile=$(rb_knob_word RB_PROFILE "${RB_PROFILE:-$d_profile}" 0 1) || return 1
  local dtype="" layout="" rings=""
  if [ -n "${RB_DTYPE:-}" ]; then dtype=$(rb_knob_word RB_DTYPE "$RB_DTYPE" fp32 fp16 bf16) || return 1; fi
  if [ -n "${RB_LAYOUT:-}" ]; then
    layout=$(rb_knob_word RB_LAYOUT "$RB_LAYOUT" contiguous zigzag striped) || return 1
  fi
  if [ -n "${RB_RING_SIZES:-}" ]; then rings=$(rb_knob_list RB_RING_SIZES "$RB_RING_SIZES") || return 1; fi
  {
    echo "# Written by launch/knobs.sh (preset $preset); the knobs are in docs/launch-and-slurm.md."
    echo "run:"
    echo "  name: $name"
    echo "  output_dir: $(rb_yaml_string "$out_dir")"
    echo "backend: $backend"
    echo "binding:"
    echo "  policy: $binding"
    echo "sweeps:"
    echo "  - type: ring_attention"
    echo "    name: ring"
    echo "    batch: $batch"
    echo "    seq_lengths: [$seqs]"
    echo "    num_heads: $heads"
    echo "    head_dim: $hd"
    echo "    causal: $causal"
    [ -n "$dtype" ] && echo "    dtype: $dtype"
    [ -n "$layout" ] && echo "    layout: $layout"
    # Without ring_sizes the ring is the whole job (the world size): the same config then
    # serves every rank count of a scaling series.
    [ -n "$rings" ] && echo "    ring_sizes: [$rings]"
    echo "    warmup: $warm"
    echo "    iterations: $iters"
    echo "    backward: $backward"
    if [ "$profile" = 1 ]; then
      # The cost model's ring-neighbour transfer model comes from the sendrecv series.
      echo "  - type: collectives"
      echo "    name: collectives"
      echo "    operations: [sendrecv, all_reduce, all_gather]"
      echo "    iterations: $iters"
      echo "  - type: p2p_matrix"
      echo "    name: p2p"
      echo "    iterations: $iters"
    fi
  } > "$file"
}

# rb_mpirun_cmd NP: fills the array RB_CMD with the launcher line (not the program):
#   $RB_MPIRUN (default mpirun) -np NP [--oversubscribe when NP exceeds the cores here]
#   [--bind-to $RB_MPI_BIND] $RB_MPI_ARGS (split on whitespace; for arguments with spaces,
#   use an MCA environment variable instead).
rb_mpirun_cmd() {
  local np="$1"
  RB_CMD=("${RB_MPIRUN:-mpirun}" -np "$np")
  if [ "$np" -gt "$(nproc)" ] && [ -z "${SLURM_JOB_ID:-}" ]; then RB_CMD+=(--oversubscribe); fi
  [ -n "${RB_MPI_BIND:-}" ] && RB_CMD+=(--bind-to "$RB_MPI_BIND")
  if [ -n "${RB_MPI_ARGS:-}" ]; then
    local extra
    read -r -a extra <<< "$RB_MPI_ARGS"
    RB_CMD+=("${extra[@]}")
  fi
  return 0
}

# rb_ringbench_bin: the program to run ($RINGBENCH_BIN, else the build directory's).
rb_ringbench_bin() {
  printf '%s' "${RINGBENCH_BIN:-$RB_BUILD/ringbench}"
}

# rb_series NP_MAX: "1 2 4 ... NP_MAX" (powers of two, NP_MAX appended when not one).
rb_series() {
  local max="$1" n=1 out=""
  while [ "$n" -le "$max" ]; do out+="$n "; n=$((n * 2)); done
  [ $((n / 2)) -ne "$max" ] && out+="$max"
  printf '%s' "${out% }"
}
