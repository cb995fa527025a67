// Normalization to A-normal form with bottom-up struct info inference, and
// the module-level well-formedness check.
#include "compiler/relax/block_builder.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "compiler/relax/op_registry.h"
#include "compiler/relax/struct_info_util.h"
#include "compiler/relax/visitor.h"
#include "compiler/tir/arith.h"

namespace tether::compiler {
namespace {

absl::Status Error(const Span& span, absl::string_view message) {
  if (!span.known()) return absl::InvalidArgumentError(message);
  return absl::InvalidArgumentError(absl::StrCat(span.ToString(), ": ", message));
}

// Prefixes a status coming from below (an operator's infer) with `span`.
absl::Status WithSpanPrefix(const absl::Status& s, const Span& span) {
  if (!span.known()) return s;
  return absl::Status(s.code(), absl::StrCat(span.ToString(), ": ", s.message()));
}

bool IsLeaf(const Expr& e) {
  switch (e.kind()) {
    case ExprKind::kVar:
    case ExprKind::kDataflowVar:
    case ExprKind::kConstant:
    case ExprKind::kPrimValue:
    case ExprKind::kStringImm:
    case ExprKind::kDataTypeImm:
    case ExprKind::kShapeExpr:
    case ExprKind::kOp:
    case ExprKind::kGlobalVar:
    case ExprKind::kExternFunc:
      return true;
    default:
      return false;
  }
}

std::string VarName(const Expr& var) {
  const auto* v = var.as<VarNode>();
  return v ? v->name_hint : "?";
}

// Sets span and struct info on a node built here (not shared yet).
Expr Finish(Expr fresh, const Expr& old, StructInfo sinfo) {
  auto* node = const_cast<ExprNode*>(fresh.get());
  if (!fresh.same_as(old)) node->span = old->span;
  if (sinfo.defined()) node->set_struct_info(std::move(sinfo));
  return fresh;
}

}  // namespace

BlockBuilder::BlockBuilder(IRModule* module) : module_(module) {}

void BlockBuilder::BeginDataflowBlock() { blocks_.push_back(BindingBlock{{}, true}); }
void BlockBuilder::BeginBindingBlock() { blocks_.push_back(BindingBlock{{}, false}); }

BindingBlock BlockBuilder::EndBlock() {
  if (blocks_.empty()) return BindingBlock{};
  BindingBlock b = std::move(blocks_.back());
  blocks_.pop_back();
  return b;
}

bool BlockBuilder::InDataflowBlock() const {
  return !blocks_.empty() && blocks_.back().is_dataflow;
}

Expr BlockBuilder::FreshVar(absl::string_view name_hint, StructInfo sinfo, bool dataflow) {
  return dataflow ? MakeDataflowVar(std::string(name_hint), std::move(sinfo))
                  : MakeVar(std::string(name_hint), std::move(sinfo));
}

absl::StatusOr<Expr> BlockBuilder::Normalize(const Expr& e) {
  if (!e.defined()) return absl::InvalidArgumentError("cannot normalize an undefined expression");
  if (!blocks_.empty()) return NormalizeExpr(e);
  BeginBindingBlock();
  absl::StatusOr<Expr> r = NormalizeExpr(e);
  BindingBlock block = EndBlock();
  if (!r.ok() || block.bindings.empty()) return r;
  StructInfo sinfo = r->struct_info();
  std::vector<BindingBlock> blocks;
  blocks.push_back(std::move(block));
  Expr seq = MakeSeqExpr(std::move(blocks), *r);
  return Finish(seq, e, sinfo);
}

absl::StatusOr<Expr> BlockBuilder::Emit(const Expr& value, absl::string_view name_hint) {
  if (blocks_.empty()) return absl::FailedPreconditionError("emit with no open block");
  if (!value.defined()) return absl::InvalidArgumentError("cannot emit an undefined expression");
  absl::StatusOr<Expr> n = NormalizeExpr(value);
  if (!n.ok()) return n.status();
  Expr var = FreshVar(name_hint, n->struct_info(), InDataflowBlock());
  blocks_.back().bindings.push_back(Binding{var, *n, StructInfo(), value->span});
  return var;
}

absl::StatusOr<Expr> BlockBuilder::EmitOutput(const Expr& value, absl::string_view name_hint) {
  if (!InDataflowBlock()) {
    return absl::FailedPreconditionError("emit_output outside a dataflow block");
  }
  absl::StatusOr<Expr> n = NormalizeExpr(value);
  if (!n.ok()) return n.status();
  Expr var = FreshVar(name_hint, n->struct_info(), /*dataflow=*/false);
  blocks_.back().bindings.push_back(Binding{var, *n, StructInfo(), value->span});
  return var;
}

absl::StatusOr<Expr> BlockBuilder::EmitMatchCast(const Expr& value, const StructInfo& sinfo,
                                                 absl::string_view name_hint) {
  if (blocks_.empty()) return absl::FailedPreconditionError("emit with no open block");
  if (!sinfo.defined()) return absl::InvalidArgumentError("match_cast needs a struct info");
  Expr var = FreshVar(name_hint, sinfo, InDataflowBlock());
  absl::Status s = EmitBinding(Binding{var, value, sinfo, value->span});
  if (!s.ok()) return s;
  return var;
}

absl::Status BlockBuilder::EmitBinding(const Binding& binding) {
  if (blocks_.empty()) return absl::FailedPreconditionError("emit with no open block");
  if (!binding.var.defined() || !binding.var.as<VarNode>() || !binding.value.defined()) {
    return Error(binding.span, "a binding needs a var and a value");
  }
  if (binding.var.kind() == ExprKind::kDataflowVar && !InDataflowBlock()) {
    return Error(binding.span, absl::StrCat("dataflow var ", VarName(binding.var),
                                            " is bound outside a dataflow block"));
  }
  absl::StatusOr<Expr> value =
      binding.is_match_cast() ? NormalizeArg(binding.value) : NormalizeExpr(binding.value);
  if (!value.ok()) return value.status();
  Binding b = binding;
  b.value = *value;
  const StructInfo& vs = value->struct_info();
  Span span = binding.span.known() ? binding.span : binding.value->span;
  if (b.is_match_cast()) {
    VarMap unused;
    if (!MatchStructInfo(b.match_cast, vs, &unused)) {
      return Error(span, absl::StrCat("match_cast of ", VarName(b.var), ": a value of ",
                                      ToString(vs), " can never match ", ToString(b.match_cast)));
    }
    std::vector<Var> vars;
    CollectStructInfoVars(b.match_cast, &vars);
    for (const Var& v : vars) sym_vars_.insert(v.get());
    if (!b.var.struct_info().defined()) b.var->set_struct_info(b.match_cast);
  } else if (!b.var.struct_info().defined()) {
    b.var->set_struct_info(vs);
  } else {
    VarMap unused;
    if (!MatchStructInfo(b.var.struct_info(), vs, &unused)) {
      return Error(span,
                   absl::StrCat("binding of ", VarName(b.var), ": a value of ", ToString(vs),
                                " does not match its annotation ", ToString(b.var.struct_info())));
    }
  }
  blocks_.back().bindings.push_back(std::move(b));
  return absl::OkStatus();
}

std::string BlockBuilder::AddKernel(KernelFunc kernel) {
  if (module_ == nullptr || kernel == nullptr) return "";
  std::string name = module_->UniqueName(kernel->name);
  if (name != kernel->name) {
    kernel = MakeKernelFunc(name, kernel->params, kernel->body, kernel->num_outputs);
  }
  module_->kernels[name] = std::move(kernel);
  return name;
}

absl::StatusOr<Expr> BlockBuilder::NormalizeArg(const Expr& e) {
  if (!e.defined()) return absl::InvalidArgumentError("undefined argument");
  if (IsLeaf(e) || e.kind() == ExprKind::kTuple) return NormalizeExpr(e);
  if (blocks_.empty()) return absl::FailedPreconditionError("emit with no open block");
  absl::StatusOr<Expr> n = NormalizeExpr(e);
  if (!n.ok()) return n;
  Expr var = FreshVar("lv", n->struct_info(), InDataflowBlock());
  blocks_.back().bindings.push_back(Binding{var, *n, StructInfo(), e->span});
  return var;
}

absl::StatusOr<Expr> BlockBuilder::NormalizeExpr(const Expr& e) {
  if (!e.defined()) return absl::InvalidArgumentError("undefined expression");
  switch (e.kind()) {
    case ExprKind::kVar:
    case ExprKind::kDataflowVar:
      if (!e.struct_info().defined()) {
        return Error(e->span, absl::StrCat("var ", VarName(e), " has no struct info"));
      }
      return e;
    case ExprKind::kConstant:
    case ExprKind::kPrimValue:
    case ExprKind::kStringImm:
    case ExprKind::kDataTypeImm:
    case ExprKind::kShapeExpr:
    case ExprKind::kExternFunc:
    case ExprKind::kOp:
      return e;
    case ExprKind::kGlobalVar: {
      if (e.struct_info().defined()) return e;
      absl::StatusOr<StructInfo> s = CalleeStructInfo(e, e);
      StructInfo sinfo = s.ok() ? *s : OpaqueFuncSInfo();
      Expr fresh = MakeGlobalVar(e.as<GlobalVarNode>()->name_hint);
      return Finish(fresh, e, sinfo);
    }
    case ExprKind::kTuple: {
      const auto* t = e.as<TupleNode>();
      std::vector<Expr> fields;
      std::vector<StructInfo> sinfos;
      bool changed = false;
      for (const Expr& f : t->fields) {
        absl::StatusOr<Expr> n = NormalizeArg(f);
        if (!n.ok()) return n;
        changed |= !n->same_as(f);
        sinfos.push_back(n->struct_info());
        fields.push_back(*n);
      }
      if (!changed && e.struct_info().defined()) return e;
      Expr fresh = changed ? MakeTuple(std::move(fields)) : e;
      return Finish(fresh, e, TupleSInfo(std::move(sinfos)));
    }
    case ExprKind::kTupleGetItem: {
      const auto* t = e.as<TupleGetItemNode>();
      absl::StatusOr<Expr> tuple = NormalizeArg(t->tuple);
      if (!tuple.ok()) return tuple;
      const StructInfo& ts = tuple->struct_info();
      StructInfo sinfo;
      if (const auto* ti = ts.as<TupleStructInfoNode>()) {
        if (t->index < 0 || t->index >= static_cast<int>(ti->fields.size())) {
          return Error(e->span,
                       absl::StrCat("tuple index ", t->index, " out of range for ", ToString(ts)));
        }
        sinfo = ti->fields[t->index];
      } else if (ts.kind() == StructInfoKind::kObject) {
        sinfo = ObjectSInfo();
      } else {
        return Error(e->span, absl::StrCat("tuple_get_item on a value of ", ToString(ts)));
      }
      Expr fresh = tuple->same_as(t->tuple) ? e : MakeTupleGetItem(*tuple, t->index);
      if (fresh.same_as(e) && e.struct_info().defined()) return e;
      return Finish(fresh, e, sinfo);
    }
    case ExprKind::kCall:
      return NormalizeCall(e);
    case ExprKind::kIf: {
      const auto* i = e.as<IfNode>();
      absl::StatusOr<Expr> cond = NormalizeArg(i->cond);
      if (!cond.ok()) return cond;
      absl::StatusOr<Expr> t = NormalizeBody(i->true_branch);
      if (!t.ok()) return t;
      absl::StatusOr<Expr> f = NormalizeBody(i->false_branch);
      if (!f.ok()) return f;
      StructInfo sinfo = StructInfoLCA(t->struct_info(), f->struct_info());
      return Finish(MakeIf(*cond, *t, *f), e, sinfo);
    }
    case ExprKind::kSeqExpr:
      return NormalizeBody(e);
    case ExprKind::kFunction:
      return NormalizeFunction(e);
  }
  return e;
}

absl::StatusOr<Expr> BlockBuilder::NormalizeBody(const Expr& e) {
  if (!e.defined()) return absl::InvalidArgumentError("undefined body");
  absl::flat_hash_set<const PrimVarNode*> saved = sym_vars_;
  std::vector<BindingBlock> out;
  Expr body = e;
  if (const auto* seq = e.as<SeqExprNode>()) {
    for (const BindingBlock& block : seq->blocks) {
      blocks_.push_back(BindingBlock{{}, block.is_dataflow});
      for (const Binding& b : block.bindings) {
        absl::Status s = EmitBinding(b);
        if (!s.ok()) {
          blocks_.pop_back();
          sym_vars_ = std::move(saved);
          return s;
        }
      }
      BindingBlock done = EndBlock();
      if (!done.bindings.empty()) out.push_back(std::move(done));
    }
    body = seq->body;
  }
  BeginBindingBlock();
  absl::StatusOr<Expr> result = NormalizeArg(body);
  BindingBlock tail = EndBlock();
  if (!result.ok()) {
    sym_vars_ = std::move(saved);
    return result;
  }
  if (!tail.bindings.empty()) {
    if (!out.empty() && !out.back().is_dataflow) {
      for (Binding& b : tail.bindings) out.back().bindings.push_back(std::move(b));
    } else {
      out.push_back(std::move(tail));
    }
  }
  // Symbolic vars defined inside the body are not visible outside it.
  StructInfo sinfo = result->struct_info();
  std::vector<Var> vars;
  CollectStructInfoVars(sinfo, &vars);
  for (const Var& v : vars) {
    if (sym_vars_.contains(v.get()) && !saved.contains(v.get())) {
      sinfo = EraseToRank(sinfo);
      break;
    }
  }
  sym_vars_ = std::move(saved);
  return Finish(MakeSeqExpr(std::move(out), *result), e, sinfo);
}

absl::StatusOr<StructInfo> BlockBuilder::CalleeStructInfo(const Expr& op, const Expr& call) {
  if (const auto* g = op.as<GlobalVarNode>()) {
    if (op.struct_info().defined()) return op.struct_info();
    Expr fn = module_ ? module_->Lookup(g->name_hint) : Expr();
    if (!fn.defined()) {
      return Error(call->span, absl::StrCat("unknown function @", g->name_hint));
    }
    if (fn.struct_info().defined()) return fn.struct_info();
    if (const auto* f = fn.as<FunctionNode>()) {
      std::vector<StructInfo> params;
      for (const Expr& p : f->params) {
        params.push_back(p.struct_info().defined() ? p.struct_info() : ObjectSInfo());
      }
      StructInfo ret = f->ret_struct_info.defined() ? f->ret_struct_info : ObjectSInfo();
      return FuncSInfo(std::move(params), ret, f->is_pure);
    }
    return OpaqueFuncSInfo();
  }
  return op.struct_info();
}

absl::StatusOr<Expr> BlockBuilder::NormalizeCall(const Expr& e) {
  const auto* c = e.as<CallNode>();
  if (!c->op.defined()) return Error(e->span, "call without a callee");
  Expr op = c->op;
  if (op.kind() != ExprKind::kOp && op.kind() != ExprKind::kGlobalVar &&
      op.kind() != ExprKind::kExternFunc) {
    absl::StatusOr<Expr> n = NormalizeArg(op);
    if (!n.ok()) return n;
    op = *n;
  }
  const OpInfo* info = nullptr;
  if (const auto* o = op.as<OpNode>()) {
    info = FindOp(o->name);
    if (info == nullptr) return Error(e->span, absl::StrCat("unknown operator ", o->name));
    if (info->num_args >= 0 && static_cast<int>(c->args.size()) != info->num_args) {
      return Error(e->span, absl::StrCat(o->name, ": expects ", info->num_args, " arguments, got ",
                                         c->args.size()));
    }
  }
  std::vector<Expr> args;
  bool changed = !op.same_as(c->op);
  for (const Expr& a : c->args) {
    absl::StatusOr<Expr> n = NormalizeArg(a);
    if (!n.ok()) return n;
    changed |= !n->same_as(a);
    args.push_back(*n);
  }
  if (!changed && e.struct_info().defined()) return e;
  Expr call = changed ? MakeCall(op, std::move(args), c->attrs, c->sinfo_args) : e;
  if (!call.same_as(e)) const_cast<ExprNode*>(call.get())->span = e->span;
  const auto* nc = call.as<CallNode>();
  StructInfo sinfo;
  if (info != nullptr) {
    if (!info->infer) return Error(e->span, absl::StrCat(info->name, ": no struct info inference"));
    absl::StatusOr<StructInfo> s = info->infer(*nc);
    if (!s.ok()) return WithSpanPrefix(s.status(), e->span);
    sinfo = *s;
  } else if (op.kind() == ExprKind::kExternFunc) {
    sinfo = c->sinfo_args.empty() ? ObjectSInfo() : c->sinfo_args[0];
  } else {
    absl::StatusOr<StructInfo> callee = CalleeStructInfo(op, e);
    if (!callee.ok()) return callee.status();
    const auto* f = callee->as<FuncStructInfoNode>();
    if (f == nullptr) {
      return Error(e->span, absl::StrCat("callee of ", ToString(*callee), " is not callable"));
    }
    if (!f->params) {
      sinfo = c->sinfo_args.empty() ? f->ret : c->sinfo_args[0];
    } else {
      if (f->params->size() != nc->args.size()) {
        return Error(e->span, absl::StrCat("call expects ", f->params->size(), " arguments, got ",
                                           nc->args.size()));
      }
      VarMap bindings;
      for (size_t i = 0; i < nc->args.size(); ++i) {
        if (!MatchStructInfo((*f->params)[i], nc->args[i].struct_info(), &bindings)) {
          return Error(e->span,
                       absl::StrCat("argument ", i, " of ", ToString(nc->args[i].struct_info()),
                                    " does not match parameter ", ToString((*f->params)[i])));
        }
      }
      sinfo = SubstituteStructInfo(f->ret, bindings);
      std::vector<Var> vars;
      CollectStructInfoVars(sinfo, &vars);
      for (const Var& v : vars) {
        if (!sym_vars_.contains(v.get())) {
          sinfo = EraseToRank(sinfo);
          break;
        }
      }
    }
  }
  if (!sinfo.defined()) return Error(e->span, "call inferred no struct info");
  call->set_struct_info(std::move(sinfo));
  return call;
}

absl::StatusOr<Expr> BlockBuilder::NormalizeFunction(const Expr& e) {
  const auto* f = e.as<FunctionNode>();
  absl::flat_hash_set<const PrimVarNode*> saved = sym_vars_;
  for (const Expr& p : f->params) {
    if (!p.as<VarNode>()) return Error(e->span, "a function parameter must be a var");
    if (!p.struct_info().defined()) {
      return Error(p->span.known() ? p->span : e->span,
                   absl::StrCat("param ", VarName(p), " has no struct info"));
    }
    std::vector<Var> vars;
    CollectStructInfoVars(p.struct_info(), &vars);
    for (const Var& v : vars) sym_vars_.insert(v.get());
  }
  // Blocks of an enclosing scope are not visible inside the function body.
  std::vector<BindingBlock> outer = std::move(blocks_);
  blocks_.clear();
  absl::StatusOr<Expr> body = NormalizeBody(f->body);
  blocks_ = std::move(outer);
  if (!body.ok()) {
    sym_vars_ = std::move(saved);
    return body;
  }
  StructInfo ret = f->ret_struct_info;
  if (ret.defined()) {
    VarMap unused;
    if (!MatchStructInfo(ret, body->struct_info(), &unused)) {
      sym_vars_ = std::move(saved);
      return Error(e->span, absl::StrCat("function body of ", ToString(body->struct_info()),
                                         " does not match the return annotation ", ToString(ret)));
    }
  } else {
    ret = body->struct_info();
  }
  sym_vars_ = std::move(saved);
  Expr fresh = MakeFunction(f->params, *body, ret, f->is_pure, f->attrs);
  const_cast<ExprNode*>(fresh.get())->span = e->span;
  return fresh;
}

namespace {

class WellFormedChecker : public ExprVisitor {
 public:
  WellFormedChecker(std::string name, const IRModule* module)
      : name_(std::move(name)), module_(module) {}

