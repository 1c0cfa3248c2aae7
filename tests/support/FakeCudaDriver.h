//===- FakeCudaDriver.h - A CUDA driver table for tests, no GPU needed -*- C++ -*-===//
//
// Every entry succeeds: one device (compute capability 9.0, "fake H200"), fixed handles, memory calls that
// touch nothing. Tests and fuzzers replace the entries they observe (module loads, launches) and hand the
// table to CudaDriver::fromTable.
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/runtime/CudaDriver.h"

#include <cstring>

namespace moec::fake {

inline CUresult ok() { return CUDA_SUCCESS; }

inline CudaDriverTable fakeCudaDriverTable() {
  CudaDriverTable t;
  t.init = [](unsigned) { return ok(); };
  t.deviceGet = [](CUdevice *d, int) { *d = 0; return ok(); };
  t.deviceGetCount = [](int *n) { *n = 1; return ok(); };
  t.deviceGetAttribute = [](int *v, CUdevice_attribute a, CUdevice) {
    *v = a == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR ? 9 : 0;
    return ok();
  };
  t.deviceGetName = [](char *name, int len, CUdevice) {
    std::strncpy(name, "fake H200", size_t(len));
    return ok();
  };
  t.devicePrimaryCtxRetain = [](CUcontext *c, CUdevice) { *c = reinterpret_cast<CUcontext>(0x10); return ok(); };
  t.devicePrimaryCtxRelease = [](CUdevice) { return ok(); };
  t.ctxSetCurrent = [](CUcontext) { return ok(); };
  t.ctxGetCurrent = [](CUcontext *c) { *c = nullptr; return ok(); };
  t.moduleLoadDataEx = [](CUmodule *m, const void *, unsigned, CUjit_option *, void **) {
    *m = reinterpret_cast<CUmodule>(0x20);
    return ok();
  };
  t.moduleUnload = [](CUmodule) { return ok(); };
  t.moduleGetFunction = [](CUfunction *f, CUmodule, const char *) {
    *f = reinterpret_cast<CUfunction>(0x30);
    return ok();
  };
  t.launchKernel = [](CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                      void **, void **) { return ok(); };
  t.streamSynchronize = [](CUstream) { return ok(); };
  t.ctxSynchronize = []() { return ok(); };
  t.memAlloc = [](CUdeviceptr *p, size_t) { *p = 0x1000; return ok(); };
  t.memFree = [](CUdeviceptr) { return ok(); };
  t.memcpyHtoD = [](CUdeviceptr, const void *, size_t) { return ok(); };
  t.memcpyDtoH = [](void *, CUdeviceptr, size_t) { return ok(); };
  t.memcpyDtoDAsync = [](CUdeviceptr, CUdeviceptr, size_t, CUstream) { return ok(); };
  t.memsetD8Async = [](CUdeviceptr, unsigned char, size_t, CUstream) { return ok(); };
  t.eventCreate = [](CUevent *e, unsigned) { *e = reinterpret_cast<CUevent>(0x40); return ok(); };
  t.eventRecord = [](CUevent, CUstream) { return ok(); };
  t.eventSynchronize = [](CUevent) { return ok(); };
  t.eventElapsedTime = [](float *ms, CUevent, CUevent) { *ms = 0; return ok(); };
  t.eventDestroy = [](CUevent) { return ok(); };
  t.getErrorName = [](CUresult, const char **s) { *s = "CUDA_ERROR_FAKE"; return ok(); };
  t.getErrorString = [](CUresult, const char **s) { *s = "fake"; return ok(); };
  return t;
}

} // namespace moec::fake
