// PackConstantWeights (pack_weights.h).
#include "compiler/transform/pack_weights.h"

#include <cstring>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "compiler/op/conv2d.h"
#include "compiler/op/cpu_gemm.h"
#include "compiler/op/op.h"
#include "compiler/transform/relax_rewrite.h"

namespace tether::compiler {
namespace {

// The constant behind `e` (itself, or a variable bound to one), else null.
const ConstantNode* ConstantOf(const Expr& e,
                               const absl::flat_hash_map<const VarNode*, Expr>& bound) {
  if (const auto* c = e.as<ConstantNode>()) return c;
  if (const auto* v = e.as<VarNode>()) {
    auto it = bound.find(v);
    if (it != bound.end()) return it->second.as<ConstantNode>();
  }
  return nullptr;
}

// relax.nn.conv2d(x, w) as relax.nn.conv2d_packed where w is a constant
// and the convolution runs the wide schedule (which would pack w on every
// call), else `value`.
Expr PackedConv(const Expr& value, const absl::flat_hash_map<const VarNode*, Expr>& bound) {
  const auto* call = value.as<CallNode>();
  if (call->args.size() != 2) return value;
  const ConstantNode* w = ConstantOf(call->args[1], bound);
  if (w == nullptr || !w->data->dtype().is_float() || !Conv2dPacksWeights(*call)) return value;
  absl::StatusOr<Tensor> blocks = PackConv2dWeights(w->data, GetIntAttr(call->attrs, "groups", 1));
  if (!blocks.ok()) return value;
  Attrs attrs = call->attrs;
  attrs["out_channels"] = w->data->shape()[0];
  Expr packed = MakeCall(GetOp("relax.nn.conv2d_packed"), {call->args[0], MakeConstant(*blocks)},
                         std::move(attrs));
  packed->set_struct_info(value.struct_info());
  return packed;
}

// relax.matmul(a, w) as relax.matmul_packed, or `value` where w is not a
// constant float matrix or the product is not a plain one.
Expr Packed(const Expr& value, const absl::flat_hash_map<const VarNode*, Expr>& bound) {
  if (CalledOpName(value) == "relax.nn.conv2d") return PackedConv(value, bound);
  if (CalledOpName(value) != "relax.matmul") return value;
  const auto* call = value.as<CallNode>();
  if (call->args.size() != 2 || call->attrs.count("out_dtype")) return value;
  const ConstantNode* w = ConstantOf(call->args[1], bound);
  const auto* a = call->args[0].struct_info().as<TensorStructInfoNode>();
  if (w == nullptr || a == nullptr || a->ndim < 1 || !a->shape.has_value() ||
      a->shape->back().as_int() == nullptr) {
    return value;
  }
  // A weight with leading unit dims ([1, K, N], a recurrent layer's R^T)
  // is its [K, N] matrix when A has at least as many dims (the output's
  // batch dims are then A's).
  Tensor wt = w->data;
  if (wt->ndim() < 2 || wt->ndim() > a->ndim || !wt->dtype().is_float() ||
      a->dtype != wt->dtype()) {
    return value;
  }
  for (int i = 0; i + 2 < wt->ndim(); ++i) {
    if (wt->shape()[i] != 1) return value;
  }
  if (wt->ndim() > 2) {
    const int64_t kn[] = {wt->shape()[wt->ndim() - 2], wt->shape()[wt->ndim() - 1]};
    absl::StatusOr<Tensor> view = wt.CreateView(kn, wt->dtype());
    if (!view.ok()) return value;
    wt = *view;
  }
  absl::StatusOr<Tensor> panels = PackGemmPanels(wt);
  if (!panels.ok()) return value;
  Expr packed = MakeCall(GetOp("relax.matmul_packed"), {call->args[0], MakeConstant(*panels)},
                         {{"n", wt->shape()[1]}});
  packed->set_struct_info(value.struct_info());
  return packed;
}

bool IsOne(const PrimExpr& e) {
  const int64_t* v = e.as_int();
  return v != nullptr && *v == 1;
}

// conv2d(x, w) of a 1x1 constant weight on 1x1 images (a squeeze-excite
// block's convolutions, a classifier head written as a convolution): a
// matrix-vector product per image, which the convolution schedules run with
// the weight repacked on every call. As bindings: x viewed as [n, c], the
// packed product with w^T, viewed back as [n, o, 1, 1] (on 1x1 images the
// views move no data). Empty where the call is not one.
std::vector<Binding> PointwiseAsProduct(const Binding& b,
                                        const absl::flat_hash_map<const VarNode*, Expr>& bound,
                                        bool dataflow) {
  if (CalledOpName(b.value) != "relax.nn.conv2d") return {};
  const auto* call = b.value.as<CallNode>();
  if (call->args.size() != 2 || !Conv2dIsPlainProduct(call->attrs)) return {};
  const ConstantNode* w = ConstantOf(call->args[1], bound);
  const auto* x = call->args[0].struct_info().as<TensorStructInfoNode>();
  if (w == nullptr || x == nullptr || !x->shape.has_value() || x->shape->size() != 4) return {};
  const Tensor& wt = w->data;
  if (wt->ndim() != 4 || wt->shape()[2] != 1 || wt->shape()[3] != 1) return {};
  if (!wt->dtype().is_float() || x->dtype != wt->dtype()) return {};
  const int64_t *n = (*x->shape)[0].as_int(), *c = (*x->shape)[1].as_int();
  if (!n || !c || !IsOne((*x->shape)[2]) || !IsOne((*x->shape)[3])) return {};
  const int64_t o = wt->shape()[0];
  if (wt->shape()[1] != *c) return {};
  // w^T as [c, o], then its panels.
  const int64_t shape[] = {*c, o};
  absl::StatusOr<Tensor> wtt = Tensor::Empty(shape, wt->dtype(), Device::Cpu());
  if (!wtt.ok()) return {};
  const size_t elem = (wt->dtype().bits() + 7) / 8;
  const char* src = static_cast<const char*>(wt->element_data());
  char* dst = static_cast<char*>((*wtt)->element_data());
  for (int64_t i = 0; i < o; ++i) {
    for (int64_t j = 0; j < *c; ++j) {
      std::memcpy(dst + static_cast<size_t>(j * o + i) * elem,
                  src + static_cast<size_t>(i * *c + j) * elem, elem);
    }
  }
  absl::StatusOr<Tensor> panels = PackGemmPanels(*wtt);
  if (!panels.ok()) return {};
  auto var = [&](const std::string& name, StructInfo sinfo) {
    return dataflow ? MakeDataflowVar(name, std::move(sinfo)) : MakeVar(name, std::move(sinfo));
  };
  auto bind = [&](Expr v, Expr value, StructInfo sinfo) {
    value->set_struct_info(sinfo);
    return Binding{std::move(v), std::move(value), StructInfo(), b.span};
  };
  const DataType dtype = wt->dtype();
  StructInfo flat_si = TensorSInfo({PrimExpr(*n), PrimExpr(*c)}, dtype);
  StructInfo prod_si = TensorSInfo({PrimExpr(*n), PrimExpr(o)}, dtype);
  Expr flat = var("pointwise_in", flat_si);
  Expr prod = var("pointwise_out", prod_si);
  std::vector<Binding> out;
  out.push_back(bind(flat,
                     MakeCall(GetOp("relax.reshape"),
                              {call->args[0], MakeShapeExpr({PrimExpr(*n), PrimExpr(*c)})}),
                     flat_si));
  out.push_back(
      bind(prod, MakeCall(GetOp("relax.matmul_packed"), {flat, MakeConstant(*panels)}, {{"n", o}}),
           prod_si));
  out.push_back(
      bind(b.var,
           MakeCall(GetOp("relax.reshape"),
                    {prod, MakeShapeExpr({PrimExpr(*n), PrimExpr(o), PrimExpr(1), PrimExpr(1)})}),
           b.value.struct_info()));
  return out;
}

}  // namespace

absl::StatusOr<IRModule> PackConstantWeights(IRModule module) {
  return RewriteFunctionBodies(
      std::move(module),
      [](const std::string&, const Expr& body, IRModule*) -> absl::StatusOr<Expr> {
        const auto* seq = body.as<SeqExprNode>();
        absl::flat_hash_map<const VarNode*, Expr> bound;
        std::vector<BindingBlock> blocks = seq->blocks;
        bool changed = false;
        for (BindingBlock& block : blocks) {
          std::vector<Binding> bindings;
          for (Binding& b : block.bindings) {
            if (b.is_match_cast()) {
              bindings.push_back(std::move(b));
              continue;
            }
            if (b.value.kind() == ExprKind::kConstant) bound[b.var.as<VarNode>()] = b.value;
            if (std::vector<Binding> product = PointwiseAsProduct(b, bound, block.is_dataflow);
                !product.empty()) {
              for (Binding& p : product) bindings.push_back(std::move(p));
              changed = true;
              continue;
            }
            Expr packed = Packed(b.value, bound);
            if (!packed.same_as(b.value)) {
              b.value = std::move(packed);
              changed = true;
            }
            bindings.push_back(std::move(b));
          }
          block.bindings = std::move(bindings);
        }
        if (!changed) return body;
        return MakeSeqExprOf(std::move(blocks), seq->body);
      });
}

}  // namespace tether::compiler
