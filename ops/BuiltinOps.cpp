//===- BuiltinOps.cpp - Finding and loading ops ---------------------------===//
#include "moec/ops/BuiltinOps.h"

#include "moec/contracts/Files.h"
#include "moec/dsl/Parser.h"

#include <filesystem>
#include <stdexcept>
#include <string_view>

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
  // A path (it has a folder or the .moe suffix) is a file that is not there, not a misspelt op.
  std::string_view text = nameOrPath;
  if (text.find('/') != std::string_view::npos || (text.size() > 4 && text.substr(text.size() - 4) == ".moe"))
    return std::runtime_error("cannot read '" + nameOrPath + "': no such file");
  std::string known;
  for (const BuiltinOp &op : builtinOps())
    known += std::string(known.empty() ? "" : ", ") + op.name;
  return std::runtime_error("unknown op '" + nameOrPath + "': not a built-in op (" + known + ") nor a .moe file");
}
} // namespace

} // namespace moec
