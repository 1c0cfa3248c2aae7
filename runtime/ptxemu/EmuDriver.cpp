//===- EmuDriver.cpp - Driver entry points over the emulator --------------===//
//
// One process-wide device guarded by one mutex: modules, functions, memory, events. The handles the
// driver API hands out are pointers to objects kept here, and each is checked against the live set
// before use, so a stale or foreign handle is CUDA_ERROR_INVALID_HANDLE, never a crash.
//===----------------------------------------------------------------------===//
#include "moec/contracts/Schedule.h"
#include "moec/runtime/ptxemu/EmuDriver.h"

#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <utility>

namespace moec::ptxemu {

namespace {

struct EmuModule {
  Module module;
  std::string text;                                         // the PTX, for ptxas when registers are asked for
  std::optional<std::map<std::string, unsigned>> registers; // ptxas's counts, once asked for
};
struct EmuFunction {
  EmuModule *module;
  const Kernel *kernel;
};
using Clock = std::chrono::steady_clock;
struct EmuEvent {
  Clock::time_point at{};
  bool recorded = false;
};

struct Device {
  std::mutex mutex;
  DeviceMemory memory;
  std::set<EmuModule *> modules;
  std::set<EmuFunction *> functions;
  std::set<EmuEvent *> events;
  LaunchOptions options;
  std::vector<Profile> profiles;
};

Device &device() {
  static Device *d = new Device; // never destroyed: handles may be released during static destruction
  return *d;
}

// The message of the last failed call on this thread, for cuGetErrorString.
thread_local CUresult lastCode = CUDA_SUCCESS;
thread_local std::string lastDetail;

CUresult failWith(CUresult code, std::string detail) {
  lastCode = code;
  lastDetail = std::move(detail);
  return code;
}

int kContext = 1; // the one context's handle points here
CUcontext contextHandle() { return reinterpret_cast<CUcontext>(&kContext); }
thread_local CUcontext currentContext = nullptr;

struct ErrorText {
  CUresult code;
  const char *name, *description;
};
constexpr ErrorText kErrors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_TIMEOUT, "CUDA_ERROR_LAUNCH_TIMEOUT", "the launch timed out and was terminated"},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
    {CUDA_ERROR_MISALIGNED_ADDRESS, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"},
    {CUDA_ERROR_ILLEGAL_INSTRUCTION, "CUDA_ERROR_ILLEGAL_INSTRUCTION", "an illegal instruction was encountered"},
};

/// The jit option value for `which`, or null.
void *jitOption(unsigned n, CUjit_option *options, void **values, CUjit_option which) {
  for (unsigned i = 0; options && values && i < n; ++i)
    if (options[i] == which)
      return values[i];
  return nullptr;
}

void copyLog(unsigned n, CUjit_option *options, void **values, CUjit_option buffer, CUjit_option size,
             const std::string &text) {
  char *out = static_cast<char *>(jitOption(n, options, values, buffer));
  size_t capacity = reinterpret_cast<uintptr_t>(jitOption(n, options, values, size));
  if (!out || capacity == 0)
    return;
  size_t len = std::min(text.size(), capacity - 1);
  std::memcpy(out, text.data(), len);
  out[len] = '\0';
}

CUresult init(unsigned) { return CUDA_SUCCESS; }
CUresult deviceGet(CUdevice *d, int ordinal) {
  if (!d)
    return CUDA_ERROR_INVALID_VALUE;
  if (ordinal != 0)
    return CUDA_ERROR_INVALID_DEVICE;
  *d = 0;
  return CUDA_SUCCESS;
}
CUresult deviceGetCount(int *n) {
  if (!n)
    return CUDA_ERROR_INVALID_VALUE;
  *n = 1;
  return CUDA_SUCCESS;
}
CUresult deviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
  if (!v || d != 0)
    return CUDA_ERROR_INVALID_VALUE;
  switch (a) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
  case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = kWarpSize; break;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
  default: *v = 0; break;
  }
  return CUDA_SUCCESS;
}
CUresult deviceGetName(char *name, int len, CUdevice) {
  if (!name || len <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  std::strncpy(name, "moec PTX emulator (H200 model)", size_t(len) - 1);
  name[len - 1] = '\0';
  return CUDA_SUCCESS;
}
CUresult primaryRetain(CUcontext *c, CUdevice d) {
  if (!c || d != 0)
    return CUDA_ERROR_INVALID_VALUE;
  *c = contextHandle();
  return CUDA_SUCCESS;
}
CUresult primaryRelease(CUdevice) { return CUDA_SUCCESS; }
CUresult ctxSetCurrent(CUcontext c) {
  if (c && c != contextHandle())
    return CUDA_ERROR_INVALID_HANDLE;
  currentContext = c;
  return CUDA_SUCCESS;
}
CUresult ctxGetCurrent(CUcontext *c) {
  if (!c)
    return CUDA_ERROR_INVALID_VALUE;
  *c = currentContext;
  return CUDA_SUCCESS;
}

CUresult moduleLoad(CUmodule *m, const void *image, unsigned n, CUjit_option *options, void **values) {
  if (!m || !image)
    return CUDA_ERROR_INVALID_VALUE;
  auto module = std::make_unique<EmuModule>();
  try {
    module->text = static_cast<const char *>(image);
    module->module = parsePtx(module->text);
  } catch (const PtxError &e) {
    copyLog(n, options, values, CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, e.what());
    return failWith(CUDA_ERROR_INVALID_PTX, e.what());
  }
  copyLog(n, options, values, CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
          "moec PTX emulator: " + std::to_string(module->module.kernels.size()) + " kernels parsed");
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  *m = reinterpret_cast<CUmodule>(module.get());
  d.modules.insert(module.release());
  return CUDA_SUCCESS;
}

CUresult moduleUnload(CUmodule handle) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  auto *m = reinterpret_cast<EmuModule *>(handle);
  if (!d.modules.erase(m))
    return CUDA_ERROR_INVALID_HANDLE;
  for (auto it = d.functions.begin(); it != d.functions.end();)
    if ((*it)->module == m) {
      delete *it;
      it = d.functions.erase(it);
    } else {
      ++it;
    }
  delete m;
  return CUDA_SUCCESS;
}

