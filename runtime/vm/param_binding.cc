// Parameter types as metadata text, and the check of a param dict against an
// executable's bytecode functions (param_binding.h).
#include "runtime/vm/param_binding.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "runtime/core/error.h"

namespace tether::vm {

std::string ParamType::ToString() const {
  if (!is_tensor) return "-";
  std::string out = dtype ? dtype->ToString() : "?";
  if (!dims) return absl::StrCat(out, "[*]");
  std::vector<std::string> parts;
  for (const std::optional<int64_t>& d : *dims) parts.push_back(d ? absl::StrCat(*d) : "?");
  return absl::StrCat(out, "[", absl::StrJoin(parts, ","), "]");
}

bool ParamType::Accepts(const Tensor& tensor) const {
  if (!is_tensor || !tensor) return false;
  if (dtype && *dtype != tensor->dtype()) return false;
  if (!dims) return true;
  std::span<const int64_t> shape = tensor->shape();
  if (shape.size() != dims->size()) return false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if ((*dims)[i] && *(*dims)[i] != shape[i]) return false;
  }
  return true;
}

absl::StatusOr<ParamType> ParamType::Parse(absl::string_view text) {
  ParamType type;
  if (text == "-") {
    type.is_tensor = false;
    return type;
  }
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter type \"", text.substr(0, 80), "\" is not of the form dtype[dims]"));
  };
  size_t open = text.find('[');
  if (open == absl::string_view::npos || text.back() != ']') return bad();
  absl::string_view dtype = text.substr(0, open);
  absl::string_view dims = text.substr(open + 1, text.size() - open - 2);
  if (dtype != "?") {
    absl::StatusOr<DataType> parsed = DataType::Parse(dtype);
    if (!parsed.ok()) return bad();
    type.dtype = *parsed;
  }
  if (dims == "*") return type;
  type.dims.emplace();
  if (dims.empty()) return type;
  for (absl::string_view d : absl::StrSplit(dims, ',')) {
    int64_t size = 0;
    if (d == "?") {
      type.dims->push_back(std::nullopt);
    } else if (absl::SimpleAtoi(d, &size) && size >= 0) {
      type.dims->push_back(size);
    } else {
      return bad();
    }
  }
  return type;
}

std::string FormatParamTypes(const std::vector<ParamType>& types) {
  std::vector<std::string> lines;
  for (const ParamType& t : types) lines.push_back(t.ToString());
  return absl::StrJoin(lines, "\n");
}

absl::StatusOr<std::vector<ParamType>> ParseParamTypes(absl::string_view text, size_t num_params) {
  std::vector<ParamType> types;
  if (!text.empty()) {
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      TETHER_ASSIGN_OR_RETURN(ParamType t, ParamType::Parse(line));
      types.push_back(std::move(t));
    }
  }
  if (types.size() != num_params) {
    return absl::InvalidArgumentError(absl::StrCat(
        "param_types lists ", types.size(), " parameter types for ", num_params, " parameters"));
  }
  return types;
}

namespace {

std::string Describe(const Tensor& t) {
  return absl::StrCat(t->dtype().ToString(), ShapeToString(t->shape()));
}

}  // namespace

absl::StatusOr<ParamBinding> ParamBinding::Create(const Executable& exec, const ParamList& params,
                                                  absl::string_view params_name,
                                                  absl::string_view module_name) {
  absl::flat_hash_map<absl::string_view, const Tensor*> by_name;
  for (const auto& [name, tensor] : params) by_name[name] = &tensor;
  absl::flat_hash_set<absl::string_view> used;
  ParamBinding binding;
  for (size_t i = 0; i < exec.functions.size(); ++i) {
    const FunctionInfo& info = exec.functions[i];
    if (!IsVMFunction(info.kind) || info.param_names.empty()) continue;
    std::optional<std::vector<ParamType>> types;
    if (auto sig = exec.metadata.find(absl::StrCat(kParamTypesMetadataPrefix, info.name));
        sig != exec.metadata.end()) {
      absl::StatusOr<std::vector<ParamType>> parsed =
          ParseParamTypes(sig->second, static_cast<size_t>(info.num_args));
      if (!parsed.ok()) {
        return ValueError(module_name, " has bad param_types for function ", info.name, ": ",
                          parsed.status().message());
      }
      types = std::move(*parsed);
    }
    Function f;
    f.values.resize(info.param_names.size());
    for (size_t p = 0; p < info.param_names.size(); ++p) {
      const std::string& name = info.param_names[p];
      auto it = by_name.find(name);
      if (it == by_name.end()) {
        f.open.push_back(p);
        f.open_names.push_back(name);
        continue;
      }
      const Tensor& t = *it->second;
      if (types && !(*types)[p].Accepts(t)) {
        return ValueError(params_name, " has ", name, " as ", Describe(t), ", but parameter ", name,
                          " of ", info.name, " in ", module_name, " is ", (*types)[p].ToString());
      }
      f.values[p] = Value(t);
      f.bound_names.push_back(name);
      used.insert(it->first);
    }
    if (!f.bound_names.empty()) {
      binding.functions_.emplace_back(static_cast<Index>(i), std::move(f));
    }
  }
  for (const auto& [name, tensor] : params) {
    if (used.contains(name)) continue;
    std::string mains;
    if (auto it = exec.function_map.find("main"); it != exec.function_map.end()) {
      mains = absl::StrCat(" (main takes ",
                           absl::StrJoin(exec.functions[it->second].param_names, ", "), ")");
    }
    return ValueError(params_name, " has tensor ", name, ", which no function of ", module_name,
                      " takes as a parameter", mains);
  }
  return binding;
}

const ParamBinding::Function* ParamBinding::Find(Index func_index) const {
  for (const auto& [index, f] : functions_) {
    if (index == func_index) return &f;
  }
  return nullptr;
}

}  // namespace tether::vm
