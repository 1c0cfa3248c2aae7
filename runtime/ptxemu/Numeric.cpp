//===- Numeric.cpp ---------------------------------------------------------===//
#include "Numeric.h"

#include <cfenv>
#include <cmath>
#include <cstring>
#include <limits>

#pragma STDC FENV_ACCESS ON

namespace moec::ptxemu {

namespace {

int hostRounding(Rounding r) {
  switch (r) {
  case Rounding::Rz: return FE_TOWARDZERO;
  case Rounding::Rm: return FE_DOWNWARD;
  case Rounding::Rp: return FE_UPWARD;
  default: return FE_TONEAREST;
  }
}

/// Switches the host rounding mode for its lifetime.
class RoundingScope {
public:
  explicit RoundingScope(Rounding r) : saved(std::fegetround()) { std::fesetround(hostRounding(r)); }
  ~RoundingScope() { std::fesetround(saved); }

private:
  int saved;
};

template <typename T> T apply(FloatOp op, T a, T b, T c) {
  switch (op) {
  case FloatOp::Add: return a + b;
  case FloatOp::Sub: return a - b;
  case FloatOp::Mul: return a * b;
  case FloatOp::Div: return a / b;
  case FloatOp::Fma: return std::fma(a, b, c);
  case FloatOp::Sqrt: return std::sqrt(a);
  }
  return a;
}

} // namespace

uint64_t encodeFloat(long double x, int fractionBits, int exponentBits, Rounding r) {
  const int bias = (1 << (exponentBits - 1)) - 1, emin = 1 - bias, emax = bias;
  const uint64_t signBit = uint64_t(1) << (fractionBits + exponentBits);
  const uint64_t expMask = ((uint64_t(1) << exponentBits) - 1) << fractionBits;
  const uint64_t maxFinite = expMask - (uint64_t(1) << fractionBits) + ((uint64_t(1) << fractionBits) - 1);
  bool negative = std::signbit(x);
  uint64_t sign = negative ? signBit : 0;
  if (std::isnan(x))
    return sign | expMask | (uint64_t(1) << (fractionBits - 1));
  if (std::isinf(x))
    return sign | expMask;
  long double a = std::fabs(x);
  if (a == 0)
    return sign;
  bool up = r == Rounding::Rp, down = r == Rounding::Rm;
  bool towardZero = r == Rounding::Rz || (up && negative) || (down && !negative);
  bool awayFromZero = (up && !negative) || (down && negative);
  int ex = 0;
  std::frexp(a, &ex);
  int e = std::max(ex - 1, emin); // a in [2^e, 2^(e+1)) when normal
  long double scaled = std::ldexp(a, fractionBits - e); // exact: a power-of-two scaling
  long double whole = std::floor(scaled), frac = scaled - whole;
  uint64_t mant = uint64_t(whole);
  if (frac > 0) {
    if (awayFromZero)
      ++mant;
    else if (!towardZero && (frac > 0.5L || (frac == 0.5L && (mant & 1))))
      ++mant;
  }
  if (mant == (uint64_t(1) << (fractionBits + 1))) { // rounded up into the next binade
    mant >>= 1;
    ++e;
  }
  if (e > emax) // overflow: Inf, or the largest finite value when rounding toward zero
    return sign | (towardZero ? maxFinite : expMask);
  if (mant < (uint64_t(1) << fractionBits)) // subnormal (or zero)
    return sign | mant;
  return sign | (uint64_t(e + bias) << fractionBits) | (mant - (uint64_t(1) << fractionBits));
}

long double decodeFloat(uint64_t bits, Type t) {
  auto generic = [&](int fractionBits, int exponentBits) -> long double {
    const int bias = (1 << (exponentBits - 1)) - 1;
    bool negative = (bits >> (fractionBits + exponentBits)) & 1;
    uint64_t exp = (bits >> fractionBits) & ((uint64_t(1) << exponentBits) - 1);
    uint64_t frac = bits & ((uint64_t(1) << fractionBits) - 1);
    long double v;
    if (exp == (uint64_t(1) << exponentBits) - 1)
      v = frac ? std::numeric_limits<long double>::quiet_NaN() : std::numeric_limits<long double>::infinity();
    else if (exp == 0)
      v = std::ldexp((long double)frac, 1 - bias - fractionBits);
    else
      v = std::ldexp((long double)(frac | (uint64_t(1) << fractionBits)), int(exp) - bias - fractionBits);
    return negative ? -v : v;
  };
  switch (t) {
  case Type::F16: return generic(10, 5);
  case Type::BF16: return generic(7, 8);
  case Type::F32: {
    float f;
    uint32_t b = uint32_t(bits);
    std::memcpy(&f, &b, 4);
    return f;
  }
  default: {
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  }
}

uint64_t encodeAs(long double x, Type t, Rounding r) {
  switch (t) {
  case Type::F16: return encodeFloat(x, 10, 5, r);
  case Type::BF16: return encodeFloat(x, 7, 8, r);
  case Type::F32: return encodeFloat(x, 23, 8, r);
  default: return encodeFloat(x, 52, 11, r);
  }
}

uint32_t flushF32(uint32_t bits) { return (bits & 0x7F800000u) == 0 ? bits & 0x80000000u : bits; }

float floatOp(FloatOp op, float a, float b, float c, Rounding r) {
  RoundingScope scope(r);
  volatile float result = apply(op, a, b, c); // volatile: computed under the scope's rounding mode
  return result;
}

double doubleOp(FloatOp op, double a, double b, double c, Rounding r) {
  RoundingScope scope(r);
  volatile double result = apply(op, a, b, c);
  return result;
}

long double roundIntegral(long double x, Rounding r) {
  switch (r) {
  case Rounding::Rni: {
    long double f = std::floor(x), d = x - f;
    if (d > 0.5L || (d == 0.5L && std::fmod(f, 2.0L) != 0))
      return f + 1;
    return f == 0 && std::signbit(x) ? -0.0L : f;
  }
  case Rounding::Rmi: return std::floor(x);
  case Rounding::Rpi: return std::ceil(x);
  default: return std::trunc(x);
  }
}

uint64_t floatToInt(long double x, Type from, Type to, Rounding r) {
  int bits = typeBytes(to) * 8;
  if (std::isnan(x))
    return from == Type::F64 || bits == 64 ? uint64_t(1) << (bits - 1) : 0;
  long double v = roundIntegral(x, r);
  if (isSigned(to)) {
    long double lo = -std::ldexp(1.0L, bits - 1), hi = std::ldexp(1.0L, bits - 1) - 1;
    int64_t i = v <= lo ? int64_t(lo) : v >= hi ? (bits == 64 ? std::numeric_limits<int64_t>::max() : int64_t(hi))
                                                 : int64_t(v);
    return uint64_t(i);
  }
  long double hi = std::ldexp(1.0L, bits) - 1;
  if (v <= 0)
    return 0;
  return v >= hi ? (bits == 64 ? ~uint64_t(0) : uint64_t(hi)) : uint64_t(v);
}

} // namespace moec::ptxemu
