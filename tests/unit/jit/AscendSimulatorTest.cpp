//===- AscendSimulatorTest.cpp - Tiled Ascend kernels on the UB simulator == the CPU kernels ---===//
//
// Every op and mode the Ascend lowering covers, each dtype, on each chip: fresh random inputs, run once on
// the CPU and once as tiled kernels on the UB simulator (every buffer placed, every DataCopy checked), and
// the outputs must be the same bytes. Sizes: a single token, odd H, and H larger than the UB of a small
// chip (the row must be chunked). The simulator's counts are checked against what the plan says.
//===----------------------------------------------------------------------===//
#include "OpModes.h"

#include "moec/jit/AscendPlanner.h"
#include "moec/jit/CpuRun.h"
#include "moec/jit/Runtime.h"
#include "moec/ops/BuiltinOps.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace moec;
using namespace moec::gpucheck;

namespace {

/// A chip with a small UB, so that rows of a few thousand elements must be chunked.
ascend::Chip smallChip() {
  ascend::Chip chip = ascend::builtinChip("910b");
  chip.name = "small-ub";
  chip.vectorCores = 7;
  chip.ubBytes = 8192;
  chip.maxCopyBytes = 4096;
  return chip;
}

/// A chip whose UB holds a whole row of 3001 elements next to chunks of the others: a kept input of a
/// chunked row holds its whole row (#moe.ub_buffer<..., wholeRow = true>).
ascend::Chip wholeRowChip() {
  ascend::Chip chip = smallChip();
  chip.name = "whole-row-ub";
  chip.ubBytes = 32768;
  return chip;
}

class AscendSimulator : public ::testing::TestWithParam<OpMode> {};

TEST_P(AscendSimulator, IsBitIdenticalToTheCpuKernels) {
  const OpMode &mode = GetParam();
  auto op = loadOp(mode.op);
  CompiledRuns cpuKernels; // each size and dtype's CPU kernels, compiled once for the four chips
  std::mt19937 rng(std::random_device{}());
  struct Size {
    int64_t tokens, H;
  };
  for (const ascend::Chip &chip :
       {ascend::builtinChip("910b"), ascend::builtinChip("310p"), smallChip(), wholeRowChip()}) {
    for (Size size : {Size{1, 8}, Size{37, 100}, Size{45, 3001}}) {
      for (DType dtype : {DType::BF16, DType::F16, DType::F32}) {
        SCOPED_TRACE(chip.name + " tokens " + std::to_string(size.tokens) + " H " + std::to_string(size.H) + " " +
                     dsl::dtypeName(dtype));
        Case c = mode.build(dtype, size.tokens, size.H, rng);
        for (const auto &[name, value] : mode.extraAttrs) // the mode's attributes win over the case's
          c.attrs[name] = value;
        std::map<std::string, TensorView> inputs;
        for (auto &[name, t] : c.inputs)
          inputs[name] = t.view();
        CpuRunResult cpu = runOnCpu(*op, dtype, c.attrs, inputs, {}, &cpuKernels);
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

INSTANTIATE_TEST_SUITE_P(LoweredModes, AscendSimulator, ::testing::ValuesIn(allOpModes()),
                         [](const auto &info) { return info.param.name; });

} // namespace

namespace {

// B2 dropless: every gathered row is live, so the tiled kernel moves exactly the op's minimum bytes: each
// of the N*K expanded rows in once, each of the N output rows out once; and one DataCopy per gathered row
// and chunk plus one per output row and chunk, and a scalar read per index and chunk. Per core: the plan's
// split (ceil or floor of N / cores).
TEST(AscendSimulatorCounts, B2MovesTheMinimumBytesInTheExpectedCopies) {
  auto op = loadOp("moe_init_routing_v2_grad");
  std::mt19937 rng(std::random_device{}());
  const int64_t N = 45, K = 3;
  for (const ascend::Chip &chip : {ascend::builtinChip("910b"), smallChip()}) {
    for (int64_t H : {8, 3001}) {
      for (DType dtype : {DType::BF16, DType::F32}) {
        SCOPED_TRACE(chip.name + " H " + std::to_string(H) + " " + dsl::dtypeName(dtype));
        Case c = initRoutingGrad(dtype, N, K, H, 0, false, rng, false);
        std::map<std::string, TensorView> inputs;
        for (auto &[name, t] : c.inputs)
          inputs[name] = t.view();
        CpuRunResult run = runOnAscendSimulator(*op, dtype, c.attrs, inputs, chip);
        ASSERT_EQ(run.simulated.size(), 1u);
        ASSERT_EQ(run.tilings.size(), 1u);
        const ascend::SimulatedLaunch &launch = run.simulated[0];
        int64_t chunks = run.tilings[0].chunks, bytes = dsl::dtypeBytes(dtype);
        EXPECT_EQ(chunks, (H + run.tilings[0].chunk - 1) / run.tilings[0].chunk);
        int64_t cores = std::min(chip.vectorCores, N), in = 0, out = 0, copies = 0;
        ASSERT_EQ(int64_t(launch.cores.size()), cores);
        for (int64_t core = 0; core < cores; ++core) {
          const auto &stats = launch.cores[size_t(core)];
          EXPECT_EQ(stats.rows, N / cores + (core < N % cores ? 1 : 0)) << "core " << core;
          EXPECT_EQ(stats.dataCopies, stats.rows * chunks * (K + 1)) << "core " << core;
          // The K indices of a row are scalar reads, again for each chunk (they are not kept in the UB).
          EXPECT_EQ(stats.scalarReads, stats.rows * chunks * K) << "core " << core;
          EXPECT_EQ(stats.scalarBytes, stats.scalarReads * 4) << "core " << core;
          in += stats.bytesIn;
          out += stats.bytesOut;
          copies += stats.dataCopies;
        }
        EXPECT_EQ(in, N * K * H * bytes);
        EXPECT_EQ(out, N * H * bytes);
        EXPECT_EQ(copies, N * chunks * (K + 1));
      }
    }
  }
}

// A3 without probs: token t's gradient row is kept in the UB for its K slots (a kept input), so with one
// chunk per row a core copies it once for each token its rows touch, and each slot's row out once; with
// several chunks it is copied for each slot and chunk. The plan counts the same per core.
TEST(AscendSimulatorCounts, A3KeepsATokensRowForItsSlots) {
  auto op = loadOp("moe_token_unpermute_with_routing_map_grad");
  std::mt19937 rng(std::random_device{}());
  const int64_t T = 45, E = 40, K = 8;
  int comparedWithPlan = 0;
  for (const ascend::Chip &chip : {ascend::builtinChip("910b"), smallChip()}) {
    for (int64_t H : {8, 3001}) {
      SCOPED_TRACE(chip.name + " H " + std::to_string(H));
      Case c = unpermuteGradNonPad(DType::BF16, T, E, K, H, false, rng, false);
      std::map<std::string, TensorView> inputs;
      for (auto &[name, t] : c.inputs)
        inputs[name] = t.view();
      CpuRunResult run = runOnAscendSimulator(*op, DType::BF16, c.attrs, inputs, chip);
      ASSERT_EQ(run.simulated.size(), run.tilings.size());
      for (size_t k = 0; k < run.simulated.size(); ++k) {
        const ascend::SimulatedLaunch &launch = run.simulated[k];
        const auto &buffers = run.tilings[k].buffers;
        if (std::none_of(buffers.begin(), buffers.end(), [](const auto &b) {
              return b.role == ascend::UbRole::Input && b.tensor == "unpermuted_tokens_grad";
            }))
          continue; // the fill of rows no slot wrote
        int64_t chunks = run.tilings[k].chunks, cores = int64_t(launch.cores.size()), begin = 0;
        for (int64_t core = 0; core < cores; ++core) {
          const auto &stats = launch.cores[size_t(core)];
          int64_t rows = T * K / cores + (core < T * K % cores ? 1 : 0);
          int64_t tokens = (begin + rows - 1) / K - begin / K + 1; // every slot is live here
          int64_t copiesIn = chunks == 1 ? tokens : rows * chunks;
          EXPECT_EQ(stats.bytesIn, (chunks == 1 ? tokens : rows) * H * 2) << "core " << core;
          EXPECT_EQ(stats.dataCopies, copiesIn + rows * chunks) << "core " << core;
          EXPECT_EQ(stats.bytesOut, rows * H * 2) << "core " << core;
          begin += rows;
        }
        // The plan counts the same DataCopy calls per core, when it reads the slot indices as scalars too.
        AscendPlanner planner(chip);
        auto plan = planner.plan("moe_token_unpermute_with_routing_map_grad",
                                 {DType::BF16, {{"Tk", T}, {"R", T * K}, {"E", E}, {"H", H}}, {}, {}});
        for (const ascend::KernelPlan &kernel : plan->kernels) {
          if (kernel.tiling.kernel != launch.kernel)
            continue;
          ASSERT_EQ(int64_t(kernel.cores.size()), cores);
          comparedWithPlan += kernel.scalarRowValues;
          for (int64_t core = 0; core < cores && kernel.scalarRowValues; ++core) {
            EXPECT_EQ(kernel.cores[size_t(core)].rows, launch.cores[size_t(core)].rows) << "core " << core;
            EXPECT_EQ(kernel.cores[size_t(core)].dataCopies, launch.cores[size_t(core)].dataCopies) << "core " << core;
            EXPECT_EQ(kernel.cores[size_t(core)].scalarReads, launch.cores[size_t(core)].scalarReads) << "core " << core;
          }
        }
      }
    }
  }
  EXPECT_GT(comparedWithPlan, 0) << "no plan read the indices as scalars: nothing was compared";
}

// A3 with probs, every expert chosen (K = E, so every point is live): the dot products of a token's E points
// share its gradient row, a kept input. Its rows need three chunks on a 32 KiB UB, and the buffer holds the
// whole row: a core copies it in once per token its points touch (chunk by chunk), not once per point; each
// point copies its permuted row in. The plan counts the same kept-row bytes per core.
TEST(AscendSimulatorCounts, A3KeepsAWholeTokenRowForItsDotProducts) {
  auto op = loadOp("moe_token_unpermute_with_routing_map_grad");
  std::mt19937 rng(std::random_device{}());
  const int64_t T = 45, E = 4, H = 3001;
  ascend::Chip chip = wholeRowChip();
  for (DType dtype : {DType::BF16, DType::F32}) {
    SCOPED_TRACE(dsl::dtypeName(dtype));
    Case c = unpermuteGradNonPad(dtype, T, E, E, H, true, rng, false);
    std::map<std::string, TensorView> inputs;
    for (auto &[name, t] : c.inputs)
      inputs[name] = t.view();
    CpuRunResult run = runOnAscendSimulator(*op, dtype, c.attrs, inputs, chip);
    AscendPlanner planner(chip);
    auto plan = planner.plan(
        "moe_token_unpermute_with_routing_map_grad",
        {dtype, {{"Tk", T}, {"R", T * E}, {"E", E}, {"H", H}}, {}, {"routing_map", "permuted_tokens", "probs"}});
    const int64_t b = dsl::dtypeBytes(dtype);
    int wholeRows = 0;
    for (size_t k = 0; k < run.simulated.size(); ++k) {
      const ascend::KernelTiling &tiling = run.tilings[k];
      auto kept = std::find_if(tiling.buffers.begin(), tiling.buffers.end(), [](const auto &b) { return b.wholeRow; });
      if (kept == tiling.buffers.end())
        continue;
      ++wholeRows;
      EXPECT_EQ(kept->role, ascend::UbRole::Input);
      EXPECT_EQ(kept->tensor, "unpermuted_tokens_grad");
      EXPECT_GT(tiling.chunks, 1);
      const ascend::SimulatedLaunch &launch = run.simulated[k];
      const ascend::KernelPlan *kernel = nullptr;
      for (const ascend::KernelPlan &p : plan->kernels)
        if (p.tiling.kernel == launch.kernel)
          kernel = &p;
      ASSERT_NE(kernel, nullptr);
      ASSERT_EQ(kernel->cores.size(), launch.cores.size());
      for (int64_t core = 0, begin = 0; core < int64_t(launch.cores.size()); ++core) {
        const auto &stats = launch.cores[size_t(core)];
        int64_t rows = stats.rows, tokens = (begin + rows - 1) / E - begin / E + 1;
        EXPECT_EQ(stats.bytesIn, (rows + tokens) * H * b) << "core " << core;
        const ascend::CoreWork &planned = kernel->cores[size_t(core)];
        EXPECT_EQ(planned.rows, rows) << "core " << core;
        EXPECT_EQ(planned.gmBytes - rows * tiling.rowBytes, tokens * H * b) << "core " << core;
        begin += rows;
      }
    }
    EXPECT_EQ(wholeRows, 1) << "the dot products' kernel holds whole token rows";
  }
}

// What a real core would get wrong fails loudly, naming it: a chip whose UB cannot hold even one chunk is
// refused when planning, naming the op and the chip.
TEST(AscendSimulatorCounts, AChipTooSmallForOneChunkIsRefused) {
  auto op = loadOp("moe_init_routing_v2_grad");
  std::mt19937 rng(std::random_device{}());
  ascend::Chip chip = smallChip();
  chip.name = "tiny";
  chip.ubBytes = 64;
  Case c = initRoutingGrad(DType::F32, 5, 2, 40, 0, false, rng, false);
  std::map<std::string, TensorView> inputs;
  for (auto &[name, t] : c.inputs)
    inputs[name] = t.view();
  try {
    runOnAscendSimulator(*op, DType::F32, c.attrs, inputs, chip);
    FAIL() << "a 64 B UB ran";
  } catch (const std::exception &e) {
    EXPECT_NE(std::string(e.what()).find("does not fit the 64 B UB of chip 'tiny'"), std::string::npos) << e.what();
  }
}

} // namespace


namespace {

// The C++ API with the simulator as its target: compiled on the first call, cached (the second Runtime
// reads the kernel from disk; a chip that differs in any figure does not), launched core by core; the same
// bytes as the CPU kernels.
TEST(AscendSimulatorRuntime, CompilesCachesAndLaunchesThroughTheSimulator) {
  std::mt19937 rng(std::random_device{}());
  Case c = unpermuteGradNonPad(DType::BF16, 9, 16, 4, 300, true, rng, false);
  KernelRequest request{DType::BF16, {{"E", 16}, {"H", 300}}, {}, {"routing_map", "permuted_tokens", "probs"}};
  auto op = loadOp("moe_token_unpermute_with_routing_map_grad");
  std::map<std::string, TensorView> inputs;
  for (auto &[name, t] : c.inputs)
    inputs[name] = t.view();
  CpuRunResult cpu = runOnCpu(*op, DType::BF16, c.attrs, inputs);
  // A chip file that keeps the name but changes a figure is another target: compiled, not read back.
  ascend::Chip renamed = smallChip();
  renamed.name = "910b";
  struct Pass {
    ascend::Chip chip;
    bool fromDisk;
  };
  for (const Pass &pass : {Pass{ascend::builtinChip("910b"), false}, Pass{ascend::builtinChip("910b"), true},
                           Pass{renamed, false}}) {
    SCOPED_TRACE(std::string(pass.fromDisk ? "from the disk cache" : "compiled") + ", UB " +
                 std::to_string(pass.chip.ubBytes));
    Runtime::Options options;
    options.target = Target::ascendSimulator(pass.chip);
    Runtime rt(options);
    Kernel kernel = rt.get("moe_token_unpermute_with_routing_map_grad", request);
    EXPECT_EQ(rt.stats().diskHits, pass.fromDisk ? 1u : 0u);
    EXPECT_EQ(rt.stats().compiles, pass.fromDisk ? 0u : 1u);
    std::map<std::string, HostTensor> outputs;
    std::map<std::string, TensorView> views = inputs;
    for (const auto &[name, expected] : cpu.outputs) {
      HostTensor &out = outputs.emplace(name, HostTensor(expected.type(), expected.dims())).first->second;
      std::memset(out.raw(), 0xFF, out.bytes());
      views[name] = out.view();
    }
    kernel.launch(views);
    for (const auto &[name, expected] : cpu.outputs)
      EXPECT_EQ(std::memcmp(outputs.at(name).raw(), expected.raw(), expected.bytes()), 0) << name << " differs";
  }
}

} // namespace
