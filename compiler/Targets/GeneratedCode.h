//===- GeneratedCode.h - Code generated once per LLVM module text (private) -*- C++ -*-===//
//
// Specializations and schedules that lower to the same LLVM IR for the same target machine get the same
// code: LLVM's optimizer and code generator are deterministic. The process keeps what they generated,
// by the module's exact text (and the machine's triple, CPU, features and optimization level), so a
// second compile of the same IR skips both: about two thirds of a compile. It is hit where a knob or an
// optimization does not apply to an op: the tuner's configs (a CPU config's rows and threads leave the IR
// alone), the bit-identity tests that turn each optimization off, a bundle's shapes. Compile-time
// benchmarks turn it off (CompileOptions::reuseGeneratedCode).
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"

#include <optional>
#include <string>
#include <vector>

namespace moec {

/// What LLVM made of one module: the code, and the optimized IR's text where the compile printed it (the
/// runtime's disk cache keeps it beside the code).
struct GeneratedCode {
  std::string code;        // PTX text, or a host object
  std::string optimizedIr; // empty: not printed
};

/// What identifies the code that `tm` generates from `module` (not yet optimized) at `optLevel`, as
/// `kind` (PTX text, a host object with `kernels`' packed wrappers): the module's printed text and the
/// machine's description. Compared whole, never by a hash alone.
std::string generatedCodeKey(const llvm::Module &module, const llvm::TargetMachine &tm, int optLevel,
                             llvm::StringRef kind, const std::vector<std::string> &kernels);

/// What was generated earlier in this process for `key`, if it is still kept.
std::optional<GeneratedCode> findGeneratedCode(const std::string &key);

/// Keeps `generated` for `key`; adds its optimized IR to an entry kept without it. The oldest entries go
/// once keys, code and IR exceed kGeneratedCodeBytes.
void keepGeneratedCode(std::string key, GeneratedCode generated);

/// The bytes of keys, code and IR the process keeps at most.
inline constexpr size_t kGeneratedCodeBytes = size_t(64) << 20;

} // namespace moec
