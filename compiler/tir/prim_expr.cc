// PrimExpr construction with on-the-spot constant folding, and printing.
#include "compiler/tir/prim_expr.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace tether::compiler {

int64_t FloorDivInt(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t FloorModInt(int64_t a, int64_t b) { return a - FloorDivInt(a, b) * b; }

namespace {

const double* AsFloat(const PrimExpr& e) {
  const auto* f = e.as<FloatImmNode>();
  return f ? &f->value : nullptr;
}

bool IsComparison(PrimKind k) { return k >= PrimKind::kEQ && k <= PrimKind::kGE; }

// A comparison of two constants folded, or nullopt for another kind.
template <typename T>
std::optional<bool> FoldComparison(PrimKind kind, T x, T y) {
  switch (kind) {
    case PrimKind::kEQ:
      return x == y;
    case PrimKind::kNE:
      return x != y;
    case PrimKind::kLT:
      return x < y;
    case PrimKind::kLE:
      return x <= y;
    case PrimKind::kGT:
      return x > y;
    case PrimKind::kGE:
      return x >= y;
    default:
      return std::nullopt;
  }
}

// The common dtype of a binary op: the wider of two ints, the float of a
// float and an int constant.
DataType Promote(const PrimExpr& a, const PrimExpr& b) {
  DataType da = a.dtype(), db = b.dtype();
  if (da == db) return da;
  if (da.is_float() && !db.is_float()) return da;
  if (db.is_float() && !da.is_float()) return db;
  return da.bits() >= db.bits() ? da : db;
}

PrimExpr ConvertTo(DataType dtype, PrimExpr e) {
  if (e.dtype() == dtype) return e;
  if (const int64_t* v = e.as_int()) return MakeConst(dtype, static_cast<double>(*v));
  if (const double* f = AsFloat(e); f && dtype.is_float()) return FloatImm(dtype, *f);
  return Cast(dtype, std::move(e));
}

}  // namespace

PrimExpr::PrimExpr(int64_t value) : node_(MakeRef<IntImmNode>(DataType::Int(64), value)) {}

DataType PrimExpr::dtype() const { return node_->dtype(); }
PrimKind PrimExpr::kind() const { return node_->kind(); }
const int64_t* PrimExpr::as_int() const {
  const auto* i = as<IntImmNode>();
  return i ? &i->value : nullptr;
}

Var::Var(std::string name, DataType dtype)
    : PrimExpr(Ref<const PrimExprNode>(MakeRef<PrimVarNode>(std::move(name), dtype))) {}

Buffer MakeBuffer(std::string name, DataType dtype, std::vector<PrimExpr> shape,
                  BufferNode::Scope scope, BufferNode::Layout layout) {
  return Buffer(MakeRef<BufferNode>(std::move(name), dtype, std::move(shape), scope, layout));
}

PrimExpr IntImm(DataType dtype, int64_t value) {
  return PrimExpr(Ref<const PrimExprNode>(MakeRef<IntImmNode>(dtype, value)));
}
PrimExpr FloatImm(DataType dtype, double value) {
  return PrimExpr(Ref<const PrimExprNode>(MakeRef<FloatImmNode>(dtype, value)));
}
PrimExpr BoolImm(bool value) { return IntImm(DataType::Bool(), value ? 1 : 0); }
PrimExpr MakeConst(DataType dtype, double value) {
  if (dtype.is_float() || dtype.is_bfloat16()) return FloatImm(dtype, value);
  if (dtype.is_bool()) return BoolImm(value != 0);
  return IntImm(dtype, static_cast<int64_t>(value));
}

PrimExpr MakeBinary(PrimKind kind, PrimExpr a, PrimExpr b) {
  DataType dt = Promote(a, b);
  a = ConvertTo(dt, std::move(a));
  b = ConvertTo(dt, std::move(b));
  const int64_t* ia = a.as_int();
  const int64_t* ib = b.as_int();
  const double* fa = AsFloat(a);
  const double* fb = AsFloat(b);
  DataType result =
      IsComparison(kind) || kind == PrimKind::kAnd || kind == PrimKind::kOr ? DataType::Bool() : dt;
  // Both constant: fold, unless the result leaves int64 (then the node
  // stays, as written; what sizes tensors refuses it with a message).
  if (ia && ib) {
    int64_t x = *ia, y = *ib, folded = 0;
    if (std::optional<bool> c = FoldComparison(kind, x, y)) return BoolImm(*c);
    const bool divides = y != 0 && !(y == -1 && x == INT64_MIN);
    switch (kind) {
      case PrimKind::kAdd:
        if (!__builtin_add_overflow(x, y, &folded)) return IntImm(dt, folded);
        break;
      case PrimKind::kSub:
        if (!__builtin_sub_overflow(x, y, &folded)) return IntImm(dt, folded);
        break;
      case PrimKind::kMul:
        if (!__builtin_mul_overflow(x, y, &folded)) return IntImm(dt, folded);
        break;
      case PrimKind::kDiv:
        if (divides) return IntImm(dt, x / y);
        break;
      case PrimKind::kFloorDiv:
        if (divides) return IntImm(dt, FloorDivInt(x, y));
        break;
      case PrimKind::kFloorMod:
        if (divides) return IntImm(dt, FloorModInt(x, y));
        break;
      case PrimKind::kMin:
        return IntImm(dt, std::min(x, y));
      case PrimKind::kMax:
        return IntImm(dt, std::max(x, y));
      case PrimKind::kAnd:
        return BoolImm(x && y);
      case PrimKind::kOr:
        return BoolImm(x || y);
      default:
        break;
    }
  }
  if (fa && fb) {
    double x = *fa, y = *fb;
    if (std::optional<bool> c = FoldComparison(kind, x, y)) return BoolImm(*c);
    switch (kind) {
      case PrimKind::kAdd:
        return FloatImm(dt, x + y);
      case PrimKind::kSub:
        return FloatImm(dt, x - y);
      case PrimKind::kMul:
        return FloatImm(dt, x * y);
      case PrimKind::kDiv:
        return FloatImm(dt, x / y);
      case PrimKind::kMin:
        return FloatImm(dt, std::min(x, y));
      case PrimKind::kMax:
        return FloatImm(dt, std::max(x, y));
      default:
        break;
    }
  }
  // Identities on ints (float identities are not exact under NaN/-0).
  if (!dt.is_float()) {
    switch (kind) {
      case PrimKind::kAdd:
        if (ia && *ia == 0) return b;
        if (ib && *ib == 0) return a;
        break;
      case PrimKind::kSub:
        if (ib && *ib == 0) return a;
        if (a.same_as(b)) return IntImm(dt, 0);
        break;
      case PrimKind::kMul:
        if (ia && *ia == 1) return b;
        if (ib && *ib == 1) return a;
        if ((ia && *ia == 0) || (ib && *ib == 0)) return IntImm(dt, 0);
        break;
      case PrimKind::kFloorDiv:
      case PrimKind::kDiv:
        if (ib && *ib == 1) return a;
        break;
      case PrimKind::kFloorMod:
        if (ib && *ib == 1) return IntImm(dt, 0);
        break;
      case PrimKind::kAnd:
        if (ia) return *ia ? b : BoolImm(false);
        if (ib) return *ib ? a : BoolImm(false);
        break;
      case PrimKind::kOr:
        if (ia) return *ia ? BoolImm(true) : b;
        if (ib) return *ib ? BoolImm(true) : a;
        break;
      default:
        break;
    }
  }
  return PrimExpr(
      Ref<const PrimExprNode>(MakeRef<BinaryNode>(kind, result, std::move(a), std::move(b))));
}

PrimExpr Add(PrimExpr a, PrimExpr b) {
  return MakeBinary(PrimKind::kAdd, std::move(a), std::move(b));
}
PrimExpr Sub(PrimExpr a, PrimExpr b) {
  return MakeBinary(PrimKind::kSub, std::move(a), std::move(b));
}
PrimExpr Mul(PrimExpr a, PrimExpr b) {
  return MakeBinary(PrimKind::kMul, std::move(a), std::move(b));
}
PrimExpr Div(PrimExpr a, PrimExpr b) {
  return MakeBinary(PrimKind::kDiv, std::move(a), std::move(b));
}
PrimExpr FloorDiv(PrimExpr a, PrimExpr b) {
  return MakeBinary(PrimKind::kFloorDiv, std::move(a), std::move(b));
}
PrimExpr FloorMod(PrimExpr a, PrimExpr b) {
  return MakeBinary(PrimKind::kFloorMod, std::move(a), std::move(b));
}
PrimExpr Min(PrimExpr a, PrimExpr b) {
  return MakeBinary(PrimKind::kMin, std::move(a), std::move(b));
}
PrimExpr Max(PrimExpr a, PrimExpr b) {
  return MakeBinary(PrimKind::kMax, std::move(a), std::move(b));
}
PrimExpr EQ(PrimExpr a, PrimExpr b) {
  return MakeBinary(PrimKind::kEQ, std::move(a), std::move(b));
}
PrimExpr NE(PrimExpr a, PrimExpr b) {
  return MakeBinary(PrimKind::kNE, std::move(a), std::move(b));
}
PrimExpr LT(PrimExpr a, PrimExpr b) {
  return MakeBinary(PrimKind::kLT, std::move(a), std::move(b));
}
PrimExpr LE(PrimExpr a, PrimExpr b) {
  return MakeBinary(PrimKind::kLE, std::move(a), std::move(b));
}
PrimExpr GT(PrimExpr a, PrimExpr b) {
  return MakeBinary(PrimKind::kGT, std::move(a), std::move(b));
}
PrimExpr GE(PrimExpr a, PrimExpr b) {
  return MakeBinary(PrimKind::kGE, std::move(a), std::move(b));
}
PrimExpr And(PrimExpr a, PrimExpr b) {
  return MakeBinary(PrimKind::kAnd, std::move(a), std::move(b));
}
PrimExpr Or(PrimExpr a, PrimExpr b) {
  return MakeBinary(PrimKind::kOr, std::move(a), std::move(b));
}

PrimExpr Not(PrimExpr a) {
  if (const int64_t* v = a.as_int()) return BoolImm(*v == 0);
  return PrimExpr(Ref<const PrimExprNode>(MakeRef<NotNode>(std::move(a))));
}

PrimExpr Select(PrimExpr cond, PrimExpr t, PrimExpr f) {
  if (const int64_t* v = cond.as_int()) return *v ? t : f;
  DataType dt = Promote(t, f);
  t = ConvertTo(dt, std::move(t));
  f = ConvertTo(dt, std::move(f));
  return PrimExpr(
      Ref<const PrimExprNode>(MakeRef<SelectNode>(std::move(cond), std::move(t), std::move(f))));
}

PrimExpr Cast(DataType dtype, PrimExpr value) {
  if (value.dtype() == dtype) return value;
  if (const int64_t* v = value.as_int(); v && !dtype.is_float() && !dtype.is_bfloat16())
    return IntImm(dtype, dtype.is_bool() ? (*v != 0) : *v);
  if (const double* f = AsFloat(value); f && dtype.is_float()) return FloatImm(dtype, *f);
  return PrimExpr(Ref<const PrimExprNode>(MakeRef<CastNode>(dtype, std::move(value))));
}

PrimExpr Load(Buffer buffer, std::vector<PrimExpr> indices) {
  return PrimExpr(
      Ref<const PrimExprNode>(MakeRef<LoadNode>(std::move(buffer), std::move(indices))));
}

PrimExpr Call(DataType dtype, std::string op, std::vector<PrimExpr> args) {
  return PrimExpr(
      Ref<const PrimExprNode>(MakeRef<PrimCallNode>(dtype, std::move(op), std::move(args))));
}

PrimExpr Product(const std::vector<PrimExpr>& dims) {
  PrimExpr p = int64_t{1};
  for (const PrimExpr& d : dims) p = p * d;
  return p;
}

const char* PrimKindName(PrimKind kind) {
  switch (kind) {
    case PrimKind::kIntImm:
      return "int";
    case PrimKind::kFloatImm:
      return "float";
    case PrimKind::kVar:
      return "var";
    case PrimKind::kAdd:
      return "add";
    case PrimKind::kSub:
      return "sub";
    case PrimKind::kMul:
      return "mul";
    case PrimKind::kDiv:
      return "div";
    case PrimKind::kFloorDiv:
      return "floordiv";
    case PrimKind::kFloorMod:
      return "floormod";
    case PrimKind::kMin:
      return "min";
    case PrimKind::kMax:
      return "max";
    case PrimKind::kEQ:
      return "eq";
    case PrimKind::kNE:
      return "ne";
    case PrimKind::kLT:
      return "lt";
    case PrimKind::kLE:
      return "le";
    case PrimKind::kGT:
      return "gt";
    case PrimKind::kGE:
      return "ge";
    case PrimKind::kAnd:
      return "and";
    case PrimKind::kOr:
      return "or";
    case PrimKind::kNot:
      return "not";
    case PrimKind::kSelect:
      return "select";
    case PrimKind::kCast:
      return "cast";
    case PrimKind::kLoad:
      return "load";
    case PrimKind::kCall:
      return "call";
  }
  return "?";
}

namespace {

// Binding strength for printing with minimal parentheses.
int Precedence(const PrimExpr& e) {
  switch (e.kind()) {
    case PrimKind::kOr:
      return 1;
    case PrimKind::kAnd:
      return 2;
    case PrimKind::kEQ:
    case PrimKind::kNE:
    case PrimKind::kLT:
    case PrimKind::kLE:
    case PrimKind::kGT:
    case PrimKind::kGE:
      return 3;
    case PrimKind::kAdd:
    case PrimKind::kSub:
      return 4;
    case PrimKind::kMul:
    case PrimKind::kDiv:
      return 5;
    default:
      return 6;
  }
}

const char* Infix(PrimKind k) {
  switch (k) {
    case PrimKind::kAdd:
      return " + ";
    case PrimKind::kSub:
      return " - ";
    case PrimKind::kMul:
      return " * ";
    case PrimKind::kDiv:
      return " / ";
    case PrimKind::kEQ:
      return " == ";
    case PrimKind::kNE:
      return " != ";
    case PrimKind::kLT:
      return " < ";
    case PrimKind::kLE:
      return " <= ";
    case PrimKind::kGT:
      return " > ";
    case PrimKind::kGE:
      return " >= ";
    case PrimKind::kAnd:
      return " and ";
    case PrimKind::kOr:
      return " or ";
    default:
      return nullptr;
  }
}

void Print(const PrimExpr& e, std::string* out);

void PrintOperand(const PrimExpr& e, int parent, bool right, std::string* out) {
  int p = Precedence(e);
  bool paren = p < parent || (right && p == parent);
  if (paren) out->push_back('(');
  Print(e, out);
  if (paren) out->push_back(')');
}

void Print(const PrimExpr& e, std::string* out) {
  if (!e.defined()) {
    out->append("<undefined>");
    return;
  }
  switch (e.kind()) {
    case PrimKind::kIntImm: {
      int64_t v = e.as<IntImmNode>()->value;
      if (e.dtype().is_bool()) {
        out->append(v ? "True" : "False");
      } else {
        // int64 is the default; other widths as TVMScript's typed constants.
        if (e.dtype() == DataType::Int(64)) {
          absl::StrAppend(out, v);
        } else {
          absl::StrAppend(out, "T.", e.dtype().ToString(), "(", v, ")");
        }
      }
      return;
    }
    case PrimKind::kFloatImm: {
      double v = e.as<FloatImmNode>()->value;
      // Six significant digits where they read back as the same value,
      // else all 17: kernels are told apart by their text (LegalizeOps' and
      // constant folding's deduplication), so 1e-05 and 1.0000001e-05 must
      // not print alike.
      std::string s = absl::StrCat(v);
      if (std::isfinite(v) && std::strtod(s.c_str(), nullptr) != v) {
        s = absl::StrFormat("%.17g", v);
      }
      if (std::isfinite(v) && s.find_first_of(".e") == std::string::npos) s += ".0";
      if (e.dtype() == DataType::Float(32)) {
        absl::StrAppend(out, s);
      } else {
        absl::StrAppend(out, "T.", e.dtype().ToString(), "(", s, ")");
      }
      return;
    }
    case PrimKind::kVar:
      out->append(e.as<PrimVarNode>()->name);
      return;
    case PrimKind::kNot:
      out->append("not ");
      PrintOperand(e.as<NotNode>()->a, 6, false, out);
      return;
    case PrimKind::kSelect: {
      const auto* s = e.as<SelectNode>();
      out->append("T.Select(");
      Print(s->cond, out);
      out->append(", ");
      Print(s->true_value, out);
      out->append(", ");
      Print(s->false_value, out);
      out->append(")");
      return;
    }
    case PrimKind::kCast:
      absl::StrAppend(out, "T.Cast(\"", e.dtype().ToString(), "\", ");
      Print(e.as<CastNode>()->value, out);
      out->append(")");
      return;
    case PrimKind::kLoad: {
      const auto* l = e.as<LoadNode>();
      absl::StrAppend(out, l->buffer->name, "[");
      for (size_t i = 0; i < l->indices.size(); ++i) {
        if (i) out->append(", ");
        Print(l->indices[i], out);
      }
      out->append("]");
      return;
    }
    case PrimKind::kCall: {
      const auto* c = e.as<PrimCallNode>();
      absl::StrAppend(out, "T.", c->op, "(");
      for (size_t i = 0; i < c->args.size(); ++i) {
        if (i) out->append(", ");
        Print(c->args[i], out);
      }
      out->append(")");
      return;
    }
    default: {
      const auto* b = e.as<BinaryNode>();
      if (const char* op = Infix(e.kind())) {
        int p = Precedence(e);
        PrintOperand(b->a, p, false, out);
        out->append(op);
        PrintOperand(b->b, p, true, out);
      } else {
        absl::StrAppend(out, PrimKindName(e.kind()), "(");
        Print(b->a, out);
        out->append(", ");
        Print(b->b, out);
        out->append(")");
      }
      return;
    }
  }
}

}  // namespace

std::string ToString(const PrimExpr& e) {
  std::string out;
  Print(e, &out);
  return out;
}

}  // namespace tether::compiler
