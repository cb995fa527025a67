// The slice of the CUDA driver API the runtime uses, reached through
// dlopen("libcuda.so.1") so the runtime builds and runs on machines without the
// CUDA toolkit or driver. The types and enum values below are copied from the
// driver API (cuda.h) by hand; the toolkit header is never included.
//
// Every CUresult becomes an absl::Status in exactly one place, CudaStatus().
#ifndef TETHER_RUNTIME_CUDA_CUDA_DRIVER_H_
#define TETHER_RUNTIME_CUDA_CUDA_DRIVER_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/device.h"

namespace tether::cuda {

// Driver API types, ABI-compatible with cuda.h.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;  // NOLINT(runtime/int): the driver's own type
struct CUctx_st;
struct CUstream_st;
struct CUevent_st;
struct CUmod_st;
struct CUfunc_st;
using CUcontext = CUctx_st*;
using CUstream = CUstream_st*;
using CUevent = CUevent_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;

// CUresult values the runtime tells apart (cuda.h, enum cudaError_enum).
inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
inline constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
inline constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
inline constexpr CUresult CUDA_ERROR_DEINITIALIZED = 4;
inline constexpr CUresult CUDA_ERROR_STUB_LIBRARY = 34;  // libcuda is the toolkit's stub
inline constexpr CUresult CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER = 36;
inline constexpr CUresult CUDA_ERROR_DEVICE_UNAVAILABLE = 46;
inline constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
inline constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
inline constexpr CUresult CUDA_ERROR_INVALID_IMAGE = 200;
inline constexpr CUresult CUDA_ERROR_ECC_UNCORRECTABLE = 214;
inline constexpr CUresult CUDA_ERROR_NO_BINARY_FOR_GPU = 209;
inline constexpr CUresult CUDA_ERROR_INVALID_PTX = 218;
inline constexpr CUresult CUDA_ERROR_JIT_COMPILER_NOT_FOUND = 221;
inline constexpr CUresult CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222;
inline constexpr CUresult CUDA_ERROR_JIT_COMPILATION_DISABLED = 223;
inline constexpr CUresult CUDA_ERROR_INVALID_SOURCE = 300;
inline constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
inline constexpr CUresult CUDA_ERROR_ILLEGAL_ADDRESS = 700;
inline constexpr CUresult CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701;
inline constexpr CUresult CUDA_ERROR_LAUNCH_TIMEOUT = 702;
inline constexpr CUresult CUDA_ERROR_ASSERT = 710;
inline constexpr CUresult CUDA_ERROR_HARDWARE_STACK_ERROR = 714;
inline constexpr CUresult CUDA_ERROR_ILLEGAL_INSTRUCTION = 715;
inline constexpr CUresult CUDA_ERROR_MISALIGNED_ADDRESS = 716;
inline constexpr CUresult CUDA_ERROR_INVALID_ADDRESS_SPACE = 717;
inline constexpr CUresult CUDA_ERROR_INVALID_PC = 718;
inline constexpr CUresult CUDA_ERROR_LAUNCH_FAILED = 719;
inline constexpr CUresult CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803;
inline constexpr CUresult CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804;

// CUdevice_attribute values (cuda.h).
enum CUdevice_attribute : int {
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6,
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
  CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
  CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12,
  CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
  CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
  CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36,
  CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37,
  CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
  CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  // The most shared memory a block may have once its function opts in
  // (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES).
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
};

// CUfunction_attribute values (cuda.h) that cuFuncSetAttribute sets.
enum CUfunction_attribute : int {
  // Dynamic shared memory a launch of the function may ask for; above 48 KiB
  // a function must set it before such a launch.
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
};

// CUjit_option values (cuda.h): options of cuModuleLoadDataEx. A log buffer's
// option value is the buffer; a size's option value is the size itself cast
// to void*, which the driver overwrites with the bytes it wrote.
enum CUjit_option : int {
  CU_JIT_INFO_LOG_BUFFER = 3,
  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
};

inline constexpr unsigned int CU_STREAM_NON_BLOCKING = 0x1;
inline constexpr unsigned int CU_EVENT_DEFAULT = 0x0;

// The loaded driver: a table of entry points. Thread contract: immutable after
// Load(), so thread-safe; the driver itself is thread-safe.
struct CudaDriver {
  CUresult (*cuInit)(unsigned int flags);
  CUresult (*cuDriverGetVersion)(int* version);
  CUresult (*cuGetErrorName)(CUresult error, const char** str);
  CUresult (*cuGetErrorString)(CUresult error, const char** str);
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal);
  CUresult (*cuDeviceGetCount)(int* count);
  CUresult (*cuDeviceGetName)(char* name, int len, CUdevice dev);
  CUresult (*cuDeviceGetAttribute)(int* value, CUdevice_attribute attr, CUdevice dev);
  CUresult (*cuDeviceTotalMem_v2)(size_t* bytes, CUdevice dev);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* ctx, CUdevice dev);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice dev);
  CUresult (*cuCtxDestroy_v2)(CUcontext ctx);
  CUresult (*cuCtxSetCurrent)(CUcontext ctx);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuMemAlloc_v2)(CUdeviceptr* ptr, size_t bytes);
  CUresult (*cuMemFree_v2)(CUdeviceptr ptr);
  CUresult (*cuMemGetInfo_v2)(size_t* free, size_t* total);
  CUresult (*cuMemcpyHtoD_v2)(CUdeviceptr dst, const void* src, size_t bytes);
  CUresult (*cuMemcpyDtoH_v2)(void* dst, CUdeviceptr src, size_t bytes);
  CUresult (*cuMemcpyDtoD_v2)(CUdeviceptr dst, CUdeviceptr src, size_t bytes);
  CUresult (*cuMemcpyHtoDAsync_v2)(CUdeviceptr dst, const void* src, size_t bytes, CUstream s);
  CUresult (*cuMemcpyDtoHAsync_v2)(void* dst, CUdeviceptr src, size_t bytes, CUstream s);
  CUresult (*cuMemcpyDtoDAsync_v2)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s);
  CUresult (*cuMemcpyPeer)(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx,
                           size_t bytes);
  CUresult (*cuMemsetD8_v2)(CUdeviceptr dst, unsigned char value, size_t count);
  CUresult (*cuStreamCreate)(CUstream* stream, unsigned int flags);
  CUresult (*cuStreamDestroy_v2)(CUstream stream);
  CUresult (*cuStreamSynchronize)(CUstream stream);
  CUresult (*cuEventCreate)(CUevent* event, unsigned int flags);
  CUresult (*cuEventRecord)(CUevent event, CUstream stream);
  CUresult (*cuEventSynchronize)(CUevent event);
  CUresult (*cuEventElapsedTime)(float* ms, CUevent start, CUevent end);
  CUresult (*cuEventDestroy_v2)(CUevent event);
  CUresult (*cuModuleLoadDataEx)(CUmodule* module, const void* image, unsigned int num_options,
                                 CUjit_option* options, void** option_values);
  CUresult (*cuModuleUnload)(CUmodule module);
  CUresult (*cuModuleGetFunction)(CUfunction* function, CUmodule module, const char* name);
  CUresult (*cuFuncSetAttribute)(CUfunction function, CUfunction_attribute attrib, int value);
  // The legacy-default-stream entry point (not the _ptsz one).
  CUresult (*cuLaunchKernel)(CUfunction f, unsigned int grid_x, unsigned int grid_y,
                             unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                             unsigned int block_z, unsigned int shared_mem_bytes, CUstream stream,
                             void** kernel_params, void** extra);

  // The process-wide driver, loaded and initialized (cuInit) on first use.
  // UNAVAILABLE when libcuda.so.1 cannot be loaded, lacks a symbol, or cuInit
  // fails. Never unloaded: kernels and buffers may outlive any owner.
  static absl::StatusOr<const CudaDriver*> Get();
};

