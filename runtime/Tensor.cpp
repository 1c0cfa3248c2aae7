//===- Tensor.cpp ------------------------------------------------------------===//
#include "moec/runtime/Tensor.h"

#include <algorithm>

namespace moec {

std::optional<int64_t> checkedElements(const std::vector<int64_t> &shape, int64_t elemBytes) {
  int64_t n = 1;
  bool empty = false;
  for (int64_t d : shape) {
    if (d < 0)
      return std::nullopt;
    empty |= d == 0;
    // A zero dim makes the tensor empty, but the other dims still must not overflow on their own: the
    // kernels multiply them into row strides.
    if (d != 0 && __builtin_mul_overflow(n, d, &n))
      return std::nullopt;
  }
  int64_t bytes;
  if (__builtin_mul_overflow(n, std::max<int64_t>(elemBytes, 1), &bytes) || bytes > kMaxTensorBytes)
    return std::nullopt;
  return empty ? 0 : n;
}

int64_t TensorView::elements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

bool TensorView::isContiguous() const {
  if (strides.empty())
    return true;
  if (strides.size() != shape.size()) // one stride per dim, or the view is malformed
    return false;
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expected)
      return false;
    if (i > 0 && __builtin_mul_overflow(expected, shape[i], &expected))
      return false; // no tensor that large exists
  }
  return true;
}

std::string TensorView::shapeString() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

} // namespace moec
