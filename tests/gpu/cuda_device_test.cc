// Tests of the CUDA device API and the allocators on a real GPU. Each test
// skips when no CUDA device is present (no driver, or zero devices).
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/device/device_api.h"
#include "runtime/memory/allocator.h"

namespace tether {
namespace {

using ::testing::HasSubstr;

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!DeviceExists(Device::Cuda(0))) {
      GTEST_SKIP() << "no CUDA device: cuda:0 does not exist (no driver or no GPU)";
    }
    absl::StatusOr<DeviceAPI*> api = DeviceAPI::Get(kDLCUDA);
    ASSERT_TRUE(api.ok()) << api.status();
    api_ = *api;
  }

  DeviceAPI* api_ = nullptr;
  const Device gpu_ = Device::Cuda(0);
};

TEST_F(CudaDeviceTest, AllocatesAlignedBuffers) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{4096}, size_t{64} << 20}) {
    absl::StatusOr<void*> p = api_->Alloc(gpu_, n, 256);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_NE(*p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % 256, 0u);
    api_->Free(gpu_, *p);
  }
  absl::StatusOr<void*> over = api_->Alloc(gpu_, 64, 4096);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CudaDeviceTest, PetabyteAllocationIsResourceExhaustedNamingTheSize) {
  absl::StatusOr<void*> p = api_->Alloc(gpu_, size_t{1} << 50, 256);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(p.status().message(), HasSubstr("CUDA_ERROR_OUT_OF_MEMORY"));
  EXPECT_THAT(p.status().message(), HasSubstr("cuMemAlloc(1125899906842624 bytes) on cuda:0"));
}

TEST_F(CudaDeviceTest, HostDeviceRoundTrip) {
  const size_t n = 1 << 20;
  std::vector<uint8_t> host(n), back(n, 0), back2(n, 0);
  std::iota(host.begin(), host.end(), 0);
  absl::StatusOr<void*> a = api_->Alloc(gpu_, n, 256);
  absl::StatusOr<void*> b = api_->Alloc(gpu_, n, 256);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(api_->Copy(host.data(), Device::Cpu(), *a, gpu_, n, nullptr).ok());
  ASSERT_TRUE(api_->Copy(*a, gpu_, *b, gpu_, n, nullptr).ok());  // device to device
  ASSERT_TRUE(api_->Copy(*b, gpu_, back.data(), Device::Cpu(), n, nullptr).ok());
  EXPECT_EQ(host, back);

  // The same through a stream.
  absl::StatusOr<StreamHandle> stream = api_->CreateStream(gpu_);
  ASSERT_TRUE(stream.ok()) << stream.status();
  ASSERT_TRUE(api_->Memset(gpu_, *b, 0, n).ok());
  ASSERT_TRUE(api_->Copy(*a, gpu_, *b, gpu_, n, *stream).ok());
  ASSERT_TRUE(api_->Copy(*b, gpu_, back2.data(), Device::Cpu(), n, *stream).ok());
  ASSERT_TRUE(api_->Sync(gpu_, *stream).ok());
  EXPECT_EQ(host, back2);
  api_->FreeStream(gpu_, *stream);

  ASSERT_TRUE(api_->Memset(gpu_, *a, 0x7f, 16).ok());
  ASSERT_TRUE(api_->Sync(gpu_, nullptr).ok());
  ASSERT_TRUE(api_->Copy(*a, gpu_, back.data(), Device::Cpu(), 32, nullptr).ok());
  EXPECT_EQ(back[0], 0x7f);
  EXPECT_EQ(back[15], 0x7f);
  EXPECT_EQ(back[16], 16);
  api_->Free(gpu_, *a);
  api_->Free(gpu_, *b);
}

TEST_F(CudaDeviceTest, CrossDeviceCopy) {
  if (!DeviceExists(Device::Cuda(1))) GTEST_SKIP() << "needs two CUDA devices";
  const Device gpu1 = Device::Cuda(1);
  std::vector<uint8_t> host(4096), back(4096, 0);
  std::iota(host.begin(), host.end(), 3);
  absl::StatusOr<void*> a = api_->Alloc(gpu_, host.size(), 256);
  absl::StatusOr<void*> b = api_->Alloc(gpu1, host.size(), 256);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(api_->Copy(host.data(), Device::Cpu(), *a, gpu_, host.size(), nullptr).ok());
  ASSERT_TRUE(api_->Copy(*a, gpu_, *b, gpu1, host.size(), nullptr).ok());
  ASSERT_TRUE(api_->Copy(*b, gpu1, back.data(), Device::Cpu(), host.size(), nullptr).ok());
  EXPECT_EQ(host, back);
  api_->Free(gpu_, *a);
  api_->Free(gpu1, *b);
}

TEST_F(CudaDeviceTest, EventTimer) {
  absl::StatusOr<std::unique_ptr<DeviceTimer>> timer = api_->CreateTimer(gpu_);
  ASSERT_TRUE(timer.ok()) << timer.status();
  absl::StatusOr<void*> p = api_->Alloc(gpu_, 1 << 24, 256);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE((*timer)->Start().ok());
  ASSERT_TRUE(api_->Memset(gpu_, *p, 1, 1 << 24).ok());
  ASSERT_TRUE((*timer)->Stop().ok());
  absl::StatusOr<int64_t> ns = (*timer)->ElapsedNanos();
  ASSERT_TRUE(ns.ok()) << ns.status();
  EXPECT_GE(*ns, 0);
  api_->Free(gpu_, *p);
}

