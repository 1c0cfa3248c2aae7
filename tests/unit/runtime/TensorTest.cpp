//===- TensorTest.cpp - TensorView ----------------------------------------===//
#include "moec/runtime/Tensor.h"

#include <gtest/gtest.h>

#include <cstdint>

using namespace moec;

TEST(TensorView, ContiguousStrides) {
  EXPECT_TRUE((TensorView{nullptr, DType::F32, {2, 3}, {}}).isContiguous());
  EXPECT_TRUE((TensorView{nullptr, DType::F32, {2, 3}, {3, 1}}).isContiguous());
  EXPECT_TRUE((TensorView{nullptr, DType::F32, {1, 3}, {99, 1}}).isContiguous()); // dims of 1: any stride
  EXPECT_FALSE((TensorView{nullptr, DType::F32, {2, 3}, {1, 2}}).isContiguous());
}

// Found by fuzz-run-args: a stride count that differs from the rank was read out of bounds.
TEST(TensorView, StrideCountThatDiffersFromTheRankIsNotContiguous) {
  EXPECT_FALSE((TensorView{nullptr, DType::F32, {2, 3, 4}, {1}}).isContiguous());
  EXPECT_FALSE((TensorView{nullptr, DType::F32, {2}, {1, 1, 1}}).isContiguous());
}

TEST(TensorView, HugeShapesDoNotOverflow) {
  TensorView v{nullptr, DType::F32, {INT64_MAX, INT64_MAX, 2}, {0, 2, 1}};
  EXPECT_FALSE(v.isContiguous());
}
