// The driver side of CUDA kernel libraries (cuda_kernel_launch.h): the
// per-device module loading and cuLaunchKernel, through the dlopen'ed driver.
#include "runtime/cuda/cuda_kernel_launch.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/error.h"
#include "runtime/cuda/cuda_driver.h"
#include "runtime/device/stream.h"
#include "runtime/memory/allocator.h"

namespace tether::cuda_launch {
namespace {

// Grid-stride loops: more blocks than this per SM only add scheduling work.
constexpr int64_t kBlocksPerSm = 32;

// The device's name for messages ("NVIDIA H100 80GB HBM3").
std::string DeviceName(const cuda::CudaDriver& driver, cuda::CUdevice dev) {
  char name[256] = {};
  if (driver.cuDeviceGetName(name, sizeof(name) - 1, dev) != cuda::CUDA_SUCCESS) name[0] = 0;
  return name[0] != 0 ? name : "unknown name";
}

}  // namespace

// The library loaded on one device: its CUmodule (unloaded on destruction),
// the resolved entries, and the SM count that bounds the grid. Immutable
// after construction, so thread-safe.
struct DeviceModule {
  DeviceModule(const cuda::CudaDriver* driver, Device device, cuda::CUcontext ctx,
               cuda::CUmodule module)
      : driver(driver), device(device), ctx(ctx), module(module) {}
  DeviceModule(const DeviceModule&) = delete;
  DeviceModule& operator=(const DeviceModule&) = delete;
  ~DeviceModule() {
    // At exit the driver may already be torn down, and after a kernel fault
    // every call in the context fails; neither is worth a message.
    cuda::CUresult r = driver->cuCtxSetCurrent(ctx);
    if (r == cuda::CUDA_SUCCESS) r = driver->cuModuleUnload(module);
    if (r != cuda::CUDA_SUCCESS && r != cuda::CUDA_ERROR_DEINITIALIZED && !cuda::IsStickyFault(r)) {
      std::fprintf(stderr, "tether: %s\n",
                   cuda::CudaStatus(*driver, r, "cuModuleUnload", device).ToString().c_str());
    }
  }

