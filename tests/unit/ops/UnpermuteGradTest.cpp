//===- UnpermuteGradTest.cpp - moe_token_unpermute_with_routing_map_grad through the CPU JIT -===//
//
// Spec §2.3 (A3), the backward of the routing-map unpermute:
//   dY[row] = rne(f32(G[tok]) * f32(P[tok, e]))   (no probs: dY[row] = G[tok], a bit copy)
//   dP[tok, e] = rne(sum over h of f32(Y[row, h]) * f32(G[tok, h]))
// non-pad: slot t*K + k is token t's k-th selected expert, row = out_index[slot] (-1 = unused slot);
// pad: row = out_index[i], tok = permute_token_id[i], e = row / C. Rows no slot references and (t, e)
// pairs no slot holds are exactly +0.0.
//
// dY is compared bit for bit. dP is a dot product over H which the kernel may sum in any order (it may be
// vectorized or tree-reduced): it is compared with the exact (double) dot product within
// 1e-5 * sum|terms| + one rounding of the dtype (spec §5 item 6 is looser); with H == 1 it is bit-exact.
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
#include <optional>
#include <tuple>

namespace moec {
static void PrintTo(const Schedule &s, std::ostream *os) { *os << s.str(); }
} // namespace moec

namespace moec::test {
namespace {

const char *kOp = "moe_token_unpermute_with_routing_map_grad";
const char *kG = "unpermuted_tokens_grad";
const char *kOutIndex = "out_index";
const char *kTokenId = "permute_token_id";
const char *kMap = "routing_map";
const char *kY = "permuted_tokens";
const char *kP = "probs";
const char *kDY = "permuted_tokens_grad";
const char *kDP = "probs_grad";

const dsl::OpDef &op() {
  static std::unique_ptr<dsl::OpDef> def = loadOp(kOp);
  return *def;
}



/// Non-pad with -1 slots: Keep = the routing map keeps all K ones (the slot is just unused); Drop = the
/// map loses the experts of the trailing unused slots (rows with < K ones, spec §5 item 2).
enum class Mode { NonPad, NonPadMinus1Keep, NonPadMinus1Drop, Pad };

const char *modeName(Mode m) {
  switch (m) {
  case Mode::NonPad: return "nonpad";
  case Mode::NonPadMinus1Keep: return "nonpad_minus1_keep";
  case Mode::NonPadMinus1Drop: return "nonpad_minus1_drop";
  case Mode::Pad: return "pad";
  }
  return "?";
}

void PrintTo(Mode m, std::ostream *os) { *os << modeName(m); }

//===----------------------------------------------------------------------===//
// The problem and the reference (spec §2.3 pseudo-code in plain C++).
//===----------------------------------------------------------------------===//

struct Problem {
  bool pad = false;
  int64_t T = 0, E = 0, H = 0, K = 0, C = 0, R = 0;
  DType dtype = DType::F32;
  TestTensor G, outIndex, tokenId;
  std::optional<TestTensor> map, Y, P; // absent = left out of the call

