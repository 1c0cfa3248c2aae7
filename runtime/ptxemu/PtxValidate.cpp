//===- PtxValidate.cpp - The operands each decoded instruction may have ----===//
//
// The Parser's checks of a decoded instruction: its operand counts and kinds, so that the interpreter can
// index operands without checking, and its class (InstrClass) for the profile.
//===----------------------------------------------------------------------===//
#include "Alu.h"
#include "PtxParserInternal.h"

namespace moec::ptxemu::detail {

void Parser::validate(const Instr &in) {
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

InstrClass Parser::classify(const Instr &in) {
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

} // namespace moec::ptxemu::detail
