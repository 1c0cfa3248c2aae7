//===- Pipeline.cpp - The whole compiler, top to bottom -------------------===//
//
//   OpDef (checked AST)
//     │ genMoe                      one kernel func per assignment, lean ABI        [ast] [moe]
//     │                             (cpu, ptx: a row assignment fused into a dot product, dsl::FusedRows)
//     ▼
//   moe dialect ── moe-specialize ── moe-fill-uncovered-rows ── moe-schedule
//     │ moe-widen-rounded-folds (cpu) ── moe-compact-predicated-folds ── moe-hoist-row-invariants
//     │ ── moe-group-rows, moe-group-points (ptx) ── moe-compact-predicated-points, moe-carry-prefix-folds (cpu)
//     │ ── moe-lane-point-access (ptx)
//     │ ascend: moe-plan-ascend: each domain's UB tiling; the plan is the artifact (runtime/ascend)
//     │ moe-lower-to-loops (cpu) | moe-lower-to-gpu (ptx) | moe-lower-to-ascend (ascend simulator: per-core
//     │ loop nests through UB buffers, then the CPU path below), moe-prefetch-gathered-rows (cpu),
//     │ moe-version-row-loops, moe-guard-loads (ptx), canonicalize, cse                 [loops]
//     ▼
//   scf/arith/memref/vector (+gpu)
//     │ cpu: moe-expand-unchecked-roundings, moe-native-bf16-roundings (AVX512-BF16 hosts),
//     │      arith-expand (bf16), moe-bf16-bits,
//     │      scf-to-cf, convert-to-llvm          ptx: scf-to-cf, math-to-llvm, gpu-to-nvvm
//     │ reconcile-unrealized-casts
//     ▼
//   LLVM dialect ── translate ── LLVM IR ── LLVM O2                                  [llvm]
//     │ cpu: object file, ORC JIT                ptx: NVPTX backend                   [asm] [ptx]
//===----------------------------------------------------------------------===//
#include "moec/compiler/Pipeline.h"

#include "moec/compiler/Dialect/MoeDialect.h"
#include "moec/compiler/Frontend/MoeGen.h"
#include "moec/compiler/Registration.h"
#include "moec/compiler/Targets/Targets.h"
#include "moec/compiler/Transforms/BodyLowering.h"
#include "moec/compiler/Transforms/Passes.h"
#include "moec/dsl/Diagnostics.h"
#include "moec/dsl/Eval.h"
#include "moec/dsl/Printer.h"

#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/IR/LLVMContext.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <functional>
#include <cstdlib>

using namespace mlir;

