// Device parsing and printing.
#include "runtime/core/device.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/error.h"
#include "runtime/core/number_parsing.h"

namespace tether {
namespace {

struct TypeName {
  DLDeviceType type;
  absl::string_view name;
};
constexpr TypeName kTypeNames[] = {
    {kDLCPU, "cpu"},       {kDLCUDA, "cuda"},          {kDLCUDAHost, "cuda_host"},
    {kDLOpenCL, "opencl"}, {kDLVulkan, "vulkan"},      {kDLMetal, "metal"},
    {kDLROCM, "rocm"},     {kDLExtDev, "ext_dev"},     {kDLCUDAManaged, "cuda_managed"},
    {kDLVPI, "vpi"},       {kDLROCMHost, "rocm_host"},
};

}  // namespace

std::string DeviceTypeName(DLDeviceType type) {
  for (const TypeName& t : kTypeNames) {
    if (t.type == type) return std::string(t.name);
  }
  return absl::StrCat("dev", static_cast<int>(type));
}

bool IsKnownDeviceType(int type) {
  for (const TypeName& t : kTypeNames) {
    if (static_cast<int>(t.type) == type) return true;
  }
  return false;
}

absl::StatusOr<Device> Device::Parse(absl::string_view text) {
  absl::string_view type_name = text;
  int id = 0;
  if (size_t colon = text.find(':'); colon != absl::string_view::npos) {
    type_name = text.substr(0, colon);
    int64_t parsed = 0;
    if (!ParseDecimal(text.substr(colon + 1), 1 << 20, &parsed)) {
      return ValueError("invalid device index in \"", text, "\"");
    }
    id = static_cast<int>(parsed);
  }
  if (type_name == "gpu") type_name = "cuda";
  for (const TypeName& t : kTypeNames) {
    if (t.name == type_name) return Device{t.type, id};
  }
  return ValueError("unknown device type in \"", text, "\"; expected cpu, cuda, ...");
}

std::string Device::ToString() const { return absl::StrCat(DeviceTypeName(type), ":", id); }

}  // namespace tether
