//===- PtxLexer.h - Tokens of PTX text --------------------------*- C++ -*-===//
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace moec::ptxemu {

struct Token {
  enum class Kind : uint8_t { Word, Number, Punct, String, End } kind;
  std::string_view text; // Word: identifiers, directives, opcodes, registers ("%tid.x"); Punct: one char;
                         // String: "..." with its quotes
  int32_t line;
};

/// Splits PTX text into tokens, dropping // and /* */ comments. Throws PtxError on a character PTX does
/// not use or an unterminated comment.
std::vector<Token> lexPtx(std::string_view text);

} // namespace moec::ptxemu
