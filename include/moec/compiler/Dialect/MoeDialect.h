//===- MoeDialect.h - The moe dialect ----------------------------*- C++ -*-===//
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "moec/compiler/Dialect/MoeDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "moec/compiler/Dialect/MoeAttrs.h.inc"

#define GET_OP_CLASSES
#include "moec/compiler/Dialect/MoeOps.h.inc"

namespace moec::moe {
/// Lets `convert-to-llvm` and `convert-gpu-to-nvvm` lower moe.view (ConvertToLLVMPatternInterface).
void registerConvertMoeToLLVMInterface(mlir::DialectRegistry &registry);
} // namespace moec::moe
