// StructInfo constructors and TVMScript-style printing.
#include "compiler/relax/struct_info.h"

#include "absl/strings/str_cat.h"

namespace tether::compiler {
namespace {

template <typename T, typename... Args>
StructInfo Make(Args&&... args) {
  return StructInfo(Ref<const StructInfoNode>(MakeRef<T>(std::forward<Args>(args)...)));
}

std::string Dims(const std::vector<PrimExpr>& dims) {
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i) absl::StrAppend(&s, i ? ", " : "", ToString(dims[i]));
  if (dims.size() == 1) s += ",";
  return s + ")";
}

}  // namespace

StructInfo ObjectSInfo() { return Make<ObjectStructInfoNode>(); }
StructInfo PrimSInfo(DataType dtype, PrimExpr value) {
  return Make<PrimStructInfoNode>(dtype, std::move(value));
}
StructInfo ShapeSInfo(std::vector<PrimExpr> values) {
  int ndim = static_cast<int>(values.size());
  return Make<ShapeStructInfoNode>(std::move(values), ndim);
}
StructInfo ShapeSInfoOfRank(int ndim) { return Make<ShapeStructInfoNode>(std::nullopt, ndim); }
StructInfo TensorSInfo(std::vector<PrimExpr> shape, std::optional<DataType> dtype,
                       std::optional<Device> vdevice) {
  int ndim = static_cast<int>(shape.size());
  return Make<TensorStructInfoNode>(std::move(shape), dtype, ndim, vdevice);
}
StructInfo TensorSInfoOfRank(int ndim, std::optional<DataType> dtype,
                             std::optional<Device> vdevice) {
  return Make<TensorStructInfoNode>(std::nullopt, dtype, ndim, vdevice);
}
StructInfo TupleSInfo(std::vector<StructInfo> fields) {
  return Make<TupleStructInfoNode>(std::move(fields));
}
StructInfo FuncSInfo(std::vector<StructInfo> params, StructInfo ret, bool purity) {
  return Make<FuncStructInfoNode>(std::move(params), std::move(ret), purity);
}
StructInfo OpaqueFuncSInfo(StructInfo ret, bool purity) {
  return Make<FuncStructInfoNode>(std::nullopt, std::move(ret), purity);
}

std::string ToString(const StructInfo& sinfo) {
  if (!sinfo.defined()) return "<no struct info>";
  switch (sinfo.kind()) {
    case StructInfoKind::kObject:
      return "R.Object";
    case StructInfoKind::kPrim: {
      const auto* p = sinfo.as<PrimStructInfoNode>();
      if (p->value.defined() && !p->value.as<IntImmNode>() && !p->value.as<FloatImmNode>()) {
        return absl::StrCat("R.Prim(value=", ToString(p->value), ")");
      }
      return absl::StrCat("R.Prim(\"", p->dtype.ToString(), "\")");
    }
    case StructInfoKind::kShape: {
      const auto* s = sinfo.as<ShapeStructInfoNode>();
      if (s->values) {
        std::string d = Dims(*s->values);
        return absl::StrCat("R.Shape([", d.substr(1, d.size() - (s->values->size() == 1 ? 3 : 2)),
                            "])");
      }
      return s->ndim < 0 ? "R.Shape" : absl::StrCat("R.Shape(ndim=", s->ndim, ")");
    }
    case StructInfoKind::kTensor: {
      const auto* t = sinfo.as<TensorStructInfoNode>();
      std::string out = "R.Tensor(";
      bool any = false;
      if (t->shape) {
        out += Dims(*t->shape);
        any = true;
      }
      if (t->dtype) {
        absl::StrAppend(&out, any ? ", " : "", "\"", t->dtype->ToString(), "\"");
        any = true;
      }
      if (!t->shape && t->ndim >= 0) {
        absl::StrAppend(&out, any ? ", " : "", "ndim=", t->ndim);
        any = true;
      }
      if (t->vdevice) absl::StrAppend(&out, any ? ", " : "", "\"", t->vdevice->ToString(), "\"");
      return out + ")";
    }
    case StructInfoKind::kTuple: {
      const auto* t = sinfo.as<TupleStructInfoNode>();
      std::string out = "R.Tuple(";
      for (size_t i = 0; i < t->fields.size(); ++i)
        absl::StrAppend(&out, i ? ", " : "", ToString(t->fields[i]));
      return out + ")";
    }
    case StructInfoKind::kFunc: {
      const auto* f = sinfo.as<FuncStructInfoNode>();
      if (!f->params) return "R.Callable()";
      std::string out = "R.Callable((";
      for (size_t i = 0; i < f->params->size(); ++i)
        absl::StrAppend(&out, i ? ", " : "", ToString((*f->params)[i]));
      if (f->params->size() == 1) out += ",";
      absl::StrAppend(&out, "), ", ToString(f->ret));
      if (!f->purity) out += ", purity=False";
      return out + ")";
    }
  }
  return "?";
}

}  // namespace tether::compiler
