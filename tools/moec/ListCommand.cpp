//===- ListCommand.cpp - moec list ------------------------------------------===//
#include "Api.h"
#include "Commands.h"

#include "moec/dsl/Printer.h"
#include "moec/ops/BuiltinOps.h"

#include <fmt/core.h>

namespace moec::cli {

std::string describeOp(const dsl::OpDef &op) {
  std::string out = op.name;
  if (!op.typeParam.empty()) {
    out += "<" + op.typeParam + ": ";
    for (size_t i = 0; i < op.allowedTypes.size(); ++i)
      out += std::string(i ? " | " : "") + dsl::dtypeName(op.allowedTypes[i]);
    out += ">";
  }
  out += "\n  dims:   ";
  for (size_t i = 0; i < op.dims.size(); ++i)
    out += fmt::format("{}{} ({})", i ? ", " : "", op.dims[i].name, op.dims[i].isStatic ? "static" : "runtime");
  out += "\n  attrs:  ";
  for (size_t i = 0; i < op.attrs.size(); ++i) {
    const dsl::AttrDecl &a = op.attrs[i];
    out += fmt::format("{}{}{} ({}{}{})", i ? ", " : "", a.name, a.alias.empty() ? "" : " as " + a.alias,
                       a.isStatic ? "static" : "runtime", a.isBool ? " bool" : "",
                       a.defaultValue ? " = " + std::to_string(*a.defaultValue) : ", required");
  }
  for (const dsl::TensorDecl &t : op.tensors) {
    // As the DSL writes it: `name?` for an optional tensor, then its value range, `unique`, and when an
    // optional output exists.
    out += fmt::format("\n  {:<7} {}{}: {}[", t.isOutput ? "out" : "in", t.name, t.optional ? "?" : "",
                       t.elem.generic ? op.typeParam : dsl::dtypeName(t.elem.fixed));
    for (size_t i = 0; i < t.shape.size(); ++i)
      out += std::string(i ? ", " : "") + (t.shape[i].flattenLeading ? "*" : "") + dsl::printExpr(*t.shape[i].size);
    out += "]";
    if (t.rangeLo && t.rangeHi)
      out += " in [" + dsl::printExpr(*t.rangeLo) + ", " + dsl::printExpr(*t.rangeHi) + ")";
    if (t.unique)
      out += " unique";
    if (t.when)
      out += " when " + dsl::printExpr(*t.when);
  }
  return out;
}

void registerListCommand(CLI::App &app) {
  CLI::App *cmd = app.add_subcommand("list", "List the built-in ops: signature, dims, attrs, dtypes");
  cmd->callback([] {
    for (const BuiltinOp &b : builtinOps())
      fmt::print("{}\n\n", describeOp(*loadOp(b.name)));
  });
}

} // namespace moec::cli
