// Variable uses, substitution and function rebuilding for the Relax passes.
#include "compiler/transform/relax_rewrite.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "compiler/tir/arith.h"

namespace tether::compiler {
namespace {

void VisitUses(const Expr& e, const std::function<void(const VarNode*)>& fn) {
  if (!e.defined()) return;
  switch (e.kind()) {
    case ExprKind::kVar:
    case ExprKind::kDataflowVar:
      fn(e.as<VarNode>());
      return;
    case ExprKind::kTuple:
      for (const Expr& f : e.as<TupleNode>()->fields) VisitUses(f, fn);
      return;
    case ExprKind::kTupleGetItem:
      VisitUses(e.as<TupleGetItemNode>()->tuple, fn);
      return;
    case ExprKind::kCall: {
      const auto* call = e.as<CallNode>();
      VisitUses(call->op, fn);
      for (const Expr& a : call->args) VisitUses(a, fn);
      return;
    }
    case ExprKind::kIf: {
      const auto* node = e.as<IfNode>();
      VisitUses(node->cond, fn);
      VisitUses(node->true_branch, fn);
      VisitUses(node->false_branch, fn);
      return;
    }
    case ExprKind::kSeqExpr: {
      const auto* seq = e.as<SeqExprNode>();
      for (const BindingBlock& block : seq->blocks) {
        for (const Binding& b : block.bindings) VisitUses(b.value, fn);
      }
      VisitUses(seq->body, fn);
      return;
    }
    case ExprKind::kFunction:
      VisitUses(e.as<FunctionNode>()->body, fn);
      return;
    default:
      return;  // leaves: constants, literals, ops, global and extern functions
  }
}

// Keeps `old`'s struct info and span on a rebuilt node.
Expr Inherit(const Expr& old, Expr fresh) {
  if (old.struct_info().defined() && !fresh.struct_info().defined()) {
    fresh->set_struct_info(old.struct_info());
  }
  if (old->span.known()) WithSpan(fresh, old->span);
  return fresh;
}

bool SamePrim(const PrimExpr& a, const PrimExpr& b) {
  if (a.same_as(b)) return true;
  if (!a.defined() || !b.defined() || a.kind() != b.kind() || !(a.dtype() == b.dtype())) {
    return false;
  }
  if (const int64_t* x = a.as_int()) return *x == *b.as_int();
  if (const auto* f = a.as<FloatImmNode>()) return f->value == b.as<FloatImmNode>()->value;
  if (const auto* x = a.as<BinaryNode>()) {
    const auto* y = b.as<BinaryNode>();
    return SamePrim(x->a, y->a) && SamePrim(x->b, y->b);
  }
  if (const auto* x = a.as<CastNode>()) return SamePrim(x->value, b.as<CastNode>()->value);
  return false;  // vars are equal only as the same node
}

}  // namespace

void ForEachVarUse(const Expr& e, const std::function<void(const VarNode*)>& fn) {
  VisitUses(e, fn);
}

absl::flat_hash_map<const VarNode*, int> CountVarUses(const Expr& e) {
  absl::flat_hash_map<const VarNode*, int> counts;
  VisitUses(e, [&](const VarNode* v) { ++counts[v]; });
  return counts;
}

Expr SubstituteVars(const Expr& e, const VarSubstitution& map) {
  if (!e.defined() || map.empty()) return e;
  switch (e.kind()) {
    case ExprKind::kVar:
    case ExprKind::kDataflowVar: {
      auto it = map.find(e.as<VarNode>());
      return it == map.end() ? e : it->second;
    }
    case ExprKind::kTuple: {
      const auto* t = e.as<TupleNode>();
      std::vector<Expr> fields;
      bool changed = false;
      for (const Expr& f : t->fields) {
        fields.push_back(SubstituteVars(f, map));
        changed |= !fields.back().same_as(f);
      }
      if (!changed) return e;
      return Inherit(e, MakeTuple(std::move(fields)));
    }
    case ExprKind::kTupleGetItem: {
      const auto* g = e.as<TupleGetItemNode>();
      Expr tuple = SubstituteVars(g->tuple, map);
      if (tuple.same_as(g->tuple)) return e;
      return Inherit(e, MakeTupleGetItem(std::move(tuple), g->index));
    }
    case ExprKind::kCall: {
      const auto* call = e.as<CallNode>();
      std::vector<Expr> args;
      Expr op = SubstituteVars(call->op, map);
      bool changed = !op.same_as(call->op);
      for (const Expr& a : call->args) {
        args.push_back(SubstituteVars(a, map));
        changed |= !args.back().same_as(a);
      }
      if (!changed) return e;
      return Inherit(e, MakeCall(std::move(op), std::move(args), call->attrs, call->sinfo_args));
    }
    case ExprKind::kIf: {
      const auto* node = e.as<IfNode>();
      Expr c = SubstituteVars(node->cond, map);
      Expr t = SubstituteVars(node->true_branch, map);
      Expr f = SubstituteVars(node->false_branch, map);
      if (c.same_as(node->cond) && t.same_as(node->true_branch) && f.same_as(node->false_branch)) {
        return e;
      }
      return Inherit(e, MakeIf(std::move(c), std::move(t), std::move(f)));
    }
    case ExprKind::kSeqExpr: {
      const auto* seq = e.as<SeqExprNode>();
      std::vector<BindingBlock> blocks = seq->blocks;
      bool changed = false;
      for (BindingBlock& block : blocks) {
        for (Binding& b : block.bindings) {
          Expr v = SubstituteVars(b.value, map);
          changed |= !v.same_as(b.value);
          b.value = std::move(v);
        }
      }
      Expr body = SubstituteVars(seq->body, map);
      changed |= !body.same_as(seq->body);
      if (!changed) return e;
      return Inherit(e, MakeSeqExpr(std::move(blocks), std::move(body)));
    }
    case ExprKind::kFunction: {
      Expr body = SubstituteVars(e.as<FunctionNode>()->body, map);
      if (body.same_as(e.as<FunctionNode>()->body)) return e;
      return WithFunctionBody(e, std::move(body));
    }
    default:
      return e;
  }
}

Expr MakeCallTIR(const std::string& kernel_name, const KernelFunc& kernel,
                 std::vector<Expr> tensors, const StructInfo& out_sinfo) {
  Expr gv = MakeGlobalVar(kernel_name);
  gv->set_struct_info(OpaqueFuncSInfo());
  std::vector<Expr> args = {gv, MakeTuple(std::move(tensors))};
  std::vector<PrimExpr> tir_vars;
  for (const KernelParam& p : kernel->params) {
    if (!p.is_tensor()) tir_vars.push_back(p.var);
  }
  if (!tir_vars.empty()) args.push_back(MakeShapeExpr(std::move(tir_vars)));
  Expr call = MakeCall(GetOp("relax.call_tir"), std::move(args), {}, {out_sinfo});
  call->set_struct_info(out_sinfo);
  return call;
}

Expr MakeSeqExprOf(std::vector<BindingBlock> blocks, Expr body) {
  StructInfo sinfo = body.struct_info();
  Expr seq = MakeSeqExpr(std::move(blocks), std::move(body));
  if (sinfo.defined()) seq->set_struct_info(std::move(sinfo));
  return seq;
}

Expr WithFunctionBody(const Expr& func, Expr body) {
  const auto* f = func.as<FunctionNode>();
  Expr out = MakeFunction(f->params, std::move(body), f->ret_struct_info, f->is_pure, f->attrs);
  if (func->span.known()) WithSpan(out, func->span);
  return out;
}

absl::StatusOr<IRModule> RewriteFunctionBodies(
    IRModule module,
    const std::function<absl::StatusOr<Expr>(const std::string& name, const Expr& body,
                                             IRModule* module)>& rewrite) {
  // Iterate over a snapshot of the names: `rewrite` may add kernels (never functions).
  std::vector<std::string> names;
  for (const auto& [name, fn] : module.functions) names.push_back(name);
  for (const std::string& name : names) {
    Expr fn = module.functions[name];
    const auto* f = fn.as<FunctionNode>();
    if (f == nullptr) continue;
    if (f->body.as<SeqExprNode>() == nullptr) {
      return absl::InvalidArgumentError("function " + name +
                                        " is not normalized: its body is not a SeqExpr");
    }
    absl::StatusOr<Expr> body = rewrite(name, f->body, &module);
    if (!body.ok()) return body.status();
    if (!body->same_as(f->body)) module.functions[name] = WithFunctionBody(fn, *std::move(body));
  }
  return module;
}

std::optional<std::vector<int64_t>> StaticShape(const StructInfo& sinfo) {
  const auto* t = sinfo.as<TensorStructInfoNode>();
  if (t == nullptr || !t->shape.has_value()) return std::nullopt;
  std::vector<int64_t> dims;
  for (const PrimExpr& d : *t->shape) {
    const int64_t* v = d.as_int();
    if (v == nullptr || *v < 0) return std::nullopt;
    dims.push_back(*v);
  }
  return dims;
}

std::optional<int64_t> StaticBytes(const StructInfo& sinfo) {
  auto dims = StaticShape(sinfo);
  const auto* t = sinfo.as<TensorStructInfoNode>();
  if (!dims.has_value() || !t->dtype.has_value()) return std::nullopt;
  int64_t n = 1;
  for (int64_t d : *dims) n *= d;
  return n * t->dtype->bytes();
}

std::string ShortOpName(absl::string_view op_name) {
  std::vector<absl::string_view> parts = absl::StrSplit(op_name, '.');
  return std::string(parts.back());
}

absl::string_view CalledOpName(const Expr& e) {
  const auto* call = e.as<CallNode>();
  if (call == nullptr) return "";
  const auto* op = call->op.as<OpNode>();
  return op == nullptr ? absl::string_view() : absl::string_view(op->name);
}

bool SameShape(const std::vector<PrimExpr>& a, const std::vector<PrimExpr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!SamePrim(a[i], b[i]) && !ProveEqual(a[i], b[i])) return false;
  }
  return true;
}

}  // namespace tether::compiler
