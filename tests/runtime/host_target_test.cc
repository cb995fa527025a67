// The daemon's view of its own CPU (runtime/device/host_target.h): CPU names
// and features from /proc/cpuinfo texts and AT_HWCAP bits of real boards,
// and the check that refuses kernels built for another machine.
#include "runtime/device/host_target.h"

#include <unistd.h>

#include <cstdlib>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/core/file.h"

namespace tether {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// /proc/cpuinfo of an RK3588 (four Cortex-A55, then four Cortex-A76),
// shortened to two cores of each.
constexpr char kRk3588[] =
    "processor\t: 0\nBogoMIPS\t: 48.00\nFeatures\t: fp asimd asimdhp asimddp\n"
    "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x2\nCPU part\t: 0xd05\n\n"
    "processor\t: 1\nCPU implementer\t: 0x41\nCPU part\t: 0xd05\n\n"
    "processor\t: 4\nCPU implementer\t: 0x41\nCPU part\t: 0xd0b\n\n"
    "processor\t: 5\nCPU implementer\t: 0x41\nCPU part\t: 0xd0b\n";

constexpr char kXeon[] =
    "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n"
    "flags\t\t: fpu cx8 sse sse2 ssse3 fma cx16 sse4_1 sse4_2 movbe popcnt xsave avx f16c "
    "lahf_lm abm bmi1 avx2 bmi2 avx512f avx512dq avx512cd avx512bw avx512vl avx512_vnni\n";

TEST(HostTargetTest, ArmCpuNamesComeFromImplementerAndPart) {
  EXPECT_EQ(ArmCpuName(kRk3588), "cortex-a76");  // the big cores
  EXPECT_EQ(ArmCpuName("CPU implementer\t: 0x41\nCPU part\t: 0xd08\n"), "cortex-a72");  // Pi 4
  EXPECT_EQ(ArmCpuName("CPU implementer\t: 0x41\nCPU part\t: 0xc07\n"), "cortex-a7");   // Pi 2
  EXPECT_EQ(ArmCpuName("CPU implementer\t: 0x4e\nCPU part\t: 0x004\n"), "carmel");      // Xavier
  EXPECT_EQ(ArmCpuName("CPU implementer\t: 0x41\nCPU part\t: 0xfff\n"), "generic");
  // Under user-mode emulation an Arm program reads the x86 host's file.
  EXPECT_EQ(ArmCpuName(kXeon), "generic");
  EXPECT_EQ(ArmCpuName(""), "generic");
}

TEST(HostTargetTest, X86FeaturesAndPsAbiLevel) {
  std::vector<std::string> features = X86Features(kXeon);
  EXPECT_THAT(features, ::testing::IsSupersetOf({"avx2", "fma", "avx512f", "avx512bw", "avx512vnni",
                                                 "sse4.2", "lzcnt", "bmi"}));
  EXPECT_TRUE(std::is_sorted(features.begin(), features.end()));
  EXPECT_EQ(X86CpuLevel(features), "x86-64-v4");
  features.erase(std::find(features.begin(), features.end(), "avx512bw"));
  EXPECT_EQ(X86CpuLevel(features), "x86-64-v3");
  features.erase(std::find(features.begin(), features.end(), "avx2"));
  EXPECT_EQ(X86CpuLevel(features), "x86-64-v2");
  EXPECT_EQ(X86CpuLevel({}), "x86-64");
}

TEST(HostTargetTest, ArmFeaturesComeFromHwcaps) {
  // ASIMD, ASIMDHP, ASIMDDP; AT_HWCAP2 I8MM.
  EXPECT_THAT(Aarch64Features((1u << 1) | (1u << 10) | (1u << 20), 1u << 13),
              ElementsAre("dotprod", "fullfp16", "i8mm", "neon"));
  EXPECT_THAT(Aarch64Features(0, 0), ElementsAre());
  // NEON, VFPv4, VFPD32 (a Cortex-A7 in 32-bit mode).
  EXPECT_THAT(ArmFeatures((1u << 12) | (1u << 16) | (1u << 19)),
              ElementsAre("d32", "neon", "vfp4"));
}

// Linux's cache folders (/sys/devices/system/cpu/cpu0/cache/index*), written
// as real files: the L1 data and the L2 cache; instruction caches, L3 and
// entries that do not parse are passed over, and a machine without the
// folder has none.
TEST(HostTargetTest, CacheSizesComeFromSysfs) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir =
      absl::StrCat(tmp ? tmp : "/tmp", "/tether_host_target_test_", getpid(), "_cache");
  struct Entry {
    const char *level, *type, *size;
  };
  const Entry entries[] = {{"1", "Data", "48K"},
                           {"1", "Instruction", "32K"},
                           {"2", "Unified", "2048K"},
                           {"3", "Unified", "307200K"},
                           {"2", "Unified", "lots"}};
  for (size_t i = 0; i < std::size(entries); ++i) {
    const std::string index = absl::StrCat(dir, "/index", i);
    ASSERT_EQ(system(absl::StrCat("mkdir -p ", index).c_str()), 0);
    ASSERT_TRUE(
        WriteStringToFileAtomic(index + "/level", absl::StrCat(entries[i].level, "\n")).ok());
    ASSERT_TRUE(WriteStringToFileAtomic(index + "/type", absl::StrCat(entries[i].type, "\n")).ok());
    ASSERT_TRUE(WriteStringToFileAtomic(index + "/size", absl::StrCat(entries[i].size, "\n")).ok());
  }
  CacheSizes caches = ReadCacheSizes(dir);
  EXPECT_EQ(caches.l1d, 48 << 10);
  EXPECT_EQ(caches.l2, 2 << 20);
  CacheSizes none = ReadCacheSizes(dir + "/missing");
  EXPECT_EQ(none.l1d, 0);
  EXPECT_EQ(none.l2, 0);
  ASSERT_EQ(system(absl::StrCat("rm -rf ", dir).c_str()), 0);

