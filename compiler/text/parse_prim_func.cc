// Parsing of kernels written as TVMScript @T.prim_func members into the
// kernel IR (compiler/tir/kernel_ir.h): buffers and scalar parameters,
// T.match_buffer, loops (T.serial, T.parallel, T.vectorized, T.unroll,
// T.thread_binding, T.grid), blocks with T.axis bindings and T.init,
// allocations, lets, if/else, asserts, stores and the scalar expression
// language. docs/design/text-format.md, "Kernels", is the grammar.
#include <cctype>
#include <limits>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "compiler/text/parser_internal.h"
#include "compiler/tir/arith.h"
#include "runtime/core/error.h"

namespace tether::compiler::text {
namespace {

// Math intrinsics of PrimCallNode, by their TVMScript names.
bool IsMathIntrinsic(absl::string_view name) {
  for (absl::string_view m : {"exp", "log", "sqrt", "rsqrt", "tanh", "erf", "sigmoid", "pow",
                              "fabs", "floor", "ceil", "round", "trunc", "sin", "cos"}) {
    if (name == m) return true;
  }
  return false;
}

bool IsLiteral(const PrimExpr& e) {
  return e.kind() == PrimKind::kIntImm || e.kind() == PrimKind::kFloatImm;
}

// A literal in `dtype`, exactly (ints stay ints); other values cast.
PrimExpr ConvertValue(DataType dtype, const PrimExpr& e) {
  if (e.dtype() == dtype) return e;
  if (const int64_t* v = e.as_int(); v && (dtype.is_int() || dtype.is_uint())) {
    return IntImm(dtype, *v);
  }
  if (const auto* f = e.as<FloatImmNode>(); f && (dtype.is_float() || dtype.is_bfloat16())) {
    return FloatImm(dtype, f->value);
  }
  if (const int64_t* v = e.as_int(); v && (dtype.is_float() || dtype.is_bfloat16())) {
    return FloatImm(dtype, static_cast<double>(*v));
  }
  return Cast(dtype, e);
}

// Indices are int64 in the kernel IR.
PrimExpr AsIndex(const PrimExpr& e) { return ConvertValue(DataType::Int(64), e); }

PrimExpr Limit(DataType dt, bool lowest) {
  if (dt.is_float() || dt.is_bfloat16()) {
    double m = dt.bits() == 16 && !dt.is_bfloat16() ? 65504.0
               : dt.bits() == 64                    ? std::numeric_limits<double>::max()
                                                    : std::numeric_limits<float>::max();
    return FloatImm(dt, lowest ? -m : m);
  }
  if (dt.is_uint()) {
    uint64_t m =
        dt.bits() >= 64 ? std::numeric_limits<int64_t>::max() : (uint64_t{1} << dt.bits()) - 1;
    return IntImm(dt, lowest ? 0 : static_cast<int64_t>(m));
  }
  if (dt.is_bool()) return BoolImm(!lowest);
  int64_t m =
      dt.bits() >= 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (dt.bits() - 1)) - 1;
  return IntImm(dt, lowest ? -m - 1 : m);
}

BufferNode::Scope ParseScope(absl::string_view s, bool* ok) {
  *ok = true;
  if (s == "global") return BufferNode::Scope::kGlobal;
  if (s == "local") return BufferNode::Scope::kLocal;
  if (s == "shared") return BufferNode::Scope::kShared;
  if (s == "per_thread") return BufferNode::Scope::kPerThread;
  if (s == "wmma.matrix_a") return BufferNode::Scope::kMatrixA;
  if (s == "wmma.matrix_b") return BufferNode::Scope::kMatrixB;
  if (s == "wmma.accumulator") return BufferNode::Scope::kAccumulator;
  if (s == "wgmma.accumulator") return BufferNode::Scope::kWarpgroupAccumulator;
  *ok = false;
  return BufferNode::Scope::kGlobal;
}

// Trailing tensor parameters the kernel stores into: its outputs by the
// kernel IR's convention (inputs first).
int CountOutputs(const std::vector<KernelParam>& params, const Stmt& body) {
  std::set<const BufferNode*> stored;
  VisitStoredBuffers(body, [&](const Buffer& b) { stored.insert(b.get()); });
  int n = 0;
  for (size_t i = params.size(); i-- > 0;) {
    if (!params[i].is_tensor()) continue;
    if (!stored.count(params[i].buffer.get())) break;
    ++n;
  }
  return n;
}

}  // namespace

// ---- Names ----

void Parser::DefineTir(const std::string& name, TirName value) {
  tir_scopes_.back()[name] = std::move(value);
}

const Parser::TirName* Parser::LookupTir(const std::string& name) const {
  for (auto it = tir_scopes_.rbegin(); it != tir_scopes_.rend(); ++it) {
    auto found = it->find(name);
    if (found != it->end()) return &found->second;
  }
  return nullptr;
}

absl::StatusOr<Buffer> Parser::ExpectTirBuffer(absl::string_view what) {
  const Token& t = Peek();
  if (t.kind != TokenKind::kName) return Expected(what);
  const TirName* n = LookupTir(t.text);
  if (n == nullptr || n->buffer == nullptr) {
    return ErrorAt(t, absl::StrCat("expected ", what, ", got '", t.text, "'",
                                   n == nullptr ? " (undefined)" : " (not a buffer)"));
  }
  Next();
  return n->buffer;
}

// ---- The function ----

