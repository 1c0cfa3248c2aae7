//===- Tensor.h - Tensor views the runtime checks and launches on -*- C++ -*-===//
#pragma once

#include "moec/dsl/AST.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moec {

using dsl::DType;

enum class Device { Host, Cuda };

/// The largest tensor moec handles, in bytes (256 TiB): far beyond any device, and far enough from int64
/// overflow that every index the kernels compute fits.
constexpr int64_t kMaxTensorBytes = int64_t(1) << 48;

/// The element count of `shape`, or nullopt when a dim is negative or the tensor would exceed
/// kMaxTensorBytes at `elemBytes` bytes per element (the product is computed overflow-safe).
std::optional<int64_t> checkedElements(const std::vector<int64_t> &shape, int64_t elemBytes);

/// A non-owning view of a tensor: pointer, element type, shape and strides (in elements).
struct TensorView {
  void *data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides; // empty: contiguous, row-major
  Device device = Device::Host;

  /// The element count; callers bind shapes with checkedElements() first (Binding does), so this cannot
  /// overflow for a view the runtime accepted.
  int64_t elements() const;
  /// Row-major (strides empty, or equal to the row-major ones where a dim is not 1); false for a stride
  /// count that differs from the rank.
  bool isContiguous() const;
  /// "[4, 7168]"
  std::string shapeString() const;
};

} // namespace moec
