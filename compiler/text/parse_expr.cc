// Parsing of Relax expressions: variables, tuples, indexing, operator calls
// (R.<path>(...) maps to the operator "relax.<path>"), the builtins with
// their own syntax (R.const, R.shape, R.prim_value, R.str, R.dtype,
// R.match_cast, the packed and call_tir calls) and keyword attributes.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "compiler/text/parser_internal.h"
#include "runtime/core/scalar.h"

namespace tether::compiler::text {
namespace {

bool IsStructInfoName(absl::string_view s) {
  return s == "Tensor" || s == "Tuple" || s == "Shape" || s == "Prim" || s == "Object" ||
         s == "Callable";
}

bool IsPackedOrTir(absl::string_view path) {
  return path == "call_dps_packed" || path == "call_pure_packed" || path == "call_tir" ||
         path == "call_tir_inplace" || path == "call_tir_with_grad";
}

// The nested-list value of R.const, flattened.
struct ConstValue {
  std::vector<int64_t> shape;
  std::vector<double> reals;
  std::vector<int64_t> ints;
  bool any_float = false;
  bool all_bool = true;
};

template <typename T>
void AppendAs(const ConstValue& v, std::vector<uint8_t>* bytes) {
  size_t n = v.reals.size();
  bytes->resize(n * sizeof(T));
  for (size_t i = 0; i < n; ++i) {
    T x = v.any_float ? static_cast<T>(v.reals[i]) : static_cast<T>(v.ints[i]);
    std::memcpy(bytes->data() + i * sizeof(T), &x, sizeof(T));
  }
}

}  // namespace

absl::StatusOr<Expr> Parser::ParseValue() {
  const Token& t = Peek();
  bool number =
      t.kind == TokenKind::kInt || t.kind == TokenKind::kFloat ||
      (t.IsPunct("-") && (Peek(1).kind == TokenKind::kInt || Peek(1).kind == TokenKind::kFloat));
  bool sym = t.kind == TokenKind::kName && !Peek(1).IsPunct(".") && !Peek(1).IsPunct("(") &&
             !LookupVar(t.text).defined() && sym_vars_.count(t.text);
  if (number || sym || (t.IsName("T") && Peek(1).IsPunct("."))) {
    absl::StatusOr<PrimExpr> v = ParseDim(DimNames::kExisting, false);
    if (!v.ok()) return v.status();
    return WithSpan(MakePrimValue(*v), SpanOf(t));
  }
  if (t.kind == TokenKind::kString) {
    Next();
    return WithSpan(MakeStringImm(t.text), SpanOf(t));
  }
  return ParsePostfix();
}

absl::StatusOr<Expr> Parser::ParsePostfix() {
  absl::StatusOr<Expr> e = ParseAtom();
  if (!e.ok()) return e.status();
  Expr expr = *e;
  while (true) {
    const Token& t = Peek();
    if (t.IsPunct("[")) {
      Next();
      const Token& idx = Peek();
      if (idx.kind != TokenKind::kInt) return Expected("a non-negative integer index after '['");
      Next();
      if (idx.int_value > (int64_t{1} << 30))
        return ErrorAt(idx, "expected a tuple index below 2^30");
      if (absl::Status s = ExpectPunct("]", "after the tuple index"); !s.ok()) return s;
      expr = WithSpan(MakeTupleGetItem(expr, static_cast<int>(idx.int_value)), SpanOf(t));
    } else if (t.IsPunct("(")) {
      absl::StatusOr<Expr> call = ParseCallArgs(t, expr, false);
      if (!call.ok()) return call.status();
      expr = *call;
    } else {
      return expr;
    }
  }
}

absl::StatusOr<Expr> Parser::ParseAtom() {
  const Token& t = Peek();
  switch (t.kind) {
    case TokenKind::kPunct:
      if (t.IsPunct("(")) return ParseTupleOrShape();
      if (t.IsPunct("[")) {
        return ErrorAt(t,
                       "expected an expression, got '[' (lists are only allowed in R.const, "
                       "R.shape and keyword arguments)");
      }
      return Expected("an expression");
    case TokenKind::kString:
    case TokenKind::kInt:
    case TokenKind::kFloat:
      return ParseValue();
    case TokenKind::kName:
      break;
    default:
      return Expected("an expression");
  }
  Next();
  if (t.text == "R" && Peek().IsPunct(".")) {
    std::string path;
    while (TryPunct(".")) {
      absl::StatusOr<std::string> part = ExpectName("a name after 'R.'");
      if (!part.ok()) return part.status();
      absl::StrAppend(&path, path.empty() ? "" : ".", *part);
    }
    return ParseRCall(t, path);
  }
  if ((t.text == "cls" || (!class_name_.empty() && t.text == class_name_)) && Peek().IsPunct(".")) {
    Next();
    const Token& name_tok = Peek();
    absl::StatusOr<std::string> name =
        ExpectName(absl::StrCat("a function name after '", t.text, ".'"));
    if (!name.ok()) return name.status();
    auto it = global_vars_.find(*name);
    if (it == global_vars_.end()) it = global_vars_.emplace(*name, MakeGlobalVar(*name)).first;
    global_refs_.emplace_back(*name, name_tok);
    return it->second;
  }
  if (t.text == "metadata") {
    return ErrorAt(t,
                   "expected an inline R.const(...), got a metadata[...] reference: large "
                   "constants printed as metadata are not supported in text");
  }
  if (t.text == "True" || t.text == "False") {
    return WithSpan(MakePrimValue(BoolImm(t.text == "True")), SpanOf(t));
  }
  if (Expr v = LookupVar(t.text); v.defined()) return v;
  if (auto it = sym_vars_.find(t.text); it != sym_vars_.end()) {
    return WithSpan(MakePrimValue(it->second), SpanOf(t));
  }
  return ErrorAt(t, absl::StrCat("expected a defined variable, got '", t.text, "' (undefined)"));
}

absl::StatusOr<Expr> Parser::ParseTupleOrShape() {
  const Token& open = Peek();
  if (Peek(1).IsPunct(")")) {
    Next();
    Next();
    return WithSpan(MakeTuple({}), SpanOf(open));
  }
  // A tuple of dimensions is a shape; anything else is a Relax tuple.
  size_t saved = pos_;
  bool is_tuple = false;
  absl::StatusOr<std::vector<PrimExpr>> dims = ParseDimList(DimNames::kExisting, false, &is_tuple);
  if (dims.ok() && is_tuple) return WithSpan(MakeShapeExpr(*std::move(dims)), SpanOf(open));
  pos_ = saved;
  Next();
  std::vector<Expr> fields;
  bool comma = false;
  while (!TryPunct(")")) {
    absl::StatusOr<Expr> f = ParseValue();
    if (!f.ok()) return f.status();
    fields.push_back(*f);
    if (!Peek().IsPunct(")")) {
      if (absl::Status s = ExpectPunct(",", "or ')' in a tuple"); !s.ok()) return s;
      comma = true;
    }
  }
  if (fields.size() == 1 && !comma) return fields[0];  // parentheses around one value
  return WithSpan(MakeTuple(std::move(fields)), SpanOf(open));
}

absl::StatusOr<Expr> Parser::ParseRCall(const Token& start, const std::string& path) {
  if (IsStructInfoName(path)) {
    return ErrorAt(start, absl::StrCat("expected an expression, got the struct info R.", path));
  }
  if (path == "const") return ParseConst(start);
  if (path == "match_cast") {
    return ErrorAt(start,
                   "expected an expression, got R.match_cast: it is only allowed as the "
                   "whole value of a binding");
  }
  if (path == "output" || path == "dataflow" || path == "func_attr") {
    return ErrorAt(start, absl::StrCat("expected an expression, got the statement R.", path));
  }
  if (path == "shape" || path == "prim_value" || path == "str" || path == "dtype") {
    if (absl::Status s = ExpectPunct("(", absl::StrCat("after R.", path)); !s.ok()) return s;
    Expr e;
    if (path == "shape") {
      absl::StatusOr<std::vector<PrimExpr>> dims = ParseDimList(DimNames::kExisting, false);
      if (!dims.ok()) return dims.status();
      e = MakeShapeExpr(*std::move(dims));
    } else if (path == "prim_value") {
      absl::StatusOr<PrimExpr> v = ParseDim(DimNames::kExisting, false);
      if (!v.ok()) return v.status();
      e = MakePrimValue(*v);
    } else {
      if (Peek().kind != TokenKind::kString)
        return Expected(absl::StrCat("a string in R.", path, "(...)"));
      const Token& str = Next();
      if (path == "str") {
        e = MakeStringImm(str.text);
      } else {
        absl::StatusOr<DataType> dt = DataType::Parse(str.text);
        if (!dt.ok()) return ErrorAt(str, absl::StrCat("expected a dtype, got \"", str.text, "\""));
        e = MakeDataTypeImm(*dt);
      }
    }
    if (absl::Status s = ExpectPunct(")", absl::StrCat("to close R.", path, "(...)")); !s.ok())
      return s;
    return WithSpan(e, SpanOf(start));
  }
  if (!Peek().IsPunct("(")) return Expected(absl::StrCat("'(' to call R.", path));
  return ParseCallArgs(start, GetOp(absl::StrCat("relax.", path)), IsPackedOrTir(path));
}

absl::StatusOr<Expr> Parser::ParseCallArgs(const Token& start, Expr op, bool packed) {
  if (absl::Status s = ExpectPunct("(", "to start the call arguments"); !s.ok()) return s;
  std::vector<Expr> args;
  Attrs attrs;
  std::vector<StructInfo> sinfo_args;
  bool keywords = false;
  const OpNode* op_node = op.as<OpNode>();
  bool is_tir = op_node && op_node->name.rfind("relax.call_tir", 0) == 0;
  Expr tir_vars;
  while (!TryPunct(")")) {
    const Token& t = Peek();
    if (t.kind == TokenKind::kName && Peek(1).IsPunct("=")) {
      keywords = true;
      Next();
      Next();
      if (attrs.count(t.text))
        return ErrorAt(t, absl::StrCat("keyword '", t.text, "' is given twice"));
      if (t.text == "out_sinfo" || t.text == "sinfo_args") {
        bool list = TryPunct("[");
        while (true) {
          if (list && TryPunct("]")) break;
          absl::StatusOr<StructInfo> s = ParseStructInfo(DimNames::kExisting);
          if (!s.ok()) return s.status();
          sinfo_args.push_back(*s);
          if (!list) break;
          if (!Peek().IsPunct("]")) {
            if (absl::Status st = ExpectPunct(",", "or ']' in the struct info list"); !st.ok())
              return st;
          }
        }
      } else if (is_tir && t.text == "tir_vars") {
        // TVM's keyword form of the third argument.
        absl::StatusOr<Expr> v = ParseValue();
        if (!v.ok()) return v.status();
        tir_vars = *v;
      } else {
        absl::StatusOr<std::optional<AttrValue>> v = ParseAttrValue();
        if (!v.ok()) return v.status();
        if (v->has_value()) attrs[t.text] = **v;
      }
    } else {
      if (keywords)
        return ErrorAt(t, "expected a keyword argument (name=value) after keyword arguments");
      if (packed && args.empty() && t.kind == TokenKind::kString) {
        Next();
        args.push_back(WithSpan(MakeExternFunc(t.text), SpanOf(t)));
      } else {
        absl::StatusOr<Expr> a = ParseValue();
        if (!a.ok()) return a.status();
        if (is_tir && args.empty()) {
          if (const auto* gv = a->as<GlobalVarNode>()) call_tir_refs_.insert(gv->name_hint);
        }
        args.push_back(*a);
      }
    }
    if (!Peek().IsPunct(")")) {
      if (absl::Status s = ExpectPunct(",", "or ')' between call arguments"); !s.ok()) return s;
    }
  }
  if (tir_vars.defined()) {
    if (args.size() != 2) {
      return ErrorAt(start, "expected tir_vars= only with a kernel and a tuple of arguments");
    }
    args.push_back(tir_vars);
  }
  return WithSpan(MakeCall(op, std::move(args), std::move(attrs), std::move(sinfo_args)),
                  SpanOf(start));
}

absl::StatusOr<Expr> Parser::ParseConst(const Token& start) {
  if (absl::Status s = ExpectPunct("(", "after R.const"); !s.ok()) return s;
  ConstValue value;
  // Nested lists: track the extent of each level; every list at a level must agree.
  std::vector<int64_t> counts;
  std::vector<std::optional<int64_t>> extents;
  int depth = 0;
  bool done = false;
  const Token& value_tok = Peek();
  while (!done) {
    const Token& t = Peek();
    if (t.IsPunct("[")) {
      Next();
      if (depth > 32) return ErrorAt(t, "expected at most 32 nested lists in R.const");
      if (depth == static_cast<int>(extents.size())) {
        if (!value.reals.empty()) {
          return ErrorAt(t, "expected a number in R.const (the nested lists are not rectangular)");
        }
        extents.emplace_back();
      }
      counts.resize(depth + 1);
      counts[depth] = 0;
      ++depth;
      continue;
    }
    if (t.IsPunct("]")) {
      if (depth == 0) return Expected("a value in R.const");
      Next();
      --depth;
      if (extents[depth] && *extents[depth] != counts[depth]) {
        return ErrorAt(t, absl::StrCat("expected ", *extents[depth],
                                       " elements in this list of "
                                       "R.const (the nested lists are not rectangular), got ",
                                       counts[depth]));
      }
      extents[depth] = counts[depth];
    } else {
      if (depth != static_cast<int>(extents.size())) {
        return ErrorAt(t, "expected '[' in R.const (the nested lists are not rectangular)");
      }
      bool neg = t.IsPunct("-");
      if (neg) Next();
      const Token& n = Peek();
      if (n.kind == TokenKind::kInt) {
        value.ints.push_back(neg ? -n.int_value : n.int_value);
        value.reals.push_back(static_cast<double>(value.ints.back()));
        value.all_bool = false;
      } else if (n.kind == TokenKind::kFloat || n.IsName("inf") || n.IsName("nan")) {
        double v = n.kind == TokenKind::kFloat ? n.float_value
                   : n.text == "inf"           ? HUGE_VAL
                                               : std::nan("");
        value.reals.push_back(neg ? -v : v);
        value.ints.push_back(0);
        value.any_float = true;
        value.all_bool = false;
      } else if (!neg && (n.IsName("True") || n.IsName("False"))) {
        value.ints.push_back(n.IsName("True") ? 1 : 0);
        value.reals.push_back(static_cast<double>(value.ints.back()));
      } else {
        return Expected("a number, True, False or '[' in R.const");
      }
      Next();
    }
    if (depth > 0) {
      ++counts[depth - 1];
      if (!Peek().IsPunct("]")) {
        if (absl::Status s = ExpectPunct(",", "or ']' in the R.const list"); !s.ok()) return s;
      }
    } else {
      done = true;
    }
  }
  for (const auto& e : extents) value.shape.push_back(*e);
  std::optional<DataType> dtype;
  while (TryPunct(",")) {
    if (Peek().IsPunct(")")) break;
    if (Peek().IsName("dtype") && Peek(1).IsPunct("=")) {
      Next();
      Next();
    }
    const Token& d = Peek();
    if (d.kind != TokenKind::kString) return Expected("a dtype string in R.const");
    Next();
    absl::StatusOr<DataType> dt = DataType::Parse(d.text);
    if (!dt.ok()) return ErrorAt(d, absl::StrCat("expected a dtype, got \"", d.text, "\""));
    dtype = *dt;
  }
  if (absl::Status s = ExpectPunct(")", "to close R.const(...)"); !s.ok()) return s;
  if (!dtype) {
    // TVM's relax.const: a Python int is int32, a float float32. An int
    // that int32 cannot hold keeps int64 rather than wrap.
    bool fits_int32 = true;
    for (int64_t i : value.ints) {
      if (i < INT32_MIN || i > INT32_MAX) fits_int32 = false;
    }
    dtype = value.any_float                          ? DataType::Float(32)
            : value.all_bool && !value.reals.empty() ? DataType::Bool()
            : fits_int32                             ? DataType::Int(32)
                                                     : DataType::Int(64);
  }
  std::vector<uint8_t> bytes;
  DataType dt = *dtype;
  if (dt.lanes() != 1)
    return ErrorAt(value_tok, "expected a scalar dtype in R.const, got a vector dtype");
  if (value.any_float && !dt.is_float()) {
    return ErrorAt(value_tok, absl::StrCat("expected integer values for R.const of dtype ",
                                           dt.ToString(), ", got a float"));
  }
  bool known = false;
  DispatchScalarType(dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, Bool>) {
      AppendAs<uint8_t>(value, &bytes);
      known = true;
    } else if constexpr (std::is_arithmetic_v<T>) {
      AppendAs<T>(value, &bytes);
      known = true;
    }
  });
  if (!known) {
    return ErrorAt(value_tok, absl::StrCat("expected a dtype R.const can hold in text (float32, "
                                           "float64, intN, uintN, bool), got ",
                                           dt.ToString()));
  }
  absl::StatusOr<Tensor> tensor = Tensor::FromBytes(value.shape, dt, bytes.data(), bytes.size());
  if (!tensor.ok()) {
    return ErrorAt(start, absl::StrCat("cannot build the constant: ", tensor.status().message()));
  }
  return WithSpan(MakeConstant(*std::move(tensor)), SpanOf(start));
}

