// Parsing of struct info annotations (R.Tensor, R.Tuple, R.Shape, R.Prim,
// R.Object, R.Callable) and of symbolic dimensions: ints, symbolic names,
// arithmetic, and quoted expressions ("n", "n * 2") that declare their names.
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "compiler/text/parser_internal.h"

namespace tether::compiler::text {

absl::StatusOr<StructInfo> Parser::ParseStructInfo(DimNames names) {
  const Token& start = Peek();
  if (!(start.IsName("R") && Peek(1).IsPunct(".") && Peek(2).kind == TokenKind::kName)) {
    return Expected("a struct info such as R.Tensor(...)");
  }
  Next();
  Next();
  const Token& kind_tok = Next();
  const std::string& kind = kind_tok.text;
  const bool has_args = TryPunct("(");

  // Collects positional and keyword arguments per kind.
  if (kind == "Object") {
    if (has_args) {
      if (absl::Status s = ExpectPunct(")", "(R.Object takes no arguments)"); !s.ok()) return s;
    }
    return ObjectSInfo();
  }
  if (kind == "Tuple") {
    std::vector<StructInfo> fields;
    while (has_args && !TryPunct(")")) {
      absl::StatusOr<StructInfo> f = ParseStructInfo(names);
      if (!f.ok()) return f.status();
      fields.push_back(*f);
      if (!Peek().IsPunct(")")) {
        if (absl::Status s = ExpectPunct(",", "or ')' in R.Tuple(...)"); !s.ok()) return s;
      }
    }
    return TupleSInfo(std::move(fields));
  }
  if (kind == "Callable") {
    if (!has_args || TryPunct(")")) return OpaqueFuncSInfo();
    if (absl::Status s = ExpectPunct("(", "to start the parameter list of R.Callable"); !s.ok())
      return s;
    std::vector<StructInfo> params;
    while (!TryPunct(")")) {
      absl::StatusOr<StructInfo> p = ParseStructInfo(names);
      if (!p.ok()) return p.status();
      params.push_back(*p);
      if (!Peek().IsPunct(")")) {
        if (absl::Status s = ExpectPunct(",", "or ')' in the parameters of R.Callable"); !s.ok())
          return s;
      }
    }
    if (absl::Status s = ExpectPunct(",", "after the parameters of R.Callable"); !s.ok()) return s;
    absl::StatusOr<StructInfo> ret = ParseStructInfo(names);
    if (!ret.ok()) return ret.status();
    bool purity = true;
    if (TryPunct(",")) {
      if (!(TryName("purity") && TryPunct("="))) return Expected("purity= in R.Callable");
      if (TryName("False"))
        purity = false;
      else if (!TryName("True"))
        return Expected("True or False for purity");
    }
    if (absl::Status s = ExpectPunct(")", "to close R.Callable(...)"); !s.ok()) return s;
    return FuncSInfo(std::move(params), *ret, purity);
  }
  if (kind != "Tensor" && kind != "Shape" && kind != "Prim") {
    return ErrorAt(kind_tok, absl::StrCat("expected a struct info (R.Tensor, R.Tuple, R.Shape, "
                                          "R.Prim, R.Object or R.Callable), got R.",
                                          kind));
  }

  std::optional<std::vector<PrimExpr>> dims;
  std::optional<DataType> dtype;
  std::optional<int64_t> ndim;
  std::optional<Device> vdevice;
  PrimExpr value;
  int positional = 0;
  while (has_args && !TryPunct(")")) {
    const Token& t = Peek();
    std::string key;
    if (t.kind == TokenKind::kName && Peek(1).IsPunct("=")) {
      key = t.text;
      Next();
      Next();
    } else if (kind == "Prim") {
      key = positional++ == 0 ? "dtype" : "";
    } else {
      key = positional == 0 && !Peek().IsPunct("(") && !Peek().IsPunct("[") ? "dtype"
            : positional == 0                                               ? "shape"
            : positional == 1                                               ? "dtype"
                                                                            : "vdevice";
      ++positional;
    }
    const Token& v = Peek();
    if (key == "shape" || (key == "values" && kind == "Shape")) {
      if (v.IsName("None")) {
        Next();
      } else {
        absl::StatusOr<std::vector<PrimExpr>> d = ParseDimList(names, true);
        if (!d.ok()) return d.status();
        dims = *std::move(d);
      }
    } else if (key == "dtype" && kind != "Shape") {
      if (v.kind != TokenKind::kString) return Expected(absl::StrCat("a dtype string in R.", kind));
      Next();
      if (!v.text.empty()) {
        absl::StatusOr<DataType> dt = DataType::Parse(v.text);
        if (!dt.ok()) return ErrorAt(v, absl::StrCat("expected a dtype, got \"", v.text, "\""));
        dtype = *dt;
      }
    } else if (key == "ndim") {
      bool neg = TryPunct("-");
      if (Peek().kind != TokenKind::kInt) return Expected("an integer ndim");
      int64_t n = Next().int_value;
      ndim = neg ? -n : n;
      if (*ndim < -1 || *ndim > 64)
        return ErrorAt(v, absl::StrCat("expected ndim in [-1, 64], got ", *ndim));
    } else if (key == "vdevice" && kind == "Tensor") {
      if (v.kind != TokenKind::kString) return Expected("a device string such as \"cuda:0\"");
      Next();
      absl::StatusOr<Device> d = Device::Parse(v.text);
      if (!d.ok()) return ErrorAt(v, absl::StrCat("expected a device, got \"", v.text, "\""));
      vdevice = *d;
    } else if (key == "value" && kind == "Prim") {
      absl::StatusOr<PrimExpr> pv = ParseDim(names, true);
      if (!pv.ok()) return pv.status();
      value = *pv;
    } else {
      return ErrorAt(
          t, key.empty() ? absl::StrCat("expected ')' after the arguments of R.", kind)
                         : absl::StrCat("expected an argument of R.", kind, ", got '", key, "'"));
    }
    if (!Peek().IsPunct(")")) {
      if (absl::Status s = ExpectPunct(",", absl::StrCat("or ')' in R.", kind, "(...)")); !s.ok()) {
        return s;
      }
    }
  }

  if (dims && ndim && *ndim != static_cast<int64_t>(dims->size())) {
    return ErrorAt(
        start, absl::StrCat("expected ndim=", dims->size(), " to match the shape, got ", *ndim));
  }
  if (kind == "Tensor") {
    if (dims) return TensorSInfo(*std::move(dims), dtype, vdevice);
    return TensorSInfoOfRank(ndim ? static_cast<int>(*ndim) : -1, dtype, vdevice);
  }
  if (kind == "Shape") {
    if (dims) return ShapeSInfo(*std::move(dims));
    return ShapeSInfoOfRank(ndim ? static_cast<int>(*ndim) : -1);
  }
  // Prim.
  if (!dtype && !value.defined())
    return ErrorAt(start, "expected a dtype or value= in R.Prim(...)");
  if (!dtype) return PrimSInfo(value.dtype(), value);
  if (value.defined() && value.dtype() != *dtype) {
    if (const auto* i = value.as<IntImmNode>())
      value = MakeConst(*dtype, static_cast<double>(i->value));
    else if (const auto* f = value.as<FloatImmNode>())
      value = MakeConst(*dtype, f->value);
    else
      value = Cast(*dtype, value);
  }
  return PrimSInfo(*dtype, value);
}

absl::StatusOr<std::vector<PrimExpr>> Parser::ParseDimList(DimNames names, bool allow_quoted,
                                                           bool* is_tuple) {
  const Token& open = Peek();
  if (!open.IsPunct("(") && !open.IsPunct("[")) return Expected("'(' or '[' to start a shape");
  Next();
  const char* close = open.IsPunct("(") ? ")" : "]";
  std::vector<PrimExpr> dims;
  bool comma = open.IsPunct("[");
  while (!TryPunct(close)) {
    absl::StatusOr<PrimExpr> d = ParseDim(names, allow_quoted);
    if (!d.ok()) return d.status();
    if (!d->dtype().is_int() && !d->dtype().is_uint()) {
      return ErrorAt(open, "expected integer dimensions in the shape, got a float");
    }
    dims.push_back(*d);
    if (!Peek().IsPunct(close)) {
      if (absl::Status s = ExpectPunct(",", absl::StrCat("or '", close, "' in the shape"));
          !s.ok()) {
        return s;
      }
      comma = true;
    }
  }
  if (is_tuple) *is_tuple = comma || dims.size() != 1;
  return dims;
}

absl::StatusOr<PrimExpr> Parser::ParseDim(DimNames names, bool allow_quoted) {
  if (allow_quoted && Peek().kind == TokenKind::kString) return ParseQuotedDim(Next());
  return ParseDimSum(names);
}

absl::StatusOr<PrimExpr> Parser::ParseQuotedDim(const Token& t) {
  absl::StatusOr<std::vector<Token>> sub = Lex(t.text, file_, t.line, t.column + 1, false);
  if (!sub.ok()) return sub.status();
  std::vector<Token> saved_tokens = std::move(tokens_);
  size_t saved_pos = pos_;
  tokens_ = *std::move(sub);
  pos_ = 0;
  absl::StatusOr<PrimExpr> d;
  if (Peek().kind == TokenKind::kEnd) {
    d = ErrorAt(t, "expected a dimension inside the quotes, got an empty string");
  } else {
    d = ParseDimSum(DimNames::kDeclare);
    if (d.ok() && Peek().kind != TokenKind::kEnd) d = Expected("the end of the quoted dimension");
  }
  tokens_ = std::move(saved_tokens);
  pos_ = saved_pos;
  return d;
}

absl::StatusOr<PrimExpr> Parser::ParseDimSum(DimNames names) {
  absl::StatusOr<PrimExpr> lhs = ParseDimProduct(names);
  if (!lhs.ok()) return lhs;
  PrimExpr e = *lhs;
  while (Peek().IsPunct("+") || Peek().IsPunct("-")) {
    bool add = Next().text == "+";
    absl::StatusOr<PrimExpr> rhs = ParseDimProduct(names);
    if (!rhs.ok()) return rhs;
    e = add ? Add(e, *rhs) : Sub(e, *rhs);
  }
  return e;
}

absl::StatusOr<PrimExpr> Parser::ParseDimProduct(DimNames names) {
  absl::StatusOr<PrimExpr> lhs = ParseDimUnary(names);
  if (!lhs.ok()) return lhs;
  PrimExpr e = *lhs;
  while (Peek().IsPunct("*") || Peek().IsPunct("//") || Peek().IsPunct("%") ||
         Peek().IsPunct("/")) {
    const Token& op = Next();
    absl::StatusOr<PrimExpr> rhs = ParseDimUnary(names);
    if (!rhs.ok()) return rhs;
    if (op.text != "*") {
      if (const int64_t* z = rhs->as_int(); z && *z == 0)
        return ErrorAt(op, "expected a non-zero divisor, got 0");
    }
    if (op.text == "*")
      e = Mul(e, *rhs);
    else if (op.text == "//")
      e = FloorDiv(e, *rhs);
    else if (op.text == "%")
      e = FloorMod(e, *rhs);
    else
      e = Div(e, *rhs);
  }
  return e;
}

absl::StatusOr<PrimExpr> Parser::ParseDimUnary(DimNames names) {
  // A loop, not recursion: "- - - 1" must not grow the stack.
  bool negate = false;
  while (TryPunct("-")) negate = !negate;
  absl::StatusOr<PrimExpr> v = ParseDimAtom(names);
  if (!v.ok() || !negate) return v;
  return Negate(*v);
}

absl::StatusOr<PrimExpr> Parser::Negate(const PrimExpr& v) {
  if (const auto* i = v.as<IntImmNode>()) {
    if (i->value == INT64_MIN) return Expected("an int64 value (the negation overflows)");
    return IntImm(v.dtype(), -i->value);
  }
  if (const auto* f = v.as<FloatImmNode>()) return FloatImm(v.dtype(), -f->value);
  return -v;
}

absl::StatusOr<PrimExpr> Parser::ParseDimAtom(DimNames names) {
  const Token& t = Peek();
  if (t.kind == TokenKind::kInt) {
    Next();
    return PrimExpr(t.int_value);
  }
  if (t.kind == TokenKind::kFloat) {
    Next();
    return FloatImm(DataType::Float(32), t.float_value);
  }
  if (t.IsPunct("(")) {
    Next();
    absl::StatusOr<PrimExpr> e = ParseDimSum(names);
    if (!e.ok()) return e;
    if (absl::Status s = ExpectPunct(")", "to close the parenthesized dimension"); !s.ok())
      return s;
    return e;
  }
  if (t.kind != TokenKind::kName)
    return Expected("a dimension (an integer or a symbolic variable)");
  Next();
  if (t.text == "True" || t.text == "False") return BoolImm(t.text == "True");
  std::string fn = t.text;
  if (t.text == "T" && TryPunct(".")) {
    absl::StatusOr<std::string> name = ExpectName("a dtype or function after 'T.'");
    if (!name.ok()) return name.status();
    fn = *name;
    if (absl::StatusOr<DataType> dt = DataType::Parse(fn); dt.ok()) {
      // T.int32(3), T.float16(1.5): a typed constant.
      if (absl::Status s = ExpectPunct("(", absl::StrCat("after T.", fn)); !s.ok()) return s;
      bool neg = TryPunct("-");
      const Token& n = Peek();
      PrimExpr c;
      if (n.kind == TokenKind::kInt)
        c = MakeConst(*dt, static_cast<double>(neg ? -n.int_value : n.int_value));
      else if (n.kind == TokenKind::kFloat)
        c = MakeConst(*dt, neg ? -n.float_value : n.float_value);
      else if (n.IsName("True") || n.IsName("False"))
        c = MakeConst(*dt, n.IsName("True") ? 1 : 0);
      else
        return Expected(absl::StrCat("a number in T.", fn, "(...)"));
      if (dt->is_int() && n.kind == TokenKind::kInt)
        c = IntImm(*dt, neg ? -n.int_value : n.int_value);
      Next();
      if (absl::Status s = ExpectPunct(")", absl::StrCat("to close T.", fn, "(...)")); !s.ok())
        return s;
      return c;
    }
  }
  if (fn == "floordiv" || fn == "floormod" || fn == "min" || fn == "max") {
    if (Peek().IsPunct("(")) {
      Next();
      absl::StatusOr<PrimExpr> a = ParseDimSum(names);
      if (!a.ok()) return a;
      if (absl::Status s = ExpectPunct(",", absl::StrCat("between the arguments of ", fn)); !s.ok())
        return s;
      absl::StatusOr<PrimExpr> b = ParseDimSum(names);
      if (!b.ok()) return b;
      if (absl::Status s = ExpectPunct(")", absl::StrCat("to close ", fn, "(...)")); !s.ok())
        return s;
      if (fn == "min") return Min(*a, *b);
      if (fn == "max") return Max(*a, *b);
      if (const int64_t* z = b->as_int(); z && *z == 0)
        return ErrorAt(t, "expected a non-zero divisor, got 0");
      return fn == "floordiv" ? FloorDiv(*a, *b) : FloorMod(*a, *b);
    }
  }
  if (t.text == "T")
    return ErrorAt(t, absl::StrCat("expected a dtype such as T.int64(...), got T.", fn));
  return SymVar(t, names);
}

absl::StatusOr<PrimExpr> Parser::SymVar(const Token& t, DimNames names) {
  auto it = sym_vars_.find(t.text);
  if (it != sym_vars_.end()) return PrimExpr(it->second);
  if (names == DimNames::kDeclare) {
    Var v(t.text);
    sym_vars_.emplace(t.text, v);
    return PrimExpr(v);
  }
  return ErrorAt(
      t, absl::StrCat("expected a declared symbolic variable, got '", t.text, "' (declare it with ",
                      t.text, " = T.int64() or quote it as \"", t.text, "\")"));
}

}  // namespace tether::compiler::text
