//===- OpTestUtil.h - Shared helpers for the op numeric tests ----*- C++ -*-===//
//
// Owned test tensors (f16/bf16 stored as raw 16-bit patterns), random data builders, dtype <-> f32
// conversions through Half.h (RNE), and a bit-exact comparison of a kernel output with a reference.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/contracts/Half.h"
#include "moec/jit/CpuRun.h"
#include "moec/runtime/CudaDriver.h"
#include "moec/runtime/HostTensor.h"
#include "moec/runtime/Tensor.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace moec::test {

using dsl::DType;

/// Runs an op the way every op test does: through the CPU JIT, or, when ctest sets MOEC_TEST_TARGET=ptx-emu,
/// through the GPU path (PTX, Kernel::launch, device memory) on the PTX emulator. A specialization is
/// compiled once per test process, as a Runtime compiles it once, and run again at each token count
/// (CompiledRuns: the op tests' ops are static, alive as long as the process).
inline CpuRunResult runOp(const dsl::OpDef &op, DType dtype, const std::map<std::string, int64_t> &attrs,
                          const std::map<std::string, TensorView> &inputs, const Schedule &schedule = {}) {
  // Never destroyed: its device entries' contexts would outlive the emulator's driver at exit.
  static CompiledRuns &compiled = *new CompiledRuns;
  const char *target = std::getenv("MOEC_TEST_TARGET");
  if (target && std::string(target) == "ptx-emu")
    return runOnDevice(op, dtype, attrs, inputs, schedule, Target::ptx("sm_90"), CudaDriver::emulator(), &compiled);
  return runOnCpu(op, dtype, attrs, inputs, schedule, &compiled);
}

inline const char *typeName(DType t) {
  switch (t) {
  case DType::F16: return "f16";
  case DType::BF16: return "bf16";
  case DType::F32: return "f32";
  case DType::I32: return "i32";
  case DType::I8: return "i8";
  case DType::Bool: return "bool";
  }
  return "?";
}

inline size_t elemBytes(DType t) {
  switch (t) {
  case DType::F16:
  case DType::BF16: return 2;
  case DType::F32:
  case DType::I32: return 4;
  default: return 1;
  }
}

/// The f32 value of element `i` of a float tensor of type `t` (exact).
inline float loadF32(DType t, const void *data, int64_t i) {
  switch (t) {
  case DType::F16: return f16ToFloat(static_cast<const uint16_t *>(data)[i]);
  case DType::BF16: return bf16ToFloat(static_cast<const uint16_t *>(data)[i]);
  default: {
    float f;
    std::memcpy(&f, static_cast<const char *>(data) + 4 * i, 4);
    return f;
  }
  }
}

/// Stores `f` into element `i`, rounded once to `t` (nearest, ties to even).
inline void storeF32(DType t, void *data, int64_t i, float f) {
  switch (t) {
  case DType::F16: static_cast<uint16_t *>(data)[i] = floatToF16(f); break;
  case DType::BF16: static_cast<uint16_t *>(data)[i] = floatToBf16(f); break;
  default: std::memcpy(static_cast<char *>(data) + 4 * i, &f, 4); break;
  }
}

/// The raw bits of element `i` (16 or 32 bits).
inline uint32_t rawBits(DType t, const void *data, int64_t i) {
  if (elemBytes(t) == 2)
    return static_cast<const uint16_t *>(data)[i];
  uint32_t u;
  std::memcpy(&u, static_cast<const char *>(data) + 4 * i, 4);
  return u;
}

