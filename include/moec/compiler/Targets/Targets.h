//===- Targets.h - What the targets offer the layers above the compiler -*- C++ -*-===//
//
// The part of the targets' interface that the JIT layer (and through it the public API, moec/jit/Runtime.h)
// reaches: PTX archs, host objects linked in process, the toolchain that cache keys record. It names no
// LLVM or MLIR type, so the installed headers compile without LLVM's; what takes LLVM IR or MLIR (the
// translation, LLVM's optimizer, the backends, Ascend tilings) is the compiler's own, in its private
// header compiler/Targets/CodeGen.h.
//
// ptx: LLVM IR -> NVPTX backend -> PTX text, for sm_80 / sm_90 / sm_100.
// cpu: LLVM IR -> ORC JIT in this process -> a function pointer per kernel.
// ascend: scheduled moe IR with #moe.ascend_plan -> a KernelTiling per kernel (runtime/ascend plans).
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/contracts/KernelAbi.h"

#include <memory>
#include <string>

namespace moec {

/// The archs moec emits PTX for. Throws std::invalid_argument for others.
void checkPtxArch(const std::string &arch);

/// A module of host code compiled in process. Owns the JIT; function pointers live as long as it.
class CpuExecutable {
public:
  virtual ~CpuExecutable() = default;
  /// The packed entry of kernel `name`, or null.
  virtual PackedKernelFn lookup(const std::string &name) = 0;
};

/// Links a host object file from emitHostObject into this process (ORC JIT) without LLVM's optimizer
/// or MLIR.
std::unique_ptr<CpuExecutable> loadHostObject(const std::string &object);

/// What host code depends on besides the IR: triple, CPU and features ("x86_64-... znver4 +avx2,...").
std::string hostToolchain();

/// Whether the host CPU has vcvtneps2bf16 and vfpclassps (AVX512-BF16, AVX512-DQ): moe-native-bf16-roundings.
bool hostHasNativeBf16Rounding();

/// The version of the LLVM the compiler was built with (LLVM_VERSION_STRING, "22.1.8"), for cache keys.
const char *llvmVersion();

} // namespace moec
