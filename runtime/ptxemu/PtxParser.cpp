//===- PtxParser.cpp - PTX text to decoded kernels ------------------------===//
//
// A recursive-descent parser over lexPtx's tokens for the subset of PTX that moec's NVPTX output uses
// (plus shared memory, barriers, warp votes and atomics). Registers and symbols are resolved to indices
// and labels to instruction indices here, so the interpreter never looks up a name.
//
// This file: the module's directives and a kernel's declarations (parameters, registers, shared memory) and
// body; instructions and their operands are decoded in PtxInstructions.cpp, checked in PtxValidate.cpp.
//===----------------------------------------------------------------------===//
#include "Alu.h"
#include "PtxLexer.h"
#include "PtxParserInternal.h"

#include "moec/runtime/ptxemu/Ptx.h"

#include <charconv>
#include <map>
#include <unordered_map>

namespace moec::ptxemu {

void computeReconvergence(Kernel &kernel); // ControlFlow.cpp

namespace detail {

namespace {

struct NamedType {
  const char *name;
  Type type;
};
constexpr NamedType kTypes[] = {
    {"pred", Type::Pred}, {"b8", Type::B8},   {"b16", Type::B16},     {"b32", Type::B32},       {"b64", Type::B64},
    {"u8", Type::U8},     {"u16", Type::U16}, {"u32", Type::U32},     {"u64", Type::U64},       {"s8", Type::S8},
    {"s16", Type::S16},   {"s32", Type::S32}, {"s64", Type::S64},     {"f16", Type::F16},       {"bf16", Type::BF16},
    {"f32", Type::F32},   {"f64", Type::F64}, {"f16x2", Type::F16x2}, {"bf16x2", Type::BF16x2},
};

// LLVM's PTX declares a few thousand virtual registers for the largest kernels moec emits; past this a
// block's emulated register file would take gigabytes.
constexpr size_t kMaxRegisters = 1 << 16;

} // namespace

Type parseType(std::string_view s) {
  for (const NamedType &t : kTypes)
    if (s == t.name)
      return t.type;
  return Type::None;
}

Module Parser::parse() {
  Module m;
  while (!at(Token::Kind::End)) {
    std::string_view w = peek().text;
    if (w == ".version") {
      next();
      if (!at(Token::Kind::Number))
        fail("expected a PTX version");
      next();
    } else if (w == ".address_size") {
      next();
      if (expectNumber() != 64)
        fail("only .address_size 64 is supported");
    } else if (w == ".target") {
      next();
      m.target = std::string(expectWord());
      while (acceptPunct(","))
        expectWord();
    } else if (w == ".visible" || w == ".weak") {
      next();
    } else if (w == ".entry") {
      next();
      m.kernels.push_back(parseKernel());
    } else if (w == ".extern" || w == ".shared") {
      moduleShared.push_back(parseSharedDecl());
    } else if (w == ".func") {
      fail("device functions (.func) are not supported by the emulator");
    } else {
      fail("unsupported module directive '" + std::string(w) + "'");
    }
  }
  return m;
}

Operand Parser::number(std::string_view t, bool negative) const {
  Operand o;
  o.kind = Operand::Kind::Imm;
  if (!t.empty() && (t.back() == 'U' || t.back() == 'u'))
    t.remove_suffix(1);
  uint64_t v = 0;
  int base = 10;
  if (t.size() > 2 && t[0] == '0' && (t[1] == 'f' || t[1] == 'F' || t[1] == 'd' || t[1] == 'D')) {
    o.floatBytes = (t[1] == 'f' || t[1] == 'F') ? 4 : 8;
    t.remove_prefix(2);
    base = 16;
    if (t.size() != size_t(o.floatBytes * 2))
      fail("malformed float literal");
  } else if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
    t.remove_prefix(2);
    base = 16;
  } else if (t.size() > 1 && t[0] == '0') {
    base = 8;
  }
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v, base);
  if (ec != std::errc() || end != t.data() + t.size())
    fail("malformed number '" + std::string(t) + "'");
  if (negative && o.floatBytes)
    fail("a negated float literal");
  o.imm = negative ? int64_t(0 - v) : int64_t(v);
  return o;
}

