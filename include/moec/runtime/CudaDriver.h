//===- CudaDriver.h - The CUDA driver API, loaded at run time -----*- C++ -*-===//
//
// moec never links libcuda: the driver is opened with dlopen on first use, so every binary builds and runs
// on machines without a GPU, and reports why CUDA is unavailable instead of failing to start. The types are
// moec's (CudaTypes.h), so neither moec nor a project using it needs the CUDA toolkit to build. A table of
// entry points can also be supplied directly (a fake driver in tests).
//===----------------------------------------------------------------------===//
#pragma once

#include "moec/runtime/CudaTypes.h"

#include <cstddef>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

namespace moec {

/// The device moec's kernels run on and its buffers live on: the process's first (CUDA_VISIBLE_DEVICES says
/// which GPU that is).
constexpr int kCudaDevice = 0;

/// The driver entry points moec uses, with cuda.h's signatures (CudaTypesTest checks them against cuda.h's).
/// The driver exports several under versioned names (cuMemAlloc_v2: CudaDriver.cpp loads those).
struct CudaDriverTable {
  CUresult (*init)(unsigned flags) = nullptr;
  CUresult (*deviceGet)(CUdevice *device, int ordinal) = nullptr;
  CUresult (*deviceGetCount)(int *count) = nullptr;
  CUresult (*deviceGetAttribute)(int *value, CUdevice_attribute attribute, CUdevice device) = nullptr;
  CUresult (*deviceGetName)(char *name, int length, CUdevice device) = nullptr;
  CUresult (*devicePrimaryCtxRetain)(CUcontext *context, CUdevice device) = nullptr;
  CUresult (*devicePrimaryCtxRelease)(CUdevice device) = nullptr;
  CUresult (*ctxSetCurrent)(CUcontext context) = nullptr;
  CUresult (*ctxGetCurrent)(CUcontext *context) = nullptr;
  CUresult (*moduleLoadDataEx)(CUmodule *module, const void *image, unsigned optionCount, CUjit_option *options,
                               void **optionValues) = nullptr;
  CUresult (*moduleUnload)(CUmodule module) = nullptr;
  CUresult (*moduleGetFunction)(CUfunction *function, CUmodule module, const char *name) = nullptr;
  CUresult (*launchKernel)(CUfunction function, unsigned gridX, unsigned gridY, unsigned gridZ, unsigned blockX,
                           unsigned blockY, unsigned blockZ, unsigned sharedBytes, CUstream stream, void **params,
                           void **extra) = nullptr;
  CUresult (*streamSynchronize)(CUstream stream) = nullptr;
  CUresult (*ctxSynchronize)() = nullptr;
  CUresult (*memAlloc)(CUdeviceptr *pointer, size_t bytes) = nullptr;
  CUresult (*memFree)(CUdeviceptr pointer) = nullptr;
  CUresult (*memcpyHtoD)(CUdeviceptr to, const void *from, size_t bytes) = nullptr;
  CUresult (*memcpyDtoH)(void *to, CUdeviceptr from, size_t bytes) = nullptr;
  CUresult (*memcpyDtoDAsync)(CUdeviceptr to, CUdeviceptr from, size_t bytes, CUstream stream) = nullptr;
  CUresult (*memsetD8Async)(CUdeviceptr to, unsigned char value, size_t bytes, CUstream stream) = nullptr;
  CUresult (*eventCreate)(CUevent *event, unsigned flags) = nullptr;
  CUresult (*eventRecord)(CUevent event, CUstream stream) = nullptr;
  CUresult (*eventSynchronize)(CUevent event) = nullptr;
  CUresult (*eventElapsedTime)(float *milliseconds, CUevent start, CUevent end) = nullptr;
  CUresult (*eventDestroy)(CUevent event) = nullptr;
  CUresult (*getErrorName)(CUresult error, const char **name) = nullptr;
  CUresult (*getErrorString)(CUresult error, const char **text) = nullptr;
};

/// A failed driver call; what() reads "cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE (invalid argument)".
class CudaError : public std::runtime_error {
public:
  CudaError(CUresult result, const std::string &message) : std::runtime_error(message), code(result) {}
  CUresult result() const { return code; }

private:
  CUresult code;
};

class CudaDriver {
public:
  /// The process-wide driver: libcuda.so.1, opened and initialized once (thread-safe) on first call;
  /// the PTX emulator instead when the environment says MOEC_GPU=emu.
  static CudaDriver &instance();
  /// The process-wide PTX emulator (runtime/ptxemu): PTX executed on the host, behind the same API.
  static CudaDriver &emulator();
  /// A driver over the given entry points, all of which must be set; cuInit runs here as it does for
  /// instance().
  static std::unique_ptr<CudaDriver> fromTable(const CudaDriverTable &table);

