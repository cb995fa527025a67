// Tests of the Device value type: parsing "cpu:0"-style text, the gpu alias,
// rejected spellings, and printing.
#include "runtime/core/device.h"

#include <string>

#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/core/error.h"

namespace tether {
namespace {

using ::testing::HasSubstr;

Device ParseOrDie(absl::string_view text) {
  absl::StatusOr<Device> d = Device::Parse(text);
  EXPECT_TRUE(d.ok()) << text << ": " << d.status();
  return d.ok() ? *d : Device{};
}

TEST(DeviceTest, BareTypeMeansIndexZero) { EXPECT_EQ(ParseOrDie("cpu"), Device::Cpu(0)); }

TEST(DeviceTest, ParsesTypeAndIndex) {
  EXPECT_EQ(ParseOrDie("cpu:0"), Device::Cpu(0));
  EXPECT_EQ(ParseOrDie("cpu:3"), Device::Cpu(3));
  EXPECT_EQ(ParseOrDie("cuda:1"), Device::Cuda(1));
  EXPECT_EQ(ParseOrDie("cuda"), Device::Cuda(0));
  EXPECT_EQ(ParseOrDie("cuda_host:0"), (Device{kDLCUDAHost, 0}));
  EXPECT_EQ(ParseOrDie("cuda_managed:2"), (Device{kDLCUDAManaged, 2}));
  EXPECT_EQ(ParseOrDie("opencl:1"), (Device{kDLOpenCL, 1}));
  EXPECT_EQ(ParseOrDie("vulkan:0"), (Device{kDLVulkan, 0}));
  EXPECT_EQ(ParseOrDie("metal:0"), (Device{kDLMetal, 0}));
  EXPECT_EQ(ParseOrDie("rocm:4"), (Device{kDLROCM, 4}));
  EXPECT_EQ(ParseOrDie("ext_dev:0"), (Device{kDLExtDev, 0}));
}

TEST(DeviceTest, GpuIsAnAliasOfCuda) {
  EXPECT_EQ(ParseOrDie("gpu:2"), Device::Cuda(2));
  EXPECT_EQ(ParseOrDie("gpu"), Device::Cuda(0));
  EXPECT_EQ(ParseOrDie("gpu:2").ToString(), "cuda:2");
}

class DeviceRejectTest : public ::testing::TestWithParam<const char*> {};

TEST_P(DeviceRejectTest, RejectsWithValueErrorQuotingTheText) {
  absl::StatusOr<Device> d = Device::Parse(GetParam());
  ASSERT_FALSE(d.ok()) << GetParam() << " parsed as " << d->ToString();
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GetErrorKind(d.status()), ErrorKind::kValue);
  EXPECT_THAT(d.status().message(), HasSubstr(absl::StrCat("\"", GetParam(), "\"")));
}

INSTANTIATE_TEST_SUITE_P(BadSpellings, DeviceRejectTest,
                         ::testing::Values("tpu:0", "cpu:-1", "cpu:x", "", "cpu:", ":0", "CPU:0",
                                           "cpu:0:1", "cpu:1.5", "tpu", "cuda:99999999999",
                                           "cpu: 1", "cpu:+1", "cuda:1 "));

TEST(DeviceTest, ErrorsSayWhichPartIsWrong) {
  EXPECT_THAT(Device::Parse("tpu:0").status().message(), HasSubstr("unknown device type"));
  EXPECT_THAT(Device::Parse("cpu:-1").status().message(), HasSubstr("invalid device index"));
  EXPECT_THAT(Device::Parse("cpu:x").status().message(), HasSubstr("invalid device index"));
}

TEST(DeviceTest, ToStringAlwaysShowsTheIndex) {
  EXPECT_EQ(Device::Cpu().ToString(), "cpu:0");
  EXPECT_EQ(Device::Cpu(7).ToString(), "cpu:7");
  EXPECT_EQ(Device::Cuda(1).ToString(), "cuda:1");
  EXPECT_EQ((Device{kDLCUDAHost, 0}).ToString(), "cuda_host:0");
}

TEST(DeviceTest, UnknownTypesPrintTheirNumber) {
  EXPECT_EQ(DeviceTypeName(static_cast<DLDeviceType>(6)), "dev6");
  EXPECT_EQ((Device{static_cast<DLDeviceType>(6), 3}).ToString(), "dev6:3");
}

TEST(DeviceTest, ToStringParsesBack) {
  for (Device d : {Device::Cpu(0), Device::Cpu(5), Device::Cuda(0), Device::Cuda(3),
                   Device{kDLCUDAHost, 1}, Device{kDLROCM, 2}}) {
    EXPECT_EQ(ParseOrDie(d.ToString()), d);
  }
}

TEST(DeviceTest, ConvertsToAndFromDLDevice) {
  Device d = Device::Cuda(3);
  DLDevice dl = d.dl();
  EXPECT_EQ(dl.device_type, kDLCUDA);
  EXPECT_EQ(dl.device_id, 3);
  EXPECT_EQ(Device::FromDL(dl), d);
}

TEST(DeviceTest, ComparesTypeAndIndex) {
  EXPECT_EQ(Device::Cpu(1), Device::Cpu(1));
  EXPECT_NE(Device::Cpu(1), Device::Cpu(0));
  EXPECT_NE(Device::Cpu(0), Device::Cuda(0));
  EXPECT_EQ(absl::HashOf(Device::Cuda(1)), absl::HashOf(ParseOrDie("gpu:1")));
}

}  // namespace
}  // namespace tether