Symbol Parser::parseSharedDecl() {
  bool external = false;
  if (peek().text == ".extern") {
    next();
    external = true;
  }
  if (expectWord() != ".shared")
    fail("only .shared variables are supported at module level");
  Symbol s{Symbol::Kind::Shared, "", 0, 1, 0, false};
  int64_t elem = 1;
  while (at(Token::Kind::Word) && peek().text[0] == '.') {
    std::string_view w = next().text;
    if (w == ".align")
      s.align = expectNumber();
    else if (Type t = parseType(w.substr(1)); t != Type::None)
      elem = typeBytes(t);
    else
      fail("unsupported .shared attribute '" + std::string(w) + "'");
  }
  s.name = std::string(expectWord());
  s.size = elem;
  if (acceptPunct("[")) {
    if (atPunct("]")) {
      if (!external)
        fail("a .shared array without a size must be .extern (dynamic shared memory)");
      s.size = -1; // dynamic: sized at launch
    } else {
      int64_t n = expectNumber();
      if (n < 0 || n > (int64_t(1) << 30) / elem)
        fail("a .shared array is too large");
      s.size = n * elem;
    }
    expectPunct("]");
  }
  if (s.align <= 0 || (s.align & (s.align - 1)))
    fail("a .shared alignment must be a power of two");
  expectPunct(";");
  return s;
}

void Parser::parseParam(Kernel &k) {
  if (expectWord() != ".param")
    fail("expected .param");
  Symbol s{Symbol::Kind::Param, "", 0, 0, 0, false};
  int64_t elem = 0;
  while (at(Token::Kind::Word) && peek().text[0] == '.') {
    std::string_view w = next().text;
    if (w == ".align")
      s.align = expectNumber();
    else if (w == ".ptr")
      s.pointer = true;
    else if (w == ".global" || w == ".shared" || w == ".const" || w == ".local")
      continue; // the pointee's space (.ptr .global): the emulator checks every access anyway
    else if (Type t = parseType(w.substr(1)); t != Type::None && t != Type::Pred)
      elem = typeBytes(t);
    else
      fail("unsupported parameter attribute '" + std::string(w) + "'");
  }
  if (!elem)
    fail("a parameter without a type");
  s.name = std::string(expectWord());
  s.size = elem;
  if (acceptPunct("[")) {
    int64_t n = expectNumber();
    if (n <= 0 || n > 4096)
      fail("a parameter array of " + std::to_string(n) + " elements");
    s.size = n * elem;
    expectPunct("]");
  }
  if (s.pointer && s.size != 8)
    fail("a .ptr parameter must be 64-bit");
  int64_t align = s.align ? std::max<int64_t>(s.align, elem) : elem;
  if (s.pointer)
    align = 8; // .ptr's .align is the pointee's alignment
  s.offset = (k.paramBytes + align - 1) / align * align;
  k.paramBytes = s.offset + s.size;
  if (k.paramBytes > 32764)
    fail("the parameters exceed 32764 bytes");
  k.params.push_back(int(k.symbols.size()));
  k.symbols.push_back(std::move(s));
}

void Parser::threeNumbers(unsigned out[3]) {
  for (int i = 0; i < 3; ++i) {
    int64_t n = expectNumber();
    if (n < 1 || n > 1024)
      fail("a thread count out of range");
    out[i] = unsigned(n);
    if (!acceptPunct(","))
      break;
  }
}

Kernel Parser::parseKernel() {
  Kernel k;
  k.line = peek().line;
  k.name = std::string(expectWord());
  expectPunct("(");
  if (!atPunct(")")) {
    do
      parseParam(k);
    while (acceptPunct(","));
  }
  expectPunct(")");
  for (;;) { // performance directives
    std::string_view w = peek().text;
    if (w == ".maxntid") {
      next();
      threeNumbers(k.maxntid);
    } else if (w == ".reqntid") {
      next();
      threeNumbers(k.reqntid);
    } else if (w == ".minnctapersm" || w == ".maxnctapersm" || w == ".maxnreg") {
      next();
      expectNumber();
    } else if (w == ".noreturn") {
      next();
    } else {
      break;
    }
  }
  for (const Symbol &s : moduleShared)
    addShared(k, s);
  scopes.assign(1, {});
  labels.clear();
  pendingBranches.clear();
  expectPunct("{");
  parseBody(k);
  for (auto &[index, label] : pendingBranches) {
    auto it = labels.find(label.first);
    if (it == labels.end())
      throw PtxError("PTX line " + std::to_string(label.second) + ": undefined label '" + std::string(label.first) + "'");
    k.instrs[size_t(index)].target = it->second;
  }
  for (Symbol &s : k.symbols) // dynamic shared memory starts after the static variables
    if (s.kind == Symbol::Kind::Shared && s.size < 0)
      s.offset = (k.sharedBytes + 15) / 16 * 16;
  computeReconvergence(k);
  return k;
}

