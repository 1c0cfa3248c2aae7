//===- Execute.cpp - Warps in lockstep over decoded PTX -------------------===//
//
// Blocks run one after another; inside a block each warp runs until it reaches a barrier or ends, and a
// barrier releases once every warp that has not ended waits at it. A warp is 32 lanes under an active
// mask with a reconvergence stack: a divergent branch parks a frame at its immediate post-dominator, runs
// the taken lanes, then the others, and both meet there again. Every register read checks the lane's
// initialized bit; every memory access is checked against the allocations (global), the block's shared
// window or the parameter buffer, and against its natural alignment.
//
// This file: the block's warps in lockstep (BlockRunner::run, runWarp: control flow, barriers, faults) and
// launchKernel. A lane's operands are in BlockRunner.h, loads, stores and atomics in MemoryAccess.cpp, the
// other instructions in Instructions.cpp, the warps' timelines in IssueTiming.cpp.
//===----------------------------------------------------------------------===//
#include "Alu.h"
#include "BlockRunner.h"

#include "moec/runtime/ptxemu/Emulator.h"

#include <algorithm>
#include <cstring>

namespace moec::ptxemu {

namespace detail {

namespace {

constexpr int32_t kExitPc = INT32_MAX;

} // namespace

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%llx", (unsigned long long)v);
  return b;
}

void BlockRunner::run(unsigned bx, unsigned by, unsigned bz) {
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
  uint64_t slowest = 0;
  for (const Warp &w : warps) {
    profile.warpCycles += double(w.cycles());
    slowest = std::max(slowest, w.cycles());
  }
  profile.blockCycles.push_back(slowest);
}

[[noreturn]] void BlockRunner::fault(CUresult code, const Warp &w, int lane, const Instr &in,
                                     const std::string &what) const {
  char where[256];
  std::snprintf(where, sizeof where, "%s: PTX line %d ('%s'): block (%u,%u,%u), thread (%u,%u,%u): ", k.name.c_str(),
                in.line, in.text.c_str(), ctaid[0], ctaid[1], ctaid[2], w.tid[lane][0], w.tid[lane][1],
                w.tid[lane][2]);
  throw EmuFault(code, where + what);
}

uint32_t BlockRunner::guarded(const Warp &w, const Instr &in, uint32_t active) const {
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

void BlockRunner::runWarp(Warp &w) {
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

} // namespace detail

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
  // The block's shared window: the static variables, then the dynamic bytes where the parser placed the
  // .extern .shared arrays (past the static ones, at a multiple of 16), so that all of them are inside.
  uint64_t sharedBytes = uint64_t(k.sharedBytes);
  if (dynamicSharedBytes) {
    for (const Symbol &s : k.symbols)
      if (s.kind == Symbol::Kind::Shared && s.size < 0)
        sharedBytes = std::max(sharedBytes, uint64_t(s.offset));
    sharedBytes += dynamicSharedBytes;
  }
  if (sharedBytes > 228 * 1024)
    throw EmuFault(CUDA_ERROR_INVALID_VALUE, k.name + ": more than 228 KiB of shared memory");
  std::vector<uint8_t> paramBuffer(size_t(k.paramBytes));
  for (size_t i = 0; i < k.params.size(); ++i) {
    const Symbol &s = k.symbols[size_t(k.params[i])];
    if (!params || !params[i])
      throw EmuFault(CUDA_ERROR_INVALID_VALUE, k.name + ": parameter " + std::to_string(i) + " has no value");
    std::memcpy(paramBuffer.data() + s.offset, params[i], size_t(s.size));
  }
  detail::BlockRunner runner(k, grid, block, paramBuffer, sharedBytes, memory, profile, options.maxWarpInstructions);
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
