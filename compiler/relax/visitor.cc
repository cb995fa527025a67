// Default traversals of ExprVisitor and ExprMutator.
#include "compiler/relax/visitor.h"

#include "compiler/relax/block_builder.h"
#include "compiler/relax/structural_equal.h"

namespace tether::compiler {

void ExprVisitor::VisitPrimValue(const Expr& e) { VisitPrimExpr(e.as<PrimValueNode>()->value); }

void ExprVisitor::VisitShapeExpr(const Expr& e) {
  for (const PrimExpr& v : e.as<ShapeExprNode>()->values) VisitPrimExpr(v);
}

void ExprVisitor::VisitTuple(const Expr& e) {
  for (const Expr& f : e.as<TupleNode>()->fields) VisitExpr(f);
}

void ExprVisitor::VisitTupleGetItem(const Expr& e) { VisitExpr(e.as<TupleGetItemNode>()->tuple); }

void ExprVisitor::VisitCall(const Expr& e) {
  const auto* c = e.as<CallNode>();
  VisitExpr(c->op);
  for (const Expr& a : c->args) VisitExpr(a);
  for (const StructInfo& s : c->sinfo_args) VisitStructInfo(s);
}

void ExprVisitor::VisitIf(const Expr& e) {
  const auto* i = e.as<IfNode>();
  VisitExpr(i->cond);
  VisitExpr(i->true_branch);
  VisitExpr(i->false_branch);
}

void ExprVisitor::VisitSeqExpr(const Expr& e) {
  const auto* s = e.as<SeqExprNode>();
  for (const BindingBlock& b : s->blocks) VisitBindingBlock(b);
  VisitExpr(s->body);
}

void ExprVisitor::VisitFunction(const Expr& e) {
  const auto* f = e.as<FunctionNode>();
  for (const Expr& p : f->params) VisitVarDef(p);
  VisitExpr(f->body);
  if (f->ret_struct_info.defined()) VisitStructInfo(f->ret_struct_info);
}

void ExprVisitor::VisitBindingBlock(const BindingBlock& block) {
  for (const Binding& b : block.bindings) VisitBinding(b);
}

void ExprVisitor::VisitBinding(const Binding& binding) {
  VisitExpr(binding.value);
  if (binding.is_match_cast()) VisitStructInfo(binding.match_cast);
  VisitVarDef(binding.var);
}

void ExprVisitor::VisitStructInfo(const StructInfo& sinfo) {
  if (!sinfo.defined()) return;
  switch (sinfo.kind()) {
    case StructInfoKind::kObject:
      return;
    case StructInfoKind::kPrim:
      if (sinfo.as<PrimStructInfoNode>()->value.defined()) {
        VisitPrimExpr(sinfo.as<PrimStructInfoNode>()->value);
      }
      return;
    case StructInfoKind::kShape:
      if (const auto& v = sinfo.as<ShapeStructInfoNode>()->values) {
        for (const PrimExpr& d : *v) VisitPrimExpr(d);
      }
      return;
    case StructInfoKind::kTensor:
      if (const auto& s = sinfo.as<TensorStructInfoNode>()->shape) {
        for (const PrimExpr& d : *s) VisitPrimExpr(d);
      }
      return;
    case StructInfoKind::kTuple:
      for (const StructInfo& f : sinfo.as<TupleStructInfoNode>()->fields) VisitStructInfo(f);
      return;
    case StructInfoKind::kFunc: {
      const auto* f = sinfo.as<FuncStructInfoNode>();
      if (f->params) {
        for (const StructInfo& p : *f->params) VisitStructInfo(p);
      }
      VisitStructInfo(f->ret);
      return;
    }
  }
}

ExprMutator::ExprMutator() = default;
ExprMutator::~ExprMutator() = default;

BlockBuilder* ExprMutator::builder() {
  if (builder_ == nullptr) builder_ = std::make_unique<BlockBuilder>();
  return builder_.get();
}

absl::StatusOr<Expr> ExprMutator::VisitExprPostOrder(const Expr& e) {
  // A rebuilt node gets its struct info from normalization, not from the
  // node it replaces (whose children may have changed type).
  const bool keep = keep_struct_info_;
  keep_struct_info_ = false;
  Expr r;
  switch (e.kind()) {
    case ExprKind::kVar:
    case ExprKind::kDataflowVar:
      r = ExprMutator::VisitVar(e);
      break;
    case ExprKind::kPrimValue:
      r = ExprMutator::VisitPrimValue(e);
      break;
    case ExprKind::kShapeExpr:
      r = ExprMutator::VisitShapeExpr(e);
      break;
    case ExprKind::kTuple:
      r = ExprMutator::VisitTuple(e);
      break;
    case ExprKind::kTupleGetItem:
      r = ExprMutator::VisitTupleGetItem(e);
      break;
    case ExprKind::kCall:
      r = ExprMutator::VisitCall(e);
      break;
    case ExprKind::kIf:
      r = ExprMutator::VisitIf(e);
      break;
    case ExprKind::kSeqExpr:
      r = ExprMutator::VisitSeqExpr(e);
      break;
    case ExprKind::kFunction:
      r = ExprMutator::VisitFunction(e);
      break;
    default:
      r = e;  // leaves: constants, strings, dtypes, globals, ops, externs
      break;
  }
  keep_struct_info_ = keep;
  return builder()->Normalize(r);
}

Expr ExprMutator::WithStructInfo(const Expr& e, const StructInfo& sinfo) {
  if (e.struct_info().defined() && StructuralEqual(e.struct_info(), sinfo)) return e;
  if (const auto* v = e.as<VarNode>()) {
    Expr fresh = e.kind() == ExprKind::kDataflowVar ? MakeDataflowVar(v->name_hint, sinfo)
                                                    : MakeVar(v->name_hint, sinfo);
    const_cast<ExprNode*>(fresh.get())->span = e->span;
    var_remap_[e.get()] = fresh;
    return fresh;
  }
  Expr copy = WithSpan(e, e->span);
  const_cast<ExprNode*>(copy.get())->set_struct_info(sinfo);
  return copy;
}

Expr ExprMutator::Finish(const Expr& old, Expr fresh) const {
  if (fresh.same_as(old)) return fresh;
  // `fresh` was just built here and is not shared yet.
  auto* node = const_cast<ExprNode*>(fresh.get());
  node->span = old->span;
  if (keep_struct_info_ && old.struct_info().defined() && !fresh.struct_info().defined()) {
    node->set_struct_info(old.struct_info());
  }
  return fresh;
}

Expr ExprMutator::VisitVar(const Expr& var) {
  auto it = var_remap_.find(var.get());
  return it == var_remap_.end() ? var : it->second;
}

Expr ExprMutator::VisitPrimValue(const Expr& e) {
  const PrimExpr& v = e.as<PrimValueNode>()->value;
  PrimExpr nv = VisitPrimExpr(v);
  if (nv.same_as(v)) return e;
  Expr fresh = MakePrimValue(nv);
  const_cast<ExprNode*>(fresh.get())->span = e->span;
  return fresh;
}

Expr ExprMutator::VisitShapeExpr(const Expr& e) {
  const auto* s = e.as<ShapeExprNode>();
  std::vector<PrimExpr> values;
  bool changed = false;
  for (const PrimExpr& v : s->values) {
    values.push_back(VisitPrimExpr(v));
    changed |= !values.back().same_as(v);
  }
  if (!changed) return e;
  Expr fresh = MakeShapeExpr(std::move(values));
  const_cast<ExprNode*>(fresh.get())->span = e->span;
  return fresh;
}

Expr ExprMutator::VisitTuple(const Expr& e) {
  const auto* t = e.as<TupleNode>();
  std::vector<Expr> fields;
  bool changed = false;
  for (const Expr& f : t->fields) {
    fields.push_back(VisitExpr(f));
    changed |= !fields.back().same_as(f);
  }
  if (!changed) return e;
  Expr fresh = MakeTuple(std::move(fields));
  const_cast<ExprNode*>(fresh.get())->span = e->span;
  return fresh;
}

Expr ExprMutator::VisitTupleGetItem(const Expr& e) {
  const auto* t = e.as<TupleGetItemNode>();
  Expr tuple = VisitExpr(t->tuple);
  if (tuple.same_as(t->tuple)) return e;
  return Finish(e, MakeTupleGetItem(tuple, t->index));
}

Expr ExprMutator::VisitCall(const Expr& e) {
  const auto* c = e.as<CallNode>();
  Expr op = VisitExpr(c->op);
  bool changed = !op.same_as(c->op);
  std::vector<Expr> args;
  for (const Expr& a : c->args) {
    args.push_back(VisitExpr(a));
    changed |= !args.back().same_as(a);
  }
  std::vector<StructInfo> sinfo_args;
  for (const StructInfo& s : c->sinfo_args) {
    sinfo_args.push_back(VisitStructInfo(s));
    changed |= !sinfo_args.back().same_as(s);
  }
  if (!changed) return e;
  return Finish(e, MakeCall(op, std::move(args), c->attrs, std::move(sinfo_args)));
}

Expr ExprMutator::VisitIf(const Expr& e) {
  const auto* i = e.as<IfNode>();
  Expr cond = VisitExpr(i->cond);
  Expr t = VisitExpr(i->true_branch);
  Expr f = VisitExpr(i->false_branch);
  if (cond.same_as(i->cond) && t.same_as(i->true_branch) && f.same_as(i->false_branch)) return e;
  return Finish(e, MakeIf(cond, t, f));
}

Expr ExprMutator::VisitSeqExpr(const Expr& e) {
  const auto* s = e.as<SeqExprNode>();
  std::vector<BindingBlock> blocks;
  bool changed = false;
  for (const BindingBlock& b : s->blocks) {
    blocks.push_back(VisitBindingBlock(b));
    const BindingBlock& nb = blocks.back();
    if (nb.bindings.size() != b.bindings.size()) {
      changed = true;
      continue;
    }
    for (size_t i = 0; i < nb.bindings.size(); ++i) {
      const Binding& x = nb.bindings[i];
      const Binding& y = b.bindings[i];
      if (!x.var.same_as(y.var) || !x.value.same_as(y.value) ||
          !x.match_cast.same_as(y.match_cast)) {
        changed = true;
      }
    }
  }
  Expr body = VisitExpr(s->body);
  changed |= !body.same_as(s->body);
  if (!changed) return e;
  // Empty blocks left by removed bindings are dropped.
  std::vector<BindingBlock> kept;
  for (BindingBlock& b : blocks) {
    if (!b.bindings.empty()) kept.push_back(std::move(b));
  }
  return Finish(e, MakeSeqExpr(std::move(kept), body));
}

Expr ExprMutator::VisitFunction(const Expr& e) {
  const auto* f = e.as<FunctionNode>();
  std::vector<Expr> params;
  bool changed = false;
  for (const Expr& p : f->params) {
    params.push_back(VisitVarDef(p));
    changed |= !params.back().same_as(p);
  }
  Expr body = VisitExpr(f->body);
  changed |= !body.same_as(f->body);
  StructInfo ret =
      f->ret_struct_info.defined() ? VisitStructInfo(f->ret_struct_info) : f->ret_struct_info;
  changed |= !ret.same_as(f->ret_struct_info);
  if (!changed) return e;
  Expr fresh = MakeFunction(std::move(params), body, ret, f->is_pure, f->attrs);
  const_cast<ExprNode*>(fresh.get())->span = e->span;
  return fresh;
}

BindingBlock ExprMutator::VisitBindingBlock(const BindingBlock& block) {
  BindingBlock out;
  out.is_dataflow = block.is_dataflow;
  for (const Binding& b : block.bindings) VisitBinding(b, &out.bindings);
  return out;
}

void ExprMutator::VisitBinding(const Binding& binding, std::vector<Binding>* out) {
  Binding b = binding;
  b.value = VisitExpr(binding.value);
  if (binding.is_match_cast()) b.match_cast = VisitStructInfo(binding.match_cast);
  b.var = VisitVarDef(binding.var);
  out->push_back(std::move(b));
}

Expr ExprMutator::VisitVarDef(const Expr& var) {
  const StructInfo& s = var.struct_info();
  if (!s.defined()) return var;
  StructInfo ns = VisitStructInfo(s);
  if (ns.same_as(s)) return var;
  const auto* v = var.as<VarNode>();
  Expr fresh = var.kind() == ExprKind::kDataflowVar ? MakeDataflowVar(v->name_hint, ns)
                                                    : MakeVar(v->name_hint, ns);
  const_cast<ExprNode*>(fresh.get())->span = var->span;
  var_remap_[var.get()] = fresh;
  return fresh;
}

StructInfo ExprMutator::VisitStructInfo(const StructInfo& sinfo) {
  if (!sinfo.defined()) return sinfo;
  auto dims = [&](const std::vector<PrimExpr>& in, std::vector<PrimExpr>* out) {
    bool changed = false;
    for (const PrimExpr& d : in) {
      out->push_back(VisitPrimExpr(d));
      changed |= !out->back().same_as(d);
    }
    return changed;
  };
  switch (sinfo.kind()) {
    case StructInfoKind::kObject:
      return sinfo;
    case StructInfoKind::kPrim: {
      const auto* p = sinfo.as<PrimStructInfoNode>();
      if (!p->value.defined()) return sinfo;
      PrimExpr v = VisitPrimExpr(p->value);
      return v.same_as(p->value) ? sinfo : PrimSInfo(p->dtype, v);
    }
    case StructInfoKind::kShape: {
      const auto* s = sinfo.as<ShapeStructInfoNode>();
      if (!s->values) return sinfo;
      std::vector<PrimExpr> v;
      return dims(*s->values, &v) ? ShapeSInfo(std::move(v)) : sinfo;
    }
    case StructInfoKind::kTensor: {
      const auto* t = sinfo.as<TensorStructInfoNode>();
      if (!t->shape) return sinfo;
      std::vector<PrimExpr> v;
      return dims(*t->shape, &v) ? TensorSInfo(std::move(v), t->dtype, t->vdevice) : sinfo;
    }
    case StructInfoKind::kTuple: {
      const auto* t = sinfo.as<TupleStructInfoNode>();
      std::vector<StructInfo> fields;
      bool changed = false;
      for (const StructInfo& f : t->fields) {
        fields.push_back(VisitStructInfo(f));
        changed |= !fields.back().same_as(f);
      }
      return changed ? TupleSInfo(std::move(fields)) : sinfo;
    }
    case StructInfoKind::kFunc: {
      const auto* f = sinfo.as<FuncStructInfoNode>();
      StructInfo ret = VisitStructInfo(f->ret);
      bool changed = !ret.same_as(f->ret);
      if (!f->params) return changed ? OpaqueFuncSInfo(ret, f->purity) : sinfo;
      std::vector<StructInfo> params;
      for (const StructInfo& p : *f->params) {
        params.push_back(VisitStructInfo(p));
        changed |= !params.back().same_as(p);
      }
      return changed ? FuncSInfo(std::move(params), ret, f->purity) : sinfo;
    }
  }
  return sinfo;
}

namespace {

class PostOrder : public ExprVisitor {
 public:
  explicit PostOrder(const std::function<void(const Expr&)>& fn) : fn_(fn) {}
  void VisitExpr(const Expr& e) override {
    if (!e.defined()) return;
    ExprVisitor::VisitExpr(e);
    fn_(e);
  }
  void VisitVarDef(const Expr& var) override { fn_(var); }

 private:
  const std::function<void(const Expr&)>& fn_;
};

}  // namespace

void PostOrderVisit(const Expr& e, const std::function<void(const Expr&)>& fn) {
  PostOrder(fn).VisitExpr(e);
}

}  // namespace tether::compiler
