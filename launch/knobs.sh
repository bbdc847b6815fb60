# Shared by the run scripts (validate.sh, sweep.sh, large_seq.sh, scaling.sh) and the Slurm jobs:
# turns the usual knobs, given as environment variables, into a ringbench config, and builds
# the mpirun line. Source it after launch/common.sh. docs/launch-and-slurm.md lists the knobs.
#
# Every value is checked before it reaches the YAML file (numbers must be numbers, choices
# must be known words), so an override can never inject text into the config.

# rb_knob_list NAME VALUE: "1024, 2048 4096" -> "1024, 2048, 4096" (positive integers, none
# twice: a repeated length, ring size or rank count would only measure the same point again).
rb_knob_list() {
  local name="$1" value="$2" out="" item seen=" "
  value="${value//,/ }"
  for item in $value; do
    if ! [[ "$item" =~ ^[0-9]+$ ]] || [ "$item" -eq 0 ]; then
      echo "ringbench: $name='$2': '$item' is not a positive integer" >&2
      return 1
    fi
    if [[ "$seen" == *" $item "* ]]; then
      echo "ringbench: $name='$2': $item is listed twice (it would measure the same point twice)" >&2
      return 1
    fi
    seen+="$item "
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

# rb_lcm_to VAR N...: sets VAR to the least common multiple of positive integers (no subshell:
# the scripts call it once, presets_check.sh for thousands of allocations). rb_lcm N... prints it.
rb_lcm_to() {
  local _rb_lcm_var="$1" _rb_lcm_l=1 _rb_lcm_n _rb_lcm_a _rb_lcm_b _rb_lcm_t
  shift
  for _rb_lcm_n in "$@"; do
    _rb_lcm_a=$_rb_lcm_l _rb_lcm_b=$_rb_lcm_n
    while [ "$_rb_lcm_b" -ne 0 ]; do _rb_lcm_t=$((_rb_lcm_a % _rb_lcm_b)); _rb_lcm_a=$_rb_lcm_b; _rb_lcm_b=$_rb_lcm_t; done
    _rb_lcm_l=$((_rb_lcm_l / _rb_lcm_a * _rb_lcm_n))
  done
  printf -v "$_rb_lcm_var" '%s' "$_rb_lcm_l"
}
rb_lcm() {
  local l
  rb_lcm_to l "$@"
  printf '%s' "$l"
}

# rb_fit_lengths_to VAR UNIT L...: the preset's lengths L (ascending) made into lengths every rank
# count can split, all different: each rounded up to a multiple of UNIT, and one that rounding
# made no longer than the one before becomes twice the one before (so the points stay distinct
# and keep growing: at 16384 ranks the sweep's 4096 16384 65536 give 32768 65536 131072, i.e.
# 2, 4, 8 tokens per rank). Sets VAR to "S1, S2, ...".
rb_fit_lengths_to() {
  local _rb_fit_var="$1" _rb_fit_unit="$2" _rb_fit_out="" _rb_fit_prev=0 _rb_fit_l _rb_fit_s
  shift 2
  for _rb_fit_l in "$@"; do
    _rb_fit_s=$(( (_rb_fit_l + _rb_fit_unit - 1) / _rb_fit_unit * _rb_fit_unit ))
    [ "$_rb_fit_s" -le "$_rb_fit_prev" ] && _rb_fit_s=$((2 * _rb_fit_prev))
    _rb_fit_out+="${_rb_fit_out:+, }$_rb_fit_s"
    _rb_fit_prev=$_rb_fit_s
  done
  printf -v "$_rb_fit_var" '%s' "$_rb_fit_out"
}

# rb_seq_lens PRESET_DEFAULT COUNTS: the total sequence lengths of the ring sweep. Without
# ring_sizes one config serves every rank count R of COUNTS (a scaling series, the full
# allocation), and a ring of R ranks needs the length divisible by 2 R (zigzag halves): so by
# unit = 2 x lcm(COUNTS). RB_SEQ_PER_RANK=L (weak scaling, one count) gives L x R; RB_SEQ_LENS
# must already be multiples of unit (an error says the nearest); the preset's defaults are
# rounded up to multiples of unit, and doubled past the one before where rounding made two of
# them equal (rb_fit_lengths_to), with a note. COUNTS empty: no check (ring_sizes decide).
rb_seq_lens() {
  local d_seq="$1" counts="$2" unit item out="" per
  rb_lcm_to unit $counts
  unit=$((2 * unit))
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
  if [ -z "$counts" ]; then
    printf '%s' "${d_seq// /, }"
    return 0
  fi
  rb_fit_lengths_to out "$unit" $d_seq
  [ "$out" != "${d_seq// /, }" ] && echo "ringbench: note: the preset's sequence lengths ${d_seq// /, } rounded up to multiples of $unit (2 x lcm of the rank counts $counts), each longer than the one before: $out" >&2
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

# rb_series NP_MAX [PER_NODE]: the default rank counts of a scaling series: 1, then each count
# about twice the one before, NP_MAX last, chosen so that one config's lengths fit them all
# without growing much, and so that a count fills whole nodes:
#   - every count divides L = lcm(NP_MAX, 2^j), 2^j the largest power of two <= NP_MAX with
#     2 L <= max(2 NP_MAX, 4096): the lengths are multiples of 2 L, so at most 4096 tokens or
#     what one run on all NP_MAX ranks needs;
#   - every count divides the ranks of one node, or is a multiple of them: PER_NODE (when it
#     divides NP_MAX), by default gcd(NP_MAX, 8) (8 GPUs per node: 1 2 4 8, then whole nodes);
#   - each next count is the allowed one nearest to twice the one before (by ratio).
# So 1 2 4 ... NP_MAX for a power of two; 1 2 4 8 16 24 for 24 (the powers of two, then NP_MAX,
# wherever that keeps 2 L within the bound); 1 2 4 8 16 40 80 200 400 1000 for 1000 (not
# 1 ... 512 1000, whose lengths would be multiples of 128000); 1 2 4 8 184 712 16376 for 2047
# nodes x 8 (a node count with only large prime factors leaves gaps: RB_RANK_COUNTS picks others).
# rb_series_to VAR NP_MAX [PER_NODE] sets VAR instead of printing (no subshell).
rb_series_to() {
  local _rb_var="$1" _rb_max="$2" _rb_g="${3:-}" _rb_p=1 _rb_l _rb_cap _rb_d _rb_e _rb_i _rb_lo=() _rb_hi=() _rb_out="1" _rb_d1 _rb_d2
  if ! [[ "$_rb_g" =~ ^[1-9][0-9]*$ ]] || [ $((_rb_max % _rb_g)) -ne 0 ]; then
    _rb_g=1
    while [ "$_rb_g" -lt 8 ] && [ $((_rb_max % (2 * _rb_g))) -eq 0 ]; do _rb_g=$((2 * _rb_g)); done
  fi
  # L = m 2^t (m: the odd part of NP_MAX): 2^t grows from NP_MAX's own power of two while it
  # stays <= NP_MAX and 2 L within the bound.
  _rb_cap=$((2 * _rb_max > 4096 ? 2 * _rb_max : 4096))
  _rb_l=$_rb_max
  while [ $((_rb_l % 2)) -eq 0 ]; do _rb_l=$((_rb_l / 2)); _rb_p=$((2 * _rb_p)); done
  while [ $((4 * _rb_p)) -le $((2 * _rb_max)) ] && [ $((4 * _rb_l * _rb_p)) -le "$_rb_cap" ]; do _rb_p=$((2 * _rb_p)); done
  _rb_l=$((_rb_l * _rb_p))
  # The allowed counts, ascending: divisors of L up to NP_MAX that divide a node or fill nodes.
  for ((_rb_d = 1; _rb_d * _rb_d <= _rb_l; _rb_d++)); do
    ((_rb_l % _rb_d)) && continue
    _rb_e=$((_rb_l / _rb_d))
    ((_rb_d <= _rb_max && (_rb_g % _rb_d == 0 || _rb_d % _rb_g == 0))) && _rb_lo+=("$_rb_d")
    ((_rb_e != _rb_d && _rb_e <= _rb_max && (_rb_g % _rb_e == 0 || _rb_e % _rb_g == 0))) && _rb_hi=("$_rb_e" ${_rb_hi[@]+"${_rb_hi[@]}"})
  done
  _rb_lo+=(${_rb_hi[@]+"${_rb_hi[@]}"})
  _rb_p=1
  while [ "$_rb_p" -lt "$_rb_max" ]; do
    # d1: the largest allowed count in (p, 2p]; d2: the smallest >= 2p; the one nearer 2p by ratio.
    _rb_d1=0 _rb_d2=0
    for _rb_i in "${_rb_lo[@]}"; do
      ((_rb_i <= _rb_p)) && continue
      ((_rb_i <= 2 * _rb_p)) && _rb_d1=$_rb_i
      ((_rb_i >= 2 * _rb_p)) && { _rb_d2=$_rb_i; break; }
    done
    if [ "$_rb_d1" -gt 0 ] && { [ "$_rb_d2" -eq 0 ] || [ $((4 * _rb_p * _rb_p)) -le $((_rb_d1 * _rb_d2)) ]; }; then
      _rb_p=$_rb_d1
    else
      _rb_p=$_rb_d2
    fi
    _rb_out+=" $_rb_p"
  done
  printf -v "$_rb_var" '%s' "$_rb_out"
}
rb_series() {
  local s
  rb_series_to s "$@"
  printf '%s' "$s"
}
