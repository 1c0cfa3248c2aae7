//===- BlockRunner.h - One block's warps over decoded PTX (private) -*- C++ -*-===//
//
// The state of an emulated block (its warps, their reconvergence stacks and registers, its shared memory)
// and the BlockRunner that launchKernel runs each block with: a lane's operands here (inline, as the
// instructions read and write them), its warps in lockstep in Execute.cpp, loads, stores and atomics in
// MemoryAccess.cpp, the other instructions in Instructions.cpp, and the warps' timelines in IssueTiming.cpp.
//===----------------------------------------------------------------------===//
#pragma once

#include "Alu.h"

#include "moec/runtime/ptxemu/Emulator.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace moec::ptxemu::detail {

constexpr uint64_t kSharedWindow = uint64_t(0xFE) << 48; // generic addresses of the block's shared memory

struct Frame {
  int32_t pc;
  uint32_t mask;
  int32_t reconverge; // pop when pc reaches this (-1: never)
};

struct Warp {
  unsigned index = 0;
  uint32_t lanes = 0;  // lanes that exist (the last warp of a block may be partial)
  uint32_t exited = 0;
  bool atBarrier = false;
  std::vector<Frame> stack;
  std::vector<uint64_t> regs; // reg * 32 + lane
  std::vector<uint32_t> init; // per register: the lanes that have written it
  unsigned tid[32][3] = {};
  // The latency model (issueTimed): the warp's current basic block began at blockStart and has issued
  // blockIssued instructions, the last of them by blockEnd; per register, the cycle its value is ready.
  uint64_t blockStart = 0, blockEnd = 0, blockIssued = 0;
  std::vector<uint64_t> ready;
  uint64_t cycles() const { return std::max(blockEnd, blockStart + blockIssued); }
};

/// Issues `in` on the warp's timeline. Inside a basic block an instruction issues as soon as its operands
/// are ready, the way ptxas schedules a block (independent loads back to back, each use as late as it can),
/// and the block takes at least one cycle per instruction (two for 64-bit integer arithmetic). A branch ends
/// the block once everything in it has issued, and the next block starts kBranchCycles later. Loads stay in
/// flight across branches; a value used in the block that loads it is waited for there (B2's gathers, each
/// used inside its bounds check's branch, ran one at a time on the H200: bench/gpu/RESULTS.md).
void issueTimed(Warp &w, const Instr &in);

/// `v` in hex, "0x..." (fault messages).
std::string hex(uint64_t v);

struct Access {
  uint64_t address;
  uint32_t bytes;
};

class BlockRunner {
public:
  BlockRunner(const Kernel &k, Dim3 grid, Dim3 block, const std::vector<uint8_t> &params, uint64_t sharedBytes,
              DeviceMemory &memory, Profile &profile, uint64_t budget)
      : k(k), grid(grid), block(block), params(params), shared(sharedBytes), memory(memory), profile(profile),
        budget(budget) {
    unsigned threads = unsigned(block.count());
    warps.resize((threads + 31) / 32);
    for (unsigned w = 0; w < warps.size(); ++w) {
      Warp &warp = warps[w];
      warp.index = w;
      warp.regs.resize(k.regs.size() * 32);
      warp.init.resize(k.regs.size());
      warp.ready.resize(k.regs.size());
      for (unsigned lane = 0; lane < 32; ++lane) {
        unsigned t = w * 32 + lane;
        if (t >= threads)
          break;
        warp.lanes |= 1u << lane;
        warp.tid[lane][0] = t % block.x;
        warp.tid[lane][1] = (t / block.x) % block.y;
        warp.tid[lane][2] = t / (block.x * block.y);
      }
    }
  }

  void run(unsigned bx, unsigned by, unsigned bz);

private:
  // --- faults ---
  [[noreturn]] void fault(CUresult code, const Warp &w, int lane, const Instr &in, const std::string &what) const;

  // --- operands ---
  uint64_t special(const Warp &w, int lane, Special s) const {
    switch (s) {
    case Special::TidX: return w.tid[lane][0];
    case Special::TidY: return w.tid[lane][1];
    case Special::TidZ: return w.tid[lane][2];
    case Special::NtidX: return block.x;
    case Special::NtidY: return block.y;
    case Special::NtidZ: return block.z;
    case Special::CtaidX: return ctaid[0];
    case Special::CtaidY: return ctaid[1];
    case Special::CtaidZ: return ctaid[2];
    case Special::NctaidX: return grid.x;
    case Special::NctaidY: return grid.y;
    case Special::NctaidZ: return grid.z;
    case Special::LaneId: return unsigned(lane);
    case Special::WarpId: return w.index;
    case Special::NwarpId: return 64;
    case Special::SmId: return 0;
    case Special::NsmId: return 132;
    case Special::LanemaskEq: return 1u << lane;
    case Special::LanemaskLt: return (1u << lane) - 1;
    case Special::LanemaskLe: return uint32_t((uint64_t(2) << lane) - 1);
    case Special::LanemaskGt: return ~uint32_t((uint64_t(2) << lane) - 1);
    case Special::LanemaskGe: return ~((1u << lane) - 1);
    case Special::Clock: return uint32_t(issued);
    case Special::Clock64: return issued;
    case Special::GridId: return 0;
    }
    return 0;
  }

