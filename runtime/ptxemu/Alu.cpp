//===- Alu.cpp - Per-lane semantics, following the PTX ISA text -----------===//
#include "Alu.h"

#include "Numeric.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace moec::ptxemu {

namespace {

using u128 = unsigned __int128;
using s128 = __int128;

float asF32(uint64_t bits) { return std::bit_cast<float>(uint32_t(bits)); }
uint64_t fromF32(float f) { return std::bit_cast<uint32_t>(f); }
double asF64(uint64_t bits) { return std::bit_cast<double>(bits); }
uint64_t fromF64(double d) { return std::bit_cast<uint64_t>(d); }

Type widened(Type t) {
  switch (t) {
  case Type::U16: return Type::U32;
  case Type::S16: return Type::S32;
  case Type::U32: return Type::U64;
  case Type::S32: return Type::S64;
  case Type::B16: return Type::B32;
  case Type::B32: return Type::B64;
  default: return t;
  }
}

Rounding rounding(const Instr &in) { return in.round == Rounding::None ? Rounding::Rn : in.round; }

[[noreturn]] void unspecified(const std::string &what) { throw LaneFault{CUDA_ERROR_ILLEGAL_INSTRUCTION, what}; }

// --- f32 / f64 ---

float ftzIn(const Instr &in, float x) { return in.ftz ? asF32(flushF32(uint32_t(fromF32(x)))) : x; }

uint64_t f32(const Instr &in, uint64_t ab, uint64_t bb, uint64_t cb) {
  float a = ftzIn(in, asF32(ab)), b = ftzIn(in, asF32(bb)), c = ftzIn(in, asF32(cb));
  Rounding r = rounding(in);
  float d;
  switch (in.op) {
  case Opcode::Add: d = floatOp(FloatOp::Add, a, b, 0, r); break;
  case Opcode::Sub: d = floatOp(FloatOp::Sub, a, b, 0, r); break;
  case Opcode::Mul: d = floatOp(FloatOp::Mul, a, b, 0, r); break;
  case Opcode::Fma: case Opcode::Mad: d = floatOp(FloatOp::Fma, a, b, c, r); break;
  case Opcode::Div: d = floatOp(FloatOp::Div, a, b, 0, r); break; // .approx/.full: the exact quotient
  case Opcode::Rcp: d = floatOp(FloatOp::Div, 1.0f, a, 0, r); break;
  case Opcode::Sqrt: d = floatOp(FloatOp::Sqrt, a, 0, 0, r); break;
  case Opcode::Rsqrt: d = 1.0f / std::sqrt(a); break;
  case Opcode::Ex2: d = std::exp2(a); break;
  case Opcode::Lg2: d = std::log2(a); break;
  case Opcode::Min: d = std::isnan(a) ? b : std::isnan(b) ? a : (a < b || (a == b && std::signbit(a))) ? a : b; break;
  case Opcode::Max: d = std::isnan(a) ? b : std::isnan(b) ? a : (a > b || (a == b && !std::signbit(a))) ? a : b; break;
  case Opcode::Neg: return uint32_t(ab) ^ 0x80000000u;
  case Opcode::Abs: return uint32_t(ab) & 0x7FFFFFFFu;
  default: unspecified(std::string("'") + in.text + "' is not an f32 operation");
  }
  if (in.sat)
    d = std::isnan(d) ? 0.0f : std::fmin(std::fmax(d, 0.0f), 1.0f);
  uint64_t bits = fromF32(d);
  return in.ftz ? flushF32(uint32_t(bits)) : bits;
}

uint64_t f64(const Instr &in, uint64_t ab, uint64_t bb, uint64_t cb) {
  double a = asF64(ab), b = asF64(bb), c = asF64(cb);
  Rounding r = rounding(in);
  switch (in.op) {
  case Opcode::Add: return fromF64(doubleOp(FloatOp::Add, a, b, 0, r));
  case Opcode::Sub: return fromF64(doubleOp(FloatOp::Sub, a, b, 0, r));
  case Opcode::Mul: return fromF64(doubleOp(FloatOp::Mul, a, b, 0, r));
  case Opcode::Fma: case Opcode::Mad: return fromF64(doubleOp(FloatOp::Fma, a, b, c, r));
  case Opcode::Div: return fromF64(doubleOp(FloatOp::Div, a, b, 0, r));
  case Opcode::Rcp: return fromF64(doubleOp(FloatOp::Div, 1.0, a, 0, r));
  case Opcode::Sqrt: return fromF64(doubleOp(FloatOp::Sqrt, a, 0, 0, r));
  case Opcode::Rsqrt: return fromF64(1.0 / std::sqrt(a));
  case Opcode::Min: return fromF64(std::isnan(a) ? b : std::isnan(b) ? a : std::fmin(a, b));
  case Opcode::Max: return fromF64(std::isnan(a) ? b : std::isnan(b) ? a : std::fmax(a, b));
  case Opcode::Neg: return ab ^ (uint64_t(1) << 63);
  case Opcode::Abs: return ab & ~(uint64_t(1) << 63);
  default: unspecified(std::string("'") + in.text + "' is not an f64 operation");
  }
}

/// One 16-bit float lane (f16 or bf16): computed exactly (or correctly rounded in long double), then
/// rounded once to the 16-bit type.
uint64_t half(const Instr &in, Type t, uint64_t ab, uint64_t bb, uint64_t cb) {
  long double a = decodeFloat(ab & 0xFFFF, t), b = decodeFloat(bb & 0xFFFF, t), c = decodeFloat(cb & 0xFFFF, t);
  long double d;
  switch (in.op) {
  case Opcode::Add: d = a + b; break;
  case Opcode::Sub: d = a - b; break;
  case Opcode::Mul: d = a * b; break;
  case Opcode::Fma: case Opcode::Mad: d = std::fma(a, b, c); break;
  case Opcode::Min: d = std::isnan(a) ? b : std::isnan(b) ? a : std::fmin(a, b); break;
  case Opcode::Max: d = std::isnan(a) ? b : std::isnan(b) ? a : std::fmax(a, b); break;
  case Opcode::Neg: return (ab ^ 0x8000) & 0xFFFF;
  case Opcode::Abs: return ab & 0x7FFF;
  default: unspecified(std::string("'") + in.text + "' is not a 16-bit float operation");
  }
  if (in.sat)
    d = std::isnan(d) ? 0.0L : std::fmin(std::fmax(d, 0.0L), 1.0L);
  return encodeAs(d, t, rounding(in));
}

// --- integers ---

uint64_t integer(const Instr &in, uint64_t a, uint64_t b, uint64_t c) {
  const Type t = in.type;
  const int bytes = typeBytes(t), bits = bytes * 8;
  const bool s = isSigned(t);
  auto sv = [&](uint64_t v) { return int64_t(narrow(v, bytes, true)); };
  auto uv = [&](uint64_t v) { return narrow(v, bytes, false); };
  auto product = [&]() -> u128 { return s ? u128(s128(sv(a)) * s128(sv(b))) : u128(uv(a)) * u128(uv(b)); };
  switch (in.op) {
  case Opcode::Add: case Opcode::Sub: {
    if (in.sat) { // add.sat.s32: clamped to the s32 range
      int64_t r = in.op == Opcode::Add ? sv(a) + sv(b) : sv(a) - sv(b);
      return uint64_t(std::clamp<int64_t>(r, INT32_MIN, INT32_MAX));
    }
    return in.op == Opcode::Add ? a + b : a - b;
  }
  case Opcode::Mul: case Opcode::Mad: {
    u128 p = product();
    u128 r = in.mode == MulMode::Hi ? (p >> bits) : p; // lo and wide keep the low bits (wide: twice as many)
    if (in.op == Opcode::Mad)
      r += u128(c);
    return uint64_t(r);
  }
  case Opcode::Div: case Opcode::Rem: {
    if (uv(b) == 0)
      unspecified(std::string(in.op == Opcode::Div ? "division" : "remainder") + " by zero ('" + in.text + "')");
    if (s) {
      if (sv(b) == -1 && sv(a) == (bits == 64 ? INT64_MIN : -(int64_t(1) << (bits - 1))))
        unspecified("signed overflow: the minimum value divided by -1 ('" + in.text + "')");
      return uint64_t(in.op == Opcode::Div ? sv(a) / sv(b) : sv(a) % sv(b));
    }
    return in.op == Opcode::Div ? uv(a) / uv(b) : uv(a) % uv(b);
  }
  case Opcode::Neg: return uint64_t(0) - a;
  case Opcode::Abs: return sv(a) < 0 ? uint64_t(0) - a : a;
  case Opcode::Min: return s ? (sv(a) < sv(b) ? a : b) : (uv(a) < uv(b) ? a : b);
  case Opcode::Max: return s ? (sv(a) > sv(b) ? a : b) : (uv(a) > uv(b) ? a : b);
  case Opcode::And: return a & b;
  case Opcode::Or: return a | b;
  case Opcode::Xor: return a ^ b;
  case Opcode::Not: return t == Type::Pred ? !a : ~a;
  case Opcode::Shl: {
    uint64_t n = uint32_t(b);
    return n >= uint64_t(bits) ? 0 : a << n;
  }
  case Opcode::Shr: {
    uint64_t n = std::min<uint64_t>(uint32_t(b), uint64_t(bits));
    if (s)
      return n >= uint64_t(bits) ? uint64_t(sv(a) < 0 ? -1 : 0) : uint64_t(sv(a) >> n);
    return n >= uint64_t(bits) ? 0 : uv(a) >> n;
  }
  case Opcode::Popc: return uint64_t(std::popcount(uv(a)));
  case Opcode::Clz: return uint64_t(std::countl_zero(uv(a)) - (64 - bits));
  case Opcode::Prmt: { // prmt.b32 d, a, b, c: byte i of d is byte c[4i+2:4i] of {b, a}, its sign if c[4i+3]
    uint64_t bytes = (uint64_t(uint32_t(b)) << 32) | uint32_t(a);
    uint32_t r = 0;
    for (int i = 0; i < 4; ++i) {
      unsigned select = (uint32_t(c) >> (4 * i)) & 0xF;
      uint32_t byte = (bytes >> (8 * (select & 7))) & 0xFF;
      if (select & 8)
        byte = byte & 0x80 ? 0xFF : 0;
      r |= byte << (8 * i);
    }
    return r;
  }
  case Opcode::Brev: {
    uint64_t v = uv(a), r = 0;
    for (int i = 0; i < bits; ++i)
      r |= ((v >> i) & 1) << (bits - 1 - i);
    return r;
  }
  default: unspecified(std::string("'") + in.text + "' is not an integer operation");
  }
}

uint64_t convert(const Instr &in, uint64_t a) {
  const Type to = in.type, from = in.srcType;
  Rounding r = in.round;
  if (isFloat(from)) {
    uint64_t bits = a;
    if (in.ftz && from == Type::F32)
      bits = flushF32(uint32_t(bits));
    long double x = decodeFloat(bits, from);
    if (!isFloat(to))
      return floatToInt(x, from, to, r);
    bool integral = r == Rounding::Rni || r == Rounding::Rzi || r == Rounding::Rmi || r == Rounding::Rpi;
    if (integral)
      x = roundIntegral(x, r);
    if (in.sat)
      x = std::isnan(x) ? 0.0L : std::fmin(std::fmax(x, 0.0L), 1.0L);
    uint64_t out = encodeAs(x, to, integral ? Rounding::Rn : rounding(in));
    return in.ftz && to == Type::F32 ? flushF32(uint32_t(out)) : out;
  }
  // From an integer.
  const int fromBytes = typeBytes(from);
  if (isFloat(to)) {
    long double x = isSigned(from) ? (long double)int64_t(narrow(a, fromBytes, true))
                                   : (long double)narrow(a, fromBytes, false);
    return encodeAs(x, to, rounding(in));
  }
  uint64_t v = narrow(a, fromBytes, isSigned(from));
  if (in.sat) { // clamp to the destination's range
    const int bits = typeBytes(to) * 8;
    if (isSigned(to)) {
      int64_t lo = bits == 64 ? INT64_MIN : -(int64_t(1) << (bits - 1)), hi = bits == 64 ? INT64_MAX : -(lo + 1);
      if (isSigned(from))
        return uint64_t(std::clamp<int64_t>(int64_t(v), lo, hi));
      return v > uint64_t(hi) ? uint64_t(hi) : v;
    }
    uint64_t hi = bits == 64 ? ~uint64_t(0) : (uint64_t(1) << bits) - 1;
    if (isSigned(from) && int64_t(v) < 0)
      return 0;
    return v > hi ? hi : v;
  }
  return v;
}

} // namespace

