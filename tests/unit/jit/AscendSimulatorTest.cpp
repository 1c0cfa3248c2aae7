//===- AscendSimulatorTest.cpp - Tiled Ascend kernels on the UB simulator == the CPU kernels ---===//
//
// Every op and mode the Ascend lowering covers, each dtype, on each chip: fresh random inputs, run once on
// the CPU and once as tiled kernels on the UB simulator (every buffer placed, every DataCopy checked), and
// the outputs must be the same bytes. Sizes: a single token, odd H, and H larger than the UB of a small
// chip (the row must be chunked). The simulator's counts are checked against what the plan says.
//===----------------------------------------------------------------------===//
#include "Cases.h"

#include "moec/ops/BuiltinOps.h"
#include "moec/runtime/CpuRun.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace moec;
using namespace moec::gpucheck;

namespace {

struct Mode {
  std::string name, op;
  std::function<Case(DType, int64_t tokens, int64_t H, std::mt19937 &)> build;
  std::map<std::string, int64_t> extraAttrs;
};

void PrintTo(const Mode &m, std::ostream *os) { *os << m.name; }

std::vector<Mode> modes() {
  auto b2 = [](int dropPad, bool active, int64_t topK) {
    return [=](DType t, int64_t n, int64_t h, std::mt19937 &rng) {
      return initRoutingGrad(t, n, topK, h, dropPad, active, rng, false);
    };
  };
  auto a3 = [](bool pad) {
    return [=](DType t, int64_t n, int64_t h, std::mt19937 &rng) {
      return pad ? unpermuteGradPad(t, n, 8, 3, h, false, rng, false)
                 : unpermuteGradNonPad(t, n, 40, std::min<int64_t>(8, 40), h, false, rng, false);
    };
  };
  auto c2 = [](bool weighted) {
    return [=](DType t, int64_t n, int64_t h, std::mt19937 &rng) { return paddleUnpermute(t, n, 40, 4, h, weighted, rng, false); };
  };
  const char *b2op = "moe_init_routing_v2_grad", *a3op = "moe_token_unpermute_with_routing_map_grad",
             *c2op = "moe_unpermute";
  return {{"B2_dropless", b2op, b2(0, false, 4), {}},
          {"B2_active", b2op, b2(0, true, 4), {}},
          {"B2_drop_pad", b2op, b2(1, false, 4), {}},
          {"B2_active_top16", b2op, b2(0, true, 16), {}},
          {"A3_nonpad", a3op, a3(false), {}},
          {"A3_pad", a3op, a3(true), {}},
          {"C2", c2op, c2(false), {}},
          {"C2_weighted", c2op, c2(true), {}}};
}

/// A chip with a small UB, so that rows of a few thousand elements must be chunked.
ascend::Chip smallChip() {
  ascend::Chip chip = ascend::builtinChip("910b");
  chip.name = "small-ub";
  chip.vectorCores = 7;
  chip.ubBytes = 8192;
  chip.maxCopyBytes = 4096;
  return chip;
}

class AscendSimulator : public ::testing::TestWithParam<Mode> {};

TEST_P(AscendSimulator, IsBitIdenticalToTheCpuKernels) {
  const Mode &mode = GetParam();
  auto op = loadOp(mode.op);
  std::mt19937 rng(std::random_device{}());
  struct Size {
    int64_t tokens, H;
  };
  for (const ascend::Chip &chip : {ascend::builtinChip("910b"), ascend::builtinChip("310p"), smallChip()}) {
    for (Size size : {Size{1, 8}, Size{37, 100}, Size{45, 3001}}) {
      for (DType dtype : {DType::BF16, DType::F16, DType::F32}) {
        SCOPED_TRACE(chip.name + " tokens " + std::to_string(size.tokens) + " H " + std::to_string(size.H) + " " +
                     dsl::dtypeName(dtype));
        Case c = mode.build(dtype, size.tokens, size.H, rng);
        c.attrs.insert(mode.extraAttrs.begin(), mode.extraAttrs.end());
        std::map<std::string, TensorView> inputs;
        for (auto &[name, t] : c.inputs)
          inputs[name] = t.view();
        CpuRunResult cpu = runOnCpu(*op, dtype, c.attrs, inputs);
        CpuRunResult simulated;
        try {
          simulated = runOnAscendSimulator(*op, dtype, c.attrs, inputs, chip);
        } catch (const std::exception &e) {
          FAIL() << e.what();
        }
        ASSERT_EQ(simulated.outputs.size(), cpu.outputs.size());
        for (const auto &[name, expected] : cpu.outputs) {
          const HostTensor &got = simulated.outputs.at(name);
          ASSERT_EQ(got.bytes(), expected.bytes()) << name;
          EXPECT_EQ(std::memcmp(got.raw(), expected.raw(), got.bytes()), 0) << name << " differs from the CPU kernel";
        }
        // Each launch: blockDim = min(cores, rows), every row done once, and the UB never past the chip's.
        ASSERT_EQ(simulated.simulated.size(), simulated.tilings.size());
        for (const ascend::SimulatedLaunch &launch : simulated.simulated) {
          EXPECT_EQ(int64_t(launch.cores.size()), std::min(chip.vectorCores, launch.rows)) << launch.kernel;
          int64_t rows = 0;
          for (const auto &core : launch.cores) {
            rows += core.rows;
            EXPECT_LE(core.peakUbBytes, chip.ubBytes) << launch.kernel;
          }
          EXPECT_EQ(rows, launch.rows) << launch.kernel;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(LoweredModes, AscendSimulator, ::testing::ValuesIn(modes()),
                         [](const auto &info) { return info.param.name; });

} // namespace
