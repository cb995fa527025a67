// StaticPlanBlockMemory: liveness over a function's top-level bindings,
// best-fit storage reuse, and the call_tir -> destination-passing rewrite.
#include "compiler/transform/memory_plan.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "compiler/relax/kernel_call.h"
#include "compiler/transform/relax_rewrite.h"
#include "runtime/core/error.h"

namespace tether::compiler {
namespace {

constexpr int64_t kEscapes = std::numeric_limits<int64_t>::max();

Expr WithSInfo(Expr e, StructInfo sinfo) {
  e->set_struct_info(std::move(sinfo));
  return e;
}

Expr ZeroPrim() { return MakePrimValue(PrimExpr(int64_t{0})); }

// Union-find over variables: a value and the values that may alias it
// (views, tuples holding it, anything computed from it without a fresh
// allocation) share one lifetime.
class AliasSets {
 public:
  const VarNode* Find(const VarNode* v) {
    auto it = parent_.find(v);
    if (it == parent_.end() || it->second == v) return v;
    const VarNode* root = Find(it->second);
    parent_[v] = root;
    return root;
  }
  void Union(const VarNode* a, const VarNode* b) {
    const VarNode* ra = Find(a);
    const VarNode* rb = Find(b);
    if (ra != rb) parent_[ra] = rb;
  }

 private:
  absl::flat_hash_map<const VarNode*, const VarNode*> parent_;
};

struct StorageSlot {
  Expr var;                 // the R.memory.alloc_storage result
  int64_t bytes = 0;        // grows when a larger tensor takes a free slot
  int64_t busy_until = -1;  // position of the last use of the tensor in it
};

bool IsCallTIR(const Expr& e) { return CalledOpName(e) == "relax.call_tir"; }

bool IsAllocation(absl::string_view op) {
  return op == "relax.memory.alloc_storage" || op == "relax.memory.alloc_tensor" ||
         op == "relax.builtin.alloc_tensor" || op == "relax.memory.kill_tensor" ||
         op == "relax.memory.kill_storage";
}

class FunctionPlanner {
 public:
  FunctionPlanner(const std::string& fn_name, const IRModule& module)
      : fn_name_(fn_name), module_(module) {}

  absl::StatusOr<Expr> Run(const SeqExprNode& seq) {
    // Dataflow vars become ordinary vars (the blocks stop being dataflow).
    for (const BindingBlock& block : seq.blocks) {
      for (const Binding& b : block.bindings) {
        if (b.var.kind() == ExprKind::kDataflowVar) {
          const auto* v = b.var.as<VarNode>();
          to_var_[v] = MakeVar(v->name_hint, b.var.struct_info());
        }
      }
    }
    Analyze(seq);
    TETHER_RETURN_IF_ERROR(CheckInplaceArguments(seq));
    TETHER_RETURN_IF_ERROR(Plan(seq));

    std::vector<BindingBlock> blocks;
    if (!slots_.empty()) {
      BindingBlock storage_block;
      for (const StorageSlot& slot : slots_) {
        Expr alloc = MakeCall(GetOp("relax.memory.alloc_storage"),
                              {MakeShapeExpr({PrimExpr(slot.bytes)}), ZeroPrim(),
                               MakeStringImm("global"), MakeDataTypeImm(DataType::UInt(8))});
        storage_block.bindings.push_back(
            Binding{slot.var, WithSInfo(alloc, ObjectSInfo()), {}, {}});
      }
      blocks.push_back(std::move(storage_block));
    }
    for (const BindingBlock& block : seq.blocks) {
      BindingBlock out;
      out.is_dataflow = false;
      for (const Binding& b : block.bindings) {
        TETHER_RETURN_IF_ERROR(RewriteBinding(b, &out.bindings));
      }
      blocks.push_back(std::move(out));
    }
    return MakeSeqExprOf(std::move(blocks), SubstituteVars(seq.body, to_var_));
  }

