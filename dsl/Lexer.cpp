//===- Lexer.cpp - Text to tokens -----------------------------------------===//
#include "Lexer.h"

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>

namespace moec::dsl {

std::string Token::describe() const {
  switch (kind) {
  case TokKind::End: return "end of file";
  case TokKind::String: return "a string literal";
  default: return fmt::format("'{}'", text);
  }
}

bool isKeyword(const std::string &word) {
  static const char *const kKeywords[] = {
      "op",    "dim",    "attr",    "in", "out", "require", "let", "sum", "fold", "rank", "present", "true",
      "false", "static", "runtime", "as", "int", "bool",    "for", "if",  "else", "when", "unique"};
  for (const char *k : kKeywords)
    if (word == k)
      return true;
  return false;
}

namespace {

bool isIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool isIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool isDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)); }

class Lexer {
public:
  explicit Lexer(const std::shared_ptr<const SourceFile> &file) : file_(file), src_(file->text) {}

  std::vector<Token> run() {
    std::vector<Token> toks;
    for (skipSpaceAndComments(); pos_ < src_.size(); skipSpaceAndComments())
      toks.push_back(next());
    toks.push_back(Token{TokKind::End, "", here()});
    return toks;
  }

private:
  SourceLoc here() const { return SourceLoc{file_, line_, col_}; }

  void advance() {
    if (src_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }

  char peek(size_t ahead = 0) const { return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0'; }

  void skipSpaceAndComments() {
    while (pos_ < src_.size()) {
      char c = src_[pos_];
      if (c == '#') {
        while (pos_ < src_.size() && src_[pos_] != '\n')
          advance();
      } else if (std::isspace(static_cast<unsigned char>(c))) {
        advance();
      } else {
        return;
      }
    }
  }

  Token next() {
    char c = peek();
    if (isIdentStart(c))
      return identifier();
    if (isDigit(c))
      return number();
    if (c == '"')
      return string();
    return punct();
  }

  Token identifier() {
    Token t{TokKind::Ident, "", here()};
    while (isIdentChar(peek())) {
      t.text += peek();
      advance();
    }
    return t;
  }

  // digits [. digits] [e [+-] digits]; a '.' or an exponent makes it a float.
  Token number() {
    Token t{TokKind::Int, "", here()};
    auto digits = [&] {
      while (isDigit(peek())) {
        t.text += peek();
        advance();
      }
    };
    digits();
    if (peek() == '.' && isDigit(peek(1))) {
      t.kind = TokKind::Float;
      t.text += '.';
      advance();
      digits();
    }
    if ((peek() == 'e' || peek() == 'E') &&
        (isDigit(peek(1)) || ((peek(1) == '+' || peek(1) == '-') && isDigit(peek(2))))) {
      t.kind = TokKind::Float;
      for (int i = 0; i < 2 && !isDigit(peek()); ++i) {
        t.text += peek();
        advance();
      }
      digits();
    }
    if (isIdentChar(peek()) || peek() == '.')
      throw DslError(t.loc, fmt::format("malformed number '{}{}'", t.text, peek()));
    errno = 0;
    if (t.kind == TokKind::Int)
      t.intValue = std::strtoll(t.text.c_str(), nullptr, 10);
    else
      t.floatValue = std::strtod(t.text.c_str(), nullptr);
    if (errno == ERANGE)
      throw DslError(t.loc, fmt::format("number '{}' is out of range", t.text));
    return t;
  }

  Token string() {
    Token t{TokKind::String, "", here()};
    advance(); // opening quote
    while (peek() != '"') {
      if (pos_ >= src_.size() || peek() == '\n')
        throw DslError(t.loc, "unterminated string literal");
      if (peek() == '\\') {
        SourceLoc escLoc = here();
        advance();
        if (peek() != '"' && peek() != '\\')
          throw DslError(escLoc, "unknown escape in string literal; only \\\" and \\\\ are allowed");
      }
      t.text += peek();
      advance();
    }
    advance(); // closing quote
    return t;
  }

  Token punct() {
    static const char *const kTwoChar[] = {"<=", ">=", "==", "!=", "&&", "||"};
    static const std::string kOneChar = "<>!?:,;()[]{}+-*/%=|";
    Token t{TokKind::Punct, "", here()};
    for (const char *p : kTwoChar) {
      if (peek() == p[0] && peek(1) == p[1]) {
        t.text = p;
        advance();
        advance();
        return t;
      }
    }
    if (kOneChar.find(peek()) == std::string::npos)
      throw DslError(t.loc, fmt::format("unexpected character '{}'", peek()));
    t.text = std::string(1, peek());
    advance();
    return t;
  }

  std::shared_ptr<const SourceFile> file_;
  const std::string &src_;
  size_t pos_ = 0;
  int line_ = 1;
  int col_ = 1;
};

} // namespace

std::vector<Token> tokenize(const std::shared_ptr<const SourceFile> &file) { return Lexer(file).run(); }

} // namespace moec::dsl
