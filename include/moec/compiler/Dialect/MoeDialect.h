//===- MoeDialect.h - The moe dialect ----------------------------*- C++ -*-===//
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/Support/MathExtras.h"

#include "moec/compiler/Dialect/MoeDialect.h.inc"
#include "moec/compiler/Dialect/MoeEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "moec/compiler/Dialect/MoeAttrs.h.inc"

#define GET_OP_CLASSES
#include "moec/compiler/Dialect/MoeOps.h.inc"

namespace moec::moe {
/// A kernel argument's role (#moe.arg) and, on a tensor whose values never repeat, moe.unique: the argument
/// attributes that MoeDialect::verifyRegionArgAttribute checks.
inline constexpr llvm::StringLiteral kArgRoleAttrName = "moe.arg";
inline constexpr llvm::StringLiteral kUniqueArgAttrName = "moe.unique";
/// The role of argument `index` of `func`, or null when it has none.
inline ArgAttr argRole(mlir::FunctionOpInterface func, unsigned index) {
  return func.getArgAttrOfType<ArgAttr>(index, kArgRoleAttrName);
}
/// The role as an argument attribute dictionary, for func.insertArguments.
mlir::DictionaryAttr argRoleDictionary(mlir::MLIRContext *ctx, ArgRole role, llvm::StringRef name = "");
/// The bytes a moe.guarded_load or moe.guarded_store of `accessed` moves: its elements' bytes when it is a 1-D
/// vector of 4, 8 or 16 bytes or a scalar of 2 or 4 (the sizes their PTX moves as one access); else 0.
int64_t guardedAccessBytes(mlir::Type accessed);
/// The values moe.compress_lanes and moe.interleaved_points may take (the verifier's and their passes' check).
inline bool isCompressLanes(int64_t lanes) { return lanes >= 2 && lanes <= 64 && llvm::isPowerOf2_64(lanes); }
inline bool isInterleavedPoints(int64_t points) { return points >= 2 && points <= 8; }
/// Lets `convert-to-llvm` and `convert-gpu-to-nvvm` lower moe.view (ConvertToLLVMPatternInterface).
void registerConvertMoeToLLVMInterface(mlir::DialectRegistry &registry);
} // namespace moec::moe
