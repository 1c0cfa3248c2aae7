//===- ControlFlow.cpp - Where divergent lanes reconverge -----------------===//
//
// A warp that splits at a conditional branch runs one side, then the other, and continues as one at the
// branch's immediate post-dominator, the first point every path from the branch must pass (what a SIMT
// reconvergence stack does). Post-dominators are computed over basic blocks with the classic iterative
// data-flow: pdom(b) = {b} ∪ ⋂ pdom(successors), with a virtual exit after every ret/exit.
//===----------------------------------------------------------------------===//
#include "moec/runtime/ptxemu/Ptx.h"

#include <algorithm>

namespace moec::ptxemu {

namespace {

using Bits = std::vector<uint64_t>;

bool test(const Bits &b, size_t i) { return (b[i / 64] >> (i % 64)) & 1; }
void set(Bits &b, size_t i) { b[i / 64] |= uint64_t(1) << (i % 64); }

} // namespace

void computeReconvergence(Kernel &k) {
  const size_t n = k.instrs.size();
  if (n == 0)
    return;
  // Basic blocks: a leader starts at 0, at each branch target, and after each branch or exit.
  std::vector<char> leader(n + 1, 0);
  leader[0] = 1;
  for (size_t i = 0; i < n; ++i) {
    const Instr &in = k.instrs[i];
    if (in.op == Opcode::Bra) {
      leader[size_t(in.target)] = 1;
      leader[i + 1] = 1;
    } else if (in.op == Opcode::Ret || in.op == Opcode::Exit) {
      leader[i + 1] = 1;
    }
  }
  std::vector<size_t> start, blockOf(n);
  for (size_t i = 0; i < n; ++i) {
    if (leader[i])
      start.push_back(i);
    blockOf[i] = start.size() - 1;
  }
  const size_t blocks = start.size(), exitBlock = blocks; // the virtual exit
  std::vector<std::vector<size_t>> succ(blocks);
  for (size_t b = 0; b < blocks; ++b) {
    size_t last = (b + 1 < blocks ? start[b + 1] : n) - 1;
    const Instr &in = k.instrs[last];
    auto fallthrough = [&] { succ[b].push_back(last + 1 < n ? blockOf[last + 1] : exitBlock); };
    if (in.op == Opcode::Bra) { // a label after the last instruction is the exit
      succ[b].push_back(size_t(in.target) < n ? blockOf[size_t(in.target)] : exitBlock);
      if (in.guard >= 0)
        fallthrough();
    } else if (in.op == Opcode::Ret || in.op == Opcode::Exit) {
      succ[b].push_back(exitBlock);
      if (in.guard >= 0)
        fallthrough();
    } else {
      fallthrough();
    }
  }
  // pdom sets over blocks + exit; start with "everything" except at the exit.
  const size_t words = (blocks + 1 + 63) / 64;
  std::vector<Bits> pdom(blocks + 1, Bits(words, ~uint64_t(0)));
  pdom[exitBlock].assign(words, 0);
  set(pdom[exitBlock], exitBlock);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t b = blocks; b-- > 0;) {
      Bits meet(words, ~uint64_t(0));
      for (size_t s : succ[b])
        for (size_t w = 0; w < words; ++w)
          meet[w] &= pdom[s][w];
      set(meet, b);
      if (meet != pdom[b]) {
        pdom[b] = std::move(meet);
        changed = true;
      }
    }
  }
  auto count = [&](const Bits &bits) {
    size_t c = 0;
    for (uint64_t w : bits)
      c += size_t(__builtin_popcountll(w));
    return c;
  };
  // The immediate post-dominator is the strict post-dominator with the largest pdom set but one: the
  // strict post-dominators form a chain, ordered by the size of their own sets.
  for (size_t b = 0; b < blocks; ++b) {
    size_t last = (b + 1 < blocks ? start[b + 1] : n) - 1;
    Instr &in = k.instrs[last];
    if (in.op != Opcode::Bra || in.guard < 0)
      continue;
    size_t best = exitBlock, bestCount = 0;
    for (size_t c = 0; c <= blocks; ++c)
      if (c != b && test(pdom[b], c)) {
        size_t cc = count(pdom[c]);
        if (cc > bestCount) {
          best = c;
          bestCount = cc;
        }
      }
    in.reconverge = best == exitBlock ? -1 : int32_t(start[best]);
  }
}

} // namespace moec::ptxemu
