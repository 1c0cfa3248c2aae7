//===- AscendTuningTest.cpp - Autotuning on Ascend: UB plan knobs, model-ranked sweeps, tuned plans -===//
//
// The Ascend space's configs print and parse, and the row and the chip prune what they rule out (that its
// sampled configs give every op the heuristic's bytes is TunerTest's EveryConfig); a sweep ranks configs
// by the plans' cost on the chip and checks their tiled kernels; a tuning file is used by AscendPlanner,
// `moec plan`'s lookup and the Runtime's simulated kernels per token bucket; the cost model overlaps
// double-buffered passes, and a plan keeps several passes per core when that overlap pays.
//===----------------------------------------------------------------------===//
#include "TempDir.h"
#include "moec/jit/TuneCalls.h"

#include "moec/jit/AscendPlanner.h"
#include "moec/jit/Autotuning.h"
#include "moec/jit/CpuRun.h"
#include "moec/jit/Runtime.h"
#include "moec/jit/Tuner.h"
#include "moec/ops/BuiltinOps.h"
#include "moec/runtime/ascend/SimLauncher.h"
#include "moec/tune/ConfigSpace.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace moec;
using namespace moec::gpucheck;

namespace {

fs::path freshDir(const std::string &tag) { return moec::tests::freshTempDir("ascend-tune-" + tag); }

const ascend::Chip &chip910b() {
  static const ascend::Chip chip = ascend::builtinChip("910b");
  return chip;
}

TEST(AscendConfigs, EveryConfigOfTheSpaceRoundTrips) {
  std::vector<Schedule> space = tune::configSpace(TargetKind::Ascend);
  ASSERT_GT(space.size(), 20u);
  std::set<std::string> texts;
  for (const Schedule &s : space) {
    std::string text = tune::configText(s);
    EXPECT_EQ(text.rfind("buffers=", 0), 0u) << text;
    EXPECT_TRUE(texts.insert(text).second) << "two configs print as " << text;
    EXPECT_EQ(tune::parseConfig(text), s) << text;
    EXPECT_EQ(scheduleProblem(s, TargetKind::Ascend, /*requested=*/true), "") << text;
    EXPECT_NE(scheduleProblem(s, TargetKind::CPU, /*requested=*/true), "") << text << " is not a CPU schedule";
  }
  Schedule s = tune::parseConfig("rows=64,chunk=4096,buffers=2");
  EXPECT_EQ(s.buffers, 2);
  EXPECT_EQ(s.chunk, 4096);
  EXPECT_EQ(s.rowsPerBlock, 64);
  EXPECT_EQ(tune::configText(s), "buffers=2,chunk=4096,rows=64");
  EXPECT_NE(s.str(), Schedule{}.str()) << "the knobs are part of the cache key";
  EXPECT_NE(tune::parseConfig("buffers=1,chunk=4096,rows=64").str(), s.str());
}

TEST(AscendConfigs, TheRowAndTheChipPruneWhatTheyRuleOut) {
  tune::ShapeFacts bf16Row7168{7168, 2, 196352, 65536}, f32Row100{100, 4, 196352, 65536};
  auto pruned = [](const std::string &text, const tune::ShapeFacts &f) {
    return tune::prunedBecause(tune::parseConfig(text), TargetKind::Ascend, f);
  };
  EXPECT_EQ(pruned("buffers=2,chunk=2048,rows=1", bf16Row7168), "");
  EXPECT_EQ(pruned("buffers=1,chunk=8192,rows=64", bf16Row7168), "") << "the least cap that holds the row";
  EXPECT_NE(pruned("buffers=1,chunk=16384,rows=64", bf16Row7168).find("holds the whole row (7168), as chunk=8192"),
            std::string::npos);
  EXPECT_NE(pruned("buffers=2,chunk=2048,rows=8", bf16Row7168).find("only when a row is one chunk"), std::string::npos);
  EXPECT_EQ(pruned("buffers=2,chunk=256,rows=512", f32Row100), "") << "256 holds a row of 100";
  EXPECT_NE(pruned("buffers=2,chunk=512,rows=1", f32Row100).find("as chunk=256 does"), std::string::npos);
  EXPECT_NE(pruned("buffers=2,chunk=32768,rows=1", {65536, 4, 196352, 65536}).find("exceed one DataCopy"),
            std::string::npos);
  EXPECT_NE(pruned("buffers=2,chunk=16384,rows=1", {65536, 4, 100000, 65536}).find("exceed the 100000-byte UB"),
            std::string::npos);
  EXPECT_NE(pruned("buffers=3,chunk=256,rows=1", f32Row100).find("'buffers': 3"), std::string::npos);
}

AscendPlanner::Options plannerOptions(const fs::path &cache, bool autotune, std::vector<std::string> *warnings = nullptr) {
  AscendPlanner::Options o;
  o.cacheDir = cache;
  o.autotune = autotune;
  o.warn = [warnings](const std::string &line) {
    if (warnings)
      warnings->push_back(line);
  };
  return o;
}

const KernelRequest kB2{DType::BF16, {{"H", 1100}}, {{"top_k", 2}}};

PlanCall b2Call(int64_t tokens, const Schedule &schedule = {}) {
  return {DType::BF16, {{"N", tokens}, {"R", 2 * tokens}, {"H", 1100}}, {{"top_k", 2}}, {}, {}, schedule};
}

// A sweep ranks the configs by the plans' cost on the chip, once each (the model is deterministic), and
// checks their tiled kernels on the simulator; what it stores is what the planner gives.
TEST(AscendTuner, RanksConfigsByThePlansCostAndChecksTheirKernels) {
  fs::path dir = freshDir("sweep");
  Runtime::Options options;
  options.target = Target::ascendSimulator(chip910b());
  options.cacheDir = dir;
  options.autotune = false;
  options.warn = [](const std::string &) {};
  Runtime rt(options);
  AscendPlanner planner(chip910b(), plannerOptions(dir, false));
  std::mt19937 rng(std::random_device{}());
  std::unique_ptr<AscendTuneCall> holder;
  TuneOptions o;
  o.tokens = {5, 300};
  o.configs = tune::configSpace(TargetKind::Ascend);
  TuneResult r = tuneOp(rt, "moe_init_routing_v2_grad", kB2, o, [&](int64_t tokens) -> TuneCall & {
    holder = std::make_unique<AscendTuneCall>(initRoutingGrad(DType::BF16, tokens, 2, 1100, 0, false, rng, false),
                                              planner, "moe_init_routing_v2_grad", DType::BF16, std::set<std::string>{});
    return holder->call;
  });
  EXPECT_EQ(r.file.key.target, "ascend-910b");
  size_t timed = 0, pruned = 0;
  for (const TunePoint &p : r.points) {
    SCOPED_TRACE(p.text + " at " + std::to_string(p.tokens));
    EXPECT_NE(p.status, TunePoint::Status::Mismatch) << p.why;
    EXPECT_NE(p.status, TunePoint::Status::Failed) << p.why;
    pruned += p.status == TunePoint::Status::Pruned;
    if (p.status != TunePoint::Status::Timed)
      continue;
    ++timed;
    double planned = planner.plan("moe_init_routing_v2_grad", b2Call(p.tokens, p.config))->costNs / 1e3;
    EXPECT_DOUBLE_EQ(p.medianUs, planned);
    EXPECT_DOUBLE_EQ(p.minUs, planned);
    EXPECT_GT(p.baselineUs, 0);
    EXPECT_LT(p.baselineUs, p.medianUs) << "the bandwidth bound is a bound";
  }
  EXPECT_GT(pruned, 0u);
  EXPECT_GT(timed, 2 * 8u);
  for (int64_t bucket : {8, 512}) {
    const tune::BucketResult &b = r.file.buckets.at(bucket);
    int64_t tokens = bucket == 8 ? 5 : 300;
    for (const auto &[text, us] : b.timings)
      EXPECT_LE(b.us, us) << text;
    // The heuristic keeps a bucket unless a config beats it.
    double heuristic = b.timings.at("heuristic");
    EXPECT_TRUE(b.best == "heuristic" || b.us < heuristic) << b.best;
    EXPECT_DOUBLE_EQ(heuristic, planner.plan("moe_init_routing_v2_grad", b2Call(tokens))->costNs / 1e3);
  }
  fs::remove_all(dir);
}

/// A tuning file for B2 bf16 H=1100 top_k=2 on 910b whose bucket 512 is won by `config`.
tune::TuningFile b2Tuned(const std::string &config) {
  tune::TuningFile f;
  f.key = tuningKeyOf("moe_init_routing_v2_grad", kB2, Target::ascend(chip910b()));
  f.record(512, config, 1.0);
  f.record(512, "heuristic", 2.0);
  return f;
}

TEST(AscendTuner, ThePlannerUsesTheTunedConfigOfTheCallsBucket) {
  fs::path dir = freshDir("planner");
  const std::string config = "buffers=1,chunk=512,rows=1";
  tune::TuningDb(dir / "tuning", {}).store(b2Tuned(config));
  fs::path file = dir / "tuning" / b2Tuned(config).key.fileName();
  AscendPlanner tuned(chip910b(), plannerOptions(dir, true));
  for (int64_t tokens : {257, 300, 512}) {
    auto plan = tuned.plan("moe_init_routing_v2_grad", b2Call(tokens));
    EXPECT_EQ(plan->config, config) << tokens;
    EXPECT_EQ(plan->tunedFrom, file.string());
    EXPECT_EQ(plan->kernels[0].tiling.bufferCount, 1);
    EXPECT_EQ(plan->kernels[0].tiling.chunk, 368) << "1100 in 3 chunks of whole 8-element granules (in place: f32)";
    EXPECT_NE(ascend::planTable(*plan).find("config: " + config + " (tuned: " + file.string() + ")"), std::string::npos);
  }
  for (int64_t tokens : {256, 513}) { // the bucket's edges: (256, 512]
    auto plan = tuned.plan("moe_init_routing_v2_grad", b2Call(tokens));
    EXPECT_EQ(plan->config, "heuristic") << tokens;
    EXPECT_EQ(plan->tunedFrom, "");
    EXPECT_EQ(plan->kernels[0].tiling.chunks, 1) << "the compiler holds the whole row";
  }
  Schedule requested = tune::parseConfig("buffers=2,chunk=1024,rows=1");
  auto explicitPlan = tuned.plan("moe_init_routing_v2_grad", b2Call(300, requested));
  EXPECT_EQ(explicitPlan->config, "buffers=2,chunk=1024,rows=1") << "a requested config wins over the file";
  EXPECT_EQ(explicitPlan->kernels[0].tiling.chunk, 560) << "1100 in 2 chunks of whole 16-element granules";
  AscendPlanner off(chip910b(), plannerOptions(dir, false));
  EXPECT_EQ(off.plan("moe_init_routing_v2_grad", b2Call(300))->config, "heuristic") << "MOEC_AUTOTUNE=0";

  // The same lookup as `moec plan`'s, and a winner that is no Ascend schedule is skipped with a warning.
  std::unique_ptr<dsl::OpDef> op = loadOp("moe_init_routing_v2_grad");
  tune::TuningFile bad = b2Tuned("vector=4,threads=1,rows=1,unroll=1,buffers=3");
  std::vector<std::string> warnings;
  auto warn = [&](const std::string &line) { warnings.push_back(line); };
  EXPECT_EQ(tunedConfigOf(b2Tuned(config), 300, TargetKind::Ascend, "f", warn), tune::parseConfig(config));
  EXPECT_EQ(tunedConfigOf(bad, 300, TargetKind::Ascend, "f.json", warn), std::nullopt);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("f.json: bucket 512: 'buffers': 3"), std::string::npos) << warnings[0];
  EXPECT_EQ(tokensIn(*op, b2Call(300).dims), 300);
  fs::remove_all(dir);
}

