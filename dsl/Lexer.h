//===- Lexer.h - Tokens of the moec DSL (private) --------------*- C++ -*-===//
#pragma once

#include "moec/dsl/Diagnostics.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace moec::dsl {

enum class TokKind { Ident, Int, Float, String, Punct, End };

struct Token {
  TokKind kind;
  std::string text; // identifier, punctuation, or the literal as written; String: the unescaped value
  SourceLoc loc;
  int64_t intValue = 0;
  double floatValue = 0;

  bool is(TokKind k, const char *t) const { return kind == k && text == t; }
  bool isPunct(const char *p) const { return is(TokKind::Punct, p); }
  /// For "expected X but found <describe()>".
  std::string describe() const;
};

/// Reserved words: never usable as names.
bool isKeyword(const std::string &word);

/// Splits the whole file into tokens, ending with one End token. Throws DslError on a bad character, an
/// unterminated string or a malformed number.
std::vector<Token> tokenize(const std::shared_ptr<const SourceFile> &file);

} // namespace moec::dsl