absl::Status Parser::ParsePrimFunc(IRModule* module) {
  if (!TryName("def")) return Expected("'def' after '@T.prim_func'");
  const Token& name_tok = Peek();
  TETHER_ASSIGN_OR_RETURN(std::string name, ExpectName("a kernel name after 'def'"));
  if (module->functions.count(name) || module->kernels.count(name)) {
    return ErrorAt(name_tok, absl::StrCat("function '", name, "' is defined twice"));
  }
  tir_scopes_.assign(1, {});
  tir_blocks_.clear();
  tir_handles_.clear();

  // Parameters: buffers, handles (matched in the body) and int scalars.
  struct Param {
    std::string name;
    Token tok;
    KernelParam param;
    bool handle = false;
  };
  std::vector<Param> params;
  TETHER_RETURN_IF_ERROR(ExpectPunct("(", "after the kernel name"));
  while (!TryPunct(")")) {
    const Token& p = Peek();
    TETHER_ASSIGN_OR_RETURN(std::string pname, ExpectName("a parameter name"));
    for (const Param& q : params) {
      if (q.name == pname)
        return ErrorAt(p, absl::StrCat("parameter '", pname, "' is declared twice"));
    }
    TETHER_RETURN_IF_ERROR(ExpectPunct(":", "after parameter name"));
    Param param{pname, p, {}, false};
    if (!(Peek().IsName("T") && Peek(1).IsPunct("."))) {
      return Expected("a parameter type: T.Buffer(...), T.handle, T.int64 or T.int32");
    }
    Next();
    Next();
    const Token& ty = Peek();
    TETHER_ASSIGN_OR_RETURN(std::string type, ExpectName("a parameter type after 'T.'"));
    if (type == "Buffer") {
      TETHER_ASSIGN_OR_RETURN(Buffer b, ParseBufferDecl(pname, /*allow_scope=*/false));
      param.param = KernelParam::Tensor(b);
      DefineTir(pname, TirName{PrimExpr(), b});
    } else if (type == "handle") {
      param.handle = true;
      tir_handles_[pname] = false;
    } else if (type == "int64" || type == "int32") {
      // Scalars travel as int64 (docs/design/kernel-abi.md).
      Var v(pname);
      param.param = KernelParam::Scalar(v);
      DefineTir(pname, TirName{v, Buffer()});
    } else {
      return ErrorAt(ty, absl::StrCat("expected a parameter type T.Buffer(...), T.handle, T.int64 "
                                      "or T.int32, got T.",
                                      type, " (kernel scalars are integers)"));
    }
    params.push_back(std::move(param));
    if (!Peek().IsPunct(")")) TETHER_RETURN_IF_ERROR(ExpectPunct(",", "or ')' after a parameter"));
  }
  if (TryPunct("->")) {
    if (!TryName("None")) return Expected("'None' as a kernel's return type");
  }
  TETHER_RETURN_IF_ERROR(ExpectPunct(":", "after the kernel signature"));
  TETHER_ASSIGN_OR_RETURN(Stmt body, ParseTirSuite("the kernel"));

  std::vector<KernelParam> kernel_params;
  for (Param& p : params) {
    if (p.handle) {
      auto it = tir_matched_.find(p.name);
      if (it == tir_matched_.end()) {
        return ErrorAt(p.tok, absl::StrCat("parameter '", p.name,
                                           "' (T.handle) is never bound with T.match_buffer"));
      }
      p.param = KernelParam::Tensor(it->second);
    }
    kernel_params.push_back(p.param);
  }
  tir_matched_.clear();
  // A declared symbolic size takes its value from a parameter's buffer
  // shape at the call; one that no parameter has would be unbound.
  std::set<const Object*> bound;
  for (const KernelParam& p : kernel_params) {
    if (p.is_tensor()) {
      for (const PrimExpr& d : p.buffer->shape) {
        if (d.as<PrimVarNode>() != nullptr) bound.insert(d.get());
      }
    }
  }
  std::vector<std::pair<Token, Var>> declared = std::move(tir_declared_sizes_);
  tir_declared_sizes_.clear();
  for (const auto& [tok, size] : declared) {
    if (bound.count(size.get()) == 0) {
      return ErrorAt(tok, absl::StrCat("symbolic size '", tok.text,
                                       "' is not a dimension of any parameter's buffer (nothing "
                                       "binds its value; use it in a T.Buffer or T.match_buffer "
                                       "shape)"));
    }
  }
  const int outputs = CountOutputs(kernel_params, body);
  module->kernels[name] = MakeKernelFunc(name, std::move(kernel_params), body, outputs);
  kernel_spans_[name] = SpanOf(name_tok);
  return absl::OkStatus();
}

// T.Buffer((dims), "dtype", scope="...") after 'T.Buffer' (or the arguments
// of T.alloc_buffer / T.match_buffer's shape onwards). Unknown names in the
// shape declare symbolic sizes.
absl::StatusOr<Buffer> Parser::ParseBufferDecl(const std::string& name, bool allow_scope) {
  TETHER_RETURN_IF_ERROR(ExpectPunct("(", "to start the buffer's shape and dtype"));
  return ParseBufferArgs(name, allow_scope);
}

absl::StatusOr<Buffer> Parser::ParseBufferArgs(const std::string& name, bool allow_scope) {
  std::vector<PrimExpr> shape;
  if (Peek().IsPunct("(") || Peek().IsPunct("[")) {
    const std::string close = Peek().IsPunct("(") ? ")" : "]";
    Next();
    while (!TryPunct(close)) {
      TETHER_ASSIGN_OR_RETURN(PrimExpr d, ParseTirDim());
      shape.push_back(d);
      if (!Peek().IsPunct(close)) TETHER_RETURN_IF_ERROR(ExpectPunct(",", "between dimensions"));
    }
  } else {
    TETHER_ASSIGN_OR_RETURN(PrimExpr d, ParseTirDim());
    shape.push_back(d);
  }
  DataType dtype = DataType::Float(32);
  BufferNode::Scope scope = BufferNode::Scope::kGlobal;
  BufferNode::Layout layout = BufferNode::Layout::kRowMajor;
  while (TryPunct(",")) {
    if (Peek().IsPunct(")")) break;
    std::string key = "dtype";
    const Token& kt = Peek();
    if (kt.kind == TokenKind::kName && Peek(1).IsPunct("=")) {
      key = kt.text;
      Next();
      Next();
    }
    const Token& v = Peek();
    if (key == "dtype") {
      if (v.kind != TokenKind::kString) return Expected("a dtype string such as \"float32\"");
      absl::StatusOr<DataType> dt = DataType::Parse(v.text);
      if (!dt.ok()) return ErrorAt(v, absl::StrCat("expected a dtype, got \"", v.text, "\""));
      dtype = *dt;
      Next();
    } else if (key == "scope") {
      bool ok = false;
      if (v.kind == TokenKind::kString) scope = ParseScope(v.text, &ok);
      if (!ok) {
        return ErrorAt(v,
                       "expected a buffer scope: \"global\", \"local\", \"shared\", "
                       "\"per_thread\", \"wmma.*\" or \"wgmma.accumulator\"");
      }
      if (!allow_scope && scope != BufferNode::Scope::kGlobal) {
        return ErrorAt(v, "expected a global buffer: a kernel parameter's scope is \"global\"");
      }
      Next();
    } else if (key == "layout" && allow_scope) {
      // The printer's layout of a shared buffer (prim_expr.h, BufferNode::Layout).
      if (v.kind != TokenKind::kString || (v.text != "swizzle128" && v.text != "row_major")) {
        return ErrorAt(v, "expected a buffer layout: \"row_major\" or \"swizzle128\"");
      }
      layout =
          v.text == "swizzle128" ? BufferNode::Layout::kSwizzle128 : BufferNode::Layout::kRowMajor;
      Next();
    } else if (key == "align" || key == "offset_factor" || key == "axis_separators") {
      // Layout hints of TVM's buffers; ours are compact and aligned.
      TETHER_RETURN_IF_ERROR(SkipTirValue());
    } else {
      return ErrorAt(
          kt, absl::StrCat("unknown buffer argument '", key, "' (expected dtype= or scope=)"));
    }
  }
  TETHER_RETURN_IF_ERROR(ExpectPunct(")", "to close the buffer declaration"));
  if (layout == BufferNode::Layout::kSwizzle128 && scope != BufferNode::Scope::kShared) {
    return ErrorAt(Peek(), "expected scope=\"shared\" for a swizzle128 buffer");
  }
  return MakeBuffer(name, dtype, std::move(shape), scope, layout);
}

// A dimension of a declared buffer: an expression, where a new bare name
// (or a quoted one) declares an int64 symbolic size.
absl::StatusOr<PrimExpr> Parser::ParseTirDim() {
  const Token& t = Peek();
  if (t.kind == TokenKind::kString ||
      (t.kind == TokenKind::kName && !LookupTir(t.text) && !Peek(1).IsPunct("(") &&
       !Peek(1).IsPunct(".") && t.text != "T" && t.text != "True" && t.text != "False")) {
    if (t.kind == TokenKind::kString && (t.text.empty() || !std::isalpha(t.text[0]))) {
      return ErrorAt(t, absl::StrCat("expected a symbolic size name, got \"", t.text, "\""));
    }
    Next();
    if (t.kind == TokenKind::kName && !Peek().IsPunct(",") && !Peek().IsPunct(")") &&
        !Peek().IsPunct("]")) {
      // A size is bound where it stands alone as a dimension; inside an
      // expression it must be declared first, as TVMScript requires.
      return ErrorAt(t, absl::StrCat("expected symbolic size '", t.text, "' to be declared (",
                                     t.text, " = T.int64()) before it is used in an expression"));
    }
    Var v(t.text);
    tir_scopes_.front()[t.text] = TirName{v, Buffer()};
    return PrimExpr(v);
  }
  TETHER_ASSIGN_OR_RETURN(PrimExpr e, ParseTirExpr());
  if (!(e.dtype().is_int() || e.dtype().is_uint())) {
    return ErrorAt(t, absl::StrCat("expected an integer dimension, got ", ToString(e)));
  }
  return AsIndex(e);
}

