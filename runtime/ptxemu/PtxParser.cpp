//===- PtxParser.cpp - PTX text to decoded kernels ------------------------===//
//
// A recursive-descent parser over lexPtx's tokens for the subset of PTX that moec's NVPTX output uses
// (plus shared memory, barriers, warp votes and atomics). Registers and symbols are resolved to indices
// and labels to instruction indices here, so the interpreter never looks up a name.
//===----------------------------------------------------------------------===//
#include "Alu.h"
#include "PtxLexer.h"

#include "moec/runtime/ptxemu/Ptx.h"

#include <charconv>
#include <map>
#include <unordered_map>

namespace moec::ptxemu {

void computeReconvergence(Kernel &kernel); // ControlFlow.cpp

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

Type parseType(std::string_view s) {
  for (const NamedType &t : kTypes)
    if (s == t.name)
      return t.type;
  return Type::None;
}

struct NamedSpecial {
  const char *name;
  Special special;
};
constexpr NamedSpecial kSpecials[] = {
    {"%tid.x", Special::TidX},       {"%tid.y", Special::TidY},         {"%tid.z", Special::TidZ},
    {"%ntid.x", Special::NtidX},     {"%ntid.y", Special::NtidY},       {"%ntid.z", Special::NtidZ},
    {"%ctaid.x", Special::CtaidX},   {"%ctaid.y", Special::CtaidY},     {"%ctaid.z", Special::CtaidZ},
    {"%nctaid.x", Special::NctaidX}, {"%nctaid.y", Special::NctaidY},   {"%nctaid.z", Special::NctaidZ},
    {"%laneid", Special::LaneId},    {"%warpid", Special::WarpId},      {"%nwarpid", Special::NwarpId},
    {"%smid", Special::SmId},        {"%nsmid", Special::NsmId},        {"%lanemask_eq", Special::LanemaskEq},
    {"%lanemask_lt", Special::LanemaskLt}, {"%lanemask_le", Special::LanemaskLe},
    {"%lanemask_gt", Special::LanemaskGt}, {"%lanemask_ge", Special::LanemaskGe},
    {"%clock", Special::Clock},      {"%clock64", Special::Clock64},    {"%gridid", Special::GridId},
};

const std::map<std::string_view, Opcode> &opcodes() {
  static const std::map<std::string_view, Opcode> m = {
      {"mov", Opcode::Mov},       {"ld", Opcode::Ld},         {"st", Opcode::St},       {"cvta", Opcode::Cvta},
      {"cvt", Opcode::Cvt},       {"add", Opcode::Add},       {"sub", Opcode::Sub},     {"mul", Opcode::Mul},
      {"mad", Opcode::Mad},       {"fma", Opcode::Fma},       {"div", Opcode::Div},     {"rem", Opcode::Rem},
      {"neg", Opcode::Neg},       {"abs", Opcode::Abs},       {"min", Opcode::Min},     {"max", Opcode::Max},
      {"rcp", Opcode::Rcp},       {"sqrt", Opcode::Sqrt},     {"rsqrt", Opcode::Rsqrt}, {"ex2", Opcode::Ex2},
      {"lg2", Opcode::Lg2},       {"and", Opcode::And},       {"or", Opcode::Or},       {"xor", Opcode::Xor},
      {"not", Opcode::Not},       {"shl", Opcode::Shl},       {"shr", Opcode::Shr},     {"popc", Opcode::Popc},
      {"clz", Opcode::Clz},       {"brev", Opcode::Brev},     {"setp", Opcode::Setp},   {"selp", Opcode::Selp},
      {"prmt", Opcode::Prmt},
      {"bra", Opcode::Bra},       {"ret", Opcode::Ret},       {"exit", Opcode::Exit},   {"bar", Opcode::BarSync},
      {"barrier", Opcode::BarSync}, {"membar", Opcode::Membar}, {"fence", Opcode::Membar}, {"shfl", Opcode::Shfl},
      {"vote", Opcode::Vote},     {"activemask", Opcode::Activemask}, {"atom", Opcode::Atom}, {"red", Opcode::Red},
  };
  return m;
}

const std::map<std::string_view, Cmp> &comparisons() {
  static const std::map<std::string_view, Cmp> m = {
      {"eq", Cmp::Eq},   {"ne", Cmp::Ne},   {"lt", Cmp::Lt},   {"le", Cmp::Le},   {"gt", Cmp::Gt},
      {"ge", Cmp::Ge},   {"lo", Cmp::Lo},   {"ls", Cmp::Ls},   {"hi", Cmp::Hi},   {"hs", Cmp::Hs},
      {"equ", Cmp::Equ}, {"neu", Cmp::Neu}, {"ltu", Cmp::Ltu}, {"leu", Cmp::Leu}, {"gtu", Cmp::Gtu},
      {"geu", Cmp::Geu}, {"num", Cmp::Num}, {"nan", Cmp::Nan},
  };
  return m;
}

const std::map<std::string_view, Rounding> &roundings() {
  static const std::map<std::string_view, Rounding> m = {
      {"rn", Rounding::Rn},   {"rz", Rounding::Rz},   {"rm", Rounding::Rm},         {"rp", Rounding::Rp},
      {"rni", Rounding::Rni}, {"rzi", Rounding::Rzi}, {"rmi", Rounding::Rmi},       {"rpi", Rounding::Rpi},
      {"approx", Rounding::Approx}, {"full", Rounding::Full},
  };
  return m;
}

// Modifiers that change nothing the emulator models: cache hints, memory ordering and scope, .sync.
bool ignoredModifier(std::string_view m) {
  for (const char *s : {"nc", "ca", "cg", "cs", "lu", "cv", "wb", "wt", "volatile", "relaxed", "acquire", "release",
                        "acq_rel", "weak", "gpu", "cta", "sys", "aligned", "sync", "gl", "sc", "noftz"})
    if (m == s)
      return true;
  return false;
}

// LLVM's PTX declares a few thousand virtual registers for the largest kernels moec emits; past this a
// block's emulated register file would take gigabytes.
constexpr size_t kMaxRegisters = 1 << 16;

class Parser {
public:
  explicit Parser(std::string_view text) : toks(lexPtx(text)) {}

