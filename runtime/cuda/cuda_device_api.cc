// The CUDA device API over the dlopen'ed driver (cuda_driver.h). Each device is
// used through its primary context, retained once on first use and made
// current on the calling thread before every driver call, so any thread may use
// any device. Without a driver every call but `exist` is UNAVAILABLE.
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "runtime/core/error.h"
#include "runtime/cuda/cuda_driver.h"
#include "runtime/device/device_api.h"
#include "runtime/device/device_api_internal.h"

namespace tether {
namespace {

using cuda::CUcontext;
using cuda::CudaDriver;
using cuda::CudaStatus;
using cuda::CUdevice;
using cuda::CUdeviceptr;
using cuda::CUevent;
using cuda::CUresult;
using cuda::CUstream;

// cuMemAlloc returns memory aligned to at least this many bytes.
constexpr size_t kCudaAllocAlignment = 256;

CUdeviceptr DevPtr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

// Records two CUDA events on the default stream of one device. Thread contract:
// thread-hostile.
class CudaTimer final : public DeviceTimer {
 public:
  CudaTimer(const CudaDriver* driver, Device device, CUcontext ctx, CUevent start, CUevent stop)
      : driver_(driver), device_(device), ctx_(ctx), start_(start), stop_(stop) {}
  ~CudaTimer() override {
    if (driver_->cuCtxSetCurrent(ctx_) != cuda::CUDA_SUCCESS) return;
    driver_->cuEventDestroy_v2(start_);
    driver_->cuEventDestroy_v2(stop_);
  }

  absl::Status Start() override {
    TETHER_RETURN_IF_ERROR(Call(driver_->cuCtxSetCurrent(ctx_), "cuCtxSetCurrent"));
    TETHER_RETURN_IF_ERROR(Call(driver_->cuEventRecord(start_, nullptr), "cuEventRecord(start)"));
    started_ = true;
    return absl::OkStatus();
  }
  absl::Status Stop() override {
    if (!started_) return PreconditionError("timer stopped before it was started");
    TETHER_RETURN_IF_ERROR(Call(driver_->cuCtxSetCurrent(ctx_), "cuCtxSetCurrent"));
    TETHER_RETURN_IF_ERROR(Call(driver_->cuEventRecord(stop_, nullptr), "cuEventRecord(stop)"));
    stopped_ = true;
    return absl::OkStatus();
  }
  absl::StatusOr<int64_t> ElapsedNanos() override {
    if (!stopped_) return PreconditionError("timer read before it was stopped");
    TETHER_RETURN_IF_ERROR(Call(driver_->cuCtxSetCurrent(ctx_), "cuCtxSetCurrent"));
    TETHER_RETURN_IF_ERROR(Call(driver_->cuEventSynchronize(stop_), "cuEventSynchronize"));
    float ms = 0;
    TETHER_RETURN_IF_ERROR(
        Call(driver_->cuEventElapsedTime(&ms, start_, stop_), "cuEventElapsedTime"));
    return static_cast<int64_t>(static_cast<double>(ms) * 1e6);
  }

 private:
  absl::Status Call(CUresult r, absl::string_view call) {
    return CudaStatus(*driver_, r, call, device_);
  }

  const CudaDriver* driver_;
  Device device_;
  CUcontext ctx_;
  CUevent start_;
  CUevent stop_;
  bool started_ = false;
  bool stopped_ = false;
};

// Thread contract: thread-safe. The driver table and device list are immutable
// after construction; primary contexts are retained under mu_.
class CudaDeviceAPIImpl final : public DeviceAPI {
 public:
  CudaDeviceAPIImpl() {
    absl::StatusOr<const CudaDriver*> driver = CudaDriver::Get();
    if (!driver.ok()) {
      available_ = driver.status();
      return;
    }
    driver_ = *driver;
    int count = 0;
    if (absl::Status s =
            Call(driver_->cuDeviceGetCount(&count), "cuDeviceGetCount", Device::Cuda(0));
        !s.ok()) {
      available_ = s;
      return;
    }
    for (int i = 0; i < count; ++i) {
      CUdevice dev = 0;
      if (absl::Status s = Call(driver_->cuDeviceGet(&dev, i), "cuDeviceGet", Device::Cuda(i));
          !s.ok()) {
        available_ = s;
        devices_.clear();
        return;
      }
      devices_.push_back(dev);
    }
    if (devices_.empty()) {
      available_ = UnavailableError("no CUDA device: the driver reports 0 devices");
      return;
    }
    contexts_.assign(devices_.size(), nullptr);
  }

