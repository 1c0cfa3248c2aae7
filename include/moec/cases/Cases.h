//===- Cases.h - Inputs and plain C++ references for the GPU check -------*- C++ -*-===//
//
// For each op and mode: random inputs shaped the way the forward op would produce them, and an output
// computed by a plain loop from the spec's pseudo-code (f32 accumulation in the spec's order, one
// round-to-nearest-even at the end). LLVM-free and device-free: the GPU check uploads these, and a CPU
// test checks them against the JIT's CPU kernels.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/contracts/Half.h"
#include "moec/runtime/CudaDriver.h"
#include "moec/runtime/DeviceTensors.h"
#include "moec/runtime/HostTensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <stdexcept>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace moec::gpucheck {

/// An output that need not be bit-exact: per element, the exact value and how far from it a result may be.
struct Bound {
  std::vector<double> exact, allowed;
};

/// A call: inputs and attributes for the launch, expected outputs (bit-exact unless `bounds` has the
/// output). Builders skip the reference when `reference` is false (timing runs at production sizes).
struct Case {
  std::map<std::string, HostTensor> inputs, expected;
  std::map<std::string, int64_t> attrs;
  std::map<std::string, Bound> bounds;
  double bytesMoved = 0;   // minimum traffic, for the bandwidth figure
  double bytesWritten = 0; // the part of it that is written (the rest is read)
};

/// The spacing of `dtype`'s values at magnitude |x| (subnormal spacing below the normal range).
inline double ulpAt(DType dtype, double x) {
  const int mantissa = dtype == DType::BF16 ? 7 : dtype == DType::F16 ? 10 : 23;
  const int minExp = dtype == DType::F16 ? -14 : -126;
  const int e = x == 0 ? minExp : std::max(minExp, std::ilogb(x));
  return std::ldexp(1.0, e - mantissa);
}

/// How far an f32-accumulated dot product of terms summing to `exact` in magnitude `sumAbs`, rounded once to
/// `dtype`, may be from `exact`: f32 rounding in any order (H * eps_f32 * sum|terms|, `terms` = H), then
/// half an ulp of the dtype at the result's magnitude.
inline double dotBound(DType dtype, double exact, double sumAbs, int64_t terms) {
  const double accumulation = double(terms) * std::ldexp(1.0, -23) * sumAbs;
  return accumulation + 0.5 * ulpAt(dtype, std::fabs(exact) + accumulation);
}

inline float load(const HostTensor &t, int64_t i) {
  const auto *p = static_cast<const uint8_t *>(t.raw());
  switch (t.type()) {
  case DType::F32: { float f; std::memcpy(&f, p + 4 * i, 4); return f; }
  case DType::BF16: { uint16_t b; std::memcpy(&b, p + 2 * i, 2); return bf16ToFloat(b); }
  case DType::F16: { uint16_t h; std::memcpy(&h, p + 2 * i, 2); return f16ToFloat(h); }
  default: return 0;
  }
}

inline void store(HostTensor &t, int64_t i, float v) {
  auto *p = static_cast<uint8_t *>(t.raw());
  switch (t.type()) {
  case DType::F32: std::memcpy(p + 4 * i, &v, 4); break;
  case DType::BF16: { uint16_t b = floatToBf16(v); std::memcpy(p + 2 * i, &b, 2); break; }
  case DType::F16: { uint16_t h = floatToF16(v); std::memcpy(p + 2 * i, &h, 2); break; }
  default: break;
  }
}

/// `v` rounded to `dtype` (to nearest, ties to even) and back.
inline float roundTo(DType dtype, float v) {
  switch (dtype) {
  case DType::BF16:
    return bf16ToFloat(floatToBf16(v));
  case DType::F16:
    return f16ToFloat(floatToF16(v));
  default:
    return v;
  }
}

inline int32_t *ints(HostTensor &t) { return static_cast<int32_t *>(t.raw()); }

