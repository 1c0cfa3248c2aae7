//===- PipelineTable.cpp - Every pass compile() runs, top to bottom --------===//
//
// One row per pass: the stage (pass manager) it runs in, the optimization bit that turns it off (none: it
// always runs), the targets it runs for, an extra condition where a row needs one, the optimization bits
// its options read, and how to make it. compile() (Pipeline.cpp) builds each stage's pass manager from
// these rows; moec-opt's --moe-pipeline builds all three stages at once. A new pass is a new row.
//===----------------------------------------------------------------------===//
#include "moec/compiler/DefaultSchedule.h"
#include "moec/compiler/PipelineTable.h"

#include "moec/compiler/Targets/Targets.h"
#include "moec/compiler/Transforms/Passes.h"
#include "moec/contracts/ascend/Chip.h"

#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ErrorHandling.h"

#include <functional>
#include <stdexcept>

namespace moec {

namespace {

using mlir::OpPassManager;
using Stage = PipelineStage;

// Targets a row runs for.
constexpr unsigned kCpu = 1, kGpu = 2, kAscend = 4, kAll = kCpu | kGpu | kAscend;

unsigned targetBit(TargetKind t) { return t == TargetKind::CPU ? kCpu : t == TargetKind::GPU ? kGpu : kAscend; }

bool isGpu(const PipelineConfig &c) { return c.target == TargetKind::GPU; }
bool hoisted(const PipelineConfig &c) { return c.on(kHoistRowInvariants); }

/// The GPU's LLVM-dialect conversion runs on its gpu.module; everything else on the module.
OpPassManager &codePm(OpPassManager &pm, const PipelineConfig &c) {
  return isGpu(c) ? pm.nest<mlir::gpu::GPUModuleOp>() : pm;
}

/// The canonicalizer with its worklist seeded bottom-up (its pass option `top-down=false`). On versioned
/// loops, thousands of ops that mostly fold away, it is faster than top-down: 34 ms against 55 after A3's
/// versions (pad, probs, bf16, H=4096, sm_90), 27 % less over ops/examples.json's compiles. It reaches
/// the same ops, some in another order.
std::unique_ptr<mlir::Pass> canonicalizer() {
  mlir::GreedyRewriteConfig config;
  config.setUseTopDownTraversal(false);
  return mlir::createCanonicalizerPass(config);
}

struct Row {
  Stage stage;
  const char *pass;       // the pass's name, as moec-opt knows it
  uint32_t optimization;  // the bit that turns it off; 0: it always runs
  unsigned targets;       // kCpu | kGpu | kAscend
  uint32_t readsOptions;  // the optimization bits its options read
  std::function<bool(const PipelineConfig &)> when; // an extra condition; null: none
  std::function<void(OpPassManager &, const PipelineConfig &)> add;
};

const std::vector<Row> &table() {
  static const std::vector<Row> rows = {
      // moe dialect: bind static values, choose the schedule, then the rewrites that change how rows run.
      {Stage::Moe, "moe-specialize", 0, kAll, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &c) {
         moe::MoeSpecializeOptions bind;
         for (const auto &[name, value] : c.statics)
           bind.bindings.push_back(name + "=" + std::to_string(value));
         pm.addPass(moe::createMoeSpecialize(bind));
       }},
      {Stage::Moe, "moe-fill-uncovered-rows", kFillUncoveredRows, kAll, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(moe::createMoeFillUncoveredRows()); }},
      // On Ascend rowsPerBlock is the most rows per UB pass (moe-plan-ascend's), not a CPU worker's least.
      {Stage::Moe, "moe-schedule", 0, kAll, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &c) {
         bool ascend = c.target == TargetKind::Ascend;
         pm.addPass(moe::createMoeSchedule({isGpu(c) ? "gpu" : ascend ? "ascend" : "cpu", c.schedule.vector,
                                            c.schedule.threads, ascend ? 0 : c.schedule.rowsPerBlock,
                                            c.schedule.unroll, c.vectorLanes}));
       }},
      // CPU: a fold accumulating in f16/bf16 carries its accumulator as f32; its bf16 steps' roundings may
      // skip the NaN case that the result's rounding covers.
      {Stage::Moe, "moe-widen-rounded-folds", kWidenRoundedFolds, kCpu, kUncheckedStepRoundings, nullptr,
       [](OpPassManager &pm, const PipelineConfig &c) {
         pm.addPass(moe::createMoeWidenRoundedFolds({c.on(kUncheckedStepRoundings)}));
       }},
      // A GPU list is built by a warp's converged lanes, so only in a row's prologue: it needs the hoisting.
      {Stage::Moe, "moe-compact-predicated-folds", kCompactPredicatedFolds, kAll, 0,
       [](const PipelineConfig &c) { return hoisted(c) || !isGpu(c); },
       [](OpPassManager &pm, const PipelineConfig &c) {
         pm.addPass(moe::createMoeCompactPredicatedFolds({isGpu(c) ? "gpu" : "cpu"}));
       }},
      // A short fold's list: the CPU's accumulated rows add its live steps directly; the GPU runs the row in
      // a version per power of two of live steps (moe-lower-to-gpu).
      {Stage::Moe, "moe-short-lists", kShortLists, kCpu | kGpu, kAccumulateRows,
       [](const PipelineConfig &c) { return isGpu(c) ? hoisted(c) : c.on(kAccumulateRows); },
       [](OpPassManager &pm, const PipelineConfig &c) {
         pm.addPass(moe::createMoeShortLists({isGpu(c) ? "gpu" : "cpu"}));
       }},
      {Stage::Moe, "moe-hoist-row-invariants", kHoistRowInvariants, kAll, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(moe::createMoeHoistRowInvariants()); }},
      // GPU: rows that write the same values (a token's row to each of its slots) run as one block's group.
      {Stage::Moe, "moe-group-rows", kGroupRows, kGpu, 0, hoisted,
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(moe::createMoeGroupRows()); }},
      // GPU: the points of a row whose dot products read the same row (a token's experts) run on one warp.
      // Under register-budget a batch of 4 dot products, not 8: a point holds a vector's partial sums a lane.
      {Stage::Moe, "moe-group-points", kGroupPoints, kGpu, kRegisterBudget, nullptr,
       [](OpPassManager &pm, const PipelineConfig &c) {
         pm.addPass(moe::createMoeGroupPoints({/*batch=*/c.on(kRegisterBudget) ? 4 : 8}));
       }},
      // CPU: a row of points whose dead points only write a constant runs its live ones only, from a list.
      {Stage::Moe, "moe-compact-predicated-points", kCompactPredicatedPoints, kCpu, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(moe::createMoeCompactPredicatedPoints()); }},
      // One CPU thread runs its rows in order: a prefix fold can continue from the row before.
      {Stage::Moe, "moe-carry-prefix-folds", kCarryPrefixFolds, kCpu, 0, hoisted,
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(moe::createMoeCarryPrefixFolds()); }},
      // CPU: a point kernel's live points run their dot products four at a time: four gathered rows stream.
      {Stage::Moe, "moe-interleave-reductions", kInterleaveReductions, kCpu, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(moe::createMoeInterleaveReductions()); }},
      // A list's live entries 16 at a time (C2's live experts in its rowmap row): AVX-512 compresses a vector
      // of indices in one instruction; without it LLVM would expand the compress lane by lane.
      {Stage::Moe, "moe-compress-lists", kCompressLists, kCpu, 0,
       [](const PipelineConfig &c) { return c.vectorLanes >= 16; },
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(moe::createMoeCompressLists({/*lanes=*/16})); }},
      // CPU: a row's reduction over gathered rows runs its steps over the whole row, several at a time.
      {Stage::Moe, "moe-accumulate-rows", kAccumulateRows, kCpu, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(moe::createMoeAccumulateRows()); }},
      // GPU: a row of points runs 32 points at once, a lane each; a prefix count over them is a ballot.
      {Stage::Moe, "moe-lane-point-access", kLanePointAccess, kGpu, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(moe::createMoeLanePointAccess()); }},
      // GPU: a fold's per-step work that does not vary along the row runs once per step in the row's
      // prologue, into tables: the prologue is the hoisting's.
      {Stage::Moe, "moe-step-tables", kStepTables, kGpu, 0, hoisted,
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(moe::createMoeStepTables()); }},
      // Ascend: each domain's UB tiling for the chip; a tuned config may fix the buffering, the chunk and the
      // rows per pass (0: the pass's choice).
      {Stage::Moe, "moe-plan-ascend", 0, kAscend, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &c) {
         if (!c.chip)
           throw std::invalid_argument("the ascend target needs a chip");
         const PipelineConfig::Chip &chip = *c.chip;
         pm.addPass(moe::createMoePlanAscend({chip.name, chip.ubBytes, chip.ubAlignment, chip.maxCopyBytes,
                                              c.schedule.buffers, c.schedule.chunk, c.schedule.rowsPerBlock,
                                              chip.dataCopyNs, chip.gmGBpsPerCore}));
       }},

      // Loops: rows to a row-range loop (cpu), to the grid (gpu) or to per-core loop nests (ascend).
      {Stage::Loops, "moe-lower-to-ascend", 0, kAscend, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &c) {
         pm.addPass(moe::createMoeLowerToAscend({c.chip ? c.chip->ubAlignment : 32}));
       }},
      {Stage::Loops, "moe-lower-to-gpu", 0, kGpu, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(moe::createMoeLowerToGPU()); }},
      // GPU (opt-in): every kernel within 128 registers a thread, twice the warps per SM of a 255-register one.
      {Stage::Loops, "moe-budget-registers", kRegisterBudget, kGpu, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(moe::createMoeBudgetRegisters()); }},
      // GPU: a warp's steps along a dot product's row unroll, before the versions and guards, so that the
      // steps' gathers, guarded, are in flight together.
      {Stage::Loops, "moe-unroll-lane-sums", kLoadsInFlight, kGpu, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(moe::createMoeUnrollLaneSums()); }},
      {Stage::Loops, "moe-lower-to-loops", 0, kCpu, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(moe::createMoeLowerToLoops()); }},
      // CPU: the output's vector stores are non-temporal where it is large and its base is aligned.
      {Stage::Loops, "moe-streaming-stores", kStreamingStores, kCpu, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(moe::createMoeStreamingStores()); }},
      // A loop along a row runs without the branches its row decides (bounds checks, live terms) where they
      // take their usual values. On the GPU this also lets a thread issue all of a row's gathers before it
      // waits on one: behind a branch each ran alone (B2 at top-8 on an H200: 75 % of a device copy).
      {Stage::Loops, "canonicalize", kVersionRowLoops, kCpu | kGpu, 0, nullptr, // its selectors' constants
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(canonicalizer()); }},
      {Stage::Loops, "moe-version-row-loops", kVersionRowLoops, kCpu | kGpu, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &c) {
         pm.addPass(moe::createMoeVersionRowLoops({/*selectVersions=*/!isGpu(c)}));
       }},
      // GPU: a term that may be skipped loads under a predicate, not behind a branch, so that a row's gathers
      // issue together also where some of its terms are skipped.
      {Stage::Loops, "canonicalize", kGuardLoads, kGpu, 0, nullptr, // the versions' known branches folded
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(canonicalizer()); }},
      {Stage::Loops, "moe-guard-loads", kGuardLoads, kGpu, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(moe::createMoeGuardLoads()); }},
      // GPU: a thread's few steps along a row (marked by moe-lower-to-gpu) unroll once versioned and
      // guarded: the steps' gathers are in flight together.
      {Stage::Loops, "moe-unroll-row-loops", kLoadsInFlight, kGpu, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(moe::createMoeUnrollRowLoops()); }},
      // CPU: a row chosen by data (a gather) is prefetched ahead along the row, and the next row's head;
      // after the versions, so that each version's loop gathers only the rows it reads.
      {Stage::Loops, "canonicalize", kPrefetchGatheredRows, kCpu, 0, nullptr, // each version's terms only
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(canonicalizer()); }},
      {Stage::Loops, "moe-prefetch-gathered-rows", kPrefetchGatheredRows, kCpu, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(moe::createMoePrefetchGatheredRows()); }},
      // Bounds checks the loops' ranges prove (an index below a fold's bound, itself below the dim) fold.
      {Stage::Loops, "int-range-optimizations", 0, kAll, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(mlir::arith::createIntRangeOptimizationsPass()); }},
      {Stage::Loops, "canonicalize", 0, kAll, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(canonicalizer()); }},
      {Stage::Loops, "cse", 0, kAll, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(mlir::createCSEPass()); }},

      // LLVM dialect. CPU (and the Ascend simulator's host code): a loop that computes lane-wise from bf16
      // rows widens them in place, its lanes paired (even, odd).
      {Stage::Llvm, "moe-widen-bf16-pairs", kWidenBf16Pairs, kCpu, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(moe::createMoeWidenBf16Pairs()); }},
      // bf16 rounding as integer ops: x86's vcvtneps2bf16 flushes subnormals, and the libcall LLVM falls back
      // to is missing from older libgcc. The expansion is exact round-to-nearest-even; the marked roundings
      // of a widened fold's steps go first, without their NaN case.
      {Stage::Llvm, "moe-expand-unchecked-roundings", 0, kCpu | kAscend, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(moe::createMoeExpandUncheckedRoundings()); }},
      // Where the host has AVX512-BF16, vector roundings use vcvtneps2bf16 but for NaN and subnormal lanes.
      {Stage::Llvm, "moe-native-bf16-roundings", kNativeBf16Roundings, kCpu, 0,
       [](const PipelineConfig &c) { return c.nativeBf16Roundings; },
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(moe::createMoeNativeBf16Roundings()); }},
      {Stage::Llvm, "arith-expand", 0, kCpu | kAscend, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &) {
         pm.addPass(mlir::arith::createArithExpandOpsPass({/*includeBf16=*/true}));
       }},
      // ... and bf16 values between ops as i16, which x86 keeps in registers (see moe-bf16-bits).
      {Stage::Llvm, "moe-bf16-bits", 0, kCpu | kAscend, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(moe::createMoeBf16Bits()); }},
      {Stage::Llvm, "canonicalize", 0, kCpu | kAscend, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(canonicalizer()); }},
      {Stage::Llvm, "convert-scf-to-cf", 0, kAll, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &c) { codePm(pm, c).addPass(mlir::createSCFToControlFlowPass()); }},
      // GPU: math.fma straight to llvm.intr.fma (fma.rn.f32); gpu-to-nvvm would call libdevice instead.
      {Stage::Llvm, "convert-math-to-llvm", 0, kGpu, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &c) { codePm(pm, c).addPass(mlir::createConvertMathToLLVMPass()); }},
      {Stage::Llvm, "convert-gpu-to-nvvm", 0, kGpu, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &c) {
         mlir::ConvertGpuOpsToNVVMOpsOptions nvvm;
         nvvm.indexBitwidth = 64;
         codePm(pm, c).addPass(mlir::createConvertGpuOpsToNVVMOps(nvvm));
       }},
      {Stage::Llvm, "canonicalize", 0, kGpu, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &c) { codePm(pm, c).addPass(canonicalizer()); }},
      {Stage::Llvm, "cse", 0, kGpu, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &c) { codePm(pm, c).addPass(mlir::createCSEPass()); }},
      {Stage::Llvm, "convert-to-llvm", 0, kCpu | kAscend, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &) { pm.addPass(mlir::createConvertToLLVMPass()); }},
      {Stage::Llvm, "reconcile-unrealized-casts", 0, kAll, 0, nullptr,
       [](OpPassManager &pm, const PipelineConfig &c) {
         codePm(pm, c).addPass(mlir::createReconcileUnrealizedCastsPass());
       }},
  };
  return rows;
}

