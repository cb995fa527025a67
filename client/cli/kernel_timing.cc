// Kernels of a profile: parsing recorded argument shapes, ranking kernels,
// and allocating one kernel's arguments on the daemon.
#include "client/cli/kernel_timing.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/core/error.h"

namespace tether::cli {
namespace {

// Splits at ", " outside brackets.
std::vector<std::string> SplitTopLevel(absl::string_view text) {
  std::vector<std::string> parts;
  std::string current;
  int depth = 0;
  for (char c : text) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(std::string(absl::StripAsciiWhitespace(current)));
      current.clear();
      continue;
    }
    current.push_back(c);
  }
  if (!absl::StripAsciiWhitespace(current).empty() || !parts.empty()) {
    parts.push_back(std::string(absl::StripAsciiWhitespace(current)));
  }
  return parts;
}

template <typename T>
T MetricOr(const profiling::MetricMap& row, const std::string& key, T fallback) {
  auto it = row.find(key);
  if (it == row.end() || !std::holds_alternative<T>(it->second)) return fallback;
  return std::get<T>(it->second);
}

}  // namespace

absl::StatusOr<std::vector<RecordedArg>> ParseArgumentShapes(absl::string_view text) {
  std::vector<RecordedArg> out;
  for (const std::string& part : SplitTopLevel(text)) {
    RecordedArg arg;
    if (absl::SimpleAtoi(part, &arg.value)) {
      out.push_back(arg);
      continue;
    }
    const size_t open = part.find('[');
    if (open == std::string::npos || part.back() != ']') {
      return ValueError("recorded argument \"", part, "\" is neither a tensor nor an int");
    }
    arg.is_tensor = true;
    TETHER_ASSIGN_OR_RETURN(arg.dtype, DataType::Parse(part.substr(0, open)));
    absl::string_view dims(part);
    dims = dims.substr(open + 1, dims.size() - open - 2);
    for (absl::string_view d : absl::StrSplit(dims, ',', absl::SkipWhitespace())) {
      int64_t n = 0;
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(d), &n) || n < 0) {
        return ValueError("recorded argument \"", part, "\" has a bad dim \"", d, "\"");
      }
      arg.shape.push_back(n);
    }
    out.push_back(std::move(arg));
  }
  return out;
}

std::vector<KernelCalls> SlowestKernels(const profiling::Report& report,
                                        const std::vector<vm::ModuleFunction>& kernels,
                                        size_t top) {
  std::map<std::pair<std::string, std::string>, KernelCalls> grouped;
  for (const profiling::MetricMap& row : report.calls) {
    const std::string name = MetricOr<std::string>(row, "Name", "");
    const bool is_kernel = std::any_of(kernels.begin(), kernels.end(), [&](const auto& f) {
      return f.kind == vm::ModuleFunction::Kind::kKernel && f.name == name;
    });
    if (!is_kernel) continue;
    const std::string shapes =
        MetricOr<std::string>(row, std::string(profiling::kArgumentShapesColumn), "");
    KernelCalls& k = grouped[{name, shapes}];
    k.name = name;
    k.argument_shapes = shapes;
    k.duration_us += MetricOr<profiling::Duration>(row, "Duration (us)", {}).microseconds;
    k.percent += MetricOr<profiling::Percent>(row, "Percent", {}).percent;
    k.count += MetricOr<profiling::Count>(row, "Count", profiling::Count{1}).value;
  }
  std::vector<KernelCalls> out;
  for (auto& [key, k] : grouped) out.push_back(std::move(k));
  std::stable_sort(out.begin(), out.end(), [](const KernelCalls& a, const KernelCalls& b) {
    return a.duration_us > b.duration_us;
  });
  if (top > 0 && out.size() > top) out.resize(top);
  return out;
}

std::string SlowestKernelsTable(const std::vector<KernelCalls>& rows, absl::string_view model) {
  size_t width = 6;
  for (const KernelCalls& k : rows) width = std::max(width, k.name.size());
  std::string out = absl::StrFormat("%-4s  %-*s  %14s  %8s  %6s  %s\n", "Rank", width, "Kernel",
                                    "Duration (us)", "Percent", "Count", "Argument Shapes");
  for (size_t i = 0; i < rows.size(); ++i) {
    const KernelCalls& k = rows[i];
    absl::StrAppendFormat(&out, "%-4d  %-*s  %14.2f  %8.2f  %6d  %s\n", static_cast<int>(i + 1),
                          width, k.name, k.duration_us, k.percent, k.count, k.argument_shapes);
  }
  if (!rows.empty()) {
    absl::StrAppend(&out, "\ntime one on its own: tether bench ", model, " --kernel ", rows[0].name,
                    "\n");
  }
  return out;
}

absl::StatusOr<std::vector<Value>> AllocateKernelArgs(client::RemoteSession* session,
                                                      const vm::ModuleFunction& kernel,
                                                      const std::vector<RecordedArg>& args,
                                                      Device device, uint64_t seed) {
  const std::vector<KernelParamSignature>& params = kernel.kernel.params;
  if (args.size() != params.size()) {
    return ValueError("the profile recorded ", args.size(), " arguments of kernel ", kernel.name,
                      ", which takes ", params.size());
  }
  std::vector<Value> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].is_tensor != params[i].is_tensor) {
      return ValueError("kernel ", kernel.name, " argument ", i, ": the profile recorded ",
                        args[i].is_tensor ? "a tensor" : "an int", ", the kernel takes ",
                        params[i].is_tensor ? "a tensor" : "an int");
    }
    if (!args[i].is_tensor) {
      out.push_back(Value(args[i].value));
      continue;
    }
    TETHER_ASSIGN_OR_RETURN(Value t, session->AllocTensor(args[i].shape, args[i].dtype, device));
    const bool is_float = args[i].dtype.is_float() || args[i].dtype.is_bfloat16();
    TETHER_RETURN_IF_ERROR(session->FillRandom(t, seed + i, 0.0, is_float ? 1.0 : 0.0));
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace tether::cli
