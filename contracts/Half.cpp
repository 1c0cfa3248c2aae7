//===- Half.cpp - float <-> bf16 / IEEE binary16 conversions -------------===//
#include "moec/contracts/Half.h"

#include <cstring>

namespace moec {

namespace {

uint32_t floatBits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

float bitsFloat(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

constexpr uint32_t kF32Inf = 0x7f800000;

/// `value >> shift`, rounded to nearest with ties to even; 0 < shift < 32.
uint32_t shiftRightRoundEven(uint32_t value, int shift) {
  uint32_t kept = value >> shift;
  uint32_t rest = value & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  return kept + (rest > half || (rest == half && (kept & 1)));
}

} // namespace

uint16_t floatToBf16(float x) {
  uint32_t u = floatBits(x);
  // Truncating a NaN whose payload lives only in the low 16 bits would give Inf: force the quiet bit.
  if ((u & 0x7fffffff) > kF32Inf)
    return static_cast<uint16_t>((u >> 16) | 0x0040);
  // bf16 is the top half of a float, so rounding the low half carries into the exponent as needed
  // (the largest finite values round up to Inf).
  return static_cast<uint16_t>(shiftRightRoundEven(u, 16));
}

float bf16ToFloat(uint16_t b) { return bitsFloat(uint32_t(b) << 16); }

uint16_t floatToF16(float x) {
  uint32_t u = floatBits(x);
  auto sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  uint32_t a = u & 0x7fffffff;
  if (a > kF32Inf) // NaN: keep the top payload bits, force the quiet bit
    return sign | 0x7e00 | ((a >> 13) & 0x3ff);
  if (a >= 0x477ff000) // >= 65520, halfway from the largest f16 (65504) to 2^16: Inf, ties to even
    return sign | 0x7c00;
  if (a >= 0x38800000) // >= 2^-14: normal; rebias the exponent, round off 13 mantissa bits
    return sign | static_cast<uint16_t>(shiftRightRoundEven(a - ((127u - 15u) << 23), 13));
  if (a < 0x33000000) // < 2^-25, under half the smallest subnormal: zero
    return sign;
  // Subnormal: the result is a * 2^24 as an integer. With the implicit bit restored the significand
  // holds a * 2^(150 - e), so shift right by 126 - e (14..24 here); rounding up to 0x400 yields the
  // smallest normal, which is the right encoding.
  int e = static_cast<int>(a >> 23);
  uint32_t significand = (a & 0x7fffff) | 0x800000;
  return sign | static_cast<uint16_t>(shiftRightRoundEven(significand, 126 - e));
}

float f16ToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  if (exponent == 0x1f) // Inf / NaN
    return bitsFloat(sign | kF32Inf | (mantissa << 13));
  if (exponent != 0)
    return bitsFloat(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
  float magnitude = static_cast<float>(mantissa) * 0x1p-24f; // subnormal or zero, exact in float
  return sign ? -magnitude : magnitude;
}

} // namespace moec
