// Relax expression constructors, spans and attribute access.
#include "compiler/relax/expr.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace tether::compiler {
namespace {

template <typename T, typename... Args>
Expr Make(StructInfo sinfo, Args&&... args) {
  auto node = MakeRef<T>(std::forward<Args>(args)...);
  if (sinfo.defined()) node->set_struct_info(std::move(sinfo));
  return Expr(Ref<const ExprNode>(std::move(node)));
}

}  // namespace

std::string Span::ToString() const {
  if (!known()) return "";
  return absl::StrCat(file.empty() ? "<input>" : file, ":", line, ":", column);
}

Expr MakeVar(std::string name_hint, StructInfo sinfo) {
  return Make<VarNode>(std::move(sinfo), std::move(name_hint), false);
}
Expr MakeDataflowVar(std::string name_hint, StructInfo sinfo) {
  return Make<VarNode>(std::move(sinfo), std::move(name_hint), true);
}
Expr MakeConstant(Tensor data) {
  std::vector<PrimExpr> shape;
  for (int64_t d : data->shape()) shape.push_back(d);
  StructInfo s = TensorSInfo(std::move(shape), data->dtype());
  return Make<ConstantNode>(std::move(s), std::move(data));
}
Expr MakePrimValue(PrimExpr value) {
  StructInfo s = PrimSInfo(value.dtype(), value);
  return Make<PrimValueNode>(std::move(s), std::move(value));
}
Expr MakeStringImm(std::string value) {
  return Make<StringImmNode>(ObjectSInfo(), std::move(value));
}
Expr MakeDataTypeImm(DataType value) { return Make<DataTypeImmNode>(ObjectSInfo(), value); }
Expr MakeShapeExpr(std::vector<PrimExpr> values) {
  StructInfo s = ShapeSInfo(values);
  return Make<ShapeExprNode>(std::move(s), std::move(values));
}
Expr MakeTuple(std::vector<Expr> fields) {
  // Known when every field has struct info.
  std::vector<StructInfo> f;
  bool known = true;
  for (const Expr& e : fields) {
    if (!e.struct_info().defined())
      known = false;
    else
      f.push_back(e.struct_info());
  }
  return Make<TupleNode>(known ? TupleSInfo(std::move(f)) : StructInfo(), std::move(fields));
}
Expr MakeTupleGetItem(Expr tuple, int index) {
  return Make<TupleGetItemNode>(StructInfo(), std::move(tuple), index);
}
Expr MakeCall(Expr op, std::vector<Expr> args, Attrs attrs, std::vector<StructInfo> sinfo_args) {
  return Make<CallNode>(StructInfo(), std::move(op), std::move(args), std::move(attrs),
                        std::move(sinfo_args));
}
Expr MakeIf(Expr cond, Expr true_branch, Expr false_branch) {
  return Make<IfNode>(StructInfo(), std::move(cond), std::move(true_branch),
                      std::move(false_branch));
}
Expr MakeSeqExpr(std::vector<BindingBlock> blocks, Expr body) {
  return Make<SeqExprNode>(StructInfo(), std::move(blocks), std::move(body));
}
Expr MakeFunction(std::vector<Expr> params, Expr body, StructInfo ret_struct_info, bool is_pure,
                  Attrs attrs) {
  StructInfo sinfo;
  std::vector<StructInfo> ps;
  bool known = ret_struct_info.defined();
  for (const Expr& p : params) {
    if (!p.struct_info().defined())
      known = false;
    else
      ps.push_back(p.struct_info());
  }
  if (known) sinfo = FuncSInfo(std::move(ps), ret_struct_info, is_pure);
  return Make<FunctionNode>(std::move(sinfo), std::move(params), std::move(body),
                            std::move(ret_struct_info), is_pure, std::move(attrs));
}
Expr MakeExternFunc(std::string global_symbol) {
  return Make<ExternFuncNode>(OpaqueFuncSInfo(), std::move(global_symbol));
}
Expr MakeGlobalVar(std::string name_hint) {
  return Make<GlobalVarNode>(StructInfo(), std::move(name_hint));
}