  absl::Status status() const { return status_; }

  void VisitExpr(const Expr& e) override {
    if (status_.ok()) ExprVisitor::VisitExpr(e);
  }

  void VisitVar(const Expr& var) override {
    if (!defined_.contains(var.get())) {
      Fail(var->span, absl::StrCat("var ", VarName(var), " is used before its definition"));
    } else if (var.kind() == ExprKind::kDataflowVar && !block_vars_.contains(var.get())) {
      Fail(var->span,
           absl::StrCat("dataflow var ", VarName(var), " is used outside its dataflow block"));
    }
  }

  void VisitVarDef(const Expr& var) override {
    if (var.kind() == ExprKind::kDataflowVar) {
      if (!in_dataflow_) {
        Fail(var->span,
             absl::StrCat("dataflow var ", VarName(var), " is bound outside a dataflow block"));
      }
      block_vars_.insert(var.get());
    }
    defined_.insert(var.get());
  }

  void VisitGlobalVar(const Expr& e) override {
    const std::string& n = e.as<GlobalVarNode>()->name_hint;
    if (module_ && !module_->functions.count(n) && !module_->kernels.count(n)) {
      Fail(e->span, absl::StrCat("unknown global @", n));
    }
  }

  void VisitBindingBlock(const BindingBlock& block) override {
    bool saved = in_dataflow_;
    in_dataflow_ = block.is_dataflow;
    block_vars_.clear();
    ExprVisitor::VisitBindingBlock(block);
    block_vars_.clear();
    in_dataflow_ = saved;
  }

