//===- CudaDriverTest.cpp - The CUDA driver layer over a fake driver ------===//
//
// The fake entry points record what they receive in a global log and return results the test configures,
// so module loading, launches and contexts are checked without a GPU. One test uses the real loader: here
// (no libcuda) it must report why CUDA is unavailable; on a GPU machine it must find the device.
//===----------------------------------------------------------------------===//
#include "moec/runtime/CudaDriver.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace moec {
namespace {

// Handles the fake driver hands out; never dereferenced.
CUcontext const kPrimaryCtx = reinterpret_cast<CUcontext>(0x100);
CUcontext const kOtherCtx = reinterpret_cast<CUcontext>(0x200);
CUmodule const kModule = reinterpret_cast<CUmodule>(0x300);
CUfunction const kFunction = reinterpret_cast<CUfunction>(0x400);
CUstream const kStream = reinterpret_cast<CUstream>(0x500);

struct Launch {
  CUfunction f;
  unsigned grid[3], block[3], sharedMem;
  CUstream stream;
  void **params, **extra;
};

/// What the fakes record, and the results they return.
struct FakeState {
  std::vector<std::string> calls;
  CUresult initResult = CUDA_SUCCESS;
  int deviceCount = 1;
  CUcontext current = nullptr;
  CUresult setCurrentResult = CUDA_SUCCESS;
  std::string loadedImage;
  std::vector<CUjit_option> loadOptions;
  CUresult loadResult = CUDA_SUCCESS;
  const char *infoLog = "";
  const char *errorLog = "";
  std::vector<Launch> launches;
  CUresult launchResult = CUDA_SUCCESS;
} g;

CUresult fakeInit(unsigned flags) {
  g.calls.push_back("cuInit(" + std::to_string(flags) + ")");
  return g.initResult;
}

CUresult fakeDeviceGetCount(int *count) {
  *count = g.deviceCount;
  return CUDA_SUCCESS;
}

CUresult fakeDeviceGet(CUdevice *dev, int ordinal) {
  *dev = ordinal + 10; // distinct from the ordinal, to see which one is passed on
  return CUDA_SUCCESS;
}

CUresult fakeDeviceGetAttribute(int *value, CUdevice_attribute attribute, CUdevice) {
  *value = attribute == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR ? 9 : 0;
  return CUDA_SUCCESS;
}

CUresult fakeDeviceGetName(char *name, int len, CUdevice dev) {
  std::snprintf(name, len, "Fake GPU %d", dev);
  return CUDA_SUCCESS;
}

CUresult fakePrimaryCtxRetain(CUcontext *ctx, CUdevice dev) {
  g.calls.push_back("retain(" + std::to_string(dev) + ")");
  *ctx = kPrimaryCtx;
  return CUDA_SUCCESS;
}

CUresult fakePrimaryCtxRelease(CUdevice dev) {
  g.calls.push_back("release(" + std::to_string(dev) + ")");
  return CUDA_SUCCESS;
}

CUresult fakeCtxSetCurrent(CUcontext ctx) {
  g.calls.push_back(ctx == kPrimaryCtx ? "setCurrent(primary)"
                    : ctx == kOtherCtx ? "setCurrent(other)"
                                       : "setCurrent(null)");
  if (g.setCurrentResult == CUDA_SUCCESS)
    g.current = ctx;
  return g.setCurrentResult;
}

CUresult fakeCtxGetCurrent(CUcontext *ctx) {
  *ctx = g.current;
  return CUDA_SUCCESS;
}

// Copies the configured log into the buffer whose pointer and size arrive as option values.
void writeLog(const char *log, unsigned n, CUjit_option *options, void **values, CUjit_option buffer,
              CUjit_option size) {
  char *out = nullptr;
  size_t capacity = 0;
  for (unsigned i = 0; i < n; ++i) {
    if (options[i] == buffer)
      out = static_cast<char *>(values[i]);
    if (options[i] == size)
      capacity = reinterpret_cast<uintptr_t>(values[i]);
  }
  if (out && capacity)
    std::snprintf(out, capacity, "%s", log);
}

CUresult fakeModuleLoadDataEx(CUmodule *module, const void *image, unsigned n, CUjit_option *options,
                              void **values) {
  g.calls.push_back("load");
  g.loadedImage = static_cast<const char *>(image);
  g.loadOptions.assign(options, options + n);
  writeLog(g.infoLog, n, options, values, CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES);
  writeLog(g.errorLog, n, options, values, CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
  if (g.loadResult == CUDA_SUCCESS)
    *module = kModule;
  return g.loadResult;
}

CUresult fakeModuleUnload(CUmodule module) {
  g.calls.push_back(module == kModule ? "unload" : "unload(?)");
  return CUDA_SUCCESS;
}

CUresult fakeModuleGetFunction(CUfunction *f, CUmodule, const char *name) {
  g.calls.push_back(std::string("getFunction(") + name + ")");
  if (std::strcmp(name, "moe_permute") != 0)
    return CUDA_ERROR_NOT_FOUND;
  *f = kFunction;
  return CUDA_SUCCESS;
}

CUresult fakeLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                          unsigned bz, unsigned sharedMem, CUstream stream, void **params, void **extra) {
  g.launches.push_back({f, {gx, gy, gz}, {bx, by, bz}, sharedMem, stream, params, extra});
  return g.launchResult;
}

struct ErrorInfo {
  CUresult code;
  const char *name, *description;
};

constexpr ErrorInfo kErrors[] = {
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
     "too many resources requested for launch"},
};

