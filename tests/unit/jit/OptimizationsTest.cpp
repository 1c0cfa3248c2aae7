//===- OptimizationsTest.cpp - Optimizations change speed, never results -===//
//
// Every optimization the compiler can turn off (Schedule::disabled) must leave every output bit-identical.
// For each op and mode, each dtype, on the CPU and on the emulated GPU: fresh random inputs at odd sizes
// (a row that vectors do not divide, an expert count that is not a multiple of a warp), run once with all
// optimizations off, then with all on and with each one off alone, and compare the bytes.
//===----------------------------------------------------------------------===//
#include "ModeRun.h"

#include "moec/compiler/PipelineTable.h"
#include "moec/contracts/Half.h"
#include "moec/dsl/Parser.h"
#include "moec/jit/CpuRun.h"
#include "moec/jit/Runtime.h"
#include "moec/ops/BuiltinOps.h"
#include "moec/runtime/CudaDriver.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <random>

using namespace moec;
using namespace moec::gpucheck;

namespace {

constexpr int64_t kTokens = 37, kH = 100;

class Optimizations : public ::testing::TestWithParam<std::tuple<OpMode, bool>> {};

TEST_P(Optimizations, LeaveEveryResultBitIdentical) {
  const auto &[mode, emulated] = GetParam();
  auto op = loadOp(mode.op);
  std::mt19937 rng(std::random_device{}());
  for (DType dtype : {DType::BF16, DType::F16, DType::F32}) {
    SCOPED_TRACE(dsl::dtypeName(dtype));
    ModeRun call(mode, *op, dtype, kTokens, kH, rng, emulated);
    // One row per task at least: every run splits its rows over the workers, so what carries state from
    // row to row (moe-carry-prefix-folds) starts mid-way at chunk boundaries.
    auto run = [&](uint32_t disabled, uint32_t enabled) {
      Schedule s;
      s.disabled = disabled;
      s.enabled = enabled;
      s.rowsPerBlock = emulated ? 0 : 1;
      return call(s);
    };
    CpuRunResult plain = run(kAllOptimizations, 0);
    // All on (the opt-in ones too), then each one off alone (an opt-in one: on alone): a new optimization
    // is in the table. One that no pass for the target reads (the pipeline table's optimizationsFor)
    // compiles the same code as all on (PipelineTable.OtherTargetsOptimizationsLeaveTheCodeAlone).
    uint32_t relevant = optimizationsFor(emulated ? TargetKind::GPU : TargetKind::CPU);
    std::vector<std::pair<uint32_t, uint32_t>> schedules = {{0u, uint32_t(kOptInOptimizations)}};
    for (const auto &[name, bit] : kOptimizationsByName)
      if (bit & relevant)
        schedules.push_back(bit & kOptInOptimizations ? std::pair{0u, uint32_t(bit)} : std::pair{uint32_t(bit), 0u});
    for (auto [disabled, enabled] : schedules) {
      SCOPED_TRACE("disabled optimizations: " + std::to_string(disabled) + ", enabled: " + std::to_string(enabled));
      expectSameBytes(run(disabled, enabled), plain);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllModes, Optimizations, ::testing::Combine(::testing::ValuesIn(allOpModes()), ::testing::Bool()),
                         [](const auto &info) {
                           return std::get<0>(info.param).name + (std::get<1>(info.param) ? "_ptx_emu" : "_cpu");
                         });

} // namespace

// An optimization whose bit no pass for a target reads (optimizationsFor) changes none of that target's
// code: every built-in op's examples (ops/examples.json's kinds: each op at its production shape and in its
// modes) compile to the same optimized LLVM IR with it off as with everything on (so to the same PTX or host
// code: the code generator is deterministic; the compile stops there).
TEST(PipelineTable, OtherTargetsOptimizationsLeaveTheCodeAlone) {
  struct Example {
    const char *op;
    Specialization spec;
  };
  std::vector<Example> examples = {
      {"moe_init_routing_v2_grad", {DType::BF16, {{"H", 512}, {"top_k", 8}}}},
      {"moe_init_routing_v2_grad", {DType::F16, {{"H", 512}, {"top_k", 2}, {"drop_pad_mode", 1}}}},
      {"moe_token_unpermute_with_routing_map_grad",
       {DType::BF16, {{"H", 512}, {"E", 16}}, {}, {}, {"routing_map", "permuted_tokens", "probs"}}},
      {"moe_token_unpermute_with_routing_map_grad",
       {DType::F32, {{"H", 512}, {"E", 8}, {"drop_and_pad", 1}}, {}, {}, {"permuted_tokens", "probs"}}},
      {"moe_unpermute", {DType::BF16, {{"H", 512}, {"E", 64}, {"K", 8}, {"using_mix_precision", 0}}}},
      {"moe_unpermute", {DType::F32, {{"H", 512}, {"E", 8}, {"K", 2}, {"using_weighted_combine", 1}}}},
  };
  for (const Target &target : {Target::cpu(), Target::ptx("sm_90")}) {
    const CompileOptions code{{Stage::LLVM}, /*stopAfterDumps=*/true};
    uint32_t relevant = optimizationsFor(target.kind);
    for (Example &e : examples) {
      SCOPED_TRACE(std::string(e.op) + " on " + target.str());
      auto op = loadOp(e.op);
      e.spec.target = target;
      std::string allOn = compile(*op, e.spec, code).dumps.at(Stage::LLVM);
      for (const auto &[name, bit] : kOptimizationsByName) {
        if (bit & relevant)
          continue;
        Specialization off = e.spec;
        off.schedule.disabled = bit;
        EXPECT_EQ(compile(*op, off, code).dumps.at(Stage::LLVM), allOn) << name << " off changed the code";
      }
    }
  }
}

// Streaming stores run only on outputs of 4 MiB or more whose base is aligned for the vector stores (x86's
// non-temporal stores fault on a misaligned address); the loop along the row is versioned on it at each
// call. Large outputs, aligned and one element off, give the reference's bytes, with the stores on and off.
TEST(StreamingStores, LargeOutputsAlignedOrNotAreExact) {
  std::mt19937 rng(std::random_device{}());
  struct Large {
    std::string op;
    KernelRequest request;
    Case c;
  };
  std::vector<Large> cases;
  KernelRequest b2{DType::F32, {{"H", 1024}}, {{"top_k", 2}}};
  cases.push_back({"moe_init_routing_v2_grad", b2, initRoutingGrad(DType::F32, 1100, 2, 1024, 0, false, rng)});
  KernelRequest a3{DType::BF16, {{"E", 16}, {"H", 1024}}, {}};
  cases.push_back({"moe_token_unpermute_with_routing_map_grad", a3,
                   unpermuteGradNonPad(DType::BF16, 1050, 16, 2, 1024, false, rng)});
  Runtime::Options options;
  options.target = Target::cpu();
  Runtime rt(options);
  for (Large &l : cases) {
    ASSERT_TRUE(l.c.bounds.empty()) << l.op << ": an exact case is needed";
    for (bool streaming : {true, false}) {
      l.request.schedule.disabled = streaming ? 0 : kStreamingStores;
      Kernel kernel = rt.get(l.op, l.request);
      for (int64_t offset : {0, 1}) { // elements: 0 keeps HostTensor's 64-byte alignment, 1 breaks it
        SCOPED_TRACE(l.op + (streaming ? " streaming" : " cached") + " offset " + std::to_string(offset));
        std::map<std::string, TensorView> views;
        for (auto &[name, t] : l.c.inputs)
          views[name] = t.view();
        std::map<std::string, HostTensor> buffers;
        for (auto &[name, t] : l.c.expected) {
          ASSERT_GE(t.bytes(), size_t(4) << 20) << name << " is below the streaming threshold";
          HostTensor &b = buffers.emplace(name, HostTensor(t.type(), {t.elements() + 1})).first->second;
          std::memset(b.raw(), 0x5a, b.bytes()); // stale bytes: the op must write every element
          views[name] = TensorView{static_cast<char *>(b.raw()) + offset * dsl::dtypeBytes(t.type()), t.type(), t.dims()};
        }
        kernel.launch(views, nullptr, l.c.attrs);
        for (auto &[name, t] : l.c.expected)
          EXPECT_EQ(std::memcmp(views[name].data, t.raw(), t.bytes()), 0) << name << " differs from the reference";
      }
    }
  }
}

// Interleaved dot products (moe-interleave-reductions) run only on rows of a page or more,
// which the test above does not reach: A3's probs_grad, both modes, at such rows (bf16 and f32, odd lengths),
// on 29 tokens (points split over the workers mid-token; 1 to 3 live points are mostly left waiting at the
// end of a range), match one point at a time byte for byte, and the reference.
TEST(InterleavedReductions, LongRowsGiveTheBytesOfOnePointAtATime) {
  std::mt19937 rng(std::random_device{}());
  auto op = loadOp("moe_token_unpermute_with_routing_map_grad");
  for (bool pad : {false, true})
    for (auto [dtype, H] : {std::pair{DType::BF16, int64_t(2053)}, std::pair{DType::F32, int64_t(1031)}}) {
      SCOPED_TRACE(std::string(pad ? "drop_and_pad " : "non-pad ") + dsl::dtypeName(dtype) + " H=" + std::to_string(H));
      Case c = pad ? unpermuteGradPad(dtype, 29, 8, 12, H, /*probs=*/true, rng)
                   : unpermuteGradNonPad(dtype, 29, 40, 8, H, /*probs=*/true, rng);
      std::map<std::string, TensorView> inputs;
      for (auto &[name, t] : c.inputs)
        inputs[name] = t.view();
      Schedule interleaved;
      interleaved.rowsPerBlock = 1;
      Schedule plain = interleaved;
      plain.disabled = kInterleaveReductions;
      CpuRunResult got = runOnCpu(*op, dtype, c.attrs, inputs, interleaved);
      expectSameBytes(got, runOnCpu(*op, dtype, c.attrs, inputs, plain));
      for (const auto &[name, expected] : c.expected) {
        auto [error, allowed] = outputError(c, name, got.outputs.at(name));
        EXPECT_GE(error, 0) << name << ": NaN where the reference has none";
        EXPECT_LE(error, allowed) << name;
      }
    }
}

// Statement fusion (fuse-row-stores) stores A3's scaled rows inside probs_grad's dot product, with
// non-temporal vector stores where permuted_tokens_grad is 4 MiB or more and aligned (the point range is
// versioned on it at each call), interleaved four points at a time (rows of 4 KiB). Both modes with probs,
// bf16 H = 2048, fused and not, outputs aligned and one element off: every run gives the same bytes, and
// permuted_tokens_grad is the reference's exactly (probs_grad within its bound).
TEST(FusedRowStores, LargeOutputsAlignedOrNotGiveTheUnfusedBytes) {
  std::mt19937 rng(std::random_device{}());
  Runtime::Options options;
  options.target = Target::cpu();
  Runtime rt(options);
  for (bool pad : {false, true}) {
    Case c = pad ? unpermuteGradPad(DType::BF16, 1100, 8, 130, 2048, /*probs=*/true, rng)
                 : unpermuteGradNonPad(DType::BF16, 600, 16, 2, 2048, /*probs=*/true, rng);
    KernelRequest request{DType::BF16, {{"E", pad ? 8 : 16}, {"H", 2048}}, c.attrs, {"permuted_tokens", "probs"}};
    if (!pad)
      request.with.insert("routing_map");
    std::map<std::string, std::vector<uint8_t>> first;
    for (bool fused : {true, false}) {
      request.schedule.disabled = fused ? 0 : kFuseRowStores;
      Kernel kernel = rt.get("moe_token_unpermute_with_routing_map_grad", request);
      for (int64_t offset : {0, 1}) { // elements: 0 keeps HostTensor's 64-byte alignment, 1 breaks it
        SCOPED_TRACE(std::string(pad ? "drop_and_pad" : "non-pad") + (fused ? " fused" : " unfused") + " offset " +
                     std::to_string(offset));
        std::map<std::string, TensorView> views;
        for (auto &[name, t] : c.inputs)
          views[name] = t.view();
        std::map<std::string, HostTensor> buffers;
        for (auto &[name, t] : c.expected) {
          HostTensor &b = buffers.emplace(name, HostTensor(t.type(), {t.elements() + 1})).first->second;
          std::memset(b.raw(), 0x5a, b.bytes()); // stale bytes: the op must write every element
          views[name] = TensorView{static_cast<char *>(b.raw()) + offset * dsl::dtypeBytes(t.type()), t.type(), t.dims()};
        }
        ASSERT_GE(c.expected.at("permuted_tokens_grad").bytes(), size_t(4) << 20) << "below the streaming threshold";
        kernel.launch(views, nullptr, c.attrs);
        for (auto &[name, t] : c.expected) {
          const auto *got = static_cast<const uint8_t *>(views[name].data);
          std::vector<uint8_t> bytes(got, got + t.bytes());
          auto [it, isFirst] = first.emplace(name, bytes);
          EXPECT_TRUE(isFirst || it->second == bytes) << name << " differs from the first run's";
          if (!c.bounds.count(name)) {
            EXPECT_EQ(std::memcmp(got, t.raw(), t.bytes()), 0) << name << " differs from the reference";
            continue;
          }
          HostTensor copy(t.type(), t.dims());
          std::memcpy(copy.raw(), got, t.bytes());
          auto [error, allowed] = outputError(c, name, copy);
          EXPECT_GE(error, 0) << name << ": NaN where the reference has none";
          EXPECT_LE(error, allowed) << name;
        }
      }
    }
  }
}

/// `op` (no attributes) on the CPU or the emulated GPU, with the optimizations in `disabled` off.
static CpuRunResult runWithout(const dsl::OpDef &op, DType dtype, const std::map<std::string, TensorView> &inputs,
                               bool emulated, uint32_t disabled) {
  Schedule s;
  s.disabled = disabled;
  return emulated ? runOnDevice(op, dtype, {}, inputs, s, Target::ptx("sm_90"), CudaDriver::emulator())
                  : runOnCpu(op, dtype, {}, inputs, s);
}

// A fused row store whose guard is stricter than its dot product's condition: the sum runs at every point,
// the row only where the point's weight is positive (and the zero fill, after it, only elsewhere:
// moe-fill-uncovered-rows). CPU and emulated GPU, f32 and bf16: rows of points with a weight <= 0 are
// zero, the others copy x, and every output is the same with fusion off.
TEST(FusedRowStores, StoreOnlyWhereTheirGuardHolds) {
  const char *source = R"(op guarded<T: bf16 | f32>
  dim N: runtime tokens, H: static
  in x: T[N, H]
  in w: f32[N]
  out d: f32[N]
  out y: T[N, H]
{
  y[m, h] = T(0.0)
  for n < N {
    let s = w[n]
    d[n] = sum(j < H) (f32(x[n, j]) * s)
    if s > 0.0 {
      y[n, h] = x[n, h]
    }
  }
}
)";
  auto op = dsl::loadOpText("guarded.moe", source);
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> normal;
  const int64_t N = 37, H = 100;
  for (DType dtype : {DType::F32, DType::BF16})
    for (bool emulated : {false, true}) {
      SCOPED_TRACE(std::string(dsl::dtypeName(dtype)) + (emulated ? " ptx-emu" : " cpu"));
      HostTensor x(dtype, {N, H}), w(DType::F32, {N});
      for (int64_t i = 0; i < N * H; ++i)
        store(x, i, normal(rng));
      for (int64_t n = 0; n < N; ++n)
        store(w, n, n % 3 == 0 ? -1.0f - float(n) : n % 3 == 1 ? 0.0f : 0.5f + float(n));
      std::map<std::string, TensorView> inputs = {{"x", x.view()}, {"w", w.view()}};
      auto run = [&](uint32_t disabled) { return runWithout(*op, dtype, inputs, emulated, disabled); };
      // With the fill last (moe-fill-uncovered-rows) and first: a stray row store shows in the second.
      for (uint32_t fill : {0u, uint32_t(kFillUncoveredRows)}) {
        SCOPED_TRACE(fill ? "fill first" : "fill last");
        CpuRunResult fused = run(fill);
        expectSameBytes(fused, run(fill | kFuseRowStores));
        const HostTensor &y = fused.outputs.at("y");
        const size_t rowBytes = size_t(H) * dsl::dtypeBytes(dtype);
        for (int64_t n = 0; n < N; ++n) {
          const auto *got = static_cast<const uint8_t *>(y.raw()) + n * rowBytes;
          const auto *want = static_cast<const uint8_t *>(x.raw()) + n * rowBytes;
          if (n % 3 == 2)
            EXPECT_EQ(std::memcmp(got, want, rowBytes), 0) << "row " << n << " (weight > 0) is not x's";
          else
            EXPECT_TRUE(std::all_of(got, got + rowBytes, [](uint8_t b) { return b == 0; }))
                << "row " << n << " (weight <= 0) was written";
        }
      }
    }
}

// A fused sum that varies along the domain's vectorized index (d[n, e] scales by w[n, e]) runs j one step
// at a time inside the vector body; its row store (y[n, h] = x[n, h], the same for every e) must store one
// element a step, not a vector from j (which ran past the row, and past the buffer at its last row).
// CPU and emulated GPU (whose memory checks every access), f32 and bf16, H not a multiple of the vector.
TEST(FusedRowStores, InAVectorizedBodyStoreOneElementPerStep) {
  const char *source = R"(op vecsum<T: bf16 | f32>
  dim N: runtime tokens, E: static, H: static
  in x: T[N, H]
  in w: T[N, E]
  out d: f32[N, E]
  out y: T[N, H]
{
  for n < N, e < E {
    d[n, e] = sum(j < H) (f32(x[n, j]) * f32(w[n, e]))
    y[n, h] = x[n, h]
  }
}
)";
  auto op = dsl::loadOpText("vecsum.moe", source);
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> normal;
  const int64_t N = 23, E = 16, H = 41;
  for (DType dtype : {DType::F32, DType::BF16})
    for (bool emulated : {false, true}) {
      SCOPED_TRACE(std::string(dsl::dtypeName(dtype)) + (emulated ? " ptx-emu" : " cpu"));
      HostTensor x(dtype, {N, H}), w(dtype, {N, E});
      for (int64_t i = 0; i < N * H; ++i)
        store(x, i, normal(rng));
      for (int64_t i = 0; i < N * E; ++i)
        store(w, i, normal(rng));
      std::map<std::string, TensorView> inputs = {{"x", x.view()}, {"w", w.view()}};
      auto run = [&](uint32_t disabled) { return runWithout(*op, dtype, inputs, emulated, disabled); };
      CpuRunResult fused = run(0);
      expectSameBytes(fused, run(kFuseRowStores));
      const HostTensor &y = fused.outputs.at("y");
      EXPECT_EQ(std::memcmp(y.raw(), x.raw(), x.bytes()), 0) << "y is not a copy of x";
    }
}

