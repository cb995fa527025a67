// The ONNX importer's graph walk: ModelProto -> one Relax function "main",
// built with a BlockBuilder. Graph inputs become parameters (dim_params
// shared symbolic vars), initializers constants or trailing parameters, and
// each node is handed to the converter registered for its (op_type, opset);
// control-flow nodes and the block structure they need are control_flow.cc's.
//
// The converter registry lives here too: it is filled once, on the first
// import, by the Register*Converters family functions (one per convert_*.cc).
#include "compiler/frontend/onnx/importer.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "compiler/frontend/onnx/converter.h"
#include "compiler/frontend/onnx/graph_importer.h"
#include "compiler/frontend/onnx/known_ints.h"
#include "compiler/frontend/onnx/tensor_proto.h"
#include "compiler/op/op.h"
#include "compiler/relax/block_builder.h"
#include "onnx/onnx_pb.h"
#include "runtime/core/file.h"

namespace tether::compiler::onnx_frontend {
namespace {

constexpr int64_t kMinOpset = 1;
constexpr int64_t kMaxOpset = 17;

// op_type -> since_opset -> converter.
using Registry = std::map<std::string, std::map<int, Converter>>;

Registry& MutableRegistry() {
  static Registry* registry = new Registry();
  return *registry;
}

const Registry& GetRegistry() {
  static const bool filled = [] {
    RegisterElementwiseConverters();
    RegisterTensorConverters();
    RegisterNNConverters();
    RegisterShapeConverters();
    RegisterLossConverters();
    RegisterResizeConverters();
    RegisterSequenceConverters();
    RegisterRecurrentConverters();
    RegisterQuantizeConverters();
    RegisterDataDependentConverters();
    return true;
  }();
  (void)filled;
  return MutableRegistry();
}

// The converter of `op_type` for `opset`, or nullptr (with the lowest opset
// it is registered from in *since, 0 when never).
const Converter* FindConverter(const std::string& op_type, int64_t opset, int* since) {
  *since = 0;
  const Registry& registry = GetRegistry();
  auto it = registry.find(op_type);
  if (it == registry.end() || it->second.empty()) return nullptr;
  *since = it->second.begin()->first;
  auto upper = it->second.upper_bound(static_cast<int>(opset));
  if (upper == it->second.begin()) return nullptr;
  return &std::prev(upper)->second;
}

const char* AttrTypeName(int type) {
  switch (type) {
    case ::onnx::AttributeProto::FLOAT:
      return "FLOAT";
    case ::onnx::AttributeProto::INT:
      return "INT";
    case ::onnx::AttributeProto::STRING:
      return "STRING";
    case ::onnx::AttributeProto::TENSOR:
      return "TENSOR";
    case ::onnx::AttributeProto::GRAPH:
      return "GRAPH";
    case ::onnx::AttributeProto::FLOATS:
      return "FLOATS";
    case ::onnx::AttributeProto::INTS:
      return "INTS";
    case ::onnx::AttributeProto::STRINGS:
      return "STRINGS";
    case ::onnx::AttributeProto::TENSORS:
      return "TENSORS";
    case ::onnx::AttributeProto::GRAPHS:
      return "GRAPHS";
    case ::onnx::AttributeProto::SPARSE_TENSOR:
      return "SPARSE_TENSOR";
    default:
      return "UNDEFINED";
  }
}

}  // namespace

std::string SymbolName(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  }
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "d_" + out;
  return out;
}

// ---- NodeContext ----

std::string NodeContext::Describe() const {
  std::string name = node_.name();
  if (name.empty() && node_.output_size() > 0) name = node_.output(0);
  return absl::StrCat("node '", name, "' (", node_.op_type(), ", opset ", opset_, ")");
}

absl::Status NodeContext::Unsupported(absl::string_view what) const {
  return absl::UnimplementedError(absl::StrCat("onnx: ", Describe(), ": ", what));
}

absl::Status NodeContext::Invalid(absl::string_view what) const {
  return absl::InvalidArgumentError(absl::StrCat("onnx: ", Describe(), ": ", what));
}

