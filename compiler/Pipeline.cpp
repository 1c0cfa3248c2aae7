//===- Pipeline.cpp - The whole compiler, top to bottom -------------------===//
//
//   OpDef (checked AST)                                                                  [ast]
//     │ genMoe: one kernel func per assignment, lean ABI (a row assignment fused into a
//     │ dot product: dsl::FusedRows)                                                      [gen]
//     ▼
//   moe dialect ── PipelineStage::Moe: bind, schedule, rewrite how rows run               [moe]
//     │ (ascend: moe-plan-ascend's tiling per kernel is the artifact)
//     ▼ PipelineStage::Loops: lower to loops, version, guard, prefetch                    [loops]
//   scf/arith/memref/vector (+gpu)
//     ▼ PipelineStage::Llvm: bf16 roundings (cpu), to the LLVM dialect (+nvvm)
//   LLVM dialect ── translate ── LLVM IR ── LLVM O2                                        [llvm]
//     │ cpu: object file, ORC JIT                ptx: NVPTX backend                         [asm] [ptx]
//
// Each stage's passes are the rows of the pipeline table (PipelineTable.cpp) for the target and schedule;
// moec-opt --moe-pipeline runs the same rows on `moec emit --emit gen`'s IR.
//===----------------------------------------------------------------------===//
#include "moec/compiler/DefaultSchedule.h"
#include "moec/compiler/Pipeline.h"
#include "moec/compiler/PipelineTable.h"

#include "moec/compiler/Dialect/MoeDialect.h"
#include "moec/compiler/Frontend/MoeGen.h"
#include "moec/compiler/Registration.h"
#include "Targets/CodeGen.h"
#include "Targets/GeneratedCode.h"
#include "moec/compiler/Transforms/BodyLowering.h"
#include "moec/compiler/Transforms/Passes.h"
#include "moec/contracts/NearestName.h"
#include "moec/dsl/Diagnostics.h"
#include "moec/dsl/Eval.h"
#include "moec/dsl/Printer.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"

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
  static const char *names[] = {"ast", "gen", "moe", "loops", "llvm", "ptx", "asm"};
  return names[static_cast<int>(s)];
}

