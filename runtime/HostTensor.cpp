//===- HostTensor.cpp ----------------------------------------------------------===//
#include "moec/runtime/HostTensor.h"

#include "moec/contracts/Half.h"

#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace moec {

void HostTensor::Free::operator()(void *p) const { std::free(p); }

HostTensor::HostTensor(DType dtype, std::vector<int64_t> shape) : dtype(dtype), shape(std::move(shape)) {
  TensorView shapeOnly{nullptr, dtype, this->shape};
  if (!checkedElements(this->shape, dsl::dtypeBytes(dtype)))
    throw std::length_error("a tensor of shape " + shapeOnly.shapeString() + " and dtype " + dsl::dtypeName(dtype) +
                            " is over moec's limit of " + std::to_string(kMaxTensorBytes) + " bytes");
  size_t size = (bytes() + 63) / 64 * 64;
  data.reset(std::aligned_alloc(64, size == 0 ? 64 : size));
  if (!data)
    throw std::runtime_error("cannot allocate " + std::to_string(size) + " bytes for a tensor of shape " +
                             shapeOnly.shapeString());
  std::memset(data.get(), 0, size == 0 ? 64 : size);
}

int64_t HostTensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

size_t HostTensor::bytes() const { return static_cast<size_t>(elements()) * dsl::dtypeBytes(dtype); }

namespace {

template <typename From, typename To, typename F> void convert(const NpyArray &a, void *out, F f) {
  const auto *in = reinterpret_cast<const uint8_t *>(a.data.data());
  auto *dst = static_cast<To *>(out);
  for (int64_t i = 0, n = a.elements(); i < n; ++i) {
    From x;
    std::memcpy(&x, in + i * sizeof(From), sizeof(From));
    dst[i] = f(x, i);
  }
}

template <typename T> T same(T x, int64_t) { return x; }

} // namespace

HostTensor HostTensor::fromNpy(const NpyArray &a, DType dtype, const std::string &name) {
  HostTensor t(dtype, a.shape);
  auto mismatch = [&](const char *accepted) {
    return std::runtime_error("tensor '" + name + "' is " + dsl::dtypeName(dtype) + ": expected " + accepted +
                              " .npy data, got " + npyTypeName(a.type));
  };
  switch (dtype) {
  case DType::F32:
    if (a.type == NpyType::F32)
      convert<float, float>(a, t.raw(), same<float>);
    else if (a.type == NpyType::F16)
      convert<uint16_t, float>(a, t.raw(), [](uint16_t h, int64_t) { return f16ToFloat(h); });
    else if (a.type == NpyType::F64)
      convert<double, float>(a, t.raw(), [](double d, int64_t) { return static_cast<float>(d); });
    else
      throw mismatch("float32, float16 or float64");
    break;
  case DType::BF16:
    if (a.type != NpyType::F32)
      throw mismatch("float32");
    convert<float, uint16_t>(a, t.raw(), [](float f, int64_t) { return floatToBf16(f); });
    break;
  case DType::F16:
    if (a.type == NpyType::F16)
      convert<uint16_t, uint16_t>(a, t.raw(), same<uint16_t>);
    else if (a.type == NpyType::F32)
      convert<float, uint16_t>(a, t.raw(), [](float f, int64_t) { return floatToF16(f); });
    else
      throw mismatch("float16 or float32");
    break;
  case DType::I32:
    if (a.type == NpyType::I32) {
      convert<int32_t, int32_t>(a, t.raw(), same<int32_t>);
    } else if (a.type == NpyType::I64) {
      convert<int64_t, int32_t>(a, t.raw(), [&](int64_t v, int64_t i) {
        if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
          throw std::runtime_error("tensor '" + name + "' element " + std::to_string(i) + " is " +
                                   std::to_string(v) + ", which does not fit i32");
        return static_cast<int32_t>(v);
      });
    } else {
      throw mismatch("int32 or int64");
    }
    break;
  case DType::I8:
    if (a.type != NpyType::I8)
      throw mismatch("int8");
    convert<int8_t, int8_t>(a, t.raw(), same<int8_t>);
    break;
  case DType::Bool:
    if (a.type != NpyType::Bool && a.type != NpyType::U8 && a.type != NpyType::I8)
      throw mismatch("bool, uint8 or int8");
    convert<uint8_t, uint8_t>(a, t.raw(), [](uint8_t v, int64_t) { return static_cast<uint8_t>(v != 0); });
    break;
  }
  return t;
}

NpyArray HostTensor::toNpy() const {
  NpyArray a;
  a.shape = shape;
  const auto *src = static_cast<const uint8_t *>(raw());
  switch (dtype) {
  case DType::BF16: {
    a.type = NpyType::F32;
    a.data.resize(elements() * 4);
    for (int64_t i = 0; i < elements(); ++i) {
      uint16_t b;
      std::memcpy(&b, src + 2 * i, 2);
      float f = bf16ToFloat(b);
      std::memcpy(a.data.data() + 4 * i, &f, 4);
    }
    return a;
  }
  case DType::F32: a.type = NpyType::F32; break;
  case DType::F16: a.type = NpyType::F16; break;
  case DType::I32: a.type = NpyType::I32; break;
  case DType::I8: a.type = NpyType::I8; break;
  case DType::Bool: a.type = NpyType::Bool; break;
  }
  a.data.assign(src, src + bytes());
  return a;
}

} // namespace moec
