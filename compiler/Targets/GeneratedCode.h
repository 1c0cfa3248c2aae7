//===- GeneratedCode.h - Code generated once per LLVM module text (private) -*- C++ -*-===//
//
// Specializations and schedules that lower to the same LLVM IR for the same target machine get the same
// code: LLVM's optimizer and code generator are deterministic. The process keeps what they generated,
// by the module's exact text (and the machine's triple, CPU, features and optimization level), so a
// second compile of the same IR skips both: about two thirds of a compile. It is hit where a knob or an
// optimization does not apply to an op: the tuner's configs, the bit-identity tests that turn each
// optimization off, `moec bench`'s schedules. Compile-time benchmarks turn it off
// (CompileOptions::reuseGeneratedCode).
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"

#include <optional>
#include <string>
#include <vector>

namespace moec {

/// What identifies the code that `tm` generates from `module` (not yet optimized) at `optLevel`, as
/// `kind` (PTX text, a host object with `kernels`' packed wrappers): the module's printed text and the
/// machine's description. Compared whole, never by a hash alone.
std::string generatedCodeKey(const llvm::Module &module, const llvm::TargetMachine &tm, int optLevel,
                             llvm::StringRef kind, const std::vector<std::string> &kernels);

/// The code generated earlier in this process for `key`, if it is still kept.
std::optional<std::string> findGeneratedCode(const std::string &key);

/// Keeps `code` for `key`. The oldest entries go once keys and code exceed kGeneratedCodeBytes.
void keepGeneratedCode(std::string key, std::string code);

/// The bytes of keys and code the process keeps at most.
inline constexpr size_t kGeneratedCodeBytes = size_t(64) << 20;

} // namespace moec
