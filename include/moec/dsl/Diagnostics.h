//===- Diagnostics.h - Located errors for the moec DSL ----------*- C++ -*-===//
//
// Every front-end error carries a source location and renders as
//
//   ops/foo.moe:3:14: error: unknown name 'Q'
//     in x: T[Q, H]
//             ^
//
// Errors are values: the lexer, parser and checker throw `DslError`, which carries the already-rendered
// text; callers print `what()`.
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

namespace moec::dsl {

/// The text of one `.moe` file, shared by every location that points into it.
struct SourceFile {
  std::string path;
  std::string text;

  /// The text of 1-based line `line`, without its newline.
  std::string lineText(int line) const;
};

struct SourceLoc {
  std::shared_ptr<const SourceFile> file;
  int line = 0; // 1-based; 0 = unknown
  int col = 0;  // 1-based

  bool known() const { return file && line > 0; }
};

/// Renders `path:line:col: error: message` plus the source line and a caret under the column.
std::string renderDiagnostic(const SourceLoc &loc, const std::string &message);

class DslError : public std::runtime_error {
public:
  DslError(const SourceLoc &loc, const std::string &message)
      : std::runtime_error(renderDiagnostic(loc, message)), loc_(loc), message_(message) {}

  const SourceLoc &loc() const { return loc_; }
  /// The plain message, without location or caret.
  const std::string &message() const { return message_; }

private:
  SourceLoc loc_;
  std::string message_;
};

} // namespace moec::dsl
