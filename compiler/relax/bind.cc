// BindParams and BindSymbolicVars: a mutator that replaces param vars and
// substitutes symbolic vars, then re-normalization for the struct info.
#include "compiler/relax/bind.h"

#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/relax/block_builder.h"
#include "compiler/relax/struct_info_util.h"
#include "compiler/relax/visitor.h"
#include "compiler/tir/arith.h"
#include "runtime/core/error.h"

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

namespace {

std::string DescribeParams(const FunctionNode* f) {
  std::vector<std::string> names;
  for (const Expr& p : f->params) names.push_back(p.as<VarNode>()->name_hint);
  return absl::StrCat(f->params.size(), f->params.size() == 1 ? " param" : " params", " (",
                      absl::StrJoin(names, ", "), ")");
}

// The position of the param `key` names, or why there is none.
absl::StatusOr<size_t> Resolve(const FunctionNode* f, const ParamKey& key) {
  if (const int64_t* position = std::get_if<int64_t>(&key)) {
    if (*position < 0 || *position >= static_cast<int64_t>(f->params.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "param position ", *position, " is out of range: the function has ", DescribeParams(f)));
    }
    return static_cast<size_t>(*position);
  }
  const std::string& name = std::get<std::string>(key);
  std::optional<size_t> found;
  for (size_t i = 0; i < f->params.size(); ++i) {
    if (f->params[i].as<VarNode>()->name_hint != name) continue;
    if (found) {
      return absl::InvalidArgumentError(absl::StrCat("the function has two params named ", name,
                                                     " (positions ", *found, " and ", i,
                                                     "); bind them by position"));
    }
    found = i;
  }
  if (!found) {
    return absl::InvalidArgumentError(
        absl::StrCat("function has no param named ", name, "; it has ", DescribeParams(f)));
  }
  return *found;
}

std::string KeyText(const ParamKey& key) {
  if (const int64_t* position = std::get_if<int64_t>(&key))
    return absl::StrCat("position ", *position);
  return absl::StrCat("name ", std::get<std::string>(key));
}

}  // namespace

absl::StatusOr<Expr> BindParams(const Expr& function, const std::map<std::string, Tensor>& params) {
  std::vector<std::pair<ParamKey, Tensor>> keyed;
  for (const auto& [name, tensor] : params) keyed.emplace_back(name, tensor);
  return BindParamsByKey(function, keyed);
}

absl::StatusOr<Expr> BindParamsByKey(const Expr& function,
                                     const std::vector<std::pair<ParamKey, Tensor>>& params) {
  const auto* f = function.defined() ? function.as<FunctionNode>() : nullptr;
  if (f == nullptr) return absl::InvalidArgumentError("bind_params expects a function");
  std::vector<const std::pair<ParamKey, Tensor>*> by_position(f->params.size(), nullptr);
  for (const auto& entry : params) {
    TETHER_ASSIGN_OR_RETURN(size_t i, Resolve(f, entry.first));
    const std::string& name = f->params[i].as<VarNode>()->name_hint;
    if (by_position[i] != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("param ", name, " (position ", i, ") is bound twice: by ",
                       KeyText(by_position[i]->first), " and by ", KeyText(entry.first)));
    }
    if (!entry.second)
      return absl::InvalidArgumentError(absl::StrCat("tensor for param ", name, " is null"));
    by_position[i] = &entry;
  }
  VarMap sym;
  std::vector<Expr> kept;
  std::vector<std::pair<Expr, Expr>> bound;
  for (size_t i = 0; i < f->params.size(); ++i) {
    const Expr& p = f->params[i];
    if (by_position[i] == nullptr) {
      kept.push_back(p);
      continue;
    }
    const Tensor& t = by_position[i]->second;
    Expr c = MakeConstant(t);
    if (!MatchStructInfo(p.struct_info(), c.struct_info(), &sym) ||
        !IsBaseOf(EraseToRank(p.struct_info()), EraseToRank(c.struct_info()))) {
      return absl::InvalidArgumentError(absl::StrCat("param ", p.as<VarNode>()->name_hint, " of ",
                                                     ToString(p.struct_info()), " cannot bind a ",
                                                     t.ToString(), " tensor"));
    }
    bound.emplace_back(p, c);
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
