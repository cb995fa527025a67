// Detecting this machine's kernel target (host_target.h).
#include "runtime/device/host_target.h"

#include <sys/auxv.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/core/error.h"
#include "runtime/core/file.h"

namespace tether {
namespace {

#if defined(__x86_64__)
constexpr absl::string_view kTriple = "x86_64-linux-gnu";
#elif defined(__aarch64__)
constexpr absl::string_view kTriple = "aarch64-linux-gnu";
#elif defined(__arm__)
constexpr absl::string_view kTriple = "armv7-linux-gnueabihf";
#else
#error "tether runs on x86-64, aarch64 and 32-bit Arm (armhf)"
#endif

// x86 /proc/cpuinfo flags and the LLVM features they are.
constexpr std::array<std::pair<absl::string_view, absl::string_view>, 24> kX86Flags = {{
    {"cx16", "cx16"},
    {"lahf_lm", "sahf"},
    {"popcnt", "popcnt"},
    {"ssse3", "ssse3"},
    {"sse4_1", "sse4.1"},
    {"sse4_2", "sse4.2"},
    {"avx", "avx"},
    {"avx2", "avx2"},
    {"bmi1", "bmi"},
    {"bmi2", "bmi2"},
    {"f16c", "f16c"},
    {"fma", "fma"},
    {"abm", "lzcnt"},
    {"movbe", "movbe"},
    {"xsave", "xsave"},
    {"avx_vnni", "avxvnni"},
    {"avx512f", "avx512f"},
    {"avx512bw", "avx512bw"},
    {"avx512cd", "avx512cd"},
    {"avx512dq", "avx512dq"},
    {"avx512vl", "avx512vl"},
    {"avx512_vnni", "avx512vnni"},
    {"avx512_bf16", "avx512bf16"},
    {"avx512_fp16", "avx512fp16"},
}};

// AT_HWCAP / AT_HWCAP2 bits (the kernel's asm/hwcap.h) and the LLVM features.
struct HwcapBit {
  int word;  // 1: AT_HWCAP, 2: AT_HWCAP2
  int bit;
  absl::string_view feature;
};
constexpr std::array<HwcapBit, 7> kAarch64Hwcaps = {{
    {1, 1, "neon"},       // ASIMD
    {1, 10, "fullfp16"},  // ASIMDHP
    {1, 20, "dotprod"},   // ASIMDDP
    {1, 22, "sve"},
    {2, 1, "sve2"},
    {2, 13, "i8mm"},
    {2, 14, "bf16"},
}};
constexpr std::array<HwcapBit, 4> kArmHwcaps = {{
    {1, 12, "neon"},
    {1, 13, "vfp3"},
    {1, 16, "vfp4"},
    {1, 19, "d32"},
}};

// Arm CPU parts by implementer, as LLVM names them.
struct ArmPart {
  int implementer;
  int part;
  absl::string_view name;
};
constexpr std::array<ArmPart, 38> kArmParts = {{
    {0x41, 0xb76, "arm1176jzf-s"}, {0x41, 0xc07, "cortex-a7"},    {0x41, 0xc08, "cortex-a8"},
    {0x41, 0xc09, "cortex-a9"},    {0x41, 0xc0e, "cortex-a17"},   {0x41, 0xc0f, "cortex-a15"},
    {0x41, 0xd03, "cortex-a53"},   {0x41, 0xd04, "cortex-a35"},   {0x41, 0xd05, "cortex-a55"},
    {0x41, 0xd07, "cortex-a57"},   {0x41, 0xd08, "cortex-a72"},   {0x41, 0xd09, "cortex-a73"},
    {0x41, 0xd0a, "cortex-a75"},   {0x41, 0xd0b, "cortex-a76"},   {0x41, 0xd0c, "neoverse-n1"},
    {0x41, 0xd0d, "cortex-a77"},   {0x41, 0xd0e, "cortex-a76ae"}, {0x41, 0xd40, "neoverse-v1"},
    {0x41, 0xd41, "cortex-a78"},   {0x41, 0xd44, "cortex-x1"},    {0x41, 0xd46, "cortex-a510"},
    {0x41, 0xd47, "cortex-a710"},  {0x41, 0xd48, "cortex-x2"},    {0x41, 0xd49, "neoverse-n2"},
    {0x41, 0xd4b, "cortex-a78c"},  {0x41, 0xd4d, "cortex-a715"},  {0x41, 0xd4e, "cortex-x3"},
    {0x41, 0xd4f, "neoverse-v2"},  {0x41, 0xd80, "cortex-a520"},  {0x41, 0xd81, "cortex-a720"},
    {0x41, 0xd82, "cortex-x4"},    {0x4e, 0x004, "carmel"},       {0x51, 0x800, "cortex-a73"},
    {0x51, 0x801, "cortex-a73"},   {0x51, 0x802, "cortex-a75"},   {0x51, 0x803, "cortex-a75"},
    {0x51, 0x804, "cortex-a76"},   {0x51, 0x805, "cortex-a76"},
}};

// The psABI levels (x86-64-v2 ... v4) and the features each adds.
constexpr std::array<absl::string_view, 6> kX86V2 = {"cx16",   "sahf",   "popcnt",
                                                     "sse4.1", "sse4.2", "ssse3"};
constexpr std::array<absl::string_view, 9> kX86V3 = {"avx", "avx2",  "bmi",   "bmi2", "f16c",
                                                     "fma", "lzcnt", "movbe", "xsave"};
constexpr std::array<absl::string_view, 5> kX86V4 = {"avx512f", "avx512bw", "avx512cd", "avx512dq",
                                                     "avx512vl"};

// The value of "key : value" lines of /proc/cpuinfo, in order.
std::vector<absl::string_view> CpuinfoValues(absl::string_view cpuinfo, absl::string_view key) {
  std::vector<absl::string_view> out;
  for (absl::string_view line : absl::StrSplit(cpuinfo, '\n')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(line, absl::MaxSplits(':', 1));
    if (absl::StripAsciiWhitespace(kv.first) == key) {
      out.push_back(absl::StripAsciiWhitespace(kv.second));
    }
  }
  return out;
}

bool Has(const std::vector<std::string>& features, absl::string_view f) {
  return std::find(features.begin(), features.end(), f) != features.end();
}

template <size_t N>
bool HasAll(const std::vector<std::string>& features,
            const std::array<absl::string_view, N>& wanted) {
  return std::all_of(wanted.begin(), wanted.end(),
                     [&](absl::string_view f) { return Has(features, f); });
}

template <size_t N>
std::vector<std::string> FromHwcaps(const std::array<HwcapBit, N>& table, uint64_t hwcap,
                                    uint64_t hwcap2) {
  std::vector<std::string> out;
  for (const HwcapBit& b : table) {
    const uint64_t word = b.word == 1 ? hwcap : hwcap2;
    if ((word >> b.bit) & 1) out.emplace_back(b.feature);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// "x86_64", "aarch64" or "arm" for a triple's architecture.
std::string ArchFamily(absl::string_view triple) {
  absl::string_view arch = triple.substr(0, triple.find('-'));
  if (arch == "amd64") return "x86_64";
  if (arch == "arm64") return "aarch64";
  if (absl::StartsWith(arch, "arm") || absl::StartsWith(arch, "thumb")) return "arm";
  return std::string(arch);
}

// The features the host can report for its architecture: the only ones a
// target's -mattr is checked against.
std::vector<std::string> Reportable(absl::string_view family) {
  std::vector<std::string> out;
  if (family == "x86_64") {
    for (const auto& [flag, feature] : kX86Flags) out.emplace_back(feature);
  } else if (family == "aarch64") {
    for (const HwcapBit& b : kAarch64Hwcaps) out.emplace_back(b.feature);
  } else if (family == "arm") {
    for (const HwcapBit& b : kArmHwcaps) out.emplace_back(b.feature);
  }
  return out;
}

HostTarget Detect() {
  HostTarget t;
  t.triple = std::string(kTriple);
  absl::StatusOr<std::string> cpuinfo = ReadFileToString("/proc/cpuinfo");
  const std::string text = cpuinfo.ok() ? *cpuinfo : std::string();
#if defined(__x86_64__)
  std::vector<absl::string_view> model = CpuinfoValues(text, "model name");
  if (!model.empty()) t.description = std::string(model.front());
  t.features = X86Features(text);
  t.cpu = X86CpuLevel(t.features);
#else
  const uint64_t hwcap = getauxval(AT_HWCAP);
#if defined(__aarch64__)
  t.features = Aarch64Features(hwcap, getauxval(AT_HWCAP2));
#else
  t.features = ArmFeatures(hwcap);
#endif
  t.cpu = ArmCpuName(text);
  // Only an Arm /proc/cpuinfo describes this CPU: under user-mode emulation
  // the file is the build machine's, and says nothing of it.
  std::vector<absl::string_view> parts = CpuinfoValues(text, "CPU part");
  std::vector<absl::string_view> implementers = CpuinfoValues(text, "CPU implementer");
  if (!parts.empty() && !implementers.empty()) {
    std::vector<absl::string_view> model = CpuinfoValues(text, "model name");
    t.description = model.empty()
                        ? absl::StrCat("implementer ", implementers.back(), " part ", parts.back())
                        : std::string(model.front());
  }
#endif
  t.cores = static_cast<int>(std::thread::hardware_concurrency());
  t.page_size = sysconf(_SC_PAGESIZE);
#if !defined(__x86_64__)
  if (t.description.empty()) return t;  // emulated: sysfs is another machine's
#endif
  CacheSizes caches = ReadCacheSizes("/sys/devices/system/cpu/cpu0/cache");
  t.l1d_cache_bytes = caches.l1d;
  t.l2_cache_bytes = caches.l2;
  return t;
}

}  // namespace

std::string HostTarget::CompileTarget() const {
  std::string out = absl::StrCat("llvm -mtriple=", triple, " -mcpu=", cpu);
  if (!features.empty()) {
    absl::StrAppend(
        &out, " -mattr=", absl::StrJoin(features, ",", [](std::string* o, const std::string& f) {
          absl::StrAppend(o, "+", f);
        }));
  }
  if (l1d_cache_bytes > 0) absl::StrAppend(&out, " -l1d-cache=", FormatCacheSize(l1d_cache_bytes));
  if (l2_cache_bytes > 0) absl::StrAppend(&out, " -l2-cache=", FormatCacheSize(l2_cache_bytes));
  return out;
}

CacheSizes ReadCacheSizes(const std::string& cache_dir) {
  CacheSizes out;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = absl::StrCat(cache_dir, "/index", index);
    absl::StatusOr<std::string> level = ReadFileToString(dir + "/level");
    absl::StatusOr<std::string> type = ReadFileToString(dir + "/type");
    absl::StatusOr<std::string> size = ReadFileToString(dir + "/size");
    if (!level.ok() || !type.ok() || !size.ok()) continue;
    std::optional<int64_t> bytes = ParseCacheSize(absl::StripAsciiWhitespace(*size));
    const absl::string_view lv = absl::StripAsciiWhitespace(*level);
    const absl::string_view ty = absl::StripAsciiWhitespace(*type);
    if (!bytes) continue;
    if (lv == "1" && (ty == "Data" || ty == "Unified")) out.l1d = *bytes;
    if (lv == "2" && (ty == "Data" || ty == "Unified")) out.l2 = *bytes;
  }
  return out;
}

std::optional<int64_t> ParseCacheSize(absl::string_view text) {
  int64_t scale = 1;
  if (absl::ConsumeSuffix(&text, "K")) {
    scale = int64_t{1} << 10;
  } else if (absl::ConsumeSuffix(&text, "M")) {
    scale = int64_t{1} << 20;
  }
  int64_t n = 0;
  if (text.empty() || !absl::ascii_isdigit(text[0]) || !absl::SimpleAtoi(text, &n) || n <= 0 ||
      n > (int64_t{1} << 40) / scale) {
    return std::nullopt;
  }
  return n * scale;
}

std::string FormatCacheSize(int64_t bytes) {
  if (bytes > 0 && bytes % (int64_t{1} << 20) == 0) return absl::StrCat(bytes >> 20, "M");
  if (bytes > 0 && bytes % (int64_t{1} << 10) == 0) return absl::StrCat(bytes >> 10, "K");
  return absl::StrCat(bytes);
}

const HostTarget& ThisHostTarget() {
  static const HostTarget* target = new HostTarget(Detect());
  return *target;
}

std::string ArmCpuName(absl::string_view cpuinfo) {
  std::vector<absl::string_view> implementers = CpuinfoValues(cpuinfo, "CPU implementer");
  std::vector<absl::string_view> parts = CpuinfoValues(cpuinfo, "CPU part");
  // big.LITTLE lists each core; the big ones come last (RK3588: four
  // Cortex-A55, then four Cortex-A76), and their code runs on the little ones.
  for (size_t i = std::min(implementers.size(), parts.size()); i-- > 0;) {
    int implementer = 0, part = 0;
    if (!absl::SimpleHexAtoi(implementers[i], &implementer) ||
        !absl::SimpleHexAtoi(parts[i], &part)) {
      continue;
    }
    for (const ArmPart& p : kArmParts) {
      if (p.implementer == implementer && p.part == part) return std::string(p.name);
    }
  }
  return "generic";
}

std::vector<std::string> X86Features(absl::string_view cpuinfo) {
  std::vector<absl::string_view> flags = CpuinfoValues(cpuinfo, "flags");
  std::vector<std::string> out;
  if (flags.empty()) return out;
  std::vector<absl::string_view> have = absl::StrSplit(flags.front(), ' ', absl::SkipEmpty());
  for (const auto& [flag, feature] : kX86Flags) {
    if (std::find(have.begin(), have.end(), flag) != have.end()) out.emplace_back(feature);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string X86CpuLevel(const std::vector<std::string>& features) {
  if (!HasAll(features, kX86V2)) return "x86-64";
  if (!HasAll(features, kX86V3)) return "x86-64-v2";
  if (!HasAll(features, kX86V4)) return "x86-64-v3";
  return "x86-64-v4";
}

std::vector<std::string> Aarch64Features(uint64_t hwcap, uint64_t hwcap2) {
  return FromHwcaps(kAarch64Hwcaps, hwcap, hwcap2);
}

std::vector<std::string> ArmFeatures(uint64_t hwcap) { return FromHwcaps(kArmHwcaps, hwcap, 0); }

absl::Status CheckRunsOn(absl::string_view target, const HostTarget& host) {
  std::vector<absl::string_view> words = absl::StrSplit(target, ' ', absl::SkipEmpty());
  if (words.empty() || (words[0] != "llvm" && words[0] != "cpu")) return absl::OkStatus();
  absl::string_view triple, cpu, attrs;
  for (absl::string_view w : words) {
    if (absl::ConsumePrefix(&w, "-mtriple=")) triple = w;
    if (absl::ConsumePrefix(&w, "-mcpu=")) cpu = w;
    if (absl::ConsumePrefix(&w, "-mattr=")) attrs = w;
  }
  if (triple.empty()) return absl::OkStatus();
  // The target named without its (long) feature list.
  const std::string built_for = absl::StrCat(triple, cpu.empty() ? "" : ", ", cpu);
  const std::string family = ArchFamily(host.triple);
  if (ArchFamily(triple) != family) {
    return PreconditionError("kernels built for ", built_for, " cannot run on this ", host.triple,
                             " machine (", host.cpu, "); compile for '", host.CompileTarget(), "'");
  }
  std::vector<std::string> reportable = Reportable(family);
  std::vector<std::string> missing;
  for (absl::string_view attr : absl::StrSplit(attrs, ',', absl::SkipEmpty())) {
    if (!absl::ConsumePrefix(&attr, "+")) continue;
    if (Has(reportable, attr) && !Has(host.features, attr)) missing.emplace_back(attr);
  }
  if (!missing.empty()) {
    return PreconditionError("kernels built for ", built_for, " use ", absl::StrJoin(missing, ", "),
                             ", which this ", host.triple, " CPU (", host.cpu,
                             ") lacks; compile for '", host.CompileTarget(), "'");
  }
  return absl::OkStatus();
}

}  // namespace tether