  Module parse() {
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

  Operand number(std::string_view t, bool negative) const {
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

  // --- declarations ---
  Symbol parseSharedDecl() {
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

  void parseParam(Kernel &k) {
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

  void threeNumbers(unsigned out[3]) {
    for (int i = 0; i < 3; ++i) {
      int64_t n = expectNumber();
      if (n < 1 || n > 1024)
        fail("a thread count out of range");
      out[i] = unsigned(n);
      if (!acceptPunct(","))
        break;
    }
  }

  Kernel parseKernel() {
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

  void addShared(Kernel &k, Symbol s) {
    if (s.size >= 0) {
      s.offset = (k.sharedBytes + s.align - 1) / s.align * s.align;
      k.sharedBytes = s.offset + s.size;
      if (k.sharedBytes > 228 * 1024)
        fail("static shared memory exceeds 228 KiB");
    }
    k.symbols.push_back(std::move(s));
  }

  void parseRegDecl(Kernel &k) {
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

  void parseBody(Kernel &k) {
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

  // --- instructions ---
  int32_t lookupReg(std::string_view name) const {
    for (auto s = scopes.rbegin(); s != scopes.rend(); ++s)
      if (auto it = s->find(std::string(name)); it != s->end())
        return it->second;
    return -1;
  }

  Operand simpleOperand(Kernel &k, bool allowLabel) {
    Operand o;
    if (acceptPunct("!")) {
      o = simpleOperand(k, false);
      if (o.kind != Operand::Kind::Reg)
        fail("'!' applies to a predicate register");
      o.negated = true;
      return o;
    }
    if (acceptPunct("-")) {
      if (!at(Token::Kind::Number))
        fail("expected a number after '-'");
      return number(next().text, true);
    }
    if (at(Token::Kind::Number))
      return number(next().text, false);
    std::string_view w = expectWord();
    if (w == "_") {
      o.kind = Operand::Kind::Sink;
      return o;
    }
    if (w[0] == '%') {
      for (const NamedSpecial &s : kSpecials)
        if (w == s.name) {
          o.kind = Operand::Kind::Special;
          o.special = s.special;
          return o;
        }
      o.reg = lookupReg(w);
      if (o.reg < 0)
        fail("undeclared register '" + std::string(w) + "'");
      o.kind = Operand::Kind::Reg;
      return o;
    }
    for (size_t i = 0; i < k.symbols.size(); ++i)
      if (k.symbols[i].name == w) {
        o.kind = Operand::Kind::Symbol;
        o.symbol = int32_t(i);
        return o;
      }
    if (allowLabel) {
      o.kind = Operand::Kind::Label;
      pendingBranches.emplace_back(int32_t(k.instrs.size()), std::make_pair(std::string(w), peek().line));
      return o;
    }
    fail("unknown name '" + std::string(w) + "'");
  }

  Operand operand(Kernel &k, bool allowLabel) {
    if (acceptPunct("[")) {
      Operand a;
      a.kind = Operand::Kind::Address;
      if (at(Token::Kind::Number)) {
        a.imm = number(next().text, false).imm;
      } else {
        Operand base = simpleOperand(k, false);
        if (base.kind == Operand::Kind::Reg)
          a.reg = base.reg;
        else if (base.kind == Operand::Kind::Symbol)
          a.symbol = base.symbol;
        else
          fail("an address is a register or a symbol, with an optional offset");
        if (atPunct("+") || atPunct("-")) {
          bool negative = next().text == "-";
          if (acceptPunct("-"))
            negative = !negative;
          if (!at(Token::Kind::Number))
            fail("expected an offset");
          a.imm = number(next().text, negative).imm;
        }
      }
      expectPunct("]");
      return a;
    }
    if (acceptPunct("{")) {
      Operand v;
      v.kind = Operand::Kind::Vector;
      do
        v.elems.push_back(simpleOperand(k, false));
      while (acceptPunct(","));
      expectPunct("}");
      if (v.elems.size() != 2 && v.elems.size() != 4)
        fail("a vector operand has 2 or 4 elements");
      return v;
    }
    Operand o = simpleOperand(k, allowLabel);
    if (acceptPunct("|")) { // setp's p|q, shfl's d|p: a pair
      Operand pair;
      pair.kind = Operand::Kind::Vector;
      pair.elems = {o, simpleOperand(k, false)};
      return pair;
    }
    return o;
  }

  Instr parseInstr(Kernel &k) {
    Instr in;
    in.line = peek().line;
    if (acceptPunct("@")) {
      bool negated = acceptPunct("!");
      Operand g = simpleOperand(k, false);
      if (g.kind != Operand::Kind::Reg || k.regs[size_t(g.reg)].type != Type::Pred)
        fail("a guard must be a predicate register");
      in.guard = g.reg;
      in.guardNegated = negated;
    }
    std::string_view full = expectWord();
    in.text = std::string(full);
    std::vector<std::string_view> parts;
    for (size_t start = 0;;) {
      size_t dot = full.find('.', start);
      parts.push_back(full.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
      if (dot == std::string_view::npos)
        break;
      start = dot + 1;
    }
    auto op = opcodes().find(parts[0]);
    if (op == opcodes().end())
      fail("unsupported instruction '" + in.text + "'");
    in.op = op->second;
    std::vector<Type> types;
    for (size_t i = 1; i < parts.size(); ++i)
      decodeModifier(in, parts[i], types);
    if (in.op == Opcode::BarSync && in.text == "bar.warp.sync")
      in.op = Opcode::WarpSync;
    else if (in.op == Opcode::BarSync && in.text != "bar.sync" && in.text.rfind("barrier.sync", 0) != 0)
      fail("unsupported barrier '" + in.text + "'");
    if (in.op == Opcode::Cvt) {
      if (types.size() != 2)
        fail("cvt needs a destination and a source type: '" + in.text + "'");
      in.type = types[0];
      in.srcType = types[1];
    } else if (types.size() > 1) {
      fail("more than one type in '" + in.text + "'");
    } else if (!types.empty()) {
      in.type = types[0];
    }
    bool branch = in.op == Opcode::Bra;
    if (!atPunct(";")) {
      do
        in.ops.push_back(operand(k, branch));
      while (acceptPunct(","));
    }
    expectPunct(";");
    validate(in);
    in.cls = classify(in);
    for (size_t i = 0; i < in.ops.size() && i < 4; ++i)
      in.operandTypes[i] = operandType(in, i);
    in.result = resultType(in);
    return in;
  }

  void decodeModifier(Instr &in, std::string_view m, std::vector<Type> &types) {
    if (Type t = parseType(m); t != Type::None) {
      types.push_back(t);
      return;
    }
    if (m == "global" || m == "shared" || m == "param" || m == "local" || m == "const") {
      in.space = m == "global" ? Space::Global : m == "shared" ? Space::Shared : m == "param" ? Space::Param
                 : m == "local" ? Space::Local : Space::Const;
      return;
    }
    bool atomic = in.op == Opcode::Atom || in.op == Opcode::Red;
    if (atomic) {
      static const std::map<std::string_view, AtomOp> ops = {{"add", AtomOp::Add}, {"min", AtomOp::Min},
                                                             {"max", AtomOp::Max}, {"exch", AtomOp::Exch},
                                                             {"cas", AtomOp::Cas}, {"and", AtomOp::And},
                                                             {"or", AtomOp::Or},   {"xor", AtomOp::Xor}};
      if (auto it = ops.find(m); it != ops.end()) {
        in.atom = it->second;
        return;
      }
    }
    if (in.op == Opcode::Setp && (m == "and" || m == "or" || m == "xor")) {
      in.combine = m == "and" ? BoolOp::And : m == "or" ? BoolOp::Or : BoolOp::Xor;
      return;
    }
    if (in.op == Opcode::Vote && (m == "ballot" || m == "any" || m == "all" || m == "uni")) {
      in.vote = m == "ballot" ? VoteMode::Ballot : m == "any" ? VoteMode::Any : m == "all" ? VoteMode::All : VoteMode::Uni;
      return;
    }
    if (in.op == Opcode::Shfl && (m == "bfly" || m == "up" || m == "down" || m == "idx")) {
      in.shfl = m == "bfly" ? ShflMode::Bfly : m == "up" ? ShflMode::Up : m == "down" ? ShflMode::Down : ShflMode::Idx;
      return;
    }
    if (in.op == Opcode::Setp)
      if (auto it = comparisons().find(m); it != comparisons().end()) {
        in.cmp = it->second;
        return;
      }
    if (auto it = roundings().find(m); it != roundings().end()) {
      in.round = it->second;
      return;
    }
    if (m == "v2" || m == "v4") {
      in.vec = uint8_t(m[1] - '0');
    } else if (m == "lo" || m == "hi" || m == "wide") {
      in.mode = m == "lo" ? MulMode::Lo : m == "hi" ? MulMode::Hi : MulMode::Wide;
    } else if (m == "ftz") {
      in.ftz = true;
    } else if (m == "sat") {
      in.sat = true;
    } else if (m == "uni" && in.op == Opcode::Bra) {
      in.uni = true;
    } else if (m == "to" && in.op == Opcode::Cvta) {
      in.toSpace = true;
    } else if (!ignoredModifier(m) && !(in.op == Opcode::Membar) && !(in.op == Opcode::BarSync) &&
               !(in.op == Opcode::WarpSync)) {
      fail("unsupported modifier '." + std::string(m) + "' in '" + in.text + "'");
    }
  }

  // Operand counts and kinds, so the interpreter can index operands without checking.
  void validate(const Instr &in) {
    auto need = [&](size_t lo, size_t hi) {
      if (in.ops.size() < lo || in.ops.size() > hi)
        fail("'" + in.text + "' takes " + std::to_string(lo) + (lo == hi ? "" : "-" + std::to_string(hi)) +
             " operands, got " + std::to_string(in.ops.size()));
    };
    auto isReg = [&](const Operand &o) { return o.kind == Operand::Kind::Reg; };
    auto destIsRegs = [&](const Operand &o) {
      if (o.kind == Operand::Kind::Vector) {
        for (const Operand &e : o.elems)
          if (!isReg(e) && e.kind != Operand::Kind::Sink)
            return false;
        return true;
      }
      return isReg(o);
    };
    auto noVector = [&](size_t from) {
      for (size_t i = from; i < in.ops.size(); ++i)
        if (in.ops[i].kind == Operand::Kind::Vector || in.ops[i].kind == Operand::Kind::Address ||
            in.ops[i].kind == Operand::Kind::Sink || in.ops[i].kind == Operand::Kind::Label)
          fail("unexpected operand in '" + in.text + "'");
    };
    auto needType = [&] {
      if (in.type == Type::None)
        fail("'" + in.text + "' needs a type");
    };
    switch (in.op) {
    case Opcode::Bra:
      need(1, 1);
      if (in.ops[0].kind != Operand::Kind::Label)
        fail("bra takes a label");
      return;
    case Opcode::Ret: case Opcode::Exit: case Opcode::Membar:
      need(0, 0);
      return;
    case Opcode::BarSync:
      need(1, 2);
      noVector(0);
      return;
    case Opcode::WarpSync:
      need(1, 1);
      noVector(0);
      return;
    case Opcode::Ld:
      needType();
      need(2, 2);
      if (!destIsRegs(in.ops[0]) || in.ops[1].kind != Operand::Kind::Address)
        fail("ld takes a destination and an address");
      if ((in.ops[0].kind == Operand::Kind::Vector) != (in.vec > 1) ||
          (in.vec > 1 && in.ops[0].elems.size() != in.vec))
        fail("ld's destination does not match its vector width");
      return;
    case Opcode::St:
      needType();
      need(2, 2);
      if (in.ops[0].kind != Operand::Kind::Address)
        fail("st takes an address and a value");
      if ((in.ops[1].kind == Operand::Kind::Vector) != (in.vec > 1) ||
          (in.vec > 1 && in.ops[1].elems.size() != in.vec))
        fail("st's value does not match its vector width");
      if (in.space == Space::Param || in.space == Space::Const)
        fail("st to the ." + std::string(in.space == Space::Param ? "param" : "const") + " space");
      return;
    case Opcode::Mov:
      needType();
      need(2, 2);
      if (!destIsRegs(in.ops[0]))
        fail("mov's destination must be registers");
      if (in.ops[0].kind == Operand::Kind::Vector && in.ops[1].kind == Operand::Kind::Vector)
        fail("mov between two vectors");
      return;
    case Opcode::Setp:
      needType();
      if (in.cmp == Cmp::None)
        fail("setp needs a comparison");
      need(in.combine == BoolOp::None ? 3 : 4, in.combine == BoolOp::None ? 3 : 4);
      if (!destIsRegs(in.ops[0]))
        fail("setp's destination must be predicates");
      noVector(1);
      return;
    case Opcode::Shfl:
      needType();
      if (in.shfl == ShflMode::None)
        fail("shfl needs a mode");
      if (in.text.find(".sync") == std::string::npos)
        fail("shfl without .sync is not supported (sm_70+ requires shfl.sync)");
      need(5, 5);
      if (!destIsRegs(in.ops[0]))
        fail("shfl's destination must be registers");
      noVector(1);
      return;
    case Opcode::Vote:
      if (in.vote == VoteMode::None)
        fail("vote needs a mode");
      need(3, 3);
      if (!isReg(in.ops[0]))
        fail("vote's destination must be a register");
      noVector(1);
      return;
    case Opcode::Activemask:
      need(1, 1);
      if (!isReg(in.ops[0]))
        fail("activemask's destination must be a register");
      return;
    case Opcode::Atom: case Opcode::Red: {
      needType();
      if (in.atom == AtomOp::None)
        fail("'" + in.text + "' needs an operation");
      size_t first = in.op == Opcode::Atom ? 1 : 0;
      size_t n = first + 2 + (in.atom == AtomOp::Cas ? 1 : 0);
      need(n, n);
      if (in.op == Opcode::Atom && !isReg(in.ops[0]))
        fail("atom's destination must be a register");
      if (in.ops[first].kind != Operand::Kind::Address)
        fail("'" + in.text + "' takes an address");
      noVector(first + 1);
      return;
    }
    default:
      break;
    }
    needType();
    size_t arity = 3;
    switch (in.op) {
    case Opcode::Cvta: case Opcode::Cvt: case Opcode::Neg: case Opcode::Abs: case Opcode::Not: case Opcode::Popc:
    case Opcode::Clz: case Opcode::Brev: case Opcode::Rcp: case Opcode::Sqrt: case Opcode::Rsqrt: case Opcode::Ex2:
    case Opcode::Lg2:
      arity = 2;
      break;
    case Opcode::Mad: case Opcode::Fma: case Opcode::Selp: case Opcode::Prmt:
      arity = 4;
      break;
    default:
      break;
    }
    if (in.op == Opcode::Cvt && (in.type == Type::F16x2 || in.type == Type::BF16x2))
      arity = 3; // cvt.rn.bf16x2.f32 d, a, b
    need(arity, arity);
    if (!isReg(in.ops[0]))
      fail("the destination of '" + in.text + "' must be a register");
    noVector(1);
  }

  static InstrClass classify(const Instr &in) {
    switch (in.op) {
    case Opcode::Mov: case Opcode::Cvta: return InstrClass::Move;
    case Opcode::Ld: case Opcode::St: case Opcode::Atom: case Opcode::Red:
      if (in.space == Space::Param)
        return InstrClass::Move;
      return in.space == Space::Shared ? InstrClass::SharedMemory : InstrClass::GlobalMemory;
    case Opcode::Cvt: return InstrClass::Convert;
    case Opcode::Setp: case Opcode::Selp: return InstrClass::Compare;
    case Opcode::Bra: case Opcode::Ret: case Opcode::Exit: case Opcode::BarSync: case Opcode::Membar:
    case Opcode::WarpSync:
      return InstrClass::Control;
    case Opcode::Shfl: case Opcode::Vote: case Opcode::Activemask: return InstrClass::Warp;
    default:
      return isFloat(in.type) || in.type == Type::F16x2 || in.type == Type::BF16x2 ? InstrClass::Float
                                                                                   : InstrClass::Integer;
    }
  }

  std::vector<Token> toks;
  size_t pos = 0;
  std::vector<Symbol> moduleShared;
  std::vector<std::unordered_map<std::string, int32_t>> scopes;
  std::map<std::string, int32_t, std::less<>> labels;
  std::vector<std::pair<int32_t, std::pair<std::string, int32_t>>> pendingBranches; // instr, (label, line)
};

} // namespace

const char *typeName(Type t) {
  for (const NamedType &n : kTypes)
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

Module parsePtx(std::string_view text) { return Parser(text).parse(); }

} // namespace moec::ptxemu
