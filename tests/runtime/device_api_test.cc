// Tests of DeviceAPI dispatch, the CPU device, and the CUDA device's behaviour
// without a driver (which must hold on any machine: with a driver, the same
// calls succeed instead).
#include "runtime/device/device_api.h"

#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether {
namespace {

using ::testing::HasSubstr;

DeviceAPI* Cpu() {
  absl::StatusOr<DeviceAPI*> api = DeviceAPI::Get(kDLCPU);
  EXPECT_TRUE(api.ok()) << api.status();
  return *api;
}

TEST(DeviceAttrTest, NamesFollowTheReferenceInEnumOrder) {
  std::vector<std::string> names;
  int expected = 0;
  for (const DeviceAttrName& a : AllDeviceAttrs()) {
    EXPECT_EQ(static_cast<int>(a.attr), expected++);
    names.emplace_back(a.name);
  }
  EXPECT_THAT(names,
              ::testing::ElementsAre(
                  "exist", "max_threads_per_block", "warp_size", "max_shared_memory_per_block",
                  "compute_version", "device_name", "max_clock_rate", "multi_processor_count",
                  "max_thread_dimensions", "api_version", "driver_version", "total_global_memory",
                  "available_global_memory", "l2_cache_size_bytes", "memory_clock_rate",
                  "memory_bus_width", "max_threads_per_multi_processor", "max_registers_per_block",
                  "max_grid_dimensions", "pci_bus_id"));
}

TEST(DeviceAPITest, GetReturnsOneInstancePerType) {
  absl::StatusOr<DeviceAPI*> a = DeviceAPI::Get(kDLCPU);
  absl::StatusOr<DeviceAPI*> b = DeviceAPI::Get(kDLCPU);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_TRUE(DeviceAPI::Get(kDLCUDA).ok());
}

TEST(DeviceAPITest, UnsupportedTypeIsUnimplemented) {
  absl::StatusOr<DeviceAPI*> api = DeviceAPI::Get(kDLOpenCL);
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(api.status().message(), HasSubstr("opencl"));
  EXPECT_FALSE(DeviceExists(Device{kDLVulkan, 0}));
}

TEST(CpuDeviceAPITest, Exists) {
  EXPECT_TRUE(DeviceExists(Device::Cpu()));
  EXPECT_FALSE(DeviceExists(Device::Cpu(-1)));
}

TEST(CpuDeviceAPITest, AllocatesAlignedMemoryAndFrees) {
  for (size_t alignment : {size_t{1}, size_t{8}, size_t{64}, size_t{256}, size_t{4096}}) {
    absl::StatusOr<void*> p = Cpu()->Alloc(Device::Cpu(), 1000, alignment);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % alignment, 0u) << alignment;
    std::memset(*p, 0xab, 1000);
    Cpu()->Free(Device::Cpu(), *p);
  }
  absl::StatusOr<void*> empty = Cpu()->Alloc(Device::Cpu(), 0, 64);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_NE(*empty, nullptr);
  Cpu()->Free(Device::Cpu(), *empty);
}

TEST(CpuDeviceAPITest, RejectsAlignmentThatIsNotAPowerOfTwo) {
  absl::StatusOr<void*> p = Cpu()->Alloc(Device::Cpu(), 64, 48);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("alignment 48"));
}

TEST(CpuDeviceAPITest, HugeAllocationIsResourceExhaustedNamingTheSize) {
  const size_t petabyte = size_t{1} << 50;
  absl::StatusOr<void*> p = Cpu()->Alloc(Device::Cpu(), petabyte, 64);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(p.status().message(), HasSubstr(absl::StrCat(petabyte, " bytes on cpu:0")));
}

