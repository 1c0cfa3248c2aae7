//===- MoeUnpermuteTest.cpp - moe_unpermute (Paddle) through the CPU JIT -===//
//
// Spec §4.2 (C2): each token's hidden state combines its expert rows in ascending expert order:
//   using_mix_precision=1: f32 accumulation from +0.0 (weighted: acc = fma(f32(x), prob, acc)), one RNE rounding;
//   using_mix_precision=0: accumulation in the dtype, RNE rounding after every add (weighted: after every fma);
//   paddle_single_row_copy=1: a token with exactly one contributing row gets that row's raw bits (Paddle quirk);
//   no contributing row: +0.0.
// expert_prob_topk[t, k] = token_prob_unzipped[rowmap[t, routemap[t, k]]] (0 for -1 slots), bit-exact.
// Every comparison is bit-exact. Inputs come from the C1 forward (ref_impl.paddle_moe_permute); padding rows
// of hidden_states_unzipped and their probs are NaN garbage: they must never be read.
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
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>
#include <tuple>

namespace moec::test {
namespace {

const char *kOp = "moe_unpermute";
const char *kXu = "hidden_states_unzipped";
const char *kRowmap = "zipped_expertwise_rowmap";
const char *kRoutemap = "expert_routemap_topk";
const char *kPu = "token_prob_unzipped";
const char *kOut = "hidden_states";
const char *kProbs = "expert_prob_topk";

const dsl::OpDef &op() {
  static std::unique_ptr<dsl::OpDef> def = loadOp(kOp);
  return *def;
}



struct Flags {
  bool mix = true, weighted = false, quirk = false;
  std::string str() const {
    return std::string(mix ? "mix" : "nomix") + (weighted ? "_weighted" : "_unweighted") + (quirk ? "_quirk" : "");
  }
};

struct Problem {
  DType dtype = DType::BF16;
  int64_t T = 0, E = 0, K = 0, H = 0, R = 0;
  Flags flags;
  TestTensor xu, rowmap, routemap, pu; // [R,H] dtype, [T,E] i32, [T,K] i32, [R] f32
  int64_t totalZipped = -1, numExperts = -1;