/// moec-opt's --moe-pipeline options: what a Specialization and the host give compile().
struct MoePipelineOptions : mlir::PassPipelineOptions<MoePipelineOptions> {
  Option<std::string> target{*this, "target", llvm::cl::desc("cpu, ptx, ascend or ascend-sim"), llvm::cl::init("cpu")};
  ListOption<std::string> bindings{*this, "bindings", llvm::cl::desc("NAME=VALUE for each static dim and attribute")};
  Option<int64_t> vector{*this, "vector", llvm::cl::desc("schedule: vector width (0: choice)"), llvm::cl::init(0)};
  Option<int64_t> threads{*this, "threads", llvm::cl::desc("schedule: threads (0: choice)"), llvm::cl::init(0)};
  Option<int64_t> rowsPerBlock{*this, "rows-per-block", llvm::cl::desc("schedule: rows per block (0: choice)"),
                               llvm::cl::init(0)};
  Option<int64_t> unroll{*this, "unroll", llvm::cl::desc("schedule: unroll (0: choice)"), llvm::cl::init(0)};
  Option<int64_t> buffers{*this, "buffers", llvm::cl::desc("Ascend: UB buffer copies (0: choice)"), llvm::cl::init(0)};
  Option<int64_t> chunk{*this, "chunk", llvm::cl::desc("Ascend: most elements per UB pass (0: choice)"),
                        llvm::cl::init(0)};
  ListOption<std::string> disable{*this, "disable", llvm::cl::desc("optimizations turned off, by name")};
  ListOption<std::string> enable{*this, "enable", llvm::cl::desc("opt-in optimizations turned on, by name")};
  Option<std::string> chip{*this, "chip", llvm::cl::desc("Ascend: chip name"), llvm::cl::init("910b")};
  Option<int64_t> ubBytes{*this, "ub-bytes", llvm::cl::desc("Ascend: the chip's usable UB bytes (0: the built-in chip's)"),
                          llvm::cl::init(0)};
  Option<int64_t> ubAlignment{*this, "ub-alignment", llvm::cl::desc("Ascend: UB alignment"), llvm::cl::init(32)};
  Option<int64_t> maxCopyBytes{*this, "max-copy-bytes", llvm::cl::desc("Ascend: most bytes of one DataCopy"),
                               llvm::cl::init(65536)};
  Option<double> dataCopyNs{*this, "data-copy-ns", llvm::cl::desc("Ascend: DataCopy set-up ns"), llvm::cl::init(0)};
  Option<double> gmGbpsPerCore{*this, "gm-gbps-per-core", llvm::cl::desc("Ascend: GM GB/s per core"),
                               llvm::cl::init(0)};
  Option<bool> nativeBf16Roundings{*this, "native-bf16-roundings",
                                   llvm::cl::desc("CPU: the host rounds with vcvtneps2bf16 (default: this host)"),
                                   llvm::cl::init(hostHasNativeBf16Rounding())};
  Option<int64_t> vectorLanes{*this, "vector-lanes",
                              llvm::cl::desc("CPU: f32 lanes of the widest vector (0: this host's)"), llvm::cl::init(0)};
  Option<std::string> stop{*this, "stop", llvm::cl::desc("the last stage: moe, loops or llvm"), llvm::cl::init("llvm")};
};

} // namespace
PipelineConfig::Chip chipFigures(const ascend::Chip &chip);
namespace {

/// The config `o` describes; throws std::invalid_argument for a value that names nothing.
PipelineConfig configOf(const MoePipelineOptions &o) {
  PipelineConfig c;
  std::string t = o.target;
  if (t == "cpu" || t == "ptx" || t == "ascend" || t == "ascend-sim")
    c.target = t == "cpu" ? TargetKind::CPU : t == "ptx" ? TargetKind::GPU : TargetKind::Ascend;
  else
    throw std::invalid_argument("target '" + t + "' is not cpu, ptx, ascend or ascend-sim");
  c.simulated = t == "ascend-sim";
  for (const std::string &binding : o.bindings) {
    auto [name, value] = llvm::StringRef(binding).split('=');
    int64_t v;
    if (name.empty() || value.getAsInteger(10, v))
      throw std::invalid_argument("binding '" + binding + "' is not NAME=VALUE");
    c.statics[name.str()] = v;
  }
  c.schedule = {o.rowsPerBlock, o.threads, o.vector, o.unroll, 0, 0, o.buffers, o.chunk};
  for (const std::string &name : o.disable)
    if (uint32_t bit = optimizationByName(name))
      c.schedule.disabled |= bit;
    else
      throw std::invalid_argument("no optimization is named '" + name + "' (" + optimizationNames() + ")");
  for (const std::string &name : o.enable)
    c.schedule.enabled |= optimizationByName(name);
  if (c.target == TargetKind::Ascend) {
    // A built-in chip's figures by its name, unless given.
    c.chip = PipelineConfig::Chip{o.chip, o.ubBytes, o.ubAlignment, o.maxCopyBytes, o.dataCopyNs, o.gmGbpsPerCore};
    if (!o.ubBytes)
      c.chip = chipFigures(ascend::builtinChip(o.chip));
  }
  c.nativeBf16Roundings = o.nativeBf16Roundings;
  c.vectorLanes = o.vectorLanes ? int64_t(o.vectorLanes) : hostVectorLanes();
  return c;
}

} // namespace

