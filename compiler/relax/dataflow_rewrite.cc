// DataflowBlockRewrite: edits of one dataflow block, each re-normalized and
// checked before it is adopted.
#include "compiler/relax/dataflow_rewrite.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "compiler/relax/block_builder.h"
#include "compiler/relax/struct_info_util.h"
#include "compiler/relax/visitor.h"
#include "compiler/tir/arith.h"

namespace tether::compiler {
namespace {

std::string VarName(const Expr& var) {
  const auto* v = var.as<VarNode>();
  return v ? v->name_hint : "?";
}

// Counts the uses (not definitions) of every var below the visited nodes.
class UseCounter : public ExprVisitor {
 public:
  void VisitVar(const Expr& var) override { ++uses_[var.get()]; }
  const absl::flat_hash_map<const ExprNode*, int>& uses() const { return uses_; }

 private:
  absl::flat_hash_map<const ExprNode*, int> uses_;
};

absl::flat_hash_map<const ExprNode*, int> CountUses(const std::vector<BindingBlock>& blocks,
                                                    const Expr& body) {
  UseCounter counter;
  for (const BindingBlock& block : blocks) {
    for (const Binding& b : block.bindings) counter.VisitExpr(b.value);
  }
  counter.VisitExpr(body);
  return counter.uses();
}

absl::flat_hash_map<const ExprNode*, int> CountUses(const Expr& e) {
  UseCounter counter;
  counter.VisitExpr(e);
  return counter.uses();
}

// Replaces uses of one var; rebuilt nodes lose their struct info so the
// normalizer infers it again from the (possibly more precise) new var.
class VarReplacer : public ExprMutator {
 public:
  VarReplacer(const Expr& old_var, const Expr& new_var) {
    var_remap_[old_var.get()] = new_var;
    keep_struct_info_ = false;
  }
};

// Collects the symbolic vars mentioned by the visited nodes: in shapes,
// prim values, call and match-cast struct info, and the struct info of the
// vars they define.
class SymbolicVarCollector : public ExprVisitor {
 public:
  void VisitPrimExpr(const PrimExpr& e) override { CollectVars(e, &vars_); }
  void VisitVarDef(const Expr& var) override {
    if (var.struct_info().defined()) VisitStructInfo(var.struct_info());
  }
  absl::flat_hash_set<const PrimVarNode*> Nodes() const {
    absl::flat_hash_set<const PrimVarNode*> out;
    for (const Var& v : vars_) out.insert(v.get());
    return out;
  }