/// Uniform values in [-1, 1). A splitmix64 stream seeded from `rng`: production-size inputs (hundreds of
/// millions of elements) are generated in well under a second each, where mt19937 takes several.
inline HostTensor randomFloats(DType dtype, std::vector<int64_t> shape, std::mt19937 &rng) {
  HostTensor t(dtype, std::move(shape));
  uint64_t state = (uint64_t(rng()) << 32) | rng();
  for (int64_t i = 0; i < t.elements(); ++i) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    store(t, i, float(int32_t(z >> 32)) * 0x1p-31f); // 24 significant bits of a uniform int32
  }
  return t;
}

/// B2 (moe_init_routing_v2_grad): N tokens, each routed to K distinct experts of E (0: max(8, K)), chosen at
/// random; expanded_row_idx holds each slot's row in B1's layout, expert-major and then in slot order, as a
/// real routing makes it: dropless R = N*K rows; active, the first half of them (the later experts' rows are
/// not live); drop/pad, a capacity C = N*K/E rows per expert (at least 1), later slots dropped (-1).
inline Case initRoutingGrad(DType dtype, int64_t N, int64_t K, int64_t H, int dropPad, bool active, std::mt19937 &rng,
                            bool reference = true, int64_t E = 0) {
  Case c;
  E = E ? E : std::max<int64_t>(8, K);
  if (K > E)
    throw std::invalid_argument("B2's routing needs top_k <= experts, got top_k " + std::to_string(K) +
                                " of " + std::to_string(E) + " experts");
  int64_t C = std::max<int64_t>(1, N * K / E), R = dropPad ? E * C : active ? N * K / 2 : N * K;
  std::vector<int64_t> ofSlot(N * K), experts(E), routed(E, 0);
  for (int64_t n = 0; n < N; ++n) {
    std::iota(experts.begin(), experts.end(), 0);
    std::shuffle(experts.begin(), experts.end(), rng);
    for (int64_t k = 0; k < K; ++k)
      ++routed[ofSlot[n * K + k] = experts[k]];
  }
  std::vector<int64_t> first(E, 0), rank(E, 0); // where each expert's rows start, and how many it has so far
  for (int64_t e = 1; e < E; ++e)
    first[e] = first[e - 1] + routed[e - 1];
  HostTensor idx(DType::I32, {N * K});
  for (int64_t j = 0; j < N * K; ++j) {
    int64_t e = ofSlot[j], r = rank[e]++;
    ints(idx)[j] = int32_t(!dropPad ? first[e] + r : r < C ? e * C + r : -1);
  }
  HostTensor grad = dropPad ? randomFloats(dtype, {E, C, H}, rng) : randomFloats(dtype, {R, H}, rng);
  HostTensor out(dtype, {N, H});
  for (int64_t n = 0; n < N && reference; ++n)
    for (int64_t h = 0; h < H; ++h) {
      float acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        int64_t r = ints(idx)[n * K + k];
        if ((dropPad && r >= 0) || (!dropPad && (!active || r < R)))
          acc += load(grad, r * H + h);
      }
      store(out, n * H + h, acc);
    }
  c.attrs = {{"top_k", K}, {"drop_pad_mode", dropPad}, {"active_num", active ? R : 0}};
  c.bytesMoved = double(grad.bytes() + idx.bytes() + out.bytes());
  c.bytesWritten = double(out.bytes());
  c.inputs.emplace("grad_expanded_x", std::move(grad));
  c.inputs.emplace("expanded_row_idx", std::move(idx));
  c.expected.emplace("grad_x", std::move(out));
  return c;
}

/// One slot of A3: token `tok`'s gradient goes to permuted row `row`, for expert `e`.
struct Slot {
  int64_t tok, row, e;
};

