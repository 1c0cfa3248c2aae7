//===- Execute.cpp - Warps in lockstep over decoded PTX -------------------===//
//
// Blocks run one after another; inside a block each warp runs until it reaches a barrier or ends, and a
// barrier releases once every warp that has not ended waits at it. A warp is 32 lanes under an active
// mask with a reconvergence stack: a divergent branch parks a frame at its immediate post-dominator, runs
// the taken lanes, then the others, and both meet there again. Every register read checks the lane's
// initialized bit; every memory access is checked against the allocations (global), the block's shared
// window or the parameter buffer, and against its natural alignment.
//===----------------------------------------------------------------------===//
#include "Alu.h"

#include "moec/runtime/ptxemu/Emulator.h"

#include <algorithm>
#include <cstring>

namespace moec::ptxemu {

namespace {

constexpr uint64_t kSharedWindow = uint64_t(0xFE) << 48; // generic addresses of the block's shared memory
constexpr int32_t kExitPc = INT32_MAX;

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

/// Issues `in` on the warp's timeline. Inside a basic block an instruction issues as soon as its operands
/// are ready, the way ptxas schedules a block (independent loads back to back, each use as late as it can),
/// and the block takes at least one cycle per instruction (two for 64-bit integer arithmetic). A branch ends
/// the block once everything in it has issued, and the next block starts kBranchCycles later. Loads stay in
/// flight across branches; a value used in the block that loads it is waited for there (B2's gathers, each
/// used inside its bounds check's branch, ran one at a time on the H200: bench/gpu/RESULTS.md).
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

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%llx", (unsigned long long)v);
  return b;
}

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

  void run(unsigned bx, unsigned by, unsigned bz) {
    ctaid[0] = bx, ctaid[1] = by, ctaid[2] = bz;
    std::fill(shared.begin(), shared.end(), 0);
    for (Warp &w : warps) {
      w.exited = 0;
      w.atBarrier = false;
      std::fill(w.init.begin(), w.init.end(), 0);
      w.stack.assign(1, Frame{0, w.lanes, -1});
      w.blockStart = w.blockEnd = w.blockIssued = 0;
      std::fill(w.ready.begin(), w.ready.end(), 0);
    }
    for (;;) {
      for (Warp &w : warps)
        if (!w.stack.empty() && !w.atBarrier)
          runWarp(w);
      bool waiting = false;
      for (Warp &w : warps)
        waiting |= w.atBarrier;
      if (!waiting)
        break;
      uint64_t release = 0;
      for (const Warp &w : warps)
        release = std::max(release, w.cycles());
      for (Warp &w : warps) { // every warp still running waits here: release the barrier
        w.atBarrier = false;
        if (!w.stack.empty()) { // it resumes when the last one arrives; one that ended keeps its cycles
          w.blockStart = w.blockEnd = release;
          w.blockIssued = 0;
        }
      }
    }
    for (const Warp &w : warps)
      profile.warpCycles += double(w.cycles());
  }

private:
  // --- faults ---
  [[noreturn]] void fault(CUresult code, const Warp &w, int lane, const Instr &in, const std::string &what) const {
    char where[256];
    std::snprintf(where, sizeof where, "%s: PTX line %d ('%s'): block (%u,%u,%u), thread (%u,%u,%u): ", k.name.c_str(),
                  in.line, in.text.c_str(), ctaid[0], ctaid[1], ctaid[2], w.tid[lane][0], w.tid[lane][1],
                  w.tid[lane][2]);
    throw EmuFault(code, where + what);
  }

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
  uint8_t *locate(const Warp &w, int lane, const Instr &in, uint64_t addr, uint32_t bytes, bool isStore) {
    auto what = [&] { return std::to_string(bytes) + "-byte " + (isStore ? "store" : "load"); };
    Space space = in.space;
    if (space == Space::None && addr >= kSharedWindow && addr - kSharedWindow < (uint64_t(1) << 32)) {
      space = Space::Shared;
      addr -= kSharedWindow;
    }
    if (addr % bytes != 0)
      fault(CUDA_ERROR_MISALIGNED_ADDRESS, w, lane, in,
            what() + " at " + hex(addr) + " is not aligned to " + std::to_string(bytes) + " bytes");
    if (space == Space::Param) {
      if (addr > params.size() || bytes > params.size() - addr)
        fault(CUDA_ERROR_ILLEGAL_ADDRESS, w, lane, in,
              what() + " at parameter offset " + std::to_string(addr) + " is past the parameters");
      return const_cast<uint8_t *>(params.data()) + addr;
    }
    if (space == Space::Shared) {
      if (addr > shared.size() || bytes > shared.size() - addr)
        fault(CUDA_ERROR_ILLEGAL_ADDRESS, w, lane, in,
              what() + " at shared offset " + hex(addr) + " is outside the block's " + std::to_string(shared.size()) +
                  " bytes of shared memory");
      return shared.data() + addr;
    }
    if (space == Space::Local || space == Space::Const)
      fault(CUDA_ERROR_ILLEGAL_INSTRUCTION, w, lane, in, "local and const memory are not supported");
    uint8_t *p = memory.find(addr, bytes);
    if (!p)
      fault(CUDA_ERROR_ILLEGAL_ADDRESS, w, lane, in, what() + " at " + hex(addr) + " is outside every allocation");
    return p;
  }

