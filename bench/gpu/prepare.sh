#!/usr/bin/env bash
# Run here (a machine with moec built): emits the bundle the GPU check loads and the headers the
# runtime-only build needs, into paths the device tool carries:
#   bench/gpu/bundle/   PTX + metadata for every op x dtype x mode at the production shapes of spec §8.1
#   .gpu-deps/include/  fmt and nlohmann-json headers
#   bench/gpu/variants/ bundles of other schedules of some of them (bench/gpu/device.sh times them too)
#   bench/gpu/bundle/estimate.jsonl  with ESTIMATE=1: the emulator's calibrated estimate of each (an hour)
# Then, on the GPU machine: bash bench/gpu/run.sh (carry: .gpu-deps, bench/gpu/bundle, bench/gpu/variants).
set -euo pipefail
cd "$(dirname "$0")/../.."
arch=${ARCH:-sm_90}
moec=build/bin/moec
out=bench/gpu/bundle
rm -rf "$out"
common=(--arch "$arch" -o "$out")
# DeepSeek-V3 (H 7168, top-8 of 256), Qwen3-235B (H 4096, top-8 of 128), Mixtral (H 4096, top-2 of 8).
shapes='H=7168,top_k=8,E=256,K=8;H=4096,top_k=8,E=128,K=8;H=4096,top_k=2,E=8,K=2'
tmp=$(mktemp -d)
for dtype in bf16 f16 f32; do
  $moec bundle --ops moe_init_routing_v2_grad --dtypes $dtype --shapes "$shapes" --arch "$arch" -o "$tmp/b2-$dtype"
  $moec bundle --ops moe_init_routing_v2_grad --dtypes $dtype --shapes "${shapes//top_k/drop_pad_mode=1,top_k}" \
    --arch "$arch" -o "$tmp/b2p-$dtype"
  $moec bundle --ops moe_token_unpermute_with_routing_map_grad --dtypes $dtype --shapes "$shapes" --arch "$arch" \
    -o "$tmp/a3-$dtype"
  $moec bundle --ops moe_token_unpermute_with_routing_map_grad --dtypes $dtype --shapes "$shapes" --arch "$arch" \
    --with routing_map,permuted_tokens,probs -o "$tmp/a3p-$dtype"
  $moec bundle --ops moe_token_unpermute_with_routing_map_grad --dtypes $dtype \
    --shapes "${shapes//H=/drop_and_pad=1,H=}" --arch "$arch" -o "$tmp/a3d-$dtype"
  $moec bundle --ops moe_token_unpermute_with_routing_map_grad --dtypes $dtype \
    --shapes "${shapes//H=/drop_and_pad=1,H=}" --arch "$arch" --with permuted_tokens,probs -o "$tmp/a3dp-$dtype"
  $moec bundle --ops moe_unpermute --dtypes $dtype --shapes "$shapes" --arch "$arch" -o "$tmp/c2-$dtype"
  $moec bundle --ops moe_unpermute --dtypes $dtype --shapes "${shapes//H=/using_weighted_combine=1,H=}" \
    --arch "$arch" -o "$tmp/c2w-$dtype"
done
python3 - "$tmp" "$out" <<'PY'
import json, os, shutil, sys
src, out = sys.argv[1], sys.argv[2]
os.makedirs(out)
merged = {"compiler": "moec", "ops": {}, "entries": []}
for part in sorted(os.listdir(src)):
    index = json.load(open(os.path.join(src, part, "bundle.json")))
    merged["format"] = index["format"]
    for name in os.listdir(os.path.join(src, part)):
        if name != "bundle.json":
            shutil.copy(os.path.join(src, part, name), out)
    merged["ops"].update(index["ops"])
    merged["entries"] += index["entries"]
json.dump(merged, open(os.path.join(out, "bundle.json"), "w"), indent=1)
print(f"{len(merged['entries'])} specializations in {out}")
PY
rm -rf "$tmp"
# ESTIMATE=1: the emulator's calibrated estimate of every entry, kept in the bundle (estimate.jsonl), which
# moec-gpu-check prints beside each measurement without spending device time on it. Host time: about an hour
# on 2 cores (A3's kernels share a workspace, so every block of theirs runs at production size).
if [ "${ESTIMATE:-0}" = 1 ]; then
  estimates=$(mktemp -d)
  count=$(python3 -c "import json, sys; print(len(json.load(open(sys.argv[1]))['entries']))" "$out/bundle.json")
  seq 0 $((count - 1)) | xargs -P "$(nproc)" -I{} sh -c \
    "build/bin/moec-emu-estimate '$out' {} 1 > '$estimates/{}.jsonl' || echo 'entry {}: estimate failed' >&2"
  for ((i = 0; i < count; ++i)); do cat "$estimates/$i.jsonl"; done > "$out/estimate.jsonl"
  rm -rf "$estimates"
  echo "$(wc -l < "$out/estimate.jsonl") estimates in $out/estimate.jsonl"