  EXPECT_EQ(ParseCacheSize("512K"), 512 << 10);
  EXPECT_EQ(ParseCacheSize("2M"), 2 << 20);
  EXPECT_EQ(ParseCacheSize("32768"), 32768);
  for (const char* bad : {"", "0", "K", "-4K", "2G", "1.5M", "99999999999M"}) {
    EXPECT_EQ(ParseCacheSize(bad), std::nullopt) << bad;
  }
  EXPECT_EQ(FormatCacheSize(48 << 10), "48K");
  EXPECT_EQ(FormatCacheSize(2 << 20), "2M");
  EXPECT_EQ(FormatCacheSize(1000), "1000");
}

TEST(HostTargetTest, ThisMachineIsRead) {
  const HostTarget& host = ThisHostTarget();
#if defined(__x86_64__)
  EXPECT_EQ(host.triple, "x86_64-linux-gnu");
  EXPECT_THAT(host.cpu, StartsWith("x86-64"));
#elif defined(__aarch64__)
  EXPECT_EQ(host.triple, "aarch64-linux-gnu");
  EXPECT_THAT(host.features, ::testing::Contains("neon"));
#endif
  EXPECT_GT(host.cores, 0);
  EXPECT_EQ(host.page_size, sysconf(_SC_PAGESIZE));
  EXPECT_THAT(host.CompileTarget(), StartsWith("llvm -mtriple=" + host.triple + " -mcpu="));
  EXPECT_TRUE(CheckRunsOn(host.CompileTarget(), host).ok());
#if defined(__x86_64__)
  // Linux describes an x86 CPU's caches (what the kernels block for).
  if (access("/sys/devices/system/cpu/cpu0/cache/index0/size", R_OK) == 0) {
    EXPECT_GT(host.l1d_cache_bytes, 0);
    EXPECT_GT(host.l2_cache_bytes, host.l1d_cache_bytes);
    EXPECT_THAT(host.CompileTarget(),
                HasSubstr(" -l2-cache=" + FormatCacheSize(host.l2_cache_bytes)));
  }
#endif
}

TEST(HostTargetTest, KernelsForAnotherMachineAreRefusedNamingBoth) {
  HostTarget xeon{"x86_64-linux-gnu", "x86-64-v3", {"avx", "avx2", "fma"}, "", 2, 4096};
  absl::Status arm =
      CheckRunsOn("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+neon", xeon);
  EXPECT_EQ(arm.code(), absl::StatusCode::kFailedPrecondition) << arm;
  EXPECT_THAT(arm.message(), HasSubstr("aarch64-linux-gnu, cortex-a72"));
  EXPECT_THAT(arm.message(), HasSubstr("x86_64-linux-gnu"));
  EXPECT_THAT(arm.message(), HasSubstr("compile for 'llvm -mtriple=x86_64-linux-gnu"));

  absl::Status wide = CheckRunsOn(
      "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=skylake-avx512 -mattr=+avx2,+avx512f,+sse2", xeon);
  EXPECT_EQ(wide.code(), absl::StatusCode::kFailedPrecondition) << wide;
  EXPECT_THAT(wide.message(), HasSubstr("use avx512f, which this"));

  // Features the host cannot report (sse2) and ones turned off are not held
  // against it; nor are targets that name no triple, and GPU targets.
  EXPECT_TRUE(CheckRunsOn("llvm -mtriple=x86_64-linux-gnu -mattr=+avx2,+sse2,-avx512f", xeon).ok());
  EXPECT_TRUE(CheckRunsOn("llvm", xeon).ok());
  EXPECT_TRUE(CheckRunsOn("cuda -arch=sm_90", xeon).ok());
  HostTarget pi{"armv7-linux-gnueabihf", "cortex-a7", {"neon", "vfp4"}, "", 4, 4096};
  EXPECT_TRUE(CheckRunsOn("llvm -mtriple=armv7-linux-gnueabihf -mattr=+neon", pi).ok());
  EXPECT_FALSE(CheckRunsOn("llvm -mtriple=aarch64-linux-gnu", pi).ok());
}

}  // namespace
}  // namespace tether