  uint64_t readReg(const Warp &w, int lane, int32_t reg, const Instr &in) const {
    if (!((w.init[size_t(reg)] >> lane) & 1))
      fault(CUDA_ERROR_ILLEGAL_INSTRUCTION, w, lane, in,
            "reads " + k.regs[size_t(reg)].name + ", which no instruction has written in this thread");
    return w.regs[size_t(reg) * 32 + size_t(lane)];
  }

  /// Operand bits as type t reads them: narrowed to t, signed types sign-extended; literals converted.
  uint64_t read(const Warp &w, int lane, const Operand &o, Type t, const Instr &in) const {
    const int bytes = t == Type::None ? 8 : typeBytes(t);
    switch (o.kind) {
    case Operand::Kind::Reg: {
      uint64_t v = readReg(w, lane, o.reg, in);
      if (k.regs[size_t(o.reg)].type == Type::Pred || t == Type::Pred)
        return o.negated ? !(v & 1) : (v & 1);
      return narrow(v, bytes, isSigned(t));
    }
    case Operand::Kind::Imm: {
      if (isFloat(t) && o.floatBytes && o.floatBytes != bytes) { // 0f literal with an f64 op, and back
        Instr cvt;
        cvt.op = Opcode::Cvt;
        cvt.type = t;
        cvt.srcType = o.floatBytes == 4 ? Type::F32 : Type::F64;
        return evaluate(cvt, uint64_t(o.imm), 0, 0);
      }
      if (isFloat(t) && !o.floatBytes) { // an integer literal with a float type: its value
        Instr cvt;
        cvt.op = Opcode::Cvt;
        cvt.type = t;
        cvt.srcType = Type::S64;
        return evaluate(cvt, uint64_t(o.imm), 0, 0);
      }
      return narrow(uint64_t(o.imm), bytes, isSigned(t));
    }
    case Operand::Kind::Special:
      return narrow(special(w, lane, o.special), bytes, false);
    case Operand::Kind::Symbol: {
      const Symbol &s = k.symbols[size_t(o.symbol)];
      if (s.kind != Symbol::Kind::Shared)
        fault(CUDA_ERROR_ILLEGAL_INSTRUCTION, w, lane, in, "the address of parameter '" + s.name + "' is not supported");
      return uint64_t(s.offset);
    }
    default:
      fault(CUDA_ERROR_ILLEGAL_INSTRUCTION, w, lane, in, "unexpected operand");
    }
  }

  void write(Warp &w, int lane, int32_t reg, uint64_t value, Type t) {
    const Register &r = k.regs[size_t(reg)];
    if (r.type == Type::Pred)
      value &= 1;
    else
      value = narrow(narrow(value, typeBytes(t), isSigned(t)), r.bytes, false);
    w.regs[size_t(reg) * 32 + size_t(lane)] = value;
    w.init[size_t(reg)] |= 1u << lane;
  }

  // --- memory ---
  uint64_t address(const Warp &w, int lane, const Operand &a, const Instr &in) const {
    uint64_t base = 0;
    if (a.reg >= 0)
      base = readReg(w, lane, a.reg, in);
    else if (a.symbol >= 0)
      base = uint64_t(k.symbols[size_t(a.symbol)].offset);
    return base + uint64_t(a.imm);
  }

  /// Host memory for an access of `bytes` at `addr` in the instruction's space; faults when outside.
  uint8_t *locate(const Warp &w, int lane, const Instr &in, uint64_t addr, uint32_t bytes, bool isStore);

  void countGlobal(const std::vector<Access> &accesses, bool isStore);

  void loadStore(Warp &w, const Instr &in, uint32_t exec);

  void atomic(Warp &w, const Instr &in, uint32_t exec);

  // --- warp-wide instructions ---
  /// shfl.sync / vote.sync: every executing lane is in its member mask, and every member executes it.
  uint32_t memberMask(const Warp &w, const Instr &in, const Operand &maskOp, uint32_t exec) const;

  void shuffle(Warp &w, const Instr &in, uint32_t exec);

  void vote(Warp &w, const Instr &in, uint32_t exec);

  void mov(Warp &w, const Instr &in, uint32_t exec);

  void setp(Warp &w, const Instr &in, uint32_t exec);

  void alu(Warp &w, const Instr &in, uint32_t exec);

  /// Lanes of `active` whose guard predicate holds.
  uint32_t guarded(const Warp &w, const Instr &in, uint32_t active) const;

  void runWarp(Warp &w);

  const Kernel &k;
  Dim3 grid, block;
  const std::vector<uint8_t> &params;
  std::vector<uint8_t> shared;
  DeviceMemory &memory;
  Profile &profile;
  const uint64_t budget;
  std::vector<Warp> warps;
  std::vector<Access> accesses;
  unsigned ctaid[3] = {0, 0, 0};

public:
  uint64_t issued = 0;
};

} // namespace moec::ptxemu::detail