fi
# Schedule variants (bf16), each a bundle of its own under bench/gpu/variants/NAME, timed beside the default
# in the same device run: what the default was measured against (a pass off, another block shape). Variants
# answered are dropped (128 threads x 2 rows at H = 4096, B2 and C2: no better; bench/gpu/RESULTS.md).
variants=bench/gpu/variants
rm -rf "$variants"
variant() { # name, then moec bundle options
  local name=$1
  shift
  $moec bundle --dtypes bf16 --arch "$arch" -o "$variants/$name" "$@" > /dev/null
}
h4096='H=4096,top_k=8,E=128,K=8;H=4096,top_k=2,E=8,K=2'
variant b2-no-version-row-loops --ops moe_init_routing_v2_grad --shapes "$shapes" --disable version-row-loops
variant c2-no-version-row-loops --ops moe_unpermute --shapes "$shapes" --disable version-row-loops
variant c2-threads64-rows4 --ops moe_unpermute --shapes "$h4096" --threads 64 --rows-per-block 4
# Rows with skipped terms (B2 active_num, C2's unrouted experts) with their loads behind branches, as before
# moe-guard-loads (2026-12-04).
variant b2-no-guard-loads --ops moe_init_routing_v2_grad --shapes "$shapes" --disable guard-loads
variant c2-no-guard-loads --ops moe_unpermute --shapes "$shapes" --disable guard-loads
# A3's dot products with one step's loads in flight at a time, as before moe-lower-to-gpu{loads-in-flight}
# (2026-12-05, evening; the version-row-loops variants of A3 were measured on 2026-12-04 and are gone).
variant a3-probs-no-loads-in-flight --ops moe_token_unpermute_with_routing_map_grad --shapes "$shapes" \
  --with routing_map,permuted_tokens,probs --disable loads-in-flight
variant a3-pad-probs-no-loads-in-flight --ops moe_token_unpermute_with_routing_map_grad \
  --shapes "${shapes//H=/drop_and_pad=1,H=}" --with permuted_tokens,probs --disable loads-in-flight
# A3's batches of dot products with their partial batches' loads and stores behind branches, as before
# guarded stores (2026-12-05).
variant a3-probs-no-guard-loads --ops moe_token_unpermute_with_routing_map_grad --shapes "$shapes" \
  --with routing_map,permuted_tokens,probs --disable guard-loads
variant a3-pad-probs-no-guard-loads --ops moe_token_unpermute_with_routing_map_grad \
  --shapes "${shapes//H=/drop_and_pad=1,H=}" --with permuted_tokens,probs --disable guard-loads
# C2 at H = 4096 without its short lists and without the unrolled loop along the row (2 steps a thread), as
# before moe-unroll-row-loops and short-lists (2026-12-05, night: the emulator reads C2 at Mixtral 75.8 -> 88.4 %).
variant c2-h4096-no-short-lists --ops moe_unpermute --shapes "$h4096" --disable short-lists --disable loads-in-flight
# B2 and C2 at H = 4096 with 128 threads a row, one row a block (4 passes along the row a thread; the block
# builds C2's list): the emulator reads C2 75.8 -> 80.4 % at Mixtral, 91.7 -> 93.9 % at Qwen3, B2 at Mixtral
# 93.5 -> 95.7 % (2026-12-05, later). 512 threads at Mixtral read 67.3 % there now, so that variant is gone.
variant h4096-threads128 --ops moe_init_routing_v2_grad,moe_unpermute --shapes "$h4096" --threads 128
# The opt-in register-budget: every kernel within 128 registers (.maxnreg), A3's probs kernels' dot products
# in batches of 4 (254 -> 128 registers, 4-52 bytes spilled; C2 32-44 registers, none spilled), for 16 warps
# per SM instead of 8; the emulator's bound, which does not model the occupancy's effect here, reads A3 with
# probs at DeepSeek-V3 90.3 -> 78.9 % (its token's gradient row read twice). C2 takes the budget alone.
variant a3-probs-register-budget --ops moe_token_unpermute_with_routing_map_grad --shapes "$shapes" \
  --with routing_map,permuted_tokens,probs --enable register-budget
variant a3-pad-probs-register-budget --ops moe_token_unpermute_with_routing_map_grad \
  --shapes "${shapes//H=/drop_and_pad=1,H=}" --with permuted_tokens,probs --enable register-budget
variant c2-register-budget --ops moe_unpermute --shapes "$shapes" --enable register-budget
mkdir -p .gpu-deps/include
cp -r /usr/include/fmt /usr/include/nlohmann .gpu-deps/include/
du -sh "$out" "$variants" .gpu-deps