  absl::StatusOr<Value> GetAttr(int device_id, DeviceAttr attr) override {
    if (attr == DeviceAttr::kExist) {
      return Value(available_.ok() && device_id >= 0 &&
                   device_id < static_cast<int>(devices_.size()));
    }
    Device device = Device::Cuda(device_id);
    TETHER_RETURN_IF_ERROR(CheckDevice(device));
    CUdevice dev = devices_[device_id];
    auto int_attr = [&](cuda::CUdevice_attribute a) -> absl::StatusOr<int64_t> {
      int v = 0;
      TETHER_RETURN_IF_ERROR(Call(driver_->cuDeviceGetAttribute(&v, a, dev),
                                  absl::StrCat("cuDeviceGetAttribute(", static_cast<int>(a), ")"),
                                  device));
      return v;
    };
    switch (attr) {
      case DeviceAttr::kMaxThreadsPerBlock:
        return IntValue(int_attr(cuda::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK));
      case DeviceAttr::kWarpSize:
        return IntValue(int_attr(cuda::CU_DEVICE_ATTRIBUTE_WARP_SIZE));
      case DeviceAttr::kMaxSharedMemoryPerBlock:
        return IntValue(int_attr(cuda::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK));
      case DeviceAttr::kComputeVersion: {
        TETHER_ASSIGN_OR_RETURN(int64_t major,
                                int_attr(cuda::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR));
        TETHER_ASSIGN_OR_RETURN(int64_t minor,
                                int_attr(cuda::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR));
        return Value(absl::StrCat(major, ".", minor));
      }
      case DeviceAttr::kDeviceName: {
        char name[256] = {};
        TETHER_RETURN_IF_ERROR(
            Call(driver_->cuDeviceGetName(name, sizeof(name) - 1, dev), "cuDeviceGetName", device));
        return Value(std::string(name, strnlen(name, sizeof(name))));
      }
      case DeviceAttr::kMaxClockRate:
        return IntValue(int_attr(cuda::CU_DEVICE_ATTRIBUTE_CLOCK_RATE));
      case DeviceAttr::kMultiProcessorCount:
        return IntValue(int_attr(cuda::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT));
      case DeviceAttr::kMaxThreadDimensions: {
        TETHER_ASSIGN_OR_RETURN(int64_t x, int_attr(cuda::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X));
        TETHER_ASSIGN_OR_RETURN(int64_t y, int_attr(cuda::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y));
        TETHER_ASSIGN_OR_RETURN(int64_t z, int_attr(cuda::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z));
        return MakeShape({x, y, z});
      }
      case DeviceAttr::kL2CacheSize:
        return IntValue(int_attr(cuda::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE));
      case DeviceAttr::kMemoryClockRate:
        return IntValue(int_attr(cuda::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE));
      case DeviceAttr::kMemoryBusWidth:
        return IntValue(int_attr(cuda::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH));
      case DeviceAttr::kMaxThreadsPerMultiProcessor:
        return IntValue(int_attr(cuda::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR));
      case DeviceAttr::kMaxRegistersPerBlock:
        return IntValue(int_attr(cuda::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK));
      case DeviceAttr::kMaxGridDimensions: {
        TETHER_ASSIGN_OR_RETURN(int64_t x, int_attr(cuda::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X));
        TETHER_ASSIGN_OR_RETURN(int64_t y, int_attr(cuda::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y));
        TETHER_ASSIGN_OR_RETURN(int64_t z, int_attr(cuda::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z));
        return MakeShape({x, y, z});
      }
      case DeviceAttr::kApiVersion: {
#ifdef TETHER_CUDA_API_VERSION
        // As TVM's: the CUDA version the runtime was built for (the
        // toolkit's CUDA_VERSION, read by CMake), not the driver's.
        return Value(static_cast<int64_t>(TETHER_CUDA_API_VERSION));
#else
        int version = 0;
        TETHER_RETURN_IF_ERROR(
            Call(driver_->cuDriverGetVersion(&version), "cuDriverGetVersion", device));
        return Value(static_cast<int64_t>(version));
#endif
      }
      case DeviceAttr::kDriverVersion: {
        int version = 0;
        TETHER_RETURN_IF_ERROR(
            Call(driver_->cuDriverGetVersion(&version), "cuDriverGetVersion", device));
        return Value(absl::StrCat(version / 1000, ".", (version % 1000) / 10));
      }
      case DeviceAttr::kTotalGlobalMemory: {
        size_t bytes = 0;
        TETHER_RETURN_IF_ERROR(
            Call(driver_->cuDeviceTotalMem_v2(&bytes, dev), "cuDeviceTotalMem", device));
        return Value(static_cast<int64_t>(bytes));
      }
      case DeviceAttr::kAvailableGlobalMemory: {
        TETHER_RETURN_IF_ERROR(Activate(device));
        size_t free_bytes = 0;
        size_t total_bytes = 0;
        TETHER_RETURN_IF_ERROR(
            Call(driver_->cuMemGetInfo_v2(&free_bytes, &total_bytes), "cuMemGetInfo", device));
        return Value(static_cast<int64_t>(free_bytes));
      }
      case DeviceAttr::kPciBusId: {
        // As cuDeviceGetPCIBusId writes it, and NVML and nvidia-smi read it.
        TETHER_ASSIGN_OR_RETURN(int64_t domain, int_attr(cuda::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID));
        TETHER_ASSIGN_OR_RETURN(int64_t bus, int_attr(cuda::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID));
        TETHER_ASSIGN_OR_RETURN(int64_t slot, int_attr(cuda::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID));
        return Value(absl::StrFormat("%04x:%02x:%02x.0", domain, bus, slot));
      }
      default:
        return Value();
    }
  }

