// Kernel IR construction and TVMScript-like printing.
#include "compiler/kernel/kernel_ir.h"

#include "absl/strings/str_cat.h"

namespace tether::compiler {
namespace {

template <typename T, typename... Args>
Stmt MakeStmt(Args&&... args) {
  return Stmt(Ref<const StmtNode>(MakeRef<T>(std::forward<Args>(args)...)));
}

void Indent(int n, std::string* out) { out->append(static_cast<size_t>(n) * 4, ' '); }

std::string Indices(const std::vector<PrimExpr>& idx) {
  std::string s;
  for (size_t i = 0; i < idx.size(); ++i) absl::StrAppend(&s, i ? ", " : "", ToString(idx[i]));
  return s;
}

std::string BufferType(const Buffer& b) {
  std::string s = "T.Buffer((";
  for (size_t i = 0; i < b->shape.size(); ++i)
    absl::StrAppend(&s, i ? ", " : "", ToString(b->shape[i]));
  if (b->shape.size() == 1) s += ",";
  absl::StrAppend(&s, "), \"", b->dtype.ToString(), "\"");
  switch (b->scope) {
    case BufferNode::Scope::kGlobal:
      break;
    case BufferNode::Scope::kLocal:
      s += ", scope=\"local\"";
      break;
    case BufferNode::Scope::kShared:
      s += ", scope=\"shared\"";
      break;
    case BufferNode::Scope::kPerThread:
      s += ", scope=\"per_thread\"";
      break;
  }
  s += ")";
  return s;
}

const char* ForKindName(ForKind k) {
  switch (k) {
    case ForKind::kSerial:
      return "T.serial";
    case ForKind::kParallel:
      return "T.parallel";
    case ForKind::kVectorized:
      return "T.vectorized";
    case ForKind::kUnrolled:
      return "T.unroll";
    case ForKind::kBlock:
      return "T.blocks";
    case ForKind::kThread:
      return "T.threads";
  }
  return "T.serial";
}

void PrintStmt(const Stmt& s, int indent, std::string* out) {
  if (!s.defined()) {
    Indent(indent, out);
    out->append("pass\n");
    return;
  }
  switch (s.kind()) {
    case StmtKind::kFor: {
      const auto* f = s.as<ForNode>();
      Indent(indent, out);
      absl::StrAppend(out, "for ", f->var.name(), " in ", ForKindName(f->for_kind), "(");
      if (const int64_t* m = f->min.as_int(); m && *m == 0) {
        absl::StrAppend(out, ToString(f->extent));
      } else {
        absl::StrAppend(out, ToString(f->min), ", ", ToString(f->min + f->extent));
      }
      out->append("):\n");
      PrintStmt(f->body, indent + 1, out);
      return;
    }
    case StmtKind::kStore: {
      const auto* st = s.as<StoreNode>();
      Indent(indent, out);
      absl::StrAppend(out, st->buffer->name, "[", Indices(st->indices), "] = ", ToString(st->value),
                      "\n");
      return;
    }
    case StmtKind::kLet: {
      const auto* l = s.as<LetStmtNode>();
      Indent(indent, out);
      absl::StrAppend(out, l->var.name(), ": T.", l->var.dtype().ToString(), " = ",
                      ToString(l->value), "\n");
      PrintStmt(l->body, indent, out);
      return;
    }
    case StmtKind::kAllocate: {
      const auto* a = s.as<AllocateNode>();
      Indent(indent, out);
      absl::StrAppend(out, a->buffer->name, " = T.alloc_buffer", BufferType(a->buffer).substr(8),
                      "\n");
      PrintStmt(a->body, indent, out);
      return;
    }
    case StmtKind::kSeq:
      for (const Stmt& c : s.as<SeqStmtNode>()->seq) PrintStmt(c, indent, out);
      return;
    case StmtKind::kIf: {
      const auto* i = s.as<IfThenElseNode>();
      Indent(indent, out);
      absl::StrAppend(out, "if ", ToString(i->cond), ":\n");
      PrintStmt(i->then_case, indent + 1, out);
      if (i->else_case.defined()) {
        Indent(indent, out);
        out->append("else:\n");
        PrintStmt(i->else_case, indent + 1, out);
      }
      return;
    }
    case StmtKind::kAssert: {
      const auto* a = s.as<AssertStmtNode>();
      Indent(indent, out);
      absl::StrAppend(out, "assert ", ToString(a->cond), ", \"", a->message, "\"\n");
      PrintStmt(a->body, indent, out);
      return;
    }
    case StmtKind::kEvaluate:
      Indent(indent, out);
      absl::StrAppend(out, "T.evaluate(", ToString(s.as<EvaluateNode>()->value), ")\n");
      return;
  }
}

}  // namespace

Stmt For(Var var, PrimExpr min, PrimExpr extent, ForKind kind, Stmt body) {
  return MakeStmt<ForNode>(std::move(var), std::move(min), std::move(extent), kind,
                           std::move(body));
}

Stmt Store(Buffer buffer, std::vector<PrimExpr> indices, PrimExpr value) {
  if (value.dtype() != buffer->dtype) value = Cast(buffer->dtype, std::move(value));
  return MakeStmt<StoreNode>(std::move(buffer), std::move(indices), std::move(value));
}

Stmt LetStmt(Var var, PrimExpr value, Stmt body) {
  return MakeStmt<LetStmtNode>(std::move(var), std::move(value), std::move(body));
}

Stmt Allocate(Buffer buffer, Stmt body) {
  return MakeStmt<AllocateNode>(std::move(buffer), std::move(body));
}

Stmt Seq(std::vector<Stmt> seq) {
  std::vector<Stmt> flat;
  for (Stmt& s : seq) {
    if (!s.defined()) continue;
    if (const auto* inner = s.as<SeqStmtNode>()) {
      flat.insert(flat.end(), inner->seq.begin(), inner->seq.end());
    } else {
      flat.push_back(std::move(s));
    }
  }
  if (flat.size() == 1) return flat[0];
  return MakeStmt<SeqStmtNode>(std::move(flat));
}

Stmt IfThenElse(PrimExpr cond, Stmt then_case, Stmt else_case) {
  return MakeStmt<IfThenElseNode>(std::move(cond), std::move(then_case), std::move(else_case));
}

Stmt AssertStmt(PrimExpr cond, std::string message, Stmt body) {
  return MakeStmt<AssertStmtNode>(std::move(cond), std::move(message), std::move(body));
}

Stmt Evaluate(PrimExpr value) { return MakeStmt<EvaluateNode>(std::move(value)); }

KernelFunc MakeKernelFunc(std::string name, std::vector<KernelParam> params, Stmt body,
                          int num_outputs) {
  return KernelFunc(
      MakeRef<KernelFuncNode>(std::move(name), std::move(params), std::move(body), num_outputs));
}

std::string ToString(const Stmt& stmt, int indent) {
  std::string out;
  PrintStmt(stmt, indent, &out);
  return out;
}

std::string ToString(const KernelFunc& func) {
  std::string out = absl::StrCat("@T.prim_func\ndef ", func->name, "(");
  for (size_t i = 0; i < func->params.size(); ++i) {
    const KernelParam& p = func->params[i];
    if (i) out += ", ";
    if (p.is_tensor()) {
      absl::StrAppend(&out, p.buffer->name, ": ", BufferType(p.buffer));
    } else {
      absl::StrAppend(&out, p.var.name(), ": T.", p.var.dtype().ToString());
    }
  }
  out += "):\n";
  PrintStmt(func->body, 1, &out);
  return out;
}

}  // namespace tether::compiler
