#!/usr/bin/env bash
# ptxas's registers and spill bytes for every kernel of bench/gpu/prepare.sh's bundle kinds (B2, B2 pad, A3,
# A3 with probs, A3 pad, A3 pad with probs, C2, C2 weighted) x dtype (bf16, f16, f32) x the three production
# shapes, one line each: kind.dtype.shape kernel registers spill-bytes. Needs CUDA's ptxas.
# Usage: bench/gpu/registers.sh [ARCH] [moec emit options for every kernel, e.g. --enable register-budget]
# Issue 57's budget: at most 128 registers and no spill; with CHECK=1 the script fails where a kernel is over.
# KNOWN=FILE with CHECK=1 (ctest gpu.registers.*): the kernels over the budget must be exactly FILE's lines, the
# ones known to be over today (bench/gpu/registers-known.ARCH.txt). A kernel newly over, or over by more, fails;
# so does one that got better or within the budget until FILE says so: the list only shrinks, and once it is
# empty this is the plain check. Without ptxas it says so and exits 77 (ctest: skipped).
set -euo pipefail
cd "$(dirname "$0")/../.."
moec=${MOEC:-build/bin/moec}
ptxas=${PTXAS:-/usr/local/cuda/bin/ptxas}
arch=${1:-sm_90}
shift || true
[ -x "$ptxas" ] || { echo "registers.sh: no ptxas at $ptxas (set PTXAS): registers not checked" >&2; exit 77; }
export MOEC_CACHE_DIR=$(mktemp -d)
work=$(mktemp -d)
trap 'rm -rf "$MOEC_CACHE_DIR" "$work"' EXIT
shapes=("H=7168 top_k=8 E=256 K=8" "H=4096 top_k=8 E=128 K=8" "H=4096 top_k=2 E=8 K=2")
over=0
overLines=()
kind() { # name, op, then its options
  local name=$1 op=$2
  shift 2
  for dtype in bf16 f16 f32; do
    for shape in "${shapes[@]}"; do
      local args=()
      for kv in $shape; do
        local k=${kv%%=*}
        case $op in
          moe_init_routing_v2_grad) [[ $k == H ]] && args+=(--dim "$kv"); [[ $k == top_k ]] && args+=(--attr "$kv") ;;
          moe_token_unpermute_with_routing_map_grad) [[ $k == H || $k == E ]] && args+=(--dim "$kv") ;;
          moe_unpermute) [[ $k == H || $k == E || $k == K ]] && args+=(--dim "$kv") ;;
        esac
      done
      local label="$name.$dtype.${shape// /_}" ptx="$work/k.ptx"
      "$moec" emit "$op" --target ptx --arch "$arch" --dtype "$dtype" "${args[@]}" "$@" "${extra[@]}" --emit ptx -o "$ptx"
      while read -r kernel registers spills; do
        echo "$label $kernel $registers $spills"
        if (( registers > 128 || spills > 0 )); then
          over=$((over + 1))
          overLines+=("$label $kernel $registers $spills")
        fi
      done < <("$ptxas" -v -arch "$arch" "$ptx" -o /dev/null 2>&1 | awk '
        /Compiling entry/ { k = $0; sub(/.*function ./, "", k); sub(/. for.*/, "", k) }
        /spill stores/ { match($0, /[0-9]+ bytes spill stores/); s = substr($0, RSTART, RLENGTH - 18) + 0 }
        /Used [0-9]+ registers/ { match($0, /Used [0-9]+ registers/); print k, substr($0, RSTART + 5, RLENGTH - 15) + 0, s }')
    done
  done
}
extra=("$@")
kind b2 moe_init_routing_v2_grad
kind b2p moe_init_routing_v2_grad --attr drop_pad_mode=1
kind a3 moe_token_unpermute_with_routing_map_grad
kind a3p moe_token_unpermute_with_routing_map_grad --with routing_map --with permuted_tokens --with probs
kind a3d moe_token_unpermute_with_routing_map_grad --attr drop_and_pad=1
kind a3dp moe_token_unpermute_with_routing_map_grad --attr drop_and_pad=1 --with permuted_tokens --with probs
kind c2 moe_unpermute
kind c2w moe_unpermute --attr using_weighted_combine=1
echo "kernels over 128 registers or spilling: $over" >&2
if [[ ${CHECK:-0} == 1 && -n ${KNOWN:-} ]]; then
  known=$(grep -v '^#' "$KNOWN" | grep -v '^$' | sort || true)
  now=$(printf '%s\n' "${overLines[@]}" | grep -v '^$' | sort || true)
  if [[ $known != "$now" ]]; then
    echo "registers.sh: the kernels over the budget are not the known ones ($KNOWN):" >&2
    diff <(echo "$known") <(echo "$now") | sed -n 's/^< /  known, now different or within the budget: /p; s/^> /  over the budget, not known: /p' >&2
    exit 1
  fi
  echo "registers.sh: the $over kernels over the budget are the known ones ($KNOWN); no other is" >&2
elif [[ ${CHECK:-0} == 1 && $over -gt 0 ]]; then
  exit 1
fi
