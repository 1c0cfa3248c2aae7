// resolve(): a request checked against its op and completed once, so that the cache key, compile(), the
// loaded op, tuning and bundles all read the same statics and the same optional tensors.
#include "moec/compiler/Pipeline.h"
#include "moec/ops/BuiltinOps.h"
#include "moec/runtime/Bundle.h" // splitRequest

#include <gtest/gtest.h>

#include <string>

using namespace moec;

namespace {

/// The CompileError's message, or "" when `f` throws none.
template <typename F> std::string compileError(F &&f) {
  try {
    f();
  } catch (const CompileError &e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST(Resolve, FillsDefaultsAndNamesAliasesByTheirPublicName) {
  auto op = loadOp("moe_init_routing_v2_grad");
  // top_k is given by its short name K; drop_pad_mode is left to its default.
  ResolvedSpecialization r = resolve(*op, {dsl::DType::BF16, {{"H", 512}, {"K", 8}}, Target::cpu(), {}, {}});
  EXPECT_EQ(r.statics, (std::map<std::string, int64_t>{{"H", 512}, {"top_k", 8}, {"drop_pad_mode", 0}}));
  EXPECT_EQ(r.dtype, dsl::DType::BF16);
  EXPECT_EQ(r.target.str(), "cpu");
  // Written out, the default is the same specialization.
  ResolvedSpecialization explicitDefault =
      resolve(*op, {dsl::DType::BF16, {{"H", 512}, {"top_k", 8}, {"drop_pad_mode", 0}}, Target::cpu(), {}, {}});
  EXPECT_EQ(explicitDefault.statics, r.statics);
}

TEST(Resolve, OptionalOutputsArePresentWhenTheirConditionHolds) {
  auto op = loadOp("moe_token_unpermute_with_routing_map_grad");
  std::map<std::string, int64_t> statics{{"H", 64}, {"E", 8}};
  ResolvedSpecialization without = resolve(*op, {dsl::DType::F32, statics, Target::cpu(), {}, {}});
  EXPECT_TRUE(without.inputs.empty());
  EXPECT_TRUE(without.present.empty());
  std::set<std::string> given{"routing_map", "permuted_tokens", "probs"};
  ResolvedSpecialization with = resolve(*op, {dsl::DType::F32, statics, Target::cpu(), {}, given});
  EXPECT_EQ(with.inputs, given);
  std::set<std::string> present = given;
  present.insert("probs_grad"); // `out probs_grad? when present(probs)`
  EXPECT_EQ(with.present, present);
}

// The runtime splits a request's attributes before resolving it (Runtime::get, bundles, Python): an unknown
// one is refused there, with the same suggestion as resolve()'s.
TEST(Resolve, SplitRequestSuggestsTheNearestAttribute) {
  auto op = loadOp("moe_init_routing_v2_grad");
  auto fails = [&](std::map<std::string, int64_t> attrs) -> std::string {
    std::map<std::string, int64_t> statics, runtimeAttrs;
    try {
      splitRequest(*op, {dsl::DType::BF16, {{"H", 512}}, attrs, {}, {}}, statics, runtimeAttrs);
    } catch (const ArgumentError &e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(fails({{"top_k", 8}, {"active_num", 3}}), "");
  EXPECT_EQ(fails({{"topk", 8}}), "moe_init_routing_v2_grad: unknown attribute 'topk'; did you mean 'top_k'?");
  // Runtime attributes are candidates too, and an alias ('K') is one.
  EXPECT_EQ(fails({{"top_k", 8}, {"active_nun", 3}}),
            "moe_init_routing_v2_grad: unknown attribute 'active_nun'; did you mean 'active_num'?");
  EXPECT_EQ(fails({{"k", 8}}), "moe_init_routing_v2_grad: unknown attribute 'k'; did you mean 'K'?");
  EXPECT_EQ(fails({{"top_k", 8}, {"Q", 1}}), "moe_init_routing_v2_grad: unknown attribute 'Q'");
}

TEST(Resolve, RejectsWhatTheOpDoesNotAllow) {
  auto op = loadOp("moe_init_routing_v2_grad");
  auto fails = [&](Specialization s) { return compileError([&] { (void)resolve(*op, s); }); };
  Specialization ok{dsl::DType::BF16, {{"H", 512}, {"top_k", 8}}, Target::cpu(), {}, {}};
  EXPECT_EQ(fails(ok), "");
  Specialization s = ok;
  s.statics["Q"] = 1;
  EXPECT_NE(fails(s).find("unknown dim or attribute 'Q'"), std::string::npos) << fails(s);
  EXPECT_EQ(fails(s).find("did you mean"), std::string::npos) << fails(s); // no name of the op is near 'Q'
  s = ok;
  s.statics.erase("top_k");
  s.statics["topk"] = 8;
  EXPECT_NE(fails(s).find("unknown dim or attribute 'topk'; did you mean 'top_k'?"), std::string::npos) << fails(s);
  s = ok;
  s.statics.erase("H");
  s.statics["h"] = 512;
  EXPECT_NE(fails(s).find("unknown dim or attribute 'h'; did you mean 'H'?"), std::string::npos) << fails(s);
  s = ok;
  s.statics.erase("top_k");
  EXPECT_NE(fails(s).find("static attribute 'top_k' needs a value"), std::string::npos) << fails(s);
  s = ok;
  s.statics["active_num"] = 3;
  EXPECT_NE(fails(s).find("'active_num' is a runtime attribute"), std::string::npos) << fails(s);
  s = ok;
  s.present = {"grad_x"};
  EXPECT_NE(fails(s).find("'grad_x' is not an optional tensor"), std::string::npos) << fails(s);
  s = ok;
  s.target = Target::ptx("sm_75");
  EXPECT_NE(fails(s).find("sm_75"), std::string::npos) << fails(s);
  s = ok;
  s.schedule.vector = 3;
  EXPECT_NE(fails(s).find("schedule"), std::string::npos) << fails(s);
}

TEST(Resolve, ATunedScheduleIsCheckedLikeARequestedOne) {
  auto op = loadOp("moe_init_routing_v2_grad");
  ResolvedSpecialization r = resolve(*op, {dsl::DType::BF16, {{"H", 512}, {"top_k", 8}}, Target::cpu(), {}, {}});
  Schedule tuned;
  tuned.vector = 16;
  EXPECT_EQ(r.withSchedule(tuned).schedule, tuned);
  EXPECT_EQ(r.withSchedule(tuned).statics, r.statics);
  Schedule bad;
  bad.vector = 3;
  EXPECT_NE(compileError([&] { (void)r.withSchedule(bad); }).find("schedule"), std::string::npos);
}
