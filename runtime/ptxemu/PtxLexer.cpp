//===- PtxLexer.cpp --------------------------------------------------------===//
#include "PtxLexer.h"

#include "moec/runtime/ptxemu/Ptx.h"

namespace moec::ptxemu {

namespace {

bool wordStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '%' || c == '$' || c == '.';
}
bool wordChar(char c) { return wordStart(c) || (c >= '0' && c <= '9'); }
bool digit(char c) { return c >= '0' && c <= '9'; }

} // namespace

std::vector<Token> lexPtx(std::string_view s) {
  std::vector<Token> out;
  int32_t line = 1;
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (c == '\n') {
      ++line;
      ++i;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
    } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
      while (i < s.size() && s[i] != '\n')
        ++i;
    } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
      int32_t start = line;
      size_t end = s.find("*/", i + 2);
      if (end == std::string_view::npos)
        throw PtxError("PTX line " + std::to_string(start) + ": unterminated comment");
      for (size_t k = i; k < end; ++k)
        line += s[k] == '\n';
      i = end + 2;
    } else if (wordStart(c)) {
      size_t j = i + 1;
      while (j < s.size() && wordChar(s[j]))
        ++j;
      out.push_back({Token::Kind::Word, s.substr(i, j - i), line});
      i = j;
    } else if (digit(c)) {
      // Decimal, hex (0x...), float bits (0f... / 0d...), a decimal float (1.5), an unsigned suffix (U).
      size_t j = i + 1;
      while (j < s.size() && (wordChar(s[j]) && s[j] != '%' && s[j] != '$'))
        ++j;
      out.push_back({Token::Kind::Number, s.substr(i, j - i), line});
      i = j;
    } else if (c == '"') {
      size_t end = s.find_first_of("\"\n", i + 1);
      if (end == std::string_view::npos || s[end] != '"')
        throw PtxError("PTX line " + std::to_string(line) + ": unterminated string");
      out.push_back({Token::Kind::String, s.substr(i, end + 1 - i), line});
      i = end + 1;
    } else if (std::string_view(",;:[]{}()+-!@<>|=").find(c) != std::string_view::npos) {
      out.push_back({Token::Kind::Punct, s.substr(i, 1), line});
      ++i;
    } else {
      throw PtxError("PTX line " + std::to_string(line) + ": unexpected character '" + std::string(1, c) + "'");
    }
  }
  out.push_back({Token::Kind::End, {}, line});
  return out;
}

} // namespace moec::ptxemu
