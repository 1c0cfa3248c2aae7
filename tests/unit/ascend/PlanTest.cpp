//===- PlanTest.cpp - Ascend plans: chips, tilings from the IR, CANN comparison ---===//
#include "CannTiling.h"

#include "moec/compiler/Pipeline.h"
#include "moec/ops/BuiltinOps.h"
#include "moec/runtime/ascend/Plan.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <functional>
#include <random>

namespace moec::ascend {
namespace {

const char *kB2 = "moe_init_routing_v2_grad";
const char *kA3 = "moe_token_unpermute_with_routing_map_grad";

/// A chip file with CANN's unit-test platform numbers and the 910B cost figures.
std::string chipJson(int64_t cores, int64_t ub, const std::string &extra = "") {
  return fmt::format(R"({{"format": 1, "name": "ut", "description": "CANN UT platform", "vector_cores": {},
    "ub_bytes": {}, "ub_alignment": 32, "burst_bytes": 512, "max_copy_bytes": 65536,
    "system_workspace_bytes": 16777216, "gm_gbps_per_core": 40.0, "data_copy_ns": 400, "scalar_read_ns": 40,
    "core_launch_ns": 2000{}}})",
                     cores, ub, extra);
}

cann::DType cannType(dsl::DType t) {
  return t == dsl::DType::F16 ? cann::DType::F16 : t == dsl::DType::BF16 ? cann::DType::BF16 : cann::DType::F32;
}

/// B2 compiled for `chip` and planned for N tokens.
struct B2Plan {
  std::unique_ptr<dsl::OpDef> op = loadOp(kB2);
  Plan plan;
  B2Plan(const Chip &chip, dsl::DType dtype, int64_t n, int64_t k, int64_t h, int64_t dropPad = 0,
         int64_t active = 0) {
    Specialization spec;
    spec.dtype = dtype;
    spec.target = Target::ascend(chip);
    spec.statics = {{"H", h}, {"top_k", k}, {"drop_pad_mode", dropPad}};
    CompiledOp compiled = compile(*op, spec);
    PlanRequest request{op.get(), dtype, {{"N", n}, {"H", h}, {"R", active ? active : n * k}},
                        {{"top_k", k}, {"drop_pad_mode", dropPad}, {"active_num", active}}, {}};
    std::vector<std::vector<const dsl::Expr *>> domains;
    for (const KernelInfo &info : compiled.kernels)
      domains.push_back(info.domain);
    plan = planOp(request, chip, compiled.ascend, domains, compiled.workspace);
  }
};

TEST(AscendChips, EveryBuiltinChipParses) {
  for (const BuiltinChipFile &f : builtinChipFiles()) {
    Chip c = builtinChip(f.name);
    EXPECT_EQ(c.name, f.name);
    EXPECT_GT(c.vectorCores, 0);
    EXPECT_EQ(c.ubBytes % c.ubAlignment, 0) << f.name;
  }
  EXPECT_EQ(builtinChip("910b").vectorCores, 40); // CANN's unit tests' Ascend910B
  EXPECT_EQ(builtinChip("910b2").vectorCores, 48);
  EXPECT_EQ(builtinChip("910b").ubBytes, 196352); // GetCoreMemSize(UB), 256 B under 192 KiB
  EXPECT_GE(builtinChip("ascend950").ubBytes, 248 * 1024 - 256);
  EXPECT_THROW(builtinChip("910z"), std::invalid_argument);
}