  absl::StatusOr<void*> Alloc(Device device, size_t nbytes, size_t alignment) override {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
      return ValueError("alignment ", alignment, " is not a power of two");
    }
    if (alignment > kCudaAllocAlignment) {
      return ValueError("alignment ", alignment, " is not supported on ", device.ToString(),
                        "; cuda allocations are aligned to ", kCudaAllocAlignment, " bytes");
    }
    TETHER_RETURN_IF_ERROR(Activate(device));
    CUdeviceptr ptr = 0;
    // cuMemAlloc rejects zero bytes; callers still expect a distinct pointer.
    CUresult r = driver_->cuMemAlloc_v2(&ptr, nbytes == 0 ? 1 : nbytes);
    if (r != cuda::CUDA_SUCCESS) {
      return Call(r, absl::StrCat("cuMemAlloc(", nbytes, " bytes)"), device);
    }
    return reinterpret_cast<void*>(ptr);
  }

  void Free(Device device, void* ptr) override {
    if (ptr == nullptr || !CheckDevice(device).ok()) return;
    if (!Activate(device).ok()) return;
    CUresult r = driver_->cuMemFree_v2(DevPtr(ptr));
    // At process exit the driver may already be torn down, and after a
    // kernel fault every call fails (reported once, where it happened):
    // neither is worth a line per buffer.
    if (r != cuda::CUDA_SUCCESS && r != cuda::CUDA_ERROR_DEINITIALIZED && !cuda::IsStickyFault(r)) {
      std::fprintf(stderr, "tether: %s\n", Call(r, "cuMemFree", device).ToString().c_str());
    }
  }

