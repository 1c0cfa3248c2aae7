//===- AscendPlannerTest.cpp - Ascend plans through the C++ API: caches and keys ---===//
#include "moec/jit/AscendPlanner.h"
#include "TempDir.h"
#include "moec/compiler/Pipeline.h"
#include "moec/ops/BuiltinOps.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <unistd.h>

namespace moec {
namespace {

namespace fs = std::filesystem;

fs::path freshPlanDir(const std::string &tag) { return moec::tests::freshTempDir("plan-" + tag); }

/// A planner on 910B with its own cache directory, collecting warnings.
struct TestPlanner {
  fs::path dir;
  std::vector<std::string> warnings;
  std::unique_ptr<AscendPlanner> planner;
  explicit TestPlanner(fs::path cacheDir, ascend::Chip chip = ascend::builtinChip("910b"), size_t maxPlans = 256)
      : dir(std::move(cacheDir)) {
    AscendPlanner::Options o;
    o.cacheDir = dir;
    o.maxPlans = maxPlans;
    o.warn = [this](const std::string &w) { warnings.push_back(w); };
    planner = std::make_unique<AscendPlanner>(std::move(chip), o);
  }
  std::shared_ptr<const ascend::Plan> b2(int64_t n, int64_t h = 7168) {
    return planner->plan("moe_init_routing_v2_grad",
                         {dsl::DType::BF16, {{"N", n}, {"H", h}}, {{"top_k", 8}}, {}});
  }
};

TEST(AscendPlanner, CompilesOncePerSpecializationAndKeepsRecentPlans) {
  TestPlanner t(freshPlanDir("once"));
  auto first = t.b2(4096);
  EXPECT_EQ(t.planner->stats().compiles, 1u);
  EXPECT_EQ(first->tilingKey, 1002);
  ASSERT_EQ(first->kernels.size(), 1u);
  EXPECT_EQ(first->kernels[0].blockDim, 40);
  EXPECT_EQ(first->kernels[0].rowsPerFormerCore, 103);
  EXPECT_EQ(t.b2(4096), first); // the same call: the kept plan
  EXPECT_EQ(t.planner->stats().planHits, 1u);
  auto other = t.b2(80); // a new token count: no compile, a new split
  EXPECT_EQ(t.planner->stats().compiles, 1u);
  EXPECT_EQ(t.planner->stats().tilingHits, 1u);
  EXPECT_EQ(other->kernels[0].rowsPerFormerCore, 2);
  t.b2(80, 4096); // a new static H: a new specialization
  EXPECT_EQ(t.planner->stats().compiles, 2u);
  EXPECT_TRUE(t.warnings.empty());
}

TEST(AscendPlanner, ANewPlannerReadsTheTilingsFromDisk) {
  fs::path dir = freshPlanDir("disk");
  nlohmann::json compiled;
  {
    TestPlanner t(dir);
    compiled = ascend::planToJson(*t.b2(1000));
  }
  TestPlanner again(dir);
  auto plan = again.b2(1000);
  EXPECT_EQ(again.planner->stats().compiles, 0u);
  EXPECT_EQ(again.planner->stats().diskHits, 1u);
  EXPECT_EQ(ascend::planToJson(*plan), compiled);
}

TEST(AscendPlanner, EveryFigureOfTheChipIsInTheKey) {
  fs::path dir = freshPlanDir("chip");
  ascend::Chip chip = ascend::builtinChip("910b");
  std::unique_ptr<dsl::OpDef> op = loadOp("moe_init_routing_v2_grad");
  std::string source = findBuiltinOp("moe_init_routing_v2_grad")->source;
  ResolvedSpecialization spec = resolve(*op, {dsl::DType::BF16, {{"H", 64}, {"top_k", 8}}, Target::ascend(chip), {}, {}});
  std::string key = AscendPlanner(chip).cacheKey(*op, source, spec);
  for (auto change : std::vector<std::function<void(ascend::Chip &)>>{
           [](ascend::Chip &c) { c.vectorCores = 48; }, [](ascend::Chip &c) { c.ubBytes = 65536; },
           [](ascend::Chip &c) { c.maxCopyBytes = 32768; }, [](ascend::Chip &c) { c.dataCopyNs = 500; }}) {
    ascend::Chip changed = chip;
    change(changed);
    EXPECT_NE(AscendPlanner(changed).cacheKey(*op, source, spec), key);
  }
  // A planner for another UB makes its own tilings rather than reading the 910B ones.
  TestPlanner t(dir);
  t.b2(100, 16384);
  ascend::Chip small = chip;
  small.ubBytes = 65536;
  TestPlanner s(dir, small);
  auto plan = s.b2(100, 16384);
  EXPECT_EQ(s.planner->stats().compiles, 1u);
  EXPECT_LE(plan->kernels[0].ubBytesUsed, 65536);
}

TEST(AscendPlanner, ACorruptTilingIsReportedRemovedAndRebuilt) {
  fs::path dir = freshPlanDir("corrupt");
  { TestPlanner(dir).b2(512); }
  // Every tiling.json in the cache gets a chunk bigger than the UB.
  int edited = 0;
  for (const fs::directory_entry &e : fs::recursive_directory_iterator(dir))
    if (e.path().filename() == "tiling.json") {
      std::ifstream in(e.path());
      nlohmann::json j = nlohmann::json::parse(in);
      j[0]["chunk"] = 1 << 20;
      j[0]["chunks"] = 1;
      std::ofstream(e.path()) << j.dump();
      ++edited;
    }
  ASSERT_EQ(edited, 1);
  TestPlanner t(dir);
  auto plan = t.b2(512);
  EXPECT_EQ(t.planner->stats().compiles, 1u); // the entry did not pass its checksum or its checks
  ASSERT_FALSE(t.warnings.empty());
  EXPECT_EQ(plan->kernels[0].tiling.chunk, 7168);
}

TEST(AscendPlanner, KeepsAtMostMaxPlans) {
  TestPlanner t(freshPlanDir("lru"), ascend::builtinChip("910b"), 2);
  auto a = t.b2(10);
  t.b2(20);
  t.b2(10); // a is the most recent again
  t.b2(30); // evicts 20
  EXPECT_EQ(t.b2(10), a);
  EXPECT_EQ(t.planner->stats().planHits, 2u);
  t.b2(20);
  EXPECT_EQ(t.planner->stats().planHits, 2u); // made again
}

TEST(AscendPlanner, MissingDimsAndBadSpecializationsAreClearErrors) {
  TestPlanner t(freshPlanDir("errors"));
  EXPECT_THROW(t.planner->plan("moe_init_routing_v2_grad", {dsl::DType::BF16, {{"H", 64}}, {{"top_k", 8}}, {}}),
               std::invalid_argument); // N missing
  EXPECT_THROW(t.planner->plan("moe_init_routing_v2_grad", {dsl::DType::I32, {{"N", 8}, {"H", 64}}, {{"top_k", 8}}, {}}),
               CompileError);
}

} // namespace
} // namespace moec
