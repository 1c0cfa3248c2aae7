//===- FuzzBundle.cpp - libFuzzer: the bundle reader -----------------------===//
//
// Every input becomes the bundle.json of a bundle directory that also holds the built-in ops' sources
// (<op>.moe) and a PTX file (kernel.ptx). Bundle::open must return a bundle or throw std::runtime_error
// (ArgumentError and DslError are runtime_errors too). An opened bundle's entries are then loaded on a
// fake CUDA driver (every call succeeds), by index and by request, as a program would.
//===----------------------------------------------------------------------===//
#include "moec/ops/BuiltinOps.h"
#include "moec/runtime/Bundle.h"
#include "moec/runtime/CudaDriver.h"

#include "FuzzUtil.h"

#include <cstring>

using namespace moec;
namespace fs = std::filesystem;

namespace {

CUresult ok() { return CUDA_SUCCESS; }

CudaDriverTable fakeDriver() {
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
  t.eventCreate = [](CUevent *e, unsigned) { *e = reinterpret_cast<CUevent>(0x40); return ok(); };
  t.eventRecord = [](CUevent, CUstream) { return ok(); };
  t.eventSynchronize = [](CUevent) { return ok(); };
  t.eventElapsedTime = [](float *ms, CUevent, CUevent) { *ms = 0; return ok(); };
  t.eventDestroy = [](CUevent) { return ok(); };
  t.getErrorName = [](CUresult, const char **s) { *s = "CUDA_ERROR_FAKE"; return ok(); };
  t.getErrorString = [](CUresult, const char **s) { *s = "fake"; return ok(); };
  return t;
}

const fs::path &bundleDir() {
  static const fs::path dir = [] {
    fs::path d = fuzz::scratchDir() / "bundle";
    fs::create_directories(d);
    for (const BuiltinOp &op : builtinOps())
      fuzz::writeFile(d / (std::string(op.name) + ".moe"), op.source);
    fuzz::writeFile(d / "kernel.ptx", std::string("// fake PTX\n.version 8.0\n.target sm_90\n"));
    return d;
  }();
  return dir;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 64 * 1024)
    return -1;
  static const std::unique_ptr<CudaDriver> driver = CudaDriver::fromTable(fakeDriver());
  const fs::path &dir = bundleDir();
  fuzz::writeFile(dir / "bundle.json", data, size);
  std::unique_ptr<Bundle> bundle;
  try {
    bundle = Bundle::open(dir, *driver);
  } catch (const std::runtime_error &) {
    return 0;
  }
  for (size_t i = 0; i < bundle->entries().size() && i < 8; ++i) {
    const Bundle::Entry &e = bundle->entries()[i];
    try {
      (void)bundle->get(i);
    } catch (const std::runtime_error &) {
    }
    KernelRequest request;
    request.dtype = e.dtype;
    request.attrs = e.statics;
    request.with = e.present;
    try {
      (void)bundle->get(e.op, request);
    } catch (const std::runtime_error &) {
    }
  }
  return 0;
}
