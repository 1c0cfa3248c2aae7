//===- LLVMOptimize.cpp - LLVM's optimizer and code generator -------------===//
#include "Targets/CodeGen.h"

#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/PassTimingInfo.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/StandardInstrumentations.h"
#include "llvm/Support/Timer.h"

#include <cstdlib>
#include <stdexcept>

namespace moec {

namespace {
/// MOEC_PASS_TIMING=1 (as for the MLIR passes) prints LLVM's per-pass times: the optimizer's and the code
/// generator's, like -time-passes.
bool llvmPassTiming() {
  static const bool timing = std::getenv("MOEC_PASS_TIMING") != nullptr;
  return timing;
}
} // namespace

void optimizeModule(llvm::Module &module, llvm::TargetMachine &tm, int level) {
  llvm::PassInstrumentationCallbacks callbacks;
  llvm::TimePassesHandler timing(llvmPassTiming());
  timing.registerCallbacks(callbacks);
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(&tm, llvm::PipelineTuningOptions(), std::nullopt, llvmPassTiming() ? &callbacks : nullptr);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  static const llvm::OptimizationLevel levels[] = {llvm::OptimizationLevel::O0, llvm::OptimizationLevel::O1,
                                                   llvm::OptimizationLevel::O2, llvm::OptimizationLevel::O3};
  llvm::ModulePassManager mpm = level == 0 ? pb.buildO0DefaultPipeline(levels[0])
                                           : pb.buildPerModuleDefaultPipeline(levels[level]);
  mpm.run(module, mam);
  if (llvmPassTiming())
    timing.print();
}

std::string runBackend(llvm::Module &module, llvm::TargetMachine &tm, llvm::CodeGenFileType type) {
  llvm::SmallString<0> out;
  llvm::raw_svector_ostream os(out);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, type))
    throw std::runtime_error("the " + tm.getTargetTriple().str() + " backend cannot emit this file type");
  if (llvmPassTiming())
    llvm::TimePassesIsEnabled = true;
  pm.run(module);
  if (llvmPassTiming())
    llvm::reportAndResetTimings(&llvm::errs());
  return std::string(out.str());
}

} // namespace moec