// As the real driver does, an unknown code yields CUDA_ERROR_INVALID_VALUE and a null string.
CUresult lookupError(CUresult code, const char **out, bool name) {
  for (const ErrorInfo &e : kErrors)
    if (e.code == code) {
      *out = name ? e.name : e.description;
      return CUDA_SUCCESS;
    }
  *out = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult fakeGetErrorName(CUresult code, const char **out) { return lookupError(code, out, true); }
CUresult fakeGetErrorString(CUresult code, const char **out) { return lookupError(code, out, false); }

/// Every entry set: the ones the tests exercise record calls, the rest just succeed.
CudaDriverTable fakeTable() {
  CudaDriverTable t;
  t.init = fakeInit;
  t.deviceGet = fakeDeviceGet;
  t.deviceGetCount = fakeDeviceGetCount;
  t.deviceGetAttribute = fakeDeviceGetAttribute;
  t.deviceGetName = fakeDeviceGetName;
  t.devicePrimaryCtxRetain = fakePrimaryCtxRetain;
  t.devicePrimaryCtxRelease = fakePrimaryCtxRelease;
  t.ctxSetCurrent = fakeCtxSetCurrent;
  t.ctxGetCurrent = fakeCtxGetCurrent;
  t.moduleLoadDataEx = fakeModuleLoadDataEx;
  t.moduleUnload = fakeModuleUnload;
  t.moduleGetFunction = fakeModuleGetFunction;
  t.launchKernel = fakeLaunchKernel;
  t.streamSynchronize = [](CUstream) { return CUDA_SUCCESS; };
  t.ctxSynchronize = [] { return CUDA_SUCCESS; };
  t.memAlloc = [](CUdeviceptr *, size_t) { return CUDA_SUCCESS; };
  t.memFree = [](CUdeviceptr) { return CUDA_SUCCESS; };
  t.memcpyHtoD = [](CUdeviceptr, const void *, size_t) { return CUDA_SUCCESS; };
  t.memcpyDtoH = [](void *, CUdeviceptr, size_t) { return CUDA_SUCCESS; };
  t.eventCreate = [](CUevent *, unsigned) { return CUDA_SUCCESS; };
  t.eventRecord = [](CUevent, CUstream) { return CUDA_SUCCESS; };
  t.eventSynchronize = [](CUevent) { return CUDA_SUCCESS; };
  t.eventElapsedTime = [](float *, CUevent, CUevent) { return CUDA_SUCCESS; };
  t.eventDestroy = [](CUevent) { return CUDA_SUCCESS; };
  t.getErrorName = fakeGetErrorName;
  t.getErrorString = fakeGetErrorString;
  return t;
}

class CudaDriverTest : public ::testing::Test {
protected:
  void SetUp() override { g = FakeState(); }

  std::unique_ptr<CudaDriver> driver() { return CudaDriver::fromTable(fakeTable()); }
};

/// The message of the exception E that `fn` throws; fails the test if it throws nothing.
template <typename E, typename Fn> std::string thrownMessage(Fn fn) {
  try {
    fn();
  } catch (const E &e) {
    return e.what();
  }
  ADD_FAILURE() << "no exception thrown";
  return {};
}

TEST_F(CudaDriverTest, InitializesAndDescribesTheDevice) {
  auto d = driver();
  EXPECT_TRUE(d->available());
  EXPECT_EQ(d->unavailableReason(), "");
  EXPECT_EQ(g.calls, std::vector<std::string>{"cuInit(0)"});
  EXPECT_EQ(d->deviceName(1), "Fake GPU 11");
  EXPECT_EQ(d->computeCapability(0), 90);
  EXPECT_EQ(d->archName(0), "sm_90");
}

TEST_F(CudaDriverTest, FailedInitMakesTheDriverUnavailable) {
  g.initResult = CUDA_ERROR_NO_DEVICE;
  auto d = driver();
  EXPECT_FALSE(d->available());
  EXPECT_EQ(d->unavailableReason(),
            "CUDA driver found but no device: cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is "
            "detected)");
  EXPECT_EQ(thrownMessage<std::runtime_error>([&] { d->archName(0); }), d->unavailableReason());
}

TEST_F(CudaDriverTest, ZeroDevicesMakesTheDriverUnavailable) {
  g.deviceCount = 0;
  auto d = driver();
  EXPECT_FALSE(d->available());
  EXPECT_EQ(d->unavailableReason(), "CUDA driver found but no device: cuDeviceGetCount returned 0");
}

TEST_F(CudaDriverTest, CheckThrowsCudaErrorWithNameAndDescription) {
  auto d = driver();
  EXPECT_NO_THROW(d->check(CUDA_SUCCESS, "cuCtxSynchronize"));
  try {
    d->check(CUDA_ERROR_INVALID_VALUE, "cuLaunchKernel");
    FAIL() << "no exception thrown";
  } catch (const CudaError &e) {
    EXPECT_EQ(e.result(), CUDA_ERROR_INVALID_VALUE);
    EXPECT_STREQ(e.what(), "cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE (invalid argument)");
  }
  // An unknown code inside CUresult's value range (its largest enumerator is 999, so 0..1023): a value
  // outside it would be undefined behaviour (UBSan -fsanitize=enum in `make test-asan`).
  EXPECT_EQ(thrownMessage<CudaError>([&] { d->check(CUresult(1000), "cuMemAlloc"); }),
            "cuMemAlloc failed: CUresult 1000");
}

TEST_F(CudaDriverTest, ModuleLoadPassesThePtxAndLogBuffers) {
  auto d = driver();
  const std::string ptx = ".version 8.0\n.target sm_90\n.address_size 64\n";
  g.infoLog = "ptxas info: Used 8 registers";
  {
    CudaModule module(*d, ptx);
    EXPECT_EQ(module.handle(), kModule);
    EXPECT_EQ(module.infoLog(), "ptxas info: Used 8 registers");
  }
  EXPECT_EQ(g.loadedImage, ptx);
  EXPECT_EQ(g.loadOptions,
            (std::vector<CUjit_option>{CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                                       CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES}));
  EXPECT_EQ(g.calls.back(), "unload");
}

TEST_F(CudaDriverTest, ModuleLoadFailureCarriesTheErrorLog) {
  auto d = driver();
  g.loadResult = CUDA_ERROR_INVALID_PTX;
  g.errorLog = "ptxas application ptx input, line 3; error: Unknown symbol 'x'";
  try {
    CudaModule module(*d, "garbage");
    FAIL() << "no exception thrown";
  } catch (const CudaError &e) {
    EXPECT_EQ(e.result(), CUDA_ERROR_INVALID_PTX);
    EXPECT_STREQ(e.what(),
                 "cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX (a PTX JIT compilation failed)\n"
                 "JIT error log:\nptxas application ptx input, line 3; error: Unknown symbol 'x'");
  }
  EXPECT_EQ(g.calls, (std::vector<std::string>{"cuInit(0)", "load"})); // nothing to unload
}

TEST_F(CudaDriverTest, FunctionLookupsAreCachedAndErrorsNameTheKernel) {
  auto d = driver();
  CudaModule module(*d, "ptx");
  EXPECT_EQ(module.function("moe_permute"), kFunction);
  EXPECT_EQ(module.function("moe_permute"), kFunction);
  EXPECT_EQ(std::count(g.calls.begin(), g.calls.end(), "getFunction(moe_permute)"), 1);
  EXPECT_EQ(
      thrownMessage<CudaError>([&] { module.function("moe_unpermute"); }),
      "cuModuleGetFunction for kernel 'moe_unpermute' failed: CUDA_ERROR_NOT_FOUND (named symbol not found)");
}

TEST_F(CudaDriverTest, LaunchPassesGeometryStreamAndParamsExactly) {
  auto d = driver();
  int a = 1;
  float b = 2;
  void *params[] = {&a, &b};
  launchCuda(*d, kFunction, {2147483647u, 65535, 3}, {32, 4, 2}, kStream, params);
  ASSERT_EQ(g.launches.size(), 1u);
  const Launch &l = g.launches[0];
  EXPECT_EQ(l.f, kFunction);
  EXPECT_EQ(std::vector<unsigned>(l.grid, l.grid + 3), (std::vector<unsigned>{2147483647u, 65535, 3}));
  EXPECT_EQ(std::vector<unsigned>(l.block, l.block + 3), (std::vector<unsigned>{32, 4, 2}));
  EXPECT_EQ(l.sharedMem, 0u);
  EXPECT_EQ(l.stream, kStream);
  EXPECT_EQ(l.params, params);
  EXPECT_EQ(l.extra, nullptr);
}

TEST_F(CudaDriverTest, EmptyGridLaunchesNothing) {
  auto d = driver();
  launchCuda(*d, kFunction, {0, 1, 1}, {256, 1, 1}, nullptr, nullptr);
  EXPECT_TRUE(g.launches.empty());
}

TEST_F(CudaDriverTest, LaunchRefusesGeometryBeyondCudaLimits) {
  auto d = driver();
  auto launch = [&](CudaDim3 grid, CudaDim3 block) {
    return thrownMessage<std::invalid_argument>(
        [&] { launchCuda(*d, kFunction, grid, block, nullptr, nullptr); });
  };
  EXPECT_EQ(launch({2147483648u, 1, 1}, {1, 1, 1}),
            "CUDA launch: grid.x = 2147483648 exceeds the limit 2147483647");
  EXPECT_EQ(launch({1, 65536, 1}, {1, 1, 1}), "CUDA launch: grid.y = 65536 is outside [1, 65535]");
  EXPECT_EQ(launch({1, 1, 0}, {1, 1, 1}), "CUDA launch: grid.z = 0 is outside [1, 65535]");
  EXPECT_EQ(launch({1, 1, 1}, {2048, 1, 1}), "CUDA launch: block.x = 2048 is outside [1, 1024]");
  EXPECT_EQ(launch({1, 1, 1}, {1, 1, 65}), "CUDA launch: block.z = 65 is outside [1, 64]");
  EXPECT_EQ(launch({1, 1, 1}, {32, 32, 2}), "CUDA launch: block 32x32x2 has 2048 threads; the limit is 1024");
  // Bad geometry is a caller bug even when the grid is empty.
  EXPECT_EQ(launch({0, 1, 1}, {0, 1, 1}), "CUDA launch: block.x = 0 is outside [1, 1024]");
  EXPECT_TRUE(g.launches.empty());
}

TEST_F(CudaDriverTest, FailedLaunchBecomesCudaError) {
  auto d = driver();
  g.launchResult = CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  try {
    launchCuda(*d, kFunction, {4, 1, 1}, {1024, 1, 1}, nullptr, nullptr);
    FAIL() << "no exception thrown";
  } catch (const CudaError &e) {
    EXPECT_EQ(e.result(), CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
    EXPECT_STREQ(e.what(), "cuLaunchKernel failed: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (too many resources "
                           "requested for launch)");
  }
}

TEST_F(CudaDriverTest, ContextRetainsAndReleasesThePrimaryContext) {
  auto d = driver();
  g.current = kOtherCtx;
  {
    CudaContext context(*d, 2);
    EXPECT_EQ(context.handle(), kPrimaryCtx);
    EXPECT_EQ(context.device(), 12);
    EXPECT_EQ(g.current, kPrimaryCtx);
  }
  EXPECT_EQ(g.calls, (std::vector<std::string>{"cuInit(0)", "retain(12)", "setCurrent(primary)",
                                               "setCurrent(other)", "release(12)"}));
  EXPECT_EQ(g.current, kOtherCtx);
}

TEST_F(CudaDriverTest, ContextReleasesWhenItCannotBecomeCurrent) {
  auto d = driver();
  g.setCurrentResult = CUDA_ERROR_INVALID_VALUE;
  EXPECT_EQ(thrownMessage<CudaError>([&] { CudaContext context(*d); }),
            "cuCtxSetCurrent failed: CUDA_ERROR_INVALID_VALUE (invalid argument)");
  EXPECT_EQ(g.calls,
            (std::vector<std::string>{"cuInit(0)", "retain(10)", "setCurrent(primary)", "release(10)"}));
}

// Found on an H200 with compute-sanitizer: a bundle released its context before its modules, so every
// cuModuleUnload failed with CUDA_ERROR_INVALID_HANDLE. A module now owns its context and unloads in it.
TEST_F(CudaDriverTest, ModuleKeepsItsContextAliveAndUnloadsInIt) {
  auto d = driver();
  std::unique_ptr<CudaModule> module;
  {
    auto context = std::make_shared<const CudaContext>(*d, 0);
    module = std::make_unique<CudaModule>(*d, "ptx", context);
  } // the creator's reference is gone; the module's keeps the context retained
  EXPECT_EQ(std::count(g.calls.begin(), g.calls.end(), "release(10)"), 0);
  g.current = kOtherCtx; // another thread's view, or the caller moved on
  g.calls.clear();
  module.reset();
  EXPECT_EQ(g.calls, (std::vector<std::string>{"setCurrent(primary)", "unload", "setCurrent(other)", "release(10)"}));
  EXPECT_EQ(g.current, kOtherCtx);
}

// The real loader. Whether a driver is installed is probed independently of CudaDriver.
TEST(CudaDriverRealTest, ReportsTheMachineItRunsOn) {
  CudaDriver &driver = CudaDriver::instance();
  EXPECT_EQ(&driver, &CudaDriver::instance());
  if (!dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    EXPECT_FALSE(driver.available());
    EXPECT_NE(driver.unavailableReason().find("libcuda.so.1"), std::string::npos)
        << driver.unavailableReason();
    EXPECT_THROW(driver.api(), std::runtime_error);
    return;
  }
  ASSERT_TRUE(driver.available()) << driver.unavailableReason();
  EXPECT_EQ(driver.archName(0).rfind("sm_", 0), 0u) << driver.archName(0);
}

} // namespace
} // namespace moec
