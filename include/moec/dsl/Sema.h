//===- Sema.h - Semantic checks of an op definition --------------*- C++ -*-===//
//
// Resolves every name, types every expression (Expr::type) and rejects, with file:line:col and a caret:
//   - unknown or duplicate names (dims, attrs, tensors, lets, index variables);
//   - an element access whose index count differs from the tensor's rank, or a non-integer index;
//   - operand types that do not fit the operator (e.g. adding a bf16 value to an f32 one without a cast);
//   - a `sum` bound that is a runtime dim/attr (reductions are unrolled, so the bound must be static);
//   - a `sum` body that is not f32 (accumulation is always f32);
//   - assignments to inputs, assignments whose index count differs from the target's rank, repeated index
//     names, a stored value that is neither the target's element type nor f32;
//   - `rank(t)` outside a `require`, requires that are not Bool, shape entries that are not Int and use
//     anything but dims/attrs/literals, an `in [lo, hi)` range on a float tensor;
//   - `present(t)` of a tensor that is not optional, or in a shape or range; a `when` condition or an `if`
//     outside every `for` that the host cannot evaluate (tensor data, index variables, floats);
//   - a `fold` whose body type differs from its initial value, a `fold` bound naming a runtime dim/attr or
//     an accumulator, an unknown function, fma() arguments that are not f32, min()/max() arguments that
//     are not both int or both the same float type;
//   - an expression store index outside every `for`, and locals (lets, loop, sum and fold variables,
//     fresh store indices) that shadow any other name.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/dsl/AST.h"

namespace moec::dsl {

void checkOp(OpDef &op);

} // namespace moec::dsl