  absl::Status Copy(const void* from, Device from_device, void* to, Device to_device, size_t nbytes,
                    StreamHandle stream) override {
    if (nbytes == 0) return absl::OkStatus();
    if (from == nullptr || to == nullptr) {
      return ValueError("copy of ", nbytes, " bytes with a null pointer");
    }
    const bool from_gpu = from_device.type == kDLCUDA;
    const bool to_gpu = to_device.type == kDLCUDA;
    for (Device d : {from_device, to_device}) {
      if (d.type != kDLCUDA && d.type != kDLCPU && d.type != kDLCUDAHost) {
        return ValueError("the cuda device api cannot copy from ", from_device.ToString(), " to ",
                          to_device.ToString());
      }
    }
    auto s = static_cast<CUstream>(stream);
    auto what = [&](absl::string_view fn) {
      return absl::StrCat(fn, "(", nbytes, " bytes from ", from_device.ToString(), " to ",
                          to_device.ToString(), ")");
    };
    if (!from_gpu && !to_gpu) {
      std::memmove(to, from, nbytes);
      return absl::OkStatus();
    }
    if (!from_gpu) {  // host to device
      TETHER_RETURN_IF_ERROR(Activate(to_device));
      CUresult r = s != nullptr ? driver_->cuMemcpyHtoDAsync_v2(DevPtr(to), from, nbytes, s)
                                : driver_->cuMemcpyHtoD_v2(DevPtr(to), from, nbytes);
      return Call(r, what("cuMemcpyHtoD"), to_device);
    }
    if (!to_gpu) {  // device to host
      TETHER_RETURN_IF_ERROR(Activate(from_device));
      CUresult r = s != nullptr ? driver_->cuMemcpyDtoHAsync_v2(to, DevPtr(from), nbytes, s)
                                : driver_->cuMemcpyDtoH_v2(to, DevPtr(from), nbytes);
      return Call(r, what("cuMemcpyDtoH"), from_device);
    }
    if (from_device.id == to_device.id) {
      TETHER_RETURN_IF_ERROR(Activate(from_device));
      CUresult r = s != nullptr ? driver_->cuMemcpyDtoDAsync_v2(DevPtr(to), DevPtr(from), nbytes, s)
                                : driver_->cuMemcpyDtoD_v2(DevPtr(to), DevPtr(from), nbytes);
      return Call(r, what("cuMemcpyDtoD"), from_device);
    }
    // Across devices: a synchronous peer copy (the driver stages through the
    // host when peer access is off), which also satisfies any stream ordering.
    TETHER_ASSIGN_OR_RETURN(CUcontext from_ctx, Context(from_device));
    TETHER_ASSIGN_OR_RETURN(CUcontext to_ctx, Context(to_device));
    TETHER_RETURN_IF_ERROR(Activate(to_device));
    return Call(driver_->cuMemcpyPeer(DevPtr(to), to_ctx, DevPtr(from), from_ctx, nbytes),
                what("cuMemcpyPeer"), to_device);
  }

  absl::StatusOr<StreamHandle> CreateStream(Device device) override {
    TETHER_RETURN_IF_ERROR(Activate(device));
    CUstream stream = nullptr;
    // Default flags: the stream stays ordered with the legacy default stream,
    // which synchronous copies and timers use.
    TETHER_RETURN_IF_ERROR(Call(driver_->cuStreamCreate(&stream, 0), "cuStreamCreate", device));
    return static_cast<StreamHandle>(stream);
  }

  void FreeStream(Device device, StreamHandle stream) override {
    if (stream == nullptr || !Activate(device).ok()) return;
    CUresult r = driver_->cuStreamDestroy_v2(static_cast<CUstream>(stream));
    if (r != cuda::CUDA_SUCCESS && r != cuda::CUDA_ERROR_DEINITIALIZED && !cuda::IsStickyFault(r)) {
      std::fprintf(stderr, "tether: %s\n", Call(r, "cuStreamDestroy", device).ToString().c_str());
    }
  }

  absl::Status Sync(Device device, StreamHandle stream) override {
    TETHER_RETURN_IF_ERROR(Activate(device));
    if (stream == nullptr) return Call(driver_->cuCtxSynchronize(), "cuCtxSynchronize", device);
    return Call(driver_->cuStreamSynchronize(static_cast<CUstream>(stream)), "cuStreamSynchronize",
                device);
  }