// The one conversion from CUresult to absl::Status. `call` names the operation
// with its arguments ("cuMemAlloc(1024 bytes)"); `device` is the device it ran
// on. Text: "cuda error CUDA_ERROR_OUT_OF_MEMORY: out of memory in
// cuMemAlloc(1024 bytes) on cuda:0". Codes: out of memory → RESOURCE_EXHAUSTED,
// invalid value → INVALID_ARGUMENT, driver or device missing → UNAVAILABLE,
// code or image the JIT rejects (invalid PTX, image or source) →
// INVALID_ARGUMENT, a GPU or driver the code cannot run on (no binary for the
// GPU, PTX newer than the driver, no or disabled JIT) → FAILED_PRECONDITION,
// a missing symbol → NOT_FOUND, launch out of resources → RESOURCE_EXHAUSTED,
// anything else → INTERNAL (a runtime error). Faults inside a kernel
// (illegal address, launch failed, ...) are INTERNAL and say that the
// device's context is unusable from then on, as the driver makes them sticky.
absl::Status CudaStatus(const CudaDriver& driver, CUresult result, absl::string_view call,
                        Device device);

// Whether `result` is a fault inside a kernel (illegal address, launch
// failure or timeout, device assert, uncorrectable ECC error, ...): the
// driver makes these sticky, every later call in the context fails with it.
bool IsStickyFault(CUresult result);

// The primary context of `device` (a CUDA device), retained by the CUDA device
// API on first use and kept for the process lifetime; make it current with
// cuCtxSetCurrent before driver calls on that device. UNAVAILABLE without a
// driver or for a device the driver does not report. Thread-safe.
// (Implemented in cuda_device_api.cc, which owns the contexts.)
absl::StatusOr<CUcontext> PrimaryContext(Device device);

}  // namespace tether::cuda

#endif  // TETHER_RUNTIME_CUDA_CUDA_DRIVER_H_