  void countGlobal(const std::vector<Access> &accesses, bool isStore) {
    if (accesses.empty())
      return;
    uint64_t sectors[128];
    size_t n = 0;
    for (const Access &a : accesses)
      for (uint64_t s = a.address / 32; s <= (a.address + a.bytes - 1) / 32 && n < 128; ++s)
        sectors[n++] = s;
    std::sort(sectors, sectors + n);
    size_t unique = size_t(std::unique(sectors, sectors + n) - sectors);
    std::vector<Access> sorted = accesses;
    std::sort(sorted.begin(), sorted.end(), [](const Access &a, const Access &b) { return a.address < b.address; });
    uint64_t useful = 0, end = 0;
    for (const Access &a : sorted) {
      uint64_t from = std::max(a.address, end), to = a.address + a.bytes;
      if (to > from)
        useful += to - from;
      end = std::max(end, to);
    }
    (isStore ? profile.globalStoreRequests : profile.globalLoadRequests) += 1;
    (isStore ? profile.storeSectors : profile.loadSectors) += double(unique);
    (isStore ? profile.storeBytes : profile.loadBytes) += double(useful);
  }

  void loadStore(Warp &w, const Instr &in, uint32_t exec) {
    const bool isStore = in.op == Opcode::St;
    const Operand &addrOp = in.ops[isStore ? 0 : 1];
    const Operand &data = in.ops[isStore ? 1 : 0];
    const uint32_t elem = uint32_t(typeBytes(in.type)), bytes = elem * in.vec;
    const bool global = in.space == Space::Global || in.space == Space::None;
    accesses.clear();
    for (int lane = 0; lane < 32; ++lane) {
      if (!((exec >> lane) & 1))
        continue;
      uint64_t addr = address(w, lane, addrOp, in);
      uint8_t *p = locate(w, lane, in, addr, bytes, isStore);
      if (global && !(in.space == Space::None && addr >= kSharedWindow))
        accesses.push_back({addr, bytes});
      for (unsigned i = 0; i < in.vec; ++i) {
        const Operand &e = in.vec > 1 ? data.elems[i] : data;
        if (isStore) {
          uint64_t v = read(w, lane, e, in.type, in);
          std::memcpy(p + i * elem, &v, elem); // little-endian host: the low bytes
        } else if (e.kind == Operand::Kind::Reg) {
          uint64_t v = 0;
          std::memcpy(&v, p + i * elem, elem);
          write(w, lane, e.reg, narrow(v, int(elem), isSigned(in.type)), isSigned(in.type) ? Type::S64 : Type::U64);
        }
      }
    }
    if (global && in.space != Space::Param)
      countGlobal(accesses, isStore);
  }

  void atomic(Warp &w, const Instr &in, uint32_t exec) {
    const bool returns = in.op == Opcode::Atom;
    const size_t first = returns ? 1 : 0;
    const uint32_t bytes = uint32_t(typeBytes(in.type));
    accesses.clear();
    for (int lane = 0; lane < 32; ++lane) { // lanes in order: each update is atomic
      if (!((exec >> lane) & 1))
        continue;
      uint64_t addr = address(w, lane, in.ops[first], in);
      uint8_t *p = locate(w, lane, in, addr, bytes, true);
      if (in.space != Space::Shared)
        accesses.push_back({addr, bytes});
      uint64_t a = read(w, lane, in.ops[first + 1], in.type, in);
      uint64_t b = in.atom == AtomOp::Cas ? read(w, lane, in.ops[first + 2], in.type, in) : 0;
      uint64_t old = 0;
      std::memcpy(&old, p, bytes);
      uint64_t updated;
      try {
        updated = atomicUpdate(in, old, a, b);
      } catch (const LaneFault &f) {
        fault(f.code, w, lane, in, f.message);
      }
      std::memcpy(p, &updated, bytes);
      if (returns)
        write(w, lane, in.ops[0].reg, narrow(old, int(bytes), isSigned(in.type)), in.type);
    }
    countGlobal(accesses, true);
  }

