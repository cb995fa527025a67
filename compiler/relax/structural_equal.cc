// Structural equality through a canonical serialization: both sides are
// written out with variables numbered by first occurrence (bound ones, and
// free ones when mapping free vars) and free ones by node address
// otherwise; two values are equal when the texts are equal and their
// constants hold the same bytes. A numbering by first occurrence is a
// consistent renaming exactly when the texts agree.
#include "compiler/relax/structural_equal.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"

namespace tether::compiler {
namespace {

class Serializer {
 public:
  explicit Serializer(bool map_free_vars) : map_free_vars_(map_free_vars) {}

  std::string out;
  std::vector<const ConstantNode*> constants;

  void Prim(const PrimExpr& e) {
    if (!e.defined()) {
      out += "_";
      return;
    }
    absl::StrAppend(&out, "(", static_cast<int>(e.kind()), ":", e.dtype().ToString());
    switch (e.kind()) {
      case PrimKind::kIntImm:
        absl::StrAppend(&out, " ", e.as<IntImmNode>()->value);
        break;
      case PrimKind::kFloatImm: {
        double v = e.as<FloatImmNode>()->value;
        uint64_t bits;
        std::memcpy(&bits, &v, sizeof(bits));
        absl::StrAppend(&out, " ", bits);
        break;
      }
      case PrimKind::kVar:
        out += " ";
        VarRef(prim_ids_, e.get(), defining_ > 0);
        break;
      case PrimKind::kNot:
        Prim(e.as<NotNode>()->a);
        break;
      case PrimKind::kSelect:
        Prim(e.as<SelectNode>()->cond);
        Prim(e.as<SelectNode>()->true_value);
        Prim(e.as<SelectNode>()->false_value);
        break;
      case PrimKind::kCast:
        Prim(e.as<CastNode>()->value);
        break;
      case PrimKind::kLoad: {
        const auto* l = e.as<LoadNode>();
        absl::StrAppend(&out, " ", l->buffer->name, "#", Addr(l->buffer.get()));
        for (const PrimExpr& i : l->indices) Prim(i);
        break;
      }
      case PrimKind::kCall: {
        const auto* c = e.as<PrimCallNode>();
        absl::StrAppend(&out, " ", c->op);
        for (const PrimExpr& a : c->args) Prim(a);
        break;
      }
      default:
        Prim(e.as<BinaryNode>()->a);
        Prim(e.as<BinaryNode>()->b);
        break;
    }
    out += ")";
  }

  void Dims(const std::optional<std::vector<PrimExpr>>& dims) {
    if (!dims) {
      out += "?";
      return;
    }
    out += "[";
    for (const PrimExpr& d : *dims) Prim(d);
    out += "]";
  }

  void SInfo(const StructInfo& s) {
    if (!s.defined()) {
      out += "S_";
      return;
    }
    absl::StrAppend(&out, "S", static_cast<int>(s.kind()), "{");
    switch (s.kind()) {
      case StructInfoKind::kObject:
        break;
      case StructInfoKind::kPrim:
        out += s.as<PrimStructInfoNode>()->dtype.ToString();
        Prim(s.as<PrimStructInfoNode>()->value);
        break;
      case StructInfoKind::kShape:
        absl::StrAppend(&out, s.as<ShapeStructInfoNode>()->ndim);
        Dims(s.as<ShapeStructInfoNode>()->values);
        break;
      case StructInfoKind::kTensor: {
        const auto* t = s.as<TensorStructInfoNode>();
        absl::StrAppend(&out, t->dtype ? t->dtype->ToString() : "void", ",", t->ndim, ",",
                        t->vdevice ? t->vdevice->ToString() : "-");
        Dims(t->shape);
        break;
      }
      case StructInfoKind::kTuple:
        for (const StructInfo& f : s.as<TupleStructInfoNode>()->fields) SInfo(f);
        break;
      case StructInfoKind::kFunc: {
        const auto* f = s.as<FuncStructInfoNode>();
        absl::StrAppend(&out, f->purity ? "pure" : "impure");
        if (f->params) {
          out += "(";
          for (const StructInfo& p : *f->params) SInfo(p);
          out += ")";
        }
        SInfo(f->ret);
        break;
      }
    }
    out += "}";
  }

