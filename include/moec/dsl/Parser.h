//===- Parser.h - Text to AST ------------------------------------*- C++ -*-===//
#pragma once

#include "moec/dsl/AST.h"

#include <memory>
#include <string>

namespace moec::dsl {

/// Parses one op definition. Throws DslError (file:line:col + caret) on a syntax error.
std::unique_ptr<OpDef> parseOp(std::shared_ptr<const SourceFile> file);

/// Reads `path`, parses it and runs the semantic checks (Sema.h). Throws DslError, or std::runtime_error
/// when the file cannot be read.
std::unique_ptr<OpDef> loadOpFile(const std::string &path);

/// Same as loadOpFile, for text already in memory (`path` is only used in diagnostics).
std::unique_ptr<OpDef> loadOpText(const std::string &path, const std::string &text);

} // namespace moec::dsl