const ::onnx::AttributeProto* NodeContext::TypedAttr(absl::string_view name,
                                                     std::initializer_list<int> types) const {
  const ::onnx::AttributeProto* a = FindAttr(name);
  if (a == nullptr) return nullptr;
  for (int t : types) {
    if (a->type() == t) return a;
  }
  if (attr_error_.ok()) {
    attr_error_ = Invalid(absl::StrCat("attribute '", name, "' has type ", AttrTypeName(a->type()),
                                       ", expected ", AttrTypeName(*types.begin())));
  }
  return nullptr;
}

absl::StatusOr<const ::onnx::GraphProto*> NodeContext::AttrGraph(absl::string_view name) const {
  const ::onnx::AttributeProto* a = FindAttr(name);
  if (a == nullptr) return Invalid(absl::StrCat("missing attribute '", name, "'"));
  if (a->type() != ::onnx::AttributeProto::GRAPH) {
    return Invalid(absl::StrCat("attribute '", name, "' has type ", AttrTypeName(a->type()),
                                ", expected GRAPH"));
  }
  return &a->g();
}

const OnnxValue* NodeContext::Value(int i) const {
  if (!HasInput(i)) return nullptr;
  return importer_->Find(node_.input(i));
}

absl::StatusOr<Expr> NodeContext::Input(int i) {
  if (!HasInput(i)) return Invalid(absl::StrCat("input ", i, " is absent"));
  return importer_->Materialize(node_.input(i), this);
}

absl::StatusOr<const TensorStructInfoNode*> NodeContext::InputTensorInfo(int i) {
  const OnnxValue* v = Value(i);
  if (v == nullptr) return Invalid(absl::StrCat("input ", i, " is absent"));
  if (v->expr.defined()) {
    const auto* t = v->expr.struct_info().as<TensorStructInfoNode>();
    if (t == nullptr) {
      return Invalid(absl::StrCat("input ", i, " ('", node_.input(i), "') is not a tensor but ",
                                  ToString(v->expr.struct_info())));
    }
    return t;
  }
  const KnownInts& k = *v->known;
  std::vector<PrimExpr> shape;
  if (!k.scalar) shape.push_back(PrimExpr(static_cast<int64_t>(k.values.size())));
  sinfo_keepalive_.push_back(TensorSInfo(std::move(shape), k.dtype));
  return sinfo_keepalive_.back().as<TensorStructInfoNode>();
}

std::optional<Tensor> NodeContext::ConstantInput(int i) const {
  const OnnxValue* v = Value(i);
  if (v == nullptr) return std::nullopt;
  if (v->expr.defined()) {
    if (const auto* c = v->expr.as<ConstantNode>()) return c->data;
  }
  if (const Tensor* t = importer_->InitializerValue(node_.input(i))) return *t;
  if (v->known.has_value()) return TensorFromKnownInts(*v->known);
  return std::nullopt;
}

std::optional<DynamicType> NodeContext::InputDynamicType(int i) const {
  const OnnxValue* v = Value(i);
  if (v == nullptr) return std::nullopt;
  return v->dynamic;
}

std::optional<KnownInts> NodeContext::KnownInput(int i) const {
  const OnnxValue* v = Value(i);
  if (v == nullptr) return std::nullopt;
  if (v->known.has_value()) return v->known;
  std::optional<Tensor> t = ConstantInput(i);
  if (!t.has_value()) return std::nullopt;
  return KnownIntsFromTensor(*t);
}

absl::StatusOr<std::vector<int64_t>> NodeContext::ConstantInts(int i, absl::string_view what) {
  std::optional<Tensor> t = ConstantInput(i);
  std::optional<std::vector<int64_t>> v;
  if (t.has_value() && ((*t)->dtype().is_int() || (*t)->dtype().is_uint())) v = IntsFromTensor(*t);
  if (!v.has_value()) {
    return Unsupported(absl::StrCat("input ", i, " (", what, ") must be known at import time"));
  }
  return *v;
}

absl::StatusOr<KnownInts> NodeContext::KnownOrRunTimeInts(int i, absl::string_view what) {
  if (std::optional<KnownInts> k = KnownInput(i)) return *k;
  auto unknown = [&] {
    return Unsupported(absl::StrCat("input ", i, " (", what, ") must be known at import time"));
  };
  if (!HasInput(i)) return unknown();
  const std::string& name = node_.input(i);
  auto cached = importer_->runtime_ints().find(name);
  if (cached != importer_->runtime_ints().end()) return cached->second;
  absl::StatusOr<const TensorStructInfoNode*> info = InputTensorInfo(i);
  if (!info.ok() || !(*info)->dtype.has_value() || !(*info)->dtype->is_int()) return unknown();
  absl::StatusOr<Expr> x = Input(i);
  if (!x.ok()) return x.status();
  absl::StatusOr<KnownInts> k = RunTimeInts(*x, name);
  if (!k.ok()) return absl::IsInvalidArgument(k.status()) ? unknown() : k.status();
  importer_->runtime_ints()[name] = *k;
  return k;
}