  const cuda::CudaDriver* driver;
  Device device;
  cuda::CUcontext ctx;
  cuda::CUmodule module;
  int sm = 0;        // compute capability major * 10 + minor
  int image_sm = 0;  // the image that was loaded
  int64_t sm_count = 1;
  std::vector<std::vector<cuda::CUfunction>> functions;  // [kernel][launch]
  // Kernels' scratch buffers (CudaScratchInfo), pooled: a call takes them
  // without a driver call and gives them back when it returns.
  Ref<memory::Allocator> scratch;
};

void DestroyDeviceModule(DeviceModule* module) { delete module; }

absl::StatusOr<DeviceModulePtr> LoadDeviceModule(Device device, const std::string& target,
                                                 const std::vector<CudaImage>& images,
                                                 const std::vector<CudaKernelInfo>& kernels) {
  TETHER_ASSIGN_OR_RETURN(const cuda::CudaDriver* driver, cuda::CudaDriver::Get());
  TETHER_ASSIGN_OR_RETURN(cuda::CUcontext ctx, cuda::PrimaryContext(device));
  auto call = [&](cuda::CUresult r, absl::string_view what) {
    return cuda::CudaStatus(*driver, r, what, device);
  };
  TETHER_RETURN_IF_ERROR(call(driver->cuCtxSetCurrent(ctx), "cuCtxSetCurrent"));
  cuda::CUdevice dev = 0;
  TETHER_RETURN_IF_ERROR(call(driver->cuDeviceGet(&dev, device.id), "cuDeviceGet"));
  auto attr = [&](cuda::CUdevice_attribute a, int* v) {
    return call(driver->cuDeviceGetAttribute(v, a, dev),
                absl::StrCat("cuDeviceGetAttribute(", static_cast<int>(a), ")"));
  };
  int major = 0;
  int minor = 0;
  int sms = 0;
  TETHER_RETURN_IF_ERROR(attr(cuda::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &major));
  TETHER_RETURN_IF_ERROR(attr(cuda::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &minor));
  TETHER_RETURN_IF_ERROR(attr(cuda::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &sms));
  const int sm = major * 10 + minor;

  const CudaImage* image = PickCudaImage(images, sm);
  if (image == nullptr) {
    const bool specific = std::any_of(images.begin(), images.end(), IsArchSpecific);
    return PreconditionError("kernel library has PTX for ", CudaImageNames(images), "; ",
                             device.ToString(), " (", DeviceName(*driver, dev), ") is sm_", sm,
                             specific ? " (PTX for sm_XXa runs only on sm_XX: compile with "
                                        "another -arch too, e.g. cuda -arch=sm_90,sm_80)"
                                      : "");
  }

  // The JIT writes its diagnostics into the log; the size option comes back
  // as the bytes written.
  std::string error_log(16 << 10, '\0');
  cuda::CUjit_option options[] = {cuda::CU_JIT_ERROR_LOG_BUFFER,
                                  cuda::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {error_log.data(),
                    reinterpret_cast<void*>(static_cast<uintptr_t>(error_log.size() - 1))};
  cuda::CUmodule module = nullptr;
  cuda::CUresult r = driver->cuModuleLoadDataEx(&module, image->ptx.c_str(), 2, options, values);
  if (r != cuda::CUDA_SUCCESS) {
    absl::Status status = call(
        r, absl::StrCat("cuModuleLoadDataEx(ptx for sm_", image->sm, ", target ", target, ")"));
    std::string log(error_log.c_str());
    absl::StripTrailingAsciiWhitespace(&log);
    if (log.empty()) return status;
    return WithErrorKind(
        absl::Status(status.code(), absl::StrCat(status.message(), "; jit log: ", log)),
        GetErrorKind(status));
  }
  DeviceModulePtr loaded(new DeviceModule(driver, device, ctx, module));
  loaded->sm = sm;
  loaded->image_sm = image->sm;
  loaded->sm_count = std::max(sms, 1);
  loaded->scratch = memory::CreateAllocator(device, memory::AllocatorType::kPooled);
  loaded->functions.resize(kernels.size());
  int shared_optin = -1;  // the device's opt-in limit, read on first need
  for (size_t k = 0; k < kernels.size(); ++k) {
    for (size_t l = 0; l < kernels[k].launches.size(); ++l) {
      const CudaLaunchInfo& launch = kernels[k].launches[l];
      const std::string& entry = launch.entry;
      cuda::CUfunction fn = nullptr;
      r = driver->cuModuleGetFunction(&fn, module, entry.c_str());
      if (r == cuda::CUDA_ERROR_NOT_FOUND) {
        return ValueError("kernel library's ptx for sm_", image->sm, " has no entry ", entry,
                          " (kernel ", kernels[k].name, " launch ", l, ")");
      }
      TETHER_RETURN_IF_ERROR(call(r, absl::StrCat("cuModuleGetFunction(", entry, ")")));
      // Past 48 KiB of dynamic shared memory a function must opt in, up to
      // the device's limit; a launch without it would fail at every call.
      const int64_t shared = launch.dynamic_shared_bytes;
      if (shared > kCudaDefaultDynamicSharedBytes) {
        if (shared_optin < 0) {
          TETHER_RETURN_IF_ERROR(
              attr(cuda::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &shared_optin));
        }
        if (shared > shared_optin) {
          return OutOfMemoryError("kernel ", kernels[k].name, " launch ", entry, " asks for ",
                                  shared, " bytes of dynamic shared memory; ", device.ToString(),
                                  " (", DeviceName(*driver, dev), ", sm_", sm, ") allows at most ",
                                  shared_optin, " bytes a block");
        }
        TETHER_RETURN_IF_ERROR(call(
            driver->cuFuncSetAttribute(fn, cuda::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                       static_cast<int>(shared)),
            absl::StrCat("cuFuncSetAttribute(", entry, ", max dynamic shared memory ", shared,
                         " bytes)")));
      }
      loaded->functions[k].push_back(fn);
    }
  }
  return loaded;
}

absl::Status LaunchKernel(const CudaKernelInfo& k, size_t kernel_index, const DeviceModule& module,
                          const std::vector<std::optional<int64_t>>& counts,
                          const std::vector<int64_t>& scratch_sizes, BoundCall* call) {
  const cuda::CudaDriver& driver = *module.driver;
  // The .params in PTX order: parameters, scratch pointers, parameter
  // dims, scratch dims. Scratch comes from the module's pool and goes back
  // when the call returns, its launches still queued: kernels run on the
  // legacy default stream, so the pool's next user runs after them. On a
  // caller's own stream (runtime/device/stream.h) that order does not hold
  // across streams, so a launch there with scratch waits for its stream
  // before the scratch goes back.
  const auto stream = static_cast<cuda::CUstream>(CurrentStream(module.device));
  std::vector<int64_t> words = std::move(call->words);
  std::vector<memory::Buffer> scratch;
  absl::Cleanup release = [&] {
    for (const memory::Buffer& b : scratch) module.scratch->Free(b);
  };
  for (size_t b = 0; b < k.scratch.size(); ++b) {
    int64_t address = 0;
    if (scratch_sizes[b] > 0) {
      const size_t bytes = static_cast<size_t>(scratch_sizes[b]) * k.scratch[b].dtype.bytes();
      absl::StatusOr<memory::Buffer> buf = module.scratch->Alloc(bytes, kCudaTensorAlignment);
      if (!buf.ok()) {
        return Annotate(buf.status(), "kernel ", k.name, " scratch ", b, ": ");
      }
      address = static_cast<int64_t>(reinterpret_cast<uintptr_t>(buf->data));
      scratch.push_back(*buf);
    }
    words.push_back(address);
  }
  words.insert(words.end(), call->dims.begin(), call->dims.end());
  words.insert(words.end(), scratch_sizes.begin(), scratch_sizes.end());
  std::vector<void*> params(words.size());
  for (size_t i = 0; i < words.size(); ++i) params[i] = &words[i];
  TETHER_RETURN_IF_ERROR(cuda::CudaStatus(driver, driver.cuCtxSetCurrent(module.ctx),
                                          "cuCtxSetCurrent", module.device));
  const int64_t max_blocks = kBlocksPerSm * module.sm_count;
  for (size_t l = 0; l < k.launches.size(); ++l) {
    const CudaLaunchInfo& launch = k.launches[l];
    int64_t blocks = max_blocks;
    if (counts[l].has_value()) {
      const int64_t count = *counts[l];
      if (count <= 0) continue;  // an empty (or negative) loop runs no iteration
      blocks = std::min((count - 1) / launch.block + 1, max_blocks);
    }
    cuda::CUresult r =
        driver.cuLaunchKernel(module.functions[kernel_index][l], static_cast<unsigned int>(blocks),
                              1, 1, static_cast<unsigned int>(launch.block), 1, 1,
                              static_cast<unsigned int>(launch.dynamic_shared_bytes), stream,
                              params.empty() ? nullptr : params.data(), /*extra=*/nullptr);
    if (r != cuda::CUDA_SUCCESS) {
      return cuda::CudaStatus(
          driver, r,
          absl::StrCat("cuLaunchKernel(", launch.entry, ", ", blocks, " blocks of ", launch.block,
                       " threads",
                       launch.dynamic_shared_bytes > 0
                           ? absl::StrCat(", ", launch.dynamic_shared_bytes, " shared bytes")
                           : "",
                       ") of kernel ", k.name),
          module.device);
    }
  }
  if (stream != nullptr && !scratch.empty()) {
    return cuda::CudaStatus(driver, driver.cuStreamSynchronize(stream), "cuStreamSynchronize",
                            module.device);
  }
  return absl::OkStatus();
}

}  // namespace tether::cuda_launch