TEST(AscendChips, BadChipFilesAreRejectedNamingTheField) {
  auto error = [](const std::string &text) {
    try {
      chipFromJson(text, "chip.json");
    } catch (const std::runtime_error &e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(error(chipJson(40, 65536)), "accepted");
  EXPECT_NE(error(chipJson(0, 65536)).find("'vector_cores'"), std::string::npos);
  EXPECT_NE(error(chipJson(40, 100)).find("'ub_bytes'"), std::string::npos);
  EXPECT_NE(error("[1, 2]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(error("{").find("not a JSON object"), std::string::npos);
  std::string badAlignment = chipJson(40, 65536);
  badAlignment.replace(badAlignment.find("\"ub_alignment\": 32"), 18, "\"ub_alignment\": 24");
  EXPECT_NE(error(badAlignment).find("'ub_alignment'"), std::string::npos);
  std::string noBandwidth = chipJson(40, 65536);
  noBandwidth.replace(noBandwidth.find("\"gm_gbps_per_core\": 40.0"), 24, "\"gm_gbps_per_core\": -1");
  EXPECT_NE(error(noBandwidth).find("'gm_gbps_per_core'"), std::string::npos);
  std::string format2 = chipJson(40, 65536);
  format2.replace(format2.find("\"format\": 1"), 11, "\"format\": 2");
  EXPECT_NE(error(format2).find("'format'"), std::string::npos);
  EXPECT_NE(error(chipJson(40, 65536, ", \"sync_all_ns\": 0")).find("'sync_all_ns'"), std::string::npos);
  EXPECT_NE(error(chipJson(40, 65536, ", \"sync_all_ns\": \"1\"")).find("'sync_all_ns'"), std::string::npos);
}

// sync_all_ns is optional: a chip file without it has its SyncAll cost a launch, so each kernel stays a launch.
TEST(AscendChips, SyncAllDefaultsToALaunch) {
  EXPECT_EQ(chipFromJson(chipJson(40, 65536), "ut").syncAllNs, 2000);
  EXPECT_EQ(chipFromJson(chipJson(40, 65536, ", \"sync_all_ns\": 700"), "ut").syncAllNs, 700);
  EXPECT_LT(builtinChip("910b").syncAllNs, builtinChip("910b").coreLaunchNs);
}

// An op's kernels run as the stages of one launch where a SyncAll costs less than a launch: one launch's
// start-up, each stage's busiest core without it, a SyncAll between stages; a kernel without rows is no stage.
// Otherwise each kernel is a launch and the op costs their sum.
TEST(AscendPlanLaunches, KernelsAreStagesOfOneLaunchWhenASyncAllIsCheaper) {
  auto kernel = [](const char *name, int64_t rows, int64_t blockDim, double costNs) {
    KernelPlan k;
    k.tiling.kernel = name;
    k.rows = rows;
    k.blockDim = blockDim;
    k.costNs = costNs;
    return k;
  };
  std::vector<KernelPlan> kernels{kernel("zero", 4, 4, 2500), kernel("empty", 0, 1, 0), kernel("main", 80, 40, 9000)};
  Chip staged = chipFromJson(chipJson(40, 65536, ", \"sync_all_ns\": 700"), "ut");
  std::vector<LaunchPlan> one = planLaunches(staged, kernels);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].kernels, (std::vector<std::string>{"zero", "empty", "main"}));
  EXPECT_EQ(one[0].blockDim, 40);
  EXPECT_EQ(one[0].syncAlls, 1);
  EXPECT_DOUBLE_EQ(one[0].costNs, 2000 + 500 + 700 + 7000);
  EXPECT_EQ(kernels[2].launch, 0);
  EXPECT_EQ(kernels[2].stage, 2);

  Chip separate = chipFromJson(chipJson(40, 65536), "ut");
  std::vector<LaunchPlan> three = planLaunches(separate, kernels);
  ASSERT_EQ(three.size(), 3u);
  EXPECT_DOUBLE_EQ(three[0].costNs + three[1].costNs + three[2].costNs, 2500 + 9000);
  EXPECT_EQ(three[1].blockDim, 0) << "no rows: not started";
  EXPECT_EQ(kernels[2].launch, 2);
  EXPECT_EQ(kernels[2].stage, 0);
}

// CANN's own tiling unit test for MoeInitRoutingV2Grad (40 vector cores, 64 KiB UB): N = 80, K = 6, H = 8,
// f32 gives tiling key 1000 and 40 cores x 2 tokens. Ours must agree wherever a field means the same.
TEST(AscendPlanGolden, MatchesCannsUnitTestFieldForField) {
  Chip chip = chipFromJson(chipJson(40, 65536), "ut");
  B2Plan ours(chip, dsl::DType::F32, 80, 6, 8);
  cann::InitRoutingV2GradTiling cann =
      cann::initRoutingV2GradTiling({40, 65536}, {480, 8}, 480, 6, 0, 0, cann::DType::F32);
  ASSERT_EQ(ours.plan.kernels.size(), 1u);
  const KernelPlan &k = ours.plan.kernels[0];
  int64_t lastCoreRows = k.tailCores ? k.rowsPerTailCore : k.rowsPerFormerCore;
  struct Field {
    const char *cann, *ours;
    int64_t cannValue, ourValue;
  } fields[] = {
      {"tilingKey", "tilingKey", cann.tilingKey, ours.plan.tilingKey},
      {"n", "rows", cann.n, k.rows},
      {"cols", "rowLength", cann.cols, k.tiling.rowLength},
      {"needCoreNum", "blockDim", cann.needCoreNum, k.blockDim},
      {"perCoreElements", "rowsPerFormerCore", cann.perCoreElements, k.rowsPerFormerCore},
      {"lastCoreElements", "rows of the last core", cann.lastCoreElements, lastCoreRows},
      {"elementCopyLoops", "chunks", cann.elementCopyLoops, k.tiling.chunks},
      {"elementPerCopyCols", "chunk", cann.elementPerCopyCols, k.tiling.chunk},
      {"elementLastCopyCols", "last chunk", cann.elementLastCopyCols,
       k.tiling.rowLength - (k.tiling.chunks - 1) * k.tiling.chunk},
      {"tokensFormer", "rowsPerPass", cann.tokensFormer, k.rowsPerPass},
      {"perCoreTokensLoop", "passes per core", cann.perCoreTokensLoop,
       (k.rowsPerFormerCore + k.rowsPerPass - 1) / k.rowsPerPass},
      {"workspace", "workspaceBytes", cann.workspaceBytes, ours.plan.workspaceBytes},
  };
  std::string table = "| CANN field | CANN | ours | our field |\n|---|---|---|---|\n";
  for (const Field &f : fields) {
    table += fmt::format("| {} | {} | {} | {} |\n", f.cann, f.cannValue, f.ourValue, f.ours);
    EXPECT_EQ(f.cannValue, f.ourValue) << f.cann << " vs " << f.ours;
  }
  EXPECT_EQ(cann.tilingKey, 1000);
  EXPECT_EQ(k.blockDim, 40);
  EXPECT_EQ(k.rowsPerFormerCore, 2);
  std::cout << table;
}

TEST(AscendPlan, TilingKeyMatchesCannsForEveryModeAndDtype) {
  Chip chip = builtinChip("910b");
  for (dsl::DType dtype : {dsl::DType::F32, dsl::DType::F16, dsl::DType::BF16})
    for (auto [dropPad, active] : {std::pair<int64_t, int64_t>{0, 0}, {0, 40}, {1, 0}}) {
      B2Plan ours(chip, dtype, 80, 8, 512, dropPad, active);
      std::vector<int64_t> shape = dropPad ? std::vector<int64_t>{10, 8, 512}
                                           : std::vector<int64_t>{active ? active : 640, 512};
      cann::InitRoutingV2GradTiling cann =
          cann::initRoutingV2GradTiling({40, 196352}, shape, 640, 8, dropPad, active, cannType(dtype));
      EXPECT_EQ(ours.plan.tilingKey, cann.tilingKey) << dsl::dtypeName(dtype) << " dropPad " << dropPad;
    }
}

/// The invariants every plan keeps: all rows covered once, within the cores, the UB and the copy limit.
void expectSound(const Plan &plan, const Chip &chip) {
  for (const KernelPlan &k : plan.kernels) {
    const KernelTiling &t = k.tiling;
    SCOPED_TRACE(t.kernel);
    int64_t rows = 0;
    for (const CoreWork &c : k.cores)
      rows += c.rows;
    EXPECT_EQ(rows, k.rows);
    EXPECT_LE(k.blockDim, chip.vectorCores);
    EXPECT_GE(k.blockDim, 1);
    EXPECT_LE(k.rowsPerFormerCore - (k.tailCores ? k.rowsPerTailCore : k.rowsPerFormerCore), 1);
    EXPECT_LE(k.ubBytesUsed, chip.ubBytes);
    EXPECT_LE(ubBytes(t, t.maxRowsPerPass, chip.ubAlignment), chip.ubBytes);
    EXPECT_GE(t.chunk * t.chunks, t.rowLength);
    EXPECT_LT(t.chunk * (t.chunks - 1), t.rowLength);
    for (const UbBuffer &b : t.buffers)
      EXPECT_LE(b.elementBytes * t.chunk, chip.maxCopyBytes) << b.name();
  }
}

TEST(AscendPlan, EveryOpAndModeHasASoundPlanOnEveryChip) {
  struct Case {
    const char *op;
    std::map<std::string, int64_t> dims, attrs;
    std::set<std::string> with;
  };
  std::vector<Case> cases = {
      {kB2, {{"N", 1000}, {"R", 8000}, {"H", 7168}}, {{"top_k", 8}}, {}},
      {kB2, {{"N", 3}, {"R", 3}, {"H", 20000}}, {{"top_k", 1}}, {}}, // H over the UB: chunks
      {kA3, {{"Tk", 100}, {"R", 800}, {"E", 64}, {"H", 4096}}, {}, {}},
      {kA3,
       {{"Tk", 100}, {"R", 800}, {"E", 64}, {"H", 4096}},
       {},
       {"routing_map", "permuted_tokens", "probs"}},
      {kA3,
       {{"Tk", 100}, {"R", 640}, {"E", 64}, {"H", 4097}},
       {{"drop_and_pad", 1}},
       {"permuted_tokens", "probs"}},
      {"moe_unpermute", {{"R", 800}, {"Tk", 100}, {"E", 64}, {"K", 8}, {"H", 4096}}, {}, {}},
      {"moe_unpermute",
       {{"R", 800}, {"Tk", 100}, {"E", 64}, {"K", 8}, {"H", 4096}},
       {{"using_weighted_combine", 1}},
       {}},
  };
  for (const BuiltinChipFile &f : builtinChipFiles())
    for (const Case &c : cases)
      for (dsl::DType dtype : {dsl::DType::F32, dsl::DType::BF16}) {
        SCOPED_TRACE(fmt::format("{} on {} {}", c.op, f.name, dsl::dtypeName(dtype)));
        Chip chip = builtinChip(f.name);
        std::unique_ptr<dsl::OpDef> op = loadOp(c.op);
        Specialization spec;
        spec.dtype = dtype;
        spec.target = Target::ascend(chip);
        spec.present = c.with;
        for (const auto &[name, value] : c.dims)
          if (op->findDim(name)->isStatic)
            spec.statics[name] = value;
        for (const auto &[name, value] : c.attrs)
          spec.statics[name] = value;
        CompiledOp compiled = compile(*op, spec);
        ASSERT_EQ(compiled.ascend.size(), compiled.kernels.size());
        std::vector<std::vector<const dsl::Expr *>> domains;
        for (const KernelInfo &info : compiled.kernels)
          domains.push_back(info.domain);
        Plan plan = planOp({op.get(), dtype, c.dims, c.attrs, c.with}, chip, compiled.ascend, domains,
                           compiled.workspace);
        expectSound(plan, chip);
      }
}

TEST(AscendPlan, ARowLongerThanTheUbIsChunkedInBalancedPieces) {
  Chip chip = builtinChip("910b");
  B2Plan ours(chip, dsl::DType::BF16, 100, 8, 100000);
  const KernelTiling &t = ours.plan.kernels[0].tiling;
  EXPECT_GT(t.chunks, 1);
  // Balanced: no chunk is more than a granule (16 bf16 elements) shorter than the others.
  EXPECT_LT(t.chunk * t.chunks - t.rowLength, 16 * t.chunks);
  expectSound(ours.plan, chip);
}

TEST(AscendPlan, ImpossibleCasesGetAClearError) {
  // A UB too small for one chunk of a row with its indices (top_k 512 needs 2 KiB of them).
  Chip tiny = chipFromJson(chipJson(40, 1024), "tiny");
  try {
    B2Plan ours(tiny, dsl::DType::F32, 10, 512, 64);
    FAIL() << "planned";
  } catch (const CompileError &e) {
    EXPECT_NE(std::string(e.what()).find("does not fit the"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("1024 B UB of chip 'ut'"), std::string::npos) << e.what();
  }
  // A runtime dim the domain needs, not given.
  Chip chip = builtinChip("910b");
  std::unique_ptr<dsl::OpDef> op = loadOp(kB2);
  Specialization spec;
  spec.target = Target::ascend(chip);
  spec.statics = {{"H", 64}, {"top_k", 2}};
  CompiledOp compiled = compile(*op, spec);
  std::vector<std::vector<const dsl::Expr *>> domains{compiled.kernels[0].domain};
  EXPECT_THROW(planOp({op.get(), dsl::DType::F32, {{"H", 64}}, {{"top_k", 2}}, {}}, chip, compiled.ascend, domains, {}),
               std::invalid_argument);
  try {
    planOp({op.get(), dsl::DType::F32, {{"N", -5}, {"H", 64}}, {{"top_k", 2}}, {}}, chip, compiled.ascend, domains, {});
    ADD_FAILURE() << "planned -5 tokens";
  } catch (const std::invalid_argument &e) {
    EXPECT_NE(std::string(e.what()).find("dim 'N' must be >= 0, got -5"), std::string::npos) << e.what();
  }
}

TEST(AscendTilingJson, RoundTripsAndRejectsWhatDoesNotFitTheChip) {
  Chip chip = builtinChip("910b");
  B2Plan ours(chip, dsl::DType::BF16, 100, 8, 7168);
  const KernelTiling &t = ours.plan.kernels[0].tiling;
  nlohmann::json j = tilingToJson(t);
  EXPECT_EQ(tilingToJson(tilingFromJson(j, chip, "t")), j);
  auto error = [&](const std::function<void(nlohmann::json &)> &edit) {
    nlohmann::json bad = j;
    edit(bad);
    try {
      tilingFromJson(bad, chip, "tiling.json[0]");
    } catch (const std::runtime_error &e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(error([](nlohmann::json &b) { b["chunks"] = 2; }).find("'chunks' must be ceil"), std::string::npos);
  EXPECT_NE(error([](nlohmann::json &b) { b.erase("row_bytes"); }).find("'row_bytes' is missing"), std::string::npos);
  EXPECT_NE(error([](nlohmann::json &b) { b["buffer_count"] = 3; }).find("'buffer_count'"), std::string::npos);
  EXPECT_NE(error([](nlohmann::json &b) { b["max_rows_per_pass"] = 65535; }).find("do not fit"), std::string::npos);
  EXPECT_NE(error([](nlohmann::json &b) { b["buffers"] = 1; }).find("'buffers' must be a list"), std::string::npos);
  EXPECT_NE(error([](nlohmann::json &b) { b["kernel"] = ""; }).find("'kernel'"), std::string::npos);
  // whole_row is for a kept input only (B2's gathered rows are not kept); a file without it reads false.
  EXPECT_NE(
      error([](nlohmann::json &b) { b["buffers"][0]["whole_row"] = true; }).find("'whole_row' is for a kept input"),
      std::string::npos);
  EXPECT_NE(error([](nlohmann::json &b) { b["buffers"][0]["whole_row"] = 1; }).find("'whole_row'"), std::string::npos);
  nlohmann::json older = j;
  for (nlohmann::json &b : older["buffers"])
    b.erase("whole_row");
  EXPECT_EQ(tilingToJson(tilingFromJson(older, chip, "t")), j);
  std::string shortCopies = chipJson(40, 196352);
  shortCopies.replace(shortCopies.find("\"max_copy_bytes\": 65536"), 23, "\"max_copy_bytes\": 8192");
  try {
    tilingFromJson(j, chipFromJson(shortCopies, "short"), "tiling.json[0]");
    FAIL() << "a 14 KiB chunk passed an 8 KiB copy limit";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("over the chip's 8192 B copy limit"), std::string::npos) << e.what();
  }
  Chip small = chipFromJson(chipJson(40, 16384), "small");
  try {
    tilingFromJson(j, small, "tiling.json[0]");
    FAIL() << "a 7168-element bf16 tiling fit a 16 KiB UB";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("has 16384"), std::string::npos) << e.what();
  }
}

// A buffer's "name" is its role's prefix and its tensor: the lowering places a buffer by its role, so a
// prefix of no role is refused, naming the buffer and the field, not read as a buffer of some role.
TEST(AscendTilingJson, ReadsBufferRolesAndRejectsAnUnknownPrefix) {
  Chip chip = builtinChip("910b");
  B2Plan ours(chip, dsl::DType::BF16, 100, 8, 7168);
  nlohmann::json j = tilingToJson(ours.plan.kernels[0].tiling);
  ASSERT_EQ(j["buffers"][0]["name"], "in.grad_expanded_x");
  KernelTiling read = tilingFromJson(j, chip, "t");
  EXPECT_EQ(read.buffers[0].role, UbRole::Input);
  EXPECT_EQ(read.buffers[0].tensor, "grad_expanded_x");
  for (const char *name : {"tmp.grad_expanded_x", "grad_expanded_x", "in.", ".x", "In.grad_expanded_x"}) {
    nlohmann::json bad = j;
    bad["buffers"][0]["name"] = name;
    try {
      tilingFromJson(bad, chip, "tiling.json[0]");
      ADD_FAILURE() << "accepted buffer name '" << name << "'";
    } catch (const std::runtime_error &e) {
      EXPECT_NE(std::string(e.what()).find("tiling.json[0]: buffers[0]: 'name' must be <role>.<tensor>"),
                std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(std::string("got '") + name + "'"), std::string::npos) << e.what();
    }
  }
}

/// A CANN core's work in our terms. Its scalar index loads move 4 bytes each.
CoreWork cannWork(const cann::CoreWork &w) {
  CoreWork ours;
  ours.rows = ours.liveRows = w.rows;
  ours.dataCopies = w.dataCopies;
  ours.scalarReads = w.scalarGmReads;
  ours.gmBytes = w.gmBytes + 4 * w.scalarGmReads;
  ours.passes = w.passes;
  ours.bufferCount = w.bufferCount;
  return ours;
}

/// CANN's cost under our model: the busiest of its cores. A kernel whose Init zero-fills an output and then
/// syncs every core (SyncAll) runs as two stages, as our staged launches are costed: the busiest core's
/// zero-fill (one serial DataCopy), the SyncAll, then the busiest core's Process.
double cannCostNs(const Chip &chip, const std::vector<cann::CoreWork> &work) {
  double init = 0, process = 0;
  bool syncs = false;
  for (cann::CoreWork w : work) {
    if (w.rows == 0 && w.dataCopies == 0)
      continue;
    if (w.initCopies > 0) {
      syncs = true;
      CoreWork zeroFill;
      zeroFill.rows = 1;
      zeroFill.dataCopies = w.initCopies;
      zeroFill.gmBytes = w.initBytes;
      init = std::max(init, coreCostNs(chip, zeroFill) - chip.coreLaunchNs);
      w.dataCopies -= w.initCopies;
      w.gmBytes -= w.initBytes;
    }
    process = std::max(process, coreCostNs(chip, cannWork(w)) - chip.coreLaunchNs);
  }
  return chip.coreLaunchNs + init + (syncs ? chip.syncAllNs : 0) + process;
}

// Under the same cost model, our MoeInitRoutingV2Grad plans are never worse than CANN's tiling on 910B:
// tokens 1 to 64k, K 1 to 512, H 1 to 16k, every mode and dtype.
TEST(AscendPlanVsCann, InitRoutingV2GradIsNeverWorse) {
  Chip chip = builtinChip("910b");
  int better = 0, cases = 0;
  for (dsl::DType dtype : {dsl::DType::F32, dsl::DType::F16, dsl::DType::BF16})
    for (int64_t k : {1, 2, 6, 8, 64, 128, 512})
      for (int64_t h : {1, 8, 100, 1024, 7168, 16384})
        for (int64_t dropPad : {0, 1}) {
          std::unique_ptr<dsl::OpDef> op = loadOp(kB2);
          Specialization spec;
          spec.dtype = dtype;
          spec.target = Target::ascend(chip);
          spec.statics = {{"H", h}, {"top_k", k}, {"drop_pad_mode", dropPad}};
          CompiledOp compiled = compile(*op, spec);
          std::vector<std::vector<const dsl::Expr *>> domains{compiled.kernels[0].domain};
          for (int64_t n : {1, 7, 80, 1000, 4096, 65536}) {
            if (n * k > (int64_t(1) << 24))
              continue;
            for (int64_t active : dropPad ? std::vector<int64_t>{0} : std::vector<int64_t>{0, n * k / 2 + 1}) {
              SCOPED_TRACE(fmt::format("{} K={} H={} N={} dropPad={} active={}", dsl::dtypeName(dtype), k, h, n,
                                       dropPad, active));
              int64_t rows = active ? active : n * k;
              Plan ours = planOp({op.get(), dtype, {{"N", n}, {"H", h}, {"R", rows}},
                                  {{"top_k", k}, {"drop_pad_mode", dropPad}, {"active_num", active}}, {}},
                                 chip, compiled.ascend, domains, compiled.workspace);
              std::vector<int64_t> shape = dropPad ? std::vector<int64_t>{n, k, h} : std::vector<int64_t>{rows, h};
              cann::InitRoutingV2GradTiling cann = cann::initRoutingV2GradTiling(
                  {chip.vectorCores, chip.ubBytes}, shape, n * k, k, dropPad, active, cannType(dtype));
              double theirs = cannCostNs(chip, cann::initRoutingV2GradWork(cann, cannType(dtype)));
              EXPECT_LE(ours.costNs, theirs * (1 + 1e-9));
              better += ours.costNs < theirs * 0.99;
              ++cases;
            }
          }
        }
  std::cout << "ours is at least 1% cheaper in " << better << " of " << cases << " cases\n";
}

// The note's table: cost against CANN at the DeepSeek-V3, Qwen3 and Mixtral shapes (spec §8.1) on 910B, bf16.
TEST(AscendPlanVsCann, ModelShapesTable) {
  Chip chip = builtinChip("910b");
  struct Shape {
    const char *name;
    int64_t h, k;
  } shapes[] = {{"DeepSeek-V3", 7168, 8}, {"Qwen3", 4096, 8}, {"Mixtral", 4096, 2}};
  std::string table = "| shape | N | CANN blockDim | CANN us | ours blockDim | ours us | ours / CANN "
                      "|\n|---|---|---|---|---|---|---|\n";
  for (const Shape &s : shapes)
    for (int64_t n : {80, 4096}) {
      B2Plan ours(chip, dsl::DType::BF16, n, s.k, s.h);
      cann::InitRoutingV2GradTiling cann = cann::initRoutingV2GradTiling(
          {chip.vectorCores, chip.ubBytes}, {n * s.k, s.h}, n * s.k, s.k, 0, 0, cann::DType::BF16);
      double theirs = cannCostNs(chip, cann::initRoutingV2GradWork(cann, cann::DType::BF16));
      EXPECT_LE(ours.plan.costNs, theirs * (1 + 1e-9)) << s.name;
      table += fmt::format("| {} | {} | {} | {:.1f} | {} | {:.1f} | {:.3f} |\n", s.name, n, cann.needCoreNum,
                           theirs / 1000, ours.plan.kernels[0].blockDim, ours.plan.costNs / 1000,
                           ours.plan.costNs / theirs);
    }
  std::cout << table;
}

/// A3 (MoeTokenUnpermuteWithRoutingMapGrad) planned for a full routing with no drops: every permuted row
/// is some token's, so the fill that zeroes unreferenced rows has none left, and the data and probs
/// kernels work on their live rows: the Tk * K (token, expert) pairs, or in pad mode every slot.
struct A3Case {
  bool padded, probs;
  int64_t tokens, k, e, h;
  dsl::DType dtype;
  int64_t r = 0; // permuted rows; 0: Tk * K
  int64_t rows() const { return r ? r : tokens * k; }
};

/// The fill of permuted_tokens_grad's rows that no slot references (moe-fill-uncovered-rows). The spec
/// has them zero; CANN's kernel leaves them unwritten (spec 2.3: "unspecified upstream").
bool isRowFill(const std::string &kernel) { return kernel.find("__0_permuted_tokens_grad") != std::string::npos; }

Plan planA3(const Chip &chip, const A3Case &c) {
  std::unique_ptr<dsl::OpDef> op = loadOp(kA3);
  std::set<std::string> with;
  if (c.probs)
    with = c.padded ? std::set<std::string>{"permuted_tokens", "probs"}
                    : std::set<std::string>{"routing_map", "permuted_tokens", "probs"};
  Specialization spec;
  spec.dtype = c.dtype;
  spec.target = Target::ascend(chip);
  spec.statics = {{"E", c.e}, {"H", c.h}, {"drop_and_pad", c.padded}};
  spec.present = with;
  CompiledOp compiled = compile(*op, spec);
  std::vector<std::vector<const dsl::Expr *>> domains;
  PlanRequest request{op.get(), c.dtype, {{"Tk", c.tokens}, {"R", c.rows()}, {"E", c.e}, {"H", c.h}},
                      {{"drop_and_pad", c.padded}}, with, {}};
  for (const KernelInfo &info : compiled.kernels) {
    domains.push_back(info.domain);
    request.liveRows[info.name] = isRowFill(info.name) ? 0 : c.padded ? c.rows() : c.tokens * c.k;
  }
  return planOp(request, chip, compiled.ascend, domains, compiled.workspace);
}

/// The plan's cost without the fill of unreferenced rows (its stage, or its launch): the work CANN's kernel
/// does too.
double costWithoutRowFill(const Chip &chip, const Plan &plan) {
  std::vector<KernelPlan> kernels;
  for (const KernelPlan &k : plan.kernels)
    if (!isRowFill(k.tiling.kernel))
      kernels.push_back(k);
  double cost = 0;
  for (const LaunchPlan &l : planLaunches(chip, kernels))
    cost += l.costNs;
  return cost;
}

/// CANN's launch. With probs, both kernels' Init zero-fills probs_grad (InitOutput) and then waits for
/// every core (SyncAll) before Process writes it.
double cannA3CostNs(const Chip &chip, const A3Case &c) {
  cann::DType t = cannType(c.dtype);
  cann::UnpermuteWithRoutingMapGradTiling tiling = cann::unpermuteWithRoutingMapGradTiling(
      {chip.vectorCores, chip.ubBytes}, c.tokens, c.rows(), c.e, c.h, c.padded, c.probs, t, t);
  return cannCostNs(chip, cann::unpermuteWithRoutingMapGradWork(tiling, t, t, c.padded, c.probs));
}

// Under the same cost model, our A3 plans do the work CANN's kernel does (the routed rows, and with probs
// their dot products) at no more cost on 910B: tokens 1 to 64k, K 1 to 512, H 1 to 16k, both modes with and
// without probs, every dtype. The spec's zeroing of rows no slot references, which CANN's kernel does not
// do, is one more stage of the launch (see the table below).
TEST(AscendPlanVsCann, UnpermuteWithRoutingMapGradIsNeverWorse) {
  Chip chip = builtinChip("910b");
  std::map<std::string, std::pair<int, int>> better;           // mode -> (cases 1 % cheaper, cases)
  std::map<std::string, std::pair<double, std::string>> worst; // mode -> (the highest ours / CANN, its case)
  for (dsl::DType dtype : {dsl::DType::F32, dsl::DType::F16, dsl::DType::BF16})
    for (auto [e, k] : {std::pair<int64_t, int64_t>{8, 1}, {8, 2}, {64, 6}, {256, 8}, {512, 512}})
      for (int64_t h : {1, 8, 100, 1024, 7168, 16384})
        for (auto [padded, probs] : {std::pair{false, false}, {false, true}, {true, false}, {true, true}})
          for (int64_t n : {1, 7, 80, 1000, 4096, 65536}) {
            if (n * k > (int64_t(1) << 22))
              continue;
            A3Case c{padded, probs, n, k, e, h, dtype};
            if (padded) // whole capacities C = R / E (at least 1), as the op requires with probs
              c.r = e * std::max<int64_t>(1, n * k / e);
            std::string name = fmt::format("{} E={} K={} H={} N={} R={}{}{}", dsl::dtypeName(dtype), e, k, h, n,
                                           c.rows(), padded ? " pad" : "", probs ? " +probs" : "");
            SCOPED_TRACE(name);
            double ours = costWithoutRowFill(chip, planA3(chip, c)), theirs = cannA3CostNs(chip, c);
            EXPECT_LE(ours, theirs * (1 + 1e-9));
            std::string mode = std::string(padded ? "pad" : "non-pad") + (probs ? " +probs" : "");
            better[mode].first += ours < theirs * 0.99;
            better[mode].second += 1;
            if (ours / theirs > worst[mode].first)
              worst[mode] = {ours / theirs, name};
          }
  for (const auto &[mode, count] : better)
    std::cout << fmt::format("{}: ours at least 1% cheaper in {} of {} cases; the closest {:.3f}x at {}\n", mode,
                             count.first, count.second, worst[mode].first, worst[mode].second);
}

TEST(AscendPlanVsCann, UnpermuteWithRoutingMapGradTable) {
  Chip chip = builtinChip("910b");
  struct Shape {
    const char *name;
    int64_t h, e, k;
  } shapes[] = {{"DeepSeek-V3", 7168, 256, 8}, {"Qwen3", 4096, 128, 8}, {"Mixtral", 4096, 8, 2}};
  std::string table = "| shape | mode | N | CANN us | ours us | ours / CANN | ours without the fill us | "
                      "without the fill / CANN |\n|---|---|---|---|---|---|---|---|\n";
  for (const Shape &s : shapes)
    for (auto [padded, probs] : {std::pair{false, false}, {false, true}, {true, false}, {true, true}})
      for (int64_t n : {80, 4096}) {
        A3Case c{padded, probs, n, s.k, s.e, s.h, dsl::DType::BF16};
        Plan ours = planA3(chip, c);
        expectSound(ours, chip);
        double theirs = cannA3CostNs(chip, c), withoutFill = costWithoutRowFill(chip, ours);
        EXPECT_LE(withoutFill, theirs * (1 + 1e-9)) << s.name;
        table += fmt::format("| {} | {}{} | {} | {:.1f} | {:.1f} | {:.3f} | {:.1f} | {:.3f} |\n", s.name,
                             padded ? "pad" : "non-pad", probs ? " +probs" : "", n, theirs / 1000, ours.costNs / 1000,
                             ours.costNs / theirs, withoutFill / 1000, withoutFill / theirs);
      }
  std::cout << table;
}

} // namespace
} // namespace moec::ascend
