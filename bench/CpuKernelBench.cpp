//===- CpuKernelBench.cpp - Every op x mode against memcpy, on the CPU ----===//
//
// One benchmark per op, mode, model shape (spec §8.1: DeepSeek-V3 H 7168 top-8 of 256, Qwen3-235B H 4096
// top-8 of 128, Mixtral H 4096 top-2 of 8) and dtype (bf16, f32), at N = 4096 tokens, on the inputs
// `moec bench` uses (moec/cases/Cases.h: random, routed the way the forward op routes). Each iteration
// times the op's kernels, then a memcpy of half its minimum traffic (read + write = the traffic) on the
// same thread pool; `vs_memcpy` = memcpy time / kernel time (1.0 = memcpy speed). Select with
// --benchmark_filter, e.g. 'C2/DeepSeek'.
//===----------------------------------------------------------------------===//
#include "moec/cases/CpuBaseline.h"

#include "moec/jit/Runtime.h"
#include "moec/runtime/ThreadPool.h"

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <unistd.h>

namespace {

struct Shape {
  const char *model;
  int64_t H, E, K;
};
constexpr Shape kShapes[] = {{"DeepSeekV3", 7168, 256, 8}, {"Qwen3", 4096, 128, 8}, {"Mixtral", 4096, 8, 2}};
constexpr int64_t kTokens = 4096;

struct Mode {
  const char *name, *op;
  std::map<std::string, int64_t> attrs;
  std::set<std::string> with;
  bool active = false;
};

std::vector<Mode> modes() {
  const char *b2 = "moe_init_routing_v2_grad", *a3 = "moe_token_unpermute_with_routing_map_grad", *c2 = "moe_unpermute";
  std::set<std::string> training{"routing_map", "permuted_tokens", "probs"}, padProbs{"permuted_tokens", "probs"};
  return {{"B2_dropless", b2, {}, {}},
          {"B2_active", b2, {}, {}, true},
          {"B2_drop_pad", b2, {{"drop_pad_mode", 1}}, {}},
          {"A3_nonpad", a3, {}, {}},
          {"A3_nonpad_probs", a3, {}, training},
          {"A3_pad", a3, {{"drop_and_pad", 1}}, {}},
          {"A3_pad_probs", a3, {{"drop_and_pad", 1}}, padProbs},
          {"C2", c2, {}, {}},
          {"C2_weighted", c2, {{"using_weighted_combine", 1}}, {}}};
}

moec::Runtime &runtime() {
  static moec::Runtime rt([] {
    moec::Runtime::Options o;
    o.target = moec::Target::cpu();
    o.cacheDir = std::filesystem::path(MOEC_BENCH_CACHE_ROOT) / ("kernels-" + std::to_string(::getpid()));
    return o;
  }());
  return rt;
}

void runCase(benchmark::State &state, const Mode &mode, const Shape &shape, moec::DType dtype) {
  std::map<std::string, int64_t> statics = mode.attrs;
  statics["H"] = shape.H;
  if (std::string(mode.op) == "moe_init_routing_v2_grad") {
    statics["top_k"] = shape.K;
    statics[moec::gpucheck::kRoutingExperts] = shape.E; // the inputs' routing: B2 has no E
  } else {
    statics["E"] = shape.E;
    if (std::string(mode.op) == "moe_unpermute")
      statics["K"] = shape.K;
    else
      statics[moec::gpucheck::kRoutingTopK] = shape.K; // the inputs' routing, not a dim of A3
  }
  moec::KernelRequest request;
  request.dtype = dtype;
  for (const auto &[name, value] : statics)
    if (name != moec::gpucheck::kRoutingTopK && name != moec::gpucheck::kRoutingExperts)
      (name == "H" || name == "E" || name == "K" ? request.dims : request.attrs)[name] = value;
  request.with = mode.with;
  moec::Kernel kernel = runtime().get(mode.op, request);
  std::mt19937 rng(12345);
  moec::gpucheck::Case c =
      moec::gpucheck::caseFor(mode.op, dtype, statics, mode.with, kTokens, mode.active, rng, /*reference=*/false);
  moec::gpucheck::CaseTensors tensors(c);
  moec::gpucheck::MemcpyBaseline copy(c);
  moec::gpucheck::ReadBaseline read(c);
  auto launch = [&] { kernel.launch(tensors.views, nullptr, c.attrs); };
  launch(); // warm-up
  double kernelSeconds = 0, copySeconds = 0, readSeconds = 0;
  for (auto _ : state) {
    double k = moec::gpucheck::secondsOf(launch);
    state.SetIterationTime(k);
    kernelSeconds += k;
    copySeconds += moec::gpucheck::secondsOf(copy);
    readSeconds += moec::gpucheck::secondsOf(read);
  }
  state.SetBytesProcessed(int64_t(state.iterations() * c.bytesMoved));
  state.counters["vs_memcpy"] = copySeconds / kernelSeconds;
  state.counters["read_bound"] = copySeconds / readSeconds; // the most vs_memcpy can be
}

const bool registered = [] {
  static const std::vector<Mode> all = modes();
  for (const Mode &mode : all)
    for (const Shape &shape : kShapes)
      for (moec::DType dtype : {moec::DType::BF16, moec::DType::F32}) {
        std::string name = std::string(mode.name) + "/" + shape.model + "/" + moec::dsl::dtypeName(dtype);
        benchmark::RegisterBenchmark(name.c_str(), [&mode, &shape, dtype](benchmark::State &state) {
          runCase(state, mode, shape, dtype);
        })->Unit(benchmark::kMillisecond)->UseManualTime()->MinTime(0.5);
      }
  return true;
}();

} // namespace
