#!/usr/bin/env bash
# CPU kernels against a same-run memcpy of the op's minimum traffic, for every op x mode at the three model
# shapes of spec §8.1 (DeepSeek-V3: H 7168, top-8 of 256; Qwen3-235B: H 4096, top-8 of 128; Mixtral: H 4096,
# top-2 of 8), bf16 by default, N = 4096 tokens. Each cell is `moec bench --target cpu`'s "x memcpy" (the
# median of at least REPS runs and BUDGET seconds, against a memcpy on as many threads). Usage:
# bench/cpu/table.sh [DTYPE]; TOKENS, REPS, BUDGET and THREADS (default: all) override; EXTRA adds moec bench
# arguments to every cell (EXTRA="--disable compact-predicated-folds" measures without an optimization).
# AGAINST=OTHER_MOEC compares two builds on a noisy machine: each cell is "other / this , other / this",
# the two binaries run in the order A B B A (on this VM consecutive runs alternate fast and slow, by up to
# 0.1 of a memcpy, so A B A B favours A). AB=NAME compares one build with and without an optimization: each
# cell is "off / on , off / on" (`--disable NAME`, in the order A B B A); ENABLE=1 with AB=NAME turns an
# opt-in optimization on instead (`--enable NAME`; the cell is still "off / on"). ROWS=REGEX measures only the rows
# whose label matches (ROWS='mix_precision' for C2 without mixed precision). BOUND=1 adds to each figure, in
# parentheses, the most a kernel can reach: the op's read bytes read alone, against the same memcpy (moec
# bench's second line). PROCS=3 makes each figure the
# median of 3 processes. On this VM consecutive processes often alternate fast and slow (A3 at DeepSeek-V3:
# 0.94, 0.81, 0.94, 0.82, ...), and the whole machine has slow spells of minutes (B2 at Mixtral, 2 threads:
# 0.6 for minutes, then 1.2): compare builds with AGAINST or AB, and repeat a table at another time.
set -euo pipefail
cd "$(dirname "$0")/../.."
moec=${MOEC:-build/bin/moec}
dtype=${1:-bf16} tokens=${TOKENS:-4096} reps=${REPS:-5} budget=${BUDGET:-1} procs=${PROCS:-1}
[[ $procs =~ ^[1-9][0-9]*$ ]] || { echo "table.sh: PROCS must be a whole number >= 1, got '$procs'" >&2; exit 2; }
threads=()
[[ -n ${THREADS:-} ]] && threads=(--threads "$THREADS")
read -r -a extra <<<"${EXTRA:-}"
shapes=("7168 256 8" "4096 128 8" "4096 8 2")
ratio() { # moec binary, moec bench arguments -> "0.93": the median over PROCS processes
  local bin=$1 runs=()
  shift
  for ((p = 0; p < procs; p++)); do
    runs+=("$("$bin" bench "$@" --target cpu --dtype "$dtype" --tokens "$tokens" --reps "$reps" --budget "$budget" \
      "${threads[@]}" "${extra[@]}" | sed -n "s/.*; \([0-9.]*\)x memcpy$/\1/p${BOUND:+; s/.* can reach is \([0-9.]*\)x memcpy$/(\1)/p}" |
      paste -sd' ')")
  done
  printf '%s\n' "${runs[@]}" | sort -n | sed -n "$(((procs + 1) / 2))p"
}
cell() { # moec bench arguments -> "0.93", or "0.88 / 0.93 , 0.87 / 0.91" with AGAINST or AB
  if [[ -n ${AB:-} ]]; then
    local off=(--disable "$AB") on=()
    [[ -n ${ENABLE:-} ]] && off=() on=(--enable "$AB")
    local off1 on1 on2 off2
    off1=$(ratio "$moec" "$@" "${off[@]}") on1=$(ratio "$moec" "$@" "${on[@]}")
    on2=$(ratio "$moec" "$@" "${on[@]}") off2=$(ratio "$moec" "$@" "${off[@]}")
    echo "$off1 / $on1 , $off2 / $on2"
    return
  fi
  if [[ -z ${AGAINST:-} ]]; then
    ratio "$moec" "$@"
    return
  fi
  local other1 this1 this2 other2
  other1=$(ratio "$AGAINST" "$@") this1=$(ratio "$moec" "$@")
  this2=$(ratio "$moec" "$@") other2=$(ratio "$AGAINST" "$@")
  echo "$other1 / $this1 , $other2 / $this2"
}
row() { # label, op, then arguments that use $H $E $K
  local label=$1 op=$2 line
  shift 2
  [[ -n ${ROWS:-} && ! $label =~ $ROWS ]] && return 0
  line="| $label |"
  for shape in "${shapes[@]}"; do
    read -r H E K <<<"$shape"
    local args=()
    for a in "$@"; do a=${a//\$H/$H}; a=${a//\$E/$E}; args+=("${a//\$K/$K}"); done
    line+=" $(cell "$op" "${args[@]}") |"
  done
  echo "$line"
}
echo "CPU, $dtype, N=$tokens, threads=${THREADS:-all}${PROCS:+, median of $PROCS processes}: fraction of a same-run memcpy on as many threads${AGAINST:+ ($AGAINST / $moec, twice)}${AB:+ (without / with $AB, twice)}"
echo "| op, mode | DeepSeek-V3 | Qwen3 | Mixtral |"
echo "|---|---|---|---|"
b2=(moe_init_routing_v2_grad --dim 'H=$H' --attr 'top_k=$K' --experts '$E')
row "B2 dropless" "${b2[@]}"
row "B2 active_num" "${b2[@]}" --active
row "B2 drop_pad_mode=1" "${b2[@]}" --attr drop_pad_mode=1
a3=(moe_token_unpermute_with_routing_map_grad --dim 'E=$E' --dim 'H=$H' --topk '$K')
row "A3 non-pad" "${a3[@]}"
row "A3 non-pad +routing_map,permuted_tokens,probs" "${a3[@]}" --with routing_map --with permuted_tokens --with probs
row "A3 drop_and_pad" "${a3[@]}" --attr drop_and_pad=1
row "A3 drop_and_pad +permuted_tokens,probs" "${a3[@]}" --attr drop_and_pad=1 --with permuted_tokens --with probs
c2=(moe_unpermute --dim 'E=$E' --dim 'K=$K' --dim 'H=$H')
row "C2" "${c2[@]}"
row "C2 using_weighted_combine" "${c2[@]}" --attr using_weighted_combine=1
row "C2 using_mix_precision=0" "${c2[@]}" --attr using_mix_precision=0