namespace moec {

// Static dims are folded into index arithmetic: bounded so that products with runtime dims stay far from
// int64 overflow.
constexpr int64_t kMaxStaticDim = (int64_t(1) << 31) - 1;

const char *stageName(Stage s) {
  static const char *names[] = {"ast", "moe", "loops", "llvm", "ptx", "asm"};
  return names[static_cast<int>(s)];
}

std::optional<Stage> parseStage(const std::string &name) {
  for (Stage s : {Stage::Ast, Stage::Moe, Stage::Loops, Stage::LLVM, Stage::PTX, Stage::Asm})
    if (name == stageName(s))
      return s;
  return std::nullopt;
}

/// Whether a tensor that is there (required, or optional and present) uses dim `name` in its shape.
static bool shapesUse(const dsl::OpDef &op, const std::set<std::string> &present, const std::string &name) {
  std::function<bool(const dsl::Expr &)> uses = [&](const dsl::Expr &e) {
    if (e.kind == dsl::ExprKind::Name && e.name == name)
      return true;
    for (const dsl::ExprPtr &o : e.operands)
      if (uses(*o))
        return true;
    return false;
  };
  for (const dsl::TensorDecl &t : op.tensors)
    if (!t.optional || present.count(t.name))
      for (const dsl::ShapeDim &d : t.shape)
        if (uses(*d.size))
          return true;
  return false;
}

std::map<std::string, int64_t> resolveStatics(const dsl::OpDef &op, const Specialization &spec) {
  for (const std::string &name : spec.present) {
    const dsl::TensorDecl *t = op.findTensor(name);
    if (!t || !t->optional)
      throw CompileError(op.name + ": '" + name + "' is not an optional tensor of the op");
  }
  if (std::find(op.allowedTypes.begin(), op.allowedTypes.end(), spec.dtype) == op.allowedTypes.end()) {
    std::string allowed;
    for (dsl::DType t : op.allowedTypes)
      allowed += std::string(allowed.empty() ? "" : ", ") + dsl::dtypeName(t);
    throw CompileError(op.name + ": dtype " + dsl::dtypeName(spec.dtype) + " is not supported (allowed: " +
                       allowed + ")");
  }
  for (const auto &[name, value] : spec.statics) {
    const dsl::DimDecl *dim = op.findDim(name);
    const dsl::AttrDecl *attr = op.findAttr(name);
    if (!dim && !attr)
      throw CompileError(op.name + ": unknown dim or attribute '" + name + "'");
    if ((dim && !dim->isStatic) || (attr && !attr->isStatic))
      throw CompileError(op.name + ": '" + name + "' is a runtime " + (dim ? "dim" : "attribute") +
                         "; it is passed at launch, not compiled in");
  }
  std::map<std::string, int64_t> statics;
  dsl::Bindings bindings;
  auto lookup = [&](const std::string &name, const std::string &alias) -> std::optional<int64_t> {
    if (alias != name && spec.statics.count(name) && spec.statics.count(alias))
      throw CompileError(op.name + ": attribute '" + name + "' is given twice, as '" + name + "' and as its alias '" +
                         alias + "'");
    if (auto it = spec.statics.find(name); it != spec.statics.end())
      return it->second;
    if (auto it = spec.statics.find(alias); it != spec.statics.end())
      return it->second;
    return std::nullopt;
  };
  for (const dsl::DimDecl &d : op.dims) {
    if (!d.isStatic)
      continue;
    auto v = lookup(d.name, d.name);
    if (!v && !shapesUse(op, spec.present, d.name))
      continue; // only absent optional tensors have it; moe-specialize reports a use in the body
    if (!v)
      throw CompileError(op.name + ": static dim '" + d.name + "' needs a value (--dim " + d.name + "=...)");
    if (*v <= 0 || *v > kMaxStaticDim)
      throw CompileError(op.name + ": static dim '" + d.name + "' must be in [1, " + std::to_string(kMaxStaticDim) +
                         "], got " + std::to_string(*v));
    statics[d.name] = bindings.values[d.name] = *v;
  }
  for (const dsl::AttrDecl &a : op.attrs) {
    if (!a.isStatic)
      continue;
    auto v = lookup(a.name, a.innerName());
    if (!v)
      v = a.defaultValue;
    if (!v)
      throw CompileError(op.name + ": static attribute '" + a.name + "' needs a value (--attr " + a.name + "=...)");
    statics[a.name] = bindings.values[a.name] = bindings.values[a.innerName()] = *v;
  }
  for (const dsl::Require &r : op.requires_) {
    try {
      if (!dsl::evalBool(*r.cond, bindings))
        throw CompileError(dsl::renderDiagnostic(r.cond->loc, op.name + ": " + r.message + " (" +
                                                                  dsl::printExpr(*r.cond) + ")"));
    } catch (const dsl::EvalError &e) {
      // A value not known yet (a runtime dim) is checked on the host before each launch instead; failing
      // arithmetic on known values fails here.
      if (e.isArithmetic())
        throw CompileError(dsl::renderDiagnostic(r.cond->loc, op.name + ": cannot check this require: " + e.what()));
    }
  }
  return statics;
}


std::set<std::string> resolvePresence(const dsl::OpDef &op, const std::set<std::string> &inputs,
                                      const std::map<std::string, int64_t> &statics) {
  dsl::Bindings b = dsl::specializationBindings(op, inputs, statics);
  std::set<std::string> present = inputs;
  for (const dsl::TensorDecl &t : op.tensors) {
    if (!t.optional || !t.isOutput)
      continue;
    try {
      if (dsl::evalBool(*t.when, b))
        present.insert(t.name);
    } catch (const dsl::EvalError &e) {
      throw CompileError(op.name + ": cannot decide whether output '" + t.name + "' exists: " + e.what());
    }
  }
  return present;
}

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

/// Collects MLIR diagnostics so a failed pass becomes a CompileError with the real message.
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(MLIRContext &ctx)
      : handler(&ctx, [this](Diagnostic &d) {
          llvm::raw_string_ostream os(text);
          os << d.getLocation() << ": " << d << "\n";
          return success();
        }) {}
  [[noreturn]] void fail(const std::string &what) { throw CompileError(what + ":\n" + text); }

private:
  std::string text;
  ScopedDiagnosticHandler handler;
};

