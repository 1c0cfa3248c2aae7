//===- Binding.h - Checking a call against an op's signature ------*- C++ -*-===//
//
// Before every run the host binds the op's dims from the input shapes, applies attribute defaults,
// checks dtypes, ranks, shapes, `require`s and index ranges, and derives the output shapes. Every error
// names the op, the tensor, the dim, what was expected and what was got.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/dsl/AST.h"
#include "moec/dsl/Eval.h"
#include "moec/runtime/Tensor.h"

#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace moec {

class ArgumentError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct BoundCall {
  std::map<std::string, int64_t> dims;  // every dim of the op
  std::map<std::string, int64_t> attrs; // every attribute, by public name, defaults applied
  std::map<std::string, std::vector<int64_t>> outputShapes; // the outputs this call produces
  std::set<std::string> present; // optional inputs given, optional outputs whose `when` holds
  /// dims, attrs (public and inner names), ranks, presence, host-evaluable top-level lets: for
  /// evaluating signature expressions and kernel domains.
  dsl::Bindings bindings;

  /// Static dims and static attributes: what the kernel is specialized for.
  std::map<std::string, int64_t> statics(const dsl::OpDef &op) const;
  /// Runtime dims then runtime attributes, in declaration order: the kernel's scalar arguments.
  std::vector<int64_t> kernelScalars(const dsl::OpDef &op) const;
  /// Rows of a kernel with these domain extents: all but the last, multiplied (1 for one extent).
  int64_t rows(const std::vector<const dsl::Expr *> &domain) const;
};

/// Binds `inputs` (by tensor name; optional ones may be left out) and `attrs` (by public name or alias)
/// for an op of element type `dtype`. Checks everything listed above; index ranges and `unique` are
/// checked only for host tensors.
BoundCall bindCall(const dsl::OpDef &op, DType dtype, const std::map<std::string, int64_t> &attrs,
                   const std::map<std::string, TensorView> &inputs);

/// The data checks of bindCall alone: `in [lo, hi)` ranges and `unique` values of host tensors. A call
/// whose shapes and attributes were bound before needs only these.
void checkIndexData(const dsl::OpDef &op, const std::map<std::string, TensorView> &inputs,
                    const dsl::Bindings &bindings);

/// Checks caller-provided outputs against the shapes and dtypes bindCall derived.
void checkOutputs(const dsl::OpDef &op, DType dtype, const BoundCall &call,
                  const std::map<std::string, TensorView> &outputs);

/// Binds the top-level lets that the host can evaluate (`let K = R / Tk`), along the branches of
/// host-evaluable ifs: kernel domains may use them. Lets that read tensor data stay unbound.
void bindHostLets(const std::vector<dsl::Stmt> &body, dsl::Bindings &b);

} // namespace moec