inline bool isNaNBits(DType t, uint32_t bits) {
  switch (t) {
  case DType::F16: return (bits & 0x7c00u) == 0x7c00u && (bits & 0x03ffu) != 0;
  case DType::BF16: return (bits & 0x7f80u) == 0x7f80u && (bits & 0x007fu) != 0;
  case DType::F32: return (bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0;
  default: return false;
  }
}

/// An owned, contiguous tensor the tests fill and hand to the runtime as a TensorView.
struct TestTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<unsigned char> bytes;

  TestTensor() = default;
  TestTensor(DType dtype, std::vector<int64_t> shape) : dtype(dtype), shape(std::move(shape)) {
    bytes.assign(static_cast<size_t>(elements()) * elemBytes(dtype), 0);
  }
  int64_t elements() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  void *data() { return bytes.empty() ? static_cast<void *>(&dummy) : bytes.data(); }
  const void *data() const { return bytes.empty() ? static_cast<const void *>(&dummy) : bytes.data(); }
  TensorView view() { return TensorView{data(), dtype, shape, {}, Device::Host}; }

  float getF32(int64_t i) const { return loadF32(dtype, data(), i); }
  void setF32(int64_t i, float f) { storeF32(dtype, data(), i, f); }
  int32_t getI32(int64_t i) const { return reinterpret_cast<const int32_t *>(data())[i]; }
  void setI32(int64_t i, int32_t v) { reinterpret_cast<int32_t *>(data())[i] = v; }

  static TestTensor i32(const std::vector<int32_t> &values) {
    TestTensor t(DType::I32, {static_cast<int64_t>(values.size())});
    if (!values.empty())
      std::memcpy(t.data(), values.data(), values.size() * 4);
    return t;
  }

private:
  uint32_t dummy = 0; // a valid pointer for empty tensors
};

/// Which values random float tensors get.
enum class Values {
  Normal,    // uniform in [-2, 2), rounded to the dtype
  Special,   // mostly Normal, with some +-0, -0, +-Inf, NaN and huge values (sums overflow to Inf)
  Subnormal, // mostly Normal, with some subnormals of the dtype (and of f32 for bf16 / f32), so that
             // sums land in the subnormal range too
};

/// Fills a float tensor with random values exactly representable in its dtype.
inline void fillRandom(TestTensor &t, std::mt19937 &rng, Values values = Values::Normal) {
  std::uniform_real_distribution<float> uni(-2.0f, 2.0f);
  std::uniform_int_distribution<int> pick(0, 999);
  const float huge = t.dtype == DType::F16 ? 40000.0f : 2.0e38f;
  // The smallest normal of the dtype: f16 2^-14; bf16 and f32 share f32's 2^-126.
  const float minNormal = t.dtype == DType::F16 ? 6.103515625e-05f : 1.17549435e-38f;
  for (int64_t i = 0, n = t.elements(); i < n; ++i) {
    float f = uni(rng);
    const int c = pick(rng);
    if (values == Values::Special) {
      if (c < 10)
        f = 0.0f;
      else if (c < 20)
        f = -0.0f;
      else if (c < 23)
        f = INFINITY;
      else if (c < 26)
        f = -INFINITY;
      else if (c < 29)
        f = NAN;
      else if (c < 39)
        f = huge;
      else if (c < 49)
        f = -huge;
    } else if (values == Values::Subnormal && c < 300) {
      f = uni(rng) * 0.5f * minNormal; // |f| < minNormal: subnormal (or zero) once rounded
    } else if (values == Values::Subnormal && c < 400) {
      f = uni(rng) * minNormal; // around the normal / subnormal boundary
    }
    t.setF32(i, f); // rounded to the dtype once; the tensor then holds exact dtype values
  }
}

inline std::string hexBits(DType t, uint32_t bits) {
  std::ostringstream os;
  os << "0x" << std::hex << std::setw(elemBytes(t) == 2 ? 4 : 8) << std::setfill('0') << bits;
  return os.str();
}