 private:
  std::vector<Var> vars_;
};

// Whether evaluating `value` has no effect beyond its result, so that an
// unused binding of it may be dropped.
bool IsPureValue(const Expr& value) {
  switch (value.kind()) {
    case ExprKind::kCall: {
      const Expr& op = value.as<CallNode>()->op;
      if (const auto* o = op.as<OpNode>()) {
        const std::string& n = o->name;
        return !absl::StartsWith(n, "relax.memory.") && n != "relax.builtin.alloc_tensor" &&
               n != "relax.print" && n != "relax.assert_op" && n != "relax.call_packed";
      }
      if (op.kind() == ExprKind::kExternFunc) return false;
      const auto* f = op.struct_info().as<FuncStructInfoNode>();
      return f != nullptr && f->purity;
    }
    case ExprKind::kIf:
    case ExprKind::kSeqExpr:
      return false;
    default:
      return true;
  }
}

// The bindings of `block` in definition-before-use order, moving each as
// little as possible (a stable topological sort); impure bindings and match
// casts keep their relative order. INVALID_ARGUMENT on a cyclic definition.
absl::StatusOr<std::vector<Binding>> OrderBindings(const std::vector<Binding>& bindings) {
  const size_t n = bindings.size();
  absl::flat_hash_map<const ExprNode*, size_t> index;
  for (size_t i = 0; i < n; ++i) index[bindings[i].var.get()] = i;
  std::vector<std::vector<size_t>> deps(n);
  std::vector<bool> barrier(n);
  for (size_t i = 0; i < n; ++i) {
    for (const auto& [var, count] : CountUses(bindings[i].value)) {
      auto it = index.find(var);
      if (it != index.end()) deps[i].push_back(it->second);
    }
    barrier[i] = bindings[i].is_match_cast() || !IsPureValue(bindings[i].value);
  }
  std::vector<bool> placed(n, false);
  std::vector<Binding> out;
  out.reserve(n);
  while (out.size() < n) {
    bool progressed = false;
    bool barrier_pending = false;
    for (size_t i = 0; i < n; ++i) {
      if (placed[i]) continue;
      bool ready = !(barrier[i] && barrier_pending);
      for (size_t d : deps[i]) ready = ready && placed[d];
      if (!ready) {
        barrier_pending |= barrier[i];
        continue;
      }
      placed[i] = true;
      out.push_back(bindings[i]);
      progressed = true;
      break;
    }
    if (!progressed) {
      for (size_t i = 0; i < n; ++i) {
        if (!placed[i]) {
          return absl::InvalidArgumentError(
              absl::StrCat("the definition of ", VarName(bindings[i].var), " is cyclic"));
        }
      }
    }
  }
  return out;
}

}  // namespace

DataflowBlockRewrite::DataflowBlockRewrite(const Expr& function, std::vector<BindingBlock> blocks,
                                           Expr body, size_t block_index)
    : original_(function),
      blocks_(std::move(blocks)),
      body_(std::move(body)),
      block_index_(block_index) {}

absl::StatusOr<DataflowBlockRewrite> DataflowBlockRewrite::Create(const Expr& function,
                                                                  size_t block_index) {
  const auto* f = function.defined() ? function.as<FunctionNode>() : nullptr;
  if (f == nullptr) return absl::InvalidArgumentError("dataflow block rewrite needs a function");
  const auto* seq = f->body.defined() ? f->body.as<SeqExprNode>() : nullptr;
  if (seq == nullptr) {
    return absl::InvalidArgumentError("the function body is not a SeqExpr (not normalized)");
  }
  if (block_index >= seq->blocks.size()) {
    return absl::InvalidArgumentError(absl::StrCat("block index ", block_index,
                                                   " out of range: the function has ",
                                                   seq->blocks.size(), " blocks"));
  }
  if (!seq->blocks[block_index].is_dataflow) {
    return absl::InvalidArgumentError(
        absl::StrCat("block ", block_index, " is a binding block, not a dataflow block"));
  }
  DataflowBlockRewrite rewrite(function, seq->blocks, seq->body, block_index);
  absl::Status s = rewrite.Commit(seq->blocks, seq->body);
  if (!s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the function is not well-formed: ", s.message()));
  }
  return rewrite;
}

absl::Status DataflowBlockRewrite::Commit(std::vector<BindingBlock> blocks, Expr body) {
  absl::StatusOr<std::vector<Binding>> ordered = OrderBindings(blocks[block_index_].bindings);
  if (!ordered.ok()) return ordered.status();
  blocks[block_index_].bindings = *std::move(ordered);
  const auto* f = original_.as<FunctionNode>();
  Expr fn =
      MakeFunction(f->params, MakeSeqExpr(blocks, body), f->ret_struct_info, f->is_pure, f->attrs);
  const_cast<ExprNode*>(fn.get())->span = original_->span;
  BlockBuilder builder;
  absl::StatusOr<Expr> normalized = builder.Normalize(fn);
  if (!normalized.ok()) return normalized.status();
  absl::Status wf =
      CheckWellFormed(*normalized, GetStringAttr(f->attrs, "global_symbol", "function"),
                      /*module=*/nullptr);
  if (!wf.ok()) return wf;
  blocks_ = std::move(blocks);
  body_ = std::move(body);
  mutated_ = *std::move(normalized);
  return absl::OkStatus();
}

absl::StatusOr<Expr> DataflowBlockRewrite::Add(const Expr& value, absl::string_view name,
                                               bool is_dataflow_var) {
  if (!value.defined()) return absl::InvalidArgumentError("cannot add an undefined expression");
  std::string var_name = name.empty() ? absl::StrCat("tmp", name_counter_) : std::string(name);
  BlockBuilder builder;
  builder.BeginDataflowBlock();
  absl::StatusOr<Expr> var =
      is_dataflow_var ? builder.Emit(value, var_name) : builder.EmitOutput(value, var_name);
  BindingBlock added = builder.EndBlock();
  if (!var.ok()) return var.status();
  std::vector<BindingBlock> blocks = blocks_;
  for (Binding& b : added.bindings) blocks[block_index_].bindings.push_back(std::move(b));
  absl::Status s = Commit(std::move(blocks), body_);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("adding ", var_name, ": ", s.message()));
  }
  if (name.empty()) ++name_counter_;
  return var;
}