  void VisitSeqExpr(const Expr& e) override {
    // Vars bound inside (an If branch) are not visible after it.
    auto saved = defined_;
    ExprVisitor::VisitSeqExpr(e);
    defined_ = std::move(saved);
  }

  void VisitFunction(const Expr& e) override {
    const auto* f = e.as<FunctionNode>();
    absl::flat_hash_set<const PrimVarNode*> bare;
    std::vector<Var> all;
    for (const Expr& p : f->params) {
      const StructInfo& s = p.struct_info();
      CollectStructInfoVars(s, &all);
      std::vector<PrimExpr> dims;
      if (const auto* shape = TensorShape(s)) dims = *shape;
      if (const auto* sh = s.as<ShapeStructInfoNode>(); sh && sh->values) dims = *sh->values;
      if (const auto* pr = s.as<PrimStructInfoNode>(); pr && pr->value.defined()) {
        dims.push_back(pr->value);
      }
      for (const PrimExpr& d : dims) {
        if (const auto* v = d.as<PrimVarNode>()) bare.insert(v);
      }
    }
    for (const Var& v : all) {
      if (!bare.contains(v.get()) && !outer_sym_.contains(v.get())) {
        Fail(e->span, absl::StrCat("symbolic var ", v.name(), " in the params of ", name_,
                                   " is not defined by a param dim"));
        return;
      }
    }
    auto saved_sym = outer_sym_;
    for (const Var& v : all) outer_sym_.insert(v.get());
    bool saved_df = in_dataflow_;
    in_dataflow_ = false;
    ExprVisitor::VisitFunction(e);
    in_dataflow_ = saved_df;
    outer_sym_ = std::move(saved_sym);
  }