/// The A3 case shared by both modes: random gradient, permuted tokens and probs; the reference writes
/// each slot's row dY = G[tok] * P[tok, e] (a copy without probs) and dP[tok, e] = Y[row] . G[tok].
inline Case unpermuteGradCase(DType dtype, int64_t T, int64_t E, int64_t H, bool probs, bool pad,
                              const std::vector<Slot> &slots, HostTensor outIndex, HostTensor tokenIds,
                              HostTensor routingMap, std::mt19937 &rng, bool reference) {
  Case c;
  int64_t R = outIndex.elements();
  HostTensor g = randomFloats(dtype, {T, H}, rng), y = randomFloats(dtype, {R, H}, rng);
  HostTensor p = randomFloats(dtype, {T, E}, rng), dy(dtype, {R, H}), dp(dtype, {T, E});
  // probs_grad: exact (double) dots; pairs no slot holds must be exactly zero (allowed 0).
  Bound dpBound{std::vector<double>(reference ? T * E : 0, 0.0), std::vector<double>(reference ? T * E : 0, 0.0)};
  for (size_t i = 0; i < slots.size() && reference; ++i) {
    const Slot &s = slots[i];
    double dot = 0, sumAbs = 0;
    for (int64_t h = 0; h < H; ++h) {
      float gv = load(g, s.tok * H + h);
      store(dy, s.row * H + h, probs ? gv * load(p, s.tok * E + s.e) : gv);
      dot += double(load(y, s.row * H + h)) * gv;
      sumAbs += std::fabs(double(load(y, s.row * H + h)) * gv);
    }
    if (probs)
      store(dp, s.tok * E + s.e, float(dot));
    dpBound.exact[s.tok * E + s.e] = dot;
    dpBound.allowed[s.tok * E + s.e] = dotBound(dtype, dot, sumAbs, H);
  }
  // The least any kernel moves: every row of dY written, each routed token's gradient row read once (its
  // slots may share one read), and with probs each slot's permuted row. (Counting a read of G per slot
  // overstated it by up to 1.8x at top-8: R = 8 Tk.)
  std::set<int64_t> routed;
  for (const Slot &s : slots)
    routed.insert(s.tok);
  int64_t rowBytes = H * dsl::dtypeBytes(dtype);
  c.bytesMoved = double(dy.bytes() + int64_t(routed.size()) * rowBytes + (probs ? int64_t(slots.size()) * rowBytes : 0));
  c.bytesWritten = double(dy.bytes());
  c.inputs.emplace("unpermuted_tokens_grad", std::move(g));
  c.inputs.emplace("out_index", std::move(outIndex));
  c.inputs.emplace("permute_token_id", std::move(tokenIds));
  c.expected.emplace("permuted_tokens_grad", std::move(dy));
  if (probs) {
    if (!pad)
      c.inputs.emplace("routing_map", std::move(routingMap));
    c.inputs.emplace("permuted_tokens", std::move(y));
    c.inputs.emplace("probs", std::move(p));
    c.expected.emplace("probs_grad", std::move(dp));
    // The kernel sums the dot product in another order (lanes, vectors): within dotBound of the exact dot.
    c.bounds["probs_grad"] = std::move(dpBound);
  }
  c.attrs = {{"drop_and_pad", pad}};
  return c;
}