  CudaDriver(const CudaDriver &) = delete;
  CudaDriver &operator=(const CudaDriver &) = delete;

  /// True when the driver loaded, cuInit succeeded and there is at least one device.
  bool available() const { return unavailable.empty(); }
  /// Why available() is false; empty when it is true.
  const std::string &unavailableReason() const { return unavailable; }
  /// The entry points; throws std::runtime_error with unavailableReason() when the driver is unavailable.
  const CudaDriverTable &api() const;

  /// Throws CudaError unless r is CUDA_SUCCESS; `call` names the entry point (or the operation).
  void check(CUresult r, const char *call) const;
  /// "CUDA_ERROR_INVALID_VALUE (invalid argument)", or "CUresult 999" for a code the driver does not know.
  std::string errorText(CUresult r) const;

  std::string deviceName(int ordinal) const;
  /// major * 10 + minor, e.g. 90 for an H100.
  int computeCapability(int ordinal) const;
  /// The PTX target of the device, e.g. "sm_90".
  std::string archName(int ordinal) const;

private:
  CudaDriver(const CudaDriverTable &table, std::string loadError);
  void initialize();
  CUdevice device(int ordinal) const;

  CudaDriverTable table;
  std::string unavailable;
};

class CudaContext;

/// A module loaded from PTX text; unloaded on destruction. function() may be called from several threads.
/// A module given its context keeps that context alive and makes it current to load, launch and unload,
/// so modules may outlive whoever created the context and may be used from any thread.
class CudaModule {
public:
  /// Throws CudaError with the JIT's error log when the PTX does not compile.
  CudaModule(const CudaDriver &driver, const std::string &ptx, std::shared_ptr<const CudaContext> context = nullptr);
  ~CudaModule();
  CudaModule(const CudaModule &) = delete;
  CudaModule &operator=(const CudaModule &) = delete;

  /// The kernel `name` (looked up once, then cached); the CudaError on failure names the kernel.
  CUfunction function(const std::string &name);
  CUmodule handle() const { return module; }
  /// What the JIT reported on success (register and spill counts), possibly empty.
  const std::string &infoLog() const { return info; }
  /// The context the module lives in (null when none was given: the caller's current one).
  const CudaContext *context() const { return ctx.get(); }
  const std::shared_ptr<const CudaContext> &contextShared() const { return ctx; }

private:
  const CudaDriver &driver;
  std::shared_ptr<const CudaContext> ctx; // outlives the module: released after the unload
  CUmodule module = nullptr;
  std::string info;
  std::mutex mutex; // guards functions
  std::unordered_map<std::string, CUfunction> functions;
};

/// Device memory in a context, zero-filled at allocation and freed (with its context current) on
/// destruction.
class CudaBuffer {
public:
  CudaBuffer(const CudaDriver &driver, size_t bytes, std::shared_ptr<const CudaContext> context);
  ~CudaBuffer();
  CudaBuffer(const CudaBuffer &) = delete;
  CudaBuffer &operator=(const CudaBuffer &) = delete;

  CUdeviceptr pointer() const { return ptr; }
  size_t size() const { return bytes; }

private:
  const CudaDriver &driver;
  std::shared_ptr<const CudaContext> ctx;
  CUdeviceptr ptr = 0;
  size_t bytes;
};

struct CudaDim3 {
  unsigned x = 1, y = 1, z = 1;
};

/// Launches f after checking the geometry against CUDA's limits (std::invalid_argument on a violation).
/// A grid with x == 0 (an empty tensor) launches nothing.
void launchCuda(const CudaDriver &driver, CUfunction f, CudaDim3 grid, CudaDim3 block, CUstream stream,
                void **kernelParams);

/// Retains the primary context of a device and makes it current on the calling thread; the destructor
/// restores the previously current context (when this one is still current there) and releases the
/// primary one.
class CudaContext {
public:
  explicit CudaContext(const CudaDriver &driver, int ordinal = kCudaDevice);
  ~CudaContext();
  CudaContext(const CudaContext &) = delete;
  CudaContext &operator=(const CudaContext &) = delete;

  CUcontext handle() const { return context; }
  CUdevice device() const { return dev; }

  /// Makes `context` current on the calling thread for its lifetime (nothing when it already is, or when
  /// `context` is null), then restores the previous one.
  class Scope {
  public:
    Scope(const CudaDriver &driver, const CudaContext *context);
    ~Scope();
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

  private:
    const CudaDriver &driver;
    CUcontext previous = nullptr;
    bool switched = false;
  };

private:
  const CudaDriver &driver;
  CUdevice dev = 0;
  CUcontext context = nullptr;
  CUcontext previous = nullptr;
};

} // namespace moec