// Skips one value (a literal, name, or bracketed group) of an ignored argument.
absl::Status Parser::SkipTirValue() {
  int depth = 0;
  do {
    const Token& t = Peek();
    if (t.kind == TokenKind::kEnd || t.kind == TokenKind::kNewline) return Expected("a value");
    if (t.IsPunct("(") || t.IsPunct("[") || t.IsPunct("{")) ++depth;
    if (t.IsPunct(")") || t.IsPunct("]") || t.IsPunct("}")) {
      if (depth == 0) return absl::OkStatus();
      --depth;
    }
    if (depth == 0 && t.IsPunct(",")) return absl::OkStatus();
    Next();
  } while (true);
}

// ---- Statements ----

absl::StatusOr<Stmt> Parser::ParseTirSuite(absl::string_view what) {
  if (Peek().kind != TokenKind::kNewline)
    return Expected(absl::StrCat("end of line to start ", what));
  Next();
  while (Peek().kind == TokenKind::kNewline) Next();
  if (Peek().kind != TokenKind::kIndent)
    return Expected(absl::StrCat("an indented body of ", what));
  Next();
  tir_scopes_.emplace_back();
  absl::StatusOr<Stmt> body = ParseTirStatements();
  tir_scopes_.pop_back();
  return body;
}

absl::StatusOr<Stmt> Parser::ParseTirStatements() {
  std::vector<Stmt> seq;
  while (true) {
    const Token& t = Peek();
    if (t.kind == TokenKind::kNewline) {
      Next();
      continue;
    }
    if (t.kind == TokenKind::kDedent) {
      Next();
      break;
    }
    if (t.kind == TokenKind::kEnd) break;
    TirStmt s;
    TETHER_RETURN_IF_ERROR(ParseTirStatement(&s));
    if (s.wrap) {
      // An allocation, let or assert: the rest of the body is inside it.
      TETHER_ASSIGN_OR_RETURN(Stmt rest, ParseTirStatements());
      seq.push_back(s.wrap(rest));
      break;
    }
    seq.push_back(s.stmt);
  }
  return Seq(std::move(seq));
}

absl::Status Parser::ExpectTirEndOfLine(absl::string_view after) {
  if (Peek().kind == TokenKind::kDedent || Peek().kind == TokenKind::kEnd) return absl::OkStatus();
  if (Peek().kind != TokenKind::kNewline)
    return Expected(absl::StrCat("end of line after ", after));
  Next();
  return absl::OkStatus();
}

absl::Status Parser::ParseTirStatement(TirStmt* out) {
  const Token& t = Peek();
  if (t.kind == TokenKind::kIndent)
    return ErrorAt(t, "expected a statement, got an unexpected indent");
  if (t.IsName("pass")) {
    Next();
    return ExpectTirEndOfLine("'pass'");
  }
  if (t.IsName("for")) return ParseTirFor(out);
  if (t.IsName("with")) return ParseTirWith(out);
  if (t.IsName("if")) return ParseTirIf(out);
  if (t.IsName("assert")) {
    Next();
    TETHER_ASSIGN_OR_RETURN(PrimExpr cond, ParseTirCondition());
    std::string message = "assertion failed";
    if (TryPunct(",")) {
      if (Peek().kind != TokenKind::kString)
        return Expected("a message string after 'assert cond,'");
      message = Next().text;
    }
    TETHER_RETURN_IF_ERROR(ExpectTirEndOfLine("the assert"));
    out->wrap = [cond, message](Stmt body) { return AssertStmt(cond, message, std::move(body)); };
    return absl::OkStatus();
  }
  if (t.IsName("T") && Peek(1).IsPunct(".")) return ParseTirCallStatement(out);
  if (t.kind == TokenKind::kName && Peek(1).IsPunct(",")) return ParseTirAxisRemap();
  if (t.kind == TokenKind::kName && Peek(1).IsPunct("[")) return ParseTirStore(out);
  if (t.kind == TokenKind::kName && (Peek(1).IsPunct("=") || Peek(1).IsPunct(":"))) {
    return ParseTirAssign(out);
  }
  return Expected("a kernel statement (for, with T.block, if, a store 'A[i] = ...', or 'x = ...')");
}

// for i in T.serial(n) / range(a, b) / T.parallel / T.vectorized / T.unroll /
// T.thread_binding(n, thread="...") / T.blocks / T.threads / T.warps, and
// for i, j in T.grid(n, m).
absl::Status Parser::ParseTirFor(TirStmt* out) {
  Next();  // for
  std::vector<Token> names;
  while (true) {
    if (Peek().kind != TokenKind::kName) return Expected("a loop variable after 'for'");
    names.push_back(Next());
    if (!TryPunct(",")) break;
  }
  if (!TryName("in")) return Expected("'in' after the loop variables");
  const Token& it = Peek();
  std::string fn;
  if (TryName("range")) {
    fn = "serial";
  } else if (it.IsName("T") && Peek(1).IsPunct(".")) {
    Next();
    Next();
    TETHER_ASSIGN_OR_RETURN(fn, ExpectName("a loop kind after 'T.'"));
  } else {
    return Expected("a loop range: range(...), T.serial(...), T.parallel(...), T.grid(...), ...");
  }
  ForKind kind = ForKind::kSerial;
  if (fn == "serial" || fn == "grid") {
    kind = ForKind::kSerial;
  } else if (fn == "parallel") {
    kind = ForKind::kParallel;
  } else if (fn == "vectorized") {
    kind = ForKind::kVectorized;
  } else if (fn == "unroll") {
    kind = ForKind::kUnrolled;
  } else if (fn == "blocks") {
    kind = ForKind::kBlock;
  } else if (fn == "threads") {
    kind = ForKind::kThread;
  } else if (fn == "warps") {
    kind = ForKind::kWarp;
  } else if (fn == "warpgroups") {
    kind = ForKind::kWarpgroup;
  } else if (fn != "thread_binding") {
    return ErrorAt(it, absl::StrCat("expected a loop kind (serial, parallel, vectorized, unroll, "
                                    "thread_binding, grid), got T.",
                                    fn));
  }
  TETHER_RETURN_IF_ERROR(ExpectPunct("(", absl::StrCat("after T.", fn)));
  std::vector<PrimExpr> args;
  std::string thread;
  while (!TryPunct(")")) {
    if (Peek().IsName("thread") && Peek(1).IsPunct("=")) {
      Next();
      Next();
      if (Peek().kind != TokenKind::kString) return Expected("a thread name string");
      thread = Next().text;
    } else if (Peek().IsName("annotations") && Peek(1).IsPunct("=")) {
      Next();
      Next();
      TETHER_RETURN_IF_ERROR(SkipTirValue());
    } else {
      TETHER_ASSIGN_OR_RETURN(PrimExpr a, ParseTirExpr());
      if (!(a.dtype().is_int() || a.dtype().is_uint())) {
        return ErrorAt(it, absl::StrCat("expected integer loop bounds, got ", ToString(a)));
      }
      args.push_back(AsIndex(a));
    }
    if (!Peek().IsPunct(")")) TETHER_RETURN_IF_ERROR(ExpectPunct(",", "between loop arguments"));
  }
  if (fn == "thread_binding") {
    if (absl::StartsWith(thread, "blockIdx.")) {
      kind = ForKind::kBlock;
    } else if (absl::StartsWith(thread, "threadIdx.")) {
      kind = ForKind::kThread;
    } else {
      return ErrorAt(it, absl::StrCat("expected thread=\"blockIdx.x\" or \"threadIdx.x\" in "
                                      "T.thread_binding, got \"",
                                      thread, "\""));
    }
  }
  // The ranges: one (extent or min, stop) per variable; T.grid takes extents.
  std::vector<std::pair<PrimExpr, PrimExpr>> ranges;  // (min, extent)
  if (fn == "grid") {
    if (args.size() != names.size()) {
      return ErrorAt(it, absl::StrCat("expected ", names.size(), " extents in T.grid for ",
                                      names.size(), " loop variables, got ", args.size()));
    }
    for (const PrimExpr& a : args) ranges.emplace_back(PrimExpr(0), a);
  } else {
    if (names.size() != 1)
      return ErrorAt(names[1], "expected one loop variable (use T.grid for several)");
    if (args.size() == 1) {
      ranges.emplace_back(PrimExpr(0), args[0]);
    } else if (args.size() == 2) {
      ranges.emplace_back(args[0], Simplify(args[1] - args[0]));
    } else {
      return ErrorAt(it, absl::StrCat("expected T.", fn, "(extent) or T.", fn,
                                      "(start, stop), got ", args.size(), " arguments"));
    }
  }
  TETHER_RETURN_IF_ERROR(ExpectPunct(":", "after the loop header"));
  tir_scopes_.emplace_back();
  std::vector<Var> vars;
  for (const Token& n : names) {
    Var v(n.text);
    vars.push_back(v);
    DefineTir(n.text, TirName{v, Buffer()});
  }
  absl::StatusOr<Stmt> body = ParseTirSuite("the loop");
  tir_scopes_.pop_back();
  if (!body.ok()) return body.status();
  Stmt s = *body;
  for (size_t i = vars.size(); i-- > 0;)
    s = For(vars[i], ranges[i].first, ranges[i].second, kind, s);
  out->stmt = s;
  return absl::OkStatus();
}