CUresult moduleGetFunction(CUfunction *f, CUmodule handle, const char *name) {
  if (!f || !name)
    return CUDA_ERROR_INVALID_VALUE;
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  auto *m = reinterpret_cast<EmuModule *>(handle);
  if (!d.modules.count(m))
    return CUDA_ERROR_INVALID_HANDLE;
  const Kernel *k = m->module.find(name);
  if (!k)
    return failWith(CUDA_ERROR_NOT_FOUND, std::string("no kernel '") + name + "' in the module");
  auto *fn = new EmuFunction{m, k};
  d.functions.insert(fn);
  *f = reinterpret_cast<CUfunction>(fn);
  return CUDA_SUCCESS;
}

CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                unsigned sharedBytes, CUstream, void **params, void **extra) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  auto *fn = reinterpret_cast<EmuFunction *>(f);
  if (!d.functions.count(fn))
    return CUDA_ERROR_INVALID_HANDLE;
  if (extra)
    return failWith(CUDA_ERROR_INVALID_VALUE, "the emulator takes kernelParams, not extra");
  try {
    d.profiles.push_back(launchKernel(*fn->kernel, {gx, gy, gz}, {bx, by, bz}, sharedBytes, params, d.memory, d.options));
    if (d.options.registersFromPtxas) {
      EmuModule &m = *fn->module;
      if (!m.registers)
        m.registers = ptxasRegisters(m.text, m.module.target);
      auto it = m.registers->find(fn->kernel->name);
      d.profiles.back().registers = it == m.registers->end() ? 0 : it->second;
    }
    if (d.profiles.size() > 4096) // nobody is collecting them
      d.profiles.erase(d.profiles.begin(), d.profiles.begin() + 2048);
  } catch (const EmuFault &e) {
    return failWith(e.code(), e.what());
  }
  return CUDA_SUCCESS;
}

CUresult synchronize(CUstream) { return CUDA_SUCCESS; }
CUresult ctxSynchronize() { return CUDA_SUCCESS; }

CUresult memAlloc(CUdeviceptr *p, size_t bytes) {
  if (!p || bytes == 0)
    return CUDA_ERROR_INVALID_VALUE;
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  uint64_t a = d.memory.allocate(bytes);
  if (!a)
    return CUDA_ERROR_OUT_OF_MEMORY;
  *p = CUdeviceptr(a);
  return CUDA_SUCCESS;
}

CUresult memFree(CUdeviceptr p) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  return d.memory.release(p) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult copy(void *to, const void *from, size_t bytes) {
  if (bytes)
    std::memmove(to, from, bytes);
  return CUDA_SUCCESS;
}

CUresult memcpyHtoD(CUdeviceptr dst, const void *src, size_t bytes) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  uint8_t *p = d.memory.find(dst, bytes);
  if (!p || (!src && bytes))
    return failWith(CUDA_ERROR_INVALID_VALUE, "cuMemcpyHtoD: the destination range is not allocated");
  return copy(p, src, bytes);
}

CUresult memcpyDtoH(void *dst, CUdeviceptr src, size_t bytes) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  uint8_t *p = d.memory.find(src, bytes);
  if (!p || (!dst && bytes))
    return failWith(CUDA_ERROR_INVALID_VALUE, "cuMemcpyDtoH: the source range is not allocated");
  return copy(dst, p, bytes);
}