// moe-native-bf16-roundings (hosts with AVX512-BF16): vcvtneps2bf16 where no lane of 16 is a NaN or
// subnormal, the exact rounding where one is. Every class of f32 rounds to the exact rounding's bits with
// the pass on and off: ties (to even, down and up), subnormals (which the instruction reads as zero), NaNs
// (quiet, signaling, with payloads: the canonical NaN), infinities, a finite value that rounds to infinity,
// zeros of both signs. Row 0 is all normal (the instruction's path); each later row has one special value
// among normal ones, in a different lane, so every vector that holds one takes the exact path.
TEST(NativeBf16Roundings, EveryClassOfF32RoundsExactly) {
  auto op = dsl::loadOpText("round.moe", "op round<T: bf16>\n  dim N: runtime, H: static\n  in x: f32[N, H]\n"
                                         "  out y: T[N, H]\n{\n  y[n, h] = T(x[n, h])\n}\n");
  const uint32_t specials[] = {0x00000001u, 0x007fffffu, 0x00008000u, 0x80400000u, 0x7fc00000u, 0x7f800001u,
                               0xffc12345u, 0x7fffffffu, 0x7f800000u, 0xff800000u, 0x7f7fffffu, 0x3f808000u,
                               0x3f818000u, 0x3f808001u, 0x00000000u, 0x80000000u};
  const int64_t H = 64, N = 1 + int64_t(std::size(specials));
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> normal(-4.0f, 4.0f);
  HostTensor x(DType::F32, {N, H});
  auto *bits = static_cast<uint32_t *>(x.raw());
  for (int64_t i = 0; i < N * H; ++i) {
    float v = normal(rng);
    std::memcpy(&bits[i], &v, 4);
  }
  for (size_t i = 0; i < std::size(specials); ++i)
    bits[(1 + i) * H + (i * 7) % H] = specials[i];
  auto run = [&](uint32_t disabled) {
    Schedule s;
    s.disabled = disabled;
    return runOnCpu(*op, DType::BF16, {}, {{"x", x.view()}}, s);
  };
  CpuRunResult on = run(0), off = run(kNativeBf16Roundings);
  const auto *y = static_cast<const uint16_t *>(on.outputs.at("y").raw());
  const auto *exact = static_cast<const uint16_t *>(off.outputs.at("y").raw());
  for (int64_t i = 0; i < N * H; ++i) {
    float v;
    std::memcpy(&v, &bits[i], 4);
    ASSERT_EQ(y[i], exact[i]) << "element " << i << ", f32 bits " << std::hex << bits[i];
    if (!std::isnan(v))
      ASSERT_EQ(y[i], floatToBf16(v)) << "element " << i << ", f32 bits " << std::hex << bits[i];
    else
      ASSERT_TRUE(std::isnan(bf16ToFloat(y[i]))) << "element " << i;
  }
}