  absl::StatusOr<std::unique_ptr<DeviceTimer>> CreateTimer(Device device) override {
    TETHER_RETURN_IF_ERROR(Activate(device));
    TETHER_ASSIGN_OR_RETURN(CUcontext ctx, Context(device));
    CUevent start = nullptr;
    CUevent stop = nullptr;
    TETHER_RETURN_IF_ERROR(
        Call(driver_->cuEventCreate(&start, cuda::CU_EVENT_DEFAULT), "cuEventCreate", device));
    if (absl::Status s =
            Call(driver_->cuEventCreate(&stop, cuda::CU_EVENT_DEFAULT), "cuEventCreate", device);
        !s.ok()) {
      driver_->cuEventDestroy_v2(start);
      return s;
    }
    return std::unique_ptr<DeviceTimer>(
        std::make_unique<CudaTimer>(driver_, device, ctx, start, stop));
  }

  absl::Status Memset(Device device, void* ptr, int value, size_t nbytes) override {
    if (nbytes == 0) return absl::OkStatus();
    if (ptr == nullptr) return ValueError("memset of ", nbytes, " bytes at a null pointer");
    TETHER_RETURN_IF_ERROR(Activate(device));
    return Call(driver_->cuMemsetD8_v2(DevPtr(ptr), static_cast<unsigned char>(value), nbytes),
                absl::StrCat("cuMemsetD8(", nbytes, " bytes)"), device);
  }

  // The primary context of `device` (cuda::PrimaryContext).
  absl::StatusOr<CUcontext> PrimaryContext(Device device) { return Context(device); }

 private:
  absl::Status Call(CUresult r, absl::string_view call, Device device) const {
    return CudaStatus(*driver_, r, call, device);
  }

  static absl::StatusOr<Value> IntValue(absl::StatusOr<int64_t> v) {
    if (!v.ok()) return v.status();
    return Value(*v);
  }

  // OK when `device` is a CUDA device the driver knows.
  absl::Status CheckDevice(Device device) const {
    if (!available_.ok()) return available_;
    if (device.type != kDLCUDA) {
      return ValueError("the cuda device api was given ", device.ToString());
    }
    if (device.id < 0 || device.id >= static_cast<int>(devices_.size())) {
      return UnavailableError("no CUDA device ", device.ToString(), ": the driver reports ",
                              devices_.size(), " device(s)");
    }
    return absl::OkStatus();
  }

  // The device's primary context, retained on first use and kept for the
  // process lifetime (buffers and modules may be released during exit).
  absl::StatusOr<CUcontext> Context(Device device) {
    TETHER_RETURN_IF_ERROR(CheckDevice(device));
    absl::MutexLock lock(&mu_);
    CUcontext& ctx = contexts_[device.id];
    if (ctx == nullptr) {
      CUcontext retained = nullptr;
      TETHER_RETURN_IF_ERROR(Call(driver_->cuDevicePrimaryCtxRetain(&retained, devices_[device.id]),
                                  "cuDevicePrimaryCtxRetain", device));
      ctx = retained;
    }
    return ctx;
  }

  // Makes the device's primary context current on this thread.
  absl::Status Activate(Device device) {
    TETHER_ASSIGN_OR_RETURN(CUcontext ctx, Context(device));
    return Call(driver_->cuCtxSetCurrent(ctx), "cuCtxSetCurrent", device);
  }

  // OK, or why CUDA cannot be used (no driver, no devices).
  absl::Status available_;
  const CudaDriver* driver_ = nullptr;
  std::vector<CUdevice> devices_;
  absl::Mutex mu_;
  std::vector<CUcontext> contexts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

namespace {

CudaDeviceAPIImpl* CudaDeviceAPIInstance() {
  static CudaDeviceAPIImpl* const kApi = new CudaDeviceAPIImpl();
  return kApi;
}

}  // namespace

namespace device_internal {

DeviceAPI* CudaDeviceAPI() { return CudaDeviceAPIInstance(); }

}  // namespace device_internal

namespace cuda {

absl::StatusOr<CUcontext> PrimaryContext(Device device) {
  return CudaDeviceAPIInstance()->PrimaryContext(device);
}

}  // namespace cuda
}  // namespace tether
