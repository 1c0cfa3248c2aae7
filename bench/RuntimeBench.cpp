//===- RuntimeBench.cpp - Host-side costs of the C++ API ------------------===//
//
// Targets: a cached get() plus the argument checks <= 1 us (Triton's cached launch: 10-18 us of host
// time); a warm start (new process, kernel on disk) without running MLIR; a cold compile. Ascend: a kept
// plan, and the plan of a new token count from the cached tilings (what a launch pays per new shape).
//===----------------------------------------------------------------------===//
#include "moec/jit/AscendPlanner.h"
#include "moec/jit/Runtime.h"
#include "moec/runtime/HostTensor.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <unistd.h>

namespace {

/// The benchmarks' own cache, under the build tree, empty at the start and removed at the end.
struct BenchCache {
  std::filesystem::path dir =
      std::filesystem::path(MOEC_BENCH_CACHE_ROOT) / std::to_string(::getpid());
  BenchCache() { std::filesystem::remove_all(dir); }
  ~BenchCache() {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
};

const std::filesystem::path &benchCacheDir() {
  static BenchCache cache;
  return cache.dir;
}

moec::Runtime::Options cpuOptions(bool alwaysCompile = false) {
  moec::Runtime::Options o;
  o.target = moec::Target::cpu();
  o.cacheDir = benchCacheDir();
  o.alwaysCompile = alwaysCompile;
  return o;
}

const moec::KernelRequest kDeepSeek{moec::bf16, {{"H", 7168}}, {{"top_k", 8}}, {}, {}};

/// Tensors for a decode-sized call: 4 tokens, top-8, H = 7168.
struct SmallCall {
  moec::HostTensor grad{moec::bf16, {32, 7168}}, idx{moec::i32, {32}}, out{moec::bf16, {4, 7168}};
  SmallCall() {
    auto *p = static_cast<int32_t *>(idx.raw());
    std::iota(p, p + 32, 0);
  }
};

void BM_GetCachedKernel(benchmark::State &state) {
  moec::Runtime rt(cpuOptions());
  rt.get("moe_init_routing_v2_grad", kDeepSeek);
  for (auto _ : state)
    benchmark::DoNotOptimize(rt.get("moe_init_routing_v2_grad", kDeepSeek));
}
BENCHMARK(BM_GetCachedKernel);

void BM_GetCachedKernelAndCheckArguments(benchmark::State &state) {
  moec::Runtime rt(cpuOptions());
  SmallCall c;
  std::map<std::string, moec::TensorView> inputs{{"grad_expanded_x", c.grad.view()}, {"expanded_row_idx", c.idx.view()}};
  std::map<std::string, moec::TensorView> outputs{{"grad_x", c.out.view()}};
  for (auto _ : state) {
    moec::Kernel k = rt.get("moe_init_routing_v2_grad", kDeepSeek);
    benchmark::DoNotOptimize(k.check(inputs, outputs));
  }
}
BENCHMARK(BM_GetCachedKernelAndCheckArguments);

/// Host overhead of a CPU launch: a one-token, one-element call (the kernel itself is a few ns).
void BM_CpuLaunchOverhead(benchmark::State &state) {
  moec::Runtime rt(cpuOptions());
  moec::Kernel k = rt.get("moe_init_routing_v2_grad", {moec::f32, {{"H", 1}}, {{"top_k", 1}}, {}, {}});
  moec::HostTensor grad{moec::f32, {1, 1}}, idx{moec::i32, {1}}, out{moec::f32, {1, 1}};
  for (auto _ : state)
    k.launch({grad.view(), idx.view()}, {out.view()});
}
BENCHMARK(BM_CpuLaunchOverhead);

/// The argument checks of a production-sized call, where the index data dominates them: A3 at N = 4096,
/// top-8 (out_index, R = 32768 unique values in [-1, R), and permute_token_id in [-1, R)). H is small: the
/// checks read the index tensors only.
void BM_CheckProductionIndexData(benchmark::State &state) {
  moec::Runtime rt(cpuOptions());
  moec::Kernel k = rt.get("moe_token_unpermute_with_routing_map_grad", {moec::bf16, {{"E", 256}, {"H", 64}}, {}, {}, {}});
  const int64_t tokens = 4096, rows = tokens * 8;
  moec::HostTensor grad{moec::bf16, {tokens, 64}}, outIndex{moec::i32, {rows}}, tokenIds{moec::i32, {rows}};
  moec::HostTensor dy{moec::bf16, {rows, 64}};
  auto *out = static_cast<int32_t *>(outIndex.raw());
  std::iota(out, out + rows, 0);
  std::reverse(out, out + rows);
  std::copy(out, out + rows, static_cast<int32_t *>(tokenIds.raw()));
  std::map<std::string, moec::TensorView> inputs{
      {"unpermuted_tokens_grad", grad.view()}, {"out_index", outIndex.view()}, {"permute_token_id", tokenIds.view()}};
  std::map<std::string, moec::TensorView> outputs{{"permuted_tokens_grad", dy.view()}};
  for (auto _ : state)
    benchmark::DoNotOptimize(k.check(inputs, outputs));
  state.SetItemsProcessed(state.iterations() * rows);
}
BENCHMARK(BM_CheckProductionIndexData)->Unit(benchmark::kMicrosecond);

/// A new process's first get() of a kernel on disk: no MLIR pipeline, the object file is linked.
void BM_WarmStartFromDisk(benchmark::State &state) {
  { moec::Runtime(cpuOptions()).get("moe_init_routing_v2_grad", kDeepSeek); }
  for (auto _ : state) {
    moec::Runtime rt(cpuOptions());
    benchmark::DoNotOptimize(rt.get("moe_init_routing_v2_grad", kDeepSeek));
  }
}
BENCHMARK(BM_WarmStartFromDisk)->Unit(benchmark::kMillisecond);

/// DeepSeek-V3's B2 on 910B for `tokens` tokens.
moec::PlanCall deepSeekPlan(int64_t tokens) { return {moec::bf16, {{"N", tokens}, {"H", 7168}}, {{"top_k", 8}}, {}}; }

moec::AscendPlanner::Options plannerOptions(size_t maxPlans) {
  moec::AscendPlanner::Options o;
  o.cacheDir = benchCacheDir();
  o.maxPlans = maxPlans;
  return o;
}

void BM_AscendKeptPlan(benchmark::State &state) {
  moec::AscendPlanner planner(moec::ascend::builtinChip("910b"), plannerOptions(256));
  planner.plan("moe_init_routing_v2_grad", deepSeekPlan(4096));
  for (auto _ : state)
    benchmark::DoNotOptimize(planner.plan("moe_init_routing_v2_grad", deepSeekPlan(4096)));
}
BENCHMARK(BM_AscendKeptPlan);

void BM_AscendPlanForANewTokenCount(benchmark::State &state) {
  moec::AscendPlanner planner(moec::ascend::builtinChip("910b"), plannerOptions(1));
  planner.plan("moe_init_routing_v2_grad", deepSeekPlan(4096));
  int64_t tokens = 1;
  for (auto _ : state) // one plan kept: every call is a new split from the cached tilings
    benchmark::DoNotOptimize(planner.plan("moe_init_routing_v2_grad", deepSeekPlan(tokens++ % 8192 + 1)));
}
BENCHMARK(BM_AscendPlanForANewTokenCount);

void BM_ColdCompile(benchmark::State &state) {
  for (auto _ : state) {
    moec::Runtime rt(cpuOptions(/*alwaysCompile=*/true));
    benchmark::DoNotOptimize(rt.get("moe_init_routing_v2_grad", kDeepSeek));
  }
}
BENCHMARK(BM_ColdCompile)->Unit(benchmark::kMillisecond);

} // namespace