PipelineConfig::Chip chipFigures(const ascend::Chip &chip) {
  return {chip.name, chip.ubBytes, chip.ubAlignment, chip.maxCopyBytes, chip.dataCopyNs, chip.gmGBpsPerCore};
}

void addPipelineStage(OpPassManager &pm, PipelineStage stage, const PipelineConfig &config) {
  unsigned target = targetBit(config.target);
  // (The GPU's LLVM-stage rows each nest on the gpu.module; the pass manager merges adjacent nestings.)
  for (const Row &row : table()) {
    if (row.stage != stage || !(row.targets & target) || (row.optimization && !config.on(Optimization(row.optimization))))
      continue;
    if (row.when && !row.when(config))
      continue;
    row.add(pm, config);
  }
}

void registerMoePipeline() {
  static mlir::PassPipelineRegistration<MoePipelineOptions> registration(
      "moe-pipeline", "the passes `moec emit` runs, from genMoe's IR (moec emit --emit gen) to the stage `stop`",
      [](OpPassManager &pm, const MoePipelineOptions &options) {
        PipelineConfig config;
        try {
          config = configOf(options);
        } catch (const std::invalid_argument &e) {
          llvm::report_fatal_error(llvm::Twine("--moe-pipeline: ") + e.what(), /*gen_crash_diag=*/false);
        }
        std::string stop = options.stop;
        for (PipelineStage stage : {PipelineStage::Moe, PipelineStage::Loops, PipelineStage::Llvm}) {
          addPipelineStage(pm, stage, config);
          if ((stage == PipelineStage::Moe && stop == "moe") || (stage == PipelineStage::Loops && stop == "loops"))
            break;
        }
      });
}

uint32_t optimizationsFor(TargetKind target) {
  // The front end's statement fusion (genMoe) reads kFuseRowStores on every target.
  uint32_t bits = kFuseRowStores;
  for (const Row &row : table())
    if (row.targets & targetBit(target))
      bits |= row.optimization | row.readsOptions;
  return bits;
}

} // namespace moec
