#!/usr/bin/env bash
# Compile time of every example specialization (ops/examples.json, make run's table) on the CPU, sm_90 and
# sm_100: the median of REPS (5) runs of moec-bench's BM_Compile/..., each from DSL text (fresh MLIRContext),
# split into the pipeline's stages (ms): AST -> moe, the MLIR passes (moe, loops, LLVM dialect), LLVM IR and
# its optimizer, and code (NVPTX, or the CPU object loaded into the process). Usage: bench/compile/table.sh
# [FILTER] (a regex on the benchmark name); MOEC_BENCH=path picks another moec-bench.
set -euo pipefail
cd "$(dirname "$0")/../.."
bench=${MOEC_BENCH:-build/bin/moec-bench}
reps=${REPS:-5}
json=$(mktemp)
trap 'rm -f "$json"' EXIT
"$bench" --benchmark_filter="BM_Compile/${1:-}" --benchmark_repetitions="$reps" \
  --benchmark_report_aggregates_only=true --benchmark_format=json >"$json" 2>/dev/null
python3 - "$json" <<'PY'
import json, sys
rows = [b for b in json.load(open(sys.argv[1]))["benchmarks"] if b.get("aggregate_name") == "median"]
print("| op | specialization | target | total ms | AST->moe | MLIR passes | LLVM opt | code |")
print("|---|---|---|---|---|---|---|---|")
for b in rows:
    _, op, spec, target = b["run_name"].split("/")
    code = b.get("ptx_ms", b.get("jit_ms", 0))
    print(f"| {op} | {spec} | {target} | {b['real_time']:.1f} | {b['ast_to_moe_ms']:.1f} | "
          f"{b['mlir_passes_ms']:.1f} | {b['llvm_opt_ms']:.1f} | {code:.1f} |")
PY