uint64_t narrow(uint64_t v, int bytes, bool signExtend) {
  if (bytes >= 8)
    return v;
  int shift = 64 - bytes * 8;
  return signExtend ? uint64_t(int64_t(v << shift) >> shift) : (v << shift) >> shift;
}

Type operandType(const Instr &in, size_t index) {
  switch (in.op) {
  case Opcode::Cvt:
    return in.type == Type::F16x2 || in.type == Type::BF16x2 ? Type::F32 : in.srcType;
  case Opcode::Shl: case Opcode::Shr:
    return index == 2 ? Type::U32 : in.type;
  case Opcode::Mad:
    return index == 3 && in.mode == MulMode::Wide ? widened(in.type) : in.type;
  case Opcode::Selp:
    return index == 3 ? Type::Pred : in.type;
  case Opcode::Setp:
    return index == 3 ? Type::Pred : in.type;
  case Opcode::Cvta:
    return Type::U64;
  default:
    return in.type;
  }
}

Type resultType(const Instr &in) {
  if ((in.op == Opcode::Mul || in.op == Opcode::Mad) && in.mode == MulMode::Wide)
    return widened(in.type);
  if (in.op == Opcode::Popc || in.op == Opcode::Clz)
    return Type::U32;
  if (in.op == Opcode::Cvt && (in.type == Type::F16x2 || in.type == Type::BF16x2))
    return Type::B32;
  return in.type;
}

