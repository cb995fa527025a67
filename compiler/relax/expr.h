// Relax expressions, bindings and functions: the node set of tvm.relax
// (seed-relax-ir-api): Var, DataflowVar, Constant, PrimValue, StringImm,
// DataTypeImm, ShapeExpr, Tuple, TupleGetItem, Call, If, SeqExpr, Function,
// ExternFunc, GlobalVar and Op; VarBinding and MatchCast in BindingBlocks and
// DataflowBlocks.
//
// Nodes are immutable and shared through Ref; a Var is identified by its
// node. Every expression has a struct_info slot that the BlockBuilder fills
// when it normalizes (set once, before the node is shared).
//
// Thread contract: immutable once normalized; safe to share.
#ifndef TETHER_COMPILER_RELAX_EXPR_H_
#define TETHER_COMPILER_RELAX_EXPR_H_

#include <map>
#include <string>
#include <variant>
#include <vector>

#include "compiler/relax/struct_info.h"
#include "runtime/core/tensor.h"

namespace tether::compiler {

// A position in a source file, for errors ("model.rx:12:5").
struct Span {
  std::string file;
  int line = 0;    // 1-based; 0 when unknown
  int column = 0;  // 1-based
  bool known() const { return line > 0; }
  std::string ToString() const;  // "file:line:col", or "" when unknown
};

// An operator attribute: the keyword arguments of R.nn.conv2d(..., strides=[1, 1]).
using AttrValue = std::variant<int64_t, double, bool, std::string, DataType, std::vector<int64_t>,
                               std::vector<PrimExpr>>;
// Attributes by name; ordered so printing and hashing are deterministic.
using Attrs = std::map<std::string, AttrValue>;

enum class ExprKind : uint8_t {
  kVar,
  kDataflowVar,
  kConstant,
  kPrimValue,
  kStringImm,
  kDataTypeImm,
  kShapeExpr,
  kTuple,
  kTupleGetItem,
  kCall,
  kIf,
  kSeqExpr,
  kFunction,
  kExternFunc,
  kGlobalVar,
  kOp,
};

class ExprNode : public Object {
 public:
  explicit ExprNode(ExprKind kind) : kind_(kind) {}
  absl::string_view type_key() const override { return "relax.Expr"; }
  ExprKind kind() const { return kind_; }
  const StructInfo& struct_info() const { return struct_info_; }
  // Set by the BlockBuilder (and by constructors that know it) before the
  // node is shared; never changed afterwards.
  void set_struct_info(StructInfo s) const { struct_info_ = std::move(s); }
  Span span;

 private:
  ExprKind kind_;
  mutable StructInfo struct_info_;
};

class Expr {
 public:
  Expr() = default;
  explicit Expr(Ref<const ExprNode> node) : node_(std::move(node)) {}
  const ExprNode* get() const { return node_.get(); }
  const ExprNode* operator->() const { return node_.get(); }
  bool defined() const { return node_ != nullptr; }
  ExprKind kind() const { return node_->kind(); }
  // The node as T when the kind matches (T::Is), else nullptr.
  template <typename T>
  const T* as() const {
    return node_ && T::Is(node_->kind()) ? static_cast<const T*>(node_.get()) : nullptr;
  }
  bool same_as(const Expr& o) const { return node_.get() == o.node_.get(); }
  const StructInfo& struct_info() const { return node_->struct_info(); }
  const Ref<const ExprNode>& ref() const { return node_; }