absl::StatusOr<KnownInts> NodeContext::RunTimeInts(const Expr& value, absl::string_view name) {
  const auto* info = value.struct_info().as<TensorStructInfoNode>();
  if (info == nullptr || !info->dtype.has_value() || !info->dtype->is_int()) {
    return Invalid(absl::StrCat(name, " must be an integer tensor to be read at run time"));
  }
  int64_t length = 1;
  if (info->ndim == 1 && info->shape.has_value()) {
    const int64_t* n = (*info->shape)[0].as_int();
    length = n == nullptr ? -1 : *n;
  } else if (info->ndim != 0) {
    length = -1;
  }
  if (length < 0 || length > kMaxRunTimeInts) {
    return Invalid(absl::StrCat(name, " must be 0-D or 1-D of a static length up to ",
                                kMaxRunTimeInts, " to be read at run time"));
  }
  absl::StatusOr<Expr> x = value;
  if (info->ndim == 0) x = EmitOp("relax.reshape", {*x, MakeShapeExpr({PrimExpr(1)})}, {});
  const DataType dtype = *info->dtype;
  if (x.ok() && dtype.bits() != 64 && dtype.bits() != 32 && dtype.bits() != 16) {
    x = EmitOp("relax.astype", {*x}, {{"dtype", DataType::Int(64)}});
  }
  absl::StatusOr<Expr> shape = x.ok() ? EmitOp("relax.tensor_to_shape", {*x}, {}) : x;
  if (!shape.ok()) return shape.status();
  KnownInts k;
  k.scalar = info->ndim == 0;
  k.dtype = dtype;
  for (int64_t e = 0; e < length; ++e) {
    k.values.push_back(Var(SymbolName(absl::StrCat(name, "_", e))));
  }
  absl::StatusOr<Expr> cast = importer_->builder().EmitMatchCast(*shape, ShapeSInfo(k.values),
                                                                 SymbolName(std::string(name)));
  if (!cast.ok()) return cast.status();
  return k;
}

int64_t NodeContext::AttrInt(absl::string_view name, int64_t def) const {
  const auto* a = TypedAttr(name, {::onnx::AttributeProto::INT});
  return a == nullptr ? def : a->i();
}

float NodeContext::AttrFloat(absl::string_view name, float def) const {
  const auto* a = TypedAttr(name, {::onnx::AttributeProto::FLOAT, ::onnx::AttributeProto::INT});
  if (a == nullptr) return def;
  return a->type() == ::onnx::AttributeProto::INT ? static_cast<float>(a->i()) : a->f();
}

std::string NodeContext::AttrString(absl::string_view name, absl::string_view def) const {
  const auto* a = TypedAttr(name, {::onnx::AttributeProto::STRING});
  return a == nullptr ? std::string(def) : a->s();
}