inline std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// Bit-exact comparison of `got` (dtype, shape, data) with `expected`; any NaN equals any NaN.
/// On failure, names the first mismatching element (row, col of a 2-D view), the bits and the values,
/// and how many elements differ.
inline ::testing::AssertionResult bitsEqual(const TestTensor &expected, DType gotType,
                                            const std::vector<int64_t> &gotShape, const void *got) {
  if (gotType != expected.dtype)
    return ::testing::AssertionFailure()
           << "dtype: expected " << typeName(expected.dtype) << ", got " << typeName(gotType);
  if (gotShape != expected.shape)
    return ::testing::AssertionFailure()
           << "shape: expected " << shapeString(expected.shape) << ", got " << shapeString(gotShape);
  const int64_t n = expected.elements();
  const int64_t cols = expected.shape.empty() ? 1 : std::max<int64_t>(1, expected.shape.back());
  int64_t mismatches = 0, first = -1;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t e = rawBits(expected.dtype, expected.data(), i), g = rawBits(expected.dtype, got, i);
    if (e == g || (isNaNBits(expected.dtype, e) && isNaNBits(expected.dtype, g)))
      continue;
    if (first < 0)
      first = i;
    ++mismatches;
  }
  if (mismatches == 0)
    return ::testing::AssertionSuccess();
  uint32_t e = rawBits(expected.dtype, expected.data(), first), g = rawBits(expected.dtype, got, first);
  return ::testing::AssertionFailure()
         << mismatches << " of " << n << " elements differ (" << typeName(expected.dtype) << " "
         << shapeString(expected.shape) << "); first at flat " << first << " = [" << first / cols << ", "
         << first % cols << "]: expected " << hexBits(expected.dtype, e) << " (" << std::setprecision(9)
         << loadF32(expected.dtype, expected.data(), first) << "), got " << hexBits(expected.dtype, g) << " ("
         << loadF32(expected.dtype, got, first) << ")";
}

inline ::testing::AssertionResult bitsEqual(const TestTensor &expected, const HostTensor &got) {
  return bitsEqual(expected, got.type(), got.dims(), got.raw());
}

inline ::testing::AssertionResult bitsEqual(const TestTensor &expected, const TestTensor &got) {
  return bitsEqual(expected, got.dtype, got.shape, got.data());
}

/// A seed from std::random_device, to be printed with SCOPED_TRACE.
inline uint32_t freshSeed() {
  std::random_device rd;
  return rd();
}

/// The spec's §6 vectors (tests/data/test_vectors.json, from shared/spec/dump_vectors.py).
inline const nlohmann::json &vectors() {
  static nlohmann::json j = [] {
    std::ifstream in(std::string(MOEC_SOURCE_DIR) + "/tests/data/test_vectors.json");
    if (!in)
      throw std::runtime_error("cannot open tests/data/test_vectors.json");
    return nlohmann::json::parse(in);
  }();
  return j;
}

/// A [rows, cols] tensor of `dtype` from a vector's rows, rounded to nearest even.
inline TestTensor fromRows(const std::vector<std::vector<double>> &rows, DType dtype) {
  const int64_t n = static_cast<int64_t>(rows.size()), h = static_cast<int64_t>(rows.at(0).size());
  TestTensor t(dtype, {n, h});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < h; ++j)
      t.setF32(i * h + j, static_cast<float>(rows[i][j]));
  return t;
}

/// MOEC_TEST_SEED replays a failure; otherwise every run draws fresh data.
inline uint32_t testSeed() {
  if (const char *s = std::getenv("MOEC_TEST_SEED"))
    return static_cast<uint32_t>(std::strtoul(s, nullptr, 0));
  return freshSeed();
}

inline int64_t uniformInt(std::mt19937 &rng, int64_t lo, int64_t hi) { // inclusive
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

} // namespace moec::test

namespace moec::dsl {
/// Test names and failure messages show dtypes by name.
inline void PrintTo(DType t, std::ostream *os) { *os << dtypeName(t); }
} // namespace moec::dsl

/// A generator seeded per test, with the seed in every failure message.
#define SEEDED_RNG(rng)                                                                                    \
  const uint32_t seed_ = ::moec::test::testSeed();                                                         \
  SCOPED_TRACE("seed " + std::to_string(seed_) + " (replay with MOEC_TEST_SEED=" + std::to_string(seed_) + \
               ")");                                                                                       \
  std::mt19937 rng(seed_)
