//===- Numeric.h - PTX arithmetic and conversions, bit-exact ----*- C++ -*-===//
//
// The floating-point semantics the emulator needs beyond the host's default: every PTX rounding mode
// (.rn .rz .rm .rp for results, .rni .rzi .rmi .rpi for integral rounding), flush-to-zero, conversion to
// f16 / bf16, and PTX's float-to-integer saturation. f32 and f64 arithmetic runs on the host FPU with its
// rounding mode switched; 16-bit results are rounded from an exact wider value by one generic encoder.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/runtime/ptxemu/Ptx.h"

#include <cstdint>

namespace moec::ptxemu {

/// Rounds `x` (exact) to a binary format with `fractionBits` and `exponentBits` and returns its bits:
/// f16 (10, 5), bf16 (7, 8), f32 (23, 8). Subnormals, overflow to Inf or the largest finite value per the
/// rounding mode, NaN stays a quiet NaN with its sign.
uint64_t encodeFloat(long double x, int fractionBits, int exponentBits, Rounding r);

/// The value of float bits of type t (f16, bf16, f32, f64), exactly.
long double decodeFloat(uint64_t bits, Type t);
/// Bits of type t for the exact value x, rounded per r (.rn when r is None or an integral rounding).
uint64_t encodeAs(long double x, Type t, Rounding r);

/// Flushes a subnormal f32 (bits) to a zero of the same sign.
uint32_t flushF32(uint32_t bits);

/// a op b in f32 or f64 under rounding r (.rn, .rz, .rm, .rp; None and Approx/Full: .rn), host FPU.
enum class FloatOp { Add, Sub, Mul, Div, Fma, Sqrt };
float floatOp(FloatOp op, float a, float b, float c, Rounding r);
double doubleOp(FloatOp op, double a, double b, double c, Rounding r);

/// cvt to an integer type from a float value: rounded per the integral rounding r (.rni/.rzi/.rmi/.rpi;
/// .rzi when None), saturated to the type's range. NaN gives 0, except from an f64 or to a 64-bit type,
/// where the PTX ISA gives 1 << (bits - 1).
uint64_t floatToInt(long double x, Type from, Type to, Rounding r);
/// An integral rounding (cvt.rni.f32.f32 and kin) of x.
long double roundIntegral(long double x, Rounding r);

} // namespace moec::ptxemu
