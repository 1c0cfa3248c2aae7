//===- IssueTiming.cpp - The warps' timelines: when each instruction issues ---===//
//
// The latency model of the emulator's profile (warpCycles): each warp's instructions on a timeline, an
// instruction issuing once its operands are ready, the way ptxas schedules a basic block (see issueTimed).
//===----------------------------------------------------------------------===//
#include "BlockRunner.h"

#include <algorithm>

namespace moec::ptxemu::detail {

namespace {

/// Cycles from `in`'s issue to its result.
uint64_t resultLatency(const Instr &in) {
  switch (in.op) {
  case Opcode::Ld:
  case Opcode::Atom:
    return in.space == Space::Shared ? kSharedLoadCycles : in.space == Space::Param ? kAluCycles : kGlobalLoadCycles;
  case Opcode::Shfl:
  case Opcode::Vote:
    return kWarpOpCycles;
  default:
    return kAluCycles;
  }
}

/// 64-bit integer arithmetic: two instructions of the 32-bit pipes in SASS.
bool wideInteger(const Instr &in) {
  switch (in.op) {
  case Opcode::Add:
  case Opcode::Sub:
  case Opcode::Mul:
  case Opcode::Mad:
  case Opcode::Shl:
  case Opcode::Shr:
  case Opcode::And:
  case Opcode::Or:
  case Opcode::Xor:
  case Opcode::Setp:
  case Opcode::Selp:
  case Opcode::Min:
  case Opcode::Max:
  case Opcode::Neg:
    return in.type == Type::S64 || in.type == Type::U64 || in.type == Type::B64;
  default:
    return false;
  }
}

/// Whether ops[0] is a result the instruction writes (stores, reductions and control read every operand).
bool writesFirstOperand(const Instr &in) {
  switch (in.op) {
  case Opcode::St:
  case Opcode::Red:
  case Opcode::Bra:
  case Opcode::Ret:
  case Opcode::Exit:
  case Opcode::BarSync:
  case Opcode::WarpSync:
  case Opcode::Membar:
    return false;
  default:
    return true;
  }
}

template <typename F> void forEachRegister(const Operand &o, F f) {
  if ((o.kind == Operand::Kind::Reg || o.kind == Operand::Kind::Address) && o.reg >= 0)
    f(o.reg);
  for (const Operand &e : o.elems)
    forEachRegister(e, f);
}

} // namespace

void issueTimed(Warp &w, const Instr &in) {
  uint64_t start = w.blockStart;
  auto waitFor = [&](int32_t reg) { start = std::max(start, w.ready[size_t(reg)]); };
  if (in.guard >= 0)
    waitFor(in.guard);
  const bool writes = writesFirstOperand(in);
  for (size_t i = writes ? 1 : 0; i < in.ops.size(); ++i)
    forEachRegister(in.ops[i], waitFor);
  w.blockIssued += wideInteger(in) ? 2 : 1;
  const bool endsBlock =
      in.op == Opcode::Bra || in.op == Opcode::Ret || in.op == Opcode::Exit || in.op == Opcode::BarSync;
  if (endsBlock) {
    start = std::max(start, w.cycles());
    w.blockStart = w.blockEnd = start + 1 + kBranchCycles;
    w.blockIssued = 0;
  } else {
    w.blockEnd = std::max(w.blockEnd, start);
  }
  if (writes && !in.ops.empty() && in.ops[0].kind != Operand::Kind::Address)
    forEachRegister(in.ops[0], [&](int32_t reg) { w.ready[size_t(reg)] = start + resultLatency(in); });
}

} // namespace moec::ptxemu::detail