  std::map<std::string, int64_t> attrs() const {
    return {{"using_mix_precision", flags.mix},
            {"using_weighted_combine", flags.weighted},
            {"paddle_single_row_copy", flags.quirk},
            {"total_zipped_tokens", totalZipped},
            {"num_experts", numExperts}};
  }
  std::map<std::string, TensorView> inputs() {
    return {{kXu, xu.view()}, {kRowmap, rowmap.view()}, {kRoutemap, routemap.view()}, {kPu, pu.view()}};
  }
  std::string describe() const {
    return std::string(typeName(dtype)) + " " + flags.str() + " T=" + std::to_string(T) + " E=" + std::to_string(E) +
           " K=" + std::to_string(K) + " H=" + std::to_string(H) + " R=" + std::to_string(R);
  }
};

//===----------------------------------------------------------------------===//
// The reference: spec §4.2 pseudo-code, in plain C++.
//===----------------------------------------------------------------------===//

struct Expected {
  TestTensor out, probs;
};

Expected reference(const Problem &p) {
  Expected x{TestTensor(p.dtype, {p.T, p.H}), TestTensor(DType::F32, {p.T, p.K})};
  for (int64_t t = 0; t < p.T; ++t) {
    int64_t rows = 0, last = -1;
    for (int64_t e = 0; e < p.E; ++e)
      if (p.rowmap.getI32(t * p.E + e) >= 0) {
        ++rows;
        last = p.rowmap.getI32(t * p.E + e);
      }
    for (int64_t h = 0; h < p.H; ++h) {
      if (p.flags.quirk && rows == 1) { // raw bit copy of the lone row
        const size_t b = elemBytes(p.dtype);
        std::memcpy(static_cast<char *>(x.out.data()) + (t * p.H + h) * b,
                    static_cast<const char *>(p.xu.data()) + (last * p.H + h) * b, b);
        continue;
      }
      float acc = 0.0f;
      for (int64_t e = 0; e < p.E; ++e) { // ascending expert id
        const int64_t r = p.rowmap.getI32(t * p.E + e);
        if (r < 0)
          continue;
        const float v = p.xu.getF32(r * p.H + h);
        float next = p.flags.weighted ? std::fma(v, p.pu.getF32(r), acc) : acc + v;
        if (!p.flags.mix) { // accumulate in the dtype: round after every add
          TestTensor one(p.dtype, {1});
          one.setF32(0, next);
          next = one.getF32(0);
        }
        acc = next;
      }
      x.out.setF32(t * p.H + h, acc); // one rounding (exact when !mix: acc already holds a dtype value)
    }
    for (int64_t k = 0; k < p.K; ++k) {
      const int32_t e = p.routemap.getI32(t * p.K + k);
      const int64_t r = e >= 0 ? p.rowmap.getI32(t * p.E + e) : -1;
      x.probs.setF32(t * p.K + k, r >= 0 ? p.pu.getF32(r) : 0.0f);
    }
  }
  return x;
}

CpuRunResult run(Problem &p) { return runOp(op(), p.dtype, p.attrs(), p.inputs()); }

void checkProblem(Problem &p) {
  SCOPED_TRACE(p.describe());
  Expected x = reference(p);
  CpuRunResult r = run(p);
  ASSERT_EQ(r.outputs.size(), 2u);
  EXPECT_TRUE(bitsEqual(x.out, r.outputs.at(kOut))) << "(hidden_states)";
  EXPECT_TRUE(bitsEqual(x.probs, r.outputs.at(kProbs))) << "(expert_prob_topk)";
}

//===----------------------------------------------------------------------===//
// Inputs from the C1 forward (ref_impl.paddle_moe_permute).
//===----------------------------------------------------------------------===//

struct Routing {
  std::vector<int32_t> routemap; // [T, K], -1 = unused slot
  std::vector<float> probTopk;   // [T, K]
};

/// C1: per expert a block of tokens_per_expert[e] rows (tokens ascending) padded to a multiple of `align`.
/// Fills rowmap, pu (padding: NaN garbage) and returns the padding-row mask; R is the total row count.
void permuteC1(Problem &p, const Routing &rt, int64_t align, std::vector<char> &isPadding) {
  std::vector<int64_t> count(p.E, 0);
  for (int32_t e : rt.routemap)
    if (e >= 0)
      ++count[e];
  std::vector<int64_t> offset(p.E, 0);
  int64_t R = 0;
  for (int64_t e = 0; e < p.E; ++e) {
    offset[e] = R;
    R += (count[e] + align - 1) / align * align;
  }
  p.R = R;
  p.rowmap = TestTensor::i32(std::vector<int32_t>(p.T * p.E, -1));
  p.rowmap.shape = {p.T, p.E};
  p.routemap = TestTensor::i32(rt.routemap);
  p.routemap.shape = {p.T, p.K};
  p.pu = TestTensor(DType::F32, {R});
  isPadding.assign(R, 1);
  std::vector<int64_t> cnt(p.E, 0);
  for (int64_t t = 0; t < p.T; ++t)
    for (int64_t k = 0; k < p.K; ++k) {
      const int32_t e = rt.routemap[t * p.K + k];
      if (e < 0)
        continue;
      const int64_t r = offset[e] + cnt[e]++;
      p.rowmap.setI32(t * p.E + e, static_cast<int32_t>(r));
      p.pu.setF32(r, rt.probTopk[t * p.K + k]);
      isPadding[r] = 0;
    }
  for (int64_t r = 0; r < R; ++r)
    if (isPadding[r])
      p.pu.setF32(r, NAN); // C1 writes 0; garbage proves it is never read
}

Problem makeProblem(DType dtype, Flags flags, int64_t T, int64_t E, int64_t K, int64_t H, std::mt19937 &rng,
                    Values values = Values::Normal) {
  Problem p;
  p.dtype = dtype;
  p.flags = flags;
  p.T = T;
  p.E = E;
  p.K = K;
  p.H = H;
  Routing rt;
  rt.routemap.assign(T * K, -1);
  rt.probTopk.assign(T * K, 0.0f);
  std::uniform_real_distribution<float> prob(0.0f, 1.0f);
  std::vector<int> experts(E), slots(K);
  for (int64_t t = 0; t < T; ++t) {
    // Mostly min(K, E) experts, sometimes fewer (down to none); distinct experts in random slots.
    const int64_t most = std::min(K, E);
    const int64_t used = uniformInt(rng, 0, 3) ? most : uniformInt(rng, 0, most);
    std::iota(experts.begin(), experts.end(), 0);
    std::shuffle(experts.begin(), experts.end(), rng);
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng);
    for (int64_t j = 0; j < used; ++j) {
      rt.routemap[t * K + slots[j]] = experts[j];
      rt.probTopk[t * K + slots[j]] = prob(rng);
    }
  }
  const int64_t aligns[] = {1, 2, 4, 16};
  std::vector<char> isPadding;
  permuteC1(p, rt, aligns[uniformInt(rng, 0, 3)], isPadding);
  p.xu = TestTensor(dtype, {p.R, H});
  fillRandom(p.xu, rng, values); // the expert outputs
  for (int64_t r = 0; r < p.R; ++r)
    if (isPadding[r])
      for (int64_t h = 0; h < H; ++h)
        p.xu.setF32(r * H + h, NAN);
  if (uniformInt(rng, 0, 1)) { // the optional consistency attributes, given or not
    p.totalZipped = T;
    p.numExperts = E;
  }
  return p;
}

//===----------------------------------------------------------------------===//
// 1. The reference on hand-computed cases.
//===----------------------------------------------------------------------===//

TEST(MoeUnpermuteReference, RoundingModes) {
  // bf16, three rows 1, 2^-8, 2^-8 for one token: mix (f32 sum, one rounding) = 1 + 2^-7;
  // no mix (bf16 after every add): 1 + 2^-8 -> 1 (tie to even), twice -> 1.
  Problem p;
  p.dtype = DType::BF16;
  p.T = 1;
  p.E = 3;
  p.K = 3;
  p.H = 1;
  p.R = 3;
  p.xu = TestTensor(DType::BF16, {3, 1});
  p.xu.setF32(0, 1.0f);
  p.xu.setF32(1, 1.0f / 256);
  p.xu.setF32(2, 1.0f / 256);
  p.rowmap = TestTensor::i32({0, 1, 2});
  p.rowmap.shape = {1, 3};
  p.routemap = TestTensor::i32({2, -1, 0});
  p.routemap.shape = {1, 3};
  p.pu = TestTensor(DType::F32, {3});
  p.pu.setF32(0, 0.25f);
  p.pu.setF32(1, 0.5f);
  p.pu.setF32(2, 0.75f);
  EXPECT_EQ(reference(p).out.getF32(0), 1.0f + 1.0f / 128);
  EXPECT_EQ(reference(p).probs.getF32(0), 0.75f);
  EXPECT_EQ(reference(p).probs.getF32(1), 0.0f);
  EXPECT_EQ(reference(p).probs.getF32(2), 0.25f);
  p.flags.mix = false;
  EXPECT_EQ(reference(p).out.getF32(0), 1.0f);
  EXPECT_TRUE(bitsEqual(reference(p).out, run(p).outputs.at(kOut))) << "(kernel, no mix)";
  p.flags.mix = true;
  EXPECT_TRUE(bitsEqual(reference(p).out, run(p).outputs.at(kOut))) << "(kernel, mix)";
}

//===----------------------------------------------------------------------===//
// 2. Random data from the C1 forward: dtype x weighted x mix x quirk x H, over a spread of T, E, K.
//===----------------------------------------------------------------------===//

using RandomParam = std::tuple<DType, bool /*weighted*/, bool /*mix*/, bool /*quirk*/, int64_t /*H*/>;

class MoeUnpermuteRandom : public ::testing::TestWithParam<RandomParam> {};

TEST_P(MoeUnpermuteRandom, MatchesReference) {
  const auto [dtype, weighted, mix, quirk, H] = GetParam();
  SEEDED_RNG(rng);
  const int64_t Ts[] = {1, 5, 33, 300};
  int i = static_cast<int>(uniformInt(rng, 0, 3));
  for (int64_t E : {1, 3, 8, 64}) {
    const int64_t T = Ts[i++ % 4];
    std::vector<int64_t> Ks{1, 2, 8, std::min<int64_t>(E + 1, 10)}; // K may exceed E (unused slots)
    const int64_t K = Ks[uniformInt(rng, 0, 3)];
    Problem p = makeProblem(dtype, Flags{mix, weighted, quirk}, T, E, K, H, rng);
    checkProblem(p);
  }
}

std::string randomParamName(const ::testing::TestParamInfo<RandomParam> &info) {
  const auto [dtype, weighted, mix, quirk, H] = info.param;
  return std::string(typeName(dtype)) + "_" + Flags{mix, weighted, quirk}.str() + "_H" + std::to_string(H);
}

INSTANTIATE_TEST_SUITE_P(AllFlags, MoeUnpermuteRandom,
                         ::testing::Combine(::testing::Values(DType::F16, DType::BF16, DType::F32), ::testing::Bool(),
                                            ::testing::Bool(), ::testing::Bool(),
                                            ::testing::Values<int64_t>(1, 7, 128, 1023)),
                         randomParamName);

/// Special values (+-0, -0, +-Inf, NaN, huge sums overflowing) and subnormals: still bit-exact.
TEST(MoeUnpermuteSpecial, SpecialAndSubnormalValues) {
  SEEDED_RNG(rng);
  for (DType dtype : {DType::F16, DType::BF16, DType::F32})
    for (bool weighted : {false, true})
      for (bool mix : {false, true})
        for (bool quirk : {false, true})
          for (Values v : {Values::Special, Values::Subnormal}) {
            Problem p = makeProblem(dtype, Flags{mix, weighted, quirk}, 40, 6, 4, 19, rng, v);
            checkProblem(p);
          }
}

/// bf16 without mixed precision rounds after every add; moe-expand-unchecked-roundings drops the NaN case
/// of the steps' roundings of `acc + x` (a NaN there stays a NaN, and the result's rounding makes it the
/// canonical one). NaNs of every payload in the rows (0x7fff, 0xffff: the bias would carry out of a NaN
/// with its low bits set), +-Inf pairs (their sum is the CPU's default NaN), and in the weighted mode NaN
/// probs whose f32 payload fills the low bits (an fma step keeps its NaN case): the same bytes, NaNs
/// included, with the optimization on and off, and the reference's values.
TEST(MoeUnpermuteSpecial, UncheckedStepRoundingsKeepEveryBit) {
  SEEDED_RNG(rng);
  const uint16_t nanRows[] = {0x7fff, 0xffff, 0x7f81, 0xff81, 0x7fc1, 0xffc0};
  const uint32_t nanProbs[] = {0x7fffffffu, 0xffffffffu, 0x7f800001u, 0x7fc0ffffu};
  for (bool weighted : {false, true}) {
    Problem p = makeProblem(DType::BF16, Flags{false, weighted, false}, 60, 6, 4, 37, rng, Values::Special);
    SCOPED_TRACE(p.describe());
    auto *rows = static_cast<uint16_t *>(p.xu.data());
    for (int64_t r = 0; r < p.R; ++r) {
      if (std::isnan(p.pu.getF32(r)))
        continue; // a padding row: never read
      for (int64_t h = 0; h < p.H; ++h)
        if (uniformInt(rng, 0, 19) == 0)
          rows[r * p.H + h] = nanRows[uniformInt(rng, 0, 5)];
      if (weighted && uniformInt(rng, 0, 9) == 0) {
        uint32_t bits = nanProbs[uniformInt(rng, 0, 3)];
        std::memcpy(static_cast<char *>(p.pu.data()) + r * 4, &bits, 4);
      }
    }
    Schedule checked;
    checked.disabled = kUncheckedStepRoundings;
    CpuRunResult on = runOp(op(), p.dtype, p.attrs(), p.inputs());
    CpuRunResult off = runOp(op(), p.dtype, p.attrs(), p.inputs(), checked);
    const HostTensor &got = on.outputs.at(kOut), &want = off.outputs.at(kOut);
    ASSERT_EQ(got.bytes(), want.bytes());
    EXPECT_EQ(std::memcmp(got.raw(), want.raw(), got.bytes()), 0) << "the bytes differ with the NaN checks on";
    EXPECT_TRUE(bitsEqual(reference(p).out, got));
    int64_t nans = 0;
    for (int64_t i = 0; i < got.elements(); ++i)
      nans += std::isnan(loadF32(DType::BF16, got.raw(), i));
    EXPECT_GT(nans, 0) << "no NaN reached the output: the test checks nothing";
  }
}

/// The quirk flag: with exactly one contributor the raw row (bits, incl. -0.0) vs the weighted value.
TEST(MoeUnpermuteQuirk, SingleContributorRawCopy) {
  SEEDED_RNG(rng);
  for (DType dtype : {DType::F16, DType::BF16, DType::F32}) {
    Problem p = makeProblem(dtype, Flags{true, true, true}, 50, 8, 1, 9, rng); // K = 1: every token has <= 1
    // Every contributing row gets prob 0.5 and some -0.0 values.
    for (int64_t r = 0; r < p.R; ++r)
      if (!std::isnan(p.pu.getF32(r))) {
        p.pu.setF32(r, 0.5f);
        p.xu.setF32(r * p.H, -0.0f);
      }
    for (bool quirk : {true, false}) {
      p.flags.quirk = quirk;
      SCOPED_TRACE(p.describe());
      CpuRunResult r = run(p);
      EXPECT_TRUE(bitsEqual(reference(p).out, r.outputs.at(kOut)));
      for (int64_t t = 0; t < p.T; ++t) {
        int64_t row = -1;
        for (int64_t e = 0; e < p.E; ++e)
          row = std::max<int64_t>(row, p.rowmap.getI32(t * p.E + e));
        for (int64_t h = 0; h < p.H; ++h) {
          const float got = loadF32(dtype, r.outputs.at(kOut).raw(), t * p.H + h);
          if (row < 0) {
            ASSERT_EQ(rawBits(dtype, r.outputs.at(kOut).raw(), t * p.H + h), 0u) << "t " << t;
          } else if (quirk) {
            ASSERT_EQ(rawBits(dtype, r.outputs.at(kOut).raw(), t * p.H + h),
                      rawBits(dtype, p.xu.data(), row * p.H + h)) << "t " << t << " h " << h;
          } else {
            TestTensor half(dtype, {1});
            half.setF32(0, p.xu.getF32(row * p.H + h) * 0.5f);
            ASSERT_EQ(got, half.getF32(0)) << "t " << t << " h " << h;
          }
        }
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// 3. Spec §6.4 vectors (tests/data/test_vectors.json), f32 and bf16.
//===----------------------------------------------------------------------===//

TestTensor i32Rows(const std::vector<std::vector<int32_t>> &rows) {
  std::vector<int32_t> flat;
  for (const auto &r : rows)
    flat.insert(flat.end(), r.begin(), r.end());
  TestTensor t = TestTensor::i32(flat);
  t.shape = {static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows.at(0).size())};
  return t;
}

Problem specProblem(DType dtype, Flags flags) {
  const nlohmann::json &c = vectors().at("C_paddle");
  Problem p;
  p.dtype = dtype;
  p.flags = flags;
  p.xu = fromRows(c.at("unpermute").at("hidden_states_unzipped").get<std::vector<std::vector<double>>>(), dtype);
  p.rowmap = i32Rows(c.at("permute").at("zipped_expertwise_rowmap").get<std::vector<std::vector<int32_t>>>());
  p.routemap = i32Rows(c.at("expert_routemap_topk").get<std::vector<std::vector<int32_t>>>());
  const auto pu = c.at("permute").at("token_prob_unzipped").get<std::vector<double>>();
  p.pu = TestTensor(DType::F32, {static_cast<int64_t>(pu.size())});
  for (size_t i = 0; i < pu.size(); ++i)
    p.pu.setF32(static_cast<int64_t>(i), static_cast<float>(pu[i])); // 0.6f, 0.4f exactly
  p.T = p.rowmap.shape[0];
  p.E = p.rowmap.shape[1];
  p.K = p.routemap.shape[1];
  p.H = p.xu.shape[1];
  p.R = p.xu.shape[0];
  p.totalZipped = 3;
  p.numExperts = c.at("num_experts");
  return p;
}

void expectRows(const HostTensor &got, DType dtype, const std::vector<std::vector<double>> &rows, const char *what) {
  EXPECT_TRUE(bitsEqual(fromRows(rows, dtype), got)) << what;
}

class MoeUnpermuteVectors : public ::testing::TestWithParam<DType> {};

TEST_P(MoeUnpermuteVectors, Unweighted) {
  const DType dtype = GetParam();
  const nlohmann::json &u = vectors().at("C_paddle").at("unpermute");
  const auto expected = u.at("unweighted").get<std::vector<std::vector<double>>>();
  for (bool mix : {true, false})
    for (bool quirk : {false, true}) {
      Problem p = specProblem(dtype, Flags{mix, false, quirk});
      SCOPED_TRACE(p.describe());
      CpuRunResult r = run(p);
      expectRows(r.outputs.at(kOut), dtype, expected, "(hidden_states vs spec)");
      // expert_prob_topk: the input probs bit-exactly (0.6f, 0.4f, 1, 1).
      TestTensor probs = fromRows(u.at("expert_prob_topk").get<std::vector<std::vector<double>>>(), DType::F32);
      EXPECT_TRUE(bitsEqual(probs, r.outputs.at(kProbs))) << "(expert_prob_topk vs spec)";
      EXPECT_EQ(loadF32(DType::F32, r.outputs.at(kProbs).raw(), 1), 0.6f);
      EXPECT_EQ(loadF32(DType::F32, r.outputs.at(kProbs).raw(), 4), 0.4f);
      EXPECT_TRUE(bitsEqual(reference(p).out, r.outputs.at(kOut))) << "(reference)";
    }
}

TEST_P(MoeUnpermuteVectors, Weighted) {
  const DType dtype = GetParam();
  for (bool quirk : {false, true}) {
    Problem p = specProblem(dtype, Flags{true, true, quirk});
    SCOPED_TRACE(p.describe());
    CpuRunResult r = run(p);
    // token 0 = rne(0.6f*1 + 0.4f*2, 0.6f*2 + 0.4f*4): bf16 [1.3984375, 2.796875] (spec); f32: fma chain.
    std::vector<std::vector<double>> expected = {{0, 0}, {3, 4}, {5, 6}};
    if (dtype == DType::BF16) {
      expected[0] = {1.3984375, 2.796875};
      EXPECT_TRUE(bitsEqual(fromRows(vectors().at("C_paddle").at("unpermute").at("weighted")
                                         .get<std::vector<std::vector<double>>>(), dtype),
                            r.outputs.at(kOut)))
          << "(json)";
    } else {
      expected[0] = {std::fma(2.0f, 0.4f, std::fma(1.0f, 0.6f, 0.0f)), std::fma(4.0f, 0.4f, std::fma(2.0f, 0.6f, 0.0f))};
    }
    expectRows(r.outputs.at(kOut), dtype, expected, "(hidden_states vs spec)");
    EXPECT_TRUE(bitsEqual(reference(p).out, r.outputs.at(kOut))) << "(reference)";
  }
}

TEST_P(MoeUnpermuteVectors, QuirkCheck) {
  // token_prob_unzipped[2] = 0.5: token 1 (lone row 2 = [3,4]) is [3,4] with the quirk, [1.5,2] without.
  const DType dtype = GetParam();
  for (bool quirk : {true, false}) {
    Problem p = specProblem(dtype, Flags{true, true, quirk});
    p.pu.setF32(2, 0.5f);
    SCOPED_TRACE(p.describe());
    CpuRunResult r = run(p);
    const HostTensor &out = r.outputs.at(kOut);
    EXPECT_EQ(loadF32(dtype, out.raw(), 2), quirk ? 3.0f : 1.5f);
    EXPECT_EQ(loadF32(dtype, out.raw(), 3), quirk ? 4.0f : 2.0f);
    // token 2's lone row has prob 1: [5,6] either way.
    EXPECT_EQ(loadF32(dtype, out.raw(), 4), 5.0f);
    EXPECT_EQ(loadF32(dtype, out.raw(), 5), 6.0f);
    EXPECT_EQ(loadF32(DType::F32, r.outputs.at(kProbs).raw(), 8), 0.5f); // token 1 slot 0
    EXPECT_TRUE(bitsEqual(reference(p).out, out)) << "(reference)";
  }
}

INSTANTIATE_TEST_SUITE_P(Spec64, MoeUnpermuteVectors, ::testing::Values(DType::F32, DType::BF16),
                         [](const auto &info) { return std::string(typeName(info.param)); });

//===----------------------------------------------------------------------===//
// 4. Bad calls through the API.
//===----------------------------------------------------------------------===//

void expectError(Problem &p, const std::vector<std::string> &substrings) {
  std::string message;
  try {
    run(p);
    ADD_FAILURE() << "no error thrown; expected one containing '" << substrings.at(0) << "'";
    return;
  } catch (const ArgumentError &e) {
    message = e.what();
  } catch (const CompileError &e) {
    ADD_FAILURE() << "expected an ArgumentError, got a CompileError: " << e.what();
    return;
  } catch (const std::exception &e) {
    ADD_FAILURE() << "unexpected exception type: " << e.what();
    return;
  }
  EXPECT_NE(message.find(kOp), std::string::npos) << "the message should name the op: " << message;
  for (const std::string &s : substrings)
    EXPECT_NE(message.find(s), std::string::npos) << "expected '" << s << "' in: " << message;
}

TEST(MoeUnpermuteErrors, BaseCallIsValid) {
  Problem p = specProblem(DType::BF16, Flags{});
  checkProblem(p); // runs, and every output matches the reference
}

TEST(MoeUnpermuteErrors, RowmapOutOfRange) {
  Problem p = specProblem(DType::BF16, Flags{});
  p.rowmap.setI32(2, 6); // R = 6
  expectError(p, {"tensor 'zipped_expertwise_rowmap' element 2 is 6", "outside the valid range [-1, 6)"});
  Problem q = specProblem(DType::BF16, Flags{});
  q.rowmap.setI32(1, -2);
  expectError(q, {"tensor 'zipped_expertwise_rowmap' element 1 is -2", "outside the valid range [-1, 6)"});
}

TEST(MoeUnpermuteErrors, RoutemapExpertOutOfRange) {
  Problem p = specProblem(DType::BF16, Flags{});
  p.routemap.setI32(4, 3); // E = 3
  expectError(p, {"tensor 'expert_routemap_topk' element 4 is 3", "outside the valid range [-1, 3)"});
  Problem q = specProblem(DType::BF16, Flags{});
  q.routemap.setI32(0, -2);
  expectError(q, {"tensor 'expert_routemap_topk' element 0 is -2", "outside the valid range [-1, 3)"});
}

TEST(MoeUnpermuteErrors, TotalZippedTokensMismatch) {
  Problem p = specProblem(DType::BF16, Flags{});
  p.totalZipped = 4;
  expectError(p, {"total_zipped_tokens must equal zipped_expertwise_rowmap.shape[0]"});
}

TEST(MoeUnpermuteErrors, NumExpertsMismatch) {
  Problem p = specProblem(DType::BF16, Flags{});
  p.numExperts = 4;
  expectError(p, {"num_experts must equal zipped_expertwise_rowmap.shape[1]"});
}

TEST(MoeUnpermuteErrors, WrongDtypes) {
  Problem p = specProblem(DType::BF16, Flags{});
  p.pu = TestTensor(DType::BF16, {6});
  expectError(p, {"tensor 'token_prob_unzipped'", "expected dtype f32, got bf16"});
  Problem q = specProblem(DType::BF16, Flags{});
  q.xu.dtype = DType::F16;
  expectError(q, {"tensor 'hidden_states_unzipped'", "expected dtype bf16, got f16"});
  Problem r = specProblem(DType::BF16, Flags{});
  r.rowmap.dtype = DType::F32;
  expectError(r, {"tensor 'zipped_expertwise_rowmap'", "expected dtype i32, got f32"});
}

TEST(MoeUnpermuteErrors, WrongShapes) {
  Problem p = specProblem(DType::BF16, Flags{});
  p.routemap.shape = {24};
  expectError(p, {"tensor 'expert_routemap_topk'", "expected 2 dims", "got 1 dims [24]"});
  Problem q = specProblem(DType::BF16, Flags{});
  q.pu = TestTensor(DType::F32, {5});
  expectError(q, {"tensor 'token_prob_unzipped' dim 0", "expected 6, got 5"});
  Problem r = specProblem(DType::BF16, Flags{});
  r.routemap = TestTensor::i32(std::vector<int32_t>(16, -1));
  r.routemap.shape = {2, 8};
  expectError(r, {"tensor 'expert_routemap_topk' dim 0", "expected 3, got 2"});
}

TEST(MoeUnpermuteErrors, BadFlagValue) {
  Problem p = specProblem(DType::BF16, Flags{});
  auto attrs = p.attrs();
  attrs["using_weighted_combine"] = 2;
  std::string message;
  try {
    runOp(op(), DType::BF16, attrs, p.inputs());
  } catch (const ArgumentError &e) {
    message = e.what();
  }
  EXPECT_NE(message.find("attribute 'using_weighted_combine' is a bool: expected 0 or 1, got 2"), std::string::npos)
      << message;
}

//===----------------------------------------------------------------------===//
// 5. Edge cases.
//===----------------------------------------------------------------------===//

TEST(MoeUnpermuteEdge, NoContributorsGivePositiveZero) {
  SEEDED_RNG(rng);
  for (DType dtype : {DType::F16, DType::BF16, DType::F32})
    for (bool mix : {false, true})
      for (bool weighted : {false, true}) {
        Problem p = makeProblem(dtype, Flags{mix, weighted, true}, 6, 4, 3, 11, rng);
        for (int64_t i = 0; i < p.T * p.E; ++i)
          p.rowmap.setI32(i, -1);
        for (int64_t i = 0; i < p.T * p.K; ++i)
          p.routemap.setI32(i, -1);
        SCOPED_TRACE(p.describe());
        CpuRunResult r = run(p);
        for (const char *name : {kOut, kProbs}) {
          const HostTensor &t = r.outputs.at(name);
          for (int64_t i = 0; i < t.elements(); ++i)
            ASSERT_EQ(rawBits(t.type(), t.raw(), i), 0u) << name << " element " << i;
        }
      }
}

TEST(MoeUnpermuteEdge, ManyTokensAcrossThreads) {
  SEEDED_RNG(rng);
  for (DType dtype : {DType::BF16, DType::F32})
    for (bool weighted : {false, true}) {
      Problem p = makeProblem(dtype, Flags{true, weighted, false}, 4099, 16, 8, 33, rng);
      checkProblem(p);
    }
}

} // namespace
} // namespace moec::test

namespace moec::test {
namespace {

/// Deterministic subnormal cases (their own test, so that a flush-to-zero problem shows up by name): one
/// contributor per token, not the quirk, so the result is rne(+0.0 + x) = x for every element; H = 19
/// covers the vector body and the tail.
TEST(MoeUnpermuteSubnormalExact, SingleRowRoundTrips) {
  struct Case {
    DType dtype;
    std::vector<uint32_t> bits;
  };
  const Case cases[] = {
      {DType::BF16, {0x0041, 0x8021, 0x0001, 0x007f, 0x8062, 0x0080, 0x3f80, 0x4000}},
      {DType::F16, {0x0041, 0x8021, 0x0001, 0x03ff, 0x8062, 0x0400, 0x3c00, 0x4000}},
      {DType::F32, {0x00410000, 0x80210000, 0x00000001, 0x007fffff, 0x80620000, 0x00800000, 0x3f800000, 0x40000000}},
  };
  for (const Case &c : cases)
    for (int64_t E : {1, 2}) // E = 2: a second contributing row of +0.0 (x + 0 = x, fma(0, 1, x) = x)
      for (bool quirk : {false, true})
        for (bool mix : {true, false})
          for (bool weighted : {false, true}) {
            const int64_t H = 19;
            Problem p;
            p.dtype = c.dtype;
            p.flags = Flags{mix, weighted, quirk};
            p.T = 1;
            p.E = E;
            p.K = 1;
            p.H = H;
            p.R = E;
            p.xu = TestTensor(c.dtype, {E, H}); // row 1 (if any): +0.0
            for (int64_t h = 0; h < H; ++h) {
              const uint32_t b = c.bits[h % c.bits.size()];
              if (elemBytes(c.dtype) == 2)
                reinterpret_cast<uint16_t *>(p.xu.data())[h] = static_cast<uint16_t>(b);
              else
                reinterpret_cast<uint32_t *>(p.xu.data())[h] = b;
            }
            p.rowmap = TestTensor::i32(E == 1 ? std::vector<int32_t>{0} : std::vector<int32_t>{0, 1});
            p.rowmap.shape = {1, E};
            p.routemap = TestTensor::i32({0});
            p.routemap.shape = {1, 1};
            p.pu = TestTensor(DType::F32, {E});
            for (int64_t r = 0; r < E; ++r)
              p.pu.setF32(r, 1.0f);
            SCOPED_TRACE(p.describe() + " E=" + std::to_string(E));
            TestTensor expected(c.dtype, {1, H});
            std::memcpy(expected.data(), p.xu.data(), H * elemBytes(c.dtype));
            EXPECT_TRUE(bitsEqual(expected, reference(p).out)) << "(reference)";
            EXPECT_TRUE(bitsEqual(expected, run(p).outputs.at(kOut))) << "(kernel)";
          }
}

} // namespace
} // namespace moec::test
