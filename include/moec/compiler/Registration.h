//===- Registration.h - Dialects, interfaces and translations moec uses -*- C++ -*-===//
#pragma once

#include "mlir/IR/DialectRegistry.h"

namespace moec {

/// Every dialect the pipeline creates, the ConvertToLLVM interfaces `convert-to-llvm` and
/// `convert-gpu-to-nvvm` need (LLVM 22 custom drivers must register them explicitly), and the LLVM IR
/// translations.
void registerMoecDialects(mlir::DialectRegistry &registry);

/// Registers the moe passes with the global pass registry (for moec-opt and textual pipelines).
void registerMoecPasses();

} // namespace moec