uint64_t evaluate(const Instr &in, uint64_t a, uint64_t b, uint64_t c) {
  switch (in.op) {
  case Opcode::Cvt:
    if (in.type == Type::F16x2 || in.type == Type::BF16x2) { // a to the upper half, b to the lower
      Type h = in.type == Type::F16x2 ? Type::F16 : Type::BF16;
      Rounding r = rounding(in);
      return (encodeAs(decodeFloat(a, Type::F32), h, r) << 16) | encodeAs(decodeFloat(b, Type::F32), h, r);
    }
    return convert(in, a);
  case Opcode::Cvta:
    return a;
  case Opcode::Selp:
    return c ? a : b;
  default:
    break;
  }
  switch (in.type) {
  case Type::F32: return f32(in, a, b, c);
  case Type::F64: return f64(in, a, b, c);
  case Type::F16: case Type::BF16: return half(in, in.type, a, b, c);
  case Type::F16x2: case Type::BF16x2: {
    Type h = in.type == Type::F16x2 ? Type::F16 : Type::BF16;
    uint64_t lo = half(in, h, a, b, c), hi = half(in, h, a >> 16, b >> 16, c >> 16);
    return (hi << 16) | lo;
  }
  default: return integer(in, a, b, c);
  }
}

bool compare(const Instr &in, uint64_t a, uint64_t b) {
  if (isFloat(in.type)) {
    long double x = decodeFloat(a, in.type), y = decodeFloat(b, in.type);
    bool unordered = std::isnan(x) || std::isnan(y);
    switch (in.cmp) {
    case Cmp::Eq: return !unordered && x == y;
    case Cmp::Ne: return !unordered && x != y;
    case Cmp::Lt: return !unordered && x < y;
    case Cmp::Le: return !unordered && x <= y;
    case Cmp::Gt: return !unordered && x > y;
    case Cmp::Ge: return !unordered && x >= y;
    case Cmp::Equ: return unordered || x == y;
    case Cmp::Neu: return unordered || x != y;
    case Cmp::Ltu: return unordered || x < y;
    case Cmp::Leu: return unordered || x <= y;
    case Cmp::Gtu: return unordered || x > y;
    case Cmp::Geu: return unordered || x >= y;
    case Cmp::Num: return !unordered;
    case Cmp::Nan: return unordered;
    default: unspecified("'" + in.text + "': no such float comparison");
    }
  }
  const int bytes = typeBytes(in.type);
  const bool s = isSigned(in.type);
  int64_t sa = int64_t(narrow(a, bytes, true)), sb = int64_t(narrow(b, bytes, true));
  uint64_t ua = narrow(a, bytes, false), ub = narrow(b, bytes, false);
  switch (in.cmp) {
  case Cmp::Eq: return ua == ub;
  case Cmp::Ne: return ua != ub;
  case Cmp::Lt: return s ? sa < sb : ua < ub;
  case Cmp::Le: return s ? sa <= sb : ua <= ub;
  case Cmp::Gt: return s ? sa > sb : ua > ub;
  case Cmp::Ge: return s ? sa >= sb : ua >= ub;
  case Cmp::Lo: return ua < ub;
  case Cmp::Ls: return ua <= ub;
  case Cmp::Hi: return ua > ub;
  case Cmp::Hs: return ua >= ub;
  default: unspecified("'" + in.text + "': no such integer comparison");
  }
}

