//===- DeviceTensors.cpp ---------------------------------------------------===//
#include "moec/runtime/DeviceTensors.h"

#include "moec/runtime/CudaDriver.h"

#include <stdexcept>

namespace moec {

namespace {
size_t byteSize(DType dtype, const std::vector<int64_t> &shape) {
  return size_t(TensorView{nullptr, dtype, shape}.elements()) * dsl::dtypeBytes(dtype);
}
} // namespace

DeviceTensors::~DeviceTensors() {
  for (CUdeviceptr p : buffers) // errors dropped: a destructor cannot throw, and a failed free only leaks
    driver.api().memFree(p);
}

CUdeviceptr DeviceTensors::allocateBytes(size_t bytes) {
  CUdeviceptr p = 0;
  driver.check(driver.api().memAlloc(&p, std::max<size_t>(bytes, 1)), "cuMemAlloc");
  buffers.push_back(p);
  return p;
}

TensorView DeviceTensors::upload(const void *data, DType dtype, const std::vector<int64_t> &shape) {
  size_t bytes = byteSize(dtype, shape);
  CUdeviceptr p = allocateBytes(bytes);
  if (bytes)
    driver.check(driver.api().memcpyHtoD(p, data, bytes), "cuMemcpyHtoD");
  return {reinterpret_cast<void *>(p), dtype, shape, {}, Device::Cuda};
}

TensorView DeviceTensors::upload(const TensorView &host) {
  if (!host.isContiguous())
    throw std::invalid_argument("DeviceTensors::upload: the host view " + host.shapeString() + " is not contiguous");
  return upload(host.data, host.dtype, host.shape);
}

TensorView DeviceTensors::allocate(DType dtype, const std::vector<int64_t> &shape, uint8_t fill) {
  std::vector<uint8_t> bytes(byteSize(dtype, shape), fill);
  return upload(bytes.data(), dtype, shape);
}

void DeviceTensors::download(HostTensor &to, const TensorView &from) const {
  if (to.bytes() != byteSize(from.dtype, from.shape))
    throw std::invalid_argument("DeviceTensors::download: " + std::to_string(to.bytes()) + " host bytes for device " +
                                "tensor " + from.shapeString());
  if (to.bytes())
    driver.check(driver.api().memcpyDtoH(to.raw(), reinterpret_cast<CUdeviceptr>(from.data), to.bytes()),
                 "cuMemcpyDtoH");
}

HostTensor DeviceTensors::download(const TensorView &from) const {
  HostTensor out(from.dtype, from.shape);
  download(out, from);
  return out;
}

} // namespace moec