std::optional<Stage> parseStage(const std::string &name) {
  for (Stage s : {Stage::Ast, Stage::Gen, Stage::Moe, Stage::Loops, Stage::LLVM, Stage::PTX, Stage::Asm})
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

namespace {

/// LLVM's optimization level for every target's IR.
constexpr int kLlvmOptLevel = 2;

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
    if (!dim && !attr) {
      // A runtime name would be refused below, so only static names are suggested.
      std::vector<std::string> names = op.dimNames(true), attrs = op.attrNames(true);
      names.insert(names.end(), attrs.begin(), attrs.end());
      throw CompileError(op.name + ": unknown dim or attribute '" + name + "'" + didYouMean(name, names));
    }
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

/// A requested (or tuned) schedule the target can run; `who` prefixes the error.
void checkSchedule(const std::string &who, const Schedule &schedule, TargetKind target) {
  if (std::string why = scheduleProblem(schedule, target, /*requested=*/true); !why.empty())
    throw CompileError(who + "schedule " + why);
}

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

/// The IR as text, ending in a newline (as moec-opt prints it).
std::string printIR(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  op->print(os);
  os << "\n";
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

/// What the pipeline table decides on, for `spec` on this host.
PipelineConfig pipelineConfig(const ResolvedSpecialization &spec) {
  PipelineConfig config;
  config.target = spec.target.kind;
  config.simulated = spec.target.simulated;
  config.schedule = spec.schedule;
  config.statics = spec.statics;
  if (spec.target.chip)
    config.chip = chipFigures(*spec.target.chip);
  config.nativeBf16Roundings = hostHasNativeBf16Rounding();
  config.vectorLanes = hostVectorLanes();
  return config;
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

ResolvedSpecialization resolve(const dsl::OpDef &op, const Specialization &spec) {
  if (spec.target.kind == TargetKind::GPU) {
    try {
      checkPtxArch(spec.target.arch);
    } catch (const std::invalid_argument &e) {
      throw CompileError(e.what());
    }
  }
  checkSchedule(op.name + ": ", spec.schedule, spec.target.kind);
  ResolvedSpecialization resolved;
  resolved.dtype = spec.dtype;
  resolved.statics = resolveStatics(op, spec);
  resolved.inputs = spec.present;
  resolved.present = resolvePresence(op, spec.present, resolved.statics);
  resolved.target = spec.target;
  resolved.schedule = spec.schedule;
  return resolved;
}

ResolvedSpecialization ResolvedSpecialization::withSchedule(const Schedule &s) const {
  checkSchedule("", s, target.kind);
  ResolvedSpecialization other = *this;
  other.schedule = s;
  return other;
}

CompiledOp compile(const dsl::OpDef &op, const Specialization &spec, const CompileOptions &options) {
  return compile(op, resolve(op, spec), options);
}

CompiledOp compile(const dsl::OpDef &op, const ResolvedSpecialization &spec, const CompileOptions &options) {
  CompiledOp result;
  bool isGpu = spec.target.kind == TargetKind::GPU;
  const std::map<std::string, int64_t> &statics = spec.statics;
  const std::set<std::string> &present = spec.present;
  auto wants = [&](Stage s) { return options.dump.count(s) > 0; };
  auto finished = [&](Stage s) {
    return options.stopAfterDumps && !options.dump.empty() && s == *options.dump.rbegin();
  };
  if (wants(Stage::Ast))
    result.dumps[Stage::Ast] = dsl::printAst(op);
  if (finished(Stage::Ast))
    return result;

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
  if (wants(Stage::Gen))
    result.dumps[Stage::Gen] = printIR(*module);
  result.times.frontend = msSince(start); // a compile that stops early still says what its stages took
  if (finished(Stage::Gen))
    return result;

  // 2. moe passes: bind static values, choose the schedule, rewrite how rows run (PipelineTable.cpp).
  start = Clock::now();
  bool isAscend = spec.target.kind == TargetKind::Ascend;
  if (isAscend && !spec.target.chip)
    throw CompileError(op.name + ": the ascend target needs a chip");
  PipelineConfig config = pipelineConfig(spec);
  PassManager moePasses(&context);
  configure(moePasses);
  addPipelineStage(moePasses, PipelineStage::Moe, config);
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

  if (auto outputs = (*module)->getAttrOfType<ArrayAttr>(moe::MoeDialect::WorkspaceAttrHelper::getNameStr()))
    for (auto name : outputs.getAsValueRange<StringAttr>())
      result.workspace.push_back(name.str());
  if (wants(Stage::Moe))
    result.dumps[Stage::Moe] = printIR(*module);
  result.times.passes = msSince(start);
  if (finished(Stage::Moe))
    return result;
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
  addPipelineStage(loopPasses, PipelineStage::Loops, config);
  if (failed(runStage(loopPasses, *module)))
    diagnostics.fail(op.name + ": lowering to loops failed");
  if (wants(Stage::Loops))
    result.dumps[Stage::Loops] = printIR(*module);
  result.times.passes = msSince(start);
  if (finished(Stage::Loops) || (isAscend && !spec.target.simulated))
    return result;

  // 4. LLVM dialect.
  PassManager llvmPasses(&context);
  configure(llvmPasses);
  addPipelineStage(llvmPasses, PipelineStage::Llvm, config);
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
  std::vector<std::string> kernelNames; // the host object's packed wrappers
  if (!isGpu)
    for (const KernelInfo &k : result.kernels)
      kernelNames.push_back(k.name);
  // The same IR for the same machine gives the same code: an earlier compile's is taken as it is, with its
  // optimized IR where that is printed too. Not where the host assembly is printed, which is not kept.
  std::string codeKey;
  if (options.reuseGeneratedCode && !wants(Stage::Asm))
    codeKey = generatedCodeKey(*llvmModule, tm, kLlvmOptLevel, isGpu ? "ptx" : "host object", kernelNames);
  std::optional<GeneratedCode> reused = codeKey.empty() ? std::nullopt : findGeneratedCode(codeKey);
  if (reused && wants(Stage::LLVM) && reused->optimizedIr.empty())
    reused.reset(); // kept without its IR: LLVM runs again, and the IR is kept with the code
  result.times.reusedCode = reused.has_value();
  if (!reused)
    optimizeModule(*llvmModule, tm, kLlvmOptLevel);
  if (wants(Stage::LLVM))
    result.dumps[Stage::LLVM] = reused ? reused->optimizedIr : printIR(*llvmModule);
  result.times.llvm = msSince(start);
  if (finished(Stage::LLVM))
    return result;

  // 6. Code: PTX text, or host code in this process.
  start = Clock::now();
  if (isGpu) {
    result.ptx = reused ? std::move(reused->code) : emitPtx(*llvmModule, tm);
    if (wants(Stage::PTX))
      result.dumps[Stage::PTX] = result.ptx;
  } else {
    if (wants(Stage::Asm))
      result.dumps[Stage::Asm] = emitHostAsm(*llvmModule, tm);
    if (finished(Stage::Asm)) { // `moec emit --emit asm` prints the text: no object to build and load
      result.times.codegen = msSince(start);
      return result;
    }
    result.cpuObject = reused ? std::move(reused->code) : emitHostObject(*llvmModule, tm, kernelNames);
    result.cpu = loadHostObject(result.cpuObject);
  }
  if (!codeKey.empty() && !reused)
    keepGeneratedCode(std::move(codeKey), {isGpu ? result.ptx : result.cpuObject,
                                           wants(Stage::LLVM) ? result.dumps[Stage::LLVM] : std::string()});
  result.times.codegen = msSince(start);
  return result;
}

} // namespace moec
