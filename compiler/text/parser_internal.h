// The recursive-descent parser behind ParseModule, shared by the files that
// implement it by concept: parser.cc (tokens, module, functions),
// parse_statement.cc (body statements), parse_expr.cc (expressions, calls,
// constants, attributes) and parse_struct_info.cc (annotations and symbolic
// dimensions).
// Not part of the public API.
//
// Thread contract: thread-hostile (one Parser per parse).
#ifndef TETHER_COMPILER_TEXT_PARSER_INTERNAL_H_
#define TETHER_COMPILER_TEXT_PARSER_INTERNAL_H_

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/relax/module.h"
#include "compiler/text/lexer.h"

namespace tether::compiler::text {

// How unknown bare names in a dimension are treated.
enum class DimNames : uint8_t {
  kExisting,  // must be a declared symbolic var
  kDeclare,   // a new name declares a symbolic var of the function
};

class Parser {
 public:
  Parser(std::vector<Token> tokens, std::string file)
      : tokens_(std::move(tokens)), file_(std::move(file)) {}

  absl::StatusOr<IRModule> Run();

  // The vars of bindings written with an annotation, with the binding's
  // span: after normalization each annotation must be a supertype of the
  // value's inferred struct info (TVMScript's rule; narrowing is match_cast).
  const std::vector<std::pair<Expr, Span>>& annotated_vars() const { return annotated_vars_; }

 private:
  // Where a statement sits.
  enum class Place : uint8_t { kFunction, kDataflow, kBranch };

  // The bindings of one body (function or if branch), grouped into blocks.
  struct Body {
    std::vector<BindingBlock> blocks;
    std::string last_name;  // the name bound by the last statement
    Expr last_var;
    void Add(Binding b, bool dataflow);
  };

  // ---- Tokens (parser.cc) ----
  const Token& Peek(int ahead = 0) const;
  const Token& Next();
  bool TryPunct(absl::string_view p);
  bool TryName(absl::string_view n);
  // INVALID_ARGUMENT at `t`: "file:line:col: message".
  absl::Status ErrorAt(const Token& t, absl::string_view message) const;
  absl::Status ErrorAt(const Span& s, absl::string_view message) const;
  // "expected <what>, got <the next token>".
  absl::Status Expected(absl::string_view what) const;
  absl::Status ExpectPunct(absl::string_view p, absl::string_view context);
  absl::StatusOr<std::string> ExpectName(absl::string_view what);
  Span SpanOf(const Token& t) const { return Span{file_, t.line, t.column}; }

  // ---- Module and functions (parser.cc); statements (parse_statement.cc) ----
  absl::Status ParseTopLevel(IRModule* module);
  absl::Status ParseClass(IRModule* module);
  absl::Status ParseDecoratedFunction(IRModule* module);
  absl::Status ParseFunction(IRModule* module, bool is_pure);
  absl::Status ParseStatements(Body* body, Place place);
  absl::Status ParseStatement(Body* body, Place place);
  absl::Status ParseDataflow(Body* body);
  absl::Status ParseIf(Body* body, Place place);
  absl::Status ParseBinding(Body* body, Place place);
  absl::Status ParseFuncAttr();
  absl::Status CheckGlobalRefs(const IRModule& module) const;
  Expr LookupVar(const std::string& name) const;
  void Define(const std::string& name, Expr var) { scopes_.back()[name] = std::move(var); }

  // ---- Kernels: @T.prim_func bodies (parse_prim_func.cc) ----
  // A name in a kernel: a value (a loop var, let, block axis, scalar
  // parameter or symbolic size) or a buffer.
  struct TirName {
    PrimExpr value;
    Buffer buffer;
  };
  // A statement; `wrap` set for those whose body is the rest of the
  // enclosing body (allocations, lets, asserts).
  struct TirStmt {
    Stmt stmt;
    std::function<Stmt(Stmt)> wrap;
  };
  struct TirBlock {
    std::string name;
    std::vector<PrimExpr> reduce_at_start;  // per reduce axis: axis == its start
    PrimExpr predicate;                     // T.where
    bool has_init = false;
  };
  absl::Status ParsePrimFunc(IRModule* module);
  void DefineTir(const std::string& name, TirName value);
  const TirName* LookupTir(const std::string& name) const;
  absl::StatusOr<Buffer> ExpectTirBuffer(absl::string_view what);
  absl::StatusOr<Buffer> ParseBufferDecl(const std::string& name, bool allow_scope);
  absl::StatusOr<Buffer> ParseBufferArgs(const std::string& name, bool allow_scope);
  absl::StatusOr<PrimExpr> ParseTirDim();
  absl::Status SkipTirValue();
  absl::StatusOr<Stmt> ParseTirSuite(absl::string_view what);
  absl::StatusOr<Stmt> ParseTirStatements();
  absl::Status ExpectTirEndOfLine(absl::string_view after);
  absl::Status ParseTirStatement(TirStmt* out);
  absl::Status ParseTirFor(TirStmt* out);
  absl::Status ParseTirWith(TirStmt* out);
  absl::Status ParseTirIf(TirStmt* out);
  absl::Status ParseTirStore(TirStmt* out);
  absl::Status ParseTirAssign(TirStmt* out);
  absl::Status ParseTirAxis(const Token& name);
  absl::Status ParseTirAxisRemap();
  absl::Status ParseTirCallStatement(TirStmt* out);
  absl::StatusOr<PrimExpr> ParseTirCondition();
  absl::StatusOr<std::vector<PrimExpr>> ParseTirIndices(const Buffer& buffer, const Token& at);
  absl::StatusOr<std::vector<PrimExpr>> ParseTirTileIndices(const Buffer& buffer, const Token& at);
  absl::StatusOr<PrimExpr> ParseTirExpr();
  absl::StatusOr<PrimExpr> ParseTirAnd();
  absl::StatusOr<PrimExpr> ParseTirNot();
  absl::StatusOr<PrimExpr> ParseTirCompare();
  absl::StatusOr<PrimExpr> ParseTirSum();
  absl::StatusOr<PrimExpr> ParseTirProduct();
  absl::StatusOr<PrimExpr> ParseTirUnary();
  absl::StatusOr<PrimExpr> ParseTirAtom();
  absl::StatusOr<PrimExpr> ParseTirCall(const Token& at, const std::string& fn);
  absl::StatusOr<std::vector<PrimExpr>> ParseTirArgs(const Token& at, const std::string& fn,
                                                     size_t count);
  absl::StatusOr<DataType> ExpectTirDtypeString();