// api_version is TVM's: the CUDA version the runtime was built for; the
// driver's is driver_version. (Also run against the stand-in driver, whose
// version, 12.4, differs from any toolkit's: label server.)
TEST_F(CudaDeviceTest, ApiVersionIsTheToolkitsNotTheDrivers) {
  absl::StatusOr<Value> api = api_->GetAttr(0, DeviceAttr::kApiVersion);
  ASSERT_TRUE(api.ok()) << api.status();
#ifdef TETHER_CUDA_API_VERSION
  EXPECT_EQ(api->int_value(), TETHER_CUDA_API_VERSION);
#else
  absl::StatusOr<Value> driver = api_->GetAttr(0, DeviceAttr::kDriverVersion);
  ASSERT_TRUE(driver.ok()) << driver.status();
  EXPECT_EQ(absl::StrCat(api->int_value() / 1000, ".", api->int_value() % 1000 / 10),
            driver->string_value());
#endif
}

TEST_F(CudaDeviceTest, Attributes) {
  auto attr = [&](DeviceAttr a) {
    absl::StatusOr<Value> v = api_->GetAttr(0, a);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : Value();
  };
  EXPECT_TRUE(attr(DeviceAttr::kExist).bool_value());
  EXPECT_GT(attr(DeviceAttr::kMaxThreadsPerBlock).int_value(), 0);
  EXPECT_EQ(attr(DeviceAttr::kWarpSize).int_value(), 32);
  EXPECT_GT(attr(DeviceAttr::kMaxSharedMemoryPerBlock).int_value(), 0);
  Value cc = attr(DeviceAttr::kComputeVersion);
  ASSERT_TRUE(cc.is_string());
  EXPECT_THAT(cc.string_value(), ::testing::MatchesRegex("[0-9]+\\.[0-9]+"));
  Value name = attr(DeviceAttr::kDeviceName);
  ASSERT_TRUE(name.is_string());
  EXPECT_FALSE(name.string_value().empty());
  EXPECT_GT(attr(DeviceAttr::kMaxClockRate).int_value(), 0);
  EXPECT_GT(attr(DeviceAttr::kMultiProcessorCount).int_value(), 0);
  Value dims = attr(DeviceAttr::kMaxThreadDimensions);
  ASSERT_TRUE(dims.is_shape());
  auto* shape = static_cast<const ShapeObj*>(dims.object());
  ASSERT_EQ(shape->dims.size(), 3u);
  EXPECT_GT(shape->dims[0], 0);
  EXPECT_GT(attr(DeviceAttr::kApiVersion).int_value(), 1000);
  Value driver = attr(DeviceAttr::kDriverVersion);
  ASSERT_TRUE(driver.is_string());
  EXPECT_THAT(driver.string_value(), ::testing::MatchesRegex("[0-9]+\\.[0-9]+"));
  const int64_t total = attr(DeviceAttr::kTotalGlobalMemory).int_value();
  const int64_t avail = attr(DeviceAttr::kAvailableGlobalMemory).int_value();
  EXPECT_GT(total, 0);
  EXPECT_GT(avail, 0);
  EXPECT_LE(avail, total);
  EXPECT_GT(attr(DeviceAttr::kL2CacheSize).int_value(), 0);
  EXPECT_GT(attr(DeviceAttr::kMemoryClockRate).int_value(), 0);
  EXPECT_GE(attr(DeviceAttr::kMemoryBusWidth).int_value(), 64);
  EXPECT_GE(attr(DeviceAttr::kMaxThreadsPerMultiProcessor).int_value(),
            attr(DeviceAttr::kMaxThreadsPerBlock).int_value());
  EXPECT_GT(attr(DeviceAttr::kMaxRegistersPerBlock).int_value(), 0);
  Value grid = attr(DeviceAttr::kMaxGridDimensions);
  ASSERT_TRUE(grid.is_shape());
  EXPECT_GE(static_cast<const ShapeObj*>(grid.object())->dims[0], 65535);
}

TEST_F(CudaDeviceTest, PooledAllocatorReusesAndClears) {
  Ref<memory::Allocator> a = memory::CreateAllocator(gpu_, memory::AllocatorType::kPooled);
  absl::StatusOr<memory::Buffer> b1 = a->Alloc(5000, 64);
  ASSERT_TRUE(b1.ok()) << b1.status();
  void* first = b1->data;
  a->Free(*b1);
  absl::StatusOr<memory::Buffer> b2 = a->Alloc(7000, 64);
  ASSERT_TRUE(b2.ok());
  EXPECT_EQ(b2->data, first);
  a->Free(*b2);
  a->Clear();
  EXPECT_EQ(a->Stats().bytes_reserved, 0);
  absl::StatusOr<memory::Buffer> huge = a->Alloc(size_t{1} << 50, 64);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(huge.status().message(), HasSubstr("1125899906842624 bytes"));
}

TEST_F(CudaDeviceTest, TensorRoundTripThroughTheDefaultAllocator) {
  const int64_t shape[] = {4, 5};
  std::vector<float> values(20);
  std::iota(values.begin(), values.end(), 1.0f);
  absl::StatusOr<Tensor> host =
      Tensor::FromBytes(shape, DataType::Float(32), values.data(), values.size() * sizeof(float));
  ASSERT_TRUE(host.ok()) << host.status();
  absl::StatusOr<Tensor> dev = host->CopyTo(gpu_);
  ASSERT_TRUE(dev.ok()) << dev.status();
  EXPECT_EQ((*dev)->device(), gpu_);
  std::vector<float> back(20, 0);
  ASSERT_TRUE(dev->CopyToBytes(back.data(), back.size() * sizeof(float)).ok());
  EXPECT_EQ(values, back);
}

}  // namespace
}  // namespace tether