/// A3 (moe_token_unpermute_with_routing_map_grad), non-pad: each token picks K of E experts at random;
/// out_index and permute_token_id are both A1's sortedIndices, the permuted row of each token-major slot.
/// A1 lays the rows out expert-major, each expert's tokens in ascending order (a token's K rows are in K
/// experts' stretches, each written in order), as a real routing does; `shuffledRows` permutes the rows at
/// random instead (for tests: no order a kernel could rely on).
inline Case unpermuteGradNonPad(DType dtype, int64_t T, int64_t E, int64_t K, int64_t H, bool probs,
                                std::mt19937 &rng, bool reference = true, bool shuffledRows = false) {
  int64_t R = T * K;
  HostTensor outIndex(DType::I32, {R}), tokenIds(DType::I32, {R}), map(DType::Bool, {T, E});
  std::vector<int64_t> experts(E), chosen(R), next(E + 1, 0);
  for (int64_t t = 0; t < T; ++t) {
    std::iota(experts.begin(), experts.end(), 0);
    std::shuffle(experts.begin(), experts.end(), rng);
    std::sort(experts.begin(), experts.begin() + K); // the k-th selected expert is the k-th set column
    for (int64_t k = 0; k < K; ++k) {
      static_cast<uint8_t *>(map.raw())[t * E + experts[k]] = 1;
      chosen[t * K + k] = experts[k];
      ++next[experts[k] + 1];
    }
  }
  std::partial_sum(next.begin(), next.end(), next.begin()); // each expert's first row
  for (int64_t i = 0; i < R; ++i)
    ints(outIndex)[i] = int32_t(next[chosen[i]]++);
  if (shuffledRows) {
    std::vector<int32_t> permutation(R);
    std::iota(permutation.begin(), permutation.end(), 0);
    std::shuffle(permutation.begin(), permutation.end(), rng);
    for (int64_t i = 0; i < R; ++i)
      ints(outIndex)[i] = permutation[ints(outIndex)[i]];
  }
  std::memcpy(tokenIds.raw(), outIndex.raw(), outIndex.bytes());
  std::vector<Slot> slots;
  for (int64_t i = 0; i < R; ++i)
    slots.push_back({i / K, ints(outIndex)[i], chosen[i]});
  return unpermuteGradCase(dtype, T, E, H, probs, false, slots, std::move(outIndex), std::move(tokenIds),
                           std::move(map), rng, reference);
}

/// A3 pad mode's case from the token each permuted row holds (E experts' rows of R / E each): out_index orders
/// the rows by token id (stable), permute_token_id holds those token ids. With `dropOneIn` n > 0 a slot is
/// dropped (out_index -1: its row stays the fill's zeros) with probability 1 / n.
inline Case padCaseFromRows(DType dtype, int64_t T, int64_t E, int64_t H, bool probs,
                            const std::vector<int32_t> &tokenOfRow, std::mt19937 &rng, bool reference = true,
                            int dropOneIn = 0) {
  int64_t R = int64_t(tokenOfRow.size()), C = R / E;
  HostTensor outIndex(DType::I32, {R}), tokenIds(DType::I32, {R});
  std::iota(ints(outIndex), ints(outIndex) + R, 0);
  // Stable by token (rows of one token in row order); std::stable_sort would warn here (libstdc++ 12's
  // deprecated get_temporary_buffer under clang).
  std::sort(ints(outIndex), ints(outIndex) + R,
            [&](int32_t a, int32_t b) { return std::make_pair(tokenOfRow[a], a) < std::make_pair(tokenOfRow[b], b); });
  std::vector<Slot> slots;
  for (int64_t i = 0; i < R; ++i) {
    int32_t row = ints(outIndex)[i];
    ints(tokenIds)[i] = tokenOfRow[row];
    if (dropOneIn > 0 && rng() % dropOneIn == 0)
      ints(outIndex)[i] = -1;
    else
      slots.push_back({tokenOfRow[row], row, row / C});
  }
  return unpermuteGradCase(dtype, T, E, H, probs, true, slots, std::move(outIndex), std::move(tokenIds),
                           HostTensor(DType::Bool, {T, E}), rng, reference);
}