TEST(CpuDeviceAPITest, CopiesAndSetsMemory) {
  std::vector<uint8_t> src(256), dst(256, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i);
  ASSERT_TRUE(Cpu()->Copy(src.data(), Device::Cpu(), dst.data(), Device::Cpu(), 256, nullptr).ok());
  EXPECT_EQ(src, dst);
  ASSERT_TRUE(Cpu()->Memset(Device::Cpu(), dst.data(), 7, 16).ok());
  EXPECT_EQ(dst[0], 7);
  EXPECT_EQ(dst[15], 7);
  EXPECT_EQ(dst[16], 16);
  absl::Status to_gpu =
      Cpu()->Copy(src.data(), Device::Cpu(), dst.data(), Device::Cuda(0), 256, nullptr);
  EXPECT_EQ(to_gpu.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(to_gpu.message(), HasSubstr("cuda:0"));
}

TEST(CpuDeviceAPITest, StreamsAreNullAndSyncIsANoOp) {
  absl::StatusOr<StreamHandle> stream = Cpu()->CreateStream(Device::Cpu());
  ASSERT_TRUE(stream.ok());
  EXPECT_EQ(*stream, nullptr);
  EXPECT_TRUE(Cpu()->Sync(Device::Cpu(), *stream).ok());
  Cpu()->FreeStream(Device::Cpu(), *stream);
}

TEST(CpuDeviceAPITest, TimerMeasuresANonNegativeInterval) {
  absl::StatusOr<std::unique_ptr<DeviceTimer>> timer = Cpu()->CreateTimer(Device::Cpu());
  ASSERT_TRUE(timer.ok());
  EXPECT_EQ((*timer)->ElapsedNanos().status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE((*timer)->Start().ok());
  ASSERT_TRUE((*timer)->Stop().ok());
  absl::StatusOr<int64_t> ns = (*timer)->ElapsedNanos();
  ASSERT_TRUE(ns.ok());
  EXPECT_GE(*ns, 0);
}

TEST(CpuDeviceAPITest, Attributes) {
  auto attr = [](DeviceAttr a) {
    absl::StatusOr<Value> v = Cpu()->GetAttr(0, a);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : Value();
  };
  Value exist = attr(DeviceAttr::kExist);
  ASSERT_TRUE(exist.is_bool());
  EXPECT_TRUE(exist.bool_value());
  Value mp = attr(DeviceAttr::kMultiProcessorCount);
  ASSERT_TRUE(mp.is_int());
  EXPECT_GE(mp.int_value(), 1);
  Value total = attr(DeviceAttr::kTotalGlobalMemory);
  Value avail = attr(DeviceAttr::kAvailableGlobalMemory);
  ASSERT_TRUE(total.is_int());
  ASSERT_TRUE(avail.is_int());
  EXPECT_GT(total.int_value(), 0);
  EXPECT_LE(avail.int_value(), total.int_value());
  Value name = attr(DeviceAttr::kDeviceName);
  EXPECT_TRUE(name.is_none() || (name.is_string() && !name.string_value().empty()));
  for (DeviceAttr a :
       {DeviceAttr::kWarpSize, DeviceAttr::kMaxThreadsPerBlock, DeviceAttr::kComputeVersion,
        DeviceAttr::kMaxThreadDimensions, DeviceAttr::kApiVersion, DeviceAttr::kDriverVersion}) {
    EXPECT_TRUE(attr(a).is_none()) << static_cast<int>(a);
  }
}

// On a machine without a CUDA driver (or device) the CUDA API must answer
// exist=false and fail every other call with UNAVAILABLE; with one, the same
// calls must succeed. Either way nothing may crash.
TEST(CudaDeviceAPITest, AbsentDriverIsUnavailableElseWorks) {
  absl::StatusOr<DeviceAPI*> api = DeviceAPI::Get(kDLCUDA);
  ASSERT_TRUE(api.ok()) << api.status();
  const Device gpu = Device::Cuda(0);
  absl::StatusOr<Value> exist = (*api)->GetAttr(0, DeviceAttr::kExist);
  ASSERT_TRUE(exist.ok()) << exist.status();
  ASSERT_TRUE(exist->is_bool());
  EXPECT_EQ(exist->bool_value(), DeviceExists(gpu));

  absl::StatusOr<void*> ptr = (*api)->Alloc(gpu, 1024, 64);
  absl::StatusOr<Value> name = (*api)->GetAttr(0, DeviceAttr::kDeviceName);
  absl::StatusOr<StreamHandle> stream = (*api)->CreateStream(gpu);
  absl::Status sync = (*api)->Sync(gpu, nullptr);
  absl::StatusOr<std::unique_ptr<DeviceTimer>> timer = (*api)->CreateTimer(gpu);
  if (!exist->bool_value()) {
    for (const absl::Status& s :
         {ptr.status(), name.status(), stream.status(), sync, timer.status()}) {
      EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
      EXPECT_THAT(s.message(), HasSubstr("CUDA")) << s;
    }
    // Freeing what was never allocated is harmless.
    (*api)->Free(gpu, nullptr);
    (*api)->FreeStream(gpu, nullptr);
    return;
  }
  ASSERT_TRUE(ptr.ok()) << ptr.status();
  (*api)->Free(gpu, *ptr);
  EXPECT_TRUE(name.ok() && name->is_string());
  ASSERT_TRUE(stream.ok()) << stream.status();
  (*api)->FreeStream(gpu, *stream);
  EXPECT_TRUE(sync.ok()) << sync;
  EXPECT_TRUE(timer.ok()) << timer.status();
}

TEST(CudaDeviceAPITest, DeviceIndexOutOfRangeDoesNotExist) {
  EXPECT_FALSE(DeviceExists(Device::Cuda(1 << 20)));
  absl::StatusOr<DeviceAPI*> api = DeviceAPI::Get(kDLCUDA);
  ASSERT_TRUE(api.ok());
  absl::StatusOr<void*> ptr = (*api)->Alloc(Device::Cuda(1 << 20), 64, 64);
  ASSERT_FALSE(ptr.ok());
  EXPECT_EQ(ptr.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tether
