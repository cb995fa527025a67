// ConstantFolding: compile-time evaluation of calls on constants through
// the host JIT.
#include "compiler/transform/constant_fold.h"

#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "compiler/backend/llvm/jit.h"
#include "compiler/lower/lower.h"
#include "compiler/op/op.h"
#include "compiler/transform/relax_rewrite.h"
#include "runtime/core/error.h"

namespace tether::compiler {
namespace {

bool IsLiteral(const Expr& e) {
  switch (e.kind()) {
    case ExprKind::kConstant:
    case ExprKind::kShapeExpr:
    case ExprKind::kPrimValue:
    case ExprKind::kStringImm:
    case ExprKind::kDataTypeImm:
      return true;
    default:
      return false;
  }
}

bool IsConstPrim(const PrimExpr& e) {
  return e.kind() == PrimKind::kIntImm || e.kind() == PrimKind::kFloatImm;
}

class Folder {
 public:
  explicit Folder(const ConstantFoldingOptions& options) : options_(options) {}

  absl::StatusOr<Expr> Run(const Expr& body) {
    const auto* seq = body.as<SeqExprNode>();
    std::vector<BindingBlock> blocks;
    bool changed = false;
    for (const BindingBlock& block : seq->blocks) {
      BindingBlock out = block;
      for (Binding& b : out.bindings) {
        if (b.is_match_cast()) continue;
        Expr folded = Fold(b.value);
        if (!folded.same_as(b.value)) {
          changed = true;
          b.value = folded;
        }
        if (IsLiteral(b.value) || b.value.kind() == ExprKind::kTuple) {
          known_[b.var.as<VarNode>()] = b.value;
        }
      }
      blocks.push_back(std::move(out));
    }
    if (!changed) return body;
    return MakeSeqExprOf(std::move(blocks), seq->body);
  }

 private:
  // The literal (or literal tuple) behind `e`, else `e`.
  Expr Resolve(const Expr& e) const {
    if (const auto* v = e.as<VarNode>()) {
      auto it = known_.find(v);
      if (it != known_.end()) return it->second;
    }
    return e;
  }

  Expr Fold(const Expr& value) {
    if (const auto* item = value.as<TupleGetItemNode>()) {
      const auto* tuple = Resolve(item->tuple).as<TupleNode>();
      if (tuple != nullptr && item->index >= 0 &&
          item->index < static_cast<int>(tuple->fields.size())) {
        Expr field = Resolve(tuple->fields[item->index]);
        if (IsLiteral(field)) return field;
      }
      return value;
    }
    const absl::string_view op = CalledOpName(value);
    if (op.empty()) return value;
    const auto* call = value.as<CallNode>();
    if (op == "relax.shape_of" && call->args.size() == 1) {
      auto dims = StaticShape(call->args[0].struct_info());
      if (!dims.has_value()) return value;
      std::vector<PrimExpr> values(dims->begin(), dims->end());
      return MakeShapeExpr(std::move(values));
    }
    const OpInfo* info = FindOp(op);
    if (info == nullptr || !info->lowers_to_kernel()) return value;
    return Evaluate(value, *call);
  }

  // The call run on its constant arguments, or `value` when it cannot be.
  Expr Evaluate(const Expr& value, const CallNode& call) {
    auto bytes = StaticBytes(value.struct_info());
    if (!bytes.has_value() || *bytes > options_.max_result_bytes) return value;
    std::vector<Expr> args;
    std::vector<Value> tensors;
    for (const Expr& arg : call.args) {
      Expr a = Resolve(arg);
      if (a.struct_info().as<TensorStructInfoNode>() != nullptr) {
        const auto* c = a.as<ConstantNode>();
        if (c == nullptr) return value;
        tensors.push_back(c->data);
      } else if (const auto* s = a.as<ShapeExprNode>()) {
        for (const PrimExpr& d : s->values) {
          if (!IsConstPrim(d)) return value;
        }
      } else if (const auto* p = a.as<PrimValueNode>()) {
        if (!IsConstPrim(p->value)) return value;
      } else if (a.kind() != ExprKind::kStringImm && a.kind() != ExprKind::kDataTypeImm) {
        return value;  // tuples of tensors, variables of other kinds
      }
      args.push_back(std::move(a));
    }
    Expr resolved = MakeCall(call.op, std::move(args), call.attrs, call.sinfo_args);
    resolved->set_struct_info(value.struct_info());
    absl::StatusOr<KernelFunc> kernel = LowerCallToKernel(*resolved.as<CallNode>(), "folded_call");
    if (!kernel.ok() || (*kernel)->params.size() != tensors.size() + 1) return value;
    absl::StatusOr<Ref<Module>> lib = BuildAndLoad({*kernel});
    if (!lib.ok()) return value;
    absl::StatusOr<Function> fn = (*lib)->GetFunction("folded_call");
    if (!fn.ok()) return value;
    const auto* t = value.struct_info().as<TensorStructInfoNode>();
    absl::StatusOr<Tensor> out =
        Tensor::Empty(*StaticShape(value.struct_info()), *t->dtype, Device::Cpu());
    if (!out.ok()) return value;
    tensors.push_back(*out);
    if (!(*fn)(ArgSpan(tensors.data(), tensors.size())).ok()) return value;
    return MakeConstant(*out);
  }

  const ConstantFoldingOptions& options_;
  absl::flat_hash_map<const VarNode*, Expr> known_;
};

}  // namespace

absl::StatusOr<IRModule> ConstantFolding(IRModule module, const ConstantFoldingOptions& options) {
  return RewriteFunctionBodies(
      std::move(module),
      [&](const std::string&, const Expr& body, IRModule*) -> absl::StatusOr<Expr> {
        Folder folder(options);
        return folder.Run(body);
      });
}

}  // namespace tether::compiler
