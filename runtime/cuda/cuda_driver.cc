// Loads libcuda.so.1 with dlopen, resolves the driver entry points Tether uses
// and converts driver results to absl::Status. Nothing here needs the CUDA
// toolkit: the entry point signatures live in cuda_driver.h.
#include "runtime/cuda/cuda_driver.h"

#include <dlfcn.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "runtime/core/error.h"
#include "runtime/device/device_api.h"

namespace tether::cuda {
namespace {

constexpr const char* kLibraryName = "libcuda.so.1";

// Owns a dlopen handle. The driver's handle is leaked on purpose (see Get()),
// but a half-loaded library is closed again.
struct DlHandle {
  void* handle = nullptr;
  ~DlHandle() {
    if (handle != nullptr) dlclose(handle);
  }
  void* release() {
    void* h = handle;
    handle = nullptr;
    return h;
  }
};

template <typename Fn>
bool Resolve(void* lib, const char* name, Fn*& fn, std::string& missing) {
  fn = reinterpret_cast<Fn*>(dlsym(lib, name));
  if (fn == nullptr) {
    if (!missing.empty()) absl::StrAppend(&missing, ", ");
    absl::StrAppend(&missing, name);
    return false;
  }
  return true;
}

absl::StatusOr<const CudaDriver*> Load() {
  DlHandle lib;
  lib.handle = dlopen(kLibraryName, RTLD_NOW | RTLD_LOCAL);
  if (lib.handle == nullptr) {
    const char* why = dlerror();
    return UnavailableError("no CUDA driver: ", kLibraryName, " could not be loaded (",
                            why != nullptr ? why : "unknown dlopen error", ")");
  }
  auto driver = std::make_unique<CudaDriver>();
  std::string missing;
  void* h = lib.handle;
  CudaDriver& d = *driver;
#define TETHER_CUDA_RESOLVE(name) Resolve(h, #name, d.name, missing)
  TETHER_CUDA_RESOLVE(cuInit);
  TETHER_CUDA_RESOLVE(cuDriverGetVersion);
  TETHER_CUDA_RESOLVE(cuGetErrorName);
  TETHER_CUDA_RESOLVE(cuGetErrorString);
  TETHER_CUDA_RESOLVE(cuDeviceGet);
  TETHER_CUDA_RESOLVE(cuDeviceGetCount);
  TETHER_CUDA_RESOLVE(cuDeviceGetName);
  TETHER_CUDA_RESOLVE(cuDeviceGetAttribute);
  TETHER_CUDA_RESOLVE(cuDeviceTotalMem_v2);
  TETHER_CUDA_RESOLVE(cuDevicePrimaryCtxRetain);
  TETHER_CUDA_RESOLVE(cuDevicePrimaryCtxRelease);
  TETHER_CUDA_RESOLVE(cuCtxDestroy_v2);
  TETHER_CUDA_RESOLVE(cuCtxSetCurrent);
  TETHER_CUDA_RESOLVE(cuCtxSynchronize);
  TETHER_CUDA_RESOLVE(cuMemAlloc_v2);
  TETHER_CUDA_RESOLVE(cuMemFree_v2);
  TETHER_CUDA_RESOLVE(cuMemGetInfo_v2);
  TETHER_CUDA_RESOLVE(cuMemcpyHtoD_v2);
  TETHER_CUDA_RESOLVE(cuMemcpyDtoH_v2);
  TETHER_CUDA_RESOLVE(cuMemcpyDtoD_v2);
  TETHER_CUDA_RESOLVE(cuMemcpyHtoDAsync_v2);
  TETHER_CUDA_RESOLVE(cuMemcpyDtoHAsync_v2);
  TETHER_CUDA_RESOLVE(cuMemcpyDtoDAsync_v2);
  TETHER_CUDA_RESOLVE(cuMemcpyPeer);
  TETHER_CUDA_RESOLVE(cuMemsetD8_v2);
  TETHER_CUDA_RESOLVE(cuStreamCreate);
  TETHER_CUDA_RESOLVE(cuStreamDestroy_v2);
  TETHER_CUDA_RESOLVE(cuStreamSynchronize);
  TETHER_CUDA_RESOLVE(cuEventCreate);
  TETHER_CUDA_RESOLVE(cuEventRecord);
  TETHER_CUDA_RESOLVE(cuEventSynchronize);
  TETHER_CUDA_RESOLVE(cuEventElapsedTime);
  TETHER_CUDA_RESOLVE(cuEventDestroy_v2);
  TETHER_CUDA_RESOLVE(cuModuleLoadDataEx);
  TETHER_CUDA_RESOLVE(cuModuleUnload);
  TETHER_CUDA_RESOLVE(cuModuleGetFunction);
  TETHER_CUDA_RESOLVE(cuFuncSetAttribute);
  TETHER_CUDA_RESOLVE(cuLaunchKernel);
#undef TETHER_CUDA_RESOLVE
  if (!missing.empty()) {
    return UnavailableError("no usable CUDA driver: ", kLibraryName, " lacks ", missing);
  }
  // From cuInit on the driver may hold threads and exit handlers in the
  // library: it stays loaded even when cuInit fails.
  lib.release();
  CUresult init = d.cuInit(0);
  if (init != CUDA_SUCCESS) {
    return CudaStatus(d, init, "cuInit(0)", Device::Cuda(0));
  }
  return driver.release();
}

}  // namespace

absl::StatusOr<const CudaDriver*> CudaDriver::Get() {
  // Loaded once; the result (driver or error) is kept for the process lifetime
  // and never destroyed, so buffers freed during static destruction stay safe.
  static const absl::StatusOr<const CudaDriver*>* const kDriver =
      new absl::StatusOr<const CudaDriver*>(Load());
  return *kDriver;
}

bool IsStickyFault(CUresult result) {
  switch (result) {
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
      return true;
    default:
      return false;
  }
}

absl::Status CudaStatus(const CudaDriver& driver, CUresult result, absl::string_view call,
                        Device device) {
  if (result == CUDA_SUCCESS) return absl::OkStatus();
  const char* name = nullptr;
  const char* text = nullptr;
  if (driver.cuGetErrorName == nullptr || driver.cuGetErrorName(result, &name) != CUDA_SUCCESS) {
    name = nullptr;
  }
  if (driver.cuGetErrorString == nullptr ||
      driver.cuGetErrorString(result, &text) != CUDA_SUCCESS) {
    text = nullptr;
  }
  std::string message = absl::StrCat(
      "cuda error ", name != nullptr ? name : absl::StrCat("CUresult ", result), ": ",
      text != nullptr ? text : "unknown error", " in ", call, " on ", device.ToString());
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY:
      return OutOfMemoryError(message);
    case CUDA_ERROR_INVALID_VALUE:
      return ValueError(message);
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
      return UnavailableError(message);
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_INVALID_SOURCE:
      return ValueError(message);
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
    case CUDA_ERROR_JIT_COMPILATION_DISABLED:
      return PreconditionError(message);
    case CUDA_ERROR_NOT_FOUND:
      return NotFoundError(message);
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
      return OutOfMemoryError(message);
    default:
      if (IsStickyFault(result)) {
        absl::Status fault =
            RuntimeError(message, " (a kernel faulted; ", device.ToString(),
                         " is unusable in this process from now on; isolated sessions",
                         " keep such a fault to their own process)");
        RecordStickyFault(fault);
        return fault;
      }
      return RuntimeError(message);
  }
}

}  // namespace tether::cuda