absl::Status DataflowBlockRewrite::AddBinding(const Binding& binding) {
  if (!binding.var.defined() || binding.var.as<VarNode>() == nullptr) {
    return absl::InvalidArgumentError("a binding needs a var");
  }
  for (const Expr& p : original_.as<FunctionNode>()->params) {
    if (p.same_as(binding.var)) {
      return absl::InvalidArgumentError(
          absl::StrCat("var ", VarName(binding.var), " is a parameter of the function"));
    }
  }
  for (const BindingBlock& block : blocks_) {
    for (const Binding& b : block.bindings) {
      if (b.var.same_as(binding.var)) {
        return absl::InvalidArgumentError(
            absl::StrCat("var ", VarName(binding.var), " is already bound in the function"));
      }
    }
  }
  BlockBuilder builder;
  builder.BeginDataflowBlock();
  absl::Status emitted = builder.EmitBinding(binding);
  BindingBlock added = builder.EndBlock();
  if (!emitted.ok()) return emitted;
  std::vector<BindingBlock> blocks = blocks_;
  for (Binding& b : added.bindings) blocks[block_index_].bindings.push_back(std::move(b));
  absl::Status s = Commit(std::move(blocks), body_);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("adding ", VarName(binding.var), ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status DataflowBlockRewrite::ReplaceAllUses(const Expr& old_var, const Expr& new_var) {
  if (!old_var.defined() || old_var.as<VarNode>() == nullptr || !new_var.defined() ||
      new_var.as<VarNode>() == nullptr) {
    return absl::InvalidArgumentError("replace_all_uses takes two vars");
  }
  if (old_var.same_as(new_var)) return absl::OkStatus();
  if (!IsBaseOf(old_var.struct_info(), new_var.struct_info())) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot replace ", VarName(old_var), " of ", ToString(old_var.struct_info()),
                     " with ", VarName(new_var), " of ", ToString(new_var.struct_info()),
                     ": the struct info is not compatible"));
  }
  VarReplacer replacer(old_var, new_var);
  std::vector<BindingBlock> blocks = blocks_;
  for (BindingBlock& block : blocks) {
    for (Binding& b : block.bindings) b.value = replacer.VisitExpr(b.value);
  }
  Expr body = replacer.VisitExpr(body_);
  absl::Status s = Commit(std::move(blocks), std::move(body));
  if (!s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("replacing ", VarName(old_var), " with ",
                                                   VarName(new_var), ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status DataflowBlockRewrite::RemoveUnused(const Expr& var, bool allow_undef) {
  if (!var.defined() || var.as<VarNode>() == nullptr) {
    return absl::InvalidArgumentError("remove_unused takes a var");
  }
  const std::vector<Binding>& bindings = blocks_[block_index_].bindings;
  size_t pos = bindings.size();
  for (size_t i = 0; i < bindings.size(); ++i) {
    if (bindings[i].var.same_as(var)) pos = i;
  }
  if (pos == bindings.size()) {
    if (allow_undef) return absl::OkStatus();
    return absl::NotFoundError(
        absl::StrCat("var ", VarName(var), " is not bound in dataflow block ", block_index_));
  }
  absl::flat_hash_map<const ExprNode*, int> uses = CountUses(blocks_, body_);
  auto it = uses.find(var.get());
  if (it != uses.end() && it->second > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("var ", VarName(var), " is still used (", it->second, " uses)"));
  }
  if (bindings[pos].is_match_cast()) {
    absl::Status s = CheckMatchCastRemovable(pos);
    if (!s.ok()) return s;
  }
  std::vector<BindingBlock> blocks = blocks_;
  blocks[block_index_].bindings.erase(blocks[block_index_].bindings.begin() +
                                      static_cast<std::ptrdiff_t>(pos));
  absl::Status s = Commit(std::move(blocks), body_);
  if (!s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("removing ", VarName(var), " breaks the function: ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status DataflowBlockRewrite::CheckMatchCastRemovable(size_t pos) const {
  const auto* f = original_.as<FunctionNode>();
  // Symbolic vars defined before the match cast: by the params and by
  // earlier match casts (a later mention of them is a check, not a definition).
  SymbolicVarCollector before;
  for (const Expr& p : f->params) before.VisitVarDef(p);
  SymbolicVarCollector after;
  after.VisitStructInfo(f->ret_struct_info);
  after.VisitExpr(body_);
  for (size_t bi = 0; bi < blocks_.size(); ++bi) {
    for (size_t i = 0; i < blocks_[bi].bindings.size(); ++i) {
      const Binding& b = blocks_[bi].bindings[i];
      bool earlier = bi < block_index_ || (bi == block_index_ && i < pos);
      if (bi == block_index_ && i == pos) continue;
      if (earlier && b.is_match_cast()) before.VisitStructInfo(b.match_cast);
      after.VisitBinding(b);
    }
  }
  const Binding& cast = blocks_[block_index_].bindings[pos];
  std::vector<Var> defined;
  CollectStructInfoVars(cast.match_cast, &defined);
  absl::flat_hash_set<const PrimVarNode*> defined_before = before.Nodes();
  absl::flat_hash_set<const PrimVarNode*> used = after.Nodes();
  for (const Var& v : defined) {
    if (!defined_before.contains(v.get()) && used.contains(v.get())) {
      return absl::FailedPreconditionError(absl::StrCat("the match cast of ", VarName(cast.var),
                                                        " defines symbolic var ", v.name(),
                                                        ", which is still used"));
    }
  }
  return absl::OkStatus();
}

void DataflowBlockRewrite::RemoveAllUnused() {
  std::vector<BindingBlock> blocks = blocks_;
  std::vector<Binding>& bindings = blocks[block_index_].bindings;
  absl::flat_hash_map<const ExprNode*, int> uses = CountUses(blocks, body_);
  bool changed = false;
  bool removed = true;
  while (removed) {
    removed = false;
    // Backwards, so that a chain of dead bindings goes in one sweep; the
    // outer loop catches what the order still leaves (after a reordering).
    for (size_t i = bindings.size(); i-- > 0;) {
      const Binding& b = bindings[i];
      auto it = uses.find(b.var.get());
      if ((it != uses.end() && it->second > 0) || b.var.kind() != ExprKind::kDataflowVar ||
          b.is_match_cast() || !IsPureValue(b.value)) {
        continue;
      }
      for (const auto& [v, count] : CountUses(b.value)) uses[v] -= count;
      bindings.erase(bindings.begin() + static_cast<std::ptrdiff_t>(i));
      removed = changed = true;
    }
  }
  // Removing unused pure bindings cannot make the function ill-formed; on
  // the impossible failure the rewriter keeps its previous state.
  if (changed) (void)Commit(std::move(blocks), body_);
}

absl::StatusOr<Expr> DataflowBlockRewrite::MutatedRootFn() const { return mutated_; }

absl::StatusOr<IRModule> DataflowBlockRewrite::MutateIRModule(
    IRModule module, const std::string& function_name) const {
  auto it = module.functions.find(function_name);
  if (it == module.functions.end() || it->second.as<FunctionNode>() == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("the module has no relax function named ", function_name));
  }
  absl::StatusOr<Expr> fn = MutatedRootFn();
  if (!fn.ok()) return fn.status();
  it->second = *std::move(fn);
  return module;
}

}  // namespace tether::compiler
