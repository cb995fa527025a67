// Target parsing and the host target, from LLVM's host queries.
#include "compiler/backend/llvm/target.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"
#include "runtime/core/error.h"
#include "runtime/device/device_api.h"
#include "runtime/device/host_target.h"

namespace tether::compiler {
namespace {

constexpr int kDefaultCudaArch = 75;
// The architectures LLVM 19's NVPTX backend knows (NVPTX.td), sm_50 and
// newer. It would take another name with a warning and write PTX of an
// older version that no driver accepts for it (".version 6.0 does not
// support .target sm_100"); a newer GPU runs sm_90 PTX, which the driver's
// JIT compiles for it.
constexpr int kCudaArchs[] = {50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90};

bool KnownCudaArch(int sm) {
  return std::find(std::begin(kCudaArchs), std::end(kCudaArchs), sm) != std::end(kCudaArchs);
}

absl::StatusOr<Target> ParseCuda(const std::vector<absl::string_view>& words,
                                 absl::string_view text) {
  Target t;
  t.kind = "cuda";
  for (size_t i = 1; i < words.size(); ++i) {
    absl::string_view w = words[i];
    if (!absl::StartsWith(w, "-arch=")) {
      return absl::InvalidArgumentError(absl::StrCat("unknown target flag \"", w, "\" in \"", text,
                                                     "\"; cuda takes -arch=sm_XY[,sm_AB...]"));
    }
    for (absl::string_view a : absl::StrSplit(w.substr(6), ',')) {
      int sm = 0;
      if (!absl::ConsumePrefix(&a, "sm_") || !absl::SimpleAtoi(a, &sm) || !KnownCudaArch(sm)) {
        std::string newer;
        if (sm > kCudaArchs[std::size(kCudaArchs) - 1]) {
          newer = "; for a newer GPU compile for sm_90, which its driver runs";
        }
        return absl::InvalidArgumentError(absl::StrCat("bad cuda architecture \"", w.substr(6),
                                                       "\" in \"", text, "\"; expected one of sm_",
                                                       absl::StrJoin(kCudaArchs, ", sm_"), newer));
      }
      t.archs.push_back(sm);
    }
  }
  if (t.archs.empty()) t.archs.push_back(kDefaultCudaArch);
  std::sort(t.archs.begin(), t.archs.end());
  t.archs.erase(std::unique(t.archs.begin(), t.archs.end()), t.archs.end());
  return t;
}

}  // namespace

absl::StatusOr<Target> Target::Parse(absl::string_view text) {
  std::vector<absl::string_view> words = absl::StrSplit(text, ' ', absl::SkipWhitespace());
  if (words.empty()) return absl::InvalidArgumentError("empty target string");
  Target t;
  if (words[0] == "cuda") return ParseCuda(words, text);
  if (words[0] != "llvm" && words[0] != "cpu") {
    return absl::InvalidArgumentError(absl::StrCat("unknown target kind \"", words[0], "\" in \"",
                                                   text, "\", expected llvm or cuda"));
  }
  for (size_t i = 1; i < words.size(); ++i) {
    absl::string_view w = words[i];
    int64_t* cache = nullptr;
    if (absl::StartsWith(w, "-l1d-cache=")) cache = &t.l1d_cache;
    if (absl::StartsWith(w, "-l2-cache=")) cache = &t.l2_cache;
    if (cache != nullptr) {
      std::optional<int64_t> bytes = ParseCacheSize(w.substr(w.find('=') + 1));
      if (!bytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "bad cache size in \"", w, "\" (expected bytes, or KiB or MiB as 48K or 2M)"));
      }
      *cache = *bytes;
      continue;
    }
    std::string* field = nullptr;
    absl::string_view value;
    for (auto [flag, dst] : {std::pair<absl::string_view, std::string*>{"-mtriple=", &t.triple},
                             {"-mcpu=", &t.cpu},
                             {"-mattr=", &t.attrs}}) {
      if (absl::StartsWith(w, flag)) {
        field = dst;
        value = w.substr(flag.size());
      }
    }
    if (field == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown target flag \"", w, "\" in \"", text, "\""));
    }
    if (value.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("empty value for target flag \"", w, "\""));
    }
    *field = std::string(value);
  }
  return t;
}

Target Target::Host() {
  Target t;
  t.triple = llvm::sys::getDefaultTargetTriple();
  t.cpu = llvm::sys::getHostCPUName().str();
  std::vector<std::string> features;
  llvm::StringMap<bool> host_features = llvm::sys::getHostCPUFeatures();
  for (const auto& f : host_features) {
    features.push_back(absl::StrCat(f.second ? "+" : "-", f.first().str()));
  }
  std::sort(features.begin(), features.end());
  t.attrs = absl::StrJoin(features, ",");
  t.l1d_cache = ThisHostTarget().l1d_cache_bytes;
  t.l2_cache = ThisHostTarget().l2_cache_bytes;
  return t;
}

std::string Target::ToString() const {
  std::string out = kind;
  if (is_cuda()) {
    std::vector<std::string> names;
    for (int sm : archs) names.push_back(absl::StrCat("sm_", sm));
    return absl::StrCat(out, " -arch=", absl::StrJoin(names, ","));
  }
  if (!triple.empty()) absl::StrAppend(&out, " -mtriple=", triple);
  if (!cpu.empty()) absl::StrAppend(&out, " -mcpu=", cpu);
  if (!attrs.empty()) absl::StrAppend(&out, " -mattr=", attrs);
  if (l1d_cache > 0) absl::StrAppend(&out, " -l1d-cache=", FormatCacheSize(l1d_cache));
  if (l2_cache > 0) absl::StrAppend(&out, " -l2-cache=", FormatCacheSize(l2_cache));
  return out;
}

bool Target::is_host() const {
  if (triple.empty()) return true;
  llvm::Triple mine(llvm::sys::getDefaultTargetTriple());
  llvm::Triple theirs(triple);
  return mine.getArch() == theirs.getArch() && mine.getOS() == theirs.getOS();
}

absl::StatusOr<std::string> CudaTargetFor(absl::string_view compute_version) {
  std::vector<absl::string_view> parts = absl::StrSplit(compute_version, '.');
  int major = 0, minor = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &major) ||
      !absl::SimpleAtoi(parts[1], &minor) || major < 0 || minor < 0 || minor > 9) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", compute_version, "\" is not a compute capability (major.minor)"));
  }
  // The newest architecture the backend knows that the GPU runs.
  const int cc = major * 10 + minor;
  int sm = 0;
  for (int a : kCudaArchs) {
    if (a <= cc) sm = a;
  }
  if (sm == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("compute capability ", compute_version, " is older than sm_", kCudaArchs[0],
                     ", the oldest architecture this compiler targets"));
  }
  return absl::StrCat("cuda -arch=sm_", sm);
}

absl::StatusOr<std::string> CudaTargetForDevice(Device device) {
  if (device.type != kDLCUDA || !DeviceExists(device)) {
    return absl::UnavailableError(absl::StrCat("no CUDA device ", device.ToString()));
  }
  TETHER_ASSIGN_OR_RETURN(DeviceAPI * api, DeviceAPI::Get(kDLCUDA));
  TETHER_ASSIGN_OR_RETURN(Value cc, api->GetAttr(device.id, DeviceAttr::kComputeVersion));
  if (!cc.is_string()) {
    return absl::InternalError(absl::StrCat(device.ToString(), " reports no compute capability"));
  }
  return CudaTargetFor(cc.string_value());
}

}  // namespace tether::compiler
