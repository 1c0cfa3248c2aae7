//===- CudaDriver.cpp ------------------------------------------------------===//
#include "moec/runtime/CudaDriver.h"

#include "moec/runtime/ptxemu/EmuDriver.h"

#include <cstdlib>
#include <cstring>

#include <cstdint>
#include <vector>

#include <dlfcn.h>

#include <cstdint>
#include <limits>

namespace moec {

namespace {

constexpr const char *kLibcuda = "libcuda.so.1";
constexpr size_t kJitLogBytes = 16 * 1024;

/// Resolves entry points from the opened driver, remembering the first one it lacks.
class SymbolLoader {
public:
  explicit SymbolLoader(void *handle) : handle(handle) {}

  /// `legacy`: the name a driver older than the toolkit exports for the same signature.
  template <typename Fn> void operator()(Fn &fn, const char *name, const char *legacy = nullptr) {
    void *symbol = dlsym(handle, name);
    if (!symbol && legacy)
      symbol = dlsym(handle, legacy);
    if (!symbol && missing.empty())
      missing = name;
    fn = reinterpret_cast<Fn>(symbol);
  }

  std::string missing;

private:
  void *handle;
};

// The exported names are the versioned ones cuda.h's #defines map to (cuMemAlloc -> cuMemAlloc_v2).
void loadTable(SymbolLoader &load, CudaDriverTable &t) {
  load(t.init, "cuInit");
  load(t.deviceGet, "cuDeviceGet");
  load(t.deviceGetCount, "cuDeviceGetCount");
  load(t.deviceGetAttribute, "cuDeviceGetAttribute");
  load(t.deviceGetName, "cuDeviceGetName");
  load(t.devicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  load(t.devicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
  load(t.ctxSetCurrent, "cuCtxSetCurrent");
  load(t.ctxGetCurrent, "cuCtxGetCurrent");
  load(t.moduleLoadDataEx, "cuModuleLoadDataEx");
  load(t.moduleUnload, "cuModuleUnload");
  load(t.moduleGetFunction, "cuModuleGetFunction");
  load(t.launchKernel, "cuLaunchKernel");
  load(t.streamSynchronize, "cuStreamSynchronize");
  load(t.ctxSynchronize, "cuCtxSynchronize");
  load(t.memAlloc, "cuMemAlloc_v2");
  load(t.memFree, "cuMemFree_v2");
  load(t.memcpyHtoD, "cuMemcpyHtoD_v2");
  load(t.memcpyDtoH, "cuMemcpyDtoH_v2");
  load(t.memcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
  load(t.memsetD8Async, "cuMemsetD8Async");
  load(t.eventCreate, "cuEventCreate");
  load(t.eventRecord, "cuEventRecord");
  load(t.eventSynchronize, "cuEventSynchronize");
  // _v2 appeared in CUDA 12.8 with the same signature; earlier drivers export only the plain name.
  load(t.eventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime");
  load(t.eventDestroy, "cuEventDestroy_v2");
  load(t.getErrorName, "cuGetErrorName");
  load(t.getErrorString, "cuGetErrorString");
}

/// Opens libcuda; on failure the table stays empty and the returned string says why.
std::string openLibcuda(CudaDriverTable &table) {
  // Never closed: the driver stays loaded for the life of the process, as the CUDA runtime does.
  void *handle = dlopen(kLibcuda, RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    return std::string("no CUDA driver: ") + dlerror();
  SymbolLoader load(handle);
  loadTable(load, table);
  if (!load.missing.empty()) {
    table = {};
    return std::string("CUDA driver too old: ") + kLibcuda + " does not export " + load.missing;
  }
  return {};
}

void checkDim(const char *what, unsigned value, unsigned limit) {
  if (value == 0 || value > limit)
    throw std::invalid_argument(std::string("CUDA launch: ") + what + " = " + std::to_string(value) +
                                " is outside [1, " + std::to_string(limit) + "]");
}

std::string dimText(CudaDim3 d) {
  return std::to_string(d.x) + "x" + std::to_string(d.y) + "x" + std::to_string(d.z);
}

void checkGeometry(CudaDim3 grid, CudaDim3 block) {
  constexpr unsigned kMaxGridX = std::numeric_limits<int32_t>::max();
  constexpr uint64_t kMaxBlockThreads = 1024;
  if (grid.x > kMaxGridX)
    throw std::invalid_argument("CUDA launch: grid.x = " + std::to_string(grid.x) + " exceeds the limit " +
                                std::to_string(kMaxGridX));
  checkDim("grid.y", grid.y, 65535);
  checkDim("grid.z", grid.z, 65535);
  checkDim("block.x", block.x, 1024);
  checkDim("block.y", block.y, 1024);
  checkDim("block.z", block.z, 64);
  uint64_t threads = uint64_t(block.x) * block.y * block.z;
  if (threads > kMaxBlockThreads)
    throw std::invalid_argument("CUDA launch: block " + dimText(block) + " has " + std::to_string(threads) +
                                " threads; the limit is " + std::to_string(kMaxBlockThreads));
}

} // namespace

//===- CudaDriver ---------------------------------------------------------===//

CudaDriver &CudaDriver::instance() {
  static CudaDriver &driver = []() -> CudaDriver & {
    const char *choice = std::getenv("MOEC_GPU");
    if (choice && std::strcmp(choice, "emu") == 0)
      return emulator();
    CudaDriverTable table;
    std::string error;
    if (choice && *choice && std::strcmp(choice, "cuda") != 0)
      error = std::string("MOEC_GPU=") + choice + ": expected 'cuda' (libcuda, the default) or 'emu' (the PTX emulator)";
    else
      error = openLibcuda(table);
    static CudaDriver system(table, std::move(error));
    return system;
  }();
  return driver;
}

CudaDriver &CudaDriver::emulator() {
  static CudaDriver driver(ptxemu::emulatorTable(), {});
  return driver;
}

std::unique_ptr<CudaDriver> CudaDriver::fromTable(const CudaDriverTable &table) {
  return std::unique_ptr<CudaDriver>(new CudaDriver(table, {}));
}

CudaDriver::CudaDriver(const CudaDriverTable &table, std::string loadError)
    : table(table), unavailable(std::move(loadError)) {
  if (unavailable.empty())
    initialize();
}

void CudaDriver::initialize() {
  const std::string noDevice = "CUDA driver found but no device: ";
  if (CUresult r = table.init(0); r != CUDA_SUCCESS) {
    unavailable = noDevice + "cuInit failed: " + errorText(r);
    return;
  }
  int count = 0;
  if (CUresult r = table.deviceGetCount(&count); r != CUDA_SUCCESS)
    unavailable = noDevice + "cuDeviceGetCount failed: " + errorText(r);
  else if (count == 0)
    unavailable = noDevice + "cuDeviceGetCount returned 0";
}

const CudaDriverTable &CudaDriver::api() const {
  if (!available())
    throw std::runtime_error(unavailable);
  return table;
}

std::string CudaDriver::errorText(CUresult r) const {
  const char *name = nullptr, *description = nullptr;
  // The error-name calls need no cuInit, so they also describe why cuInit failed.
  if (!table.getErrorName || table.getErrorName(r, &name) != CUDA_SUCCESS || !name)
    return "CUresult " + std::to_string(int(r));
  std::string text = name;
  if (table.getErrorString(r, &description) == CUDA_SUCCESS && description)
    text += std::string(" (") + description + ")";
  return text;
}

void CudaDriver::check(CUresult r, const char *call) const {
  if (r != CUDA_SUCCESS)
    throw CudaError(r, std::string(call) + " failed: " + errorText(r));
}

CUdevice CudaDriver::device(int ordinal) const {
  CUdevice dev = 0;
  check(api().deviceGet(&dev, ordinal), "cuDeviceGet");
  return dev;
}

std::string CudaDriver::deviceName(int ordinal) const {
  char name[256] = {};
  check(api().deviceGetName(name, sizeof(name), device(ordinal)), "cuDeviceGetName");
  return name;
}

int CudaDriver::computeCapability(int ordinal) const {
  CUdevice dev = device(ordinal);
  int major = 0, minor = 0;
  check(api().deviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
        "cuDeviceGetAttribute");
  check(api().deviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
        "cuDeviceGetAttribute");
  return major * 10 + minor;
}

std::string CudaDriver::archName(int ordinal) const {
  return "sm_" + std::to_string(computeCapability(ordinal));
}

//===- CudaModule ---------------------------------------------------------===//

CudaModule::CudaModule(const CudaDriver &driver, const std::string &ptx, std::shared_ptr<const CudaContext> context)
    : driver(driver), ctx(std::move(context)) {
  CudaContext::Scope current(driver, ctx.get());
  std::string infoLog(kJitLogBytes, '\0'), errorLog(kJitLogBytes, '\0');
  CUjit_option options[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  // Sizes travel in the pointer-sized option values, as the driver API defines.
  void *values[] = {infoLog.data(), reinterpret_cast<void *>(uintptr_t(kJitLogBytes)), errorLog.data(),
                    reinterpret_cast<void *>(uintptr_t(kJitLogBytes))};
  CUresult r = driver.api().moduleLoadDataEx(&module, ptx.c_str(), 4, options, values);
  info = infoLog.c_str();
  if (r != CUDA_SUCCESS) {
    std::string message = "cuModuleLoadDataEx failed: " + driver.errorText(r);
    if (errorLog[0])
      message += "\nJIT error log:\n" + std::string(errorLog.c_str());
    throw CudaError(r, message);
  }
}

CudaModule::~CudaModule() {
  // Errors are dropped: a destructor cannot throw, and a failed unload only leaks the module.
  try {
    CudaContext::Scope current(driver, ctx.get());
    driver.api().moduleUnload(module);
  } catch (const CudaError &) {
  }
}

CUfunction CudaModule::function(const std::string &name) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = functions.find(name);
  if (it != functions.end())
    return it->second;
  CUfunction f = nullptr;
  CUresult r = driver.api().moduleGetFunction(&f, module, name.c_str());
  driver.check(r, ("cuModuleGetFunction for kernel '" + name + "'").c_str());
  functions.emplace(name, f);
  return f;
}

//===- CudaBuffer ---------------------------------------------------------===//

CudaBuffer::CudaBuffer(const CudaDriver &driver, size_t bytes, std::shared_ptr<const CudaContext> context)
    : driver(driver), ctx(std::move(context)), bytes(bytes) {
  CudaContext::Scope current(driver, ctx.get());
  driver.check(driver.api().memAlloc(&ptr, bytes), "cuMemAlloc");
  std::vector<uint8_t> zeros(bytes, 0);
  if (CUresult r = driver.api().memcpyHtoD(ptr, zeros.data(), bytes); r != CUDA_SUCCESS) {
    driver.api().memFree(ptr);
    driver.check(r, "cuMemcpyHtoD");
  }
}

CudaBuffer::~CudaBuffer() {
  try { // errors are dropped, as in ~CudaModule
    CudaContext::Scope current(driver, ctx.get());
    driver.api().memFree(ptr);
  } catch (const CudaError &) {
  }
}

//===- Launch -------------------------------------------------------------===//

void launchCuda(const CudaDriver &driver, CUfunction f, CudaDim3 grid, CudaDim3 block, CUstream stream,
                void **kernelParams) {
  checkGeometry(grid, block);
  if (grid.x == 0)
    return;
  driver.check(driver.api().launchKernel(f, grid.x, grid.y, grid.z, block.x, block.y, block.z, 0, stream,
                                         kernelParams, nullptr),
               "cuLaunchKernel");
}

//===- CudaContext --------------------------------------------------------===//

CudaContext::CudaContext(const CudaDriver &driver, int ordinal) : driver(driver) {
  const CudaDriverTable &api = driver.api();
  driver.check(api.deviceGet(&dev, ordinal), "cuDeviceGet");
  driver.check(api.ctxGetCurrent(&previous), "cuCtxGetCurrent");
  driver.check(api.devicePrimaryCtxRetain(&context, dev), "cuDevicePrimaryCtxRetain");
  if (CUresult r = api.ctxSetCurrent(context); r != CUDA_SUCCESS) {
    api.devicePrimaryCtxRelease(dev);
    driver.check(r, "cuCtxSetCurrent");
  }
}

CudaContext::~CudaContext() {
  // Errors are dropped, as in ~CudaModule. Another thread (the last owner of a module) may destroy it.
  CUcontext current = nullptr;
  if (driver.api().ctxGetCurrent(&current) == CUDA_SUCCESS && current == context)
    driver.api().ctxSetCurrent(previous);
  driver.api().devicePrimaryCtxRelease(dev);
}

CudaContext::Scope::Scope(const CudaDriver &driver, const CudaContext *context) : driver(driver) {
  if (!context)
    return;
  driver.check(driver.api().ctxGetCurrent(&previous), "cuCtxGetCurrent");
  if (previous == context->handle())
    return;
  driver.check(driver.api().ctxSetCurrent(context->handle()), "cuCtxSetCurrent");
  switched = true;
}

CudaContext::Scope::~Scope() {
  if (switched)
    driver.api().ctxSetCurrent(previous);
}

} // namespace moec
