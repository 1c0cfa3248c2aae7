//===- WorkspaceTest.cpp - A specialization's workspace, call after call --===//
//
// A3 without probs gets moe-fill-uncovered-rows: its scatter marks the rows it writes in the workspace
// and the zero fill then writes only the others. The workspace must be zero at the start of every call:
// one kernel, launched twice on the same thread (the CPU's workspace is per thread, the GPU's per stream),
// first with every row written by the scatter, then with some slots dropped (out_index -1), must give the
// second call's rows of zeros. Outputs start as 0xFF bytes (NaN), so a row nothing writes shows.
//===----------------------------------------------------------------------===//
#include "moec/cases/Cases.h"
#include "TempDir.h"

#include "moec/jit/Runtime.h"
#include "moec/runtime/CudaDriver.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <thread>
#include <unistd.h>

using namespace moec;
using namespace moec::gpucheck;

namespace {

constexpr int64_t kTokens = 9, kExperts = 6, kTopK = 3, kH = 20;
const char *kOp = "moe_token_unpermute_with_routing_map_grad";

/// A3 non-pad, no probs, f32; with `dropEvery` > 0 every dropEvery-th slot is dropped (out_index -1), and
/// the row it held is expected to be zeros.
Case unpermuteCase(std::mt19937 &rng, int dropEvery) {
  Case c = unpermuteGradNonPad(DType::F32, kTokens, kExperts, kTopK, kH, false, rng);
  auto *outIndex = static_cast<int32_t *>(c.inputs.at("out_index").raw());
  auto *expected = static_cast<float *>(c.expected.at("permuted_tokens_grad").raw());
  for (int64_t slot = 0; dropEvery > 0 && slot < kTokens * kTopK; slot += dropEvery) {
    std::fill_n(expected + outIndex[slot] * kH, kH, 0.0f);
    outIndex[slot] = -1;
  }
  return c;
}

KernelRequest request() { return {DType::F32, {{"H", kH}, {"E", kExperts}}, {}, {}, {}}; }

std::filesystem::path freshCacheDir(const std::string &tag) { return moec::tests::freshTempDir("workspace-" + tag); }

struct CacheDir {
  std::filesystem::path path;
  explicit CacheDir(const std::string &tag) : path(freshCacheDir(tag)) {}
  ~CacheDir() { std::filesystem::remove_all(path); }
};

void expectEqualBytes(const HostTensor &got, const HostTensor &expected, const std::string &call) {
  ASSERT_EQ(got.bytes(), expected.bytes());
  EXPECT_EQ(std::memcmp(got.raw(), expected.raw(), got.bytes()), 0) << call << ": permuted_tokens_grad differs";
}

Runtime::Options cpuOptions(const CacheDir &cache) {
  Runtime::Options o;
  o.target = Target::cpu();
  o.cacheDir = cache.path;
  return o;
}

/// Launches `c` on the CPU into an output of 0xFF bytes and returns the output.
HostTensor launchOnCpu(const Kernel &kernel, Case &c) {
  HostTensor out(DType::F32, {kTokens * kTopK, kH});
  std::memset(out.raw(), 0xFF, out.bytes());
  std::map<std::string, TensorView> tensors = {{"permuted_tokens_grad", out.view()}};
  for (auto &[name, t] : c.inputs)
    tensors[name] = t.view();
  kernel.launch(tensors, nullptr, c.attrs);
  return out;
}

TEST(Workspace, StartsZeroedForEveryCallOnTheCpu) {
  CacheDir cache("cpu");
  Runtime rt(cpuOptions(cache));
  Kernel kernel = rt.get(kOp, request());
  ASSERT_FALSE(kernel.specialization().workspace.empty()) << "the A3 zero fill is expected to use a workspace";
  std::mt19937 rng(std::random_device{}());
  for (int dropEvery : {0, 3, 2}) {
    Case c = unpermuteCase(rng, dropEvery);
    expectEqualBytes(launchOnCpu(kernel, c), c.expected.at("permuted_tokens_grad"),
                     "dropping every " + std::to_string(dropEvery));
  }
}

// Calls from several threads at once each get their own workspace (one per launching thread).
TEST(Workspace, ConcurrentCallsOnTheCpuDoNotShareIt) {
  CacheDir cache("threads");
  Runtime rt(cpuOptions(cache));
  Kernel kernel = rt.get(kOp, request());
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      std::mt19937 rng(std::random_device{}() + i);
      for (int call = 0; call < 20; ++call) {
        Case c = unpermuteCase(rng, (call + i) % 4); // 0: every row written; else some dropped
        HostTensor out = launchOnCpu(kernel, c);
        const HostTensor &expected = c.expected.at("permuted_tokens_grad");
        if (std::memcmp(out.raw(), expected.raw(), out.bytes()) != 0)
          ++mismatches;
      }
    });
  for (std::thread &t : threads)
    t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(Workspace, StartsZeroedForEveryCallOnTheEmulatedGpu) {
  CacheDir cache("gpu");
  Runtime::Options o;
  o.target = Target::ptx("sm_90");
  o.driver = &CudaDriver::emulator();
  o.cacheDir = cache.path;
  Runtime rt(o);
  Kernel kernel = rt.get(kOp, request());
  ASSERT_FALSE(kernel.specialization().workspace.empty());
  std::mt19937 rng(std::random_device{}());
  for (int dropEvery : {0, 3, 2}) {
    Case c = unpermuteCase(rng, dropEvery);
    DeviceCall call(CudaDriver::emulator(), c);
    kernel.launch(call.tensors, nullptr, c.attrs);
    CudaDriver::emulator().check(CudaDriver::emulator().api().ctxSynchronize(), "cuCtxSynchronize");
    expectEqualBytes(call.download("permuted_tokens_grad"), c.expected.at("permuted_tokens_grad"),
                     "dropping every " + std::to_string(dropEvery));
  }
}

} // namespace
