// Parsing of function-body statements: bindings (with annotations and
// R.match_cast), symbolic-var declarations, R.func_attr, dataflow blocks
// closed by R.output, and if/else.
#include "absl/strings/str_cat.h"
#include "compiler/text/parser_internal.h"

namespace tether::compiler::text {

absl::Status Parser::ParseStatement(Body* body, Place place) {
  const Token& t = Peek();
  if (t.kind == TokenKind::kIndent)
    return ErrorAt(t, "expected a statement, got an unexpected indent");
  if (t.IsName("with")) {
    if (place != Place::kFunction) {
      return ErrorAt(t,
                     "expected a binding, got 'with': dataflow blocks are only allowed at the "
                     "top level of a function");
    }
    return ParseDataflow(body);
  }
  if (t.IsName("if")) {
    if (place == Place::kDataflow) {
      return ErrorAt(t,
                     "expected a binding, got 'if': control flow is not allowed inside a "
                     "dataflow block");
    }
    return ParseIf(body, place);
  }
  if (t.IsName("return")) {
    return ErrorAt(t, place == Place::kDataflow
                          ? "expected R.output(...) to end the dataflow block, got 'return'"
                          : "expected a binding, got 'return': return is only allowed at the end "
                            "of the function body");
  }
  if (t.IsName("R") && Peek(1).IsPunct(".") && Peek(2).IsName("output")) {
    return ErrorAt(t,
                   "expected a binding, got R.output: R.output is only allowed as the last "
                   "statement of a dataflow block");
  }
  if (t.IsName("R") && Peek(1).IsPunct(".") && Peek(2).IsName("func_attr")) {
    if (place != Place::kFunction) return ErrorAt(t, "expected a binding, got R.func_attr");
    return ParseFuncAttr();
  }
  if (t.kind == TokenKind::kName && Peek(1).IsPunct("=") && Peek(2).IsName("T") &&
      Peek(3).IsPunct(".")) {
    // n = T.int64(): declares a symbolic variable.
    Next();
    Next();
    Next();
    Next();
    const Token& dt = Peek();
    absl::StatusOr<std::string> dtype = ExpectName("a dtype after 'T.'");
    if (!dtype.ok()) return dtype.status();
    absl::StatusOr<DataType> parsed = DataType::Parse(*dtype);
    if (!parsed.ok() || !(parsed->is_int() || parsed->is_uint())) {
      return ErrorAt(dt, absl::StrCat("expected an integer dtype such as T.int64() to declare a "
                                      "symbolic variable, got T.",
                                      *dtype));
    }
    if (absl::Status s = ExpectPunct("(", absl::StrCat("after T.", *dtype)); !s.ok()) return s;
    if (absl::Status s = ExpectPunct(")", "(a symbolic variable takes no arguments)"); !s.ok()) {
      return s;
    }
    auto it = sym_vars_.find(t.text);
    if (it == sym_vars_.end()) sym_vars_.emplace(t.text, Var(t.text, *parsed));
    if (Peek().kind != TokenKind::kNewline) return Expected("end of line after the declaration");
    Next();
    return absl::OkStatus();
  }
  if (t.IsName("cls") && Peek(1).IsPunct("=") && !class_name_.empty() &&
      Peek(2).IsName(class_name_) && Peek(3).kind == TokenKind::kNewline) {
    // cls = Module: TVMScript's name for the module; 'cls.' always means it.
    for (int i = 0; i < 4; ++i) Next();
    return absl::OkStatus();
  }
  if (t.kind == TokenKind::kName && (Peek(1).IsPunct("=") || Peek(1).IsPunct(":"))) {
    return ParseBinding(body, place);
  }
  return Expected("a statement (a binding 'name = value', 'with R.dataflow():', 'if' or 'return')");
}

absl::Status Parser::ParseBinding(Body* body, Place place) {
  const Token& name_tok = Next();
  StructInfo annotation;
  if (TryPunct(":")) {
    absl::StatusOr<StructInfo> a = ParseStructInfo(DimNames::kExisting);
    if (!a.ok()) return a.status();
    annotation = *a;
  }
  if (absl::Status s = ExpectPunct("=", "after the binding target"); !s.ok()) return s;
  Binding b;
  b.span = SpanOf(name_tok);
  if (Peek().IsName("R") && Peek(1).IsPunct(".") && Peek(2).IsName("match_cast")) {
    absl::StatusOr<Expr> v = ParseMatchCast(&b.match_cast);
    if (!v.ok()) return v.status();
    b.value = *v;
  } else {
    absl::StatusOr<Expr> v = ParseValue();
    if (!v.ok()) return v.status();
    b.value = *v;
  }
  if (Peek().kind != TokenKind::kNewline) return Expected("end of line after the binding");
  Next();
  StructInfo var_sinfo = annotation.defined() ? annotation : b.match_cast;
  bool dataflow = place == Place::kDataflow && !dataflow_outputs_.count(name_tok.text);
  Expr var =
      dataflow ? MakeDataflowVar(name_tok.text, var_sinfo) : MakeVar(name_tok.text, var_sinfo);
  b.var = WithSpan(var, SpanOf(name_tok));
  if (annotation.defined()) annotated_vars_.emplace_back(b.var, b.span);
  Define(name_tok.text, b.var);
  body->last_name = name_tok.text;
  body->last_var = b.var;
  body->Add(std::move(b), place == Place::kDataflow);
  return absl::OkStatus();
}

absl::Status Parser::ParseDataflow(Body* body) {
  Next();  // with
  if (!(TryName("R") && TryPunct(".") && TryName("dataflow"))) {
    return Expected("R.dataflow() after 'with'");
  }
  if (absl::Status s = ExpectPunct("(", "after R.dataflow"); !s.ok()) return s;
  if (absl::Status s = ExpectPunct(")", "after 'R.dataflow('"); !s.ok()) return s;
  if (absl::Status s = ExpectPunct(":", "after 'with R.dataflow()'"); !s.ok()) return s;
  if (Peek().kind != TokenKind::kNewline) return Expected("end of line after 'with R.dataflow():'");
  Next();
  if (Peek().kind != TokenKind::kIndent) return Expected("an indented dataflow block");
  Next();

  // The names in R.output(...) are bound to Vars, the others to DataflowVars;
  // find them before parsing the bindings that define them.
  dataflow_outputs_.clear();
  int depth = 0;
  for (size_t i = pos_; i + 3 < tokens_.size(); ++i) {
    const Token& t = tokens_[i];
    if (t.kind == TokenKind::kIndent) ++depth;
    if (t.kind == TokenKind::kDedent && depth-- == 0) break;
    if (depth == 0 && t.IsName("R") && tokens_[i + 1].IsPunct(".") &&
        tokens_[i + 2].IsName("output") && tokens_[i + 3].IsPunct("(")) {
      for (size_t j = i + 4; j < tokens_.size() && !tokens_[j].IsPunct(")"); ++j) {
        if (tokens_[j].kind == TokenKind::kName) dataflow_outputs_.insert(tokens_[j].text);
      }
    }
  }

  scopes_.emplace_back();
  bool has_output = false;
  while (Peek().kind != TokenKind::kDedent && Peek().kind != TokenKind::kEnd) {
    const Token& t = Peek();
    if (t.kind == TokenKind::kNewline) {
      Next();
      continue;
    }
    if (has_output) return ErrorAt(t, "expected the end of the dataflow block after R.output(...)");
    if (t.IsName("R") && Peek(1).IsPunct(".") && Peek(2).IsName("output")) {
      Next();
      Next();
      Next();
      if (absl::Status s = ExpectPunct("(", "after R.output"); !s.ok()) return s;
      while (!TryPunct(")")) {
        const Token& o = Peek();
        absl::StatusOr<std::string> name = ExpectName("a variable name in R.output(...)");
        if (!name.ok()) return name.status();
        if (!scopes_.back().count(*name)) {
          return ErrorAt(o, absl::StrCat("expected a variable bound in this dataflow block in "
                                         "R.output(...), got '",
                                         *name, "'"));
        }
        if (!Peek().IsPunct(")")) {
          if (absl::Status s = ExpectPunct(",", "or ')' in R.output(...)"); !s.ok()) return s;
        }
      }
      if (Peek().kind != TokenKind::kNewline) return Expected("end of line after R.output(...)");
      Next();
      has_output = true;
      continue;
    }
    absl::Status s = ParseStatement(body, Place::kDataflow);
    if (!s.ok()) return s;
  }
  if (Peek().kind == TokenKind::kDedent) Next();
  // Outputs stay visible after the block; dataflow vars do not.
  std::map<std::string, Expr> inner = std::move(scopes_.back());
  scopes_.pop_back();
  for (const std::string& name : dataflow_outputs_) {
    auto it = inner.find(name);
    if (it != inner.end()) Define(name, it->second);
  }
  if (body->blocks.empty() || !body->blocks.back().is_dataflow) {
    // An empty dataflow block still exists in the IR.
    body->blocks.push_back(BindingBlock{{}, true});
  }
  dataflow_outputs_.clear();
  return absl::OkStatus();
}

absl::Status Parser::ParseIf(Body* body, Place place) {
  const Token& if_tok = Next();
  absl::StatusOr<Expr> cond = ParseValue();
  if (!cond.ok()) return cond.status();
  Body branches[2];
  for (int i = 0; i < 2; ++i) {
    if (i == 1 && !TryName("else"))
      return Expected("'else' after the 'if' branch (both are required)");
    if (absl::Status s = ExpectPunct(":", i == 0 ? "after the if condition" : "after 'else'");
        !s.ok()) {
      return s;
    }
    if (Peek().kind != TokenKind::kNewline) return Expected("end of line before the branch body");
    Next();
    if (Peek().kind != TokenKind::kIndent) return Expected("an indented branch body");
    Next();
    scopes_.emplace_back();
    while (Peek().kind != TokenKind::kDedent && Peek().kind != TokenKind::kEnd) {
      if (Peek().kind == TokenKind::kNewline) {
        Next();
        continue;
      }
      absl::Status s = ParseStatement(&branches[i], Place::kBranch);
      if (!s.ok()) return s;
    }
    if (Peek().kind == TokenKind::kDedent) Next();
    scopes_.pop_back();
    if (!branches[i].last_var.defined()) {
      return ErrorAt(if_tok, "expected each branch of 'if' to end with a binding");
    }
  }
  if (branches[0].last_name != branches[1].last_name) {
    return ErrorAt(if_tok,
                   absl::StrCat("expected both branches of 'if' to end by binding the same "
                                "variable, got '",
                                branches[0].last_name, "' and '", branches[1].last_name, "'"));
  }
  Expr seqs[2];
  for (int i = 0; i < 2; ++i) {
    Expr last = branches[i].last_var;
    seqs[i] = WithSpan(MakeSeqExpr(std::move(branches[i].blocks), last), last->span);
  }
  Binding b;
  b.span = SpanOf(if_tok);
  b.value = WithSpan(MakeIf(*cond, seqs[0], seqs[1]), SpanOf(if_tok));
  const std::string& name = branches[0].last_name;
  b.var = WithSpan(MakeVar(name), SpanOf(if_tok));
  Define(name, b.var);
  body->last_name = name;
  body->last_var = b.var;
  body->Add(std::move(b), place == Place::kDataflow);
  return absl::OkStatus();
}

absl::Status Parser::ParseFuncAttr() {
  Next();
  Next();
  Next();
  if (absl::Status s = ExpectPunct("(", "after R.func_attr"); !s.ok()) return s;
  if (absl::Status s = ExpectPunct("{", "(R.func_attr takes a dict)"); !s.ok()) return s;
  while (!TryPunct("}")) {
    if (Peek().kind != TokenKind::kString) return Expected("a string key in R.func_attr({...})");
    std::string key = Next().text;
    if (absl::Status s = ExpectPunct(":", "after the attribute key"); !s.ok()) return s;
    absl::StatusOr<std::optional<AttrValue>> v = ParseAttrValue();
    if (!v.ok()) return v.status();
    if (v->has_value()) function_attrs_[key] = **v;
    if (!Peek().IsPunct("}")) {
      if (absl::Status s = ExpectPunct(",", "or '}' in R.func_attr({...})"); !s.ok()) return s;
    }
  }
  if (absl::Status s = ExpectPunct(")", "after the R.func_attr dict"); !s.ok()) return s;
  if (Peek().kind != TokenKind::kNewline) return Expected("end of line after R.func_attr(...)");
  Next();
  return absl::OkStatus();
}

}  // namespace tether::compiler::text
