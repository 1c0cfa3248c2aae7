//===- Passes.h - moe dialect passes -----------------------------*- C++ -*-===//
#pragma once

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"
#include "moec/compiler/Dialect/MoeDialect.h"

namespace moec::moe {

/// On an arith.truncf to bf16 whose NaN result need not be the canonical one (moe-widen-rounded-folds marks
/// it, moe-expand-unchecked-roundings rounds it without the NaN case).
constexpr llvm::StringLiteral kNanUncheckedAttr = MoeDialect::NanUncheckedAttrHelper::getNameStr();

#define GEN_PASS_DECL
#include "moec/compiler/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "moec/compiler/Transforms/Passes.h.inc"

} // namespace moec::moe
