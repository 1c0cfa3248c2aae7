//===- BuiltinOps.cpp - Finding and loading ops ---------------------------===//
#include "moec/ops/BuiltinOps.h"

#include "moec/contracts/Files.h"
#include "moec/dsl/Parser.h"

#include <filesystem>
#include <stdexcept>

namespace moec {

namespace {
std::runtime_error unknownOp(const std::string &nameOrPath);
} // namespace

const BuiltinOp *findBuiltinOp(const std::string &name) {
  for (const BuiltinOp &op : builtinOps())
    if (name == op.name)
      return &op;
  return nullptr;
}

std::unique_ptr<dsl::OpDef> loadOp(const std::string &nameOrPath) {
  if (const BuiltinOp *op = findBuiltinOp(nameOrPath))
    return dsl::loadOpText(op->path, op->source);
  if (std::filesystem::exists(nameOrPath)) // only a regular file: a FIFO would block the read forever
    return dsl::loadOpText(nameOrPath, readRegularFile(nameOrPath));
  throw unknownOp(nameOrPath);
}

OpWithSource loadOpWithSource(const std::string &nameOrPath) {
  if (const BuiltinOp *op = findBuiltinOp(nameOrPath))
    return {dsl::loadOpText(op->path, op->source), op->source};
  if (!std::filesystem::exists(nameOrPath))
    throw unknownOp(nameOrPath);
  std::string text = readRegularFile(nameOrPath); // only a regular file: a FIFO would block the read forever
  return {dsl::loadOpText(nameOrPath, text), text};
}

namespace {
std::runtime_error unknownOp(const std::string &nameOrPath) {
  std::string known;
  for (const BuiltinOp &op : builtinOps())
    known += std::string(known.empty() ? "" : ", ") + op.name;
  return std::runtime_error("unknown op '" + nameOrPath + "': not a built-in op (" + known + ") nor a .moe file");
}
} // namespace

} // namespace moec