// with T.block("name"): ..., with T.init(): ...
absl::Status Parser::ParseTirWith(TirStmt* out) {
  const Token& with = Next();
  if (!(Peek().IsName("T") && Peek(1).IsPunct("."))) {
    return Expected("T.block(...) or T.init() after 'with'");
  }
  Next();
  Next();
  const Token& what = Peek();
  TETHER_ASSIGN_OR_RETURN(std::string fn, ExpectName("block or init after 'with T.'"));
  if (fn == "block") {
    TETHER_RETURN_IF_ERROR(ExpectPunct("(", "after T.block"));
    std::string name = "block";
    if (Peek().kind == TokenKind::kString) name = Next().text;
    // Other arguments are ignored; SkipTirValue stops before a ',' so the
    // loop takes it (without, "T.block("C", x)" never ends: a fuzz find).
    while (!TryPunct(")")) {
      TETHER_RETURN_IF_ERROR(SkipTirValue());
      TryPunct(",");
    }
    TETHER_RETURN_IF_ERROR(ExpectPunct(":", "after T.block(...)"));
    tir_blocks_.push_back(TirBlock{name, {}, PrimExpr(), false});
    absl::StatusOr<Stmt> body = ParseTirSuite(absl::StrCat("block '", name, "'"));
    const PrimExpr predicate = tir_blocks_.back().predicate;
    tir_blocks_.pop_back();
    if (!body.ok()) return body.status();
    out->stmt = predicate.defined() ? IfThenElse(predicate, *body) : *body;
    return absl::OkStatus();
  }
  if (fn == "init") {
    if (tir_blocks_.empty()) return ErrorAt(with, "expected T.init() inside a T.block");
    TirBlock& block = tir_blocks_.back();
    if (block.reduce_at_start.empty()) {
      return ErrorAt(with, absl::StrCat("T.init() in block '", block.name,
                                        "', which has no reduction axis (T.axis.reduce)"));
    }
    if (block.has_init)
      return ErrorAt(with, absl::StrCat("block '", block.name, "' has two T.init()"));
    block.has_init = true;
    TETHER_RETURN_IF_ERROR(ExpectPunct("(", "after T.init"));
    TETHER_RETURN_IF_ERROR(ExpectPunct(")", "after T.init("));
    TETHER_RETURN_IF_ERROR(ExpectPunct(":", "after T.init()"));
    PrimExpr first = block.reduce_at_start[0];
    for (size_t i = 1; i < block.reduce_at_start.size(); ++i) {
      first = And(first, block.reduce_at_start[i]);
    }
    TETHER_ASSIGN_OR_RETURN(Stmt init, ParseTirSuite("T.init()"));
    // TVM's meaning: the init runs on the first iteration of the reduction.
    out->stmt = IfThenElse(first, init);
    return absl::OkStatus();
  }
  return ErrorAt(what, absl::StrCat("expected T.block or T.init after 'with', got T.", fn));
}

absl::Status Parser::ParseTirIf(TirStmt* out) {
  Next();  // if / elif
  TETHER_ASSIGN_OR_RETURN(PrimExpr cond, ParseTirCondition());
  TETHER_RETURN_IF_ERROR(ExpectPunct(":", "after the if condition"));
  TETHER_ASSIGN_OR_RETURN(Stmt then_case, ParseTirSuite("the if branch"));
  while (Peek().kind == TokenKind::kNewline) Next();
  Stmt else_case;
  if (Peek().IsName("elif")) {
    TirStmt nested;
    TETHER_RETURN_IF_ERROR(ParseTirIf(&nested));
    else_case = nested.stmt;
  } else if (TryName("else")) {
    TETHER_RETURN_IF_ERROR(ExpectPunct(":", "after 'else'"));
    TETHER_ASSIGN_OR_RETURN(else_case, ParseTirSuite("the else branch"));
  }
  out->stmt = IfThenElse(cond, then_case, else_case);
  return absl::OkStatus();
}

absl::StatusOr<PrimExpr> Parser::ParseTirCondition() {
  const Token& t = Peek();
  TETHER_ASSIGN_OR_RETURN(PrimExpr cond, ParseTirExpr());
  if (!cond.dtype().is_bool()) {
    return ErrorAt(t, absl::StrCat("expected a condition (a bool), got ", ToString(cond)));
  }
  return cond;
}

// A[i, j] = value, A[i] += value.
absl::Status Parser::ParseTirStore(TirStmt* out) {
  const Token& name = Peek();
  TETHER_ASSIGN_OR_RETURN(Buffer buffer, ExpectTirBuffer("a buffer to store into"));
  TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> indices, ParseTirIndices(buffer, name));
  const Token& op = Peek();
  PrimKind update = PrimKind::kAdd;
  bool augmented = true;
  if (op.IsPunct("+=")) {
    update = PrimKind::kAdd;
  } else if (op.IsPunct("-=")) {
    update = PrimKind::kSub;
  } else if (op.IsPunct("*=")) {
    update = PrimKind::kMul;
  } else if (op.IsPunct("=")) {
    augmented = false;
  } else {
    return Expected("'=' after the buffer element");
  }
  Next();
  TETHER_ASSIGN_OR_RETURN(PrimExpr value, ParseTirExpr());
  if (augmented) value = MakeBinary(update, Load(buffer, indices), value);
  if (buffer->dtype.is_bool() != value.dtype().is_bool()) {
    return ErrorAt(op,
                   absl::StrCat("expected a ", buffer->dtype.ToString(), " value to store into '",
                                buffer->name, "', got ", ToString(value)));
  }
  TETHER_RETURN_IF_ERROR(ExpectTirEndOfLine("the store"));
  out->stmt = Store(buffer, std::move(indices), ConvertValue(buffer->dtype, value));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PrimExpr>> Parser::ParseTirIndices(const Buffer& buffer,
                                                              const Token& at) {
  TETHER_RETURN_IF_ERROR(ExpectPunct("[", absl::StrCat("after '", buffer->name, "'")));
  std::vector<PrimExpr> indices;
  while (!TryPunct("]")) {
    const Token& t = Peek();
    TETHER_ASSIGN_OR_RETURN(PrimExpr i, ParseTirExpr());
    if (!(i.dtype().is_int() || i.dtype().is_uint())) {
      return ErrorAt(t, absl::StrCat("expected an integer index into '", buffer->name, "', got ",
                                     ToString(i)));
    }
    indices.push_back(AsIndex(i));
    if (!Peek().IsPunct("]")) TETHER_RETURN_IF_ERROR(ExpectPunct(",", "between indices"));
  }
  if (indices.size() != buffer->shape.size()) {
    return ErrorAt(
        at, absl::StrCat("expected ", buffer->shape.size(), " indices into '", buffer->name, "' (",
                         buffer->shape.size(), "-d), got ", indices.size()));
  }
  return indices;
}

