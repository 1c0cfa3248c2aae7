//===- PtxParserInternal.h - The PTX parser's state (private) ---*- C++ -*-===//
//
// The Parser that parsePtx runs over lexPtx's tokens: its token helpers here, the module's directives and a
// kernel's declarations in PtxParser.cpp, instructions and their operands in PtxInstructions.cpp, and the
// check of each decoded instruction's operands in PtxValidate.cpp.
//===----------------------------------------------------------------------===//
#pragma once

#include "PtxLexer.h"

#include "moec/runtime/ptxemu/Ptx.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace moec::ptxemu::detail {

/// The type a PTX type suffix names ("u32"), or Type::None.
Type parseType(std::string_view s);

class Parser {
public:
  explicit Parser(std::string_view text) : toks(lexPtx(text)) {}

  Module parse();

private:
  // --- tokens ---
  const Token &peek(size_t k = 0) const { return toks[std::min(pos + k, toks.size() - 1)]; }
  const Token &next() { return toks[std::min(pos++, toks.size() - 1)]; }
  bool at(Token::Kind k) const { return peek().kind == k; }
  bool atPunct(std::string_view p) const { return peek().kind == Token::Kind::Punct && peek().text == p; }
  bool acceptPunct(std::string_view p) {
    if (!atPunct(p))
      return false;
    ++pos;
    return true;
  }
  [[noreturn]] void fail(const std::string &message) const {
    throw PtxError("PTX line " + std::to_string(peek().line) + ": " + message);
  }
  void expectPunct(std::string_view p) {
    if (!acceptPunct(p))
      fail("expected '" + std::string(p) + "', got '" + std::string(peek().text) + "'");
  }
  std::string_view expectWord() {
    if (!at(Token::Kind::Word))
      fail("expected a name, got '" + std::string(peek().text) + "'");
    return next().text;
  }
  int64_t expectNumber() {
    if (!at(Token::Kind::Number))
      fail("expected a number, got '" + std::string(peek().text) + "'");
    Operand o = number(next().text, false);
    return o.imm;
  }

  Operand number(std::string_view t, bool negative) const;

  // --- declarations ---
  Symbol parseSharedDecl();

  void parseParam(Kernel &k);

  void threeNumbers(unsigned out[3]);

  Kernel parseKernel();

  void addShared(Kernel &k, Symbol s);

  void parseRegDecl(Kernel &k);

  void parseBody(Kernel &k);

  // --- instructions ---
  int32_t lookupReg(std::string_view name) const;

  Operand simpleOperand(Kernel &k, bool allowLabel);

  Operand operand(Kernel &k, bool allowLabel);

  Instr parseInstr(Kernel &k);

  void decodeModifier(Instr &in, std::string_view m, std::vector<Type> &types);

  // Operand counts and kinds, so the interpreter can index operands without checking.
  void validate(const Instr &in);

  static InstrClass classify(const Instr &in);

  std::vector<Token> toks;
  size_t pos = 0;
  std::vector<Symbol> moduleShared;
  std::vector<std::unordered_map<std::string, int32_t>> scopes;
  std::map<std::string, int32_t, std::less<>> labels;
  std::vector<std::pair<int32_t, std::pair<std::string, int32_t>>> pendingBranches; // instr, (label, line)
};

} // namespace moec::ptxemu::detail
