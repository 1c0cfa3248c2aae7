//===- CompileBench.cpp - How long compiling a kernel takes, per stage ----===//
//
// Targets: DSL text to PTX <= 10 ms, to a CPU object <= 50 ms (Triton: 24-470 ms a kernel). Each iteration
// compiles from scratch (fresh MLIRContext); counters split the time into the pipeline's stages.
// BM_Compile/OP/SPEC/TARGET covers every example specialization of ops/examples.json (make run's table) on
// the CPU, sm_90 and sm_100.
//===----------------------------------------------------------------------===//
#include "moec/compiler/Pipeline.h"
#include "moec/contracts/Files.h"
#include "moec/dsl/Parser.h"
#include "moec/ops/BuiltinOps.h"

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

namespace {

const moec::BuiltinOp &coreOp() { return *moec::findBuiltinOp("moe_init_routing_v2_grad"); }

moec::Specialization deepseekV3(moec::Target target) {
  return {moec::dsl::DType::BF16, {{"H", 7168}, {"top_k", 8}}, target, {}};
}

void BM_Parse(benchmark::State &state) {
  for (auto _ : state)
    benchmark::DoNotOptimize(moec::dsl::loadOpText(coreOp().path, coreOp().source));
}
BENCHMARK(BM_Parse)->Unit(benchmark::kMicrosecond);

/// DSL text -> target code, with the stage split as counters (ms per compile).
void compileBench(benchmark::State &state, moec::Target target, const moec::BuiltinOp &builtin,
                  const moec::Specialization &spec) {
  moec::StageTimes sum;
  for (auto _ : state) {
    auto op = moec::dsl::loadOpText(builtin.path, builtin.source);
    moec::CompileOptions fresh;
    fresh.reuseGeneratedCode = false; // each iteration's LLVM stages run
    moec::CompiledOp compiled = moec::compile(*op, spec, fresh);
    benchmark::DoNotOptimize(compiled.ptx.data());
    sum.frontend += compiled.times.frontend;
    sum.passes += compiled.times.passes;
    sum.llvm += compiled.times.llvm;
    sum.codegen += compiled.times.codegen;
  }
  auto avg = [&](double v) { return benchmark::Counter(v, benchmark::Counter::kAvgIterations); };
  state.counters["ast_to_moe_ms"] = avg(sum.frontend);
  state.counters["mlir_passes_ms"] = avg(sum.passes);
  state.counters["llvm_opt_ms"] = avg(sum.llvm);
  state.counters[target.kind == moec::TargetKind::GPU ? "ptx_ms" : "jit_ms"] = avg(sum.codegen);
}

void compileCore(benchmark::State &state, moec::Target target) {
  compileBench(state, target, coreOp(), deepseekV3(target));
}

void BM_CompileToPTX_sm90(benchmark::State &state) { compileCore(state, moec::Target::ptx("sm_90")); }
BENCHMARK(BM_CompileToPTX_sm90)->Unit(benchmark::kMillisecond);

void BM_CompileToPTX_sm80(benchmark::State &state) { compileCore(state, moec::Target::ptx("sm_80")); }
BENCHMARK(BM_CompileToPTX_sm80)->Unit(benchmark::kMillisecond);

void BM_CompileToCPU(benchmark::State &state) { compileCore(state, moec::Target::cpu()); }
BENCHMARK(BM_CompileToCPU)->Unit(benchmark::kMillisecond);

/// The largest kernel: A3 with probs at DeepSeek-V3's shape, whose probs_grad runs a token's experts on one
/// warp (moe-group-points, 8 dot products at a time); arg 1: with that optimization off.
void BM_CompileA3ProbsToPTX_sm90(benchmark::State &state) {
  moec::Target target = moec::Target::ptx("sm_90");
  moec::Specialization spec{moec::dsl::DType::BF16, {{"H", 7168}, {"E", 256}}, target, {},
                            {"routing_map", "permuted_tokens", "probs"}};
  if (state.range(0))
    spec.schedule.disabled = moec::kGroupPoints;
  compileBench(state, target, *moec::findBuiltinOp("moe_token_unpermute_with_routing_map_grad"), spec);
}
BENCHMARK(BM_CompileA3ProbsToPTX_sm90)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

/// BM_Compile/OP/DTYPE.STATICS/TARGET for every example of ops/examples.json and every code target.
const bool examplesRegistered = [] {
  nlohmann::json examples = nlohmann::json::parse(moec::readRegularFile(MOEC_EXAMPLES_JSON));
  for (const moec::BuiltinOp &builtin : moec::builtinOps()) {
    if (!examples.contains(builtin.name))
      continue;
    for (const nlohmann::json &example : examples[builtin.name]) {
      moec::Specialization spec;
      spec.dtype = *moec::dsl::parseDType(example.at("dtype").get<std::string>());
      std::string label = example.at("dtype").get<std::string>();
      for (const auto &[name, value] : example.at("statics").items()) {
        spec.statics[name] = value.get<int64_t>();
        label += "." + name + "=" + std::to_string(value.get<int64_t>());
      }
      for (const std::string &name : example.value("with", std::vector<std::string>{})) {
        spec.present.insert(name);
        label += ".+" + name;
      }
      for (const moec::Target &target : {moec::Target::cpu(), moec::Target::ptx("sm_90"), moec::Target::ptx("sm_100")}) {
        spec.target = target;
        const moec::BuiltinOp *op = &builtin;
        benchmark::RegisterBenchmark(("BM_Compile/" + std::string(builtin.name) + "/" + label + "/" + target.str()).c_str(),
                                     [op, spec](benchmark::State &state) { compileBench(state, spec.target, *op, spec); })
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
  return true;
}();

} // namespace
