// The Relax text printer: functions, bindings with struct info annotations,
// expressions, constants (inline or as metadata references) and symbolic
// dimensions (quoted in signatures, declared with T.int64() in bodies).
#include "compiler/text/printer.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <span>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "compiler/text/lexer.h"

namespace tether::compiler {
namespace {

// The fewest digits that read back as the same value (as float when
// `single`), always with a '.' or exponent so it lexes as a float.
std::string FormatFloat(double v, bool single) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof(buf), "%.*g", prec, v);
    double back = std::strtod(buf, nullptr);
    if (single ? static_cast<float>(back) == static_cast<float>(v) : back == v) break;
  }
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

bool IsKeyword(const std::string& s) {
  static const auto* kWords = new std::set<std::string>{
      "R",      "T",   "I",        "cls",      "metadata", "True",  "False",  "None", "def",
      "return", "if",  "else",     "elif",     "with",     "class", "import", "from", "in",
      "and",    "or",  "not",      "lambda",   "for",      "while", "pass",   "as",   "is",
      "inf",    "nan", "floordiv", "floormod", "min",      "max"};
  return kWords->count(s) > 0;
}

class Printer {
 public:
  std::string Module(const IRModule& module) {
    std::string out = "@I.ir_module\nclass Module:\n";
    bool first = true;
    for (const auto& [name, func] : module.functions) {
      if (!first) out += "\n";
      first = false;
      if (const auto* f = func.as<FunctionNode>()) {
        out += Function(name, *f, 1);
      } else if (const auto* e = func.as<ExternFuncNode>()) {
        absl::StrAppend(&out, "    # ", name, ": extern function \"",
                        absl::CEscape(e->global_symbol), "\" (not representable in text)\n");
      }
    }
    for (const auto& [name, kernel] : module.kernels) {
      if (!first) out += "\n";
      first = false;
      for (absl::string_view line : absl::StrSplit(ToString(kernel), '\n')) {
        if (!line.empty()) absl::StrAppend(&out, "    ", line, "\n");
      }
    }
    return out;
  }

  std::string Function(const std::string& name, const FunctionNode& f, int indent) {
    names_.clear();
    used_.clear();
    syms_.clear();
    sym_order_.clear();
    std::string pad(indent * 4, ' ');
    std::string head = absl::StrCat(pad, f.is_pure ? "@R.function\n" : "@R.function(pure=False)\n",
                                    pad, "def ", name, "(");
    quote_dims_ = true;
    for (size_t i = 0; i < f.params.size(); ++i) {
      const Expr& p = f.params[i];
      absl::StrAppend(&head, i ? ", " : "", Define(p), ": ", SInfo(p.struct_info()));
    }
    head += ")";
    if (f.ret_struct_info.defined()) absl::StrAppend(&head, " -> ", SInfo(f.ret_struct_info));
    head += ":\n";
    quote_dims_ = false;

    std::string body;
    std::string inner(indent * 4 + 4, ' ');
    if (!f.attrs.empty()) {
      absl::StrAppend(&body, inner, "R.func_attr({");
      bool first = true;
      for (const auto& [k, v] : f.attrs) {
        absl::StrAppend(&body, first ? "" : ", ", "\"", text::EscapeString(k), "\": ", Attr(v));
        first = false;
      }
      body += "})\n";
    }
    Expr result = f.body;
    if (const auto* seq = f.body.as<SeqExprNode>()) {
      for (const BindingBlock& block : seq->blocks) body += Block(block, indent + 1);
      result = seq->body;
    }
    absl::StrAppend(&body, inner, "return ", Inline(result), "\n");
    std::string decls;
    for (const std::string& s : sym_order_) absl::StrAppend(&decls, inner, s, " = T.int64()\n");
    return head + decls + body;
  }

