// ReadDeviceState (server/device_state.h) against a fake /proc and /sys
// tree, and on this machine; Nvml without a card.
#include "server/device_state.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/nvml.h"

namespace tether::server {
namespace {

class FakeTree {
 public:
  FakeTree() {
    root_ = std::filesystem::temp_directory_path() /
            ("tether-device-state-" + std::to_string(::getpid()));
    std::filesystem::remove_all(root_);
  }
  ~FakeTree() { std::filesystem::remove_all(root_); }
  void Write(const std::string& path, const std::string& text) {
    std::filesystem::path p = root_ / path;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::string root() const { return root_.string(); }

 private:
  std::filesystem::path root_;
};

TEST(DeviceStateTest, ReadsFrequencyTemperatureAndLoad) {
  FakeTree t;
  t.Write("proc/sys/kernel/hostname", "board-7\n");
  t.Write("proc/sys/kernel/osrelease", "6.1.0-13-arm64\n");
  t.Write("proc/loadavg", "0.52 0.40 0.33 1/123 4567\n");
  t.Write("sys/devices/system/cpu/online", "0-3,6\n");
  const std::string p0 = "sys/devices/system/cpu/cpufreq/policy0/";
  t.Write(p0 + "related_cpus", "0 1 2 3\n");
  t.Write(p0 + "scaling_governor", "performance\n");
  t.Write(p0 + "scaling_driver", "cppc_cpufreq\n");
  t.Write(p0 + "scaling_cur_freq", "1800000\n");
  t.Write(p0 + "scaling_min_freq", "600000\n");
  t.Write(p0 + "scaling_max_freq", "1800000\n");
  t.Write("sys/devices/system/cpu/cpufreq/policy10/related_cpus", "6\n");
  t.Write("sys/devices/system/cpu/cpufreq/policy10/scaling_governor", "powersave\n");
  t.Write("sys/devices/system/cpu/cpufreq/boost", "1\n");
  t.Write("sys/class/thermal/thermal_zone0/type", "cpu-thermal\n");
  t.Write("sys/class/thermal/thermal_zone0/temp", "48312\n");
  t.Write("sys/class/hwmon/hwmon1/name", "nvme\n");
  t.Write("sys/class/hwmon/hwmon1/temp1_input", "35850\n");
  t.Write("sys/class/hwmon/hwmon1/temp1_label", "Composite\n");

  v1::DeviceState s;
  ReadDeviceState(&s, t.root());
  EXPECT_EQ(s.hostname(), "board-7");
  EXPECT_EQ(s.kernel(), "6.1.0-13-arm64");
  EXPECT_EQ(s.online_cpus(), 5u);
  EXPECT_DOUBLE_EQ(s.load_average_1m(), 0.52);
  ASSERT_EQ(s.cpu_frequency_size(), 2);
  EXPECT_EQ(s.cpu_frequency(0).cpus(), "0-3");
  EXPECT_EQ(s.cpu_frequency(0).governor(), "performance");
  EXPECT_EQ(s.cpu_frequency(0).driver(), "cppc_cpufreq");
  EXPECT_EQ(s.cpu_frequency(0).current_khz(), 1800000u);
  EXPECT_EQ(s.cpu_frequency(0).min_khz(), 600000u);
  EXPECT_EQ(s.cpu_frequency(1).cpus(), "6");
  EXPECT_EQ(s.cpu_frequency(1).governor(), "powersave");
  EXPECT_EQ(s.cpu_boost(), "on");
  ASSERT_EQ(s.temperatures_size(), 2);
  EXPECT_EQ(s.temperatures(0).sensor(), "cpu-thermal");
  EXPECT_DOUBLE_EQ(s.temperatures(0).celsius(), 48.312);
  EXPECT_EQ(s.temperatures(1).sensor(), "nvme/Composite");
  EXPECT_GT(s.read_unix_ms(), 0);
}

TEST(DeviceStateTest, AMachineWithoutSensorsLeavesThemEmpty) {
  FakeTree t;
  t.Write("proc/loadavg", "garbage\n");
  v1::DeviceState s;
  ReadDeviceState(&s, t.root());
  EXPECT_EQ(s.cpu_frequency_size(), 0);
  EXPECT_EQ(s.temperatures_size(), 0);
  EXPECT_EQ(s.cpu_boost(), "");
  EXPECT_EQ(s.online_cpus(), 0u);
  EXPECT_FALSE(s.cpu_model().empty());  // the host's, from the runtime
}

TEST(DeviceStateTest, ThisMachine) {
  v1::DeviceState s;
  ReadDeviceState(&s);
  EXPECT_FALSE(s.hostname().empty());
  EXPECT_FALSE(s.kernel().empty());
  EXPECT_GT(s.online_cpus(), 0u);
}

TEST(DeviceStateTest, CompressesCpuLists) {
  EXPECT_EQ(CompressCpuList("0 1 2 3 6"), "0-3,6");
  EXPECT_EQ(CompressCpuList("7"), "7");
  EXPECT_EQ(CompressCpuList(""), "");
  EXPECT_EQ(CompressCpuList("3 1 2 8 9"), "1-3,8-9");
}

// NVML's readings of a card are tested in tests/gpu/device_state_gpu_test.cc
// (against the stand-in NVML in CI); here what needs no card.
TEST(NvmlTest, AMissingLibraryIsUnavailableNamingIt) {
  absl::StatusOr<std::unique_ptr<Nvml>> nvml = Nvml::Open("libno-such-nvml.so.1");
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(nvml.status().message(), ::testing::HasSubstr("libno-such-nvml.so.1"));
}

TEST(NvmlTest, ALibraryWithoutNvmlIsUnavailable) {
  absl::StatusOr<std::unique_ptr<Nvml>> nvml = Nvml::Open("libm.so.6");
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(nvml.status().message(), ::testing::HasSubstr("nvmlInit_v2"));
}

TEST(NvmlTest, NamesTheReasonsClocksAreHeldDown) {
  EXPECT_EQ(Nvml::ClockLimitNames(0), "");
  EXPECT_EQ(Nvml::ClockLimitNames(0x1), "idle");
  EXPECT_EQ(Nvml::ClockLimitNames(0x4 | 0x40), "sw_power_cap,hw_thermal_slowdown");
  EXPECT_EQ(Nvml::ClockLimitNames(0x100 | (1ULL << 12)), "display_clocks,0x1000");
}

}  // namespace
}  // namespace tether::server
