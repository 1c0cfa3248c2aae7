//===- Printer.h - AST to text -----------------------------------*- C++ -*-===//
#pragma once

#include "moec/dsl/AST.h"

#include <string>

namespace moec::dsl {

/// An indented tree dump of the whole op (`moec emit --emit ast`), with the types Sema inferred.
std::string printAst(const OpDef &op);

/// One expression in DSL syntax, fully parenthesised where precedence needs it: `N * K`, `r >= 0`.
std::string printExpr(const Expr &e);

/// `s` in double quotes with `"` and `\` escaped by a backslash: a DSL string literal (gnuplot reads the
/// same).
std::string quote(const std::string &s);

} // namespace moec::dsl