  std::string Inline(const Expr& e) {
    if (!e.defined()) return "None";
    switch (e.kind()) {
      case ExprKind::kVar:
      case ExprKind::kDataflowVar: {
        auto it = names_.find(e.get());
        return it != names_.end() ? it->second : e.as<VarNode>()->name_hint;
      }
      case ExprKind::kConstant:
        return Constant(*e.as<ConstantNode>());
      case ExprKind::kPrimValue:
        return absl::StrCat("R.prim_value(", Prim(e.as<PrimValueNode>()->value), ")");
      case ExprKind::kStringImm:
        return absl::StrCat("R.str(\"", text::EscapeString(e.as<StringImmNode>()->value), "\")");
      case ExprKind::kDataTypeImm:
        return absl::StrCat("R.dtype(\"", e.as<DataTypeImmNode>()->value.ToString(), "\")");
      case ExprKind::kShapeExpr:
        return absl::StrCat("R.shape(", Dims(e.as<ShapeExprNode>()->values, '['), ")");
      case ExprKind::kTuple: {
        const auto& fields = e.as<TupleNode>()->fields;
        std::string s = "(";
        for (size_t i = 0; i < fields.size(); ++i)
          absl::StrAppend(&s, i ? ", " : "", Inline(fields[i]));
        return s + (fields.size() == 1 ? ",)" : ")");
      }
      case ExprKind::kTupleGetItem: {
        const auto* t = e.as<TupleGetItemNode>();
        return absl::StrCat(Inline(t->tuple), "[", t->index, "]");
      }
      case ExprKind::kCall:
        return Call(*e.as<CallNode>());
      case ExprKind::kGlobalVar:
        return absl::StrCat("cls.", e.as<GlobalVarNode>()->name_hint);
      case ExprKind::kExternFunc:
        return absl::StrCat("\"", text::EscapeString(e.as<ExternFuncNode>()->global_symbol), "\"");
      case ExprKind::kOp: {
        const std::string& n = e.as<OpNode>()->name;
        return absl::StrCat("R.", n.rfind("relax.", 0) == 0 ? n.substr(6) : n);
      }
      case ExprKind::kIf:
        return "R.If(...)  # control flow prints as a binding";
      case ExprKind::kSeqExpr:
        return Inline(e.as<SeqExprNode>()->body);
      case ExprKind::kFunction:
        return "R.function(...)  # nested functions are not representable in text";
    }
    return "?";
  }

  std::string SInfo(const StructInfo& s) {
    if (!s.defined()) return "R.Object";
    switch (s.kind()) {
      case StructInfoKind::kObject:
        return "R.Object";
      case StructInfoKind::kPrim: {
        const auto* p = s.as<PrimStructInfoNode>();
        if (!p->value.defined()) return absl::StrCat("R.Prim(\"", p->dtype.ToString(), "\")");
        return absl::StrCat("R.Prim(\"", p->dtype.ToString(), "\", value=", Dim(p->value), ")");
      }
      case StructInfoKind::kShape: {
        const auto* sh = s.as<ShapeStructInfoNode>();
        if (sh->values) return absl::StrCat("R.Shape(", Dims(*sh->values, '['), ")");
        return sh->ndim < 0 ? "R.Shape" : absl::StrCat("R.Shape(ndim=", sh->ndim, ")");
      }
      case StructInfoKind::kTensor: {
        const auto* t = s.as<TensorStructInfoNode>();
        std::vector<std::string> parts;
        if (t->shape) parts.push_back(Dims(*t->shape, '('));
        if (t->dtype) parts.push_back(absl::StrCat("dtype=\"", t->dtype->ToString(), "\""));
        if (!t->shape && t->ndim >= 0) parts.push_back(absl::StrCat("ndim=", t->ndim));
        if (t->vdevice) parts.push_back(absl::StrCat("vdevice=\"", t->vdevice->ToString(), "\""));
        if (parts.empty()) return "R.Tensor";
        return absl::StrCat("R.Tensor(", absl::StrJoin(parts, ", "), ")");
      }
      case StructInfoKind::kTuple: {
        const auto* t = s.as<TupleStructInfoNode>();
        std::string out = "R.Tuple(";
        for (size_t i = 0; i < t->fields.size(); ++i)
          absl::StrAppend(&out, i ? ", " : "", SInfo(t->fields[i]));
        return out + ")";
      }
      case StructInfoKind::kFunc: {
        const auto* f = s.as<FuncStructInfoNode>();
        if (!f->params) return "R.Callable";
        std::string out = "R.Callable((";
        for (size_t i = 0; i < f->params->size(); ++i) {
          absl::StrAppend(&out, i ? ", " : "", SInfo((*f->params)[i]));
        }
        if (f->params->size() == 1) out += ",";
        absl::StrAppend(&out, "), ", SInfo(f->ret), f->purity ? "" : ", purity=False", ")");
        return out;
      }
    }
    return "R.Object";
  }