// name = T.match_buffer(...) / T.alloc_buffer(...) / T.int64() /
// T.axis.spatial(...) / a value (a let), and name: T.dtype = value.
absl::Status Parser::ParseTirAssign(TirStmt* out) {
  const Token& name = Next();
  DataType annotated;
  bool has_annotation = false;
  if (TryPunct(":")) {
    if (!(Peek().IsName("T") && Peek(1).IsPunct("."))) return Expected("a dtype such as T.float32");
    Next();
    Next();
    const Token& dt = Peek();
    TETHER_ASSIGN_OR_RETURN(std::string d, ExpectName("a dtype after 'T.'"));
    absl::StatusOr<DataType> parsed = DataType::Parse(d);
    if (!parsed.ok()) return ErrorAt(dt, absl::StrCat("expected a dtype, got T.", d));
    annotated = *parsed;
    has_annotation = true;
  }
  TETHER_RETURN_IF_ERROR(ExpectPunct("=", absl::StrCat("after '", name.text, "'")));
  if (!has_annotation && Peek().IsName("T") && Peek(1).IsPunct(".")) {
    const Token& fn = Peek(2);
    if (fn.IsName("match_buffer")) {
      Next();
      Next();
      Next();
      TETHER_RETURN_IF_ERROR(ExpectPunct("(", "after T.match_buffer"));
      const Token& h = Peek();
      TETHER_ASSIGN_OR_RETURN(std::string handle, ExpectName("a T.handle parameter"));
      auto it = tir_handles_.find(handle);
      if (it == tir_handles_.end()) {
        return ErrorAt(
            h, absl::StrCat("expected a T.handle parameter of the kernel, got '", handle, "'"));
      }
      if (it->second) return ErrorAt(h, absl::StrCat("handle '", handle, "' is matched twice"));
      if (tir_scopes_.size() != 2) {
        return ErrorAt(name, "expected T.match_buffer at the top of the kernel body");
      }
      it->second = true;
      TETHER_RETURN_IF_ERROR(ExpectPunct(",", "after the handle"));
      TETHER_ASSIGN_OR_RETURN(Buffer b, ParseBufferArgs(name.text, /*allow_scope=*/false));
      tir_matched_[handle] = b;
      DefineTir(name.text, TirName{PrimExpr(), b});
      return ExpectTirEndOfLine("T.match_buffer(...)");
    }
    if (fn.IsName("alloc_buffer")) {
      Next();
      Next();
      Next();
      TETHER_ASSIGN_OR_RETURN(Buffer b, ParseBufferDecl(name.text, /*allow_scope=*/true));
      DefineTir(name.text, TirName{PrimExpr(), b});
      TETHER_RETURN_IF_ERROR(ExpectTirEndOfLine("T.alloc_buffer(...)"));
      out->wrap = [b](Stmt body) { return Allocate(b, std::move(body)); };
      return absl::OkStatus();
    }
    if (fn.IsName("axis")) return ParseTirAxis(name);
    if (fn.kind == TokenKind::kName && Peek(3).IsPunct("(") && Peek(4).IsPunct(")")) {
      // n = T.int64(): a symbolic size, bound by the buffers that use it.
      absl::StatusOr<DataType> dt = DataType::Parse(fn.text);
      if (!dt.ok() || !(dt->is_int() || dt->is_uint())) {
        return ErrorAt(fn, absl::StrCat("expected an integer dtype such as T.int64() to declare a "
                                        "symbolic size, got T.",
                                        fn.text));
      }
      for (int i = 0; i < 5; ++i) Next();
      Var size(name.text);
      tir_scopes_.front()[name.text] = TirName{size, Buffer()};
      tir_declared_sizes_.emplace_back(name, size);
      return ExpectTirEndOfLine("the declaration");
    }
  }
  // A let: the name holds the value for the rest of the body.
  TETHER_ASSIGN_OR_RETURN(PrimExpr value, ParseTirExpr());
  if (has_annotation) value = ConvertValue(annotated, value);
  TETHER_RETURN_IF_ERROR(ExpectTirEndOfLine("the assignment"));
  Var v(name.text, value.dtype());
  DefineTir(name.text, TirName{v, Buffer()});
  out->wrap = [v, value](Stmt body) { return LetStmt(v, value, std::move(body)); };
  return absl::OkStatus();
}

// vi = T.axis.spatial(dom, value) / T.axis.reduce(dom, value) (S / R):
// inside a block, the name stands for the value; a reduce axis makes the
// block's T.init() run where it is at the start of its domain.
absl::Status Parser::ParseTirAxis(const Token& name) {
  if (tir_blocks_.empty()) return ErrorAt(name, "expected T.axis bindings inside a T.block");
  Next();
  Next();
  Next();  // T . axis
  TETHER_RETURN_IF_ERROR(ExpectPunct(".", "after T.axis"));
  const Token& kind_tok = Peek();
  TETHER_ASSIGN_OR_RETURN(std::string kind, ExpectName("spatial or reduce after 'T.axis.'"));
  if (kind == "remap") {
    return ErrorAt(name, "expected several names on the left of T.axis.remap(...) (vi, vj = ...)");
  }
  bool reduce;
  if (kind == "spatial" || kind == "S") {
    reduce = false;
  } else if (kind == "reduce" || kind == "R") {
    reduce = true;
  } else {
    return ErrorAt(kind_tok,
                   absl::StrCat("expected T.axis.spatial or T.axis.reduce, got T.axis.", kind));
  }
  TETHER_RETURN_IF_ERROR(ExpectPunct("(", absl::StrCat("after T.axis.", kind)));
  PrimExpr start = PrimExpr(0);
  if (TryPunct("(") || TryPunct("[")) {
    TETHER_ASSIGN_OR_RETURN(start, ParseTirExpr());
    TETHER_RETURN_IF_ERROR(ExpectPunct(",", "in the axis domain (start, stop)"));
    TETHER_RETURN_IF_ERROR(SkipTirValue());
    if (!TryPunct(")") && !TryPunct("]")) return Expected("the end of the axis domain");
  } else {
    TETHER_ASSIGN_OR_RETURN(PrimExpr extent, ParseTirExpr());
    (void)extent;
  }
  TETHER_RETURN_IF_ERROR(ExpectPunct(",", "after the axis domain"));
  TETHER_ASSIGN_OR_RETURN(PrimExpr value, ParseTirExpr());
  TETHER_RETURN_IF_ERROR(ExpectPunct(")", absl::StrCat("to close T.axis.", kind)));
  value = AsIndex(value);
  DefineTir(name.text, TirName{value, Buffer()});
  if (reduce) tir_blocks_.back().reduce_at_start.push_back(EQ(value, AsIndex(start)));
  return ExpectTirEndOfLine("the axis binding");
}