TEST(AscendTuner, TheRuntimesSimulatedKernelsUseTheTunedConfig) {
  fs::path dir = freshDir("runtime");
  const std::string config = "buffers=1,chunk=512,rows=1";
  tune::TuningDb(dir / "tuning", {}).store(b2Tuned(config));
  std::vector<std::string> informs;
  Runtime::Options options;
  options.target = Target::ascendSimulator(chip910b());
  options.cacheDir = dir;
  options.autotune = true;
  options.printAutotuning = true;
  options.warn = [](const std::string &) {};
  options.inform = [&](const std::string &line) { informs.push_back(line); };
  Runtime rt(options);
  Kernel k = rt.get("moe_init_routing_v2_grad", kB2);
  ASSERT_NE(k.tunedVariants(), nullptr);
  std::string said;
  for (const std::string &line : informs)
    said += line + "\n";
  EXPECT_NE(said.find("on ascend-910b: grad_x[0] in (256, 512]: " + config + " (tuned:"), std::string::npos) << said;
  std::mt19937 rng(std::random_device{}());
  for (int64_t tokens : {100, 300}) {
    Case c = initRoutingGrad(DType::BF16, tokens, 2, 1100, 0, false, rng, true);
    std::map<std::string, TensorView> views;
    for (auto &[name, t] : c.inputs)
      views[name] = t.view();
    HostTensor out(DType::BF16, c.expected.at("grad_x").dims());
    views["grad_x"] = out.view();
    EXPECT_EQ(&k.specializationFor(views) != &k.specialization(), tokens == 300);
    k.launch(views, nullptr, c.attrs);
    EXPECT_EQ(std::memcmp(out.raw(), c.expected.at("grad_x").raw(), out.bytes()), 0) << tokens;
  }
  fs::remove_all(dir);
}