std::vector<int64_t> NodeContext::AttrInts(absl::string_view name, std::vector<int64_t> def) const {
  const auto* a = TypedAttr(name, {::onnx::AttributeProto::INTS});
  if (a == nullptr) return def;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

std::vector<float> NodeContext::AttrFloats(absl::string_view name, std::vector<float> def) const {
  const auto* a = TypedAttr(name, {::onnx::AttributeProto::FLOATS});
  if (a == nullptr) return def;
  return std::vector<float>(a->floats().begin(), a->floats().end());
}

std::vector<std::string> NodeContext::AttrStrings(absl::string_view name,
                                                  std::vector<std::string> def) const {
  const auto* a = TypedAttr(name, {::onnx::AttributeProto::STRINGS});
  if (a == nullptr) return def;
  return std::vector<std::string>(a->strings().begin(), a->strings().end());
}

absl::StatusOr<Tensor> NodeContext::AttrTensor(absl::string_view name) const {
  const ::onnx::AttributeProto* a = FindAttr(name);
  if (a == nullptr) return Invalid(absl::StrCat("missing attribute '", name, "'"));
  if (a->type() != ::onnx::AttributeProto::TENSOR) {
    return Invalid(absl::StrCat("attribute '", name, "' has type ", AttrTypeName(a->type()),
                                ", expected TENSOR"));
  }
  absl::StatusOr<Tensor> t = TensorFromProto(a->t(), importer_->base_dir());
  if (!t.ok()) {
    return absl::Status(t.status().code(), absl::StrCat("onnx: ", Describe(), ": attribute '", name,
                                                        "': ", t.status().message()));
  }
  return t;
}

absl::StatusOr<Expr> NodeContext::Emit(const Expr& value) {
  std::string hint = node_.output_size() > 0 && !node_.output(0).empty() ? node_.output(0) : "lv";
  absl::StatusOr<Expr> var = importer_->builder().Emit(value, hint);
  if (!var.ok()) {
    return absl::Status(var.status().code(),
                        absl::StrCat("onnx: ", Describe(), ": ", var.status().message()));
  }
  return var;
}

absl::StatusOr<Expr> NodeContext::EmitMatchCast(const Expr& value, const StructInfo& sinfo) {
  std::string hint = node_.output_size() > 0 && !node_.output(0).empty() ? node_.output(0) : "lv";
  absl::StatusOr<Expr> var = importer_->builder().EmitMatchCast(value, sinfo, SymbolName(hint));
  if (!var.ok()) {
    return absl::Status(var.status().code(),
                        absl::StrCat("onnx: ", Describe(), ": ", var.status().message()));
  }
  return var;
}

absl::StatusOr<Expr> NodeContext::EmitOp(absl::string_view op, std::vector<Expr> args,
                                         Attrs attrs) {
  if (FindOp(op) == nullptr) {
    return absl::InternalError(
        absl::StrCat("onnx: ", Describe(), ": the converter uses unknown operator ", op));
  }
  return Emit(MakeCall(GetOp(op), std::move(args), std::move(attrs)));
}

// ---- GraphImporter ----

absl::StatusOr<Expr> GraphImporter::Materialize(const std::string& name, const NodeContext* ctx) {
  auto it = values_.find(name);
  if (it == values_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("onnx: value '", name, "' is not defined"));
  }
  OnnxValue& v = it->second;
  if (v.expr.defined()) return v.expr;
  std::optional<Tensor> t = TensorFromKnownInts(*v.known);
  if (t.has_value()) {
    v.expr = MakeConstant(*t);
    return v.expr;
  }
  // Symbolic elements (a Shape of a dynamic input used as data): one
  // relax.full per element, concatenated, in the open block. Not cached: a
  // subgraph may read the value in another function.
  const KnownInts& k = *v.known;
  if (bb_.InDataflowBlock()) {
    std::vector<Expr> parts;
    absl::Status s;
    auto emit = [&](const char* op, std::vector<Expr> args, Attrs attrs) -> Expr {
      absl::StatusOr<Expr> e =
          s.ok() ? bb_.Emit(MakeCall(GetOp(op), std::move(args), std::move(attrs)))
                 : absl::StatusOr<Expr>(s);
      if (!e.ok()) s = e.status();
      return e.ok() ? *e : Expr();
    };
    std::vector<PrimExpr> one_shape;
    if (!k.scalar) one_shape.push_back(PrimExpr(1));
    for (const PrimExpr& e : k.values) {
      parts.push_back(emit("relax.full",
                           {MakeShapeExpr(one_shape), MakePrimValue(Cast(DataType::Int(64), e))},
                           {{"dtype", k.dtype}}));
    }
    Expr out = parts.size() == 1 || k.scalar
                   ? parts[0]
                   : emit("relax.concat", {MakeTuple(parts)}, {{"axis", int64_t{0}}});
    if (s.ok() && !parts.empty()) return out;
    if (!s.ok()) return s;
  }
  std::vector<std::string> elems;
  for (const PrimExpr& e : k.values) elems.push_back(ToString(e));
  std::string what = absl::StrCat("value '", name, "' = [", absl::StrJoin(elems, ", "),
                                  "] has symbolic elements and is used as a tensor");
  if (ctx != nullptr) return ctx->Unsupported(what);
  return absl::UnimplementedError(absl::StrCat("onnx: ", what));
}