// vi, vj, vk = T.axis.remap("SSR", [i, j, k])
absl::Status Parser::ParseTirAxisRemap() {
  const Token& first = Peek();
  std::vector<Token> names;
  while (true) {
    if (Peek().kind != TokenKind::kName) return Expected("a block axis name");
    names.push_back(Next());
    if (!TryPunct(",")) break;
  }
  TETHER_RETURN_IF_ERROR(ExpectPunct("=", "after the axis names"));
  if (!(TryName("T") && TryPunct(".") && TryName("axis") && TryPunct(".") && TryName("remap"))) {
    return ErrorAt(first, "expected 'vi, vj, ... = T.axis.remap(\"SS..\", [i, j, ...])'");
  }
  if (tir_blocks_.empty()) return ErrorAt(first, "expected T.axis bindings inside a T.block");
  TETHER_RETURN_IF_ERROR(ExpectPunct("(", "after T.axis.remap"));
  const Token& kinds = Peek();
  if (kinds.kind != TokenKind::kString) return Expected("the axis kinds, a string such as \"SSR\"");
  Next();
  if (kinds.text.size() != names.size()) {
    return ErrorAt(kinds, absl::StrCat("expected ", names.size(), " axis kinds for ", names.size(),
                                       " names, got \"", kinds.text, "\""));
  }
  TETHER_RETURN_IF_ERROR(ExpectPunct(",", "after the axis kinds"));
  TETHER_RETURN_IF_ERROR(ExpectPunct("[", "to start the remapped loop variables"));
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) TETHER_RETURN_IF_ERROR(ExpectPunct(",", "between the remapped loop variables"));
    TETHER_ASSIGN_OR_RETURN(PrimExpr v, ParseTirExpr());
    const char k = kinds.text[i];
    if (k != 'S' && k != 'R') {
      return ErrorAt(kinds,
                     absl::StrCat("expected axis kinds S or R, got '", std::string(1, k), "'"));
    }
    v = AsIndex(v);
    DefineTir(names[i].text, TirName{v, Buffer()});
    if (k == 'R') tir_blocks_.back().reduce_at_start.push_back(EQ(v, PrimExpr(0)));
  }
  TryPunct(",");
  TETHER_RETURN_IF_ERROR(ExpectPunct("]", "to close the remapped loop variables"));
  TETHER_RETURN_IF_ERROR(ExpectPunct(")", "to close T.axis.remap"));
  return ExpectTirEndOfLine("T.axis.remap(...)");
}

// T.func_attr / T.reads / T.writes / T.block_attr (kept out of the IR),
// T.evaluate, and the tensor-core and async-copy statements the printer
// writes for GPU kernels.
absl::Status Parser::ParseTirCallStatement(TirStmt* out) {
  const Token& t = Peek();
  Next();
  Next();
  TETHER_ASSIGN_OR_RETURN(std::string fn, ExpectName("a statement after 'T.'"));
  if (fn == "where") {
    // A block's predicate: its body runs where the condition holds.
    if (tir_blocks_.empty()) return ErrorAt(t, "expected T.where inside a T.block");
    TETHER_RETURN_IF_ERROR(ExpectPunct("(", "after T.where"));
    TETHER_ASSIGN_OR_RETURN(PrimExpr cond, ParseTirCondition());
    TETHER_RETURN_IF_ERROR(ExpectPunct(")", "to close T.where"));
    PrimExpr& p = tir_blocks_.back().predicate;
    p = p.defined() ? And(p, cond) : cond;
    return ExpectTirEndOfLine("T.where(...)");
  }
  if (fn == "func_attr" || fn == "reads" || fn == "writes" || fn == "block_attr") {
    TETHER_RETURN_IF_ERROR(ExpectPunct("(", absl::StrCat("after T.", fn)));
    while (!TryPunct(")")) {
      TETHER_RETURN_IF_ERROR(SkipTirValue());
      TryPunct(",");
    }
    return ExpectTirEndOfLine(absl::StrCat("T.", fn, "(...)"));
  }
  TETHER_RETURN_IF_ERROR(ExpectPunct("(", absl::StrCat("after T.", fn)));
  auto tile = [&]() -> absl::StatusOr<TileRef> {
    const Token& at = Peek();
    TETHER_ASSIGN_OR_RETURN(Buffer b, ExpectTirBuffer("a buffer"));
    TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> idx, ParseTirTileIndices(b, at));
    return TileRef{b, std::move(idx)};
  };
  if (fn == "evaluate") {
    TETHER_ASSIGN_OR_RETURN(PrimExpr v, ParseTirExpr());
    out->stmt = Evaluate(v);
  } else if (fn == "fill_fragment") {
    TETHER_ASSIGN_OR_RETURN(TileRef acc, tile());
    TETHER_RETURN_IF_ERROR(ExpectPunct(",", "after the fragment"));
    TETHER_ASSIGN_OR_RETURN(PrimExpr v, ParseTirExpr());
    out->stmt = MatrixFill(acc, ConvertValue(acc.buffer->dtype, v));
  } else if (fn == "load_matrix_sync" || fn == "store_matrix_sync") {
    TETHER_ASSIGN_OR_RETURN(TileRef a, tile());
    TETHER_RETURN_IF_ERROR(ExpectPunct(",", "between the tiles"));
    TETHER_ASSIGN_OR_RETURN(TileRef b, tile());
    out->stmt = fn == "load_matrix_sync" ? MatrixLoad(a, b) : MatrixStore(a, b);
  } else if (fn == "mma_sync") {
    TETHER_ASSIGN_OR_RETURN(TileRef c, tile());
    TETHER_RETURN_IF_ERROR(ExpectPunct(",", "between the tiles"));
    TETHER_ASSIGN_OR_RETURN(TileRef a, tile());
    TETHER_RETURN_IF_ERROR(ExpectPunct(",", "between the tiles"));
    TETHER_ASSIGN_OR_RETURN(TileRef b, tile());
    out->stmt = MatrixMma(c, a, b);
  } else if (fn == "ptx_cp_async") {
    TETHER_ASSIGN_OR_RETURN(TileRef dst, tile());
    TETHER_RETURN_IF_ERROR(ExpectPunct(",", "between the tiles"));
    TETHER_ASSIGN_OR_RETURN(TileRef src, tile());
    TETHER_RETURN_IF_ERROR(ExpectPunct(",", "before the lane count"));
    if (Peek().kind != TokenKind::kInt) return Expected("a lane count");
    const int lanes = static_cast<int>(Next().int_value);
    PrimExpr valid;
    if (TryPunct(",")) {
      if (!(TryName("valid") && TryPunct("="))) return Expected("valid=");
      TETHER_ASSIGN_OR_RETURN(valid, ParseTirCondition());
    }
    out->stmt = AsyncCopy(dst, src, lanes, valid);
  } else if (fn == "ptx_wait_group") {
    if (Peek().kind != TokenKind::kInt) return Expected("the number of groups left in flight");
    out->stmt = AsyncFence(static_cast<int>(Next().int_value));
  } else if (fn == "ptx_fence_proxy_async") {
    out->stmt = AsyncProxyFence();
  } else if (fn == "wgmma_async") {
    TETHER_ASSIGN_OR_RETURN(TileRef acc, tile());
    TETHER_RETURN_IF_ERROR(ExpectPunct(",", "between the tiles"));
    TETHER_ASSIGN_OR_RETURN(TileRef a, tile());
    TETHER_RETURN_IF_ERROR(ExpectPunct(",", "between the tiles"));
    TETHER_ASSIGN_OR_RETURN(TileRef b, tile());
    TETHER_RETURN_IF_ERROR(ExpectPunct(",", "before accumulate="));
    if (!(TryName("accumulate") && TryPunct("="))) return Expected("accumulate=");
    TETHER_ASSIGN_OR_RETURN(PrimExpr accumulate, ParseTirCondition());
    out->stmt = WarpgroupMma(acc, a, b, accumulate);
  } else if (fn == "wgmma_store") {
    TETHER_ASSIGN_OR_RETURN(TileRef dst, tile());
    TETHER_RETURN_IF_ERROR(ExpectPunct(",", "between the tiles"));
    TETHER_ASSIGN_OR_RETURN(TileRef acc, tile());
    TETHER_RETURN_IF_ERROR(ExpectPunct(",", "before col="));
    if (!(TryName("col") && TryPunct("=")) || Peek().kind != TokenKind::kInt) {
      return Expected("col= and a constant column");
    }
    out->stmt = WarpgroupStore(dst, acc, Next().int_value);
  } else {
    return ErrorAt(t, absl::StrCat("expected a kernel statement, got T.", fn, "(...)"));
  }
  TETHER_RETURN_IF_ERROR(ExpectPunct(")", absl::StrCat("to close T.", fn)));
  return ExpectTirEndOfLine(absl::StrCat("T.", fn, "(...)"));
}

