//===- Eval.h - Host-side evaluation of signature expressions ----*- C++ -*-===//
//
// Shapes, `in [lo, hi)` ranges and `require` conditions are Int/Bool expressions over dims, attrs,
// literals, rank(tensor) and present(tensor). The runtime evaluates them on the host before every run.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/dsl/AST.h"

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>

namespace moec::dsl {

/// Values known on the host: dims by name, attrs by inner name (alias), tensor ranks by tensor name,
/// and which optional tensors are present (by name; absent from the map = unknown).
struct Bindings {
  std::map<std::string, int64_t> values;
  std::map<std::string, int64_t> ranks;
  std::map<std::string, bool> present;
};

class EvalError : public std::runtime_error {
public:
  /// `arithmetic`: the values are known but the arithmetic fails (division by zero, overflow), as
  /// opposed to a value that is not known yet (a runtime dim) or not computable on the host.
  explicit EvalError(const std::string &message, bool arithmetic = false)
      : std::runtime_error(message), arithmetic(arithmetic) {}
  bool isArithmetic() const { return arithmetic; }

private:
  bool arithmetic;
};

/// Evaluates an Int (or Bool, as 0/1) expression. Throws EvalError for a name without a value, a division
/// or modulo by zero, or an expression that cannot run on the host (element access, sum, float values).
int64_t evalInt(const Expr &e, const Bindings &b);
bool evalBool(const Expr &e, const Bindings &b);

} // namespace moec::dsl
