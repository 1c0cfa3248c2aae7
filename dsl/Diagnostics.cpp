//===- Diagnostics.cpp - Rendering located errors -------------------------===//
#include "moec/dsl/Diagnostics.h"

#include <fmt/format.h>

namespace moec::dsl {

std::string SourceFile::lineText(int line) const {
  size_t start = 0;
  for (int l = 1; l < line; ++l) {
    start = text.find('\n', start);
    if (start == std::string::npos)
      return "";
    ++start;
  }
  size_t end = text.find('\n', start);
  std::string s = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
  if (!s.empty() && s.back() == '\r')
    s.pop_back();
  return s;
}

std::string renderDiagnostic(const SourceLoc &loc, const std::string &message) {
  if (!loc.file)
    return fmt::format("error: {}", message);
  if (!loc.known())
    return fmt::format("{}: error: {}", loc.file->path, message);
  std::string line = loc.file->lineText(loc.line);
  // Pad with the line's own tabs so the caret lines up however tabs are displayed.
  std::string pad;
  for (int i = 0; i + 1 < loc.col; ++i)
    pad += (i < static_cast<int>(line.size()) && line[i] == '\t') ? '\t' : ' ';
  return fmt::format("{}:{}:{}: error: {}\n{}\n{}^", loc.file->path, loc.line, loc.col, message, line, pad);
}

} // namespace moec::dsl