CUresult memcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  uint8_t *to = d.memory.find(dst, bytes), *from = d.memory.find(src, bytes);
  if (!to || !from)
    return failWith(CUDA_ERROR_INVALID_VALUE, "cuMemcpyDtoD: a range is not allocated");
  return copy(to, from, bytes);
}

CUresult memsetD8(CUdeviceptr dst, unsigned char value, size_t bytes, CUstream) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  uint8_t *to = d.memory.find(dst, bytes);
  if (!to)
    return failWith(CUDA_ERROR_INVALID_VALUE, "cuMemsetD8Async: the range is not allocated");
  std::memset(to, value, bytes);
  return CUDA_SUCCESS;
}

CUresult eventCreate(CUevent *e, unsigned) {
  if (!e)
    return CUDA_ERROR_INVALID_VALUE;
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  auto *ev = new EmuEvent;
  d.events.insert(ev);
  *e = reinterpret_cast<CUevent>(ev);
  return CUDA_SUCCESS;
}

EmuEvent *findEvent(CUevent e) {
  auto *ev = reinterpret_cast<EmuEvent *>(e);
  return device().events.count(ev) ? ev : nullptr;
}

CUresult eventRecord(CUevent e, CUstream) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  EmuEvent *ev = findEvent(e);
  if (!ev)
    return CUDA_ERROR_INVALID_HANDLE;
  ev->at = Clock::now(); // launches run synchronously: the host's clock is the device's
  ev->recorded = true;
  return CUDA_SUCCESS;
}

CUresult eventSynchronize(CUevent e) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  return findEvent(e) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult eventElapsed(float *ms, CUevent a, CUevent b) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  EmuEvent *x = findEvent(a), *y = findEvent(b);
  if (!ms || !x || !y)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!x->recorded || !y->recorded)
    return CUDA_ERROR_NOT_READY;
  *ms = std::chrono::duration<float, std::milli>(y->at - x->at).count();
  return CUDA_SUCCESS;
}

CUresult eventDestroy(CUevent e) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  auto *ev = reinterpret_cast<EmuEvent *>(e);
  if (!d.events.erase(ev))
    return CUDA_ERROR_INVALID_HANDLE;
  delete ev;
  return CUDA_SUCCESS;
}

CUresult errorName(CUresult r, const char **s) {
  for (const ErrorText &e : kErrors)
    if (e.code == r) {
      *s = e.name;
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult errorString(CUresult r, const char **s) {
  for (const ErrorText &e : kErrors)
    if (e.code == r) {
      thread_local std::string text;
      text = e.description;
      if (r == lastCode && !lastDetail.empty())
        text += ": " + lastDetail;
      *s = text.c_str();
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_INVALID_VALUE;
}

} // namespace

CudaDriverTable emulatorTable() {
  CudaDriverTable t;
  t.init = init;
  t.deviceGet = deviceGet;
  t.deviceGetCount = deviceGetCount;
  t.deviceGetAttribute = deviceGetAttribute;
  t.deviceGetName = deviceGetName;
  t.devicePrimaryCtxRetain = primaryRetain;
  t.devicePrimaryCtxRelease = primaryRelease;
  t.ctxSetCurrent = ctxSetCurrent;
  t.ctxGetCurrent = ctxGetCurrent;
  t.moduleLoadDataEx = moduleLoad;
  t.moduleUnload = moduleUnload;
  t.moduleGetFunction = moduleGetFunction;
  t.launchKernel = launch;
  t.streamSynchronize = synchronize;
  t.ctxSynchronize = ctxSynchronize;
  t.memAlloc = memAlloc;
  t.memFree = memFree;
  t.memcpyHtoD = memcpyHtoD;
  t.memcpyDtoH = memcpyDtoH;
  t.memcpyDtoDAsync = memcpyDtoD;
  t.memsetD8Async = memsetD8;
  t.eventCreate = eventCreate;
  t.eventRecord = eventRecord;
  t.eventSynchronize = eventSynchronize;
  t.eventElapsedTime = eventElapsed;
  t.eventDestroy = eventDestroy;
  t.getErrorName = errorName;
  t.getErrorString = errorString;
  return t;
}

void setLaunchOptions(const LaunchOptions &options) {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  d.options = options;
}

LaunchOptions launchOptions() {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  return d.options;
}

std::vector<Profile> takeProfiles() {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  return std::exchange(d.profiles, {});
}

size_t allocatedBytes() {
  Device &d = device();
  std::lock_guard<std::mutex> lock(d.mutex);
  return d.memory.allocatedBytes();
}

} // namespace moec::ptxemu
