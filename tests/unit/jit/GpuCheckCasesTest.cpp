//===- GpuCheckCasesTest.cpp - The GPU check's inputs and references, on the CPU ===//
//
// bench/gpu/gpu_check runs only where a GPU is; its case builders and references are plain C++, so they
// are checked here against the CPU kernels: if they agree, a GPU failure is the GPU kernel's.
//===----------------------------------------------------------------------===//
#include "Cases.h"

#include "moec/ops/BuiltinOps.h"
#include "moec/runtime/CpuRun.h"

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
