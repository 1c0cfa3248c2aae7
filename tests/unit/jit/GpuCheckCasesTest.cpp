//===- GpuCheckCasesTest.cpp - The GPU check's inputs and references, on the CPU ===//
//
// bench/gpu/gpu_check runs only where a GPU is; its case builders and references are plain C++, so they
// are checked here against the CPU kernels: if they agree, a GPU failure is the GPU kernel's.
//===----------------------------------------------------------------------===//
#include "moec/cases/Cases.h"

#include "moec/jit/CpuRun.h"
#include "moec/ops/BuiltinOps.h"

#include <gtest/gtest.h>

using namespace moec;
using namespace moec::gpucheck;

namespace {

void expectAgreement(const std::string &opName, DType dtype, Case c) {
  auto op = loadOp(opName);
  std::map<std::string, TensorView> inputs;
  for (auto &[name, t] : c.inputs)
    inputs[name] = const_cast<HostTensor &>(t).view();
  CpuRunResult result = runOnCpu(*op, dtype, c.attrs, inputs);
  for (const auto &[name, expected] : c.expected) {
    auto [err, allowed] = outputError(c, name, result.outputs.at(name));
    EXPECT_GE(err, 0) << opName << " " << name << ": NaN mismatch";
    EXPECT_LE(err, allowed) << opName << " " << dsl::dtypeName(dtype) << " " << name;
  }
  EXPECT_GT(c.bytesMoved, 0);
}

} // namespace

TEST(GpuCheckCases, AgreeWithTheCpuKernels) {
  std::mt19937 rng(std::random_device{}());
  for (DType dtype : {DType::BF16, DType::F16, DType::F32}) {
    SCOPED_TRACE(dsl::dtypeName(dtype));
    for (int dropPad : {0, 1})
      for (bool active : {false, true})
        if (!(dropPad && active))
          expectAgreement("moe_init_routing_v2_grad", dtype, initRoutingGrad(dtype, 37, 4, 72, dropPad, active, rng));
    for (bool probs : {false, true}) {
      expectAgreement("moe_token_unpermute_with_routing_map_grad", dtype,
                      unpermuteGradNonPad(dtype, 37, 16, 8, 72, probs, rng));
      expectAgreement("moe_token_unpermute_with_routing_map_grad", dtype,
                      unpermuteGradPad(dtype, 37, 8, 12, 72, probs, rng));
    }
    for (bool weighted : {false, true})
      expectAgreement("moe_unpermute", dtype, paddleUnpermute(dtype, 37, 8, 4, 72, weighted, rng));
  }
}

// The minimum bytes of A3: dY written once, G read once per routed token (not once per slot), and with
// probs each slot's permuted row. Non-pad routes every token to K experts: R = T * K slots.
TEST(GpuCheckCases, A3MovesEachTokensGradientOnce) {
  std::mt19937 rng(std::random_device{}());
  const int64_t T = 37, E = 16, K = 8, H = 72, row = H * 2;
  for (bool probs : {false, true}) {
    Case c = unpermuteGradNonPad(DType::BF16, T, E, K, H, probs, rng, false);
    EXPECT_EQ(c.bytesMoved, double(T * K * row + T * row + (probs ? T * K * row : 0))) << probs;
  }
  // Padded: every capacity row of dY is written, the tokens that kept a slot are read.
  Case pad = unpermuteGradPad(DType::BF16, T, E, 4, H, true, rng, false);
  const HostTensor &ids = pad.inputs.at("permute_token_id");
  std::set<int32_t> tokens;
  int64_t slots = 0;
  for (int64_t i = 0; i < ids.elements(); ++i)
    if (int32_t t = static_cast<const int32_t *>(ids.raw())[i]; t >= 0) {
      tokens.insert(t);
      ++slots;
    }
  ASSERT_GT(slots, 0);
  EXPECT_EQ(pad.bytesMoved, double(E * 4 * row + int64_t(tokens.size()) * row + slots * row));
}

// CompiledRuns: a run at another token count reuses the specialization's kernels (one compile, the same
// loaded op), and its results are still right; another specialization (dtype, schedule, op) compiles anew.
TEST(CompiledRuns, CompileASpecializationOnceAcrossTokenCounts) {
  std::mt19937 rng(std::random_device{}());
  auto op = loadOp("moe_unpermute");
  CompiledRuns runs;
  auto run = [&](DType dtype, int64_t tokens, const Schedule &schedule) {
    Case c = paddleUnpermute(dtype, tokens, 8, 4, 72, true, rng);
    std::map<std::string, TensorView> inputs;
    for (auto &[name, t] : c.inputs)
      inputs[name] = t.view();
    CpuRunResult result = runOnCpu(*op, dtype, c.attrs, inputs, schedule, &runs);
    for (const auto &[name, expected] : c.expected) {
      auto [err, allowed] = outputError(c, name, result.outputs.at(name));
      EXPECT_GE(err, 0) << name << " at " << tokens << " tokens: NaN mismatch";
      EXPECT_LE(err, allowed) << name << " at " << tokens << " tokens";
    }
    return result.compileTimes.total();
  };
  double first = run(DType::BF16, 37, {});
  EXPECT_EQ(run(DType::BF16, 5, {}), first) << "the second token count compiled again";
  EXPECT_EQ(run(DType::BF16, 300, {}), first);
  EXPECT_EQ(runs.size(), 1u);
  run(DType::F32, 37, {});
  Schedule unrolled;
  unrolled.unroll = 2;
  run(DType::BF16, 37, unrolled);
  EXPECT_EQ(runs.size(), 3u);
}