void Parser::addShared(Kernel &k, Symbol s) {
  if (s.size >= 0) {
    s.offset = (k.sharedBytes + s.align - 1) / s.align * s.align;
    k.sharedBytes = s.offset + s.size;
    if (k.sharedBytes > 228 * 1024)
      fail("static shared memory exceeds 228 KiB");
  }
  k.symbols.push_back(std::move(s));
}

void Parser::parseRegDecl(Kernel &k) {
  Type t = parseType(expectWord().substr(1));
  if (t == Type::None || t == Type::F16x2 || t == Type::BF16x2)
    fail("unsupported register type");
  do {
    std::string name(expectWord());
    int64_t count = -1;
    if (acceptPunct("<")) {
      count = expectNumber();
      expectPunct(">");
      if (count < 0 || count > 65536)
        fail("a register range of " + std::to_string(count));
    }
    auto declare = [&](const std::string &n) {
      if (k.regs.size() >= kMaxRegisters)
        fail("more than " + std::to_string(kMaxRegisters) + " registers in kernel '" + k.name + "'");
      scopes.back()[n] = int32_t(k.regs.size());
      k.regs.push_back({n, t, t == Type::Pred ? 1 : std::max(typeBytes(t), 2)});
    };
    if (count < 0)
      declare(name);
    for (int64_t i = 0; i < count; ++i)
      declare(name + std::to_string(i));
  } while (acceptPunct(","));
  expectPunct(";");
}

void Parser::parseBody(Kernel &k) {
  int depth = 1;
  while (depth > 0) {
    if (at(Token::Kind::End))
      fail("unexpected end of text in kernel '" + k.name + "'");
    if (acceptPunct("{")) {
      ++depth;
      scopes.emplace_back();
      continue;
    }
    if (acceptPunct("}")) {
      --depth;
      if (depth > 0)
        scopes.pop_back();
      continue;
    }
    std::string_view w = peek().text;
    if (w == ".reg") {
      next();
      parseRegDecl(k);
    } else if (w == ".shared") {
      addShared(k, parseSharedDecl());
    } else if (w == ".local" || w == ".const" || w == ".global") {
      fail("'" + std::string(w) + "' variables are not supported by the emulator");
    } else if (w == ".pragma") { // .pragma "nounroll"; a hint to ptxas, nothing to execute
      next();
      if (!at(Token::Kind::String))
        fail("expected a string after .pragma");
      next();
      expectPunct(";");
    } else if (at(Token::Kind::Word) && peek(1).kind == Token::Kind::Punct && peek(1).text == ":") {
      if (!labels.emplace(w, int32_t(k.instrs.size())).second)
        fail("label '" + std::string(w) + "' defined twice");
      next();
      next();
    } else {
      k.instrs.push_back(parseInstr(k));
    }
  }
}

} // namespace detail

const char *typeName(Type t) {
  for (const detail::NamedType &n : detail::kTypes)
    if (n.type == t)
      return n.name;
  return "none";
}

const char *className(InstrClass c) {
  static const char *names[kInstrClasses] = {"integer", "float", "convert", "move", "compare",
                                             "global memory", "shared memory", "control", "warp"};
  return names[int(c)];
}

const Kernel *Module::find(std::string_view name) const {
  for (const Kernel &k : kernels)
    if (k.name == name)
      return &k;
  return nullptr;
}

Module parsePtx(std::string_view text) { return detail::Parser(text).parse(); }

} // namespace moec::ptxemu
