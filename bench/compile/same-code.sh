#!/usr/bin/env bash
# Whether two builds of moec generate the same code: for each specialization below (ops/examples.json's and
# odd sizes), each dtype, and with each optimization that a refactoring of the lowering tends to touch turned
# off, it compares
#   - `moec emit --emit llvm` (CPU, this host's vector width), `--emit ptx` (sm_90) and the Ascend tiled
#     kernels (`--target ascend --emit loops`, bf16);
#   - `moec-opt --moe-pipeline="target=cpu vector-lanes=N ..."` on genMoe's IR with 16 and 8 f32 lanes, so
#     that an AVX-512 host's pipeline is checked on a host without it, and the other way round.
# Prints each pair that differs, then the counts; exits 1 if any differs. A refactoring that must not change
# kernels (issue 54) shows 0 differ; an intended change shows exactly the cells it means to change.
# Usage: AGAINST=<old build>/bin bash bench/compile/same-code.sh [NEW_BIN_DIR (build/bin)]
#        DISABLE="a b ..." replaces the list of optimizations turned off one at a time.
set -uo pipefail
cd "$(dirname "$0")/../.."
old=${AGAINST:?set AGAINST to the bin folder of the old build (with moec and moec-opt)}
new=${1:-build/bin}
disable=${DISABLE:-interleave-reductions compress-lists accumulate-rows short-lists compact-predicated-folds}
cache=$(mktemp -d)
work=$(mktemp -d)
trap 'rm -rf "$cache" "$work"' EXIT
export MOEC_CACHE_DIR=$cache
compared=0
differ=0

same() { # label, then the two outputs' files
  compared=$((compared + 1))
  if ! cmp -s "$2" "$3"; then
    echo "differs: $1"
    differ=$((differ + 1))
  fi
}

# name | moec arguments | moec-opt bindings
specs=(
  "b2|moe_init_routing_v2_grad --dim H=7168 --attr top_k=8|H=7168,top_k=8,drop_pad_mode=0"
  "b2-pad|moe_init_routing_v2_grad --dim H=7168 --attr top_k=8 --attr drop_pad_mode=1|H=7168,top_k=8,drop_pad_mode=1"
  "b2-top2|moe_init_routing_v2_grad --dim H=4096 --attr top_k=2|H=4096,top_k=2,drop_pad_mode=0"
  "a3-probs|moe_token_unpermute_with_routing_map_grad --dim H=7168 --dim E=256 --with routing_map --with permuted_tokens --with probs|H=7168,E=256"
  "a3|moe_token_unpermute_with_routing_map_grad --dim H=7168|H=7168"
  "a3-pad-probs|moe_token_unpermute_with_routing_map_grad --dim H=4096 --dim E=8 --attr drop_and_pad=1 --with permuted_tokens --with probs|H=4096,E=8,drop_and_pad=1"
  "a3-pad-odd|moe_token_unpermute_with_routing_map_grad --dim H=33 --dim E=5 --attr drop_and_pad=1 --with permuted_tokens --with probs|H=33,E=5,drop_and_pad=1"
  "a3-probs-odd|moe_token_unpermute_with_routing_map_grad --dim H=33 --dim E=40 --with routing_map --with permuted_tokens --with probs|H=33,E=40"
  "c2|moe_unpermute --dim H=7168 --dim E=64 --dim K=8|H=7168,E=64,K=8"
  "c2-weighted|moe_unpermute --dim H=2048 --dim E=128 --dim K=8 --attr using_weighted_combine=1|H=2048,E=128,K=8,using_weighted_combine=1"
  "c2-mixtral|moe_unpermute --dim H=4096 --dim E=8 --dim K=2 --attr using_weighted_combine=1|H=4096,E=8,K=2,using_weighted_combine=1"
  "c2-odd|moe_unpermute --dim H=37 --dim E=40 --dim K=3|H=37,E=40,K=3"
)

run() { # label, then moec arguments after the current spec's ($args) and dtype
  local label=$1
  shift
  "$old/moec" emit $args --dtype $dtype "$@" >"$work/old" 2>&1
  "$new/moec" emit $args --dtype $dtype "$@" >"$work/new" 2>&1
  same "$name $dtype $label" "$work/old" "$work/new"
}

for entry in "${specs[@]}"; do
  IFS='|' read -r name args bindings <<<"$entry"
  for dtype in bf16 f16 f32; do
    run cpu --target cpu --emit llvm
    for opt in $disable; do
      run "cpu --disable $opt" --target cpu --emit llvm --disable "$opt"
    done
    run ptx --target ptx --emit ptx
    run "ptx --disable short-lists" --target ptx --emit ptx --disable short-lists
    [ "$dtype" = bf16 ] && run ascend --target ascend --emit loops
    # The replayed CPU pipeline at 16 and 8 f32 lanes (the genMoe IR is the new build's: both replay it).
    "$new/moec" emit $args --dtype $dtype --emit gen >"$work/gen" 2>&1 || continue
    for lanes in 16 8; do
      for opt in "" $disable; do
        options="target=cpu bindings=$bindings vector-lanes=$lanes stop=llvm${opt:+ disable=$opt}"
        "$old/moec-opt" "$work/gen" --moe-pipeline="$options" >"$work/old" 2>&1
        "$new/moec-opt" "$work/gen" --moe-pipeline="$options" >"$work/new" 2>&1
        same "$name $dtype replay lanes=$lanes${opt:+ disable=$opt}" "$work/old" "$work/new"
      done
    done
  done
done
echo "$compared compared, $differ differ"
[ "$differ" -eq 0 ]
