//===- Alu.h - One lane's arithmetic, comparison and conversion -*- C++ -*-===//
//
// Pure functions of an instruction and its operand bits, shared by every lane: the interpreter reads the
// operands (narrowed to each operand's type, signed types sign-extended to 64 bits), calls these, and
// writes the result. A result PTX leaves unspecified (an integer division by zero, INT_MIN / -1) throws
// LaneFault, which the interpreter reports with the lane's block and thread.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/runtime/CudaTypes.h"
#include "moec/runtime/ptxemu/Ptx.h"

#include <cstdint>
#include <string>

namespace moec::ptxemu {

struct LaneFault {
  CUresult code;
  std::string message;
};

/// The type operand `index` of `in` is read as (the destination is index 0).
Type operandType(const Instr &in, size_t index);
/// The type the result of `in` has (its destination register is written with this width and extension).
Type resultType(const Instr &in);

/// d = in(a, b, c) for the arithmetic, logic, shift, bit, select, cvt and cvta opcodes.
uint64_t evaluate(const Instr &in, uint64_t a, uint64_t b, uint64_t c);
/// setp's comparison of a and b (before any .and/.or/.xor with a third predicate).
bool compare(const Instr &in, uint64_t a, uint64_t b);
/// The atomic operation's new memory value from the old one and the operands (b: cas's new value).
uint64_t atomicUpdate(const Instr &in, uint64_t old, uint64_t a, uint64_t b);

/// Bits of `v` narrowed to `bytes`, sign-extended to 64 when `signExtend`.
uint64_t narrow(uint64_t v, int bytes, bool signExtend);

} // namespace moec::ptxemu