Expr GetOp(absl::string_view name) {
  static auto* mu = new absl::Mutex;
  static auto* ops = new absl::flat_hash_map<std::string, Expr>;
  absl::MutexLock lock(mu);
  auto it = ops->find(name);
  if (it != ops->end()) return it->second;
  Expr op = Make<OpNode>(ObjectSInfo(), std::string(name));
  ops->emplace(std::string(name), op);
  return op;
}

Expr WithSpan(Expr e, Span span) {
  // Nodes are immutable once shared; the parser calls this on fresh nodes only.
  const_cast<ExprNode*>(e.get())->span = std::move(span);
  return e;
}

int64_t GetIntAttr(const Attrs& attrs, const std::string& key, int64_t def) {
  auto it = attrs.find(key);
  if (it == attrs.end()) return def;
  if (const auto* v = std::get_if<int64_t>(&it->second)) return *v;
  if (const auto* b = std::get_if<bool>(&it->second)) return *b ? 1 : 0;
  return def;
}
double GetFloatAttr(const Attrs& attrs, const std::string& key, double def) {
  auto it = attrs.find(key);
  if (it == attrs.end()) return def;
  if (const auto* v = std::get_if<double>(&it->second)) return *v;
  if (const auto* i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
  return def;
}
bool GetBoolAttr(const Attrs& attrs, const std::string& key, bool def) {
  auto it = attrs.find(key);
  if (it == attrs.end()) return def;
  if (const auto* b = std::get_if<bool>(&it->second)) return *b;
  if (const auto* i = std::get_if<int64_t>(&it->second)) return *i != 0;
  return def;
}
std::string GetStringAttr(const Attrs& attrs, const std::string& key, const std::string& def) {
  auto it = attrs.find(key);
  if (it == attrs.end()) return def;
  if (const auto* s = std::get_if<std::string>(&it->second)) return *s;
  return def;
}
std::vector<int64_t> GetIntsAttr(const Attrs& attrs, const std::string& key,
                                 std::vector<int64_t> def) {
  auto it = attrs.find(key);
  if (it == attrs.end()) return def;
  if (const auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return *v;
  if (const auto* i = std::get_if<int64_t>(&it->second)) return {*i};
  return def;
}

std::optional<DataType> GetDTypeAttr(const Attrs& attrs, const std::string& key) {
  auto it = attrs.find(key);
  if (it == attrs.end()) return std::nullopt;
  if (const auto* d = std::get_if<DataType>(&it->second)) return *d;
  if (const auto* s = std::get_if<std::string>(&it->second)) {
    auto parsed = DataType::Parse(*s);
    if (parsed.ok()) return *parsed;
  }
  return std::nullopt;
}

std::string ToString(const AttrValue& value) {
  struct Printer {
    std::string operator()(int64_t v) const { return absl::StrCat(v); }
    std::string operator()(double v) const {
      std::string s = absl::StrCat(v);
      if (s.find_first_of(".einf") == std::string::npos) s += ".0";
      return s;
    }
    std::string operator()(bool v) const { return v ? "True" : "False"; }
    std::string operator()(const std::string& v) const { return absl::StrCat("\"", v, "\""); }
    std::string operator()(DataType v) const { return absl::StrCat("\"", v.ToString(), "\""); }
    std::string operator()(const std::vector<int64_t>& v) const {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) absl::StrAppend(&s, i ? ", " : "", v[i]);
      return s + "]";
    }
    std::string operator()(const std::vector<PrimExpr>& v) const {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i)
        absl::StrAppend(&s, i ? ", " : "", compiler::ToString(v[i]));
      return s + "]";
    }
  };
  return std::visit(Printer{}, value);
}

}  // namespace tether::compiler