/// A3 pad mode (Megatron's drop-and-pad): C = capacity rows per expert; each expert keeps its routed
/// tokens with the lowest ids, and an under-full expert is filled with the lowest ids not routed to it.
/// out_index orders the permuted rows by token id (stable), permute_token_id holds those token ids. Each
/// token is routed to `topK` experts at random (a router's top-K), or with `topK` 0 to each expert with
/// probability 0.3 (tests: a token's count of slots varies more).
inline Case unpermuteGradPad(DType dtype, int64_t T, int64_t E, int64_t C, int64_t H, bool probs, std::mt19937 &rng,
                             bool reference = true, int64_t topK = 0) {
  int64_t R = E * C;
  std::vector<uint8_t> routed(T * E);
  std::bernoulli_distribution pick(0.3);
  std::vector<int64_t> experts(E);
  for (int64_t t = 0; t < T; ++t) {
    std::iota(experts.begin(), experts.end(), 0);
    std::shuffle(experts.begin(), experts.end(), rng);
    for (int64_t e = 0; e < E; ++e)
      routed[t * E + experts[e]] = topK ? e < topK : pick(rng);
  }
  std::vector<int32_t> tokenOfRow(R);
  for (int64_t e = 0; e < E; ++e) {
    int64_t filled = 0;
    for (int want : {1, 0}) // routed tokens first, then fillers, each in ascending token order
      for (int64_t t = 0; t < T && filled < C; ++t)
        if (routed[t * E + e] == want)
          tokenOfRow[e * C + filled++] = int32_t(t);
  }
  return padCaseFromRows(dtype, T, E, H, probs, tokenOfRow, rng, reference);
}

/// C2 (moe_unpermute): the layout of C1 (experts ascending, tokens ascending, rows padded to a
/// multiple of 2 and never read), combined unweighted or weighted. With `everyCount`, token t is routed to
/// t % (K + 1) experts only (its other slots -1), so that the tokens run every count of live experts.
/// Without `mixPrecision` the sum accumulates in the dtype, rounded after every add (or fma).
inline Case paddleUnpermute(DType dtype, int64_t T, int64_t E, int64_t K, int64_t H, bool weighted, std::mt19937 &rng,
                            bool reference = true, bool everyCount = false, bool mixPrecision = true) {
  Case c;
  HostTensor routemap(DType::I32, {T, K}), probsTopk(DType::F32, {T, K});
  std::vector<int64_t> count(E, 0), experts(E);
  std::uniform_real_distribution<float> prob(0, 1);
  for (int64_t t = 0; t < T; ++t) {
    std::iota(experts.begin(), experts.end(), 0);
    std::shuffle(experts.begin(), experts.end(), rng);
    for (int64_t k = 0; k < K; ++k) {
      int32_t e = k < E && (!everyCount || k < t % (K + 1)) ? int32_t(experts[k]) : -1;
      ints(routemap)[t * K + k] = e;
      static_cast<float *>(probsTopk.raw())[t * K + k] = e >= 0 ? prob(rng) : 0;
      count[std::max(e, 0)] += e >= 0;
    }
  }
  std::vector<int64_t> offset(E + 1, 0);
  for (int64_t e = 0; e < E; ++e)
    offset[e + 1] = offset[e] + (count[e] + 1) / 2 * 2;
  int64_t R = offset[E];
  HostTensor rowmap(DType::I32, {T, E}), pu(DType::F32, {R}), yu = randomFloats(dtype, {R, H}, rng);
  std::fill(ints(rowmap), ints(rowmap) + T * E, -1);
  std::vector<int64_t> next(offset.begin(), offset.end() - 1);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k)
      if (int32_t e = ints(routemap)[t * K + k]; e >= 0) {
        ints(rowmap)[t * E + e] = int32_t(next[e]);
        static_cast<float *>(pu.raw())[next[e]++] = static_cast<float *>(probsTopk.raw())[t * K + k];
      }
  HostTensor out(dtype, {T, H});
  for (int64_t t = 0; t < T && reference; ++t)
    for (int64_t h = 0; h < H; ++h) {
      float acc = 0;
      for (int64_t e = 0; e < E; ++e)
        if (int32_t r = ints(rowmap)[t * E + e]; r >= 0) {
          acc = weighted ? std::fma(load(yu, r * H + h), static_cast<float *>(pu.raw())[r], acc)
                         : acc + load(yu, r * H + h);
          acc = mixPrecision ? acc : roundTo(dtype, acc);
        }
      store(out, t * H + h, acc);
    }
  c.attrs = {{"using_weighted_combine", weighted}};
  if (!mixPrecision)
    c.attrs["using_mix_precision"] = 0;
  c.bytesMoved = double(T * K * H * dsl::dtypeBytes(dtype) + out.bytes());
  c.bytesWritten = double(out.bytes());
  c.inputs.emplace("hidden_states_unzipped", std::move(yu));
  c.inputs.emplace("zipped_expertwise_rowmap", std::move(rowmap));
  c.inputs.emplace("expert_routemap_topk", std::move(routemap));
  c.inputs.emplace("token_prob_unzipped", std::move(pu));
  c.expected.emplace("hidden_states", std::move(out));
  c.expected.emplace("expert_prob_topk", std::move(probsTopk));
  return c;
}

