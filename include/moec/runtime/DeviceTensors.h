//===- DeviceTensors.h - Host tensors copied to a CUDA device ---*- C++ -*-===//
//
// The buffers of one call on a device (a GPU, or the PTX emulator): each upload allocates, copies or fills,
// and returns a Device::Cuda view; download copies an output back; everything is freed on destruction.
// Used by `moec run`, `moec bench`, runOnDevice, the GPU check and the tests.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/runtime/CudaTypes.h"
#include "moec/runtime/HostTensor.h"
#include "moec/runtime/Tensor.h"

#include <optional>
#include <vector>

namespace moec {

class CudaDriver;

class DeviceTensors {
public:
  explicit DeviceTensors(const CudaDriver &driver) : driver(driver) {}
  ~DeviceTensors();
  DeviceTensors(const DeviceTensors &) = delete;
  DeviceTensors &operator=(const DeviceTensors &) = delete;

  /// A device tensor shaped like `t` holding its bytes.
  TensorView upload(const HostTensor &t) { return upload(t.raw(), t.type(), t.dims()); }
  /// A contiguous host view's bytes on the device.
  TensorView upload(const TensorView &host);
  TensorView upload(const void *data, DType dtype, const std::vector<int64_t> &shape);
  /// A device tensor of `dtype` and `shape` whose bytes are all `fill` (0xFF: NaN in every float type, so
  /// an element a kernel never writes shows).
  TensorView allocate(DType dtype, const std::vector<int64_t> &shape, uint8_t fill = 0);
  /// Copies device tensor `from` into `to` (same byte size).
  void download(HostTensor &to, const TensorView &from) const;
  HostTensor download(const TensorView &from) const;

private:
  CUdeviceptr allocateBytes(size_t bytes);
  const CudaDriver &driver;
  std::vector<CUdeviceptr> buffers;
};

} // namespace moec