absl::Status GraphImporter::ReadOpset() {
  bool found = false;
  for (const auto& op : model_.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") {
      opset_ = op.version();
      found = true;
    }
  }
  if (!found) {
    std::vector<std::string> others;
    for (const auto& op : model_.opset_import()) {
      others.push_back(absl::StrCat("'", op.domain(), "' ", op.version()));
    }
    if (others.empty()) return absl::InvalidArgumentError("onnx: the model imports no opset");
    return absl::UnimplementedError(
        absl::StrCat("onnx: the model imports no opset of the default domain, only ",
                     absl::StrJoin(others, ", "), " (other domains are not supported)"));
  }
  if (opset_ < kMinOpset || opset_ > kMaxOpset) {
    return absl::UnimplementedError(absl::StrCat("onnx: opset ", opset_,
                                                 " of the default domain is not supported (",
                                                 kMinOpset, " to ", kMaxOpset, ")"));
  }
  return absl::OkStatus();
}

absl::Status GraphImporter::AddInitializers() {
  const auto& graph = model_.graph();
  if (graph.sparse_initializer_size() > 0) {
    return absl::UnimplementedError(absl::StrCat("onnx: sparse initializer '",
                                                 graph.sparse_initializer(0).values().name(),
                                                 "' is not supported"));
  }
  for (const auto& init : graph.initializer()) {
    if (init.name().empty()) {
      return absl::InvalidArgumentError("onnx: an initializer has no name");
    }
    absl::StatusOr<Tensor> t = TensorFromProto(init, base_dir_);
    if (!t.ok()) {
      return absl::Status(t.status().code(),
                          absl::StrCat("onnx: initializer: ", t.status().message()));
    }
    initializer_values_[init.name()] = *t;
    if (options_.keep_params_in_input) {
      std::vector<PrimExpr> shape;
      for (int64_t d : (*t)->shape()) shape.push_back(PrimExpr(d));
      Expr var = MakeVar(init.name(), TensorSInfo(std::move(shape), (*t)->dtype()));
      kept_params_.push_back(var);
      result_.params[init.name()] = *t;
      values_[init.name()] = OnnxValue::Of(var);
    } else {
      values_[init.name()] = OnnxValue::Of(MakeConstant(*t));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<DynamicType>> DynamicTypeOf(const ::onnx::TypeProto& type,
                                                         absl::string_view what,
                                                         std::map<std::string, Var>* dim_vars) {
  if (type.has_tensor_type()) return std::optional<DynamicType>();
  DynamicType out;
  const ::onnx::TypeProto* inner = &type;
  if (inner->has_optional_type()) {
    out.optional = true;
    inner = &inner->optional_type().elem_type();
  }
  if (inner->has_sequence_type()) {
    out.sequence = true;
    inner = &inner->sequence_type().elem_type();
  }
  if (!inner->has_tensor_type() || (!out.optional && !out.sequence)) {
    return absl::UnimplementedError(absl::StrCat(
        "onnx: ", what,
        " is not a tensor, a sequence of tensors or an optional of either (maps, sparse tensors "
        "and nested sequences are not supported)"));
  }
  const auto& tt = inner->tensor_type();
  if (tt.elem_type() != ::onnx::TensorProto::UNDEFINED) {
    absl::StatusOr<DataType> dtype = DataTypeFromOnnx(tt.elem_type());
    if (!dtype.ok()) {
      return absl::Status(dtype.status().code(),
                          absl::StrCat("onnx: ", what, ": ",
                                       absl::StripPrefix(dtype.status().message(), "onnx: ")));
    }
    out.dtype = *dtype;
  }
  if (tt.has_shape()) {
    out.ndim = tt.shape().dim_size();
    for (const auto& dim : tt.shape().dim()) {
      if (dim.has_dim_value() && dim.dim_value() >= 0) {
        out.dims.push_back(PrimExpr(dim.dim_value()));
      } else if (dim.has_dim_param() && !dim.dim_param().empty() && dim_vars != nullptr) {
        auto [it, inserted] = dim_vars->emplace(dim.dim_param(), Var());
        if (inserted) it->second = Var(SymbolName(dim.dim_param()));
        out.dims.push_back(it->second);
      } else {
        out.dims.push_back(PrimExpr());
      }
    }
  }
  return std::optional<DynamicType>(out);
}

absl::StatusOr<StructInfo> GraphImporter::InputStructInfo(const ::onnx::ValueInfoProto& input) {
  const std::string& name = input.name();
  if (!input.type().has_tensor_type()) {
    // A sequence or an optional: its structure is a run-time value.
    absl::StatusOr<std::optional<DynamicType>> dynamic =
        DynamicTypeOf(input.type(), absl::StrCat("graph input '", name, "'"));
    if (!dynamic.ok()) return dynamic.status();
    if (options_.input_shapes.count(name) || options_.frozen_inputs.count(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "onnx: graph input '", name,
          "' is a sequence or an optional; input_shapes and frozen_inputs take tensors only"));
    }
    return ObjectSInfo();
  }
  const auto& tt = input.type().tensor_type();
  absl::StatusOr<DataType> dtype = DataTypeFromOnnx(tt.elem_type());
  if (!dtype.ok()) {
    return absl::Status(dtype.status().code(),
                        absl::StrCat("onnx: graph input '", name,
                                     "': ", absl::StripPrefix(dtype.status().message(), "onnx: ")));
  }
  auto fixed = options_.input_shapes.find(name);
  if (!tt.has_shape()) {
    if (fixed == options_.input_shapes.end()) return TensorSInfoOfRank(-1, *dtype);
    std::vector<PrimExpr> shape;
    for (int64_t d : fixed->second) shape.push_back(PrimExpr(d));
    return TensorSInfo(std::move(shape), *dtype);
  }
  const int rank = tt.shape().dim_size();
  if (fixed != options_.input_shapes.end() && static_cast<int>(fixed->second.size()) != rank) {
    return absl::InvalidArgumentError(absl::StrCat("onnx: input_shapes gives input '", name, "' ",
                                                   fixed->second.size(),
                                                   " dims, the model declares ", rank));
  }
  std::vector<PrimExpr> shape;
  for (int axis = 0; axis < rank; ++axis) {
    const auto& dim = tt.shape().dim(axis);
    const bool has_fixed = fixed != options_.input_shapes.end();
    const int64_t want = has_fixed ? fixed->second[static_cast<size_t>(axis)] : -1;
    if (dim.has_dim_value()) {
      if (dim.dim_value() < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("onnx: graph input '", name, "' has dim ", axis, " = ", dim.dim_value()));
      }
      if (has_fixed && want != dim.dim_value()) {
        return absl::InvalidArgumentError(
            absl::StrCat("onnx: input_shapes gives input '", name, "' dim ", axis, " = ", want,
                         ", the model fixes it to ", dim.dim_value()));
      }
      shape.push_back(PrimExpr(dim.dim_value()));
    } else if (has_fixed) {
      if (want < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("onnx: input_shapes gives input '", name, "' dim ", axis, " = ", want));
      }
      shape.push_back(PrimExpr(want));
    } else if (dim.has_dim_param() && !dim.dim_param().empty()) {
      auto f = fixed_dim_params_.find(dim.dim_param());
      if (f != fixed_dim_params_.end()) {
        shape.push_back(PrimExpr(f->second));
        continue;
      }
      auto [it, inserted] = dim_vars_.emplace(dim.dim_param(), Var());
      if (inserted) it->second = Var(SymbolName(dim.dim_param()));
      shape.push_back(it->second);
    } else {
      shape.push_back(Var(SymbolName(absl::StrCat(name, "_d", axis))));
    }
  }
  return TensorSInfo(std::move(shape), *dtype);
}