/// The worst |got - expected| / max(1, |expected|) over a tensor, or -1 for a NaN mismatch.
inline double worstError(const HostTensor &got, const HostTensor &expected) {
  if (got.type() == DType::I32 || got.type() == DType::I8 || got.type() == DType::Bool)
    return std::memcmp(got.raw(), expected.raw(), got.bytes()) == 0 ? 0 : 1;
  double worst = 0;
  for (int64_t i = 0; i < got.elements(); ++i) {
    double g = load(got, i), e = load(expected, i);
    if (std::isnan(g) != std::isnan(e))
      return -1;
    if (!std::isnan(e))
      worst = std::max(worst, std::abs(g - e) / std::max(1.0, std::abs(e)));
  }
  return worst;
}

/// The worst |got - exact| / allowed over the elements (<= 1 passes; a difference where 0 is allowed, or a
/// non-finite result, gives infinity).
inline double worstExcess(const HostTensor &got, const Bound &bound) {
  double worst = 0;
  for (int64_t i = 0; i < got.elements(); ++i) {
    double g = load(got, i), off = std::fabs(g - bound.exact[i]);
    if (!std::isfinite(g))
      return INFINITY;
    if (off > 0)
      worst = std::max(worst, bound.allowed[i] > 0 ? off / bound.allowed[i] : INFINITY);
  }
  return worst;
}

/// Checks output `name` of `c`: {error, allowed}, failing when error > allowed or error < 0 (NaN mismatch).
/// Bit-exact outputs allow 0 (error relative to max(1, |expected|)); bounded ones 1 (error / bound).
inline std::pair<double, double> outputError(const Case &c, const std::string &name, const HostTensor &got) {
  if (auto b = c.bounds.find(name); b != c.bounds.end())
    return {worstExcess(got, b->second), 1.0};
  return {worstError(got, c.expected.at(name)), 0.0};
}

/// Spec §8.1: DeepSeek-V3 (H 7168) at 4096 tokens, Qwen3 / Mixtral (H 4096) at 8192, else 8192.
inline int64_t productionTokens(int64_t H) { return H == 7168 ? 4096 : 8192; }

/// The statics key of A3's routing top-K (`moec bench --topk`): A3 has no top-K of its own (R = tokens x K
/// at run time), so the inputs choose one.
constexpr const char *kRoutingTopK = "routing_top_k";
/// The statics key of B2's expert count (`moec bench --experts`): B2 has no E, so the inputs choose one.
constexpr const char *kRoutingExperts = "routing_experts";