 private:
  std::string Define(const Expr& var, const std::string& forced = "") {
    std::string name = forced;
    if (name.empty()) {
      std::string hint = var.as<VarNode>() ? var.as<VarNode>()->name_hint : "v";
      for (char& c : hint) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
      }
      if (hint.empty() || std::isdigit(static_cast<unsigned char>(hint[0]))) hint = "v" + hint;
      if (IsKeyword(hint)) hint += "_";
      name = hint;
      for (int i = 1; used_.count(name); ++i) name = absl::StrCat(hint, i);
    }
    used_.insert(name);
    names_[var.get()] = name;
    return name;
  }

  std::string Block(const BindingBlock& block, int indent) {
    std::string pad(indent * 4, ' ');
    if (!block.is_dataflow) {
      std::string out;
      for (const Binding& b : block.bindings) out += BindingText(b, indent);
      return out;
    }
    std::string out = absl::StrCat(pad, "with R.dataflow():\n");
    std::vector<std::string> outputs;
    for (const Binding& b : block.bindings) {
      out += BindingText(b, indent + 1);
      if (b.var.kind() == ExprKind::kVar) outputs.push_back(names_[b.var.get()]);
    }
    absl::StrAppend(&out, pad, "    R.output(", absl::StrJoin(outputs, ", "), ")\n");
    return out;
  }

  std::string BindingText(const Binding& b, int indent, const std::string& forced = "") {
    std::string pad(indent * 4, ' ');
    if (const auto* node = b.value.as<IfNode>()) {
      std::string out = absl::StrCat(pad, "if ", Inline(node->cond), ":\n");
      std::string name;
      std::string branches[2];
      for (int i = 0; i < 2; ++i) {
        const Expr& br = i == 0 ? node->true_branch : node->false_branch;
        if (i == 0) name = forced.empty() ? Define(b.var) : Define(b.var, forced);
        branches[i] = Branch(br, name, indent + 1);
      }
      return absl::StrCat(out, branches[0], pad, "else:\n", branches[1]);
    }
    std::string value = Inline(b.value);
    std::string name = Define(b.var, forced);
    if (b.is_match_cast()) {
      return absl::StrCat(pad, name, " = R.match_cast(", value, ", ", SInfo(b.match_cast), ")\n");
    }
    if (!b.var.struct_info().defined()) return absl::StrCat(pad, name, " = ", value, "\n");
    return absl::StrCat(pad, name, ": ", SInfo(b.var.struct_info()), " = ", value, "\n");
  }

  // One branch of an If bound to `name`: its bindings, the last renamed to
  // `name` when it is the branch's result.
  std::string Branch(const Expr& br, const std::string& name, int indent) {
    std::string out;
    const auto* seq = br.as<SeqExprNode>();
    if (!seq) return absl::StrCat(std::string(indent * 4, ' '), name, " = ", Inline(br), "\n");
    const Binding* last = nullptr;
    for (const BindingBlock& block : seq->blocks) {
      if (!block.bindings.empty()) last = &block.bindings.back();
    }
    bool rename = last && last->var.same_as(seq->body);
    for (const BindingBlock& block : seq->blocks) {
      for (const Binding& b : block.bindings) {
        out += BindingText(b, indent, rename && &b == last ? name : "");
      }
    }
    if (!rename) {
      std::string ann = seq->body.struct_info().defined()
                            ? absl::StrCat(": ", SInfo(seq->body.struct_info()))
                            : "";
      absl::StrAppend(&out, std::string(indent * 4, ' '), name, ann, " = ", Inline(seq->body),
                      "\n");
    }
    return out;
  }

  std::string Call(const CallNode& c) {
    std::string out;
    bool dps = false;
    if (const auto* op = c.op.as<OpNode>()) {
      out = Inline(c.op);
      dps = op->name.rfind("relax.call_tir", 0) == 0 || op->name == "relax.call_dps_packed";
    } else if (c.op.as<GlobalVarNode>()) {
      out = Inline(c.op);
    } else {
      out = Inline(c.op);
      if (c.op.as<ExternFuncNode>()) out = absl::StrCat("R.ExternFunc(", out, ")");
    }
    out += "(";
    bool first = true;
    for (const Expr& a : c.args) {
      absl::StrAppend(&out, first ? "" : ", ", Inline(a));
      first = false;
    }
    for (const auto& [k, v] : c.attrs) {
      absl::StrAppend(&out, first ? "" : ", ", k, "=", Attr(v));
      first = false;
    }
    if (!c.sinfo_args.empty()) {
      absl::StrAppend(&out, first ? "" : ", ", dps ? "out_sinfo=" : "sinfo_args=");
      if (c.sinfo_args.size() == 1) {
        out += SInfo(c.sinfo_args[0]);
      } else {
        out += "[";
        for (size_t i = 0; i < c.sinfo_args.size(); ++i) {
          absl::StrAppend(&out, i ? ", " : "", SInfo(c.sinfo_args[i]));
        }
        out += "]";
      }
    }
    return out + ")";
  }

  std::string Attr(const AttrValue& v) {
    if (const auto* d = std::get_if<double>(&v)) return FormatFloat(*d, false);
    if (const auto* s = std::get_if<std::string>(&v))
      return absl::StrCat("\"", text::EscapeString(*s), "\"");
    if (const auto* t = std::get_if<DataType>(&v))
      return absl::StrCat("R.dtype(\"", t->ToString(), "\")");
    if (const auto* p = std::get_if<std::vector<PrimExpr>>(&v)) return Dims(*p, '[');
    return ToString(v);
  }

  // Dimensions: quoted (declaring) in signatures, bare in bodies.
  std::string Dim(const PrimExpr& d) {
    std::string s = Prim(d);
    if (quote_dims_ && !d.as<IntImmNode>()) return absl::StrCat("\"", s, "\"");
    return s;
  }

  std::string Dims(const std::vector<PrimExpr>& dims, char open) {
    std::string s(1, open);
    for (size_t i = 0; i < dims.size(); ++i) absl::StrAppend(&s, i ? ", " : "", Dim(dims[i]));
    if (open == '(' && dims.size() == 1) s += ",";
    return s + (open == '(' ? ")" : "]");
  }

  static int Precedence(const PrimExpr& e) {
    switch (e.kind()) {
      case PrimKind::kAdd:
      case PrimKind::kSub:
        return 1;
      case PrimKind::kMul:
      case PrimKind::kDiv:
      case PrimKind::kFloorDiv:
      case PrimKind::kFloorMod:
        return 2;
      case PrimKind::kIntImm:
        return *e.as_int() < 0 ? 1 : 3;
      default:
        return 3;
    }
  }

  std::string Prim(const PrimExpr& e) {
    if (!e.defined()) return "None";
    switch (e.kind()) {
      case PrimKind::kIntImm: {
        int64_t v = e.as<IntImmNode>()->value;
        if (e.dtype() == DataType::Int(64)) return absl::StrCat(v);
        if (e.dtype().is_bool()) return v ? "True" : "False";
        return absl::StrCat("T.", e.dtype().ToString(), "(", v, ")");
      }
      case PrimKind::kFloatImm: {
        double v = e.as<FloatImmNode>()->value;
        bool single = e.dtype() == DataType::Float(32);
        std::string s = FormatFloat(v, single);
        return single && std::isfinite(v) ? s
                                          : absl::StrCat("T.", e.dtype().ToString(), "(", s, ")");
      }
      case PrimKind::kVar: {
        const std::string& n = e.as<PrimVarNode>()->name;
        if (syms_.insert(n).second) sym_order_.push_back(n);
        return n;
      }
      case PrimKind::kMin:
      case PrimKind::kMax: {
        const auto* b = e.as<BinaryNode>();
        return absl::StrCat(e.kind() == PrimKind::kMin ? "T.min(" : "T.max(", Prim(b->a), ", ",
                            Prim(b->b), ")");
      }
      default:
        break;
    }
    const char* op = nullptr;
    switch (e.kind()) {
      case PrimKind::kAdd:
        op = " + ";
        break;
      case PrimKind::kSub:
        op = " - ";
        break;
      case PrimKind::kMul:
        op = " * ";
        break;
      case PrimKind::kDiv:
        op = " / ";
        break;
      case PrimKind::kFloorDiv:
        op = " // ";
        break;
      case PrimKind::kFloorMod:
        op = " % ";
        break;
      default:
        break;
    }
    if (!op) return ToString(e);
    const auto* b = e.as<BinaryNode>();
    int p = Precedence(e);
    std::string l = Prim(b->a), r = Prim(b->b);
    if (Precedence(b->a) < p) l = absl::StrCat("(", l, ")");
    if (Precedence(b->b) <= p) r = absl::StrCat("(", r, ")");
    return absl::StrCat(l, op, r);
  }

  std::string Constant(const ConstantNode& c) {
    const Tensor& t = c.data;
    int64_t n = t->NumElements();
    if (n > kMaxInlineConstantElements || !t->IsContiguous() || t->dtype().lanes() != 1) {
      return absl::StrCat("metadata[\"relax.Constant\"][", metadata_index_++, "]");
    }
    DataType dt = t->dtype();
    const char* base = static_cast<const char*>(t->element_data());
    auto element = [&](int64_t i) -> std::string {
      const char* p = base + i * dt.bytes();
      auto load = [p](auto zero) {
        decltype(zero) v;
        std::memcpy(&v, p, sizeof(v));
        return v;
      };
      if (dt == DataType::Float(32)) return FormatFloat(load(0.0f), true);
      if (dt == DataType::Float(64)) return FormatFloat(load(0.0), false);
      if (dt.is_bool()) return load(uint8_t{0}) ? "True" : "False";
      if (dt.is_int()) {
        switch (dt.bits()) {
          case 8:
            return absl::StrCat(load(int8_t{0}));
          case 16:
            return absl::StrCat(load(int16_t{0}));
          case 32:
            return absl::StrCat(load(int32_t{0}));
          default:
            return absl::StrCat(load(int64_t{0}));
        }
      }
      if (dt.is_uint()) {
        switch (dt.bits()) {
          case 8:
            return absl::StrCat(load(uint8_t{0}));
          case 16:
            return absl::StrCat(load(uint16_t{0}));
          case 32:
            return absl::StrCat(load(uint32_t{0}));
          default:
            return absl::StrCat(load(uint64_t{0}));
        }
      }
      return "";
    };
    if (!(dt.is_float() && (dt.bits() == 32 || dt.bits() == 64)) && !dt.is_int() && !dt.is_uint() &&
        !dt.is_bool()) {
      return absl::StrCat("metadata[\"relax.Constant\"][", metadata_index_++, "]");
    }
    std::span<const int64_t> shape = t->shape();
    int64_t index = 0;
    std::string out;
    // Nested lists, row-major.
    auto emit = [&](auto&& self, size_t dim) -> void {
      if (dim == shape.size()) {
        out += element(index++);
        return;
      }
      out += "[";
      for (int64_t i = 0; i < shape[dim]; ++i) {
        if (i) out += ", ";
        self(self, dim + 1);
      }
      out += "]";
    };
    emit(emit, 0);
    return absl::StrCat("R.const(", out, ", \"", dt.ToString(), "\")");
  }

  std::map<const ExprNode*, std::string> names_;
  std::set<std::string> used_;
  std::set<std::string> syms_;
  std::vector<std::string> sym_order_;
  bool quote_dims_ = false;
  int metadata_index_ = 0;
};

}  // namespace

std::string PrintModule(const IRModule& module) { return Printer().Module(module); }

std::string PrintExpr(const Expr& e) {
  Printer p;
  if (const auto* f = e.as<FunctionNode>()) return p.Function("func", *f, 0);
  return p.Inline(e);
}

}  // namespace tether::compiler
