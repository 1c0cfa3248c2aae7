//===- ModeRun.h - One op mode's case, run with a schedule on the CPU or the emulated GPU -*- C++ -*-===//
//
// For tests that compare runs of one case bit for bit (OptimizationsTest: each optimization off; TunerTest:
// configs of a target's space), on the CPU, the emulated GPU or the Ascend UB simulator.
//===----------------------------------------------------------------------===//
#pragma once

#include "OpModes.h"

#include "moec/jit/CpuRun.h"
#include "moec/runtime/CudaDriver.h"

#include <gtest/gtest.h>

#include <cstring>
#include <optional>

namespace moec::gpucheck {

/// `mode`'s case at `dtype` (fresh random inputs, its extra attributes set), run by `op`'s kernels.
struct ModeRun {
  const dsl::OpDef &op;
  DType dtype;
  bool emulated; // the GPU path, sm_90 PTX on the PTX emulator
  Case c;
  std::map<std::string, TensorView> inputs;

  ModeRun(const OpMode &mode, const dsl::OpDef &op, DType dtype, int64_t tokens, int64_t H, std::mt19937 &rng,
          bool emulated)
      : op(op), dtype(dtype), emulated(emulated), c(mode.build(dtype, tokens, H, rng)) {
    for (const auto &[name, value] : mode.extraAttrs) // the mode's attributes win over the case's
      c.attrs[name] = value;
    for (auto &[name, t] : c.inputs)
      inputs[name] = t.view();
  }

  std::optional<ascend::Chip> chip; // set: the tiled Ascend kernels, on the UB simulator of this chip
  CpuRunResult operator()(const Schedule &s) const {
    if (chip)
      return runOnAscendSimulator(op, dtype, c.attrs, inputs, *chip, s);
    return emulated ? runOnDevice(op, dtype, c.attrs, inputs, s, Target::ptx("sm_90"), CudaDriver::emulator())
                    : runOnCpu(op, dtype, c.attrs, inputs, s);
  }
};

/// Every output of `got` has the bytes of `expected`'s.
inline void expectSameBytes(const CpuRunResult &got, const CpuRunResult &expected) {
  ASSERT_EQ(got.outputs.size(), expected.outputs.size());
  for (const auto &[name, want] : expected.outputs) {
    const HostTensor &have = got.outputs.at(name);
    ASSERT_EQ(have.bytes(), want.bytes()) << name;
    EXPECT_EQ(std::memcmp(have.raw(), want.raw(), have.bytes()), 0) << name << " differs";
  }
}

} // namespace moec::gpucheck