// A guarded kernel's live rows are read off its tiled kernel on the simulator: of A3's Tk x E (token,
// expert) points and rows, the routed ones (Tk x K); the fill of uncovered rows has none after a full
// permutation. A sweep plans with them, so its costs are the routing's, not every point's.
TEST(AscendTuner, LiveRowsAreTheRoutedOnes) {
  std::mt19937 rng(std::random_device{}());
  const int64_t T = 19, E = 16, K = 4, H = 300;
  Case c = unpermuteGradNonPad(DType::BF16, T, E, K, H, true, rng, false);
  std::map<std::string, TensorView> inputs;
  for (auto &[name, t] : c.inputs)
    inputs[name] = t.view();
  std::unique_ptr<dsl::OpDef> op = loadOp("moe_token_unpermute_with_routing_map_grad");
  // Fused, the probs dot stores the scaled rows as well; unfused, a scatter of its own writes them.
  for (bool fused : {true, false}) {
    Schedule schedule;
    schedule.disabled = fused ? 0 : kFuseRowStores;
    CpuRunResult run = runOnAscendSimulator(*op, DType::BF16, c.attrs, inputs, chip910b(), schedule);
    ASSERT_EQ(run.simulated.size(), run.tilings.size());
    int checked = 0;
    for (size_t i = 0; i < run.simulated.size(); ++i) {
      const ascend::KernelTiling &t = run.tilings[i];
      ASSERT_EQ(run.simulated[i].kernel, t.kernel);
      int64_t live = ascend::liveRows(run.simulated[i], t.pointRows);
      if (t.kernel.find("__0_") != std::string::npos) {
        EXPECT_EQ(live, 0) << t.kernel;
      } else {
        EXPECT_EQ(run.simulated[i].rows, T * E) << t.kernel;
        EXPECT_EQ(live, T * K) << t.kernel;
        ++checked;
      }
    }
    EXPECT_EQ(checked, fused ? 1 : 2) << (fused ? "the probs dot" : "the probs dot and the scatter");
  }
}

