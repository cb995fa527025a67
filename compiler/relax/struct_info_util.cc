// Struct info subtyping, least upper bounds, erasure, substitution and
// matching.
#include "compiler/relax/struct_info_util.h"

#include "runtime/core/tensor.h"

namespace tether::compiler {
namespace {

bool DimsEqual(const std::vector<PrimExpr>& a, const std::vector<PrimExpr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!ProveEqual(a[i], b[i])) return false;
  }
  return true;
}

// Whether two dims are provably different (both simplify to distinct constants).
bool DimsProvablyDiffer(const PrimExpr& a, const PrimExpr& b) {
  if (!a.defined() || !b.defined()) return false;
  std::optional<int64_t> d = AsConstInt(Sub(a, b));
  return d.has_value() && *d != 0;
}

std::vector<PrimExpr> SubstituteDims(const std::vector<PrimExpr>& dims, const VarMap& map,
                                     bool* changed) {
  std::vector<PrimExpr> out;
  for (const PrimExpr& d : dims) {
    PrimExpr s = Substitute(d, map);
    if (!s.same_as(d)) {
      s = Simplify(s);
      *changed = true;
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace

bool IsBaseOf(const StructInfo& base, const StructInfo& derived) {
  if (!base.defined() || !derived.defined()) return false;
  if (base.kind() == StructInfoKind::kObject) return true;
  if (base.kind() != derived.kind()) return false;
  switch (base.kind()) {
    case StructInfoKind::kObject:
      return true;
    case StructInfoKind::kPrim: {
      const auto* b = base.as<PrimStructInfoNode>();
      const auto* d = derived.as<PrimStructInfoNode>();
      if (b->dtype != d->dtype) return false;
      if (!b->value.defined()) return true;
      return d->value.defined() && ProveEqual(b->value, d->value);
    }
    case StructInfoKind::kShape: {
      const auto* b = base.as<ShapeStructInfoNode>();
      const auto* d = derived.as<ShapeStructInfoNode>();
      if (b->ndim >= 0 && b->ndim != d->ndim) return false;
      if (!b->values) return true;
      return d->values && DimsEqual(*b->values, *d->values);
    }
    case StructInfoKind::kTensor: {
      const auto* b = base.as<TensorStructInfoNode>();
      const auto* d = derived.as<TensorStructInfoNode>();
      if (b->dtype && b->dtype != d->dtype) return false;
      if (b->vdevice && b->vdevice != d->vdevice) return false;
      if (b->ndim >= 0 && b->ndim != d->ndim) return false;
      if (!b->shape) return true;
      return d->shape && DimsEqual(*b->shape, *d->shape);
    }
    case StructInfoKind::kTuple: {
      const auto& bf = base.as<TupleStructInfoNode>()->fields;
      const auto& df = derived.as<TupleStructInfoNode>()->fields;
      if (bf.size() != df.size()) return false;
      for (size_t i = 0; i < bf.size(); ++i) {
        if (!IsBaseOf(bf[i], df[i])) return false;
      }
      return true;
    }
    case StructInfoKind::kFunc: {
      const auto* b = base.as<FuncStructInfoNode>();
      const auto* d = derived.as<FuncStructInfoNode>();
      if (b->purity && !d->purity) return false;
      if (!IsBaseOf(b->ret, d->ret)) return false;
      if (!b->params) return true;
      if (!d->params || b->params->size() != d->params->size()) return false;
      // Params are contravariant.
      for (size_t i = 0; i < b->params->size(); ++i) {
        if (!IsBaseOf((*d->params)[i], (*b->params)[i])) return false;
      }
      return true;
    }
  }
  return false;
}

StructInfo StructInfoLCA(const StructInfo& a, const StructInfo& b) {
  if (!a.defined() || !b.defined()) return ObjectSInfo();
  if (IsBaseOf(a, b)) return a;
  if (IsBaseOf(b, a)) return b;
  if (a.kind() != b.kind()) return ObjectSInfo();
  switch (a.kind()) {
    case StructInfoKind::kPrim: {
      const auto* x = a.as<PrimStructInfoNode>();
      const auto* y = b.as<PrimStructInfoNode>();
      return x->dtype == y->dtype ? PrimSInfo(x->dtype) : ObjectSInfo();
    }
    case StructInfoKind::kShape: {
      const auto* x = a.as<ShapeStructInfoNode>();
      const auto* y = b.as<ShapeStructInfoNode>();
      return ShapeSInfoOfRank(x->ndim == y->ndim ? x->ndim : -1);
    }
    case StructInfoKind::kTensor: {
      const auto* x = a.as<TensorStructInfoNode>();
      const auto* y = b.as<TensorStructInfoNode>();
      std::optional<DataType> dtype = x->dtype == y->dtype ? x->dtype : std::nullopt;
      std::optional<Device> dev = x->vdevice == y->vdevice ? x->vdevice : std::nullopt;
      if (x->shape && y->shape && DimsEqual(*x->shape, *y->shape)) {
        return TensorSInfo(*x->shape, dtype, dev);
      }
      return TensorSInfoOfRank(x->ndim == y->ndim ? x->ndim : -1, dtype, dev);
    }
    case StructInfoKind::kTuple: {
      const auto& xf = a.as<TupleStructInfoNode>()->fields;
      const auto& yf = b.as<TupleStructInfoNode>()->fields;
      if (xf.size() != yf.size()) return ObjectSInfo();
      std::vector<StructInfo> fields;
      for (size_t i = 0; i < xf.size(); ++i) fields.push_back(StructInfoLCA(xf[i], yf[i]));
      return TupleSInfo(std::move(fields));
    }
    case StructInfoKind::kFunc: {
      const auto* x = a.as<FuncStructInfoNode>();
      const auto* y = b.as<FuncStructInfoNode>();
      return OpaqueFuncSInfo(StructInfoLCA(x->ret, y->ret), x->purity && y->purity);
    }
    case StructInfoKind::kObject:
      break;
  }
  return ObjectSInfo();
}

StructInfo EraseToRank(const StructInfo& s) {
  if (!s.defined()) return s;
  switch (s.kind()) {
    case StructInfoKind::kObject:
      return s;
    case StructInfoKind::kPrim: {
      const auto* p = s.as<PrimStructInfoNode>();
      return p->value.defined() ? PrimSInfo(p->dtype) : s;
    }
    case StructInfoKind::kShape: {
      const auto* p = s.as<ShapeStructInfoNode>();
      return p->values ? ShapeSInfoOfRank(p->ndim) : s;
    }
    case StructInfoKind::kTensor: {
      const auto* t = s.as<TensorStructInfoNode>();
      return t->shape ? TensorSInfoOfRank(t->ndim, t->dtype, t->vdevice) : s;
    }
    case StructInfoKind::kTuple: {
      std::vector<StructInfo> fields;
      for (const StructInfo& f : s.as<TupleStructInfoNode>()->fields) {
        fields.push_back(EraseToRank(f));
      }
      return TupleSInfo(std::move(fields));
    }
    case StructInfoKind::kFunc: {
      const auto* f = s.as<FuncStructInfoNode>();
      return OpaqueFuncSInfo(EraseToRank(f->ret), f->purity);
    }
  }
  return s;
}

const std::vector<PrimExpr>* TensorShape(const StructInfo& s) {
  const auto* t = s.as<TensorStructInfoNode>();
  return t && t->shape ? &*t->shape : nullptr;
}

StructInfo StructInfoFromValue(const Value& value) {
  if (value.is_int())
    return PrimSInfo(DataType::Int(64), IntImm(DataType::Int(64), value.int_value()));
  if (value.is_bool()) return PrimSInfo(DataType::Bool(), BoolImm(value.bool_value()));
  if (value.is_float()) {
    return PrimSInfo(DataType::Float(64), FloatImm(DataType::Float(64), value.float_value()));
  }
  if (value.is_tensor()) {
    const auto* t = static_cast<const TensorObj*>(value.object());
    std::vector<PrimExpr> shape;
    for (int64_t d : t->shape()) shape.push_back(d);
    return TensorSInfo(std::move(shape), t->dtype(), t->device());
  }
  return ObjectSInfo();
}

StructInfo SubstituteStructInfo(const StructInfo& s, const VarMap& map) {
  if (!s.defined() || map.empty()) return s;
  bool changed = false;
  switch (s.kind()) {
    case StructInfoKind::kObject:
      return s;
    case StructInfoKind::kPrim: {
      const auto* p = s.as<PrimStructInfoNode>();
      if (!p->value.defined()) return s;
      PrimExpr v = Substitute(p->value, map);
      return v.same_as(p->value) ? s : PrimSInfo(p->dtype, Simplify(v));
    }
    case StructInfoKind::kShape: {
      const auto* p = s.as<ShapeStructInfoNode>();
      if (!p->values) return s;
      auto v = SubstituteDims(*p->values, map, &changed);
      return changed ? ShapeSInfo(std::move(v)) : s;
    }
    case StructInfoKind::kTensor: {
      const auto* t = s.as<TensorStructInfoNode>();
      if (!t->shape) return s;
      auto v = SubstituteDims(*t->shape, map, &changed);
      return changed ? TensorSInfo(std::move(v), t->dtype, t->vdevice) : s;
    }
    case StructInfoKind::kTuple: {
      std::vector<StructInfo> fields;
      for (const StructInfo& f : s.as<TupleStructInfoNode>()->fields) {
        fields.push_back(SubstituteStructInfo(f, map));
        changed |= !fields.back().same_as(f);
      }
      return changed ? TupleSInfo(std::move(fields)) : s;
    }
    case StructInfoKind::kFunc: {
      const auto* f = s.as<FuncStructInfoNode>();
      StructInfo ret = SubstituteStructInfo(f->ret, map);
      changed = !ret.same_as(f->ret);
      if (!f->params) return changed ? OpaqueFuncSInfo(ret, f->purity) : s;
      std::vector<StructInfo> params;
      for (const StructInfo& p : *f->params) {
        params.push_back(SubstituteStructInfo(p, map));
        changed |= !params.back().same_as(p);
      }
      return changed ? FuncSInfo(std::move(params), ret, f->purity) : s;
    }
  }
  return s;
}

void CollectStructInfoVars(const StructInfo& s, std::vector<Var>* out) {
  if (!s.defined()) return;
  switch (s.kind()) {
    case StructInfoKind::kObject:
      return;
    case StructInfoKind::kPrim:
      CollectVars(s.as<PrimStructInfoNode>()->value, out);
      return;
    case StructInfoKind::kShape:
      if (const auto& v = s.as<ShapeStructInfoNode>()->values) {
        for (const PrimExpr& d : *v) CollectVars(d, out);
      }
      return;
    case StructInfoKind::kTensor:
      if (const auto& v = s.as<TensorStructInfoNode>()->shape) {
        for (const PrimExpr& d : *v) CollectVars(d, out);
      }
      return;
    case StructInfoKind::kTuple:
      for (const StructInfo& f : s.as<TupleStructInfoNode>()->fields) CollectStructInfoVars(f, out);
      return;
    case StructInfoKind::kFunc: {
      const auto* f = s.as<FuncStructInfoNode>();
      if (f->params) {
        for (const StructInfo& p : *f->params) CollectStructInfoVars(p, out);
      }
      CollectStructInfoVars(f->ret, out);
      return;
    }
  }
}

namespace {

bool MatchDims(const std::vector<PrimExpr>& pattern, const std::vector<PrimExpr>& value,
               VarMap* bindings) {
  if (pattern.size() != value.size()) return false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const auto* v = pattern[i].as<PrimVarNode>();
    if (v && !bindings->contains(v)) {
      (*bindings)[v] = value[i];
      continue;
    }
    if (DimsProvablyDiffer(Substitute(pattern[i], *bindings), value[i])) return false;
  }
  return true;
}

}  // namespace

bool MatchStructInfo(const StructInfo& pattern, const StructInfo& value, VarMap* bindings) {
  if (!pattern.defined() || pattern.kind() == StructInfoKind::kObject) return true;
  if (!value.defined()) return false;
  if (value.kind() == StructInfoKind::kObject) return true;  // unknown: checked at run time
  if (pattern.kind() != value.kind()) return false;
  switch (pattern.kind()) {
    case StructInfoKind::kObject:
      return true;
    case StructInfoKind::kPrim: {
      const auto* p = pattern.as<PrimStructInfoNode>();
      const auto* v = value.as<PrimStructInfoNode>();
      if (p->dtype != v->dtype) return false;
      if (!p->value.defined() || !v->value.defined()) return true;
      return MatchDims({p->value}, {v->value}, bindings);
    }
    case StructInfoKind::kShape: {
      const auto* p = pattern.as<ShapeStructInfoNode>();
      const auto* v = value.as<ShapeStructInfoNode>();
      if (p->ndim >= 0 && v->ndim >= 0 && p->ndim != v->ndim) return false;
      if (!p->values || !v->values) return true;
      return MatchDims(*p->values, *v->values, bindings);
    }
    case StructInfoKind::kTensor: {
      const auto* p = pattern.as<TensorStructInfoNode>();
      const auto* v = value.as<TensorStructInfoNode>();
      if (p->dtype && v->dtype && p->dtype != v->dtype) return false;
      if (p->ndim >= 0 && v->ndim >= 0 && p->ndim != v->ndim) return false;
      if (!p->shape || !v->shape) return true;
      return MatchDims(*p->shape, *v->shape, bindings);
    }
    case StructInfoKind::kTuple: {
      const auto& pf = pattern.as<TupleStructInfoNode>()->fields;
      const auto& vf = value.as<TupleStructInfoNode>()->fields;
      if (pf.size() != vf.size()) return false;
      for (size_t i = 0; i < pf.size(); ++i) {
        if (!MatchStructInfo(pf[i], vf[i], bindings)) return false;
      }
      return true;
    }
    case StructInfoKind::kFunc:
      return true;
  }
  return true;
}

}  // namespace tether::compiler
