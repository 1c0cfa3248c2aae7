//===- CodeGen.h - From LLVM IR to what a target runs (private) --*- C++ -*-===//
//
// The targets' code generation over LLVM and MLIR types, for the compiler's own sources (compiler/ is a
// private include directory). What the layers above need without LLVM is in moec/compiler/Targets/Targets.h.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/compiler/Targets/Targets.h"
#include "moec/contracts/ascend/Tiling.h"

#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mlir {
class Operation;
}

namespace moec {

/// `module` (LLVM dialect) as LLVM IR, like mlir::translateModuleToLLVMIR, but its functions' plain LLVM
/// parameter attributes (noalias, readonly) are set on the LLVM functions directly: MLIR's conversion of
/// them costs some 0.2 ms a parameter. Null when the translation fails.
std::unique_ptr<llvm::Module> translateToLlvmIr(mlir::Operation *module, llvm::LLVMContext &context,
                                                llvm::StringRef name);

/// Runs LLVM's standard pipeline at `level` (0-3) with `tm`'s cost model.
void optimizeModule(llvm::Module &module, llvm::TargetMachine &tm, int level);

/// Runs `tm`'s code generator on an optimized module: assembly (PTX, host .s) or an object file.
std::string runBackend(llvm::Module &module, llvm::TargetMachine &tm, llvm::CodeGenFileType type);

//===----------------------------------------------------------------------===//
// PTX
//===----------------------------------------------------------------------===//

/// The TargetMachine for `arch` ("sm_90") with the PTX ISA version that arch needs. Created once per
/// thread and arch (a TargetMachine is not shared across threads); creating one costs about a ms.
llvm::TargetMachine &nvptxTargetMachine(const std::string &arch);

/// Emits PTX for a module already optimized for `tm` (triple and data layout set).
std::string emitPtx(llvm::Module &module, llvm::TargetMachine &tm);

//===----------------------------------------------------------------------===//
// CPU
//===----------------------------------------------------------------------===//

/// The TargetMachine for this host (its CPU and features, so kernels use AVX2/AVX-512 where present),
/// created once per thread.
llvm::TargetMachine &hostTargetMachine();

/// Loads and stores bf16 values as 16-bit integers. Without AVX512-BF16 (see hostTargetMachine) LLVM
/// keeps bf16 in integer registers and would split a <8 x bfloat> access into 8 scalar ones; as bits,
/// the accesses stay vectors and the pipeline's integer rounding (arith-expand) needs nothing else.
void moveBf16AsBits(llvm::Module &module);

/// Adds `<name>_packed(void **args)` for each kernel to an optimized module and compiles it to a host
/// object file (what the disk cache keeps for a warm start).
std::string emitHostObject(llvm::Module &module, llvm::TargetMachine &tm, const std::vector<std::string> &kernelNames);

/// Host assembly of an optimized `module` (for `--emit asm`); does not change the module.
std::string emitHostAsm(llvm::Module &module, llvm::TargetMachine &tm);

//===----------------------------------------------------------------------===//
// Ascend
//===----------------------------------------------------------------------===//

/// The tiling of each kernel func in `module` named in `kernels` (in that order), read from the
/// #moe.ascend_plan that moe-plan-ascend put on its domain op.
std::vector<ascend::KernelTiling> ascendTilings(mlir::Operation *module, const std::vector<std::string> &kernels);

} // namespace moec