uint64_t atomicUpdate(const Instr &in, uint64_t old, uint64_t a, uint64_t b) {
  const int bytes = typeBytes(in.type);
  const bool s = isSigned(in.type);
  if (in.type == Type::F32 || in.type == Type::F64) {
    Instr add = in;
    add.round = Rounding::Rn;
    switch (in.atom) {
    case AtomOp::Add: add.op = Opcode::Add; return evaluate(add, old, a, 0);
    case AtomOp::Min: add.op = Opcode::Min; return evaluate(add, old, a, 0);
    case AtomOp::Max: add.op = Opcode::Max; return evaluate(add, old, a, 0);
    case AtomOp::Exch: return a;
    default: unspecified("'" + in.text + "' is not a float atomic");
    }
  }
  int64_t so = int64_t(narrow(old, bytes, true)), sa = int64_t(narrow(a, bytes, true));
  uint64_t uo = narrow(old, bytes, false), ua = narrow(a, bytes, false);
  switch (in.atom) {
  case AtomOp::Add: return old + a;
  case AtomOp::Min: return s ? uint64_t(std::min(so, sa)) : std::min(uo, ua);
  case AtomOp::Max: return s ? uint64_t(std::max(so, sa)) : std::max(uo, ua);
  case AtomOp::Exch: return a;
  case AtomOp::Cas: return uo == ua ? b : old;
  case AtomOp::And: return old & a;
  case AtomOp::Or: return old | a;
  case AtomOp::Xor: return old ^ a;
  default: unspecified("'" + in.text + "' has no operation");
  }
}

} // namespace moec::ptxemu