// Double-buffered, one queue's DataCopy set-ups hide behind the other's data, except for the first pass's
// copy-in and the last's copy-out; single-buffered, everything adds up.
TEST(AscendCostModel, DoubleBufferedPassesOverlapSetUpsWithMoves) {
  const ascend::Chip &chip = chip910b();
  ascend::CoreWork w;
  w.dataCopies = 100;
  w.gmBytes = 1000000;
  w.scalarReads = 3;
  w.passes = 10;
  double copy = 100 * chip.dataCopyNs, move = 1e6 / chip.gmGBpsPerCore;
  double fixed = chip.coreLaunchNs + 3 * chip.scalarReadNs;
  w.bufferCount = 1;
  EXPECT_DOUBLE_EQ(ascend::coreCostNs(chip, w), fixed + copy + move);
  w.bufferCount = 2;
  EXPECT_DOUBLE_EQ(ascend::coreCostNs(chip, w), fixed + std::max(copy, move) + std::min(copy, move) / 10);
  w.passes = 1;
  EXPECT_DOUBLE_EQ(ascend::coreCostNs(chip, w), fixed + copy + move) << "one pass: nothing to overlap";
  EXPECT_DOUBLE_EQ(ascend::copyBoundNs(chip, 4e6), chip.coreLaunchNs + 4e6 / (chip.gmGBpsPerCore * chip.vectorCores));
}

