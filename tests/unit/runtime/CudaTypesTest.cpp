//===- CudaTypesTest.cpp - moec's CUDA types against the toolkit's cuda.h ===//
//
// moec declares the driver's types itself (CudaTypes.h) and loads libcuda's functions by name into a table
// of its own signatures (CudaDriverTable), so a mistake here would not fail to compile: it would pass wrong
// arguments to the driver. Where the toolkit is installed, this file includes cuda.h after moec's headers
// (the order in which a definition of moec's could clash with cuda.h's) and checks every type, constant and
// entry point against cuda.h's. The checks are the static_asserts; the test only reports which case ran.
//===----------------------------------------------------------------------===//
#include "moec/runtime/CudaDriver.h"
#include "moec/runtime/DeviceTensors.h"
#include "moec/runtime/ptxemu/Emulator.h"

#include <gtest/gtest.h>

#if __has_include(<cuda.h>)
#include <cuda.h>

#include <type_traits>

namespace {

// The handles are the same types (typedefs of the same names: a mismatch would not compile), and sized as
// cuda.h sizes them.
static_assert(std::is_same_v<CUstream, CUstream_st *> && std::is_same_v<CUcontext, CUctx_st *> &&
              std::is_same_v<CUmodule, CUmod_st *> && std::is_same_v<CUfunction, CUfunc_st *> &&
              std::is_same_v<CUevent, CUevent_st *>);
static_assert(std::is_same_v<CUdevice, CUdevice_v1> && std::is_same_v<CUdeviceptr, CUdeviceptr_v2>);

// moec's enums have cuda.h's underlying types and values.
template <typename Moec, typename Cuda> constexpr bool sameRepresentation() {
  return std::is_same_v<std::underlying_type_t<Moec>, std::underlying_type_t<Cuda>> && sizeof(Moec) == sizeof(Cuda);
}
static_assert(sameRepresentation<moec::CUresult, ::CUresult>());
static_assert(sameRepresentation<moec::CUdevice_attribute, ::CUdevice_attribute>());
static_assert(sameRepresentation<moec::CUjit_option, ::CUjit_option>());

#define MOEC_SAME_VALUE(name) static_assert(unsigned(moec::name) == unsigned(::name), #name)
MOEC_SAME_VALUE(CUDA_SUCCESS);
MOEC_SAME_VALUE(CUDA_ERROR_INVALID_VALUE);
MOEC_SAME_VALUE(CUDA_ERROR_OUT_OF_MEMORY);
MOEC_SAME_VALUE(CUDA_ERROR_NO_DEVICE);
MOEC_SAME_VALUE(CUDA_ERROR_INVALID_DEVICE);
MOEC_SAME_VALUE(CUDA_ERROR_INVALID_PTX);
MOEC_SAME_VALUE(CUDA_ERROR_INVALID_HANDLE);
MOEC_SAME_VALUE(CUDA_ERROR_NOT_FOUND);
MOEC_SAME_VALUE(CUDA_ERROR_NOT_READY);
MOEC_SAME_VALUE(CUDA_ERROR_ILLEGAL_ADDRESS);
MOEC_SAME_VALUE(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
MOEC_SAME_VALUE(CUDA_ERROR_LAUNCH_TIMEOUT);
MOEC_SAME_VALUE(CUDA_ERROR_ILLEGAL_INSTRUCTION);
MOEC_SAME_VALUE(CUDA_ERROR_MISALIGNED_ADDRESS);
MOEC_SAME_VALUE(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
MOEC_SAME_VALUE(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
MOEC_SAME_VALUE(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
MOEC_SAME_VALUE(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
MOEC_SAME_VALUE(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
MOEC_SAME_VALUE(CU_JIT_INFO_LOG_BUFFER);
MOEC_SAME_VALUE(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES);
MOEC_SAME_VALUE(CU_JIT_ERROR_LOG_BUFFER);
MOEC_SAME_VALUE(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
#undef MOEC_SAME_VALUE

// A table entry's type with moec's enums replaced by cuda.h's: then it must be cuda.h's function type.
template <typename T> struct InCuda { using type = T; };
template <> struct InCuda<moec::CUresult> { using type = ::CUresult; };
template <> struct InCuda<moec::CUdevice_attribute> { using type = ::CUdevice_attribute; };
template <> struct InCuda<moec::CUjit_option> { using type = ::CUjit_option; };
template <typename T> struct InCuda<T *> { using type = typename InCuda<T>::type *; };
template <typename R, typename... Args> struct InCuda<R (*)(Args...)> {
  using type = typename InCuda<R>::type (*)(typename InCuda<Args>::type...);
};

// cuda.h's #defines name the versioned symbols (cuMemAlloc is cuMemAlloc_v2), as CudaDriver.cpp loads them.
#define MOEC_SAME_SIGNATURE(field, function)                                                                  \
  static_assert(std::is_same_v<InCuda<decltype(moec::CudaDriverTable::field)>::type, decltype(&::function)>, \
                #field " is not " #function "'s signature")
MOEC_SAME_SIGNATURE(init, cuInit);
MOEC_SAME_SIGNATURE(deviceGet, cuDeviceGet);
MOEC_SAME_SIGNATURE(deviceGetCount, cuDeviceGetCount);
MOEC_SAME_SIGNATURE(deviceGetAttribute, cuDeviceGetAttribute);
MOEC_SAME_SIGNATURE(deviceGetName, cuDeviceGetName);
MOEC_SAME_SIGNATURE(devicePrimaryCtxRetain, cuDevicePrimaryCtxRetain);
MOEC_SAME_SIGNATURE(devicePrimaryCtxRelease, cuDevicePrimaryCtxRelease);
MOEC_SAME_SIGNATURE(ctxSetCurrent, cuCtxSetCurrent);
MOEC_SAME_SIGNATURE(ctxGetCurrent, cuCtxGetCurrent);
MOEC_SAME_SIGNATURE(moduleLoadDataEx, cuModuleLoadDataEx);
MOEC_SAME_SIGNATURE(moduleUnload, cuModuleUnload);
MOEC_SAME_SIGNATURE(moduleGetFunction, cuModuleGetFunction);
MOEC_SAME_SIGNATURE(launchKernel, cuLaunchKernel);
MOEC_SAME_SIGNATURE(streamSynchronize, cuStreamSynchronize);
MOEC_SAME_SIGNATURE(ctxSynchronize, cuCtxSynchronize);
MOEC_SAME_SIGNATURE(memAlloc, cuMemAlloc);
MOEC_SAME_SIGNATURE(memFree, cuMemFree);
MOEC_SAME_SIGNATURE(memcpyHtoD, cuMemcpyHtoD);
MOEC_SAME_SIGNATURE(memcpyDtoH, cuMemcpyDtoH);
MOEC_SAME_SIGNATURE(memcpyDtoDAsync, cuMemcpyDtoDAsync);
MOEC_SAME_SIGNATURE(memsetD8Async, cuMemsetD8Async);
MOEC_SAME_SIGNATURE(eventCreate, cuEventCreate);
MOEC_SAME_SIGNATURE(eventRecord, cuEventRecord);
MOEC_SAME_SIGNATURE(eventSynchronize, cuEventSynchronize);
MOEC_SAME_SIGNATURE(eventElapsedTime, cuEventElapsedTime);
MOEC_SAME_SIGNATURE(eventDestroy, cuEventDestroy);
MOEC_SAME_SIGNATURE(getErrorName, cuGetErrorName);
MOEC_SAME_SIGNATURE(getErrorString, cuGetErrorString);
#undef MOEC_SAME_SIGNATURE

} // namespace

TEST(CudaTypes, MatchTheToolkitsCudaH) { SUCCEED() << "checked against cuda.h " << CUDA_VERSION; }

#else

TEST(CudaTypes, MatchTheToolkitsCudaH) { GTEST_SKIP() << "no cuda.h (MOEC_CUDA_ROOT): nothing to check against"; }

#endif
