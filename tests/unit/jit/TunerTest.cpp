//===- TunerTest.cpp - Config spaces, sweeps, and tuned schedules in the runtime -===//
//
// A config prints and parses back; pruned configs are never compiled; sampled configs of each target's
// space give every op and mode bit-identical results; a sweep re-times only configs it has not timed; a
// tuning file is found and used by Runtime::get per token bucket, visible through MOEC_PRINT_AUTOTUNING
// and in the dumps' #moe.schedule, and a damaged one is ignored with a warning.
//===----------------------------------------------------------------------===//
#include "ModeRun.h"
#include "TempDir.h"
#include "moec/jit/TuneCalls.h"

#include "moec/contracts/Files.h"
#include "moec/jit/Autotuning.h"
#include "moec/jit/CpuRun.h"
#include "moec/jit/Runtime.h"
#include "moec/jit/Tuner.h"
#include "moec/ops/BuiltinOps.h"
#include "moec/runtime/CudaDriver.h"
#include "moec/runtime/ThreadPool.h"
#include "moec/tune/ConfigSpace.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace moec;
using namespace moec::gpucheck;

namespace {

fs::path freshDir(const std::string &tag) { return moec::tests::freshTempDir("tune-" + tag); }

std::string contents(const fs::path &p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(ConfigText, EveryConfigOfEverySpaceRoundTrips) {
  for (TargetKind target : {TargetKind::CPU, TargetKind::GPU}) {
    std::vector<Schedule> space = tune::configSpace(target);
    ASSERT_GT(space.size(), 10u);
    std::set<std::string> texts;
    for (const Schedule &s : space) {
      std::string text = tune::configText(s);
      EXPECT_TRUE(texts.insert(text).second) << "two configs print as " << text;
      EXPECT_EQ(tune::parseConfig(text), s) << text;
    }
  }
  EXPECT_EQ(tune::configText(Schedule{}), "heuristic");
  EXPECT_EQ(tune::parseConfig("heuristic"), Schedule{});
  Schedule s = tune::parseConfig("unroll=4,vector=8,off=streaming-stores+accumulate-rows,rows=16,threads=1");
  EXPECT_EQ(s.vector, 8);
  EXPECT_EQ(s.unroll, 4);
  EXPECT_EQ(s.rowsPerBlock, 16);
  EXPECT_EQ(s.threads, 1);
  EXPECT_EQ(s.disabled, uint32_t(kStreamingStores | kAccumulateRows));
  EXPECT_EQ(tune::configText(s), "vector=8,threads=1,rows=16,unroll=4,off=streaming-stores+accumulate-rows");
  Schedule both = tune::parseConfig("vector=8,threads=1,rows=16,unroll=4,off=streaming-stores+prefetch-gathered-rows");
  EXPECT_EQ(both.disabled, uint32_t(kStreamingStores | kPrefetchGatheredRows));
  EXPECT_EQ(tune::configText(both), "vector=8,threads=1,rows=16,unroll=4,off=streaming-stores+prefetch-gathered-rows");
  EXPECT_NE(both.str(), s.str()) << "the optimizations turned off are part of the cache key";
  EXPECT_THROW(tune::parseConfig("vector=8,on=prefetch-gathered-rows"), std::invalid_argument)
      << "an optimization that is on unless turned off is not opt-in";
}

TEST(ConfigText, BadTextNamesTheField) {
  auto message = [](const std::string &text) {
    try {
      tune::parseConfig(text);
    } catch (const std::invalid_argument &e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(message("vec=8").find("unknown field 'vec'"), std::string::npos);
  EXPECT_NE(message("vector=8,vector=4").find("'vector' is given twice"), std::string::npos);
  EXPECT_NE(message("unroll=x").find("'unroll': 'x' is not a whole number"), std::string::npos);
  EXPECT_NE(message("unroll=-1").find("not a whole number"), std::string::npos);
  EXPECT_NE(message("unroll=99999999999999999999").find("not a whole number"), std::string::npos);
  EXPECT_NE(message("vector=8,").find("ends with ','"), std::string::npos);
  EXPECT_NE(message("vector").find("not NAME=VALUE"), std::string::npos);
  EXPECT_NE(message("off=fast-math").find("unknown optimization 'fast-math'"), std::string::npos);
  EXPECT_NE(message("on=streaming-stores").find("'on': 'streaming-stores' is not an opt-in optimization"),
            std::string::npos);
}

TEST(ConfigSpace, PrunesWhatTheShapeRulesOut) {
  tune::ShapeFacts f32Row100{100, 4}, bf16Row8{8, 2};
  auto pruned = [](std::string text, TargetKind t, tune::ShapeFacts f) {
    return tune::prunedBecause(tune::parseConfig(text), t, f);
  };
  EXPECT_EQ(pruned("vector=4,threads=64,rows=2,unroll=4", TargetKind::GPU, f32Row100), "");
  EXPECT_NE(pruned("vector=8,threads=64,rows=2,unroll=4", TargetKind::GPU, f32Row100).find("16-byte"), std::string::npos);
  EXPECT_NE(pruned("vector=8,threads=64,rows=2,unroll=4", TargetKind::GPU, {100, 2}).find("does not divide"),
            std::string::npos);
  EXPECT_NE(pruned("vector=2,threads=512,rows=4,unroll=4", TargetKind::GPU, f32Row100).find("1024"), std::string::npos);
  EXPECT_NE(pruned("vector=8,threads=32,rows=1,unroll=16", TargetKind::GPU, {64, 2}).find("registers"),
            std::string::npos);
  EXPECT_EQ(pruned("vector=8,threads=1,rows=16,unroll=4", TargetKind::CPU, bf16Row8), "");
  EXPECT_NE(pruned("vector=16,threads=1,rows=16,unroll=4", TargetKind::CPU, bf16Row8).find("wider than the row"),
            std::string::npos);
  EXPECT_NE(pruned("vector=3,threads=1,rows=16,unroll=4", TargetKind::CPU, f32Row100).find("'vector'"),
            std::string::npos);
}

const KernelRequest kB2Request{DType::F32, {{"H", 64}}, {{"top_k", 2}}};

std::function<TuneCall &(int64_t)> b2Calls(std::unique_ptr<CpuTuneCall> &holder, std::mt19937 &rng) {
  return [&holder, &rng](int64_t tokens) -> TuneCall & {
    holder = std::make_unique<CpuTuneCall>(initRoutingGrad(DType::F32, tokens, 2, 64, 0, false, rng, false), 0);
    return holder->call;
  };
}

Runtime::Options cpuOptions(const fs::path &cache) {
  Runtime::Options o;
  o.target = Target::cpu();
  o.cacheDir = cache;
  o.autotune = false;
  o.warn = [](const std::string &) {};
  return o;
}

/// A sweep of B2 f32 H=64 top_k=2 with its own cache, on fresh random data.
class Tuner : public ::testing::Test {
protected:
  fs::path dir = freshDir("tuner");
  std::mt19937 rng{std::random_device{}()};
  std::unique_ptr<CpuTuneCall> holder;
  std::unique_ptr<Runtime> rt = std::make_unique<Runtime>(cpuOptions(dir));
  void TearDown() override {
    rt.reset();
    fs::remove_all(dir);
  }
  TuneResult sweep(const TuneOptions &o) { return tuneOp(*rt, "moe_init_routing_v2_grad", kB2Request, o, b2Calls(holder, rng)); }
};

TEST_F(Tuner, PrunedConfigsAreNeverCompiledAndTheRestMatchTheHeuristic) {
  TuneOptions o;
  o.tokens = {37};
  o.reps = 2;
  o.configs = {tune::parseConfig("vector=4,threads=1,rows=1,unroll=2"),
               tune::parseConfig("vector=16,threads=1,rows=4,unroll=1"),
               tune::parseConfig("vector=128,threads=1,rows=4,unroll=1"), // no such width: pruned
               tune::parseConfig("vector=8,threads=2000,rows=1,unroll=1"), // over the thread limit: pruned
               tune::parseConfig("vector=4,threads=1,rows=1,unroll=2")}; // a repeat: tried once
  std::vector<TunePlan> plans;
  std::vector<TuneCompileProgress> compiles;
  o.planned = [&](const TunePlan &p) { plans.push_back(p); };
  o.compileProgress = [&](const TuneCompileProgress &p) { compiles.push_back(p); };
  TuneResult r = sweep(o);
  ASSERT_EQ(r.points.size(), 5u); // the heuristic, then 4 distinct configs
  EXPECT_EQ(r.points[0].text, "heuristic");
  std::vector<TunePoint::Status> expected{TunePoint::Status::Timed, TunePoint::Status::Timed, TunePoint::Status::Timed,
                                          TunePoint::Status::Pruned, TunePoint::Status::Pruned};
  for (size_t i = 0; i < r.points.size(); ++i)
    EXPECT_EQ(r.points[i].status, expected[i]) << r.points[i].text << ": " << r.points[i].why;
  EXPECT_EQ(r.compiled, 3u) << "the heuristic (the reference) and the two configs that are not pruned";
  EXPECT_EQ(rt->stats().compiles, 3u) << "the heuristic and the two configs that are not pruned";
  // One count of each: considered = pruned + compiled + failed + timed earlier, as planned and reported.
  EXPECT_EQ(r.considered, 5u);
  EXPECT_EQ(r.pruned, 2u);
  EXPECT_EQ(r.failed, 0u);
  EXPECT_EQ(r.timedEarlier, 0u);
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0].considered, 5u);
  EXPECT_EQ(plans[0].toCompile, 3u);
  ASSERT_EQ(plans[0].pruned.size(), 2u);
  EXPECT_EQ(plans[0].pruned[0].first, "vector=128,threads=1,rows=4,unroll=1");
  ASSERT_EQ(compiles.size(), 3u) << "a progress report per compile";
  EXPECT_EQ(compiles[0].config, "heuristic") << "the heuristic compiles first";
  for (size_t i = 0; i < compiles.size(); ++i) {
    EXPECT_EQ(compiles[i].done, i + 1);
    EXPECT_EQ(compiles[i].total, 3u);
    EXPECT_EQ(compiles[i].error, "");
  }
  const tune::BucketResult *bucket = r.file.forTokens(37);
  ASSERT_NE(bucket, nullptr);
  EXPECT_EQ(bucket->timings.size(), 3u);
  EXPECT_TRUE(bucket->timings.count("heuristic"));
}

TEST_F(Tuner, AddingConfigsRetimesOnlyTheNewOnes) {
  TuneOptions o;
  o.tokens = {20, 300};
  o.reps = 1;
  o.configs = {tune::parseConfig("vector=4,threads=1,rows=1,unroll=2"),
               tune::parseConfig("vector=8,threads=1,rows=16,unroll=4")};
  TuneResult first = sweep(o);
  o.configs.push_back(tune::parseConfig("vector=2,threads=1,rows=128,unroll=1"));
  o.previous = &first.file;
  rt = std::make_unique<Runtime>(cpuOptions(dir / "second")); // another cache: every compile shows
  TuneResult second = sweep(o);
  EXPECT_EQ(second.compiled, 2u) << "the heuristic (the reference) and the new config; the rest were timed before";
  EXPECT_EQ(second.timedEarlier, 2u);
  EXPECT_EQ(second.considered, 4u);
  size_t reused = 0, timed = 0;
  for (const TunePoint &p : second.points) {
    reused += p.status == TunePoint::Status::Reused;
    timed += p.status == TunePoint::Status::Timed;
    if (p.text == "vector=2,threads=1,rows=128,unroll=1")
      EXPECT_EQ(p.status, TunePoint::Status::Timed);
    else
      EXPECT_EQ(p.status, TunePoint::Status::Reused) << p.text;
  }
  EXPECT_EQ(reused, 6u);
  EXPECT_EQ(timed, 2u);
  for (int64_t tokens : {20, 300})
    EXPECT_EQ(second.file.forTokens(tokens)->timings.size(), 4u);
}

// A config whose outputs differ from the heuristic's (a compiler bug the sweep must surface) is reported
// and never timed or stored. The call here reads back different bytes after every launch but the first.
TEST_F(Tuner, AConfigWhoseOutputsDifferIsReportedNotTimed) {
  int reads = 0;
  auto calls = [&](int64_t tokens) -> TuneCall & {
    holder = std::make_unique<CpuTuneCall>(initRoutingGrad(DType::F32, tokens, 2, 64, 0, false, rng, false), 0);
    holder->call.outputBytes = [&reads] { return std::to_string(reads++); };
    return holder->call;
  };
  TuneOptions o;
  o.tokens = {16};
  o.configs = {tune::parseConfig("vector=4,threads=1,rows=1,unroll=2")};
  TuneResult r = tuneOp(*rt, "moe_init_routing_v2_grad", kB2Request, o, calls);
  ASSERT_EQ(r.points.size(), 2u);
  EXPECT_EQ(r.points[0].status, TunePoint::Status::Mismatch) << "the heuristic too: its check run reads anew";
  EXPECT_EQ(r.points[1].status, TunePoint::Status::Mismatch);
  EXPECT_NE(r.points[1].why.find("differ"), std::string::npos);
  EXPECT_TRUE(r.file.buckets.empty()) << "nothing that failed the check is stored";
}

TEST_F(Tuner, ABudgetLeavesTheRestUntimed) {
  TuneOptions o;
  o.tokens = {16};
  o.configs = {tune::parseConfig("vector=4,threads=1,rows=1,unroll=2")};
  o.budgetSeconds = 1e-9; // spent before the first timing
  TuneResult r = sweep(o);
  ASSERT_EQ(r.points.size(), 2u);
  for (const TunePoint &p : r.points)
    EXPECT_EQ(p.status, TunePoint::Status::Untimed) << p.text;
  EXPECT_TRUE(r.budgetSpent);
  EXPECT_TRUE(r.file.buckets.empty());
}

// The budget bounds the timing, not the compiles: compiles that outlast it (here a progress callback that
// sleeps past it) still leave the first group of configs timed.
TEST_F(Tuner, ABudgetBoundsTheTimingNotTheCompiles) {
  TuneOptions o;
  o.tokens = {16};
  o.reps = 1;
  o.configs = {tune::parseConfig("vector=4,threads=1,rows=1,unroll=2")};
  o.budgetSeconds = 1.0;
  o.compileProgress = [](const TuneCompileProgress &) { std::this_thread::sleep_for(std::chrono::milliseconds(800)); };
  TuneResult r = sweep(o);
  EXPECT_GE(r.compileSeconds, 1.6);
  ASSERT_EQ(r.points.size(), 2u);
  for (const TunePoint &p : r.points)
    EXPECT_EQ(p.status, TunePoint::Status::Timed) << p.text << ": " << p.why;
  EXPECT_FALSE(r.budgetSpent);
  EXPECT_LT(r.timingSeconds, r.compileSeconds);
}

// Sampled configs of each target's space give every op and mode the heuristic's bytes exactly (the CPU,
// the GPU on the PTX emulator, the tiled Ascend kernels on the UB simulator), at odd sizes; on Ascend rows
// long enough that the smaller chunk caps split them.
class EveryConfig : public ::testing::TestWithParam<std::tuple<OpMode, TargetKind>> {};

TEST_P(EveryConfig, GivesBitIdenticalResults) {
  const auto &[mode, kind] = GetParam();
  auto op = loadOp(mode.op);
  std::mt19937 rng(std::random_device{}());
  bool ascend = kind == TargetKind::Ascend;
  const int64_t kTokens = 37, kH = ascend ? 1100 : 100, kSampled = kind == TargetKind::CPU ? 12 : ascend ? 6 : 8;
  DType dtype = std::array{DType::BF16, DType::F16, DType::F32}[rng() % 3];
  SCOPED_TRACE(dsl::dtypeName(dtype));
  ModeRun run(mode, *op, dtype, kTokens, kH, rng, kind == TargetKind::GPU);
  tune::ShapeFacts facts{kH, dsl::dtypeBytes(dtype)};
  if (ascend) {
    run.chip = ascend::builtinChip("910b");
    facts.ubBytes = run.chip->ubBytes;
    facts.maxCopyBytes = run.chip->maxCopyBytes;
  }
  CpuRunResult heuristic = run(Schedule{});
  std::vector<Schedule> space;
  for (const Schedule &s : tune::configSpace(kind))
    if (tune::prunedBecause(s, kind, facts).empty())
      space.push_back(s);
  std::shuffle(space.begin(), space.end(), rng);
  // Ascend: the second config caps the chunk differently from the first. (Of the 14 configs left at this
  // row, 8 cap it at the whole row: 6 drawn at random were all those once in 107 runs, and CI once failed
  // on it.)
  if (ascend)
    if (auto other = std::find_if(space.begin(), space.end(),
                                  [&](const Schedule &s) { return s.chunk != space.front().chunk; });
        other != space.end())
      std::iter_swap(space.begin() + 1, other);
  int tried = 0;
  std::set<int64_t> chunks;
  for (const Schedule &s : space) {
    if (tried == kSampled)
      break;
    ++tried;
    SCOPED_TRACE(tune::configText(s));
    CpuRunResult got = run(s);
    expectSameBytes(got, heuristic);
    for (const ascend::KernelTiling &t : got.tilings) { // Ascend: the knobs shape the plan
      EXPECT_LE(t.chunk, std::max<int64_t>(s.chunk, 64)) << t.kernel << ": the cap holds (up to one granule)";
      EXPECT_EQ(t.bufferCount, s.buffers) << t.kernel;
      chunks.insert(t.chunk);
    }
  }
  EXPECT_EQ(tried, kSampled);
  if (ascend)
    EXPECT_GT(chunks.size(), 1u) << "the sampled configs all planned one chunk size";
}

INSTANTIATE_TEST_SUITE_P(AllModes, EveryConfig,
                         ::testing::Combine(::testing::ValuesIn(allOpModes()),
                                            ::testing::Values(TargetKind::CPU, TargetKind::GPU, TargetKind::Ascend)),
                         [](const auto &info) {
                           TargetKind kind = std::get<1>(info.param);
                           return std::get<0>(info.param).name +
                                  (kind == TargetKind::CPU ? "_cpu" : kind == TargetKind::GPU ? "_ptx_emu" : "_ascend");
                         });

TEST(TunedVariants, BucketsAreChosenAtTheirEdges) {
  TunedVariants v;
  auto a = std::make_shared<LoadedOp>(), b = std::make_shared<LoadedOp>(), one = std::make_shared<LoadedOp>();
  v.byBucket = {{1, one}, {64, a}, {1024, b}};
  EXPECT_EQ(v.forTokens(0), one.get());
  EXPECT_EQ(v.forTokens(1), one.get());
  EXPECT_EQ(v.forTokens(2), nullptr);
  EXPECT_EQ(v.forTokens(32), nullptr);
  EXPECT_EQ(v.forTokens(33), a.get());
  EXPECT_EQ(v.forTokens(64), a.get());
  EXPECT_EQ(v.forTokens(65), nullptr);
  EXPECT_EQ(v.forTokens(513), b.get());
  EXPECT_EQ(v.forTokens(1024), b.get());
  EXPECT_EQ(v.forTokens(1025), nullptr);
  for (int64_t t : {1, 2, 3, 33, 64, 65, 1000, 1024, 1025})
    EXPECT_EQ(tune::tokenBucket(t) == 64, v.forTokens(t) == a.get()) << t << ": the runtime and the database agree";
}

/// A tuning file for B2 f32 H=64 top_k=2 on this CPU: bucket 64 tuned to `config`, bucket 1024 to the
/// heuristic.
tune::TuningFile b2Tuned(const std::string &config) {
  tune::TuningFile f;
  f.key = tuningKeyOf("moe_init_routing_v2_grad", kB2Request, Target::cpu());
  f.record(64, config, 10.0);
  f.record(64, "heuristic", 12.0);
  f.record(1024, "heuristic", 50.0);
  f.record(1024, config, 60.0);
  return f;
}

struct Captured {
  std::vector<std::string> warnings, informs;
};

Runtime::Options tunedOptions(const fs::path &cache, Captured &c, bool autotune = true) {
  Runtime::Options o;
  o.target = Target::cpu();
  o.cacheDir = cache;
  o.autotune = autotune;
  o.printAutotuning = true;
  o.dumpDir = cache / "dumps";
  o.warn = [&c](const std::string &line) { c.warnings.push_back(line); };
  o.inform = [&c](const std::string &line) { c.informs.push_back(line); };
  return o;
}

std::string joined(const std::vector<std::string> &lines) {
  std::string s;
  for (const std::string &l : lines)
    s += l + "\n";
  return s;
}

TEST(Autotuning, TheRuntimeUsesTheTunedConfigForTheCallsBucket) {
  fs::path dir = freshDir("use");
  const std::string config = "vector=2,threads=1,rows=1,unroll=3";
  tune::TuningDb db(dir / "tuning", {});
  db.store(b2Tuned(config));
  Captured captured;
  Runtime rt(tunedOptions(dir, captured));
  Kernel k = rt.get("moe_init_routing_v2_grad", kB2Request);
  std::string said = joined(captured.informs);
  EXPECT_NE(said.find("autotuning: moe_init_routing_v2_grad f32 on " + tuningTargetName(Target::cpu())), std::string::npos)
      << said;
  EXPECT_NE(said.find("grad_x[0] in (32, 64]: " + config + " (tuned: " + (dir / "tuning").string()), std::string::npos)
      << said;
  EXPECT_NE(said.find("grad_x[0] in (512, 1024]: the heuristic's schedule (tuned"), std::string::npos) << said;
  EXPECT_NE(said.find("other token counts: the heuristic's schedule"), std::string::npos) << said;
  ASSERT_NE(k.tunedVariants(), nullptr);
  ASSERT_EQ(k.tunedVariants()->byBucket.size(), 1u);
  const LoadedOp &tuned = *k.tunedVariants()->byBucket[0].second;
  EXPECT_EQ(tuned.kernels[0].schedule.vector, 2);
  EXPECT_EQ(tuned.kernels[0].schedule.unroll, 3);
  EXPECT_NE(k.specialization().kernels[0].schedule.unroll, 3) << "the heuristic's differs, or the test shows nothing";

  // The dumps of the tuned specialization carry its schedule.
  bool dumped = false;
  for (const auto &entry : fs::directory_iterator(dir / "dumps"))
    if (entry.path().string().find(".moe.mlir") != std::string::npos &&
        contents(entry.path()).find("#moe.schedule<rowsPerBlock = 1, threads = 1, vector = 2, unroll = 3>") != std::string::npos)
      dumped = true;
  EXPECT_TRUE(dumped) << "no moe.mlir dump with the tuned #moe.schedule in " << (dir / "dumps");

  // Calls pick by their token count, and every choice gives the same bytes.
  std::mt19937 rng(std::random_device{}());
  for (int64_t tokens : {1, 32, 33, 64, 65, 700}) {
    SCOPED_TRACE(tokens);
    Case c = initRoutingGrad(DType::F32, tokens, 2, 64, 0, false, rng, true);
    std::map<std::string, TensorView> views;
    for (auto &[name, t] : c.inputs)
      views[name] = t.view();
    HostTensor out(DType::F32, c.expected.at("grad_x").dims());
    views["grad_x"] = out.view();
    bool inTunedBucket = tokens > 32 && tokens <= 64;
    EXPECT_EQ(&k.specializationFor(views), inTunedBucket ? &tuned : &k.specialization());
    k.launch(views, nullptr, c.attrs);
    EXPECT_EQ(std::memcmp(out.raw(), c.expected.at("grad_x").raw(), out.bytes()), 0);
  }
  fs::remove_all(dir);
}

TEST(Autotuning, TheCpuMachineIsItsModelAndItsWorkerCount) {
  std::string name = tuningTargetName(Target::cpu());
  EXPECT_EQ(name.rfind("cpu-", 0), 0u) << name;
  std::string threads = "-" + std::to_string(ThreadPool::shared().size()) + "threads";
  ASSERT_GT(name.size(), threads.size());
  EXPECT_EQ(name.substr(name.size() - threads.size()), threads) << name;
  EXPECT_EQ(name.find_first_of(" /.()@"), std::string::npos) << name << ": one word, fit for a file name";
  EXPECT_EQ(tuningTargetName(Target::ascendSimulator(ascend::builtinChip("910b"))), "ascend-910b");
  EXPECT_EQ(tuningTargetName(Target::ascend(ascend::builtinChip("910b"))), "ascend-910b");
  EXPECT_EQ(tuningTargetName(Target::ptx("sm_90")), "ptx-sm_90");
}

TEST(Autotuning, AutotuneOffOrARequestedScheduleUsesNoTuning) {
  fs::path dir = freshDir("off");
  tune::TuningDb(dir / "tuning", {}).store(b2Tuned("vector=2,threads=1,rows=1,unroll=3"));
  {
    Captured captured;
    Runtime rt(tunedOptions(dir, captured, false));
    EXPECT_EQ(rt.get("moe_init_routing_v2_grad", kB2Request).tunedVariants(), nullptr);
    EXPECT_NE(joined(captured.informs).find("MOEC_AUTOTUNE=0: the heuristic's schedule"), std::string::npos);
  }
  Captured captured;
  Runtime rt(tunedOptions(dir, captured));
  KernelRequest request = kB2Request;
  request.schedule = tune::parseConfig("vector=4,threads=1,rows=1,unroll=1");
  EXPECT_EQ(rt.get("moe_init_routing_v2_grad", request).tunedVariants(), nullptr);
  EXPECT_NE(joined(captured.informs).find("the requested schedule vector=4,threads=1,rows=1,unroll=1"),
            std::string::npos);
  fs::remove_all(dir);
}

// A sweep may find the heuristic best in every bucket: the runtime then keeps no variants, and says so in
// the same lines as always (what `moec tune`'s users and the CLI test read does not hang on timings).
TEST(Autotuning, AFileWhoseBucketsTheHeuristicWonSaysSoInTheUsualLines) {
  fs::path dir = freshDir("all-heuristic");
  tune::TuningFile f;
  f.key = tuningKeyOf("moe_init_routing_v2_grad", kB2Request, Target::cpu());
  f.record(64, "heuristic", 10.0);
  f.record(64, "vector=2,threads=1,rows=1,unroll=3", 12.0);
  f.record(1024, "heuristic", 50.0);
  tune::TuningDb(dir / "tuning", {}).store(f);
  Captured captured;
  Runtime rt(tunedOptions(dir, captured));
  EXPECT_EQ(rt.get("moe_init_routing_v2_grad", kB2Request).tunedVariants(), nullptr);
  std::string said = joined(captured.informs);
  EXPECT_NE(said.find("grad_x[0] in (32, 64]: the heuristic's schedule (tuned: "), std::string::npos) << said;
  EXPECT_NE(said.find("grad_x[0] in (512, 1024]: the heuristic's schedule (tuned: "), std::string::npos) << said;
  EXPECT_NE(said.find("other token counts: the heuristic's schedule"), std::string::npos) << said;
  EXPECT_TRUE(captured.warnings.empty()) << joined(captured.warnings);
  fs::remove_all(dir);
}

TEST(Autotuning, AnotherShapeFindsNoTuning) {
  fs::path dir = freshDir("shape");
  tune::TuningDb(dir / "tuning", {}).store(b2Tuned("vector=2,threads=1,rows=1,unroll=3"));
  Captured captured;
  Runtime rt(tunedOptions(dir, captured));
  KernelRequest other = kB2Request;
  other.dims["H"] = 128; // the problem size is in the key: H=64's winner is not reused
  EXPECT_EQ(rt.get("moe_init_routing_v2_grad", other).tunedVariants(), nullptr);
  EXPECT_NE(joined(captured.informs).find("no tuning file"), std::string::npos);
  fs::remove_all(dir);
}

TEST(Autotuning, ADamagedOrForeignTuningFileIsIgnoredWithAWarning) {
  fs::path dir = freshDir("damaged");
  tune::TuningFile file = b2Tuned("vector=2,threads=1,rows=1,unroll=3");
  fs::path path = dir / "tuning" / file.key.fileName();
  std::string good = tune::toJson(file);
  std::string foreign = good;
  foreign.replace(foreign.find(tune::moecVersion()), std::strlen(tune::moecVersion()), "0.0.1");
  std::string edited = good;
  edited.replace(edited.find("10.0"), 4, "1.00");
  for (const std::string &bad : {std::string("{ not json"), foreign, edited}) {
    fs::create_directories(path.parent_path());
    writeFileReplacing(path.string(), {bad});
    Captured captured;
    Runtime rt(tunedOptions(dir, captured));
    Kernel k = rt.get("moe_init_routing_v2_grad", kB2Request);
    EXPECT_EQ(k.tunedVariants(), nullptr);
    ASSERT_EQ(captured.warnings.size(), 1u) << joined(captured.warnings);
    EXPECT_NE(captured.warnings[0].find(path.string()), std::string::npos) << captured.warnings[0];
    EXPECT_TRUE(fs::exists(path)) << "moec never deletes what it cannot read";
  }
  fs::remove_all(dir);
}

TEST(Autotuning, AnUnusableConfigInAFileIsSkippedWithAWarning) {
  fs::path dir = freshDir("unusable");
  tune::TuningDb(dir / "tuning", {}).store(b2Tuned("vector=3,threads=1,rows=1,unroll=1"));
  Captured captured;
  Runtime rt(tunedOptions(dir, captured));
  EXPECT_EQ(rt.get("moe_init_routing_v2_grad", kB2Request).tunedVariants(), nullptr);
  ASSERT_EQ(captured.warnings.size(), 1u) << joined(captured.warnings);
  EXPECT_NE(captured.warnings[0].find("'vector': 3"), std::string::npos) << captured.warnings[0];
  fs::remove_all(dir);
}

} // namespace