/// The case of `op` specialized to `statics` (static dims and attributes by public name) with the optional
/// inputs `present`, at `tokens` tokens; `active`: B2's active_num mode. A3 routes each token to K experts,
/// statics[kRoutingTopK] or 8 (E when fewer): dropless, K slots per token; drop_and_pad, a capacity of
/// tokens x K / E rows per expert.
inline Case caseFor(const std::string &op, DType dtype, const std::map<std::string, int64_t> &statics,
                    const std::set<std::string> &present, int64_t tokens, bool active, std::mt19937 &rng,
                    bool reference = true) {
  auto get = [&](const char *name, int64_t fallback) {
    auto it = statics.find(name);
    return it == statics.end() ? fallback : it->second;
  };
  const int64_t H = get("H", 0);
  if (op == "moe_init_routing_v2_grad")
    return initRoutingGrad(dtype, tokens, get("top_k", 1), H, int(get("drop_pad_mode", 0)), active, rng, reference,
                           get(kRoutingExperts, 0));
  const int64_t E = get("E", 8);
  const int64_t K = get(kRoutingTopK, std::min<int64_t>(8, E));
  if (op == "moe_token_unpermute_with_routing_map_grad" && (K < 1 || K > E))
    throw std::invalid_argument("A3's routing top-K must be in [1, E = " + std::to_string(E) + "], got " +
                                std::to_string(K));
  if (op == "moe_token_unpermute_with_routing_map_grad" && get("drop_and_pad", 0))
    return unpermuteGradPad(dtype, tokens, E, std::max<int64_t>(1, tokens * K / E), H, present.count("probs") > 0, rng,
                            reference, K);
  if (op == "moe_token_unpermute_with_routing_map_grad")
    return unpermuteGradNonPad(dtype, tokens, E, K, H, present.count("probs") > 0, rng, reference);
  if (op == "moe_unpermute")
    return paddleUnpermute(dtype, tokens, E, get("K", 1), H, get("using_weighted_combine", 0) != 0, rng, reference,
                           /*everyCount=*/false, get("using_mix_precision", 1) != 0);
  throw std::invalid_argument("no benchmark inputs for op '" + op + "' (built-in ops only)");
}

/// "drop_pad_mode,+probs,active": the attributes set, the optional tensors present, the variant.
inline std::string modeName(const std::map<std::string, int64_t> &statics, const std::set<std::string> &present,
                            bool active) {
  std::string m;
  for (const char *a : {"drop_pad_mode", "drop_and_pad", "using_weighted_combine"})
    if (auto it = statics.find(a); it != statics.end() && it->second)
      m += std::string(m.empty() ? "" : ",") + a;
  for (const std::string &p : present)
    m += (m.empty() ? "+" : ",+") + p;
  if (active)
    m += m.empty() ? "active" : ",active";
  return m.empty() ? "default" : m;
}

/// Seconds of one call of `f` on stream 0, between two CUDA events.
template <typename F> double eventSeconds(const CudaDriver &d, F &&f) {
  CUevent start, stop;
  d.check(d.api().eventCreate(&start, 0), "cuEventCreate");
  d.check(d.api().eventCreate(&stop, 0), "cuEventCreate");
  d.check(d.api().eventRecord(start, nullptr), "cuEventRecord");
  f();
  d.check(d.api().eventRecord(stop, nullptr), "cuEventRecord");
  d.check(d.api().eventSynchronize(stop), "cuEventSynchronize");
  float ms = 0;
  d.check(d.api().eventElapsedTime(&ms, start, stop), "cuEventElapsedTime");
  d.api().eventDestroy(start);
  d.api().eventDestroy(stop);
  return 1e-3 * ms;
}

/// A case's tensors on a device (a GPU or the PTX emulator): inputs copied, outputs filled with 0xFF bytes
/// (NaN in every float type), so an element the kernel never writes fails the comparison.
struct DeviceCall {
  DeviceTensors device;
  std::map<std::string, TensorView> tensors;

  DeviceCall(const CudaDriver &driver, const Case &c) : device(driver) {
    for (const auto &[name, t] : c.inputs)
      tensors[name] = device.upload(t);
    for (const auto &[name, t] : c.expected)
      tensors[name] = device.allocate(t.type(), t.dims(), 0xFF);
  }
  HostTensor download(const std::string &name) const { return device.download(tensors.at(name)); }
};

} // namespace moec::gpucheck