  // --- warp-wide instructions ---
  /// shfl.sync / vote.sync: every executing lane is in its member mask, and every member executes it.
  uint32_t memberMask(const Warp &w, const Instr &in, const Operand &maskOp, uint32_t exec) const {
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

  void shuffle(Warp &w, const Instr &in, uint32_t exec) {
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

  void vote(Warp &w, const Instr &in, uint32_t exec) {
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

  void mov(Warp &w, const Instr &in, uint32_t exec) {
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

  void setp(Warp &w, const Instr &in, uint32_t exec) {
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

  void alu(Warp &w, const Instr &in, uint32_t exec) {
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

  /// Lanes of `active` whose guard predicate holds.
  uint32_t guarded(const Warp &w, const Instr &in, uint32_t active) const {
    if (in.guard < 0)
      return active;
    uint32_t exec = 0;
    for (int lane = 0; lane < 32; ++lane)
      if ((active >> lane) & 1) {
        bool p = readReg(w, lane, in.guard, in) & 1;
        if (p != in.guardNegated)
          exec |= 1u << lane;
      }
    return exec;
  }

  void runWarp(Warp &w) {
    const int32_t n = int32_t(k.instrs.size());
    while (!w.stack.empty()) {
      Frame &f = w.stack.back();
      uint32_t active = f.mask & ~w.exited;
      if (!active || f.pc == f.reconverge) {
        w.stack.pop_back();
        continue;
      }
      if (f.pc >= n) { // past the last instruction (or parked at the exit): these lanes are done
        w.exited |= active;
        w.stack.pop_back();
        continue;
      }
      const Instr &in = k.instrs[size_t(f.pc)];
      ++issued;
      if (issued > budget)
        fault(CUDA_ERROR_LAUNCH_TIMEOUT, w, __builtin_ctz(active), in,
              "the launch ran past " + std::to_string(budget) + " warp instructions (an endless loop?)");
      profile.warpInstructions[size_t(in.cls)] += 1;
      issueTimed(w, in);
      uint32_t exec = guarded(w, in, active);
      int32_t nextPc = f.pc + 1;
      switch (in.op) {
      case Opcode::Bra: {
        if (exec == active) {
          nextPc = in.target;
        } else if (exec != 0) { // divergence: park the reconvergence frame, run the taken lanes first
          int32_t rpc = in.reconverge < 0 ? kExitPc : in.reconverge;
          int32_t fallthrough = f.pc + 1, target = in.target;
          f.pc = rpc;
          uint32_t notTaken = active & ~exec;
          w.stack.push_back(Frame{fallthrough, notTaken, rpc});
          w.stack.push_back(Frame{target, exec, rpc});
          continue;
        }
        break;
      }
      case Opcode::Ret: case Opcode::Exit:
        w.exited |= exec;
        break;
      case Opcode::BarSync: {
        uint32_t live = w.lanes & ~w.exited;
        if (exec != live)
          fault(CUDA_ERROR_ILLEGAL_INSTRUCTION, w, __builtin_ctz(exec ? exec : active), in,
                "bar.sync in divergent code: lanes " + hex(live & ~exec) + " of warp " + std::to_string(w.index) +
                    " are not at this barrier");
        if (in.ops.size() == 2) {
          uint64_t count = read(w, __builtin_ctz(exec), in.ops[1], Type::U32, in);
          if (count != ((block.count() + 31) / 32) * 32)
            fault(CUDA_ERROR_ILLEGAL_INSTRUCTION, w, __builtin_ctz(exec), in,
                  "barriers over part of a block are not supported");
        }
        f.pc = nextPc;
        w.atBarrier = true;
        return;
      }
      case Opcode::WarpSync: // lanes run in lockstep here: only check that the members are converged
        memberMask(w, in, in.ops[0], exec);
        break;
      case Opcode::Membar:
        break;
      case Opcode::Mov: mov(w, in, exec); break;
      case Opcode::Ld: case Opcode::St: loadStore(w, in, exec); break;
      case Opcode::Atom: case Opcode::Red: atomic(w, in, exec); break;
      case Opcode::Setp: setp(w, in, exec); break;
      case Opcode::Shfl: shuffle(w, in, exec); break;
      case Opcode::Vote: vote(w, in, exec); break;
      case Opcode::Activemask:
        for (int lane = 0; lane < 32; ++lane)
          if ((exec >> lane) & 1)
            write(w, lane, in.ops[0].reg, exec, Type::B32);
        break;
      default: alu(w, in, exec); break;
      }
      w.stack.back().pc = nextPc; // f may dangle only after a push, which continues above
    }
  }

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

} // namespace

Profile launchKernel(const Kernel &k, Dim3 grid, Dim3 block, unsigned dynamicSharedBytes, void **params,
                     DeviceMemory &memory, const LaunchOptions &options) {
  Profile profile;
  profile.kernel = k.name;
  profile.grid = grid;
  profile.block = block;
  profile.blocks = grid.count();
  uint64_t threads = block.count();
  if (threads == 0 || threads > 1024 || profile.blocks == 0)
    throw EmuFault(CUDA_ERROR_INVALID_VALUE, k.name + ": a launch of " + std::to_string(profile.blocks) +
                                                 " blocks of " + std::to_string(threads) + " threads");
  for (int d = 0; d < 3; ++d) {
    unsigned dims[3] = {block.x, block.y, block.z};
    if ((k.maxntid[d] && dims[d] > k.maxntid[d]) || (k.reqntid[d] && dims[d] != k.reqntid[d]))
      throw EmuFault(CUDA_ERROR_INVALID_VALUE, k.name + ": block (" + std::to_string(block.x) + "," +
                                                   std::to_string(block.y) + "," + std::to_string(block.z) +
                                                   ") exceeds the kernel's .maxntid/.reqntid");
  }
  // The emulated register file: 8 bytes a register a lane, for every warp of the block.
  if (uint64_t(k.regs.size()) * 8 * 32 * ((threads + 31) / 32) > (uint64_t(1) << 30))
    throw EmuFault(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, k.name + ": " + std::to_string(k.regs.size()) +
                                                           " registers for " + std::to_string(threads) +
                                                           " threads need more than 1 GiB of emulated registers");
  if (uint64_t(k.sharedBytes) + dynamicSharedBytes > 228 * 1024)
    throw EmuFault(CUDA_ERROR_INVALID_VALUE, k.name + ": more than 228 KiB of shared memory");
  std::vector<uint8_t> paramBuffer(size_t(k.paramBytes));
  for (size_t i = 0; i < k.params.size(); ++i) {
    const Symbol &s = k.symbols[size_t(k.params[i])];
    if (!params || !params[i])
      throw EmuFault(CUDA_ERROR_INVALID_VALUE, k.name + ": parameter " + std::to_string(i) + " has no value");
    std::memcpy(paramBuffer.data() + s.offset, params[i], size_t(s.size));
  }
  BlockRunner runner(k, grid, block, paramBuffer, uint64_t(k.sharedBytes) + dynamicSharedBytes, memory, profile,
                     options.maxWarpInstructions);
  uint64_t total = profile.blocks;
  uint64_t run = options.sampleBlocks && options.sampleBlocks < total ? options.sampleBlocks : total;
  for (uint64_t i = 0; i < run; ++i) {
    // One block from each of `run` equal strata of the grid, at a fixed pseudo-random place in it: the
    // first of each would alias with a grid's period (rows of (token, expert) pairs sampled every 4096th
    // block all have expert 0).
    uint64_t begin = uint64_t((unsigned __int128)i * total / run), end = uint64_t((unsigned __int128)(i + 1) * total / run);
    uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    uint64_t b = run == total ? i : begin + (z ^ (z >> 31)) % (end - begin);
    runner.run(unsigned(b % grid.x), unsigned((b / grid.x) % grid.y), unsigned(b / (uint64_t(grid.x) * grid.y)));
  }
  profile.blocksRun = run;
  if (run < total) {
    double scale = double(total) / double(run);
    for (double &c : profile.warpInstructions)
      c *= scale;
    for (double *c : {&profile.globalLoadRequests, &profile.globalStoreRequests, &profile.loadSectors,
                      &profile.storeSectors, &profile.loadBytes, &profile.storeBytes, &profile.warpCycles})
      *c *= scale;
  }
  return profile;
}

} // namespace moec::ptxemu
