//===- InitRoutingV2GradTest.cpp - moe_init_routing_v2_grad through the CPU JIT -===//
//
// Spec §3.2 (B2): grad_x[n] = sum over k < K, in order, of the f32 rows grad_expanded_x[r] with
// r = expanded_row_idx[n*K + k], skipping r == -1 in drop/pad mode and r >= active_num in active mode;
// accumulated in f32 from +0.0 and rounded once to the dtype (RNE). The kernel sums in the same order,
// so every comparison here is bit-exact (any NaN equals any NaN).
//
// Random tests print their seed (SCOPED_TRACE); set MOEC_TEST_SEED=<n> to replay one.
//===----------------------------------------------------------------------===//
#include "OpTestUtil.h"

#include "moec/compiler/Pipeline.h"
#include "moec/jit/CpuRun.h"
#include "moec/ops/BuiltinOps.h"
#include "moec/runtime/Binding.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <numeric>
#include <tuple>

// Readable test parameters in gtest / ctest output.
namespace moec {
static void PrintTo(const Schedule &s, std::ostream *os) { *os << s.str(); }
} // namespace moec

namespace moec::test {
namespace {

const char *kOp = "moe_init_routing_v2_grad";
const char *kGrad = "grad_expanded_x";
const char *kIdx = "expanded_row_idx";
const char *kOut = "grad_x";

const dsl::OpDef &op() {
  static std::unique_ptr<dsl::OpDef> def = loadOp(kOp);
  return *def;
}


enum class Mode { Dropless, Active, DropPad };

const char *modeName(Mode m) {
  switch (m) {
  case Mode::Dropless: return "dropless";
  case Mode::Active: return "active";
  case Mode::DropPad: return "droppad";
  }
  return "?";
}

void PrintTo(Mode m, std::ostream *os) { *os << modeName(m); }

//===----------------------------------------------------------------------===//
// The reference: spec §3.2 pseudo-code, in plain C++.
//===----------------------------------------------------------------------===//

/// grad: [R, H] or [E, C, H] (addressed as flat rows); idx: [N*K] i32. Returns [N, H] in grad's dtype.
TestTensor reference(const TestTensor &grad, const TestTensor &idx, int64_t K, int64_t dropPadMode,
                     int64_t activeNum) {
  const int64_t H = grad.shape.back();
  const int64_t N = idx.elements() / K;
  TestTensor out(grad.dtype, {N, H});
  std::vector<float> acc(static_cast<size_t>(H));
  for (int64_t n = 0; n < N; ++n) {
    std::fill(acc.begin(), acc.end(), 0.0f); // gx = zeros_fp32(N, H)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t r = idx.getI32(n * K + k);
      if (dropPadMode == 1 && r == -1)
        continue;
      if (dropPadMode == 0 && activeNum > 0 && r >= activeNum)
        continue;
      for (int64_t h = 0; h < H; ++h)
        acc[h] += grad.getF32(r * H + h); // gx[n] += fp32(rows[r])
    }
    for (int64_t h = 0; h < H; ++h)
      out.setF32(n * H + h, acc[h]); // cast(gx, dtype): one RNE rounding
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Problems: valid routing data as the forward op B1 builds it.
//===----------------------------------------------------------------------===//

struct Problem {
  Mode mode = Mode::Dropless;
  int64_t N = 0, K = 0, H = 0;
  int64_t activeNum = 0; // active mode
  int64_t E = 0, C = 0;  // drop/pad mode
  TestTensor grad, idx;

  int64_t dropPadMode() const { return mode == Mode::DropPad ? 1 : 0; }
  std::map<std::string, int64_t> attrs() const {
    return {{"top_k", K}, {"drop_pad_mode", dropPadMode()}, {"active_num", activeNum}};
  }
  std::map<std::string, TensorView> inputs() {
    return {{kGrad, grad.view()}, {kIdx, idx.view()}};
  }
  std::string describe() const {
    std::string s = std::string(modeName(mode)) + " " + typeName(grad.dtype) + " N=" + std::to_string(N) +
                    " K=" + std::to_string(K) + " H=" + std::to_string(H);
    if (mode == Mode::Active)
      s += " active_num=" + std::to_string(activeNum);
    if (mode == Mode::DropPad)
      s += " E=" + std::to_string(E) + " C=" + std::to_string(C);
    return s + " grad " + shapeString(grad.shape);
  }
  TestTensor expected() const { return reference(grad, idx, K, dropPadMode(), activeNum); }
};

std::vector<int32_t> randomPermutation(int64_t n, std::mt19937 &rng) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  std::shuffle(p.begin(), p.end(), rng);
  return p;
}

/// B1's drop/pad expanded_row_idx (ref_impl.init_routing_v2): a stable sort of the flat (n, k) slots by
/// expert; each slot gets row e*C + rank within its expert, or -1 once the expert has C rows.
std::vector<int32_t> dropPadRowIdx(const std::vector<int32_t> &experts, int64_t E, int64_t C) {
  // Stable argsort by expert: sorting (expert, j) pairs keeps ties in ascending j.
  std::vector<std::pair<int32_t, int32_t>> keyed(experts.size());
  for (size_t j = 0; j < experts.size(); ++j)
    keyed[j] = {experts[j], static_cast<int32_t>(j)};
  std::sort(keyed.begin(), keyed.end());
  std::vector<int32_t> sorted(experts.size());
  for (size_t i = 0; i < keyed.size(); ++i)
    sorted[i] = keyed[i].second;
  std::vector<int32_t> rowIdx(experts.size(), -1);
  std::vector<int64_t> rank(static_cast<size_t>(E), 0);
  for (int32_t j : sorted) {
    const int32_t e = experts[j];
    if (rank[e] < C)
      rowIdx[j] = static_cast<int32_t>(e * C + rank[e]);
    ++rank[e];
  }
  return rowIdx;
}


Problem makeProblem(Mode mode, DType dtype, int64_t N, int64_t K, int64_t H, std::mt19937 &rng,
                    Values values = Values::Normal) {
  Problem p;
  p.mode = mode;
  p.N = N;
  p.K = K;
  p.H = H;
  switch (mode) {
  case Mode::Dropless:
    p.idx = TestTensor::i32(randomPermutation(N * K, rng));
    p.grad = TestTensor(dtype, {N * K, H});
    break;
  case Mode::Active:
    p.idx = TestTensor::i32(randomPermutation(N * K, rng));
    p.activeNum = uniformInt(rng, 1, N * K);
    p.grad = TestTensor(dtype, {p.activeNum, H});
    break;
  case Mode::DropPad: {
    p.E = uniformInt(rng, 1, K + 3);
    p.C = uniformInt(rng, 1, N); // expertCapacity in (0, N]
    std::vector<int32_t> experts(static_cast<size_t>(N * K));
    for (int32_t &e : experts)
      e = static_cast<int32_t>(uniformInt(rng, 0, p.E - 1));
    p.idx = TestTensor::i32(dropPadRowIdx(experts, p.E, p.C));
    p.grad = TestTensor(dtype, {p.E, p.C, H});
    break;
  }
  }
  fillRandom(p.grad, rng, values);
  return p;
}

HostTensor run(Problem &p, const Schedule &schedule = {}) {
  CpuRunResult r = runOp(op(), p.grad.dtype, p.attrs(), p.inputs(), schedule);
  EXPECT_EQ(r.outputs.size(), 1u);
  return std::move(r.outputs.at(kOut));
}

/// Runs `p` and compares with the reference, bit for bit.
void checkProblem(Problem &p, const Schedule &schedule = {}) {
  SCOPED_TRACE(p.describe() + " schedule " + schedule.str());
  TestTensor expected = p.expected();
  HostTensor got = run(p, schedule);
  EXPECT_TRUE(bitsEqual(expected, got));
}

//===----------------------------------------------------------------------===//
// 1. The reference itself, on hand-computed cases.
//===----------------------------------------------------------------------===//

TEST(InitRoutingV2GradReference, FollowsSpecPseudoCode) {
  // N=2, K=2, H=1, drop/pad: row -1 skipped; active: rows >= 2 skipped.
  TestTensor g(DType::F32, {4, 1});
  for (int i = 0; i < 4; ++i)
    g.setF32(i, float(1 << i)); // 1, 2, 4, 8
  TestTensor idx = TestTensor::i32({3, -1, 0, 2});
  TestTensor dp = reference(g, idx, 2, 1, 0);
  EXPECT_EQ(dp.getF32(0), 8.0f);
  EXPECT_EQ(dp.getF32(1), 5.0f);
  TestTensor idx2 = TestTensor::i32({3, 1, 0, 2});
  TestTensor act = reference(g, idx2, 2, 0, 2); // rows 2, 3 inactive
  EXPECT_EQ(act.getF32(0), 2.0f);
  EXPECT_EQ(act.getF32(1), 1.0f);
  TestTensor dl = reference(g, idx2, 2, 0, 0);
  EXPECT_EQ(dl.getF32(0), 10.0f);
  EXPECT_EQ(dl.getF32(1), 5.0f);
  // The B1 drop/pad routing of spec §6.3: expertIdx [[0,1],[0,2],[0,1],[2,0]], C=2 and C=3.
  EXPECT_EQ(dropPadRowIdx({0, 1, 0, 2, 0, 1, 2, 0}, 3, 2), (std::vector<int32_t>{0, 2, 1, 4, -1, 3, 5, -1}));
  EXPECT_EQ(dropPadRowIdx({0, 1, 0, 2, 0, 1, 2, 0}, 3, 3), (std::vector<int32_t>{0, 3, 1, 6, 2, 4, 7, -1}));
  // One rounding at the end, not per term (bf16: 1 + 2^-8 + 2^-8 = 1 + 2^-7 exactly; per-term rounding
  // would give 1 twice, ties to even).
  TestTensor gb(DType::BF16, {3, 1});
  gb.setF32(0, 1.0f);
  gb.setF32(1, 1.0f / 256);
  gb.setF32(2, 1.0f / 256);
  TestTensor rb = reference(gb, TestTensor::i32({0, 1, 2}), 3, 0, 0);
  EXPECT_EQ(rb.getF32(0), 1.0f + 1.0f / 128);
}

//===----------------------------------------------------------------------===//
// 2. Random data: mode x dtype x K x H, fresh seeds.
//===----------------------------------------------------------------------===//

using RandomParam = std::tuple<Mode, DType, int64_t /*K*/, int64_t /*H*/>;

class InitRoutingV2GradRandom : public ::testing::TestWithParam<RandomParam> {};

TEST_P(InitRoutingV2GradRandom, MatchesReference) {
  const auto [mode, dtype, K, H] = GetParam();
  SEEDED_RNG(rng);
  // Small N for wide rows (each N is a JIT compile plus K*N*H elements); more tokens for narrow rows.
  std::vector<int64_t> Ns = H >= 1023 ? std::vector<int64_t>{1, 3, 17}
                                      : std::vector<int64_t>{1, uniformInt(rng, 2, 40), uniformInt(rng, 41, 300)};
  for (size_t i = 0; i < Ns.size(); ++i) {
    // The middle run mixes in +-0, +-Inf, NaN and huge values (sums overflow); subnormals: see below.
    Values values = i == 1 ? Values::Special : Values::Normal;
    SCOPED_TRACE(values == Values::Special ? "values: special" : "values: normal");
    Problem p = makeProblem(mode, dtype, Ns[i], K, H, rng, values);
    checkProblem(p);
  }
}

std::string randomParamName(const ::testing::TestParamInfo<RandomParam> &info) {
  const auto [mode, dtype, K, H] = info.param;
  return std::string(modeName(mode)) + "_" + typeName(dtype) + "_K" + std::to_string(K) + "_H" + std::to_string(H);
}

INSTANTIATE_TEST_SUITE_P(AllModes, InitRoutingV2GradRandom,
                         ::testing::Combine(::testing::Values(Mode::Dropless, Mode::Active, Mode::DropPad),
                                            ::testing::Values(DType::F16, DType::BF16, DType::F32),
                                            ::testing::Values<int64_t>(1, 2, 8, 64),
                                            ::testing::Values<int64_t>(1, 7, 128, 1023, 7168)),
                         randomParamName);

/// Subnormal inputs and results (its own suite, so that a flush-to-zero problem shows up by name): the
/// spec's conversions are IEEE RNE with subnormals (Half.h), and f32 accumulation is IEEE, not FTZ/DAZ.
class InitRoutingV2GradSubnormal : public ::testing::TestWithParam<RandomParam> {};

TEST_P(InitRoutingV2GradSubnormal, MatchesReference) {
  const auto [mode, dtype, K, H] = GetParam();
  SEEDED_RNG(rng);
  for (int64_t N : {int64_t{1}, int64_t{17}}) {
    Problem p = makeProblem(mode, dtype, N, K, H, rng, Values::Subnormal);
    checkProblem(p);
  }
}

INSTANTIATE_TEST_SUITE_P(Subnormals, InitRoutingV2GradSubnormal,
                         ::testing::Combine(::testing::Values(Mode::Dropless, Mode::Active, Mode::DropPad),
                                            ::testing::Values(DType::F16, DType::BF16, DType::F32),
                                            ::testing::Values<int64_t>(1, 8),
                                            ::testing::Values<int64_t>(7, 1023)),
                         randomParamName);

/// A deterministic case: single-row tokens (K=1) whose values are subnormal must come back unchanged.
TEST(InitRoutingV2GradSubnormalExact, SingleTermSubnormalsRoundTrip) {
  struct Case {
    DType dtype;
    std::vector<uint32_t> bits;
  };
  const Case cases[] = {
      {DType::BF16, {0x0041, 0x8021, 0x0001, 0x007f, 0x8062, 0x0080, 0x3f80, 0x8000}},
      {DType::F16, {0x0041, 0x8021, 0x0001, 0x03ff, 0x8062, 0x0400, 0x3c00, 0x8000}},
      {DType::F32, {0x00410000, 0x80210000, 0x00000001, 0x007fffff, 0x80620000, 0x00800000, 0x3f800000, 0x80000000}},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(typeName(c.dtype));
    Problem p;
    p.mode = Mode::Dropless;
    p.N = static_cast<int64_t>(c.bits.size());
    p.K = 1;
    p.H = 1;
    p.grad = TestTensor(c.dtype, {p.N, 1});
    for (size_t i = 0; i < c.bits.size(); ++i) {
      if (elemBytes(c.dtype) == 2)
        reinterpret_cast<uint16_t *>(p.grad.data())[i] = static_cast<uint16_t>(c.bits[i]);
      else
        reinterpret_cast<uint32_t *>(p.grad.data())[i] = c.bits[i];
    }
    std::vector<int32_t> idx(c.bits.size());
    std::iota(idx.begin(), idx.end(), 0);
    p.idx = TestTensor::i32(idx);
    // Expected: each token is its one row; -0.0 becomes +0.0 (0.0 + -0.0), everything else is unchanged.
    TestTensor expected = p.grad;
    for (size_t i = 0; i < c.bits.size(); ++i)
      if (c.bits[i] == (elemBytes(c.dtype) == 2 ? 0x8000u : 0x80000000u))
        expected.setF32(static_cast<int64_t>(i), 0.0f);
    EXPECT_TRUE(bitsEqual(expected, p.expected())) << "(reference)";
    EXPECT_TRUE(bitsEqual(expected, run(p))) << "(kernel)";
  }
}

//===----------------------------------------------------------------------===//
// Schedule paths: scalar (vector=1), no unroll, unroll wider than / not dividing K, explicit vectors.
//===----------------------------------------------------------------------===//

using ScheduleParam = std::tuple<Schedule, Mode>;

class InitRoutingV2GradSchedule : public ::testing::TestWithParam<ScheduleParam> {};

TEST_P(InitRoutingV2GradSchedule, MatchesReference) {
  const auto [schedule, mode] = GetParam();
  SEEDED_RNG(rng);
  struct Shape {
    DType dtype;
    int64_t N, K, H;
  };
  const Shape shapes[] = {
      {DType::F32, 5, 8, 1023}, {DType::BF16, 33, 64, 7}, {DType::F16, 9, 2, 128}, {DType::BF16, 4, 3, 7168}};
  for (const Shape &s : shapes) {
    Problem p = makeProblem(mode, s.dtype, s.N, s.K, s.H, rng);
    checkProblem(p, schedule);
  }
}

Schedule sched(int64_t vector, int64_t unroll) {
  Schedule s;
  s.vector = vector;
  s.unroll = unroll;
  return s;
}

std::string scheduleParamName(const ::testing::TestParamInfo<ScheduleParam> &info) {
  const auto [s, mode] = info.param;
  return std::string(modeName(mode)) + "_v" + std::to_string(s.vector) + "_u" + std::to_string(s.unroll);
}

INSTANTIATE_TEST_SUITE_P(Forced, InitRoutingV2GradSchedule,
                         ::testing::Combine(::testing::Values(sched(1, 0), sched(0, 1), sched(1, 1), sched(0, 64),
                                                              sched(0, 3), sched(8, 0), sched(2, 5)),
                                            ::testing::Values(Mode::Dropless, Mode::Active, Mode::DropPad)),
                         scheduleParamName);

//===----------------------------------------------------------------------===//
// 3. Spec §6.3 vectors (tests/data/test_vectors.json) and the doc example.
//===----------------------------------------------------------------------===//

class InitRoutingV2GradVectors : public ::testing::TestWithParam<std::tuple<std::string, DType>> {};

TEST_P(InitRoutingV2GradVectors, MatchesSpec) {
  const auto [name, dtype] = GetParam();
  const nlohmann::json &c = vectors().at("B_init_routing_v2").at("cases").at(name);
  const nlohmann::json &g = c.at("grad");
  const int64_t K = g.at("topK"), dpm = c.at("dropPadMode"), activeNum = c.at("activeNum");
  const auto rows = g.at("gradExpandedX_rows").get<std::vector<std::vector<double>>>();
  const auto gradX = g.at("gradX").get<std::vector<std::vector<double>>>();
  const auto rowIdx = c.at("expandedRowIdx").get<std::vector<int32_t>>();
  const int64_t R = static_cast<int64_t>(rows.size()), H = static_cast<int64_t>(rows.at(0).size());

  Problem p;
  p.mode = dpm == 1 ? Mode::DropPad : activeNum > 0 ? Mode::Active : Mode::Dropless;
  p.K = K;
  p.H = H;
  p.N = static_cast<int64_t>(rowIdx.size()) / K;
  p.activeNum = activeNum;
  if (dpm == 1) {
    p.E = c.at("expertNum");
    p.C = c.at("expertCapacity");
    ASSERT_LE(R, p.E * p.C);
    p.grad = TestTensor(dtype, {p.E, p.C, H});
    // The vectors list the rows up to the last referenced one; the rest are never read: make them NaN.
    for (int64_t i = R * H; i < p.grad.elements(); ++i)
      p.grad.setF32(i, NAN);
  } else {
    p.grad = TestTensor(dtype, {R, H});
  }
  for (int64_t r = 0; r < R; ++r)
    for (int64_t h = 0; h < H; ++h)
      p.grad.setF32(r * H + h, static_cast<float>(rows[r][h]));
  p.idx = TestTensor::i32(rowIdx);

  TestTensor expected(dtype, {p.N, H});
  ASSERT_EQ(static_cast<int64_t>(gradX.size()), p.N);
  for (int64_t n = 0; n < p.N; ++n)
    for (int64_t h = 0; h < H; ++h)
      expected.setF32(n * H + h, static_cast<float>(gradX[n][h]));
  SCOPED_TRACE(p.describe());
  // The reference agrees with the spec's numbers, and so does the kernel.
  EXPECT_TRUE(bitsEqual(expected, p.expected())) << "(reference vs spec)";
  EXPECT_TRUE(bitsEqual(expected, run(p))) << "(kernel vs spec)";
}

INSTANTIATE_TEST_SUITE_P(Spec63, InitRoutingV2GradVectors,
                         ::testing::Combine(::testing::Values("dropless", "active5", "droppad_C2", "droppad_C3"),
                                            ::testing::Values(DType::F32, DType::BF16)),
                         [](const auto &info) {
                           return std::get<0>(info.param) + "_" + typeName(std::get<1>(info.param));
                         });

TEST(InitRoutingV2GradVectors, DocExampleF32) {
  Problem p;
  p.mode = Mode::Dropless;
  p.N = 2;
  p.K = 2;
  p.H = 2;
  p.grad = TestTensor(DType::F32, {4, 2});
  const float gE[4] = {0.1f, 0.3f, 0.2f, 0.4f};
  for (int r = 0; r < 4; ++r)
    for (int h = 0; h < 2; ++h)
      p.grad.setF32(r * 2 + h, gE[r]);
  p.idx = TestTensor::i32({2, 0, 1, 3});
  HostTensor got = run(p);
  ASSERT_EQ(got.dims(), (std::vector<int64_t>{2, 2}));
  const float *out = static_cast<const float *>(got.raw());
  // Token 1 = rows 1 and 3 summed in f32 from the f32 inputs: 0.70000005, not the decimal 0.7 a
  // reference in double (or a kernel summing in double) would give.
  EXPECT_NE(out[2], 0.7f);
  for (int h = 0; h < 2; ++h) {
    const float point3 = 0.3f;
    EXPECT_EQ(rawBits(DType::F32, out, h), rawBits(DType::F32, &point3, 0)) << "h=" << h;
    const float point7 = 0.70000005f;
    EXPECT_EQ(rawBits(DType::F32, out, 2 + h), rawBits(DType::F32, &point7, 0)) << "h=" << h;
  }
  EXPECT_TRUE(bitsEqual(p.expected(), got));
}

//===----------------------------------------------------------------------===//
// 4. Bad calls through the API.
//===----------------------------------------------------------------------===//

/// Calls the op and expects an ArgumentError (or, where `compileErrorOk`, a CompileError) whose message
/// contains every one of `substrings`.
void expectError(DType dtype, const std::map<std::string, int64_t> &attrs,
                 const std::map<std::string, TensorView> &inputs, const std::vector<std::string> &substrings,
                 bool compileErrorOk = false) {
  std::string message, kind;
  try {
    runOp(op(), dtype, attrs, inputs);
    ADD_FAILURE() << "no error thrown; expected one containing '" << substrings.at(0) << "'";
    return;
  } catch (const ArgumentError &e) {
    kind = "ArgumentError";
    message = e.what();
  } catch (const CompileError &e) {
    kind = "CompileError";
    message = e.what();
  } catch (const std::exception &e) {
    ADD_FAILURE() << "unexpected exception type: " << e.what();
    return;
  }
  if (kind == "CompileError" && !compileErrorOk)
    ADD_FAILURE() << "expected an ArgumentError, got a CompileError: " << message;
  EXPECT_NE(message.find(kOp), std::string::npos) << "the message should name the op: " << message;
  for (const std::string &s : substrings)
    EXPECT_NE(message.find(s), std::string::npos) << "expected '" << s << "' in: " << message;
}

struct BadCall {
  TestTensor grad, idx;
  std::map<std::string, int64_t> attrs;
  BadCall(std::vector<int64_t> gradShape, std::vector<int32_t> rowIdx, int64_t K, int64_t dpm = 0,
          int64_t activeNum = 0, DType dtype = DType::F32)
      : grad(dtype, std::move(gradShape)), idx(TestTensor::i32(rowIdx)),
        attrs{{"top_k", K}, {"drop_pad_mode", dpm}, {"active_num", activeNum}} {}
  std::map<std::string, TensorView> inputs() { return {{kGrad, grad.view()}, {kIdx, idx.view()}}; }
};

TEST(InitRoutingV2GradErrors, TopKZero) {
  BadCall c({4, 2}, {0, 1, 2, 3}, 0);
  expectError(DType::F32, c.attrs, c.inputs(), {"topK must be > 0"}, /*compileErrorOk=*/true);
}

TEST(InitRoutingV2GradErrors, TopKNegative) {
  BadCall c({4, 2}, {0, 1, 2, 3}, -2);
  expectError(DType::F32, c.attrs, c.inputs(), {"topK must be > 0"}, /*compileErrorOk=*/true);
}

TEST(InitRoutingV2GradErrors, DropPadModeTwo) {
  BadCall c({4, 2}, {0, 1, 2, 3}, 2, 2);
  expectError(DType::F32, c.attrs, c.inputs(), {"dropPadMode must be 0 or 1"}, /*compileErrorOk=*/true);
}

TEST(InitRoutingV2GradErrors, TwoDimGradInDropPadMode) {
  BadCall c({6, 2}, {0, 2, 1, 4, -1, 3, 5, -1}, 2, 1);
  expectError(DType::F32, c.attrs, c.inputs(), {"gradExpandedX must be 3-D in drop/pad mode, else 2-D"});
}

TEST(InitRoutingV2GradErrors, ThreeDimGradInDroplessMode) {
  BadCall c({2, 4, 2}, {0, 4, 1, 6, 2, 5, 7, 3}, 2);
  expectError(DType::F32, c.attrs, c.inputs(), {"gradExpandedX must be 3-D in drop/pad mode, else 2-D"});
}

TEST(InitRoutingV2GradErrors, ThreeDimGradInActiveMode) {
  BadCall c({1, 5, 2}, {0, 4, 1, 6, 2, 5, 7, 3}, 2, 0, 5);
  expectError(DType::F32, c.attrs, c.inputs(), {"gradExpandedX must be 3-D in drop/pad mode, else 2-D"});
}

TEST(InitRoutingV2GradErrors, OneDimGrad) {
  BadCall c({8}, {0, 4, 1, 6, 2, 5, 7, 3}, 2);
  expectError(DType::F32, c.attrs, c.inputs(), {"tensor 'grad_expanded_x'", "at least 2 dims", "got 1 dims [8]"});
}

TEST(InitRoutingV2GradErrors, IndexLengthNotMultipleOfK) {
  BadCall c({7, 2}, {0, 1, 2, 3, 4, 5, 6}, 2);
  expectError(DType::F32, c.attrs, c.inputs(), {"tensor 'expanded_row_idx' dim 0", "multiple of 2", "got 7"});
}

TEST(InitRoutingV2GradErrors, DroplessGradRowsNotNK) {
  BadCall c({7, 2}, {0, 4, 1, 6, 2, 5, 7, 3}, 2);
  expectError(DType::F32, c.attrs, c.inputs(), {"gradExpandedX must have N*K rows when dropless"});
  BadCall more({9, 2}, {0, 4, 1, 6, 2, 5, 7, 3}, 2);
  expectError(DType::F32, more.attrs, more.inputs(), {"gradExpandedX must have N*K rows when dropless"});
}

TEST(InitRoutingV2GradErrors, ActiveGradRowsNotActiveNum) {
  BadCall c({4, 2}, {0, 4, 1, 6, 2, 5, 7, 3}, 2, 0, 5);
  expectError(DType::F32, c.attrs, c.inputs(), {"gradExpandedX must have activeNum rows in active mode"});
  BadCall full({8, 2}, {0, 4, 1, 6, 2, 5, 7, 3}, 2, 0, 5);
  expectError(DType::F32, full.attrs, full.inputs(), {"gradExpandedX must have activeNum rows in active mode"});
}

TEST(InitRoutingV2GradErrors, NegativeActiveNum) {
  BadCall c({8, 2}, {0, 4, 1, 6, 2, 5, 7, 3}, 2, 0, -1);
  expectError(DType::F32, c.attrs, c.inputs(), {"activeNum must be >= 0"});
}

TEST(InitRoutingV2GradErrors, IndexOutOfRangeDropless) {
  BadCall neg({8, 2}, {0, 4, 1, -1, 2, 5, 7, 3}, 2);
  expectError(DType::F32, neg.attrs, neg.inputs(),
              {"tensor 'expanded_row_idx' element 3 is -1", "outside the valid range [0, 8)"});
  BadCall high({8, 2}, {0, 4, 1, 6, 2, 5, 7, 8}, 2);
  expectError(DType::F32, high.attrs, high.inputs(),
              {"tensor 'expanded_row_idx' element 7 is 8", "outside the valid range [0, 8)"});
}

TEST(InitRoutingV2GradErrors, IndexOutOfRangeActive) {
  // Rows >= active_num are legal (skipped); the index range is still [0, N*K).
  BadCall neg({5, 2}, {0, 4, 1, 6, -1, 5, 7, 3}, 2, 0, 5);
  expectError(DType::F32, neg.attrs, neg.inputs(),
              {"tensor 'expanded_row_idx' element 4 is -1", "outside the valid range [0, 8)"});
  BadCall high({5, 2}, {0, 4, 1, 6, 2, 5, 8, 3}, 2, 0, 5);
  expectError(DType::F32, high.attrs, high.inputs(),
              {"tensor 'expanded_row_idx' element 6 is 8", "outside the valid range [0, 8)"});
}

TEST(InitRoutingV2GradErrors, IndexOutOfRangeDropPad) {
  // E=3, C=2: rows [-1, 6).
  BadCall high({3, 2, 2}, {0, 2, 1, 4, -1, 3, 6, -1}, 2, 1);
  expectError(DType::F32, high.attrs, high.inputs(),
              {"tensor 'expanded_row_idx' element 6 is 6", "outside the valid range [-1, 6)"});
  BadCall low({3, 2, 2}, {0, 2, 1, 4, -2, 3, 5, -1}, 2, 1);
  expectError(DType::F32, low.attrs, low.inputs(),
              {"tensor 'expanded_row_idx' element 4 is -2", "outside the valid range [-1, 6)"});
}

TEST(InitRoutingV2GradErrors, WrongInputDtype) {
  BadCall grad({8, 2}, {0, 4, 1, 6, 2, 5, 7, 3}, 2, 0, 0, DType::F16);
  expectError(DType::F32, grad.attrs, grad.inputs(), {"tensor 'grad_expanded_x'", "expected dtype f32, got f16"});
  expectError(DType::BF16, grad.attrs, grad.inputs(), {"tensor 'grad_expanded_x'", "expected dtype bf16, got f16"});
  BadCall idx({8, 2}, {0, 4, 1, 6, 2, 5, 7, 3}, 2);
  idx.idx.dtype = DType::F32; // same byte size, wrong type
  expectError(DType::F32, idx.attrs, idx.inputs(), {"tensor 'expanded_row_idx'", "expected dtype i32, got f32"});
}

TEST(InitRoutingV2GradErrors, UnsupportedOpDtype) {
  BadCall c({8, 2}, {0, 4, 1, 6, 2, 5, 7, 3}, 2, 0, 0, DType::I32);
  expectError(DType::I32, c.attrs, c.inputs(), {"dtype i32 is not supported"});
}

TEST(InitRoutingV2GradErrors, MissingInput) {
  BadCall c({8, 2}, {0, 4, 1, 6, 2, 5, 7, 3}, 2);
  expectError(DType::F32, c.attrs, {{kGrad, c.grad.view()}}, {"input tensor 'expanded_row_idx' is missing"});
  expectError(DType::F32, c.attrs, {{kIdx, c.idx.view()}}, {"input tensor 'grad_expanded_x' is missing"});
}

TEST(InitRoutingV2GradErrors, UnknownTensor) {
  BadCall c({8, 2}, {0, 4, 1, 6, 2, 5, 7, 3}, 2);
  auto inputs = c.inputs();
  inputs["probs"] = c.grad.view();
  expectError(DType::F32, c.attrs, inputs, {"unknown tensor 'probs'"});
  auto withOut = c.inputs();
  withOut[kOut] = c.grad.view();
  expectError(DType::F32, c.attrs, withOut, {"'grad_x' is an output, not an input"});
}

TEST(InitRoutingV2GradErrors, UnknownAttribute) {
  BadCall c({8, 2}, {0, 4, 1, 6, 2, 5, 7, 3}, 2);
  auto attrs = c.attrs;
  attrs["expert_capacity"] = 2;
  expectError(DType::F32, attrs, c.inputs(), {"unknown attribute 'expert_capacity'"});
  // A misspelt name gets the nearest one, runtime attributes included.
  attrs = c.attrs;
  attrs["activenum"] = 0;
  expectError(DType::F32, attrs, c.inputs(), {"unknown attribute 'activenum'; did you mean 'active_num'?"});
}

TEST(InitRoutingV2GradErrors, MissingRequiredAttribute) {
  BadCall c({8, 2}, {0, 4, 1, 6, 2, 5, 7, 3}, 2);
  expectError(DType::F32, {{"drop_pad_mode", 0}}, c.inputs(), {"attribute 'top_k' is required"});
}

TEST(InitRoutingV2GradErrors, NonContiguousInput) {
  BadCall c({8, 2}, {0, 4, 1, 6, 2, 5, 7, 3}, 2);
  auto inputs = c.inputs();
  inputs[kGrad].strides = {1, 8}; // column-major
  expectError(DType::F32, c.attrs, inputs, {"tensor 'grad_expanded_x' is not contiguous"});
  auto idxInputs = c.inputs();
  idxInputs[kIdx].shape = {4};
  idxInputs[kIdx].strides = {2}; // every other element
  expectError(DType::F32, c.attrs, idxInputs, {"tensor 'expanded_row_idx' is not contiguous"});
}

TEST(InitRoutingV2GradErrors, ExplicitRowMajorStridesAreAccepted) {
  Problem p;
  std::mt19937 rng(1);
  p = makeProblem(Mode::Dropless, DType::F32, 4, 2, 3, rng);
  auto inputs = p.inputs();
  inputs[kGrad].strides = {3, 1};
  CpuRunResult r = runOp(op(), DType::F32, p.attrs(), inputs);
  EXPECT_TRUE(bitsEqual(p.expected(), r.outputs.at(kOut)));
}

TEST(InitRoutingV2GradErrors, TopKAliasK) {
  // The attribute's inner name works as an alias of the public one.
  std::mt19937 rng(2);
  Problem p = makeProblem(Mode::Dropless, DType::F32, 3, 2, 5, rng);
  CpuRunResult r = runOp(op(), DType::F32, {{"K", 2}}, p.inputs());
  EXPECT_TRUE(bitsEqual(p.expected(), r.outputs.at(kOut)));
}

//===----------------------------------------------------------------------===//
// 5. Edge cases.
//===----------------------------------------------------------------------===//

TEST(InitRoutingV2GradEdge, OneTokenOneExpertOneElement) {
  SEEDED_RNG(rng);
  for (Mode mode : {Mode::Dropless, Mode::Active, Mode::DropPad})
    for (DType dtype : {DType::F16, DType::BF16, DType::F32}) {
      Problem p = makeProblem(mode, dtype, 1, 1, 1, rng);
      checkProblem(p);
      // With N=K=H=1 every routing keeps the single row: the output is that row's value, bit for bit
      // (random values are never -0.0, which would come back as +0.0).
      HostTensor got = run(p);
      EXPECT_EQ(rawBits(dtype, got.raw(), 0), rawBits(dtype, p.grad.data(), p.idx.getI32(0))) << modeName(mode);
    }
}

TEST(InitRoutingV2GradEdge, AllDroppedGivesPositiveZero) {
  SEEDED_RNG(rng);
  for (DType dtype : {DType::F16, DType::BF16, DType::F32}) {
    Problem p;
    p.mode = Mode::DropPad;
    p.N = 5;
    p.K = 3;
    p.H = 19;
    p.E = 2;
    p.C = 2;
    p.grad = TestTensor(dtype, {p.E, p.C, p.H});
    fillRandom(p.grad, rng, Values::Special); // never read
    p.idx = TestTensor::i32(std::vector<int32_t>(static_cast<size_t>(p.N * p.K), -1));
    SCOPED_TRACE(p.describe());
    HostTensor got = run(p);
    ASSERT_EQ(got.dims(), (std::vector<int64_t>{5, 19}));
    for (int64_t i = 0; i < got.elements(); ++i)
      ASSERT_EQ(rawBits(dtype, got.raw(), i), 0u) << "element " << i << " is not +0.0";
    EXPECT_TRUE(bitsEqual(p.expected(), got));
  }
}

TEST(InitRoutingV2GradEdge, SomeTokensAllDropped) {
  // Expert 0 gets everything with C=1: one (n,k) slot survives, all other tokens are all -1 -> +0.0.
  SEEDED_RNG(rng);
  for (DType dtype : {DType::F16, DType::BF16, DType::F32}) {
    Problem p;
    p.mode = Mode::DropPad;
    p.N = 6;
    p.K = 2;
    p.H = 9;
    p.E = 1;
    p.C = 1;
    p.idx = TestTensor::i32(dropPadRowIdx(std::vector<int32_t>(12, 0), 1, 1));
    p.grad = TestTensor(dtype, {1, 1, 9});
    fillRandom(p.grad, rng);
    checkProblem(p);
  }
}

TEST(InitRoutingV2GradEdge, NegativeZeroInputsSumToPositiveZero) {
  // The sum starts from +0.0 (zeros_fp32): +0 + -0 = +0, so all -0.0 rows give +0.0.
  for (DType dtype : {DType::F16, DType::BF16, DType::F32})
    for (int64_t K : {1, 2, 8}) {
      Problem p;
      p.mode = Mode::Dropless;
      p.N = 3;
      p.K = K;
      p.H = 11;
      p.grad = TestTensor(dtype, {3 * K, 11});
      for (int64_t i = 0; i < p.grad.elements(); ++i)
        p.grad.setF32(i, -0.0f);
      std::mt19937 rng(static_cast<uint32_t>(K));
      p.idx = TestTensor::i32(randomPermutation(3 * K, rng));
      SCOPED_TRACE(p.describe());
      TestTensor expected = p.expected();
      for (int64_t i = 0; i < expected.elements(); ++i)
        ASSERT_EQ(rawBits(dtype, expected.data(), i), 0u);
      EXPECT_TRUE(bitsEqual(expected, run(p)));
    }
}

TEST(InitRoutingV2GradEdge, ActiveNumKeepsOnlyFewRows) {
  SEEDED_RNG(rng);
  for (DType dtype : {DType::F16, DType::BF16, DType::F32})
    for (int64_t activeNum : {int64_t{1}, int64_t{2}, int64_t{7}}) {
      Problem p;
      p.mode = Mode::Active;
      p.N = 50;
      p.K = 4;
      p.H = 33;
      p.activeNum = activeNum;
      p.idx = TestTensor::i32(randomPermutation(p.N * p.K, rng));
      p.grad = TestTensor(dtype, {activeNum, p.H});
      fillRandom(p.grad, rng);
      SCOPED_TRACE(p.describe());
      TestTensor expected = p.expected();
      HostTensor got = run(p);
      EXPECT_TRUE(bitsEqual(expected, got));
      // Tokens none of whose rows are < active_num are exactly +0.0.
      int64_t zeroTokens = 0;
      for (int64_t n = 0; n < p.N; ++n) {
        bool live = false;
        for (int64_t k = 0; k < p.K; ++k)
          live |= p.idx.getI32(n * p.K + k) < activeNum;
        if (live)
          continue;
        ++zeroTokens;
        for (int64_t h = 0; h < p.H; ++h)
          ASSERT_EQ(rawBits(dtype, got.raw(), n * p.H + h), 0u) << "token " << n << " h " << h;
      }
      EXPECT_GE(zeroTokens, p.N - activeNum);
    }
}

TEST(InitRoutingV2GradEdge, ActiveNumEqualsNK) {
  // active_num == N*K: active mode where nothing is skipped; same result as dropless.
  SEEDED_RNG(rng);
  Problem p = makeProblem(Mode::Dropless, DType::BF16, 7, 3, 40, rng);
  TestTensor dropless = p.expected();
  HostTensor a = run(p);
  p.mode = Mode::Active;
  p.activeNum = p.N * p.K;
  EXPECT_TRUE(bitsEqual(dropless, run(p)));
  EXPECT_TRUE(bitsEqual(dropless, a));
}

TEST(InitRoutingV2GradEdge, ManyRowsAcrossThreads) {
  // 4099 tokens: the launcher splits the rows over the thread pool; every row must match.
  SEEDED_RNG(rng);
  for (Mode mode : {Mode::Dropless, Mode::Active, Mode::DropPad})
    for (DType dtype : {DType::F16, DType::BF16, DType::F32})
      for (int64_t K : {1, 8}) {
        Problem p = makeProblem(mode, dtype, 4099, K, 7, rng);
        checkProblem(p);
      }
}

TEST(InitRoutingV2GradEdge, RepeatedRunsAreDeterministic) {
  SEEDED_RNG(rng);
  Problem p = makeProblem(Mode::DropPad, DType::BF16, 1000, 8, 64, rng);
  HostTensor a = run(p);
  HostTensor b = run(p);
  TestTensor aCopy(DType::BF16, a.dims());
  std::memcpy(aCopy.data(), a.raw(), a.bytes());
  EXPECT_TRUE(bitsEqual(aCopy, b)) << "(second run vs first)";
  EXPECT_TRUE(bitsEqual(p.expected(), a));
}

TEST(InitRoutingV2GradEdge, OutputIsFreshAndInputsUntouched) {
  SEEDED_RNG(rng);
  Problem p = makeProblem(Mode::Active, DType::F32, 20, 4, 13, rng);
  std::vector<unsigned char> gradBefore = p.grad.bytes, idxBefore = p.idx.bytes;
  checkProblem(p);
  EXPECT_EQ(p.grad.bytes, gradBefore);
  EXPECT_EQ(p.idx.bytes, idxBefore);
}

} // namespace
} // namespace moec::test
