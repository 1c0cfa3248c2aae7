//===- OpModes.h - Every op and mode, as random cases of any size, for tests --*- C++ -*-===//
//
// The modes tests run every op through (OptimizationsTest, AscendSimulatorTest): each builds fresh random
// inputs (moec/cases/Cases.h, no reference) for a token count and a row length H.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/cases/Cases.h"

#include <algorithm>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace moec::gpucheck {

struct OpMode {
  std::string name, op;
  std::function<Case(DType, int64_t tokens, int64_t H, std::mt19937 &)> build;
  std::map<std::string, int64_t> extraAttrs;
};

inline void PrintTo(const OpMode &m, std::ostream *os) { *os << m.name; }

/// B2 top-4 (and top-16: longer than the unroll, so the sum over K is compacted), A3 with 40 experts and
/// top-8 or capacity 12 (at most the token count), C2 with 40 experts and top-4.
inline std::vector<OpMode> allOpModes() {
  auto b2 = [](int dropPad, bool active, int64_t topK = 4) {
    return [=](DType t, int64_t n, int64_t h, std::mt19937 &rng) {
      return initRoutingGrad(t, n, topK, h, dropPad, active, rng, false);
    };
  };
  auto a3 = [](bool pad, bool probs) {
    return [=](DType t, int64_t n, int64_t h, std::mt19937 &rng) {
      return pad ? unpermuteGradPad(t, n, 8, std::min<int64_t>(12, n), h, probs, rng, false)
                 : unpermuteGradNonPad(t, n, 40, 8, h, probs, rng, false);
    };
  };
  auto c2 = [](bool weighted) {
    return [=](DType t, int64_t n, int64_t h, std::mt19937 &rng) { return paddleUnpermute(t, n, 40, 4, h, weighted, rng, false); };
  };
  const char *b2op = "moe_init_routing_v2_grad", *a3op = "moe_token_unpermute_with_routing_map_grad",
             *c2op = "moe_unpermute";
  return {{"B2_dropless", b2op, b2(0, false), {}},
          {"B2_active", b2op, b2(0, true), {}},
          {"B2_drop_pad", b2op, b2(1, false), {}},
          {"B2_active_top16", b2op, b2(0, true, 16), {}},
          {"B2_drop_pad_top16", b2op, b2(1, false, 16), {}},
          {"A3_nonpad", a3op, a3(false, false), {}},
          {"A3_nonpad_probs", a3op, a3(false, true), {}},
          {"A3_pad", a3op, a3(true, false), {}},
          {"A3_pad_probs", a3op, a3(true, true), {}},
          {"C2", c2op, c2(false), {}},
          {"C2_weighted", c2op, c2(true), {}},
          {"C2_unmixed", c2op, c2(false), {{"using_mix_precision", 0}}},
          {"C2_weighted_unmixed", c2op, c2(true), {{"using_mix_precision", 0}}},
          {"C2_single_row_copy", c2op, c2(false), {{"paddle_single_row_copy", 1}}},
          {"C2_weighted_single_row_copy", c2op, c2(true), {{"paddle_single_row_copy", 1}}}};
}

} // namespace moec::gpucheck
