#!/usr/bin/env bash
# The PTX emulator's GPU performance proxy for every op x mode at one model shape (default DeepSeek-V3:
# H 7168, top-8 of 256 experts, 4096 tokens): warp instructions per 16 bytes of minimum traffic, coalescing,
# and the fraction of H200 copy bandwidth the bound allows. Usage: bench/emu/profile.sh [DTYPE] [H E K]
# A3's kernels share a workspace (its fill skips the rows the scatter marked), so every block of theirs
# runs instead of a sample: they run at A3_TOKENS tokens to keep that short, by default 8192 / K (1024 at
# top-8, 4096 at Mixtral's top-2: 8192 slots either way). The latency bound spreads the warps over those
# that run at once: below about a wave (1024 tokens fill the SMs with A3's probs kernels, a warp per token
# at 8 warps per SM) the A3 rows would read too high; at top-2, 1024 tokens are 2048 slots, too few for
# the kernels' fixed latencies (the fill's, a batch's) to hide behind the rows.
# The last column is the estimate calibrated on a GPU run (bench/emu/calibrate.py), the one to steer by;
# "bound" is the uncalibrated one. EXTRA: more moec bench arguments (EXTRA='--enable register-budget').
set -euo pipefail
cd "$(dirname "$0")/../.."
moec=${MOEC:-build/bin/moec}
dtype=${1:-bf16} H=${2:-7168} E=${3:-256} K=${4:-8}
sample=${SAMPLE_BLOCKS:-256} a3tokens=${A3_TOKENS:-$((8192 / K > 1024 ? 8192 / K : 1024))}
run() { # label, then moec bench arguments
  local label=$1
  shift
  local line
  local out
  # shellcheck disable=SC2086 # EXTRA is a list of arguments
  out=$("$moec" bench "$@" --target ptx-emu --dtype "$dtype" --sample-blocks "$sample" ${EXTRA:-})
  line=$(grep '^total:' <<<"$out")
  python3 - "$label" "$line" "$(grep '^estimate:' <<<"$out")" <<'PY'
import re, sys
label, line, estimate = sys.argv[1], sys.argv[2], sys.argv[3]
ipb = re.search(r"([\d.]+) warp instructions per 16 bytes", line).group(1)
coal = re.search(r"coalescing ([\d.]+)%", line).group(1)
frac = re.search(r"= ([\d.]+)% of copy", line).group(1)
us = re.search(r"bound ([\d.]+) us", line).group(1)
est = re.search(r"estimate: ([\d.]+)% of copy, \+-([\d.]+) points", estimate)
print(f"| {label:<44} | {ipb:>9} | {coal:>9}% | {us:>9} | {frac:>13}% | {est.group(1):>9}% +-{est.group(2):<4} |")
PY
}
echo "PTX emulator profile, $dtype, H=$H E=$E K=$K (sampled: $sample blocks per launch, counts scaled; A3: all"
echo "blocks at $a3tokens tokens)"
echo "| op, mode                                     | instr/16B | coalescing | bound us  | bound: of copy | estimate: of copy |"
echo "|----------------------------------------------|-----------|------------|-----------|----------------|-------------------|"
b2=(moe_init_routing_v2_grad --dim H=$H --attr top_k=$K)
run "B2 dropless" "${b2[@]}"
run "B2 dropless, active_num" "${b2[@]}" --active
run "B2 drop_pad_mode=1" "${b2[@]}" --attr drop_pad_mode=1
a3=(moe_token_unpermute_with_routing_map_grad --dim E=$E --dim H=$H --topk "$K" --tokens "$a3tokens")
run "A3 default" "${a3[@]}"
run "A3 +routing_map,+permuted_tokens,+probs" "${a3[@]}" --with routing_map --with permuted_tokens --with probs
run "A3 drop_and_pad" "${a3[@]}" --attr drop_and_pad=1
run "A3 drop_and_pad,+permuted_tokens,+probs" "${a3[@]}" --attr drop_and_pad=1 --with permuted_tokens --with probs
c2=(moe_unpermute --dim E=$E --dim K=$K --dim H=$H)
run "C2 default" "${c2[@]}"
run "C2 using_weighted_combine" "${c2[@]}" --attr using_weighted_combine=1
run "C2 using_mix_precision=0" "${c2[@]}" --attr using_mix_precision=0