 private:
  // Positions, last uses and alias sets of the top-level bindings.
  void Analyze(const SeqExprNode& seq) {
    int64_t pos = 0;
    for (const BindingBlock& block : seq.blocks) {
      for (const Binding& b : block.bindings) {
        const auto* var = b.var.as<VarNode>();
        last_use_[var] = std::max(last_use_[var], pos);
        absl::string_view op = CalledOpName(b.value);
        const bool fresh = IsCallTIR(b.value) || IsAllocation(op);
        ForEachVarUse(b.value, [&](const VarNode* u) {
          last_use_[u] = std::max(last_use_[u], pos);
          if (!fresh) aliases_.Union(var, u);
        });
        ++pos;
      }
    }
    ForEachVarUse(seq.body, [&](const VarNode* u) { last_use_[u] = kEscapes; });
    // The lifetime of a set is the latest use of any member.
    for (const auto& [var, last] : last_use_) {
      int64_t& set_last = set_last_use_[aliases_.Find(var)];
      set_last = std::max(set_last, last);
    }
  }

  // An argument call_tir_inplace overwrites must not be read after the
  // call: it holds the call's result by then, not the value it names.
  absl::Status CheckInplaceArguments(const SeqExprNode& seq) {
    int64_t pos = 0;
    for (const BindingBlock& block : seq.blocks) {
      for (const Binding& b : block.bindings) {
        const int64_t here = pos++;
        const auto* call = b.value.as<CallNode>();
        if (call == nullptr || CalledOpName(b.value) != "relax.call_tir_inplace") continue;
        TETHER_ASSIGN_OR_RETURN(std::vector<int64_t> indices, InplaceIndices(*call));
        const auto* tuple = call->args.size() >= 2 ? call->args[1].as<TupleNode>() : nullptr;
        if (tuple == nullptr) continue;
        for (int64_t k : indices) {
          if (k < 0 || k >= static_cast<int64_t>(tuple->fields.size())) continue;
          const Expr& arg = tuple->fields[k];
          if (arg.kind() == ExprKind::kConstant) {
            return absl::InvalidArgumentError(
                absl::StrCat(fn_name_, ": call_tir_inplace of '", b.var.as<VarNode>()->name_hint,
                             "' would overwrite a constant (argument ", k, "); copy it first"));
          }
          const auto* v = arg.as<VarNode>();
          if (v == nullptr) continue;
          auto last = last_use_.find(v);
          if (last != last_use_.end() && last->second > here) {
            return absl::InvalidArgumentError(absl::StrCat(
                fn_name_, ": '", v->name_hint, "' is used after call_tir_inplace of '",
                b.var.as<VarNode>()->name_hint, "' overwrote it; use the call's result instead"));
          }
        }
      }
    }
    return absl::OkStatus();
  }

  int64_t LastUse(const VarNode* var) {
    auto it = set_last_use_.find(aliases_.Find(var));
    return it == set_last_use_.end() ? -1 : it->second;
  }

  // Assigns a storage slot to every static, non-escaping call_tir output.
  absl::Status Plan(const SeqExprNode& seq) {
    int64_t pos = 0;
    for (const BindingBlock& block : seq.blocks) {
      for (const Binding& b : block.bindings) {
        const int64_t here = pos++;
        if (!IsCallTIR(b.value) || b.is_match_cast()) continue;
        const auto* call = b.value.as<CallNode>();
        if (call->sinfo_args.empty()) continue;  // rejected with a message when rewritten
        std::optional<int64_t> bytes = StaticBytes(call->sinfo_args[0]);
        const auto* var = b.var.as<VarNode>();
        const int64_t last = LastUse(var);
        if (!bytes.has_value() || last == kEscapes) continue;
        // Best fit among the slots whose tensor is dead by now; else grow the
        // largest free slot; else a new slot.
        int best = -1;
        int largest_free = -1;
        for (int i = 0; i < static_cast<int>(slots_.size()); ++i) {
          const StorageSlot& s = slots_[i];
          if (s.busy_until >= here) continue;
          if (s.bytes >= *bytes && (best < 0 || s.bytes < slots_[best].bytes)) best = i;
          if (largest_free < 0 || s.bytes > slots_[largest_free].bytes) largest_free = i;
        }
        if (best < 0 && largest_free >= 0) {
          best = largest_free;
          slots_[best].bytes = *bytes;
        }
        if (best < 0) {
          best = static_cast<int>(slots_.size());
          std::string name = best == 0 ? "storage" : absl::StrCat("storage", best);
          slots_.push_back(StorageSlot{MakeVar(std::move(name), ObjectSInfo()), *bytes, -1});
        }
        slots_[best].busy_until = std::max(last, here);
        slot_of_[var] = best;
      }
    }
    return absl::OkStatus();
  }