namespace {

// A frozen input's value against the input's declaration.
absl::Status CheckFrozen(const std::string& name, const StructInfo& declared, const Tensor& value) {
  const auto* t = declared.as<TensorStructInfoNode>();
  if (!value || value->device().type != kDLCPU) {
    return absl::InvalidArgumentError(
        absl::StrCat("onnx: frozen input '", name, "' must be a CPU tensor"));
  }
  if (t->dtype.has_value() && *t->dtype != value->dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("onnx: frozen input '", name, "' is ",
                                                   value->dtype().ToString(), ", declared ",
                                                   t->dtype->ToString()));
  }
  bool ok = t->ndim < 0 || t->ndim == value->ndim();
  if (ok && t->shape.has_value()) {
    for (int i = 0; i < value->ndim(); ++i) {
      const int64_t* d = (*t->shape)[static_cast<size_t>(i)].as_int();
      if (d != nullptr && *d != value->shape()[static_cast<size_t>(i)]) ok = false;
    }
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat("onnx: frozen input '", name, "' has shape ",
                                                   value.ToString(), ", declared ",
                                                   ToString(declared)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status GraphImporter::AddInputs() {
  const auto& graph = model_.graph();
  std::set<std::string> inputs;
  // dim_params fixed through input_shapes apply to every input naming them.
  for (const auto& input : graph.input()) {
    inputs.insert(input.name());
    auto fixed = options_.input_shapes.find(input.name());
    if (fixed == options_.input_shapes.end() || !input.type().has_tensor_type() ||
        !input.type().tensor_type().has_shape()) {
      continue;
    }
    const auto& shape = input.type().tensor_type().shape();
    if (shape.dim_size() != static_cast<int>(fixed->second.size())) continue;  // reported below
    for (int axis = 0; axis < shape.dim_size(); ++axis) {
      if (shape.dim(axis).has_dim_param() && !shape.dim(axis).dim_param().empty()) {
        fixed_dim_params_[shape.dim(axis).dim_param()] = fixed->second[static_cast<size_t>(axis)];
      }
    }
  }
  for (const auto& [name, value] : options_.frozen_inputs) {
    if (!inputs.count(name) || initializer_values_.count(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("onnx: frozen_inputs names '", name, "', which is not a graph input"));
    }
  }
  for (const auto& [name, dims] : options_.input_shapes) {
    if (!inputs.count(name) || initializer_values_.count(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("onnx: input_shapes names '", name, "', which is not a graph input"));
    }
  }
  for (const auto& input : graph.input()) {
    if (initializer_values_.count(input.name())) continue;  // an initializer listed as input
    if (input.name().empty()) return absl::InvalidArgumentError("onnx: a graph input has no name");
    if (values_.count(input.name())) {
      return absl::InvalidArgumentError(
          absl::StrCat("onnx: graph input '", input.name(), "' is declared twice"));
    }
    absl::StatusOr<StructInfo> sinfo = InputStructInfo(input);
    if (!sinfo.ok()) return sinfo.status();
    if (auto frozen = options_.frozen_inputs.find(input.name());
        frozen != options_.frozen_inputs.end()) {
      if (absl::Status s = CheckFrozen(input.name(), *sinfo, frozen->second); !s.ok()) return s;
      values_[input.name()] = OnnxValue::Of(MakeConstant(frozen->second));
      continue;
    }
    Expr var = MakeVar(input.name(), *sinfo);
    params_.push_back(var);
    values_[input.name()] = OnnxValue::Of(var);
    if (!input.type().has_tensor_type()) {
      absl::StatusOr<std::optional<DynamicType>> dynamic =
          DynamicTypeOf(input.type(), "", &dim_vars_);
      values_[input.name()].dynamic = *dynamic;  // checked by InputStructInfo
    }
    result_.input_names.push_back(input.name());
  }
  return absl::OkStatus();
}

absl::Status GraphImporter::ConvertNode(const ::onnx::NodeProto& node,
                                        const std::set<std::string>& escaping) {
  NodeContext ctx(this, node, opset_);
  if (!node.domain().empty() && node.domain() != "ai.onnx") {
    return absl::UnimplementedError(
        absl::StrCat("onnx: ", ctx.Describe(), ": domain '", node.domain(), "' is not supported"));
  }
  if (absl::Status s = CheckInputsDefined(ctx); !s.ok()) return s;
  int since = 0;
  const Converter* converter = FindConverter(node.op_type(), opset_, &since);
  if (converter == nullptr) {
    if (since > 0) {
      return ctx.Unsupported(
          absl::StrCat("unsupported operator (supported from opset ", since, ")"));
    }
    return ctx.Unsupported("unsupported operator");
  }
  ConvertResult outs = (*converter)(ctx);
  if (!ctx.attr_error().ok()) return ctx.attr_error();
  if (!outs.ok()) return outs.status();
  if (static_cast<int>(outs->size()) > node.output_size()) {
    return absl::InternalError(absl::StrCat("onnx: ", ctx.Describe(), ": the converter returned ",
                                            outs->size(), " outputs for ", node.output_size()));
  }
  for (size_t k = 0; k < outs->size(); ++k) {
    OnnxValue& v = (*outs)[k];
    if (!v.expr.defined() && !v.known.has_value()) {
      return absl::InternalError(
          absl::StrCat("onnx: ", ctx.Describe(), ": the converter left output ", k, " empty"));
    }
    const std::string& name = node.output(static_cast<int>(k));
    if (name.empty()) continue;
    if (escaping.count(name) && v.expr.kind() == ExprKind::kDataflowVar) {
      absl::StatusOr<Expr> out = bb_.EmitOutput(v.expr, v.expr.as<VarNode>()->name_hint);
      if (!out.ok()) return out.status();
      v.expr = *out;
    }
    values_[name] = std::move(v);
  }
  return absl::OkStatus();
}

absl::StatusOr<ImportedModel> GraphImporter::Run() {
  if (!model_.has_graph()) return absl::InvalidArgumentError("onnx: the model has no graph");
  if (absl::Status s = ReadOpset(); !s.ok()) return s;
  result_.opset = opset_;
  if (absl::Status s = AddInitializers(); !s.ok()) return s;
  if (absl::Status s = AddInputs(); !s.ok()) return s;

  std::vector<BindingBlock> blocks;
  absl::StatusOr<std::vector<Expr>> outputs = ConvertGraph(model_.graph(), &blocks);
  if (!outputs.ok()) return outputs.status();
  if (outputs->empty()) return absl::InvalidArgumentError("onnx: the graph has no outputs");
  for (const auto& out : model_.graph().output()) result_.output_names.push_back(out.name());
  Expr body = outputs->size() == 1 ? (*outputs)[0] : MakeTuple(*outputs);

  std::vector<Expr> params = params_;
  params.insert(params.end(), kept_params_.begin(), kept_params_.end());
  Attrs attrs;
  attrs["global_symbol"] = std::string("main");
  attrs["num_input"] = static_cast<int64_t>(params_.size());
  module_.functions["main"] =
      MakeFunction(std::move(params), MakeSeqExpr(std::move(blocks), body), StructInfo(),
                   /*is_pure=*/true, std::move(attrs));
  absl::StatusOr<IRModule> normalized = NormalizeModule(std::move(module_));
  if (!normalized.ok()) {
    return absl::Status(
        normalized.status().code(),
        absl::StrCat("onnx: the imported module is malformed: ", normalized.status().message()));
  }
  result_.module = std::move(*normalized);
  return std::move(result_);
}

void RegisterConverter(std::string op_type, int since_opset, Converter fn) {
  auto& by_opset = MutableRegistry()[op_type];
  if (!by_opset.emplace(since_opset, std::move(fn)).second) {
    std::fprintf(stderr, "onnx: converter %s (since opset %d) registered twice\n", op_type.c_str(),
                 since_opset);
    std::abort();
  }
}

absl::StatusOr<ImportedModel> ImportOnnxBytes(absl::string_view bytes,
                                              const OnnxImportOptions& options,
                                              const std::string& base_dir) {
  ::onnx::ModelProto model;
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError(
        absl::StrCat("onnx: the ", bytes.size(), " bytes given are not a serialized ModelProto"));
  }
  GraphImporter importer(model, options, base_dir);
  return importer.Run();
}

absl::StatusOr<ImportedModel> ImportOnnxFile(const std::string& path,
                                             const OnnxImportOptions& options) {
  absl::StatusOr<std::string> read = ReadFileToString(path);
  if (!read.ok()) {
    return absl::Status(read.status().code(), absl::StrCat("onnx: cannot read model file '", path,
                                                           "': ", read.status().message()));
  }
  const std::string bytes = *std::move(read);
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  absl::StatusOr<ImportedModel> m =
      ImportOnnxBytes(bytes, options, dir.empty() ? std::string(".") : dir.string());
  if (!m.ok() && m.status().code() == absl::StatusCode::kInvalidArgument &&
      absl::StrContains(m.status().message(), "not a serialized ModelProto")) {
    return absl::InvalidArgumentError(
        absl::StrCat("onnx: '", path, "' (", bytes.size(), " bytes) is not an ONNX model"));
  }
  return m;
}

std::vector<std::string> SupportedOnnxOps() {
  std::vector<std::string> out;
  for (const auto& [op, by_opset] : GetRegistry()) out.push_back(op);
  for (const std::string& op : ControlFlowOps()) out.push_back(op);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace tether::compiler::onnx_frontend