  std::map<std::string, int64_t> attrs() const { return {{"drop_and_pad", pad ? 1 : 0}}; }
  std::map<std::string, TensorView> inputs() {
    std::map<std::string, TensorView> in{{kG, G.view()}, {kOutIndex, outIndex.view()}, {kTokenId, tokenId.view()}};
    if (map)
      in[kMap] = map->view();
    if (Y)
      in[kY] = Y->view();
    if (P)
      in[kP] = P->view();
    return in;
  }
  std::string describe() const {
    std::string s = std::string(pad ? "pad" : "nonpad") + " " + typeName(dtype) + " T=" + std::to_string(T) +
                    " E=" + std::to_string(E) + " H=" + std::to_string(H) + " R=" + std::to_string(R);
    s += pad ? " C=" + std::to_string(C) : " K=" + std::to_string(K);
    s += P ? " probs" : " no-probs";
    if (map)
      s += std::string(" map:") + typeName(map->dtype);
    return s;
  }
  bool mapAt(int64_t t, int64_t e) const { return static_cast<const uint8_t *>(map->data())[t * E + e] != 0; }
};

/// What the reference gives: dY bit-exact; dP as the exact dot (double), the sum of |terms|, the f32
/// sequential dot rounded to the dtype, and whether any slot writes the (t, e) entry.
struct Expected {
  TestTensor dY;
  std::vector<double> dpExact, dpAbs;
  TestTensor dpSeq;
  std::vector<char> dpSet;
};

void copyRow(const TestTensor &src, int64_t srcRow, TestTensor &dst, int64_t dstRow, int64_t H) {
  const size_t b = elemBytes(src.dtype);
  std::memcpy(static_cast<char *>(dst.data()) + dstRow * H * b,
              static_cast<const char *>(src.data()) + srcRow * H * b, H * b);
}

/// One slot of the reference: row `row` of dY from token `tok` (and expert `e` when probs are given).
void refSlot(const Problem &p, Expected &x, int64_t tok, int64_t row, int64_t e) {
  const int64_t H = p.H;
  if (!p.P) {
    copyRow(p.G, tok, x.dY, row, H); // dY[row] = G[tok]
    return;
  }
  const float prob = p.P->getF32(tok * p.E + e);
  double exact = 0, abs = 0;
  float seq = 0.0f;
  for (int64_t h = 0; h < H; ++h) {
    const float g = p.G.getF32(tok * H + h);
    x.dY.setF32(row * H + h, g * prob); // rne(f32(G) * f32(P)): one rounding to the dtype
    const float y = p.Y->getF32(row * H + h);
    seq += y * g;
    exact += static_cast<double>(y) * static_cast<double>(g); // exact products, (near) exact sum
    abs += std::fabs(static_cast<double>(y) * static_cast<double>(g));
  }
  const int64_t i = tok * p.E + e;
  x.dpExact[i] = exact;
  x.dpAbs[i] = abs;
  x.dpSeq.setF32(i, seq);
  x.dpSet[i] = 1;
}

Expected reference(const Problem &p) {
  Expected x;
  x.dY = TestTensor(p.dtype, {p.R, p.H}); // zero bytes: +0.0 rows where no slot writes
  if (p.P) {
    x.dpExact.assign(p.T * p.E, 0.0);
    x.dpAbs.assign(p.T * p.E, 0.0);
    x.dpSeq = TestTensor(p.dtype, {p.T, p.E});
    x.dpSet.assign(p.T * p.E, 0);
  }
  if (p.pad) {
    const int64_t C = p.P ? p.R / p.E : 0;
    for (int64_t i = 0; i < p.R; ++i) {
      const int64_t tok = p.tokenId.getI32(i), row = p.outIndex.getI32(i);
      refSlot(p, x, tok, row, p.P ? row / C : -1);
    }
    return x;
  }
  const int64_t K = p.R / p.T;
  for (int64_t t = 0; t < p.T; ++t) {
    std::vector<int64_t> experts; // ascending; the k-th selected expert
    if (p.P)
      for (int64_t e = 0; e < p.E; ++e)
        if (p.mapAt(t, e))
          experts.push_back(e);
    for (int64_t k = 0; k < K; ++k) {
      const int64_t row = p.outIndex.getI32(t * K + k);
      if (row < 0)
        continue; // -1 slot
      refSlot(p, x, t, row, p.P ? experts.at(k) : -1);
    }
  }
  return x;
}

/// dP check: +0.0 bits where no slot writes; bit-exact to the sequential reference for H == 1; else within
/// 1e-5 * sum|terms| of the exact dot, plus one rounding to the dtype.
::testing::AssertionResult dpClose(const Problem &p, const Expected &x, const HostTensor &got) {
  if (got.type() != p.dtype || got.dims() != std::vector<int64_t>{p.T, p.E})
    return ::testing::AssertionFailure() << "probs_grad: expected " << typeName(p.dtype) << " "
                                         << shapeString({p.T, p.E}) << ", got " << typeName(got.type()) << " "
                                         << shapeString(got.dims());
  const double rel = p.dtype == DType::BF16 ? 1.0 / 256 : p.dtype == DType::F16 ? 1.0 / 2048 : 1.0 / (1 << 24);
  const double atol = p.dtype == DType::F16 ? 6.0e-8 : 1.0e-44;
  int64_t bad = 0;
  std::string first;
  for (int64_t i = 0; i < p.T * p.E; ++i) {
    const uint32_t gb = rawBits(p.dtype, got.raw(), i);
    const double g = loadF32(p.dtype, got.raw(), i);
    std::string why;
    if (!x.dpSet[i]) {
      if (gb != 0)
        why = "expected +0.0 (no slot holds this pair)";
    } else if (p.H == 1) {
      if (gb != rawBits(p.dtype, x.dpSeq.data(), i))
        why = "expected bit-exact " + hexBits(p.dtype, rawBits(p.dtype, x.dpSeq.data(), i));
    } else if (!std::isfinite(g)) {
      why = "not finite"; // the inputs are finite and small: so is every exact dot
    } else {
      // Relative to the exact value only: a tolerance that grew with |got| would accept an Inf.
      const double tol = 1e-5 * x.dpAbs[i] + rel * std::fabs(x.dpExact[i]) + atol;
      if (!(std::fabs(g - x.dpExact[i]) <= tol))
        why = "outside tolerance " + std::to_string(tol);
    }
    if (why.empty())
      continue;
    if (bad++ == 0) {
      std::ostringstream os;
      os << std::setprecision(9) << "[" << i / p.E << ", " << i % p.E << "]: exact " << x.dpExact[i]
         << ", sequential " << x.dpSeq.getF32(i) << ", got " << g << " (" << hexBits(p.dtype, gb) << "); " << why;
      first = os.str();
    }
  }
  if (bad == 0)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "probs_grad: " << bad << " of " << p.T * p.E << " differ; first " << first;
}

CpuRunResult run(Problem &p, const Schedule &schedule = {}) {
  return runOp(op(), p.dtype, p.attrs(), p.inputs(), schedule);
}

/// Runs `p` and checks every output against the reference.
void checkProblem(Problem &p, const Schedule &schedule = {}) {
  SCOPED_TRACE(p.describe() + " schedule " + schedule.str());
  Expected x = reference(p);
  CpuRunResult r = run(p, schedule);
  ASSERT_EQ(r.outputs.size(), p.P ? 2u : 1u);
  ASSERT_TRUE(r.outputs.count(kDY));
  EXPECT_TRUE(bitsEqual(x.dY, r.outputs.at(kDY))) << "(permuted_tokens_grad)";
  if (p.P) {
    ASSERT_TRUE(r.outputs.count(kDP));
    EXPECT_TRUE(dpClose(p, x, r.outputs.at(kDP)));
  }
}

//===----------------------------------------------------------------------===//
// Routing data as the forward op A1 builds it (ref_impl.permute_with_routing_map).
//===----------------------------------------------------------------------===//

TestTensor makeMap(const std::vector<std::vector<int>> &m, DType dtype) {
  const int64_t T = static_cast<int64_t>(m.size()), E = T ? static_cast<int64_t>(m[0].size()) : 0;
  TestTensor t(dtype, {T, E});
  for (int64_t i = 0; i < T; ++i)
    for (int64_t e = 0; e < E; ++e)
      static_cast<uint8_t *>(t.data())[i * E + e] = m[i][e] ? 1 : 0;
  return t;
}

/// Non-pad A1: sortedIndices[t*K + k] = the expert-major row of (t, k-th selected expert of t).
std::vector<int32_t> nonPadSortedIndices(const std::vector<std::vector<int>> &m, int64_t K) {
  const int64_t T = static_cast<int64_t>(m.size()), E = static_cast<int64_t>(m[0].size());
  std::vector<std::vector<int32_t>> rowOf(T, std::vector<int32_t>(E, -1));
  int32_t r = 0;
  for (int64_t e = 0; e < E; ++e) // expert-major: experts ascending, tokens ascending
    for (int64_t t = 0; t < T; ++t)
      if (m[t][e])
        rowOf[t][e] = r++;
  std::vector<int32_t> s;
  for (int64_t t = 0; t < T; ++t) {
    int64_t k = 0;
    for (int64_t e = 0; e < E; ++e)
      if (m[t][e]) {
        s.push_back(rowOf[t][e]);
        ++k;
      }
    EXPECT_EQ(k, K) << "non-pad needs exactly K ones per row";
  }
  return s;
}

std::vector<int32_t> stableArgsort(const std::vector<int32_t> &keys) {
  std::vector<int32_t> idx(keys.size());
  std::iota(idx.begin(), idx.end(), 0);
  // Ties in index order, as std::stable_sort would (which warns under clang with libstdc++ 12).
  std::sort(idx.begin(), idx.end(),
            [&](int32_t a, int32_t b) { return std::make_pair(keys[a], a) < std::make_pair(keys[b], b); });
  return idx;
}

/// Pad A1 (Megatron drop_and_pad): per expert, the stable descending argsort of the 0/1 column, first C:
/// routed tokens in ascending id (the rest dropped), then filler (un-routed) tokens in ascending id.
std::vector<int32_t> padSortedIndices(const std::vector<std::vector<int>> &m, int64_t C) {
  const int64_t T = static_cast<int64_t>(m.size()), E = static_cast<int64_t>(m[0].size());
  std::vector<int32_t> s;
  for (int64_t e = 0; e < E; ++e) {
    std::vector<int32_t> col;
    for (int64_t t = 0; t < T; ++t)
      if (m[t][e])
        col.push_back(static_cast<int32_t>(t));
    for (int64_t t = 0; t < T; ++t)
      if (!m[t][e])
        col.push_back(static_cast<int32_t>(t));
    s.insert(s.end(), col.begin(), col.begin() + C);
  }
  return s;
}

/// A2 pad: outIndex = stable argsort of sortedIndices, permuteTokenId = the sorted token ids.
void padOutIndex(const std::vector<int32_t> &sorted, std::vector<int32_t> &outIndex, std::vector<int32_t> &tokenId) {
  outIndex = stableArgsort(sorted);
  tokenId.resize(sorted.size());
  for (size_t i = 0; i < sorted.size(); ++i)
    tokenId[i] = sorted[outIndex[i]];
}

Problem makeProblem(Mode mode, bool withProbs, DType dtype, int64_t T, int64_t E, int64_t KorC, int64_t H,
                    std::mt19937 &rng, Values values = Values::Normal) {
  Problem p;
  p.pad = mode == Mode::Pad;
  p.dtype = dtype;
  p.T = T;
  p.E = E;
  p.H = H;
  const DType mapType = uniformInt(rng, 0, 1) ? DType::Bool : DType::I8;
  std::vector<std::vector<int>> m(T, std::vector<int>(E, 0));
  std::vector<int32_t> outIndex, tokenId;
  if (p.pad) {
    p.C = KorC;
    p.R = E * p.C;
    const int density = static_cast<int>(uniformInt(rng, 0, 100));
    for (auto &row : m)
      for (int &v : row)
        v = uniformInt(rng, 0, 99) < density ? 1 : 0;
    padOutIndex(padSortedIndices(m, p.C), outIndex, tokenId);
  } else {
    p.K = KorC;
    p.R = T * p.K;
    std::vector<int> experts(E);
    for (auto &row : m) {
      std::iota(experts.begin(), experts.end(), 0);
      std::shuffle(experts.begin(), experts.end(), rng);
      for (int64_t k = 0; k < p.K; ++k)
        row[experts[k]] = 1;
    }
    outIndex = nonPadSortedIndices(m, p.K);
    if (mode == Mode::NonPadMinus1Keep) {
      for (int32_t &s : outIndex)
        if (uniformInt(rng, 0, 3) == 0)
          s = -1;
    } else if (mode == Mode::NonPadMinus1Drop) {
      for (int64_t t = 0; t < T; ++t) {
        if (uniformInt(rng, 0, 2) != 0)
          continue;
        const int64_t drop = uniformInt(rng, 1, p.K); // the trailing `drop` slots are unused
        std::vector<int64_t> sel;
        for (int64_t e = 0; e < E; ++e)
          if (m[t][e])
            sel.push_back(e);
        for (int64_t k = p.K - drop; k < p.K; ++k) {
          outIndex[t * p.K + k] = -1;
          m[t][sel[k]] = 0;
        }
      }
    }
    tokenId = outIndex; // non-pad: the backward receives sortedIndices twice
  }
  p.outIndex = TestTensor::i32(outIndex);
  p.tokenId = TestTensor::i32(tokenId);
  p.G = TestTensor(dtype, {T, H});
  fillRandom(p.G, rng, values);
  if (withProbs) {
    p.map = makeMap(m, mapType);
    p.Y = TestTensor(dtype, {p.R, H});
    fillRandom(*p.Y, rng, values);
    p.P = TestTensor(dtype, {T, E});
    fillRandom(*p.P, rng, values);
    if (p.pad && uniformInt(rng, 0, 1))
      p.map.reset(); // pad mode never reads the routing map
  } else if (uniformInt(rng, 0, 1)) {
    p.map = makeMap(m, mapType); // ignored without probs
  }
  return p;
}

//===----------------------------------------------------------------------===//
// 1. The reference and the routing builders against the spec's hand-computed numbers.
//===----------------------------------------------------------------------===//

TEST(UnpermuteGradReference, RoutingBuildersFollowSpec) {
  // §6.1: sortedIndicesOut = [0,3,4,6,1,7,2,5].
  EXPECT_EQ(nonPadSortedIndices({{1, 1, 0}, {0, 1, 1}, {1, 0, 1}, {1, 1, 0}}, 2),
            (std::vector<int32_t>{0, 3, 4, 6, 1, 7, 2, 5}));
  // §6.2: sortedIndicesOut = [0,1, 0,3, 2,0], outIndex = [0,2,5,1,4,3], permuteTokenId = [0,0,0,1,2,3].
  const std::vector<int32_t> s = padSortedIndices({{1, 1, 0}, {1, 0, 0}, {1, 0, 1}, {0, 1, 0}}, 2);
  EXPECT_EQ(s, (std::vector<int32_t>{0, 1, 0, 3, 2, 0}));
  std::vector<int32_t> oi, ti;
  padOutIndex(s, oi, ti);
  EXPECT_EQ(oi, (std::vector<int32_t>{0, 2, 5, 1, 4, 3}));
  EXPECT_EQ(ti, (std::vector<int32_t>{0, 0, 0, 1, 2, 3}));
}

//===----------------------------------------------------------------------===//
// 2. Random data: mode x probs x dtype x H, over a spread of T, E, K / C.
//===----------------------------------------------------------------------===//

using RandomParam = std::tuple<Mode, bool /*probs*/, DType, int64_t /*H*/>;

class UnpermuteGradRandom : public ::testing::TestWithParam<RandomParam> {};

TEST_P(UnpermuteGradRandom, MatchesReference) {
  const auto [mode, withProbs, dtype, H] = GetParam();
  SEEDED_RNG(rng);
  const int64_t Ts[] = {1, 5, 33};
  int i = static_cast<int>(uniformInt(rng, 0, 2));
  for (int64_t E : {1, 3, 8, 64}) {
    const int64_t T = Ts[i++ % 3];
    int64_t KorC;
    if (mode == Mode::Pad) {
      KorC = uniformInt(rng, 1, T); // capacity <= T
    } else {
      std::vector<int64_t> Ks{1, 2, E};
      Ks.erase(std::remove_if(Ks.begin(), Ks.end(), [&](int64_t k) { return k > E; }), Ks.end());
      KorC = Ks[uniformInt(rng, 0, static_cast<int64_t>(Ks.size()) - 1)];
    }
    Problem p = makeProblem(mode, withProbs, dtype, T, E, KorC, H, rng);
    checkProblem(p);
  }
}

std::string randomParamName(const ::testing::TestParamInfo<RandomParam> &info) {
  const auto [mode, withProbs, dtype, H] = info.param;
  return std::string(modeName(mode)) + (withProbs ? "_probs_" : "_noprobs_") + typeName(dtype) + "_H" +
         std::to_string(H);
}

INSTANTIATE_TEST_SUITE_P(AllCases, UnpermuteGradRandom,
                         ::testing::Combine(::testing::Values(Mode::NonPad, Mode::NonPadMinus1Keep,
                                                              Mode::NonPadMinus1Drop, Mode::Pad),
                                            ::testing::Bool(), ::testing::Values(DType::F16, DType::BF16, DType::F32),
                                            ::testing::Values<int64_t>(1, 7, 128, 1023)),
                         randomParamName);

/// Every (T, E, K) of the grid once, f32 / bf16, small H (cheap compiles, all corner shapes).
TEST(UnpermuteGradGrid, AllShapesNonPadAndPad) {
  SEEDED_RNG(rng);
  for (DType dtype : {DType::F32, DType::BF16})
    for (int64_t T : {1, 5, 33})
      for (int64_t E : {1, 3, 8, 40, 64}) { // 40: a GPU row of points' last 32 partly full
        std::vector<int64_t> Ks{1, 2, E};
        std::sort(Ks.begin(), Ks.end());
        Ks.erase(std::unique(Ks.begin(), Ks.end()), Ks.end());
        for (int64_t K : Ks) {
          if (K > E)
            continue;
          Problem p = makeProblem(Mode::NonPad, true, dtype, T, E, K, 3, rng);
          checkProblem(p);
        }
        for (int64_t C : {int64_t{1}, T}) {
          Problem p = makeProblem(Mode::Pad, true, dtype, T, E, C, 3, rng);
          checkProblem(p);
        }
      }
}

/// Special values (+-0, -0, +-Inf, NaN, huge): dY must still be bit-exact (a copy or one product).
TEST(UnpermuteGradSpecial, PermutedTokensGradBitExact) {
  SEEDED_RNG(rng);
  for (Mode mode : {Mode::NonPad, Mode::Pad})
    for (bool withProbs : {false, true})
      for (DType dtype : {DType::F16, DType::BF16, DType::F32}) {
        Problem p = makeProblem(mode, withProbs, dtype, 9, 4, mode == Mode::Pad ? 5 : 2, 37, rng, Values::Special);
        SCOPED_TRACE(p.describe());
        Expected x = reference(p);
        CpuRunResult r = run(p);
        EXPECT_TRUE(bitsEqual(x.dY, r.outputs.at(kDY)));
      }
}

/// Subnormal values: dY products and copies are IEEE (no flush to zero).
TEST(UnpermuteGradSpecial, SubnormalsBitExact) {
  SEEDED_RNG(rng);
  for (Mode mode : {Mode::NonPad, Mode::Pad})
    for (DType dtype : {DType::F16, DType::BF16, DType::F32}) {
      Problem p = makeProblem(mode, true, dtype, 17, 8, mode == Mode::Pad ? 7 : 3, 1, rng, Values::Subnormal);
      checkProblem(p); // H == 1: dP bit-exact too
      Problem q = makeProblem(mode, false, dtype, 17, 8, mode == Mode::Pad ? 7 : 3, 129, rng, Values::Subnormal);
      checkProblem(q);
    }
}

//===----------------------------------------------------------------------===//
// Schedules: scalar, no unroll, explicit vector widths.
//===----------------------------------------------------------------------===//

Schedule sched(int64_t vector, int64_t unroll) {
  Schedule s;
  s.vector = vector;
  s.unroll = unroll;
  return s;
}

class UnpermuteGradSchedule : public ::testing::TestWithParam<std::tuple<Schedule, Mode>> {};

TEST_P(UnpermuteGradSchedule, MatchesReference) {
  const auto [schedule, mode] = GetParam();
  SEEDED_RNG(rng);
  struct Shape {
    DType dtype;
    int64_t T, E, KorC, H;
  };
  const Shape shapes[] = {{DType::F32, 5, 8, 2, 1023}, {DType::BF16, 33, 64, 8, 7}, {DType::F16, 9, 3, 3, 128}};
  for (const Shape &s : shapes)
    for (bool withProbs : {false, true}) {
      Problem p = makeProblem(mode, withProbs, s.dtype, s.T, s.E, std::min(s.KorC, s.T), s.H, rng);
      checkProblem(p, schedule);
    }
}

INSTANTIATE_TEST_SUITE_P(Forced, UnpermuteGradSchedule,
                         ::testing::Combine(::testing::Values(sched(1, 0), sched(0, 1), sched(8, 0), sched(2, 5)),
                                            ::testing::Values(Mode::NonPadMinus1Keep, Mode::Pad)),
                         [](const auto &info) {
                           const Schedule &s = std::get<0>(info.param);
                           return std::string(modeName(std::get<1>(info.param))) + "_v" +
                                  std::to_string(s.vector) + "_u" + std::to_string(s.unroll);
                         });

//===----------------------------------------------------------------------===//
// 3. Spec §6.1 / §6.2 vectors (tests/data/test_vectors.json), f32 and bf16.
//===----------------------------------------------------------------------===//

class UnpermuteGradVectors : public ::testing::TestWithParam<std::tuple<bool /*pad*/, bool /*probs*/, DType>> {};

TEST_P(UnpermuteGradVectors, MatchesSpec) {
  const auto [pad, withProbs, dtype] = GetParam();
  const nlohmann::json &c = vectors().at(pad ? "A_pad" : "A_nonpad");
  const nlohmann::json &g = c.at("grad");
  const auto M = c.at("routingMap").get<std::vector<std::vector<int>>>();
  Problem p;
  p.pad = pad;
  p.dtype = dtype;
  p.G = fromRows(g.at("unpermutedTokensGrad").get<std::vector<std::vector<double>>>(), dtype);
  p.T = p.G.shape[0];
  p.H = p.G.shape[1];
  p.E = static_cast<int64_t>(M[0].size());
  p.outIndex = TestTensor::i32(g.at("outIndex").get<std::vector<int32_t>>());
  p.tokenId = TestTensor::i32(g.at("permuteTokenId").get<std::vector<int32_t>>());
  p.R = p.outIndex.elements();
  p.K = pad ? 0 : p.R / p.T;
  p.C = pad ? p.R / p.E : 0;
  if (withProbs) {
    p.map = makeMap(M, DType::Bool);
    p.Y = fromRows(c.at("unpermute").at("permutedTokens").get<std::vector<std::vector<double>>>(), dtype);
    p.P = fromRows(c.at("probs").get<std::vector<std::vector<double>>>(), dtype);
  }
  TestTensor dY = fromRows(
      g.at(withProbs ? "permutedTokensGradOut" : "permutedTokensGradOut_noprobs").get<std::vector<std::vector<double>>>(),
      dtype);
  if (pad && withProbs) {
    // §6.2: row 5 is [0, -0] (G[0] = [1, -1] times the filler prob P[0, 2] = 0); JSON loses the sign.
    ASSERT_EQ(dY.getF32(11), 0.0f);
    dY.setF32(10, 0.0f);
    dY.setF32(11, -0.0f);
  }
  SCOPED_TRACE(p.describe());
  Expected x = reference(p);
  EXPECT_TRUE(bitsEqual(dY, x.dY)) << "(reference vs spec)";
  CpuRunResult r = run(p);
  ASSERT_EQ(r.outputs.size(), withProbs ? 2u : 1u);
  EXPECT_TRUE(bitsEqual(dY, r.outputs.at(kDY))) << "(kernel vs spec)";
  if (withProbs) {
    // Small exact values: dP is exact in any order, so bit-exact here (including +0.0 entries).
    TestTensor dP = fromRows(g.at("probsGradOut").get<std::vector<std::vector<double>>>(), dtype);
    EXPECT_TRUE(bitsEqual(dP, x.dpSeq)) << "(reference vs spec)";
    EXPECT_TRUE(bitsEqual(dP, r.outputs.at(kDP))) << "(kernel vs spec)";
    if (pad) { // (0,2) = -1 for the filler slot although M2[0,2] = 0; (2,0) = 0 although M2[2,0] = 1 (dropped)
      EXPECT_EQ(loadF32(dtype, r.outputs.at(kDP).raw(), 2), -1.0f);
      EXPECT_EQ(rawBits(dtype, r.outputs.at(kDP).raw(), 6), 0u);
    }
  }
  if (pad && withProbs) {
    // Pad mode never reads the routing map: the same result without it, and with an i8 map.
    p.map.reset();
    CpuRunResult r2 = run(p);
    EXPECT_TRUE(bitsEqual(dY, r2.outputs.at(kDY))) << "(no routing map)";
  }
  if (!pad && withProbs) {
    p.map = makeMap(M, DType::I8);
    CpuRunResult r2 = run(p);
    EXPECT_TRUE(bitsEqual(dY, r2.outputs.at(kDY))) << "(i8 routing map)";
    EXPECT_TRUE(bitsEqual(x.dpSeq, r2.outputs.at(kDP))) << "(i8 routing map)";
  }
}

INSTANTIATE_TEST_SUITE_P(Spec61And62, UnpermuteGradVectors,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(),
                                            ::testing::Values(DType::F32, DType::BF16)),
                         [](const auto &info) {
                           return std::string(std::get<0>(info.param) ? "pad" : "nonpad") +
                                  (std::get<1>(info.param) ? "_probs_" : "_noprobs_") +
                                  typeName(std::get<2>(info.param));
                         });

//===----------------------------------------------------------------------===//
// 4. Adjoint test: A3 is the transpose of the forward A2 (spec §2.2, non-pad, with probs).
//===----------------------------------------------------------------------===//

/// A2 non-pad in double: out[t] = sum over k of Y[s] * w[t*K + k], w = token-major masked select of probs.
std::vector<double> forwardA2(const Problem &p) {
  const int64_t K = p.R / p.T;
  std::vector<double> out(p.T * p.H, 0.0);
  for (int64_t t = 0; t < p.T; ++t) {
    std::vector<int64_t> experts;
    for (int64_t e = 0; e < p.E; ++e)
      if (p.mapAt(t, e))
        experts.push_back(e);
    for (int64_t k = 0; k < K; ++k) {
      const int64_t s = p.outIndex.getI32(t * K + k);
      if (s < 0)
        continue;
      const double w = p.P->getF32(t * p.E + experts.at(k));
      for (int64_t h = 0; h < p.H; ++h)
        out[t * p.H + h] += static_cast<double>(p.Y->getF32(s * p.H + h)) * w;
    }
  }
  return out;
}

TEST(UnpermuteGradAdjoint, DotProductIdentity) {
  SEEDED_RNG(rng);
  struct Shape {
    int64_t T, E, K, H;
  };
  for (Shape s : {Shape{4, 3, 2, 2}, Shape{33, 8, 2, 64}, Shape{5, 64, 64, 7}, Shape{17, 16, 5, 33}})
    for (Mode mode : {Mode::NonPad, Mode::NonPadMinus1Drop}) {
      Problem p = makeProblem(mode, true, DType::F32, s.T, s.E, s.K, s.H, rng);
      if (!p.map)
        FAIL() << "non-pad with probs must have a routing map";
      // Small exactly-representable values: integers in [-8, 8] for G and Y, multiples of 1/8 in [0, 1] for
      // probs; every f32 product and sum in the kernel is then exact.
      for (int64_t i = 0; i < p.G.elements(); ++i)
        p.G.setF32(i, static_cast<float>(uniformInt(rng, -8, 8)));
      for (int64_t i = 0; i < p.Y->elements(); ++i)
        p.Y->setF32(i, static_cast<float>(uniformInt(rng, -8, 8)));
      for (int64_t i = 0; i < p.P->elements(); ++i)
        p.P->setF32(i, static_cast<float>(uniformInt(rng, 0, 8)) / 8.0f);
      SCOPED_TRACE(p.describe() + " " + modeName(mode));
      CpuRunResult r = run(p);
      const HostTensor &dY = r.outputs.at(kDY), &dP = r.outputs.at(kDP);
      const float *dy = static_cast<const float *>(dY.raw()), *dp = static_cast<const float *>(dP.raw());
      const std::vector<double> fwd = forwardA2(p);
      double lhs = 0, dyY = 0, dpP = 0;
      for (int64_t i = 0; i < p.T * p.H; ++i)
        lhs += static_cast<double>(p.G.getF32(i)) * fwd[i];
      for (int64_t i = 0; i < p.R * p.H; ++i)
        dyY += static_cast<double>(dy[i]) * p.Y->getF32(i);
      for (int64_t i = 0; i < p.T * p.E; ++i)
        dpP += static_cast<double>(dp[i]) * p.P->getF32(i);
      // A2 is bilinear in (Y, probs): <G, A2(Y, P)> = <dY, Y> = <dP, P>, so the two-term form of the
      // identity, <dY, Y> + <dP, P>, equals 2 <G, A2(Y, P)> (Euler's theorem for degree-2 forms).
      EXPECT_EQ(lhs, dyY) << "<G, A2(Y,P)> vs <dY, Y>";
      EXPECT_EQ(lhs, dpP) << "<G, A2(Y,P)> vs <dP, P>";
      EXPECT_EQ(2 * lhs, dyY + dpP) << "2 <G, A2(Y,P)> vs <dY, Y> + <dP, P>";
      EXPECT_NE(lhs, 0.0) << "degenerate data";
    }
}

//===----------------------------------------------------------------------===//
// 5. Bad calls through the API.
//===----------------------------------------------------------------------===//

void expectError(Problem &p, const std::vector<std::string> &substrings, DType dtype = DType::F32) {
  std::string message;
  try {
    runOp(op(), dtype, p.attrs(), p.inputs());
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

/// §6.1 non-pad (T=4, E=3, K=2, H=2) with probs, as a valid base for the bad calls.
Problem specNonPad(bool withProbs = true) {
  Problem p;
  p.dtype = DType::F32;
  p.T = 4;
  p.E = 3;
  p.H = 2;
  p.K = 2;
  p.R = 8;
  p.G = TestTensor(DType::F32, {4, 2});
  p.outIndex = TestTensor::i32({0, 3, 4, 6, 1, 7, 2, 5});
  p.tokenId = p.outIndex;
  if (withProbs) {
    p.map = makeMap({{1, 1, 0}, {0, 1, 1}, {1, 0, 1}, {1, 1, 0}}, DType::Bool);
    p.Y = TestTensor(DType::F32, {8, 2});
    p.P = TestTensor(DType::F32, {4, 3});
  }
  return p;
}

/// §6.2 pad (T=4, E=3, C=2, H=2) with probs.
Problem specPad() {
  Problem p = specNonPad();
  p.pad = true;
  p.C = 2;
  p.R = 6;
  p.outIndex = TestTensor::i32({0, 2, 5, 1, 4, 3});
  p.tokenId = TestTensor::i32({0, 0, 0, 1, 2, 3});
  p.Y = TestTensor(DType::F32, {6, 2});
  return p;
}

TEST(UnpermuteGradErrors, BaseCallsAreValid) {
  Problem a = specNonPad(), b = specPad(), c = specNonPad(false);
  checkProblem(a); // each runs, and its outputs match the reference
  checkProblem(b);
  checkProblem(c);
}

TEST(UnpermuteGradErrors, NonUniqueOutIndex) {
  Problem p = specNonPad();
  p.outIndex = TestTensor::i32({0, 3, 4, 6, 1, 7, 2, 3});
  expectError(p, {"tensor 'out_index' must hold distinct values", "3 is at elements 1 and 7"});
  Problem q = specPad();
  q.outIndex = TestTensor::i32({0, 2, 5, 1, 4, 0});
  expectError(q, {"tensor 'out_index' must hold distinct values", "0 is at elements 0 and 5"});
}

TEST(UnpermuteGradErrors, RepeatedMinusOneIsNotADuplicate) {
  Problem p = specNonPad(false);
  p.outIndex = TestTensor::i32({0, -1, 4, 6, 1, -1, 2, -1});
  p.tokenId = p.outIndex;
  for (int64_t i = 0; i < p.T * p.H; ++i)
    p.G.setF32(i, float(i + 1)); // non-zero, so a stray write shows
  checkProblem(p);
  // Spelled out: the referenced rows are copies of their token's grad; rows 3, 5 and 7, which no slot
  // references, stay exactly +0.0 (a kernel that followed a -1 slot would write row -1 or R - 1).
  CpuRunResult r = run(p);
  const HostTensor &dY = r.outputs.at(kDY);
  const int64_t K = p.R / p.T;
  std::vector<int64_t> tokenOf(p.R, -1);
  for (int64_t slot = 0; slot < p.R; ++slot)
    if (int64_t row = p.outIndex.getI32(slot); row >= 0)
      tokenOf[row] = slot / K;
  for (int64_t row = 0; row < p.R; ++row)
    for (int64_t h = 0; h < p.H; ++h) {
      const int64_t i = row * p.H + h;
      if (tokenOf[row] < 0)
        EXPECT_EQ(rawBits(p.dtype, dY.raw(), i), 0u) << "row " << row << " has no slot but is written";
      else
        EXPECT_EQ(loadF32(p.dtype, dY.raw(), i), p.G.getF32(tokenOf[row] * p.H + h)) << "row " << row;
    }
}

TEST(UnpermuteGradErrors, OutIndexOutOfRange) {
  Problem p = specNonPad();
  p.outIndex = TestTensor::i32({0, 3, 4, 8, 1, 7, 2, 5});
  expectError(p, {"tensor 'out_index' element 3 is 8", "outside the valid range [-1, 8)"});
  Problem q = specNonPad();
  q.outIndex = TestTensor::i32({0, 3, 4, 6, -2, 7, 2, 5});
  expectError(q, {"tensor 'out_index' element 4 is -2", "outside the valid range [-1, 8)"});
}

TEST(UnpermuteGradErrors, PermuteTokenIdOutOfRangeInPadMode) {
  Problem p = specPad();
  p.tokenId = TestTensor::i32({0, 0, 0, 1, 2, 4}); // T = 4
  expectError(p, {"tensor 'permute_token_id' element 5 is 4", "outside the valid range [0, 4)"});
  Problem q = specPad();
  q.tokenId = TestTensor::i32({0, 0, -1, 1, 2, 3});
  expectError(q, {"tensor 'permute_token_id' element 2 is -1", "outside the valid range [0, 4)"});
}

TEST(UnpermuteGradErrors, ProbsWithoutPermutedTokens) {
  Problem p = specNonPad();
  p.Y.reset();
  expectError(p, {"probs need permuted_tokens"});
  Problem q = specPad();
  q.Y.reset();
  expectError(q, {"probs need permuted_tokens"});
}

TEST(UnpermuteGradErrors, ProbsWithoutRoutingMapNonPad) {
  Problem p = specNonPad();
  p.map.reset();
  expectError(p, {"probs need routing_map when not padded"});
}

TEST(UnpermuteGradErrors, RNotMultipleOfT) {
  Problem p = specNonPad(false);
  p.outIndex = TestTensor::i32({0, 3, 4, 6, 1, 2, 5});
  p.tokenId = p.outIndex;
  expectError(p, {"out_index must hold K entries per token (R % T == 0)"});
}

TEST(UnpermuteGradErrors, TopKGreaterThanE) {
  // T = 2, E = 3, R = 8: K = 4 > E.
  Problem p;
  p.dtype = DType::F32;
  p.G = TestTensor(DType::F32, {2, 2});
  std::vector<int32_t> idx(8);
  std::iota(idx.begin(), idx.end(), 0);
  p.outIndex = TestTensor::i32(idx);
  p.tokenId = p.outIndex;
  p.map = makeMap({{1, 1, 1}, {1, 1, 1}}, DType::Bool);
  p.Y = TestTensor(DType::F32, {8, 2});
  p.P = TestTensor(DType::F32, {2, 3});
  expectError(p, {"topK (R / T) must be <= 512 and <= the expert count"});
  // Without probs K > E is not checked (nothing indexes experts).
  Problem q = p;
  q.map.reset();
  q.Y.reset();
  q.P.reset();
  EXPECT_NO_THROW(run(q));
}

TEST(UnpermuteGradErrors, CapacityGreaterThanT) {
  // T = 2, E = 3, R = 9: C = 3 > T.
  Problem p;
  p.pad = true;
  p.dtype = DType::F32;
  p.G = TestTensor(DType::F32, {2, 2});
  std::vector<int32_t> idx(9);
  std::iota(idx.begin(), idx.end(), 0);
  p.outIndex = TestTensor::i32(idx);
  p.tokenId = TestTensor::i32({0, 0, 0, 0, 0, 1, 1, 1, 1});
  p.Y = TestTensor(DType::F32, {9, 2});
  p.P = TestTensor(DType::F32, {2, 3});
  expectError(p, {"capacity (R / E) must be whole and <= the token count"});
  // R not a multiple of E in pad mode.
  Problem q = specPad();
  q.outIndex = TestTensor::i32({0, 2, 5, 1, 4, 3, 6});
  q.tokenId = TestTensor::i32({0, 0, 0, 1, 2, 3, 3});
  q.Y = TestTensor(DType::F32, {7, 2});
  expectError(q, {"capacity (R / E) must be whole and <= the token count"});
}

TEST(UnpermuteGradErrors, WrongDtype) {
  Problem p = specNonPad();
  p.P = TestTensor(DType::F16, {4, 3});
  expectError(p, {"tensor 'probs'", "expected dtype f32, got f16"});
  Problem q = specNonPad();
  q.Y = TestTensor(DType::BF16, {8, 2});
  expectError(q, {"tensor 'permuted_tokens'", "expected dtype f32, got bf16"});
  Problem g = specNonPad();
  expectError(g, {"tensor 'unpermuted_tokens_grad'", "expected dtype bf16, got f32"}, DType::BF16);
  Problem i = specNonPad();
  i.outIndex.dtype = DType::F32;
  expectError(i, {"tensor 'out_index'", "expected dtype i32, got f32"});
  Problem m = specNonPad();
  m.map = TestTensor(DType::F32, {4, 3});
  expectError(m, {"tensor 'routing_map'", "got f32"});
}

TEST(UnpermuteGradErrors, UnsupportedOpDtype) {
  Problem p = specNonPad();
  expectError(p, {"dtype i32 is not supported"}, DType::I32);
}

TEST(UnpermuteGradErrors, WrongRank) {
  Problem p = specNonPad();
  p.P->shape = {12};
  expectError(p, {"tensor 'probs'", "expected 2 dims", "got 1 dims [12]"});
  Problem q = specNonPad();
  q.outIndex.shape = {4, 2};
  expectError(q, {"tensor 'out_index'", "expected 1 dims", "got 2 dims [4, 2]"});
  Problem g = specNonPad();
  g.G.shape = {8};
  expectError(g, {"tensor 'unpermuted_tokens_grad'", "got 1 dims [8]"});
}

TEST(UnpermuteGradErrors, WrongShapes) {
  Problem p = specNonPad();
  p.Y = TestTensor(DType::F32, {7, 2});
  expectError(p, {"tensor 'permuted_tokens' dim 0", "expected 8, got 7"});
  Problem q = specNonPad();
  q.P = TestTensor(DType::F32, {4, 4});
  expectError(q, {"tensor 'probs' dim 1", "expected 3, got 4"});
  Problem t = specNonPad();
  t.tokenId = TestTensor::i32({0, 3, 4, 6, 1, 7, 2});
  expectError(t, {"tensor 'permute_token_id' dim 0", "expected 8, got 7"});
}

TEST(UnpermuteGradErrors, MissingInputs) {
  Problem p = specNonPad();
  auto in = p.inputs();
  in.erase(kOutIndex);
  std::string message;
  try {
    runOp(op(), DType::F32, p.attrs(), in);
  } catch (const ArgumentError &e) {
    message = e.what();
  }
  EXPECT_NE(message.find("input tensor 'out_index' is missing"), std::string::npos) << message;
  auto in2 = p.inputs();
  in2.erase(kG);
  message.clear();
  try {
    runOp(op(), DType::F32, p.attrs(), in2);
  } catch (const ArgumentError &e) {
    message = e.what();
  }
  EXPECT_NE(message.find("input tensor 'unpermuted_tokens_grad' is missing"), std::string::npos) << message;
}

TEST(UnpermuteGradErrors, BadDropAndPadValue) {
  Problem p = specNonPad();
  std::string message;
  try {
    runOp(op(), DType::F32, {{"drop_and_pad", 2}}, p.inputs());
  } catch (const ArgumentError &e) {
    message = e.what();
  }
  EXPECT_NE(message.find("attribute 'drop_and_pad' is a bool: expected 0 or 1, got 2"), std::string::npos) << message;
}

//===----------------------------------------------------------------------===//
// 6. Edge cases.
//===----------------------------------------------------------------------===//

TEST(UnpermuteGradEdge, AllSlotsUnusedGivesPositiveZero) {
  for (DType dtype : {DType::F16, DType::BF16, DType::F32}) {
    std::mt19937 rng(7);
    Problem p = makeProblem(Mode::NonPad, true, dtype, 5, 4, 2, 9, rng);
    for (int64_t i = 0; i < p.R; ++i) {
      p.outIndex.setI32(i, -1);
      p.tokenId.setI32(i, -1);
    }
    SCOPED_TRACE(p.describe());
    CpuRunResult r = run(p);
    for (const char *name : {kDY, kDP}) {
      const HostTensor &t = r.outputs.at(name);
      for (int64_t i = 0; i < t.elements(); ++i)
        ASSERT_EQ(rawBits(dtype, t.raw(), i), 0u) << name << " element " << i << " is not +0.0";
    }
  }
}

TEST(UnpermuteGradEdge, ManyTokensAcrossThreads) {
  SEEDED_RNG(rng);
  for (Mode mode : {Mode::NonPad, Mode::NonPadMinus1Keep, Mode::Pad})
    for (bool withProbs : {false, true}) {
      Problem p = makeProblem(mode, withProbs, DType::BF16, 3001, 8, mode == Mode::Pad ? 700 : 2, 17, rng);
      checkProblem(p);
    }
}

TEST(UnpermuteGradEdge, RepeatedRunsAreDeterministicAndInputsUntouched) {
  SEEDED_RNG(rng);
  Problem p = makeProblem(Mode::Pad, true, DType::BF16, 257, 16, 40, 300, rng);
  const auto gBefore = p.G.bytes, yBefore = p.Y->bytes, pBefore = p.P->bytes;
  CpuRunResult a = run(p), b = run(p);
  for (const char *name : {kDY, kDP}) {
    TestTensor copy(DType::BF16, a.outputs.at(name).dims());
    std::memcpy(copy.data(), a.outputs.at(name).raw(), a.outputs.at(name).bytes());
    EXPECT_TRUE(bitsEqual(copy, b.outputs.at(name))) << name << " (second run vs first)";
  }
  EXPECT_EQ(p.G.bytes, gBefore);
  EXPECT_EQ(p.Y->bytes, yBefore);
  EXPECT_EQ(p.P->bytes, pBefore);
}

} // namespace
} // namespace moec::test