  // ---- Expressions (parse_expr.cc) ----
  // A call argument, binding value or return value: an expression, or a
  // literal that becomes a PrimValue / ShapeExpr.
  absl::StatusOr<Expr> ParseValue();
  absl::StatusOr<Expr> ParsePostfix();
  absl::StatusOr<Expr> ParseAtom();
  absl::StatusOr<Expr> ParseTupleOrShape();
  absl::StatusOr<Expr> ParseRCall(const Token& start, const std::string& path);
  absl::StatusOr<Expr> ParseCallArgs(const Token& start, Expr op, bool packed);
  absl::StatusOr<Expr> ParseConst(const Token& start);
  absl::StatusOr<Expr> ParseMatchCast(StructInfo* sinfo);
  // A keyword argument's value; nullopt for None (the attribute is left out).
  absl::StatusOr<std::optional<AttrValue>> ParseAttrValue();

  // ---- Struct info and dimensions (parse_struct_info.cc) ----
  absl::StatusOr<StructInfo> ParseStructInfo(DimNames names);
  // '(' or '[' dims ']': `is_tuple` tells whether it was more than a
  // parenthesized single value (a comma, or square brackets).
  absl::StatusOr<std::vector<PrimExpr>> ParseDimList(DimNames names, bool allow_quoted,
                                                     bool* is_tuple = nullptr);
  // One dimension: int, symbolic name, arithmetic (+ - * // % and
  // floordiv/floormod/min/max), T.int32(3)-style typed constants, or a quoted
  // expression (declaring its names) when `allow_quoted`.
  absl::StatusOr<PrimExpr> ParseDim(DimNames names, bool allow_quoted);
  absl::StatusOr<PrimExpr> ParseDimSum(DimNames names);
  absl::StatusOr<PrimExpr> ParseDimProduct(DimNames names);
  absl::StatusOr<PrimExpr> ParseDimUnary(DimNames names);
  absl::StatusOr<PrimExpr> ParseDimAtom(DimNames names);
  // -v, folding literals; INVALID_ARGUMENT when an int64 literal overflows.
  absl::StatusOr<PrimExpr> Negate(const PrimExpr& v);
  absl::StatusOr<PrimExpr> ParseQuotedDim(const Token& t);
  // The symbolic var `name` of the current function, declaring it when asked.
  absl::StatusOr<PrimExpr> SymVar(const Token& t, DimNames names);

  std::vector<Token> tokens_;
  std::string file_;
  size_t pos_ = 0;

  // Module state: GlobalVars by name and where each was referenced.
  std::string class_name_;
  std::map<std::string, Expr> global_vars_;
  std::vector<std::pair<std::string, Token>> global_refs_;
  std::set<std::string> call_tir_refs_;

  // Function state.
  std::string function_name_;
  std::map<std::string, Var> sym_vars_;
  std::vector<std::map<std::string, Expr>> scopes_;
  std::set<std::string> dataflow_outputs_;
  Attrs function_attrs_;
  std::vector<std::pair<Expr, Span>> annotated_vars_;

  // Kernel state: scopes of names, the blocks open, the T.handle
  // parameters (true once matched) and their buffers; each kernel's span.
  std::vector<std::map<std::string, TirName>> tir_scopes_;
  std::vector<TirBlock> tir_blocks_;
  std::map<std::string, bool> tir_handles_;
  std::map<std::string, Buffer> tir_matched_;
  // The kernel's `n = T.int64()` declarations, checked at its end: each must
  // be a dim of a parameter's buffer (nothing else gives it a value).
  std::vector<std::pair<Token, Var>> tir_declared_sizes_;
  std::map<std::string, Span> kernel_spans_;
};

}  // namespace tether::compiler::text

#endif  // TETHER_COMPILER_TEXT_PARSER_INTERNAL_H_