// A tile's indices: any count up to the buffer's rank (kernel_ir.h, TileRef).
absl::StatusOr<std::vector<PrimExpr>> Parser::ParseTirTileIndices(const Buffer& buffer,
                                                                  const Token& at) {
  TETHER_RETURN_IF_ERROR(ExpectPunct("[", absl::StrCat("after '", buffer->name, "'")));
  std::vector<PrimExpr> indices;
  while (!TryPunct("]")) {
    TETHER_ASSIGN_OR_RETURN(PrimExpr i, ParseTirExpr());
    indices.push_back(AsIndex(i));
    if (!Peek().IsPunct("]")) TETHER_RETURN_IF_ERROR(ExpectPunct(",", "between indices"));
  }
  if (indices.size() > buffer->shape.size()) {
    return ErrorAt(at, absl::StrCat("expected at most ", buffer->shape.size(), " indices into '",
                                    buffer->name, "'"));
  }
  return indices;
}

// ---- Expressions ----

absl::StatusOr<PrimExpr> Parser::ParseTirExpr() {
  TETHER_ASSIGN_OR_RETURN(PrimExpr a, ParseTirAnd());
  while (Peek().IsName("or")) {
    const Token& op = Next();
    TETHER_ASSIGN_OR_RETURN(PrimExpr b, ParseTirAnd());
    if (!a.dtype().is_bool() || !b.dtype().is_bool()) {
      return ErrorAt(op, "expected bool operands of 'or'");
    }
    a = Or(a, b);
  }
  return a;
}

absl::StatusOr<PrimExpr> Parser::ParseTirAnd() {
  TETHER_ASSIGN_OR_RETURN(PrimExpr a, ParseTirNot());
  while (Peek().IsName("and")) {
    const Token& op = Next();
    TETHER_ASSIGN_OR_RETURN(PrimExpr b, ParseTirNot());
    if (!a.dtype().is_bool() || !b.dtype().is_bool()) {
      return ErrorAt(op, "expected bool operands of 'and'");
    }
    a = And(a, b);
  }
  return a;
}

absl::StatusOr<PrimExpr> Parser::ParseTirNot() {
  // A loop, not recursion, as for unary minus.
  const Token& first = Peek();
  bool invert = false;
  while (TryName("not")) invert = !invert;
  if (&first != &Peek()) {
    TETHER_ASSIGN_OR_RETURN(PrimExpr a, ParseTirCompare());
    if (!a.dtype().is_bool()) return ErrorAt(first, "expected a bool operand of 'not'");
    return invert ? Not(a) : a;
  }
  return ParseTirCompare();
}

absl::StatusOr<PrimExpr> Parser::ParseTirCompare() {
  TETHER_ASSIGN_OR_RETURN(PrimExpr a, ParseTirSum());
  static const std::pair<const char*, PrimKind> kCompare[] = {
      {"==", PrimKind::kEQ}, {"!=", PrimKind::kNE}, {"<", PrimKind::kLT},
      {"<=", PrimKind::kLE}, {">", PrimKind::kGT},  {">=", PrimKind::kGE}};
  for (const auto& [p, kind] : kCompare) {
    if (!Peek().IsPunct(p)) continue;
    Next();
    TETHER_ASSIGN_OR_RETURN(PrimExpr b, ParseTirSum());
    return MakeBinary(kind, a, b);
  }
  return a;
}

absl::StatusOr<PrimExpr> Parser::ParseTirSum() {
  TETHER_ASSIGN_OR_RETURN(PrimExpr a, ParseTirProduct());
  while (Peek().IsPunct("+") || Peek().IsPunct("-")) {
    const bool add = Next().text == "+";
    TETHER_ASSIGN_OR_RETURN(PrimExpr b, ParseTirProduct());
    a = add ? a + b : a - b;
  }
  return a;
}

absl::StatusOr<PrimExpr> Parser::ParseTirProduct() {
  TETHER_ASSIGN_OR_RETURN(PrimExpr a, ParseTirUnary());
  while (true) {
    const Token& op = Peek();
    PrimKind kind;
    if (op.IsPunct("*")) {
      kind = PrimKind::kMul;
    } else if (op.IsPunct("/")) {
      kind = PrimKind::kDiv;
    } else if (op.IsPunct("//")) {
      kind = PrimKind::kFloorDiv;
    } else if (op.IsPunct("%")) {
      kind = PrimKind::kFloorMod;
    } else {
      return a;
    }
    Next();
    TETHER_ASSIGN_OR_RETURN(PrimExpr b, ParseTirUnary());
    if ((kind == PrimKind::kFloorDiv || kind == PrimKind::kFloorMod) &&
        (a.dtype().is_float() || b.dtype().is_float())) {
      return ErrorAt(op, absl::StrCat("expected integer operands of '", op.text, "'"));
    }
    a = MakeBinary(kind, a, b);
  }
}

absl::StatusOr<PrimExpr> Parser::ParseTirUnary() {
  // A loop, not recursion: "- - - 1" must not grow the stack.
  bool negate = false;
  while (TryPunct("-")) negate = !negate;
  TETHER_ASSIGN_OR_RETURN(PrimExpr a, ParseTirAtom());
  if (!negate) return a;
  return Negate(a);
}

absl::StatusOr<PrimExpr> Parser::ParseTirAtom() {
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
    TETHER_ASSIGN_OR_RETURN(PrimExpr e, ParseTirExpr());
    TETHER_RETURN_IF_ERROR(ExpectPunct(")", "to close the parenthesized expression"));
    return e;
  }
  if (t.kind != TokenKind::kName) return Expected("an expression");
  Next();
  if (t.text == "True" || t.text == "False") return BoolImm(t.text == "True");
  if (t.text == "inf")
    return FloatImm(DataType::Float(32), std::numeric_limits<double>::infinity());
  if (t.text == "nan")
    return FloatImm(DataType::Float(32), std::numeric_limits<double>::quiet_NaN());
  std::string fn = t.text;
  if (t.text == "T" && TryPunct(".")) {
    TETHER_ASSIGN_OR_RETURN(fn, ExpectName("a function after 'T.'"));
    return ParseTirCall(t, fn);
  }
  if (const TirName* n = LookupTir(t.text)) {
    if (n->buffer != nullptr) {
      if (!Peek().IsPunct("[")) {
        return ErrorAt(t, absl::StrCat("expected an element of buffer '", t.text, "' (", t.text,
                                       "[...]), got the buffer itself"));
      }
      TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> idx, ParseTirIndices(n->buffer, t));
      return Load(n->buffer, std::move(idx));
    }
    return n->value;
  }
  if (tir_handles_.count(t.text)) {
    return ErrorAt(t, absl::StrCat("expected a value, got handle '", t.text,
                                   "' (bind it with T.match_buffer first)"));
  }
  // The printer's bare forms: float32(x), select(...), min(...), exp(...).
  if (Peek().IsPunct("(")) return ParseTirCall(t, fn);
  return ErrorAt(t, absl::StrCat("expected a value, got '", t.text, "' (undefined)"));
}

