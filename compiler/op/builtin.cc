// The builtin, non-kernel operators: calls into kernels and packed
// functions (call_tir, call_dps_packed, call_pure_packed), shape_of, the
// memory operators of memory planning (alloc_storage, alloc_tensor,
// kill_storage, kill_tensor, builtin.alloc_tensor) and device hints. None
// lowers to a kernel: the VM code generator handles them, so each has
// pattern kOpaque and only a struct info inference.
#include "absl/strings/str_cat.h"
#include "compiler/op/op.h"
#include "compiler/relax/kernel_call.h"
#include "compiler/relax/struct_info_util.h"
#include "runtime/core/error.h"

namespace tether::compiler {
namespace {

absl::Status Bad(absl::string_view op, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", message));
}

// The result of call_tir / call_dps_packed: a tensor or a tuple of tensors.
absl::StatusOr<StructInfo> DpsOutput(absl::string_view op, const CallNode& call) {
  if (call.sinfo_args.size() != 1 || !call.sinfo_args[0].defined()) {
    return Bad(
        op, absl::StrCat("expects exactly one output struct info, got ", call.sinfo_args.size()));
  }
  const StructInfo& out = call.sinfo_args[0];
  if (out.kind() == StructInfoKind::kTensor) return out;
  if (const auto* t = out.as<TupleStructInfoNode>()) {
    for (const StructInfo& f : t->fields) {
      if (f.kind() != StructInfoKind::kTensor) {
        return Bad(op, absl::StrCat("output ", ToString(out), " is not a tuple of tensors"));
      }
    }
    return out;
  }
  return Bad(op, absl::StrCat("output ", ToString(out), " is not a tensor or a tuple of tensors"));
}

absl::Status ExpectTupleArg(absl::string_view op, const CallNode& call, size_t i) {
  if (call.args.size() <= i || call.args[i].kind() != ExprKind::kTuple) {
    return Bad(op, absl::StrCat("argument ", i, " must be a tuple of the call's arguments"));
  }
  return absl::OkStatus();
}

// call_tir and call_tir_inplace: (kernel, (args...), [tir_vars]).
absl::StatusOr<StructInfo> KernelCallOutput(absl::string_view op, const CallNode& call) {
  if (call.args.size() < 2 || call.args.size() > 3) {
    return Bad(op, absl::StrCat("expects 2 or 3 arguments, got ", call.args.size()));
  }
  if (call.args[0].kind() != ExprKind::kGlobalVar) {
    return Bad(op, "argument 0 must be the global var of a kernel");
  }
  if (absl::Status s = ExpectTupleArg(op, call, 1); !s.ok()) return s;
  if (call.args.size() == 3 && call.args[2].kind() != ExprKind::kShapeExpr) {
    return Bad(op, "argument 2 must be a shape of extra int arguments");
  }
  return DpsOutput(op, call);
}

absl::StatusOr<StructInfo> InferCallTir(const CallNode& call) {
  return KernelCallOutput("relax.call_tir", call);
}

// R.call_tir_inplace(kernel, args, [tir_vars], inplace_indices=..., out_sinfo=...):
// output i overwrites argument inplace_indices[i] (same shape and dtype) or,
// where the index is -1, is allocated like call_tir's.
absl::StatusOr<StructInfo> InferCallTirInplace(const CallNode& call) {
  constexpr absl::string_view kOp = "relax.call_tir_inplace";
  TETHER_ASSIGN_OR_RETURN(StructInfo out, KernelCallOutput(kOp, call));
  TETHER_ASSIGN_OR_RETURN(std::vector<int64_t> indices, InplaceIndices(call));
  const std::vector<StructInfo> outputs = KernelCallOutputs(call);
  const auto& args = call.args[1].as<TupleNode>()->fields;
  if (indices.size() != outputs.size()) {
    return Bad(kOp, absl::StrCat("has ", outputs.size(), " outputs but ", indices.size(),
                                 " inplace_indices"));
  }
  bool any = false;
  std::vector<bool> taken(args.size(), false);
  for (size_t i = 0; i < indices.size(); ++i) {
    const int64_t k = indices[i];
    if (k == -1) continue;
    if (k < 0 || k >= static_cast<int64_t>(args.size())) {
      return Bad(kOp, absl::StrCat("inplace_indices[", i, "] = ", k, " is not -1 or an argument (",
                                   args.size(), " arguments)"));
    }
    if (taken[k]) return Bad(kOp, absl::StrCat("argument ", k, " is overwritten by two outputs"));
    taken[k] = true;
    any = true;
    const StructInfo& a = args[k].struct_info();
    const auto* at = a.as<TensorStructInfoNode>();
    const auto* ot = outputs[i].as<TensorStructInfoNode>();
    bool same = at && ot && at->dtype == ot->dtype && at->ndim == ot->ndim;
    if (same && at->shape && ot->shape) {
      for (size_t d = 0; d < at->shape->size(); ++d) {
        const int64_t* x = (*at->shape)[d].as_int();
        const int64_t* y = (*ot->shape)[d].as_int();
        if (x && y && *x != *y) same = false;
      }
    }
    if (!same) {
      return Bad(kOp,
                 absl::StrCat("output ", i, " ", ToString(outputs[i]), " overwrites argument ", k,
                              " ", ToString(a), ": they must have the same shape and dtype"));
    }
  }
  if (!any)
    return Bad(kOp,
               "no output overwrites an argument (all inplace_indices are -1); use R.call_tir");
  return out;
}

absl::StatusOr<StructInfo> InferCallDpsPacked(const CallNode& call) {
  constexpr absl::string_view kOp = "relax.call_dps_packed";
  if (call.args.size() != 2) {
    return Bad(kOp, absl::StrCat("expects 2 arguments, got ", call.args.size()));
  }
  if (call.args[0].kind() != ExprKind::kExternFunc) {
    return Bad(kOp, "argument 0 must be an extern function");
  }
  if (absl::Status s = ExpectTupleArg(kOp, call, 1); !s.ok()) return s;
  return DpsOutput(kOp, call);
}

absl::StatusOr<StructInfo> InferCallPurePacked(const CallNode& call) {
  constexpr absl::string_view kOp = "relax.call_pure_packed";
  if (call.args.empty() || call.args[0].kind() != ExprKind::kExternFunc) {
    return Bad(kOp, "argument 0 must be an extern function");
  }
  if (call.sinfo_args.size() != 1 || !call.sinfo_args[0].defined()) {
    return Bad(
        kOp, absl::StrCat("expects exactly one result struct info, got ", call.sinfo_args.size()));
  }
  return call.sinfo_args[0];
}

absl::StatusOr<StructInfo> InferShapeOf(const CallNode& call) {
  const StructInfo& s = call.args[0].struct_info();
  const auto* t = s.as<TensorStructInfoNode>();
  if (t == nullptr)
    return Bad("relax.shape_of", absl::StrCat("expects a tensor, got ", ToString(s)));
  if (t->shape) return ShapeSInfo(*t->shape);
  return ShapeSInfoOfRank(t->ndim);
}

// R.tensor_to_shape(t): the values of a 1-D integer tensor as a shape, read
// at run time (vm.builtin.tensor_to_shape); ndim is t's length when static.
absl::StatusOr<StructInfo> InferTensorToShape(const CallNode& call) {
  const StructInfo& s = call.args[0].struct_info();
  const auto* t = s.as<TensorStructInfoNode>();
  if (t == nullptr || (t->ndim >= 0 && t->ndim != 1) ||
      (t->dtype.has_value() && !t->dtype->is_int())) {
    return Bad("relax.tensor_to_shape",
               absl::StrCat("expects a 1-D integer tensor, got ", ToString(s)));
  }
  if (t->shape.has_value()) {
    if (const int64_t* n = (*t->shape)[0].as_int()) return ShapeSInfoOfRank(static_cast<int>(*n));
  }
  return ShapeSInfoOfRank(-1);
}

// The values of a ShapeExpr argument, or an error naming the operator.
absl::StatusOr<std::vector<PrimExpr>> ShapeArg(absl::string_view op, const CallNode& call, size_t i,
                                               absl::string_view what) {
  if (const auto* s = call.args[i].as<ShapeExprNode>()) return s->values;
  const auto* ss = call.args[i].struct_info().as<ShapeStructInfoNode>();
  if (ss && ss->values) return *ss->values;
  return Bad(op, absl::StrCat("argument ", i, " (", what, ") must be a shape with known values"));
}

absl::StatusOr<DataType> DTypeArg(absl::string_view op, const CallNode& call, size_t i) {
  if (const auto* d = call.args[i].as<DataTypeImmNode>()) return d->value;
  return Bad(op, absl::StrCat("argument ", i, " must be a dtype"));
}

absl::Status ExpectPrim(absl::string_view op, const CallNode& call, size_t i,
                        absl::string_view what) {
  if (call.args[i].struct_info().kind() != StructInfoKind::kPrim) {
    return Bad(op, absl::StrCat("argument ", i, " (", what, ") must be a prim value, got ",
                                ToString(call.args[i].struct_info())));
  }
  return absl::OkStatus();
}

absl::StatusOr<StructInfo> InferAllocStorage(const CallNode& call) {
  constexpr absl::string_view kOp = "relax.memory.alloc_storage";
  absl::StatusOr<std::vector<PrimExpr>> size = ShapeArg(kOp, call, 0, "size in bytes");
  if (!size.ok()) return size.status();
  if (size->size() != 1) return Bad(kOp, absl::StrCat("size must have 1 dim, got ", size->size()));
  if (absl::Status s = ExpectPrim(kOp, call, 1, "device index"); !s.ok()) return s;
  if (call.args[2].kind() != ExprKind::kStringImm)
    return Bad(kOp, "argument 2 must be a scope string");
  absl::StatusOr<DataType> dtype = DTypeArg(kOp, call, 3);
  if (!dtype.ok()) return dtype.status();
  return ObjectSInfo();
}

absl::StatusOr<StructInfo> InferAllocTensor(const CallNode& call) {
  constexpr absl::string_view kOp = "relax.memory.alloc_tensor";
  if (call.args[0].struct_info().kind() != StructInfoKind::kObject) {
    return Bad(kOp, absl::StrCat("argument 0 must be a storage, got ",
                                 ToString(call.args[0].struct_info())));
  }
  if (absl::Status s = ExpectPrim(kOp, call, 1, "offset"); !s.ok()) return s;
  absl::StatusOr<std::vector<PrimExpr>> shape = ShapeArg(kOp, call, 2, "shape");
  if (!shape.ok()) return shape.status();
  absl::StatusOr<DataType> dtype = DTypeArg(kOp, call, 3);
  if (!dtype.ok()) return dtype.status();
  return TensorSInfo(*shape, *dtype);
}

absl::StatusOr<StructInfo> InferBuiltinAllocTensor(const CallNode& call) {
  constexpr absl::string_view kOp = "relax.builtin.alloc_tensor";
  absl::StatusOr<std::vector<PrimExpr>> shape = ShapeArg(kOp, call, 0, "shape");
  if (!shape.ok()) return shape.status();
  absl::StatusOr<DataType> dtype = DTypeArg(kOp, call, 1);
  if (!dtype.ok()) return dtype.status();
  if (absl::Status s = ExpectPrim(kOp, call, 2, "device index"); !s.ok()) return s;
  return TensorSInfo(*shape, *dtype);
}

absl::StatusOr<StructInfo> InferKill(const CallNode& call) { return TupleSInfo({}); }

// to_vdevice / hint.on_device: the tensor, placed on the device of the attrs
// ("device_type" and "device_id", DLPack codes).
absl::StatusOr<StructInfo> InferOnDevice(absl::string_view op, const CallNode& call) {
  const StructInfo& s = call.args[0].struct_info();
  const auto* t = s.as<TensorStructInfoNode>();
  if (t == nullptr) return s;
  auto type = GetIntAttr(call.attrs, "device_type", -1);
  if (type < 0) return Bad(op, "missing attribute device_type");
  Device dev =
      Device::FromDL(DLDevice{static_cast<DLDeviceType>(type),
                              static_cast<int32_t>(GetIntAttr(call.attrs, "device_id", 0))});
  if (t->shape) return TensorSInfo(*t->shape, t->dtype, dev);
  return TensorSInfoOfRank(t->ndim, t->dtype, dev);
}

void Register(std::string name, int num_args,
              std::function<absl::StatusOr<StructInfo>(const CallNode&)> infer) {
  OpInfo info;
  info.name = std::move(name);
  info.pattern = OpPattern::kOpaque;
  info.num_args = num_args;
  info.infer = std::move(infer);
  RegisterOp(std::move(info));
}

}  // namespace

void RegisterBuiltinOps() {
  Register("relax.call_tir", -1, InferCallTir);
  Register("relax.call_tir_inplace", -1, InferCallTirInplace);
  Register("relax.call_dps_packed", -1, InferCallDpsPacked);
  Register("relax.call_pure_packed", -1, InferCallPurePacked);
  Register("relax.shape_of", 1, InferShapeOf);
  Register("relax.tensor_to_shape", 1, InferTensorToShape);
  Register("relax.memory.alloc_storage", 4, InferAllocStorage);
  Register("relax.memory.alloc_tensor", 4, InferAllocTensor);
  Register("relax.memory.kill_storage", 1, InferKill);
  Register("relax.memory.kill_tensor", 1, InferKill);
  Register("relax.builtin.alloc_tensor", 3, InferBuiltinAllocTensor);
  Register("relax.to_vdevice", 1,
           [](const CallNode& c) { return InferOnDevice("relax.to_vdevice", c); });
  Register("relax.hint.on_device", 1,
           [](const CallNode& c) { return InferOnDevice("relax.hint.on_device", c); });
}

}  // namespace tether::compiler
