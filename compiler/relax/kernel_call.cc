// Checks of call_tir / call_tir_inplace against the kernel's signature.
#include "compiler/relax/kernel_call.h"

#include "absl/strings/str_cat.h"
#include "compiler/relax/struct_info.h"
#include "compiler/relax/visitor.h"

namespace tether::compiler {
namespace {

std::string Describe(const Buffer& b) {
  std::string dims;
  for (size_t i = 0; i < b->shape.size(); ++i) {
    absl::StrAppend(&dims, i ? ", " : "", ToString(b->shape[i]));
  }
  if (b->shape.size() == 1) dims += ",";
  return absl::StrCat("T.Buffer((", dims, "), \"", b->dtype.ToString(), "\")");
}

absl::Status Mismatch(const KernelFunc& kernel, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("call to kernel '", kernel->name, "': ", what));
}

absl::Status CheckTensor(const KernelFunc& kernel, const KernelParam& param,
                         const StructInfo& sinfo, const std::string& what) {
  const Buffer& b = param.buffer;
  const auto* t = sinfo.as<TensorStructInfoNode>();
  auto bad = [&]() {
    return Mismatch(kernel, absl::StrCat(what, " is ", ToString(sinfo), ", but parameter '",
                                         b->name, "' is ", Describe(b)));
  };
  if (t == nullptr) return bad();
  if (t->dtype.has_value() && *t->dtype != b->dtype) return bad();
  if (t->ndim >= 0 && t->ndim != static_cast<int>(b->shape.size())) return bad();
  if (t->shape.has_value()) {
    for (size_t i = 0; i < t->shape->size() && i < b->shape.size(); ++i) {
      const int64_t* have = (*t->shape)[i].as_int();
      const int64_t* want = b->shape[i].as_int();
      if (have && want && *have != *want) return bad();
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool IsKernelCall(const Expr& e) {
  const auto* call = e.as<CallNode>();
  if (call == nullptr) return false;
  const auto* op = call->op.as<OpNode>();
  return op && (op->name == "relax.call_tir" || op->name == "relax.call_tir_inplace");
}

std::vector<StructInfo> KernelCallOutputs(const CallNode& call) {
  if (call.sinfo_args.size() != 1) return {};
  if (const auto* t = call.sinfo_args[0].as<TupleStructInfoNode>()) return t->fields;
  return {call.sinfo_args[0]};
}

absl::StatusOr<std::vector<int64_t>> InplaceIndices(const CallNode& call) {
  const auto* op = call.op.as<OpNode>();
  if (op == nullptr || op->name != "relax.call_tir_inplace") return std::vector<int64_t>{};
  auto it = call.attrs.find("inplace_indices");
  if (it == call.attrs.end()) {
    return absl::InvalidArgumentError(
        "relax.call_tir_inplace: missing inplace_indices (per output, the argument it overwrites, "
        "or -1)");
  }
  if (const auto* one = std::get_if<int64_t>(&it->second)) return std::vector<int64_t>{*one};
  if (const auto* list = std::get_if<std::vector<int64_t>>(&it->second)) return *list;
  return absl::InvalidArgumentError(
      "relax.call_tir_inplace: inplace_indices must be an int or a list of ints");
}

absl::Status CheckKernelCall(const KernelFunc& kernel, const CallNode& call) {
  const auto* tuple = call.args.size() >= 2 ? call.args[1].as<TupleNode>() : nullptr;
  if (tuple == nullptr) return Mismatch(kernel, "the arguments must be a tuple");
  absl::StatusOr<std::vector<int64_t>> inplace = InplaceIndices(call);
  if (!inplace.ok()) return inplace.status();
  const std::vector<StructInfo> outputs = KernelCallOutputs(call);
  // What the kernel receives: the arguments, the outputs the call
  // allocates, then the tir_vars.
  std::vector<std::pair<StructInfo, std::string>> tensors;
  for (size_t i = 0; i < tuple->fields.size(); ++i) {
    tensors.emplace_back(tuple->fields[i].struct_info(), absl::StrCat("argument ", i));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!inplace->empty() && (*inplace)[i] >= 0) continue;
    tensors.emplace_back(outputs[i], absl::StrCat("output ", i));
  }
  size_t scalars = 0;
  if (call.args.size() == 3) {
    if (const auto* s = call.args[2].as<ShapeExprNode>()) scalars = s->values.size();
  }
  size_t kernel_tensors = 0;
  while (kernel_tensors < kernel->params.size() && kernel->params[kernel_tensors].is_tensor()) {
    ++kernel_tensors;
  }
  const size_t kernel_scalars = kernel->params.size() - kernel_tensors;
  for (size_t i = kernel_tensors; i < kernel->params.size(); ++i) {
    if (kernel->params[i].is_tensor()) {
      return Mismatch(kernel, absl::StrCat("tensor parameter '", kernel->params[i].buffer->name,
                                           "' follows a scalar; a kernel takes its buffers "
                                           "first, then its int scalars (tir_vars)"));
    }
  }
  if (tensors.size() != kernel_tensors || scalars != kernel_scalars) {
    return Mismatch(
        kernel, absl::StrCat("the kernel takes ", kernel_tensors, " buffers and ", kernel_scalars,
                             " int scalars; the call passes ", tuple->fields.size(),
                             " arguments and ", tensors.size() - tuple->fields.size(),
                             " outputs (buffers) and ", scalars, " tir_vars"));
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    absl::Status s = CheckTensor(kernel, kernel->params[i], tensors[i].first, tensors[i].second);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status CheckKernelCalls(const IRModule& module) {
  absl::Status status;
  for (const auto& [name, func] : module.functions) {
    PostOrderVisit(func, [&](const Expr& e) {
      if (!status.ok() || !IsKernelCall(e)) return;
      const auto* call = e.as<CallNode>();
      const auto* gv = call->args.empty() ? nullptr : call->args[0].as<GlobalVarNode>();
      auto kernel = gv ? module.kernels.find(gv->name_hint) : module.kernels.end();
      if (kernel == module.kernels.end()) return;
      absl::Status s = CheckKernelCall(kernel->second, *call);
      if (!s.ok()) {
        status = absl::InvalidArgumentError(
            e->span.known() ? absl::StrCat(e->span.ToString(), ": ", s.message()) : s.message());
      }
    });
  }
  return status;
}

}  // namespace tether::compiler
