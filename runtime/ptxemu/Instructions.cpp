//===- Instructions.cpp - Warp-wide and per-lane instructions --------------===//
//
// BlockRunner's instructions other than control flow and memory: the warp-wide shfl.sync and vote.sync (whose
// member masks must name exactly the executing lanes), and mov (with vector packing and unpacking), setp and
// the ALU's arithmetic, each lane at a time.
//===----------------------------------------------------------------------===//
#include "Alu.h"
#include "BlockRunner.h"

namespace moec::ptxemu::detail {

uint32_t BlockRunner::memberMask(const Warp &w, const Instr &in, const Operand &maskOp, uint32_t exec) const {
  uint32_t members = 0;
  bool first = true;
  for (int lane = 0; lane < 32; ++lane) {
    if (!((exec >> lane) & 1))
      continue;
    uint32_t m = uint32_t(read(w, lane, maskOp, Type::B32, in));
    if (!first && m != members)
      fault(CUDA_ERROR_ILLEGAL_INSTRUCTION, w, lane, in, "lanes of one warp pass different member masks");
    members = m;
    first = false;
    if (!((m >> lane) & 1))
      fault(CUDA_ERROR_ILLEGAL_INSTRUCTION, w, lane, in, "the executing lane is not in the member mask " + hex(m));
  }
  if (members & ~exec) {
    int lane = __builtin_ctz(exec);
    fault(CUDA_ERROR_ILLEGAL_INSTRUCTION, w, lane, in,
          "member mask " + hex(members) + " names lanes " + hex(members & ~exec) +
              " that are not executing it (exited, diverged or predicated off): the warp has not converged");
  }
  return members;
}

void BlockRunner::shuffle(Warp &w, const Instr &in, uint32_t exec) {
  uint32_t members = memberMask(w, in, in.ops[4], exec);
  const Operand &dest = in.ops[0];
  int32_t dReg = dest.kind == Operand::Kind::Vector ? dest.elems[0].reg : dest.reg;
  int32_t pReg = dest.kind == Operand::Kind::Vector && dest.elems[1].kind == Operand::Kind::Reg ? dest.elems[1].reg : -1;
  uint64_t src[32];
  bool have[32] = {};
  for (int lane = 0; lane < 32; ++lane)
    if ((exec >> lane) & 1) {
      src[lane] = read(w, lane, in.ops[1], Type::B32, in);
      have[lane] = true;
    }
  for (int lane = 0; lane < 32; ++lane) {
    if (!((exec >> lane) & 1))
      continue;
    int b = int(read(w, lane, in.ops[2], Type::B32, in) & 31);
    uint32_t c = uint32_t(read(w, lane, in.ops[3], Type::B32, in));
    int cval = int(c & 31), segmask = int((c >> 8) & 31);
    int maxLane = (lane & segmask) | (cval & ~segmask), minLane = lane & segmask;
    int j = lane;
    bool pval = false;
    switch (in.shfl) {
    case ShflMode::Up: j = lane - b; pval = j >= maxLane; break;
    case ShflMode::Down: j = lane + b; pval = j <= maxLane; break;
    case ShflMode::Bfly: j = lane ^ b; pval = j <= maxLane; break;
    default: j = minLane | (b & ~segmask); pval = j <= maxLane; break;
    }
    if (!pval)
      j = lane;
    if (j < 0 || j > 31 || !have[j] || !((members >> j) & 1)) {
      // The source lane is not a member: the PTX ISA leaves the value undefined. The register stays
      // unwritten, so a later read of it is reported.
      w.init[size_t(dReg)] &= ~(1u << lane);
    } else {
      write(w, lane, dReg, src[j], Type::B32);
    }
    if (pReg >= 0)
      write(w, lane, pReg, pval, Type::Pred);
  }
}

void BlockRunner::vote(Warp &w, const Instr &in, uint32_t exec) {
  uint32_t members = memberMask(w, in, in.ops[2], exec);
  uint32_t ballot = 0;
  for (int lane = 0; lane < 32; ++lane)
    if ((exec >> lane) & 1 && read(w, lane, in.ops[1], Type::Pred, in))
      ballot |= 1u << lane;
  ballot &= members;
  for (int lane = 0; lane < 32; ++lane) {
    if (!((exec >> lane) & 1))
      continue;
    uint64_t v = in.vote == VoteMode::Ballot ? ballot
                 : in.vote == VoteMode::Any  ? ballot != 0
                 : in.vote == VoteMode::All  ? ballot == members
                                             : (ballot == 0 || ballot == members);
    write(w, lane, in.ops[0].reg, v, in.vote == VoteMode::Ballot ? Type::B32 : Type::Pred);
  }
}

void BlockRunner::mov(Warp &w, const Instr &in, uint32_t exec) {
  const Operand &d = in.ops[0], &s = in.ops[1];
  const int bytes = typeBytes(in.type);
  for (int lane = 0; lane < 32; ++lane) {
    if (!((exec >> lane) & 1))
      continue;
    if (d.kind == Operand::Kind::Vector) { // unpack, low element first
      uint64_t v = read(w, lane, s, in.type, in);
      int part = bytes / int(d.elems.size());
      for (size_t i = 0; i < d.elems.size(); ++i)
        if (d.elems[i].kind == Operand::Kind::Reg)
          write(w, lane, d.elems[i].reg, narrow(v >> (8 * part * int(i)), part, false), Type::U64);
    } else if (s.kind == Operand::Kind::Vector) { // pack
      int part = bytes / int(s.elems.size());
      Type pt = part == 1 ? Type::B8 : part == 2 ? Type::B16 : Type::B32;
      uint64_t v = 0;
      for (size_t i = 0; i < s.elems.size(); ++i)
        v |= read(w, lane, s.elems[i], pt, in) << (8 * part * int(i));
      write(w, lane, d.reg, v, in.type);
    } else {
      write(w, lane, d.reg, read(w, lane, s, in.type, in), in.type);
    }
  }
}

void BlockRunner::setp(Warp &w, const Instr &in, uint32_t exec) {
  const Operand &d = in.ops[0];
  for (int lane = 0; lane < 32; ++lane) {
    if (!((exec >> lane) & 1))
      continue;
    bool r;
    try {
      r = compare(in, read(w, lane, in.ops[1], in.type, in), read(w, lane, in.ops[2], in.type, in));
    } catch (const LaneFault &f) {
      fault(f.code, w, lane, in, f.message);
    }
    bool p = r, q = !r;
    if (in.combine != BoolOp::None) {
      bool c = read(w, lane, in.ops[3], Type::Pred, in);
      auto combine = [&](bool x) {
        return in.combine == BoolOp::And ? (x && c) : in.combine == BoolOp::Or ? (x || c) : (x != c);
      };
      p = combine(r);
      q = combine(!r);
    }
    if (d.kind == Operand::Kind::Vector) {
      if (d.elems[0].kind == Operand::Kind::Reg)
        write(w, lane, d.elems[0].reg, p, Type::Pred);
      if (d.elems[1].kind == Operand::Kind::Reg)
        write(w, lane, d.elems[1].reg, q, Type::Pred);
    } else {
      write(w, lane, d.reg, p, Type::Pred);
    }
  }
}

void BlockRunner::alu(Warp &w, const Instr &in, uint32_t exec) {
  const size_t n = in.ops.size();
  const Type result = in.result;
  for (int lane = 0; lane < 32; ++lane) {
    if (!((exec >> lane) & 1))
      continue;
    uint64_t a = read(w, lane, in.ops[1], in.operandTypes[1], in);
    uint64_t b = n > 2 ? read(w, lane, in.ops[2], in.operandTypes[2], in) : 0;
    uint64_t c = n > 3 ? read(w, lane, in.ops[3], in.operandTypes[3], in) : 0;
    uint64_t d;
    try {
      d = evaluate(in, a, b, c);
    } catch (const LaneFault &f) {
      fault(f.code, w, lane, in, f.message);
    }
    if (in.op == Opcode::Cvta && in.space == Space::Shared)
      d = in.toSpace ? d - kSharedWindow : d + kSharedWindow;
    write(w, lane, in.ops[0].reg, d, result);
  }
}

} // namespace moec::ptxemu::detail
