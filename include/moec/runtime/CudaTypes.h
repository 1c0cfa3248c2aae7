//===- CudaTypes.h - The CUDA driver's types, without cuda.h ----*- C++ -*-===//
//
// moec opens libcuda.so.1 at run time (CudaDriver.h) and needs only the driver API's types and a few of its
// constants, so its headers do not include the toolkit's cuda.h: a project builds against moec without the
// CUDA toolkit installed.
//
// - The handles and integers are declared as cuda.h declares them, in the global namespace. C++ allows an
//   identical typedef twice, so a file may include cuda.h as well, before or after this one, and a CUstream
//   of cuda.h's is a CUstream of moec's.
// - An enum cannot be defined twice, so CUresult, CUdevice_attribute and CUjit_option are moec's own, in
//   namespace moec, with cuda.h's underlying type (unsigned int: none of its values is negative) and cuda.h's
//   names and values for the members moec uses. A file that includes cuda.h and says `using namespace moec`
//   names them qualified (::CUresult, moec::CUresult), as the unqualified names are then ambiguous.
//
// tests/unit/runtime/CudaTypesTest.cpp checks every type, value and driver signature against cuda.h where
// the toolkit is installed.
//===----------------------------------------------------------------------===//
#pragma once

typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef int CUdevice;
#if defined(_WIN64) || defined(__LP64__)
typedef unsigned long long CUdeviceptr;
#else
typedef unsigned int CUdeviceptr;
#endif

namespace moec {

/// The driver's status codes that moec returns (the PTX emulator) or names; any other value may come back.
enum CUresult : unsigned {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_PTX = 218,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
  CUDA_ERROR_LAUNCH_TIMEOUT = 702,
  CUDA_ERROR_ILLEGAL_INSTRUCTION = 715,
  CUDA_ERROR_MISALIGNED_ADDRESS = 716,
};

/// The device attributes moec reads (cuDeviceGetAttribute).
enum CUdevice_attribute : unsigned {
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
};

/// The options moec passes when loading PTX (cuModuleLoadDataEx): the JIT's logs.
enum CUjit_option : unsigned {
  CU_JIT_INFO_LOG_BUFFER = 3,
  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
};

} // namespace moec