  void Attr(const Attrs& attrs) {
    out += "<";
    for (const auto& [k, v] : attrs) {
      absl::StrAppend(&out, k, "=", v.index(), ":");
      if (const auto* pe = std::get_if<std::vector<PrimExpr>>(&v)) {
        for (const PrimExpr& p : *pe) Prim(p);
      } else {
        out += ToString(v);
      }
      out += ";";
    }
    out += ">";
  }

  // A var in a definition position: its struct info may define symbolic vars.
  void VarDef(const Expr& var) {
    absl::StrAppend(&out, "D", static_cast<int>(var.kind()), " ");
    VarRef(expr_ids_, var.get(), /*define=*/true);
    ++defining_;
    SInfo(var.struct_info());
    --defining_;
  }

  void E(const Expr& e) {
    if (!e.defined()) {
      out += "E_";
      return;
    }
    absl::StrAppend(&out, "E", static_cast<int>(e.kind()), "{");
    switch (e.kind()) {
      case ExprKind::kVar:
      case ExprKind::kDataflowVar:
        VarRef(expr_ids_, e.get(), /*define=*/false);
        break;
      case ExprKind::kConstant: {
        const auto* c = e.as<ConstantNode>();
        absl::StrAppend(&out, constants.size());
        constants.push_back(c);
        SInfo(e.struct_info());
        break;
      }
      case ExprKind::kPrimValue:
        Prim(e.as<PrimValueNode>()->value);
        break;
      case ExprKind::kStringImm:
        absl::StrAppend(&out, e.as<StringImmNode>()->value.size(), ":",
                        e.as<StringImmNode>()->value);
        break;
      case ExprKind::kDataTypeImm:
        out += e.as<DataTypeImmNode>()->value.ToString();
        break;
      case ExprKind::kShapeExpr:
        for (const PrimExpr& v : e.as<ShapeExprNode>()->values) Prim(v);
        break;
      case ExprKind::kTuple:
        for (const Expr& f : e.as<TupleNode>()->fields) E(f);
        break;
      case ExprKind::kTupleGetItem:
        E(e.as<TupleGetItemNode>()->tuple);
        absl::StrAppend(&out, ".", e.as<TupleGetItemNode>()->index);
        break;
      case ExprKind::kCall: {
        const auto* c = e.as<CallNode>();
        E(c->op);
        out += "(";
        for (const Expr& a : c->args) E(a);
        out += ")";
        Attr(c->attrs);
        for (const StructInfo& s : c->sinfo_args) SInfo(s);
        break;
      }
      case ExprKind::kIf:
        E(e.as<IfNode>()->cond);
        E(e.as<IfNode>()->true_branch);
        E(e.as<IfNode>()->false_branch);
        break;
      case ExprKind::kSeqExpr: {
        const auto* s = e.as<SeqExprNode>();
        for (const BindingBlock& b : s->blocks) {
          out += b.is_dataflow ? "DF[" : "B[";
          for (const Binding& bd : b.bindings) {
            E(bd.value);
            if (bd.is_match_cast()) {
              out += "MC";
              ++defining_;
              SInfo(bd.match_cast);
              --defining_;
            }
            VarDef(bd.var);
          }
          out += "]";
        }
        E(s->body);
        break;
      }
      case ExprKind::kFunction: {
        const auto* f = e.as<FunctionNode>();
        out += f->is_pure ? "pure(" : "impure(";
        for (const Expr& p : f->params) VarDef(p);
        out += ")";
        SInfo(f->ret_struct_info);
        Attr(f->attrs);
        E(f->body);
        break;
      }
      case ExprKind::kExternFunc:
        out += e.as<ExternFuncNode>()->global_symbol;
        break;
      case ExprKind::kGlobalVar:
        out += e.as<GlobalVarNode>()->name_hint;
        break;
      case ExprKind::kOp:
        out += e.as<OpNode>()->name;
        break;
    }
    out += "}";
  }

