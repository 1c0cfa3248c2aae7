//===- CpuKernelBench.cpp - CPU kernel throughput against memcpy ----------===//
//
// moe_init_routing_v2_grad at N=4096, K=8, H=7168, bf16 (DeepSeek-V3), dropless: reads N*K rows of H,
// writes N rows. The baseline is memcpy moving the same number of bytes (read + write) on the same
// threads; `vs_memcpy` = memcpy time / kernel time at equal traffic (1.0 = memcpy speed).
//===----------------------------------------------------------------------===//
#include "moec/compiler/Pipeline.h"
#include "moec/ops/BuiltinOps.h"
#include "moec/runtime/Binding.h"
#include "moec/runtime/CpuLauncher.h"
#include "moec/runtime/HostTensor.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <random>

namespace {

constexpr int64_t N = 4096, K = 8, H = 7168;

struct Setup {
  std::unique_ptr<moec::dsl::OpDef> op = moec::loadOp("moe_init_routing_v2_grad");
  moec::HostTensor grad{moec::DType::BF16, {N * K, H}};
  moec::HostTensor idx{moec::DType::I32, {N * K}};
  moec::HostTensor out{moec::DType::BF16, {N, H}};
  moec::CompiledOp compiled;
  moec::PackedKernelFn fn = nullptr;
  std::vector<int64_t> scalars;
  std::vector<int64_t> status; // the kernel's bounds-check reports (the ABI's pointer after the tensors)

  Setup() {
    std::vector<int32_t> perm(N * K);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), std::mt19937(42));
    std::memcpy(idx.raw(), perm.data(), perm.size() * 4);
    auto *g = static_cast<uint16_t *>(grad.raw());
    for (int64_t i = 0; i < grad.elements(); ++i)
      g[i] = 0x3f80 + (i % 64); // bf16 values around 1.0
    std::map<std::string, moec::TensorView> inputs{{"grad_expanded_x", grad.view()},
                                                   {"expanded_row_idx", idx.view()}};
    moec::BoundCall call = moec::bindCall(*op, moec::DType::BF16, {{"top_k", K}}, inputs);
    compiled = moec::compile(*op, {moec::DType::BF16, call.statics(*op), moec::Target::cpu(), {}});
    fn = compiled.cpu->lookup(compiled.kernels.front().name);
    scalars = call.kernelScalars(*op);
    status.assign(2 * compiled.kernels.front().checks.size() + 2, 0);
  }

  int64_t trafficBytes() const { return grad.bytes() + idx.bytes() + out.bytes(); }
  void runKernel() {
    moec::launchCpu(fn, {grad.raw(), idx.raw(), out.raw(), status.data()}, scalars, N, moec::ThreadPool::shared());
  }
};

Setup &setup() {
  static Setup s;
  return s;
}

/// memcpy of traffic/2 bytes (read + write = traffic), split over the same thread pool.
double memcpySeconds(int64_t traffic) {
  static std::vector<char> src(traffic / 2, 1), dst(traffic / 2);
  auto start = std::chrono::steady_clock::now();
  int64_t chunk = 1 << 20;
  moec::ThreadPool::shared().parallelFor((src.size() + chunk - 1) / chunk, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      size_t off = c * chunk, len = std::min<size_t>(chunk, src.size() - off);
      std::memcpy(dst.data() + off, src.data() + off, len);
    }
  });
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void BM_InitRoutingV2Grad_CPU_bf16(benchmark::State &state) {
  Setup &s = setup();
  double kernelSeconds = 0, copySeconds = 0;
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    s.runKernel();
    kernelSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.PauseTiming();
    copySeconds += memcpySeconds(s.trafficBytes());
    state.ResumeTiming();
  }
  state.SetBytesProcessed(state.iterations() * s.trafficBytes());
  state.counters["vs_memcpy"] = copySeconds / kernelSeconds;
}
BENCHMARK(BM_InitRoutingV2Grad_CPU_bf16)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Memcpy_SameTraffic(benchmark::State &state) {
  int64_t traffic = setup().trafficBytes();
  for (auto _ : state)
    state.SetIterationTime(memcpySeconds(traffic));
  state.SetBytesProcessed(state.iterations() * traffic);
}
BENCHMARK(BM_Memcpy_SameTraffic)->Unit(benchmark::kMillisecond)->UseManualTime();

} // namespace
