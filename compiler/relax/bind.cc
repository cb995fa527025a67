// BindParams and BindSymbolicVars: a mutator that replaces param vars and
// substitutes symbolic vars, then re-normalization for the struct info.
#include "compiler/relax/bind.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/relax/block_builder.h"
#include "compiler/relax/struct_info_util.h"
#include "compiler/relax/visitor.h"
#include "compiler/tir/arith.h"

namespace tether::compiler {
namespace {

class Binder : public ExprMutator {
 public:
  explicit Binder(VarMap sym) : sym_(std::move(sym)) { keep_struct_info_ = false; }

  void BindVar(const Expr& var, Expr value) { var_remap_[var.get()] = std::move(value); }

  PrimExpr VisitPrimExpr(const PrimExpr& e) override {
    PrimExpr s = Substitute(e, sym_);
    return s.same_as(e) ? e : Simplify(s);
  }

 private:
  VarMap sym_;
};

absl::StatusOr<Expr> Rebuild(const FunctionNode* f, Binder* binder,
                             const std::vector<Expr>& kept_params) {
  std::vector<Expr> params;
  for (const Expr& p : kept_params) params.push_back(binder->VisitVarDef(p));
  Expr body = binder->VisitExpr(f->body);
  StructInfo ret = f->ret_struct_info.defined() ? binder->VisitStructInfo(f->ret_struct_info)
                                                : f->ret_struct_info;
  Expr fn = MakeFunction(std::move(params), body, ret, f->is_pure, f->attrs);
  BlockBuilder bb;
  return bb.Normalize(fn);
}

}  // namespace

absl::StatusOr<Expr> BindParams(const Expr& function, const std::map<std::string, Tensor>& params) {
  const auto* f = function.defined() ? function.as<FunctionNode>() : nullptr;
  if (f == nullptr) return absl::InvalidArgumentError("bind_params expects a function");
  VarMap sym;
  std::vector<Expr> kept;
  std::vector<std::pair<Expr, Expr>> bound;
  size_t found = 0;
  for (const Expr& p : f->params) {
    const std::string& name = p.as<VarNode>()->name_hint;
    auto it = params.find(name);
    if (it == params.end()) {
      kept.push_back(p);
      continue;
    }
    ++found;
    if (!it->second)
      return absl::InvalidArgumentError(absl::StrCat("tensor for param ", name, " is null"));
    Expr c = MakeConstant(it->second);
    if (!MatchStructInfo(p.struct_info(), c.struct_info(), &sym) ||
        !IsBaseOf(EraseToRank(p.struct_info()), EraseToRank(c.struct_info()))) {
      return absl::InvalidArgumentError(absl::StrCat("param ", name, " of ",
                                                     ToString(p.struct_info()), " cannot bind a ",
                                                     it->second.ToString(), " tensor"));
    }
    bound.emplace_back(p, c);
  }
  if (found != params.size()) {
    for (const auto& [name, t] : params) {
      bool any = false;
      for (const Expr& p : f->params) any |= p.as<VarNode>()->name_hint == name;
      if (!any)
        return absl::InvalidArgumentError(absl::StrCat("function has no param named ", name));
    }
  }
  Binder binder(std::move(sym));
  for (auto& [p, c] : bound) binder.BindVar(p, c);
  return Rebuild(f, &binder, kept);
}

absl::StatusOr<Expr> BindSymbolicVars(const Expr& function,
                                      const std::map<std::string, int64_t>& values) {
  const auto* f = function.defined() ? function.as<FunctionNode>() : nullptr;
  if (f == nullptr) return absl::InvalidArgumentError("bind_symbolic_vars expects a function");
  std::vector<Var> vars;
  for (const Expr& p : f->params) CollectStructInfoVars(p.struct_info(), &vars);
  VarMap sym;
  for (const auto& [name, value] : values) {
    bool any = false;
    for (const Var& v : vars) {
      if (v.name() == name) {
        sym[v.get()] = IntImm(v.dtype(), value);
        any = true;
      }
    }
    if (!any)
      return absl::InvalidArgumentError(absl::StrCat("function has no symbolic var named ", name));
  }
  Binder binder(std::move(sym));
  return Rebuild(f, &binder, f->params);
}

}  // namespace tether::compiler