  Expr NewVar(const Expr& old) {
    const auto* v = old.as<VarNode>();
    auto it = to_var_.find(v);
    return it == to_var_.end() ? old : it->second;
  }

  absl::Status RewriteBinding(const Binding& b, std::vector<Binding>* out) {
    Expr var = NewVar(b.var);
    Expr value = SubstituteVars(b.value, to_var_);
    if (IsKernelCall(value) && !b.is_match_cast()) {
      auto slot = slot_of_.find(b.var.as<VarNode>());
      return LowerCallTIR(var, *value.as<CallNode>(),
                          slot == slot_of_.end() ? nullptr : &slots_[slot->second], out);
    }
    if (value.kind() == ExprKind::kIf) {
      TETHER_ASSIGN_OR_RETURN(value, RewriteNested(value));
    }
    Binding nb = b;
    nb.var = var;
    nb.value = value;
    out->push_back(std::move(nb));
    return absl::OkStatus();
  }

  // If branches: call_tir rewritten with run-time allocations, no planning.
  absl::StatusOr<Expr> RewriteNested(const Expr& e) {
    if (const auto* node = e.as<IfNode>()) {
      TETHER_ASSIGN_OR_RETURN(Expr t, RewriteNested(node->true_branch));
      TETHER_ASSIGN_OR_RETURN(Expr f, RewriteNested(node->false_branch));
      Expr out = MakeIf(node->cond, std::move(t), std::move(f));
      out->set_struct_info(e.struct_info());
      return out;
    }
    const auto* seq = e.as<SeqExprNode>();
    if (seq == nullptr) return e;
    std::vector<BindingBlock> blocks;
    for (const BindingBlock& block : seq->blocks) {
      BindingBlock nb;
      for (const Binding& b : block.bindings) {
        if (IsKernelCall(b.value) && !b.is_match_cast()) {
          TETHER_RETURN_IF_ERROR(
              LowerCallTIR(b.var, *b.value.as<CallNode>(), nullptr, &nb.bindings));
          continue;
        }
        Binding copy = b;
        if (b.value.kind() == ExprKind::kIf) {
          TETHER_ASSIGN_OR_RETURN(copy.value, RewriteNested(b.value));
        }
        nb.bindings.push_back(std::move(copy));
      }
      blocks.push_back(std::move(nb));
    }
    return MakeSeqExprOf(std::move(blocks), seq->body);
  }

  absl::StatusOr<Expr> Allocate(const StructInfo& sinfo, const StorageSlot* slot) {
    const auto* t = sinfo.as<TensorStructInfoNode>();
    if (t == nullptr || !t->shape.has_value() || !t->dtype.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat(fn_name_, ": call_tir output ", ToString(sinfo),
                       " needs a tensor struct info with a known shape and dtype"));
    }
    Expr alloc;
    if (slot != nullptr) {
      alloc =
          MakeCall(GetOp("relax.memory.alloc_tensor"),
                   {slot->var, ZeroPrim(), MakeShapeExpr(*t->shape), MakeDataTypeImm(*t->dtype)});
    } else {
      alloc = MakeCall(GetOp("relax.builtin.alloc_tensor"),
                       {MakeShapeExpr(*t->shape), MakeDataTypeImm(*t->dtype), ZeroPrim()});
    }
    return WithSInfo(alloc, TensorSInfo(*t->shape, *t->dtype, t->vdevice));
  }