absl::StatusOr<std::vector<PrimExpr>> Parser::ParseTirArgs(const Token& at, const std::string& fn,
                                                           size_t count) {
  TETHER_RETURN_IF_ERROR(ExpectPunct("(", absl::StrCat("after ", fn)));
  std::vector<PrimExpr> args;
  while (!TryPunct(")")) {
    TETHER_ASSIGN_OR_RETURN(PrimExpr a, ParseTirExpr());
    args.push_back(a);
    if (!Peek().IsPunct(")")) TETHER_RETURN_IF_ERROR(ExpectPunct(",", "between arguments"));
  }
  if (args.size() != count) {
    return ErrorAt(at, absl::StrCat("expected ", count, " argument", count == 1 ? "" : "s", " to ",
                                    fn, ", got ", args.size()));
  }
  return args;
}

absl::StatusOr<DataType> Parser::ExpectTirDtypeString() {
  const Token& d = Peek();
  if (d.kind != TokenKind::kString) return Expected("a dtype string such as \"float32\"");
  absl::StatusOr<DataType> dt = DataType::Parse(d.text);
  if (!dt.ok()) return ErrorAt(d, absl::StrCat("expected a dtype, got \"", d.text, "\""));
  Next();
  return *dt;
}

absl::StatusOr<PrimExpr> Parser::ParseTirCall(const Token& at, const std::string& fn) {
  // T.float32(1.5), T.int32(i): a typed constant, or a cast.
  if (absl::StatusOr<DataType> dt = DataType::Parse(fn); dt.ok()) {
    TETHER_RETURN_IF_ERROR(ExpectPunct("(", absl::StrCat("after ", fn)));
    PrimExpr v;
    if (Peek().IsName("inf") || Peek().IsName("nan") ||
        (Peek().IsPunct("-") && Peek(1).IsName("inf"))) {
      const bool neg = TryPunct("-");
      const bool nan = Next().text == "nan";
      v = FloatImm(*dt, nan ? std::numeric_limits<double>::quiet_NaN()
                            : (neg ? -1 : 1) * std::numeric_limits<double>::infinity());
    } else {
      TETHER_ASSIGN_OR_RETURN(v, ParseTirExpr());
    }
    TETHER_RETURN_IF_ERROR(ExpectPunct(")", absl::StrCat("to close ", fn, "(...)")));
    return IsLiteral(v)
               ? (dt->is_bool()
                      ? BoolImm(v.as_int() ? *v.as_int() != 0 : v.as<FloatImmNode>()->value != 0)
                      : ConvertValue(*dt, v))
               : Cast(*dt, v);
  }
  if (fn == "Cast" || fn == "cast") {
    TETHER_RETURN_IF_ERROR(ExpectPunct("(", absl::StrCat("after T.", fn)));
    DataType dt;
    PrimExpr v;
    if (fn == "Cast") {
      TETHER_ASSIGN_OR_RETURN(dt, ExpectTirDtypeString());
      TETHER_RETURN_IF_ERROR(ExpectPunct(",", "after the dtype"));
      TETHER_ASSIGN_OR_RETURN(v, ParseTirExpr());
    } else {
      TETHER_ASSIGN_OR_RETURN(v, ParseTirExpr());
      TETHER_RETURN_IF_ERROR(ExpectPunct(",", "after the value"));
      TETHER_ASSIGN_OR_RETURN(dt, ExpectTirDtypeString());
    }
    TETHER_RETURN_IF_ERROR(ExpectPunct(")", absl::StrCat("to close T.", fn)));
    return Cast(dt, v);
  }
  if (fn == "min_value" || fn == "max_value") {
    TETHER_RETURN_IF_ERROR(ExpectPunct("(", absl::StrCat("after T.", fn)));
    TETHER_ASSIGN_OR_RETURN(DataType dt, ExpectTirDtypeString());
    TETHER_RETURN_IF_ERROR(ExpectPunct(")", absl::StrCat("to close T.", fn)));
    return Limit(dt, fn == "min_value");
  }
  if (fn == "Select" || fn == "select" || fn == "if_then_else") {
    TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> a, ParseTirArgs(at, fn, 3));
    if (!a[0].dtype().is_bool())
      return ErrorAt(at, absl::StrCat("expected a bool condition in ", fn));
    return Select(a[0], a[1], a[2]);
  }
  if (fn == "likely") {
    TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> a, ParseTirArgs(at, fn, 1));
    return a[0];
  }
  if (fn == "min" || fn == "max" || fn == "floordiv" || fn == "floormod" || fn == "truncdiv") {
    TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> a, ParseTirArgs(at, fn, 2));
    if (fn == "min") return Min(a[0], a[1]);
    if (fn == "max") return Max(a[0], a[1]);
    if (a[0].dtype().is_float() || a[1].dtype().is_float()) {
      return ErrorAt(at, absl::StrCat("expected integer operands of ", fn));
    }
    if (fn == "floordiv") return FloorDiv(a[0], a[1]);
    if (fn == "floormod") return FloorMod(a[0], a[1]);
    return Div(a[0], a[1]);
  }
  if (fn == "abs") {
    TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> a, ParseTirArgs(at, fn, 1));
    if (a[0].dtype().is_float() || a[0].dtype().is_bfloat16()) {
      return Call(a[0].dtype(), "fabs", {a[0]});
    }
    return Select(LT(a[0], MakeConst(a[0].dtype(), 0)), -a[0], a[0]);
  }
  if (fn == kPrefetchOp) {  // kernel_ir.h Prefetch: one element, its line fetched
    TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> a, ParseTirArgs(at, fn, 1));
    if (a[0].as<LoadNode>() == nullptr) {
      return ErrorAt(
          at, absl::StrCat("T.prefetch takes one buffer element, as A[i], got ", ToString(a[0])));
    }
    return Call(DataType::Int(32), kPrefetchOp, std::move(a));
  }
  if (IsMathIntrinsic(fn)) {
    TETHER_ASSIGN_OR_RETURN(std::vector<PrimExpr> a, ParseTirArgs(at, fn, fn == "pow" ? 2 : 1));
    DataType dt = a[0].dtype();
    if (IsLiteral(a[0]) && a.size() == 2 && !IsLiteral(a[1])) dt = a[1].dtype();
    if (!(dt.is_float() || dt.is_bfloat16())) {
      return ErrorAt(at, absl::StrCat("expected a float argument to T.", fn, ", got ",
                                      ToString(a[0]), " (cast it with T.Cast)"));
    }
    for (PrimExpr& x : a) x = ConvertValue(dt, x);
    return Call(dt, fn, std::move(a));
  }
  return ErrorAt(at, absl::StrCat("expected a kernel function such as T.exp, T.max, T.Cast or "
                                  "T.if_then_else, got ",
                                  fn));
}

}  // namespace tether::compiler::text
