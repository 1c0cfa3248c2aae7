//===- RuntimeBench.cpp - Host-side costs of the C++ API ------------------===//
//
// Targets: a cached get() plus the argument checks <= 1 us (Triton's cached launch: 10-18 us of host
// time); a warm start (new process, kernel on disk) without running MLIR; a cold compile.
//===----------------------------------------------------------------------===//
#include "moec/Runtime.h"
#include "moec/runtime/HostTensor.h"

#include <benchmark/benchmark.h>

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

/// A new process's first get() of a kernel on disk: no MLIR pipeline, the object file is linked.
void BM_WarmStartFromDisk(benchmark::State &state) {
  { moec::Runtime(cpuOptions()).get("moe_init_routing_v2_grad", kDeepSeek); }
  for (auto _ : state) {
    moec::Runtime rt(cpuOptions());
    benchmark::DoNotOptimize(rt.get("moe_init_routing_v2_grad", kDeepSeek));
  }
}
BENCHMARK(BM_WarmStartFromDisk)->Unit(benchmark::kMillisecond);

void BM_ColdCompile(benchmark::State &state) {
  for (auto _ : state) {
    moec::Runtime rt(cpuOptions(/*alwaysCompile=*/true));
    benchmark::DoNotOptimize(rt.get("moe_init_routing_v2_grad", kDeepSeek));
  }
}
BENCHMARK(BM_ColdCompile)->Unit(benchmark::kMillisecond);

} // namespace