  // call_tir and call_tir_inplace in destination-passing style: the
  // outputs allocated (in `slot` when planned), the kernel called with the
  // arguments, those outputs and the tir_vars, and the call's var bound to
  // the outputs (an in-place output is the argument it overwrote).
  absl::Status LowerCallTIR(const Expr& var, const CallNode& call, const StorageSlot* slot,
                            std::vector<Binding>* out) {
    const auto* gv = call.args.empty() ? nullptr : call.args[0].as<GlobalVarNode>();
    if (gv == nullptr || !module_.kernels.count(gv->name_hint)) {
      return absl::InvalidArgumentError(
          absl::StrCat(fn_name_, ": call_tir callee ",
                       gv == nullptr ? std::string("(not a global var)") : gv->name_hint,
                       " is not a kernel of the module"));
    }
    const auto* tuple = call.args.size() >= 2 ? call.args[1].as<TupleNode>() : nullptr;
    const Expr* tir_vars = call.args.size() == 3 ? &call.args[2] : nullptr;
    if (tuple == nullptr || call.args.size() > 3 || call.sinfo_args.size() != 1 ||
        (tir_vars != nullptr && tir_vars->as<ShapeExprNode>() == nullptr)) {
      return absl::InvalidArgumentError(
          absl::StrCat(fn_name_, ": call_tir to ", gv->name_hint,
                       " must have a tuple of arguments, tir_vars (if any) as a shape and "
                       "exactly one out_sinfo"));
    }
    TETHER_ASSIGN_OR_RETURN(std::vector<int64_t> inplace, InplaceIndices(call));
    std::vector<Expr> args = tuple->fields;
    const StructInfo& out_sinfo = call.sinfo_args[0];
    const auto* fields = out_sinfo.as<TupleStructInfoNode>();
    if (fields == nullptr && inplace.empty()) {
      TETHER_ASSIGN_OR_RETURN(Expr alloc, Allocate(out_sinfo, slot));
      out->push_back(Binding{var, alloc, {}, {}});
      args.push_back(var);
      if (tir_vars != nullptr) args.push_back(*tir_vars);
      EmitKernelCall(call.args[0], std::move(args), out);
      return absl::OkStatus();
    }
    const std::vector<StructInfo> outputs = KernelCallOutputs(call);
    std::vector<Expr> outs;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!inplace.empty() && inplace[i] >= 0) {
        outs.push_back(tuple->fields[inplace[i]]);
        continue;
      }
      TETHER_ASSIGN_OR_RETURN(Expr alloc, Allocate(outputs[i], nullptr));
      Expr o = MakeVar(absl::StrCat(var.as<VarNode>()->name_hint, "_", i), alloc.struct_info());
      out->push_back(Binding{o, alloc, {}, {}});
      outs.push_back(o);
      args.push_back(o);
    }
    if (tir_vars != nullptr) args.push_back(*tir_vars);
    EmitKernelCall(call.args[0], std::move(args), out);
    out->push_back(Binding{var, fields == nullptr ? outs[0] : MakeTuple(outs), {}, {}});
    return absl::OkStatus();
  }

  void EmitKernelCall(const Expr& kernel, std::vector<Expr> args, std::vector<Binding>* out) {
    Expr call = WithSInfo(MakeCall(kernel, std::move(args)), TupleSInfo({}));
    out->push_back(Binding{MakeVar("_", TupleSInfo({})), call, {}, {}});
  }

  const std::string& fn_name_;
  const IRModule& module_;
  VarSubstitution to_var_;
  AliasSets aliases_;
  absl::flat_hash_map<const VarNode*, int64_t> last_use_;
  absl::flat_hash_map<const VarNode*, int64_t> set_last_use_;
  std::vector<StorageSlot> slots_;
  absl::flat_hash_map<const VarNode*, int> slot_of_;
};

}  // namespace

absl::StatusOr<IRModule> StaticPlanBlockMemory(IRModule module) {
  return RewriteFunctionBodies(
      std::move(module),
      [](const std::string& name, const Expr& body, IRModule* m) -> absl::StatusOr<Expr> {
        FunctionPlanner planner(name, *m);
        return planner.Run(*body.as<SeqExprNode>());
      });
}

absl::StatusOr<int64_t> PlannedPeakBytes(const IRModule& module, absl::string_view function) {
  Expr fn = module.Lookup(std::string(function));
  const auto* f = fn.as<FunctionNode>();
  if (f == nullptr) {
    return absl::NotFoundError(absl::StrCat("no relax function ", function, " in the module"));
  }
  const auto* seq = f->body.as<SeqExprNode>();
  if (seq == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("function ", function, " is not normalized"));
  }
  int64_t total = 0;
  for (const BindingBlock& block : seq->blocks) {
    for (const Binding& b : block.bindings) {
      if (CalledOpName(b.value) != "relax.memory.alloc_storage") continue;
      const auto* call = b.value.as<CallNode>();
      const auto* shape = call->args.empty() ? nullptr : call->args[0].as<ShapeExprNode>();
      const int64_t* bytes =
          shape != nullptr && shape->values.size() == 1 ? shape->values[0].as_int() : nullptr;
      if (bytes == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("function ", function, ": alloc_storage of ",
                                                       b.var.as<VarNode>()->name_hint,
                                                       " has no static byte size"));
      }
      total += *bytes;
    }
  }
  return total;
}

}  // namespace tether::compiler
