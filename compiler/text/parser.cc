// Parsing of modules and functions, the token helpers, and the entry points
// ParseModule and ParseModuleFile.
#include "compiler/text/parser.h"

#include "absl/strings/str_cat.h"
#include "compiler/relax/block_builder.h"
#include "compiler/relax/kernel_call.h"
#include "compiler/relax/struct_info_util.h"
#include "compiler/text/parser_internal.h"
#include "runtime/core/file.h"

namespace tether::compiler {
namespace text {
namespace {

// The raw IR carries a Span on every node and the annotations on its vars;
// normalization infers the struct info of everything else, checks each
// annotation against the inferred struct info (it must be a supertype) and
// reports errors at the spans.
absl::StatusOr<IRModule> NormalizeParsed(IRModule module) {
  return NormalizeModule(std::move(module));
}

// The value bound to each var of `seq` and of the If branches inside it.
void CollectBoundValues(const Expr& seq, std::map<const ExprNode*, Expr>* values) {
  const auto* s = seq.as<SeqExprNode>();
  if (s == nullptr) return;
  for (const BindingBlock& block : s->blocks) {
    for (const Binding& b : block.bindings) {
      (*values)[b.var.get()] = b.value;
      if (const auto* node = b.value.as<IfNode>()) {
        CollectBoundValues(node->true_branch, values);
        CollectBoundValues(node->false_branch, values);
      }
    }
  }
}

absl::Status CheckAnnotations(const IRModule& module,
                              const std::vector<std::pair<Expr, Span>>& annotated) {
  if (annotated.empty()) return absl::OkStatus();
  std::map<const ExprNode*, Expr> values;
  for (const auto& [name, func] : module.functions) {
    if (const auto* f = func.as<FunctionNode>()) CollectBoundValues(f->body, &values);
  }
  for (const auto& [var, span] : annotated) {
    auto it = values.find(var.get());
    if (it == values.end() || !it->second.struct_info().defined()) continue;
    const StructInfo& value = it->second.struct_info();
    if (!IsBaseOf(var.struct_info(), value)) {
      return absl::InvalidArgumentError(
          absl::StrCat(span.ToString(), ": expected an annotation of '",
                       var.as<VarNode>()->name_hint, "' that covers its value's ", ToString(value),
                       ", got ", ToString(var.struct_info()), " (use R.match_cast to narrow)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

void Parser::Body::Add(Binding b, bool dataflow) {
  if (blocks.empty() || blocks.back().is_dataflow != dataflow) {
    blocks.push_back(BindingBlock{{}, dataflow});
  }
  blocks.back().bindings.push_back(std::move(b));
}

const Token& Parser::Peek(int ahead) const {
  size_t i = pos_ + static_cast<size_t>(ahead);
  return i < tokens_.size() ? tokens_[i] : tokens_.back();
}

const Token& Parser::Next() {
  const Token& t = Peek();
  if (pos_ + 1 < tokens_.size()) ++pos_;
  return t;
}

bool Parser::TryPunct(absl::string_view p) {
  if (!Peek().IsPunct(p)) return false;
  Next();
  return true;
}

bool Parser::TryName(absl::string_view n) {
  if (!Peek().IsName(n)) return false;
  Next();
  return true;
}

absl::Status Parser::ErrorAt(const Token& t, absl::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat(file_, ":", t.line, ":", t.column, ": ", message));
}

absl::Status Parser::ErrorAt(const Span& s, absl::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat(file_, ":", s.line, ":", s.column, ": ", message));
}

absl::Status Parser::Expected(absl::string_view what) const {
  return ErrorAt(Peek(), absl::StrCat("expected ", what, ", got ", Peek().Describe()));
}

absl::Status Parser::ExpectPunct(absl::string_view p, absl::string_view context) {
  if (TryPunct(p)) return absl::OkStatus();
  return Expected(absl::StrCat("'", p, "'", context.empty() ? "" : " ", context));
}

absl::StatusOr<std::string> Parser::ExpectName(absl::string_view what) {
  if (Peek().kind != TokenKind::kName) return Expected(what);
  return Next().text;
}

absl::StatusOr<IRModule> Parser::Run() {
  IRModule module;
  while (Peek().kind != TokenKind::kEnd) {
    absl::Status s = ParseTopLevel(&module);
    if (!s.ok()) return s;
  }
  if (module.functions.empty() && module.kernels.empty()) {
    return ErrorAt(Peek(), "expected an @I.ir_module class or an @R.function, got end of input");
  }
  absl::Status s = CheckGlobalRefs(module);
  if (!s.ok()) return s;
  return module;
}

absl::Status Parser::ParseTopLevel(IRModule* module) {
  const Token& t = Peek();
  if (t.kind == TokenKind::kNewline) {
    Next();
    return absl::OkStatus();
  }
  if (t.kind == TokenKind::kIndent)
    return ErrorAt(t, "expected a statement, got an unexpected indent");
  // `import tvm`, `from tvm.script import relax as R`: accepted and ignored.
  if (t.IsName("import") || t.IsName("from")) {
    while (Peek().kind != TokenKind::kNewline && Peek().kind != TokenKind::kEnd) Next();
    return absl::OkStatus();
  }
  if (t.IsPunct("@") && Peek(1).IsName("I")) {
    Next();
    Next();
    if (absl::Status s = ExpectPunct(".", "after 'I'"); !s.ok()) return s;
    if (!TryName("ir_module")) return Expected("'ir_module' after '@I.'");
    if (Peek().kind != TokenKind::kNewline) return Expected("end of line after '@I.ir_module'");
    Next();
    return ParseClass(module);
  }
  if (t.IsName("class")) return ParseClass(module);
  if (t.IsPunct("@")) return ParseDecoratedFunction(module);
  return Expected("'@I.ir_module', '@R.function' or 'import'");
}

absl::Status Parser::ParseClass(IRModule* module) {
  if (!TryName("class")) return Expected("'class' after '@I.ir_module'");
  absl::StatusOr<std::string> name = ExpectName("a class name after 'class'");
  if (!name.ok()) return name.status();
  class_name_ = *name;
  if (TryPunct("(")) {
    if (absl::Status s = ExpectPunct(")", "after '(' in the class header"); !s.ok()) return s;
  }
  if (absl::Status s = ExpectPunct(":", "after the class name"); !s.ok()) return s;
  if (Peek().kind != TokenKind::kNewline) return Expected("end of line after 'class ...:'");
  Next();
  if (Peek().kind != TokenKind::kIndent) return Expected("an indented class body");
  Next();
  while (Peek().kind != TokenKind::kDedent && Peek().kind != TokenKind::kEnd) {
    if (Peek().kind == TokenKind::kNewline) {
      Next();
      continue;
    }
    if (!Peek().IsPunct("@")) return Expected("'@R.function' or '@T.prim_func' in the class body");
    absl::Status s = ParseDecoratedFunction(module);
    if (!s.ok()) return s;
  }
  if (Peek().kind == TokenKind::kDedent) Next();
  class_name_.clear();
  return absl::OkStatus();
}

absl::Status Parser::ParseDecoratedFunction(IRModule* module) {
  const Token& at = Next();  // '@'
  absl::StatusOr<std::string> ns = ExpectName("'R' or 'T' after '@'");
  if (!ns.ok()) return ns.status();
  if (absl::Status s = ExpectPunct(".", absl::StrCat("after '@", *ns, "'")); !s.ok()) return s;
  absl::StatusOr<std::string> what = ExpectName("a decorator name");
  if (!what.ok()) return what.status();
  if (*ns == "T" && *what == "prim_func") {
    if (TryPunct("(")) {
      // private=True, check_well_formed=False: accepted and ignored.
      while (!TryPunct(")")) {
        if (absl::Status s = SkipTirValue(); !s.ok()) return s;
        if (!TryPunct(",") && !TryPunct("=") && !Peek().IsPunct(")")) {
          return Expected("')' to close the decorator arguments");
        }
      }
    }
    if (Peek().kind != TokenKind::kNewline) return Expected("end of line after the decorator");
    Next();
    return ParsePrimFunc(module);
  }
  if (*ns != "R" || *what != "function") {
    return ErrorAt(at, absl::StrCat("expected '@R.function', got '@", *ns, ".", *what, "'"));
  }
  bool is_pure = true;
  if (TryPunct("(")) {
    while (!TryPunct(")")) {
      absl::StatusOr<std::string> key = ExpectName("a decorator argument (pure=, private=)");
      if (!key.ok()) return key.status();
      if (absl::Status s = ExpectPunct("=", absl::StrCat("after '", *key, "'")); !s.ok()) return s;
      bool value;
      if (TryName("True"))
        value = true;
      else if (TryName("False"))
        value = false;
      else
        return Expected(absl::StrCat("True or False for '", *key, "'"));
      if (*key == "pure")
        is_pure = value;
      else if (*key != "private")
        return ErrorAt(at, absl::StrCat("unknown @R.function argument '", *key, "'"));
      if (!Peek().IsPunct(")")) {
        if (absl::Status s = ExpectPunct(",", "between decorator arguments"); !s.ok()) return s;
      }
    }
  }
  if (Peek().kind != TokenKind::kNewline) return Expected("end of line after the decorator");
  Next();
  return ParseFunction(module, is_pure);
}

absl::Status Parser::ParseFunction(IRModule* module, bool is_pure) {
  if (!TryName("def")) return Expected("'def' after '@R.function'");
  const Token& name_tok = Peek();
  absl::StatusOr<std::string> name = ExpectName("a function name after 'def'");
  if (!name.ok()) return name.status();
  if (module->functions.count(*name)) {
    return ErrorAt(name_tok, absl::StrCat("function '", *name, "' is defined twice"));
  }
  function_name_ = *name;
  sym_vars_.clear();
  scopes_.assign(1, {});
  function_attrs_.clear();
  dataflow_outputs_.clear();

  if (absl::Status s = ExpectPunct("(", "after the function name"); !s.ok()) return s;
  std::vector<Expr> params;
  std::set<std::string> param_names;
  while (!TryPunct(")")) {
    const Token& p = Peek();
    absl::StatusOr<std::string> pname = ExpectName("a parameter name");
    if (!pname.ok()) return pname.status();
    if (!param_names.insert(*pname).second) {
      return ErrorAt(p, absl::StrCat("parameter '", *pname, "' is declared twice"));
    }
    if (absl::Status s = ExpectPunct(":", "after parameter name"); !s.ok()) return s;
    absl::StatusOr<StructInfo> sinfo = ParseStructInfo(DimNames::kDeclare);
    if (!sinfo.ok()) return sinfo.status();
    Expr var = WithSpan(MakeVar(*pname, *sinfo), SpanOf(p));
    Define(*pname, var);
    params.push_back(var);
    if (!Peek().IsPunct(")")) {
      if (absl::Status s = ExpectPunct(",", "or ')' after a parameter"); !s.ok()) return s;
    }
  }
  StructInfo ret;
  if (TryPunct("->")) {
    absl::StatusOr<StructInfo> r = ParseStructInfo(DimNames::kDeclare);
    if (!r.ok()) return r.status();
    ret = *r;
  }
  if (absl::Status s = ExpectPunct(":", "after the function signature"); !s.ok()) return s;
  if (Peek().kind != TokenKind::kNewline)
    return Expected("end of line after the function signature");
  Next();
  if (Peek().kind != TokenKind::kIndent) return Expected("an indented function body");
  Next();

  Body body;
  Expr result;
  while (true) {
    const Token& t = Peek();
    if (t.kind == TokenKind::kNewline) {
      Next();
      continue;
    }
    if (t.kind == TokenKind::kDedent || t.kind == TokenKind::kEnd) {
      return ErrorAt(name_tok, absl::StrCat("expected 'return' as the last statement of function '",
                                            *name, "'"));
    }
    if (t.IsName("return")) {
      Next();
      absl::StatusOr<Expr> r = ParseValue();
      if (!r.ok()) return r.status();
      result = *r;
      if (Peek().kind != TokenKind::kNewline) return Expected("end of line after the return value");
      Next();
      while (Peek().kind == TokenKind::kNewline) Next();
      if (Peek().kind != TokenKind::kDedent && Peek().kind != TokenKind::kEnd) {
        return Expected(absl::StrCat("the end of function '", *name, "' after 'return'"));
      }
      if (Peek().kind == TokenKind::kDedent) Next();
      break;
    }
    absl::Status s = ParseStatement(&body, Place::kFunction);
    if (!s.ok()) return s;
  }
  Expr seq = WithSpan(MakeSeqExpr(std::move(body.blocks), result), result->span);
  Expr func = WithSpan(MakeFunction(std::move(params), seq, ret, is_pure, function_attrs_),
                       SpanOf(name_tok));
  module->functions[*name] = func;
  return absl::OkStatus();
}

Expr Parser::LookupVar(const std::string& name) const {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    auto found = it->find(name);
    if (found != it->end()) return found->second;
  }
  return Expr();
}

absl::Status Parser::CheckGlobalRefs(const IRModule& module) const {
  for (const auto& [name, tok] : global_refs_) {
    const bool kernel_ref = call_tir_refs_.count(name) > 0;
    if (kernel_ref && module.kernels.count(name)) continue;
    if (!kernel_ref && module.functions.count(name)) continue;
    if (kernel_ref && module.functions.count(name)) {
      return ErrorAt(tok, absl::StrCat("expected a kernel (@T.prim_func) as the callee of "
                                       "R.call_tir, got relax function '",
                                       name, "'"));
    }
    if (module.kernels.count(name)) {
      return ErrorAt(tok, absl::StrCat("expected a relax function, got kernel '", name,
                                       "': call kernels with R.call_tir"));
    }
    if (kernel_ref) {
      return ErrorAt(tok, absl::StrCat("expected a kernel of the module as the callee of "
                                       "R.call_tir, got '",
                                       name, "' (undefined)"));
    }
    return ErrorAt(tok, absl::StrCat("expected a function of the module after 'cls.', got '", name,
                                     "' (undefined)"));
  }
  return absl::OkStatus();
}

}  // namespace text

absl::StatusOr<IRModule> ParseModule(absl::string_view text, absl::string_view file_name) {
  absl::StatusOr<std::vector<text::Token>> tokens = text::Lex(text, file_name);
  if (!tokens.ok()) return tokens.status();
  text::Parser parser(*std::move(tokens), std::string(file_name));
  absl::StatusOr<IRModule> module = parser.Run();
  if (!module.ok()) return module.status();
  absl::StatusOr<IRModule> normalized = text::NormalizeParsed(*std::move(module));
  if (!normalized.ok()) return normalized.status();
  absl::Status s = text::CheckAnnotations(*normalized, parser.annotated_vars());
  if (!s.ok()) return s;
  s = CheckKernelCalls(*normalized);
  if (!s.ok()) return s;
  return normalized;
}

absl::StatusOr<IRModule> ParseModuleFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) {
    return absl::Status(text.status().code(), absl::StrCat("cannot open text module ", path, ": ",
                                                           text.status().message()));
  }
  return ParseModule(*text, path);
}

}  // namespace tether::compiler
