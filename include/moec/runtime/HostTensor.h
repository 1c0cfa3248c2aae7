//===- HostTensor.h - Owned host tensors, converted from and to .npy -*- C++ -*-===//
#pragma once

#include "moec/contracts/Npy.h"
#include "moec/runtime/Tensor.h"

#include <memory>
#include <string>

namespace moec {

/// A contiguous host tensor that owns 64-byte-aligned, zero-initialized storage.
class HostTensor {
public:
  HostTensor(DType dtype, std::vector<int64_t> shape);

  TensorView view() { return {data.get(), dtype, shape, {}, Device::Host}; }
  void *raw() { return data.get(); }
  const void *raw() const { return data.get(); }
  DType type() const { return dtype; }
  const std::vector<int64_t> &dims() const { return shape; }
  int64_t elements() const;
  size_t bytes() const;

  /// Converts an .npy array to `dtype` for tensor `name`: exact where the types match, f32 -> bf16/f16 and
  /// f64 -> f32 rounded to nearest even, i64 -> i32 when every value fits. Anything else throws
  /// std::runtime_error naming the tensor, the type it needs and the type it got.
  static HostTensor fromNpy(const NpyArray &array, DType dtype, const std::string &name);

  /// The tensor as .npy: bf16 is widened exactly to float32 (numpy has no bf16).
  NpyArray toNpy() const;

private:
  struct Free {
    void operator()(void *p) const;
  };
  DType dtype;
  std::vector<int64_t> shape;
  std::unique_ptr<void, Free> data;
};

} // namespace moec
