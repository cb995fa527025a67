// Each GPU's state in the device state a measurement returns
// (server/device_state.h): the driver's attributes and NVML's readings of the
// same card, found by its PCI address. On a GPU this runs against the real
// driver and NVML; in CI the ctest server.gpu_fake_nvml runs it against the
// stand-ins testing/fake_libcuda.c and testing/fake_libnvidia_ml.c, whose
// fixed readings it checks exactly. Skips where no CUDA device exists.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/device/device_api.h"
#include "server/device_state.h"
#include "server/nvml.h"

namespace tether::server {
namespace {

using ::testing::MatchesRegex;
using ::testing::StartsWith;

TEST(DeviceStateGpuTest, EachCardHasItsPciAddressAndNvmlReadings) {
  if (!DeviceExists(Device::Cuda(0))) {
    GTEST_SKIP() << "no CUDA device: cuda:0 does not exist (no driver or no GPU)";
  }
  // The driver's libnvidia-ml.so.1 comes with every NVIDIA driver: its
  // absence beside a working GPU is a broken install, not a skip.
  ASSERT_NE(Nvml::System(), nullptr) << "a CUDA device but no loadable libnvidia-ml.so.1";
  v1::DeviceState state;
  ReadDeviceState(&state);
  ASSERT_GE(state.gpus_size(), 1);
  for (const v1::GpuState& g : state.gpus()) {
    SCOPED_TRACE(g.device());
    EXPECT_THAT(g.pci_bus_id(), MatchesRegex("[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.0"));
    EXPECT_THAT(g.driver_release(), MatchesRegex("[0-9]+\\.[0-9]+.*"));
    ASSERT_TRUE(g.has_temperature_celsius()) << "NVML did not find " << g.pci_bus_id();
    EXPECT_GT(g.temperature_celsius(), 0);
    EXPECT_LT(g.temperature_celsius(), 120);
    EXPECT_GT(g.sm_clock_khz(), 0);
    EXPECT_LE(g.sm_clock_khz(), g.max_clock_khz() + 500'000);  // boost may pass the base
    EXPECT_GT(g.memory_clock_current_khz(), 0);
    EXPECT_THAT(g.performance_state(), StartsWith("P"));
    if (g.name() == "Fake H200") {  // the stand-ins: their fixed readings
      EXPECT_EQ(g.pci_bus_id(), "0000:3b:00.0");
      EXPECT_EQ(g.driver_release(), "550.54.15");
      EXPECT_EQ(g.temperature_celsius(), 47);
      EXPECT_EQ(g.sm_clock_khz(), 1'980'000);
      EXPECT_EQ(g.memory_clock_current_khz(), 2'619'000);
      EXPECT_DOUBLE_EQ(g.power_watts(), 123.456);
      EXPECT_EQ(g.performance_state(), "P0");
      EXPECT_EQ(g.clock_limits(), "idle,sw_power_cap,0x10000000000");
    }
  }
}

}  // namespace
}  // namespace tether::server
