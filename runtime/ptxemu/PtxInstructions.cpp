//===- PtxInstructions.cpp - PTX instructions and their operands, decoded ---===//
//
// The Parser's instructions: the opcode and its modifiers (types, comparison, rounding, space, vector width,
// shuffle and vote modes; cache hints and memory ordering ignored), and the operands: registers, literals,
// special registers, addresses, vectors and labels, resolved to indices.
//===----------------------------------------------------------------------===//
#include "Alu.h"
#include "PtxParserInternal.h"

#include <charconv>

namespace moec::ptxemu::detail {

namespace {

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

} // namespace

int32_t Parser::lookupReg(std::string_view name) const {
  for (auto s = scopes.rbegin(); s != scopes.rend(); ++s)
    if (auto it = s->find(std::string(name)); it != s->end())
      return it->second;
  return -1;
}

Operand Parser::simpleOperand(Kernel &k, bool allowLabel) {
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

Operand Parser::operand(Kernel &k, bool allowLabel) {
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

Instr Parser::parseInstr(Kernel &k) {
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

void Parser::decodeModifier(Instr &in, std::string_view m, std::vector<Type> &types) {
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

} // namespace moec::ptxemu::detail