 private:
  void Fail(const Span& span, absl::string_view message) {
    if (!status_.ok()) return;
    status_ = Error(span, absl::StrCat(name_, ": ", message));
  }

  std::string name_;
  const IRModule* module_;
  absl::Status status_;
  absl::flat_hash_set<const ExprNode*> defined_;
  absl::flat_hash_set<const ExprNode*> block_vars_;
  absl::flat_hash_set<const PrimVarNode*> outer_sym_;
  bool in_dataflow_ = false;
};

}  // namespace

absl::Status CheckWellFormed(const Expr& function, const std::string& name,
                             const IRModule* module) {
  WellFormedChecker checker(name, module);
  checker.VisitExpr(function);
  return checker.status();
}

absl::StatusOr<IRModule> NormalizeModule(IRModule module) {
  std::vector<std::string> names;
  for (const auto& [name, fn] : module.functions) names.push_back(name);
  for (const std::string& name : names) {
    Expr fn = module.functions[name];
    if (!fn.defined())
      return absl::InvalidArgumentError(absl::StrCat("function ", name, " is undefined"));
    if (fn.kind() != ExprKind::kFunction) continue;  // extern functions stay as they are
    BlockBuilder bb(&module);
    absl::StatusOr<Expr> n = bb.Normalize(fn);
    if (!n.ok()) return n.status();
    module.functions[name] = *n;
  }
  for (const auto& [name, fn] : module.functions) {
    if (fn.kind() != ExprKind::kFunction) continue;
    absl::Status s = CheckWellFormed(fn, name, &module);
    if (!s.ok()) return s;
  }
  return module;
}

absl::StatusOr<StructInfo> InferStructInfo(const Expr& e) {
  BlockBuilder bb;
  absl::StatusOr<Expr> n = bb.Normalize(e);
  if (!n.ok()) return n.status();
  return n->struct_info();
}

}  // namespace tether::compiler