// With two rows a core, a double-buffered plan runs them in two passes (the second's copy-in overlaps the
// first's copy-out) rather than one; with many, it batches rows. The simulator's report, given the
// tilings, overlaps the same way.
TEST(AscendCostModel, APlanKeepsSeveralPassesWhenTheOverlapPays) {
  fs::path dir = freshDir("passes");
  AscendPlanner planner(chip910b(), plannerOptions(dir, false));
  PlanCall call{DType::BF16, {{"N", 80}, {"R", 640}, {"H", 7168}}, {{"top_k", 8}}, {}, {}};
  auto few = planner.plan("moe_init_routing_v2_grad", call);
  const ascend::KernelPlan &k = few->kernels[0];
  ASSERT_EQ(k.tiling.bufferCount, 2);
  ASSERT_GT(k.tiling.maxRowsPerPass, 1);
  EXPECT_EQ(k.rowsPerFormerCore, 2);
  EXPECT_EQ(k.rowsPerPass, 1);
  ascend::KernelTiling batched = k.tiling;
  batched.maxRowsPerPass = 1;
  EXPECT_DOUBLE_EQ(ascend::planKernel(batched, chip910b(), 80).costNs, k.costNs);
  ascend::KernelPlan onePass = ascend::planKernel(k.tiling, chip910b(), 80);
  EXPECT_EQ(onePass.rowsPerPass, 1);
  call.dims = {{"N", 4096}, {"R", 32768}, {"H", 7168}};
  EXPECT_GT(planner.plan("moe_init_routing_v2_grad", call)->kernels[0].rowsPerPass, 1);

  std::mt19937 rng(std::random_device{}());
  Case c = initRoutingGrad(DType::BF16, 80, 8, 7168, 0, false, rng, false);
  std::map<std::string, TensorView> inputs;
  for (auto &[name, t] : c.inputs)
    inputs[name] = t.view();
  std::unique_ptr<dsl::OpDef> op = loadOp("moe_init_routing_v2_grad");
  CpuRunResult run = runOnAscendSimulator(*op, DType::BF16, c.attrs, inputs, chip910b(), Schedule{});
  ASSERT_EQ(run.simulated.size(), 1u);
  ascend::LaunchReport serial = ascend::reportLaunch(run.simulated[0], chip910b());
  ascend::LaunchReport overlapped = ascend::reportLaunch(run.simulated[0], chip910b(), &run.tilings[0]);
  EXPECT_LT(overlapped.busiestCoreNs, serial.busiestCoreNs);
  EXPECT_NE(ascend::reportTable(run.simulated, chip910b(), run.tilings)
                .find(fmt::format("{:.1f}", overlapped.busiestCoreNs / 1e3)),
            std::string::npos);
  fs::remove_all(dir);
}

} // namespace