std::string printIR(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  op->print(os);
  return text;
}

std::string printIR(llvm::Module &module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os, nullptr);
  return text;
}

/// MOEC_PASS_TIMING=1 prints MLIR's per-pass timing report for every pass manager (like --mlir-timing).
/// The IR is verified once at the end of each stage (runStage), not after every pass: verifying took a
/// tenth of compiling a small kernel. moec-opt, and so every pass's lit test, verifies after each pass.
void configure(PassManager &pm) {
  static const bool timing = std::getenv("MOEC_PASS_TIMING") != nullptr;
  if (timing)
    pm.enableTiming();
  pm.enableVerifier(false);
}

/// Runs a stage's passes, then verifies what they made.
LogicalResult runStage(PassManager &pm, ModuleOp module) {
  return failure(failed(pm.run(module)) || failed(verify(module)));
}

const DialectRegistry &registry() {
  static const DialectRegistry instance = [] {
    DialectRegistry r;
    registerMoecDialects(r);
    return r;
  }();
  return instance;
}

} // namespace

CompiledOp compile(const dsl::OpDef &op, const Specialization &spec, const CompileOptions &options) {
  CompiledOp result;
  bool isGpu = spec.target.kind == TargetKind::GPU;
  if (isGpu) {
    try {
      checkPtxArch(spec.target.arch);
    } catch (const std::invalid_argument &e) {
      throw CompileError(e.what());
    }
  }
  if (std::string why = scheduleProblem(spec.schedule, spec.target.kind, /*requested=*/true); !why.empty())
    throw CompileError(op.name + ": schedule " + why);
  std::map<std::string, int64_t> statics = resolveStatics(op, spec);
  std::set<std::string> present = resolvePresence(op, spec.present, statics);
  auto wants = [&](Stage s) { return options.dump.count(s) > 0; };
  if (wants(Stage::Ast))
    result.dumps[Stage::Ast] = dsl::printAst(op);

  // 1. AST -> moe dialect.
  auto start = Clock::now();
  MLIRContext context(registry(), MLIRContext::Threading::DISABLED);
  DiagnosticCollector diagnostics(context);
  MoeModule generated;
  try {
    // Statement fusion: point kernels store rows inside their dot products (moe.row_store; on Ascend
    // through a UB buffer per chunk).
    bool fuseRowStores = !(spec.schedule.disabled & kFuseRowStores);
    generated = genMoe(context, op, spec.dtype, present, statics, fuseRowStores);
  } catch (const GenError &e) {
    throw CompileError(e.what());
  }
  OwningOpRef<ModuleOp> module = std::move(generated.module);
  result.times.frontend = msSince(start);

  // 2. moe passes: bind static values, choose the schedule.
  start = Clock::now();
  PassManager moePasses(&context);
  configure(moePasses);
  moe::MoeSpecializeOptions bind;
  for (const auto &[name, value] : statics)
    bind.bindings.push_back(name + "=" + std::to_string(value));
  moePasses.addPass(moe::createMoeSpecialize(bind));
  if (!(spec.schedule.disabled & kFillUncoveredRows))
    moePasses.addPass(moe::createMoeFillUncoveredRows());
  bool isAscend = spec.target.kind == TargetKind::Ascend;
  if (isAscend && !spec.target.chip)
    throw CompileError(op.name + ": the ascend target needs a chip");
  // On Ascend rowsPerBlock is the most rows per UB pass (moe-plan-ascend's), not a CPU worker's least.
  moe::MoeScheduleOptions schedule{isGpu ? "gpu" : isAscend ? "ascend" : "cpu", spec.schedule.vector,
                                   spec.schedule.threads, isAscend ? 0 : spec.schedule.rowsPerBlock,
                                   spec.schedule.unroll};
  moePasses.addPass(moe::createMoeSchedule(schedule));
  // CPU: a fold accumulating in f16/bf16 carries its accumulator as f32 (no pack and unpack per step).
  // Its bf16 steps' roundings may skip the NaN case that the result's rounding covers.
  if (!isGpu && !isAscend && !(spec.schedule.disabled & kWidenRoundedFolds))
    moePasses.addPass(moe::createMoeWidenRoundedFolds({!(spec.schedule.disabled & kUncheckedStepRoundings)}));
  // A GPU list is built by a warp's converged lanes, so only in a row's prologue: it needs the hoisting.
  // A short fold's list: the CPU's accumulated rows add its live steps directly; the GPU runs the row in a
  // version per power of two of live steps (moe-lower-to-gpu).
  bool hoist = !(spec.schedule.disabled & kHoistRowInvariants);
  bool shortFolds =
      isGpu ? !(spec.schedule.disabled & kShortLists) : !isAscend && !(spec.schedule.disabled & kAccumulateRows);
  if (!(spec.schedule.disabled & kCompactPredicatedFolds) && (hoist || !isGpu))
    moePasses.addPass(moe::createMoeCompactPredicatedFolds({isGpu ? "gpu" : "cpu", shortFolds}));
  if (hoist)
    moePasses.addPass(moe::createMoeHoistRowInvariants());
  // GPU: rows that write the same values (a token's row to each of its slots) run as one block's group.
  if (hoist && isGpu && !(spec.schedule.disabled & kGroupRows))
    moePasses.addPass(moe::createMoeGroupRows());
  // GPU: the points of a row whose dot products read the same row (a token's experts) run on one warp.
  if (isGpu && !(spec.schedule.disabled & kGroupPoints))
    moePasses.addPass(moe::createMoeGroupPoints());
  // CPU: a row of points whose dead points only write a constant runs its live ones only, from a list.
  if (!isGpu && !isAscend && !(spec.schedule.disabled & kCompactPredicatedPoints))
    moePasses.addPass(moe::createMoeCompactPredicatedPoints());
  // One CPU thread runs its rows in order: a prefix fold can continue from the row before.
  if (hoist && !isGpu && !isAscend && !(spec.schedule.disabled & kCarryPrefixFolds))
    moePasses.addPass(moe::createMoeCarryPrefixFolds());
  // GPU: a row of points runs 32 points at once, a lane each; a prefix count over them is a ballot.
  if (isGpu && !(spec.schedule.disabled & kLanePointAccess))
    moePasses.addPass(moe::createMoeLanePointAccess());
  if (isAscend) {
    const ascend::Chip &chip = *spec.target.chip;
    // A tuned config may fix the UB buffering, the chunk and the rows per pass (0: the pass's choice).
    moePasses.addPass(moe::createMoePlanAscend({chip.name, chip.ubBytes, chip.ubAlignment, chip.maxCopyBytes,
                                                spec.schedule.buffers, spec.schedule.chunk,
                                                spec.schedule.rowsPerBlock, chip.dataCopyNs, chip.gmGBpsPerCore}));
  }
  if (failed(runStage(moePasses, *module)))
    diagnostics.fail(op.name + ": the moe passes failed");
  // Kernels run in the module's order (moe-fill-uncovered-rows moves fills after the scatters they
  // complete). Kernels whose statements specialization removed (an `if` on a static attribute) are dropped.
  std::map<std::string, std::pair<const dsl::PlannedKernel *, const std::vector<dsl::IndexCheck> *>> planned;
  for (auto [plan, checks] : llvm::zip(generated.kernels, generated.checks))
    planned[plan.name] = {&plan, &checks};
  for (func::FuncOp func : llvm::make_early_inc_range(module->getOps<func::FuncOp>())) {
    auto found = planned.find(func.getSymName().str());
    if (found == planned.end())
      continue;
    const dsl::PlannedKernel &plan = *found->second.first;
    const std::vector<dsl::IndexCheck> &checks = *found->second.second;
    SmallVector<moe::DomainOp> domains = moe::collectDomainOps(func);
    if (domains.empty()) {
      func.erase();
      continue;
    }
    moe::ScheduleAttr a = domains.front().schedule();
    auto ascendPlan = domains.front().op()->getAttrOfType<moe::AscendPlanAttr>("ascend_plan");
    // The launch covers points: a GPU warp each (not a row of points each: moe-group-points), an Ascend
    // point row each, or a CPU point kernel's.
    bool pointPerWarp = isAscend ? ascendPlan && ascendPlan.getPointRows()
                                 : moe::runsPerPoint(domains.front()) &&
                                       !domains.front().op()->hasAttr(moe::kPointRowsAttr);
    bool rowGroups = domains.front().op()->hasAttr(moe::kRowGroupAttr);
    bool pointRuns = domains.front().op()->hasAttr(moe::kPointRowsAttr) && plan.domain.size() == 1;
    result.kernels.push_back({plan.name, plan.assign->target,
                              {a.getRowsPerBlock(), a.getThreads(), a.getVector(), a.getUnroll()}, plan.domain,
                              pointPerWarp, checks, rowGroups, pointRuns});
  }

  if (auto outputs = (*module)->getAttrOfType<ArrayAttr>("moe.workspace"))
    for (auto name : outputs.getAsValueRange<StringAttr>())
      result.workspace.push_back(name.str());
  if (wants(Stage::Moe))
    result.dumps[Stage::Moe] = printIR(*module);
  if (isAscend) {
    std::vector<std::string> names;
    for (const KernelInfo &k : result.kernels)
      names.push_back(k.name);
    result.ascend = ascendTilings(*module, names);
    for (auto [tiling, kernel] : llvm::zip(result.ascend, result.kernels))
      tiling.output = kernel.output;
    // The tiled kernels: for the simulator, or to show them.
    if (!spec.target.simulated && !wants(Stage::Loops))
      return result;
  }

  // 3. Loops: rows to a row-range loop (cpu) or to the grid (gpu); the row along vectors.
  PassManager loopPasses(&context);
  configure(loopPasses);
  if (isAscend)
    loopPasses.addPass(moe::createMoeLowerToAscend({spec.target.chip->ubAlignment}));
  else if (isGpu)
    loopPasses.addPass(moe::createMoeLowerToGPU({/*stepTables=*/!(spec.schedule.disabled & kHoistRowInvariants),
                                                 /*loadsInFlight=*/!(spec.schedule.disabled & kLoadsInFlight)}));
  else
    loopPasses.addPass(moe::createMoeLowerToLoops(
        {!(spec.schedule.disabled & kStreamingStores), !(spec.schedule.disabled & kAccumulateRows),
         !(spec.schedule.disabled & kInterleaveReductions),
         // A list's live entries 16 at a time (C2's live experts in its rowmap row): AVX-512 compresses a
         // vector of indices in one instruction; without it LLVM would expand the compress lane by lane.
         /*compactLanes=*/!(spec.schedule.disabled & kCompressLists) && hostVectorLanes() >= 16 ? 16 : 0}));
  // A loop along a row runs without the branches its row decides (bounds checks, live terms) where they take
  // their usual values. On the GPU this also lets a thread issue all of a row's gathers before it waits on
  // one: behind a branch each ran alone (B2 at top-8 on an H200: 75 % of a device copy).
  if (!isAscend && !(spec.schedule.disabled & kVersionRowLoops)) {
    loopPasses.addPass(createCanonicalizerPass()); // its selectors compare with folded constants
    loopPasses.addPass(moe::createMoeVersionRowLoops({/*selectVersions=*/!isGpu}));
  }
  // GPU: a term that may be skipped loads under a predicate, not behind a branch, so that a row's gathers
  // issue together also where some of its terms are skipped (the version above that keeps their branches).
  if (isGpu && !(spec.schedule.disabled & kGuardLoads)) {
    loopPasses.addPass(createCanonicalizerPass()); // folds the versions' known branches away first
    loopPasses.addPass(moe::createMoeGuardLoads());
  }
  // GPU: a thread's few steps along a row (marked by moe-lower-to-gpu where loads-in-flight is on) unroll, once
  // versioned and guarded: the steps' gathers are in flight together.
  if (isGpu)
    loopPasses.addPass(moe::createMoeUnrollRowLoops());
  // CPU: a row chosen by data (a gather) is prefetched ahead along the row, and the next row's head. After
  // the versions: each loop along a row then gathers only the rows its version reads.
  if (!isGpu && !isAscend && optimizationOn(spec.schedule, kPrefetchGatheredRows)) {
    loopPasses.addPass(createCanonicalizerPass()); // folds each version to the terms it reads
    loopPasses.addPass(moe::createMoePrefetchGatheredRows());
  }
  // Bounds checks the loops' ranges prove (an index below a fold's bound, itself below the dim) fold away.
  loopPasses.addPass(arith::createIntRangeOptimizationsPass());
  loopPasses.addPass(createCanonicalizerPass());
  loopPasses.addPass(createCSEPass());
  if (failed(runStage(loopPasses, *module)))
    diagnostics.fail(op.name + ": lowering to loops failed");
  if (wants(Stage::Loops))
    result.dumps[Stage::Loops] = printIR(*module);
  if (isAscend && !spec.target.simulated)
    return result;

  // 4. LLVM dialect.
  PassManager llvmPasses(&context);
  configure(llvmPasses);
  if (isGpu) {
    OpPassManager &kernels = llvmPasses.nest<gpu::GPUModuleOp>();
    kernels.addPass(createSCFToControlFlowPass());
    // math.fma straight to llvm.intr.fma (fma.rn.f32); gpu-to-nvvm would call libdevice instead.
    bool usesMath = false;
    module->walk([&](Operation *op) { usesMath |= isa<math::MathDialect>(op->getDialect()); });
    if (usesMath)
      kernels.addPass(createConvertMathToLLVMPass());
    ConvertGpuOpsToNVVMOpsOptions nvvm;
    nvvm.indexBitwidth = 64;
    kernels.addPass(createConvertGpuOpsToNVVMOps(nvvm));
    kernels.addPass(createCanonicalizerPass());
    kernels.addPass(createCSEPass());
    kernels.addPass(createReconcileUnrealizedCastsPass());
  } else {
    // A loop that computes lane-wise from bf16 rows widens them in place, its lanes paired (even, odd).
    if (!isAscend && !(spec.schedule.disabled & kWidenBf16Pairs))
      llvmPasses.addPass(moe::createMoeWidenBf16Pairs());
    // bf16 rounding as integer ops: x86's vcvtneps2bf16 flushes subnormals, and the libcall LLVM
    // falls back to is missing from older libgcc. The expansion is exact round-to-nearest-even; the
    // marked roundings of a widened fold's steps go first, without its NaN case.
    llvmPasses.addPass(moe::createMoeExpandUncheckedRoundings());
    // Where the host has AVX512-BF16, vector roundings use vcvtneps2bf16 but for NaN and subnormal lanes.
    if (!isAscend && !(spec.schedule.disabled & kNativeBf16Roundings) && hostHasNativeBf16Rounding())
      llvmPasses.addPass(moe::createMoeNativeBf16Roundings());
    llvmPasses.addPass(arith::createArithExpandOpsPass({/*includeBf16=*/true}));
    // ... and bf16 values between ops as i16, which x86 keeps in registers (see moe-bf16-bits).
    llvmPasses.addPass(moe::createMoeBf16Bits());
    llvmPasses.addPass(createCanonicalizerPass());
    llvmPasses.addPass(createSCFToControlFlowPass());
    llvmPasses.addPass(createConvertToLLVMPass());
    llvmPasses.addPass(createReconcileUnrealizedCastsPass());
  }
  if (failed(runStage(llvmPasses, *module)))
    diagnostics.fail(op.name + ": conversion to the LLVM dialect failed");
  result.times.passes = msSince(start);

  // 5. LLVM IR, optimized for the target.
  start = Clock::now();
  auto llvmContext = std::make_unique<llvm::LLVMContext>();
  Operation *toTranslate = module->getOperation();
  if (isGpu)
    toTranslate = *module->getOps<gpu::GPUModuleOp>().begin();
  std::unique_ptr<llvm::Module> llvmModule = translateToLlvmIr(toTranslate, *llvmContext, op.name);
  if (!llvmModule)
    diagnostics.fail(op.name + ": translation to LLVM IR failed");
  llvm::TargetMachine &tm = isGpu ? nvptxTargetMachine(spec.target.arch) : hostTargetMachine();
  llvmModule->setTargetTriple(tm.getTargetTriple());
  llvmModule->setDataLayout(tm.createDataLayout());
  if (!isGpu)
    moveBf16AsBits(*llvmModule);
  optimizeModule(*llvmModule, tm, 2);
  if (wants(Stage::LLVM))
    result.dumps[Stage::LLVM] = printIR(*llvmModule);
  result.times.llvm = msSince(start);

  // 6. Code: PTX text, or host code in this process.
  start = Clock::now();
  if (isGpu) {
    result.ptx = emitPtx(*llvmModule, tm);
    if (wants(Stage::PTX))
      result.dumps[Stage::PTX] = result.ptx;
  } else {
    if (wants(Stage::Asm))
      result.dumps[Stage::Asm] = emitHostAsm(*llvmModule, tm);
    std::vector<std::string> names;
    for (const KernelInfo &k : result.kernels)
      names.push_back(k.name);
    result.cpuObject = emitHostObject(*llvmModule, tm, names);
    result.cpu = loadHostObject(result.cpuObject);
  }
  result.times.codegen = msSince(start);
  return result;
}

} // namespace moec