absl::StatusOr<Expr> Parser::ParseMatchCast(StructInfo* sinfo) {
  Next();
  Next();
  Next();
  if (absl::Status s = ExpectPunct("(", "after R.match_cast"); !s.ok()) return s;
  absl::StatusOr<Expr> value = ParseValue();
  if (!value.ok()) return value.status();
  if (absl::Status s = ExpectPunct(",", "after the value of R.match_cast"); !s.ok()) return s;
  absl::StatusOr<StructInfo> target = ParseStructInfo(DimNames::kDeclare);
  if (!target.ok()) return target.status();
  if (absl::Status s = ExpectPunct(")", "to close R.match_cast(...)"); !s.ok()) return s;
  *sinfo = *target;
  return *value;
}

absl::StatusOr<std::optional<AttrValue>> Parser::ParseAttrValue() {
  const Token& t = Peek();
  if (t.IsName("None")) {
    Next();
    return std::optional<AttrValue>();
  }
  if (t.IsName("True") || t.IsName("False")) {
    Next();
    return std::optional<AttrValue>(AttrValue(t.text == "True"));
  }
  if (t.kind == TokenKind::kString) {
    Next();
    return std::optional<AttrValue>(AttrValue(t.text));
  }
  if (t.IsName("R") && Peek(1).IsPunct(".") && Peek(2).IsName("dtype")) {
    Next();
    Next();
    Next();
    if (absl::Status s = ExpectPunct("(", "after R.dtype"); !s.ok()) return s;
    const Token& d = Peek();
    if (d.kind != TokenKind::kString) return Expected("a dtype string in R.dtype(...)");
    Next();
    absl::StatusOr<DataType> dt = DataType::Parse(d.text);
    if (!dt.ok()) return ErrorAt(d, absl::StrCat("expected a dtype, got \"", d.text, "\""));
    if (absl::Status s = ExpectPunct(")", "to close R.dtype(...)"); !s.ok()) return s;
    return std::optional<AttrValue>(AttrValue(*dt));
  }
  if (t.IsPunct("[") || t.IsPunct("(")) {
    if (Peek(1).IsPunct(t.IsPunct("[") ? "]" : ")")) {
      Next();
      Next();
      return std::optional<AttrValue>(AttrValue(std::vector<int64_t>{}));
    }
    absl::StatusOr<std::vector<PrimExpr>> dims = ParseDimList(DimNames::kExisting, false);
    if (!dims.ok()) return dims.status();
    std::vector<int64_t> ints;
    for (const PrimExpr& d : *dims) {
      if (const int64_t* v = d.as_int(); v && d.dtype() == DataType::Int(64)) ints.push_back(*v);
    }
    if (ints.size() == dims->size()) return std::optional<AttrValue>(AttrValue(std::move(ints)));
    return std::optional<AttrValue>(AttrValue(*std::move(dims)));
  }
  bool neg = t.IsPunct("-");
  const Token& n = Peek(neg ? 1 : 0);
  if (n.kind == TokenKind::kInt) {
    pos_ += neg ? 2 : 1;
    return std::optional<AttrValue>(AttrValue(neg ? -n.int_value : n.int_value));
  }
  if (n.kind == TokenKind::kFloat) {
    pos_ += neg ? 2 : 1;
    return std::optional<AttrValue>(AttrValue(neg ? -n.float_value : n.float_value));
  }
  return Expected("an attribute value (a number, True/False, a string, a list or R.dtype(...))");
}

}  // namespace tether::compiler::text