 private:
  static std::string Addr(const void* p) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%p", p);
    return buf;
  }

  void VarRef(absl::flat_hash_map<const void*, int>& ids, const void* node, bool define) {
    auto it = ids.find(node);
    if (it != ids.end()) {
      absl::StrAppend(&out, "v", it->second);
      return;
    }
    if (define || map_free_vars_) {
      int id = static_cast<int>(ids.size());
      ids.emplace(node, id);
      absl::StrAppend(&out, "v", id);
      return;
    }
    absl::StrAppend(&out, "free@", Addr(node));
  }

  bool map_free_vars_;
  int defining_ = 0;
  absl::flat_hash_map<const void*, int> expr_ids_;
  absl::flat_hash_map<const void*, int> prim_ids_;
};

bool SameBytes(const ConstantNode* a, const ConstantNode* b) {
  if (a == b) return true;
  const Tensor& x = a->data;
  const Tensor& y = b->data;
  if (!x || !y) return !x && !y;
  if (x->dtype() != y->dtype() || x->ndim() != y->ndim()) return false;
  for (int i = 0; i < x->ndim(); ++i) {
    if (x->shape()[i] != y->shape()[i]) return false;
  }
  if (!x->IsContiguous() || !y->IsContiguous()) return false;
  return std::memcmp(x->element_data(), y->element_data(), static_cast<size_t>(x->NumBytes())) == 0;
}

bool Finish(const Serializer& a, const Serializer& b) {
  if (a.out != b.out || a.constants.size() != b.constants.size()) return false;
  for (size_t i = 0; i < a.constants.size(); ++i) {
    if (!SameBytes(a.constants[i], b.constants[i])) return false;
  }
  return true;
}

uint64_t Hash(const Serializer& s) {
  uint64_t h = absl::HashOf(s.out);
  for (const ConstantNode* c : s.constants) {
    const Tensor& t = c->data;
    if (!t || !t->IsContiguous()) continue;
    absl::string_view bytes(static_cast<const char*>(t->element_data()),
                            static_cast<size_t>(t->NumBytes()));
    h = absl::HashOf(h, bytes);
  }
  return h;
}

}  // namespace

bool StructuralEqual(const Expr& a, const Expr& b, bool map_free_vars) {
  if (a.same_as(b)) return true;
  Serializer x(map_free_vars), y(map_free_vars);
  x.E(a);
  y.E(b);
  return Finish(x, y);
}

bool StructuralEqual(const StructInfo& a, const StructInfo& b, bool map_free_vars) {
  if (a.same_as(b)) return true;
  Serializer x(map_free_vars), y(map_free_vars);
  x.SInfo(a);
  y.SInfo(b);
  return Finish(x, y);
}

bool StructuralEqual(const PrimExpr& a, const PrimExpr& b, bool map_free_vars) {
  if (a.same_as(b)) return true;
  Serializer x(map_free_vars), y(map_free_vars);
  x.Prim(a);
  y.Prim(b);
  return Finish(x, y);
}

bool StructuralEqual(const IRModule& a, const IRModule& b) {
  if (a.functions.size() != b.functions.size() || a.kernels.size() != b.kernels.size()) {
    return false;
  }
  for (const auto& [name, fn] : a.functions) {
    auto it = b.functions.find(name);
    if (it == b.functions.end() || !StructuralEqual(fn, it->second)) return false;
  }
  for (const auto& [name, k] : a.kernels) {
    auto it = b.kernels.find(name);
    if (it == b.kernels.end() || ToString(k) != ToString(it->second)) return false;
  }
  Serializer x(false), y(false);
  x.Attr(a.attrs);
  y.Attr(b.attrs);
  return Finish(x, y);
}

uint64_t StructuralHash(const Expr& e) {
  Serializer s(false);
  s.E(e);
  return Hash(s);
}

uint64_t StructuralHash(const StructInfo& si) {
  Serializer s(false);
  s.SInfo(si);
  return Hash(s);
}

uint64_t StructuralHash(const PrimExpr& e) {
  Serializer s(false);
  s.Prim(e);
  return Hash(s);
}

}  // namespace tether::compiler
