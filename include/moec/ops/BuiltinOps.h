//===- BuiltinOps.h - The ops shipped in ops/*.moe ---------------*- C++ -*-===//
#pragma once

#include "moec/dsl/AST.h"

#include <memory>
#include <string>
#include <vector>

namespace moec {

struct BuiltinOp {
  const char *name;   // "moe_init_routing_v2_grad"
  const char *path;   // "ops/moe_init_routing_v2_grad.moe", for diagnostics
  const char *source; // the .moe text, embedded at build time
};

/// Every built-in op, sorted by name.
const std::vector<BuiltinOp> &builtinOps();

/// The built-in op `name`, or null.
const BuiltinOp *findBuiltinOp(const std::string &name);

/// Loads a built-in op by name, or else a `.moe` file by path; parsed and checked. Throws dsl::DslError
/// for a bad definition and std::runtime_error for an unknown name that is not a readable file.
std::unique_ptr<dsl::OpDef> loadOp(const std::string &nameOrPath);

/// An op and the exact text it was parsed from (read once: what cache keys hash is what was compiled).
struct OpWithSource {
  std::shared_ptr<const dsl::OpDef> op;
  std::string source;
};
OpWithSource loadOpWithSource(const std::string &nameOrPath);

} // namespace moec