 private:
  Ref<const ExprNode> node_;
};

template <ExprKind K>
class ExprNodeOf : public ExprNode {
 public:
  static constexpr ExprKind kKind = K;
  static bool Is(ExprKind k) { return k == K; }
  ExprNodeOf() : ExprNode(K) {}
};

// Var and DataflowVar (a var local to a dataflow block).
class VarNode : public ExprNode {
 public:
  static bool Is(ExprKind k) { return k == ExprKind::kVar || k == ExprKind::kDataflowVar; }
  VarNode(std::string name_hint, bool is_dataflow)
      : ExprNode(is_dataflow ? ExprKind::kDataflowVar : ExprKind::kVar),
        name_hint(std::move(name_hint)) {}
  const std::string name_hint;
};

class ConstantNode : public ExprNodeOf<ExprKind::kConstant> {
 public:
  explicit ConstantNode(Tensor data) : data(std::move(data)) {}
  const Tensor data;  // on the CPU
};

class PrimValueNode : public ExprNodeOf<ExprKind::kPrimValue> {
 public:
  explicit PrimValueNode(PrimExpr value) : value(std::move(value)) {}
  const PrimExpr value;
};

class StringImmNode : public ExprNodeOf<ExprKind::kStringImm> {
 public:
  explicit StringImmNode(std::string value) : value(std::move(value)) {}
  const std::string value;
};

class DataTypeImmNode : public ExprNodeOf<ExprKind::kDataTypeImm> {
 public:
  explicit DataTypeImmNode(DataType value) : value(value) {}
  const DataType value;
};

class ShapeExprNode : public ExprNodeOf<ExprKind::kShapeExpr> {
 public:
  explicit ShapeExprNode(std::vector<PrimExpr> values) : values(std::move(values)) {}
  const std::vector<PrimExpr> values;
};

class TupleNode : public ExprNodeOf<ExprKind::kTuple> {
 public:
  explicit TupleNode(std::vector<Expr> fields) : fields(std::move(fields)) {}
  const std::vector<Expr> fields;
};

class TupleGetItemNode : public ExprNodeOf<ExprKind::kTupleGetItem> {
 public:
  TupleGetItemNode(Expr tuple, int index) : tuple(std::move(tuple)), index(index) {}
  const Expr tuple;
  const int index;
};

// op is an Op (an operator of compiler/op/ or a builtin such as
// relax.call_tir), a GlobalVar, an ExternFunc or any callable expression.
class CallNode : public ExprNodeOf<ExprKind::kCall> {
 public:
  CallNode(Expr op, std::vector<Expr> args, Attrs attrs, std::vector<StructInfo> sinfo_args)
      : op(std::move(op)),
        args(std::move(args)),
        attrs(std::move(attrs)),
        sinfo_args(std::move(sinfo_args)) {}
  const Expr op;
  const std::vector<Expr> args;
  const Attrs attrs;
  const std::vector<StructInfo> sinfo_args;  // out_sinfo of call_tir / call_dps_packed
};

class IfNode : public ExprNodeOf<ExprKind::kIf> {
 public:
  IfNode(Expr cond, Expr true_branch, Expr false_branch)
      : cond(std::move(cond)),
        true_branch(std::move(true_branch)),
        false_branch(std::move(false_branch)) {}
  const Expr cond;
  const Expr true_branch;   // a SeqExpr after normalization
  const Expr false_branch;  // a SeqExpr after normalization
};

// var = value, or var = R.match_cast(value, struct_info).
struct Binding {
  Expr var;  // a Var or DataflowVar
  Expr value;
  StructInfo match_cast;  // defined for a MatchCast binding
  bool is_match_cast() const { return match_cast.defined(); }
  Span span;
};

struct BindingBlock {
  std::vector<Binding> bindings;
  bool is_dataflow = false;
};

class SeqExprNode : public ExprNodeOf<ExprKind::kSeqExpr> {
 public:
  SeqExprNode(std::vector<BindingBlock> blocks, Expr body)
      : blocks(std::move(blocks)), body(std::move(body)) {}
  const std::vector<BindingBlock> blocks;
  const Expr body;
};

class FunctionNode : public ExprNodeOf<ExprKind::kFunction> {
 public:
  FunctionNode(std::vector<Expr> params, Expr body, StructInfo ret_struct_info, bool is_pure,
               Attrs attrs)
      : params(std::move(params)),
        body(std::move(body)),
        ret_struct_info(std::move(ret_struct_info)),
        is_pure(is_pure),
        attrs(std::move(attrs)) {}
  const std::vector<Expr> params;  // Vars, each with its annotated struct info
  const Expr body;                 // a SeqExpr after normalization
  const StructInfo ret_struct_info;
  const bool is_pure;
  const Attrs attrs;  // "global_symbol", "num_input", ...
};

class ExternFuncNode : public ExprNodeOf<ExprKind::kExternFunc> {
 public:
  explicit ExternFuncNode(std::string global_symbol) : global_symbol(std::move(global_symbol)) {}
  const std::string global_symbol;  // a function registered in the runtime
};

class GlobalVarNode : public ExprNodeOf<ExprKind::kGlobalVar> {
 public:
  explicit GlobalVarNode(std::string name_hint) : name_hint(std::move(name_hint)) {}
  const std::string name_hint;
};

// An operator by name ("relax.add", "relax.nn.conv2d", "relax.call_tir").
class OpNode : public ExprNodeOf<ExprKind::kOp> {
 public:
  explicit OpNode(std::string name) : name(std::move(name)) {}
  const std::string name;
};

// Constructors. They do not infer struct info (the BlockBuilder does),
// except where it is known from the node alone: Constant, PrimValue,
// StringImm, DataTypeImm, ShapeExpr, ExternFunc, and vars given one.
Expr MakeVar(std::string name_hint, StructInfo sinfo = StructInfo());
Expr MakeDataflowVar(std::string name_hint, StructInfo sinfo = StructInfo());
Expr MakeConstant(Tensor data);
Expr MakePrimValue(PrimExpr value);
Expr MakeStringImm(std::string value);
Expr MakeDataTypeImm(DataType value);
Expr MakeShapeExpr(std::vector<PrimExpr> values);
Expr MakeTuple(std::vector<Expr> fields);
Expr MakeTupleGetItem(Expr tuple, int index);
Expr MakeCall(Expr op, std::vector<Expr> args, Attrs attrs = {},
              std::vector<StructInfo> sinfo_args = {});
Expr MakeIf(Expr cond, Expr true_branch, Expr false_branch);
Expr MakeSeqExpr(std::vector<BindingBlock> blocks, Expr body);
Expr MakeFunction(std::vector<Expr> params, Expr body, StructInfo ret_struct_info,
                  bool is_pure = true, Attrs attrs = {});
Expr MakeExternFunc(std::string global_symbol);
Expr MakeGlobalVar(std::string name_hint);
// The Op named `name` (one shared node per name); the name need not be registered.
Expr GetOp(absl::string_view name);

// A copy of `e`'s node with a new span (the parser's helper).
Expr WithSpan(Expr e, Span span);

// Attribute access with a default; a present attribute of another type is a
// compiler bug and returns the default.
int64_t GetIntAttr(const Attrs& attrs, const std::string& key, int64_t def);
double GetFloatAttr(const Attrs& attrs, const std::string& key, double def);
bool GetBoolAttr(const Attrs& attrs, const std::string& key, bool def);
std::string GetStringAttr(const Attrs& attrs, const std::string& key, const std::string& def);
std::vector<int64_t> GetIntsAttr(const Attrs& attrs, const std::string& key,
                                 std::vector<int64_t> def = {});
// A DataType attribute given as a DataType or as its string ("float32");
// nullopt when absent or unparsable.
std::optional<DataType> GetDTypeAttr(const Attrs& attrs, const std::string& key);
std::string ToString(const AttrValue& value);

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_RELAX_EXPR_H_
