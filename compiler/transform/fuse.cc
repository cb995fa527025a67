// FuseOps: grouping by operator pattern and composing each group's kernel.
#include "compiler/transform/fuse.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "compiler/lower/lower.h"
#include "compiler/op/op.h"
#include "compiler/tir/arith.h"
#include "compiler/transform/legalize.h"
#include "compiler/transform/relax_rewrite.h"
#include "runtime/core/error.h"
#include "runtime/core/scalar.h"

namespace tether::compiler {
namespace {

// A 0-d floating-point constant argument as an immediate (undefined for
// anything else): a fused kernel reads it as a constant, not through a
// parameter, so the arithmetic around it folds (x ** 2.0 is x * x) and a
// vector loop does not load it every iteration.
PrimExpr ScalarConstant(const Expr& arg) {
  const auto* c = arg.as<ConstantNode>();
  if (c == nullptr || c->data->ndim() != 0) return PrimExpr();
  const DataType dt = c->data->dtype();
  if (!dt.is_float() && !dt.is_bfloat16()) return PrimExpr();
  double v = 0;
  if (!DispatchScalarType(dt, [&](auto tag) {
        using T = decltype(tag);
        v = ScalarToDouble(*static_cast<const T*>(c->data->element_data()));
      })) {
    return PrimExpr();
  }
  return MakeConst(dt, v);
}

struct Group {
  std::vector<int> members;  // binding indices, ascending
  int anchor = -1;           // the reduction / out-ewise-fusable member, or -1
  int output = -1;           // the member whose value leaves the group
};

// The calls of one dataflow block that may take part in fusion.
struct Candidate {
  const CallNode* call = nullptr;
  const OpInfo* info = nullptr;
};

// Lowers one group into a kernel. Thread-hostile; one per group.
class GroupLowering {
 public:
  GroupLowering(const BindingBlock& block, const std::vector<Candidate>& cands, const Group& group,
                const KernelTarget& target)
      : block_(block), cands_(cands), group_(group), target_(target) {
    for (int m : group.members) member_of_var_[block.bindings[m].var.as<VarNode>()] = m;
  }

  // The external tensor inputs, in first-use order (valid after Lower).
  const std::vector<Expr>& inputs() const { return inputs_; }

  absl::StatusOr<KernelFunc> Lower() {
    // Parameters: every tensor argument not produced inside the group.
    std::vector<KernelParam> params;
    for (int m : group_.members) {
      for (const Expr& arg : cands_[m].call->args) {
        if (arg.struct_info().as<TensorStructInfoNode>() == nullptr) continue;
        if (Producer(arg) >= 0 || ScalarConstant(arg).defined()) continue;
        if (param_of_.count(arg.get())) continue;
        TETHER_ASSIGN_OR_RETURN(
            Buffer buf, BufferForStructInfo(arg.struct_info(), absl::StrCat("p", inputs_.size())));
        param_of_[arg.get()] = buf;
        inputs_.push_back(arg);
        params.push_back(KernelParam::Tensor(buf));
      }
    }
    const Binding& out_binding = block_.bindings[group_.output];
    TETHER_ASSIGN_OR_RETURN(Buffer out,
                            BufferForStructInfo(out_binding.var.struct_info(), "T_out"));
    params.push_back(KernelParam::Tensor(out));
    AddScalarVars(&params);

    Stmt body;
    if (group_.anchor < 0) {
      body = MakeElementwiseLoopNest(
          out, [&](const std::vector<PrimExpr>& idx) { return Value(group_.output, idx); },
          target_.gpu);
    } else {
      MarkDownstream();
      const Candidate& anchor = cands_[group_.anchor];
      LowerContext ctx = Context(group_.anchor, /*epilogue_value=*/nullptr);
      Epilogue epilogue = [&](const PrimExpr& value, const std::vector<PrimExpr>& idx) {
        return EpilogueValue(group_.output, value, idx);
      };
      TETHER_ASSIGN_OR_RETURN(body, anchor.info->schedule(ctx, {out}, epilogue));
    }
    return MakeKernelFunc("kernel", std::move(params), std::move(body), 1);
  }

 private:
  int Producer(const Expr& arg) const {
    const auto* v = arg.as<VarNode>();
    if (v == nullptr) return -1;
    auto it = member_of_var_.find(v);
    return it == member_of_var_.end() ? -1 : it->second;
  }

  // Every symbolic var the group's shapes and shape arguments use that no
  // parameter's shape binds (the kernel binds vars at entry only) becomes a
  // scalar parameter after the output, passed as call_tir's tir_vars (as
  // LowerCallToKernel does, compiler/lower/lower.h).
  void AddScalarVars(std::vector<KernelParam>* params) const {
    absl::flat_hash_set<const PrimVarNode*> bound;
    for (const KernelParam& p : *params) {
      for (const PrimExpr& d : p.buffer->shape) {
        if (const auto* v = d.as<PrimVarNode>()) bound.insert(v);
      }
    }
    std::vector<Var> used;
    auto collect = [&](const PrimExpr& e) { CollectVars(e, &used); };
    for (int m : group_.members) {
      const auto* t = block_.bindings[m].var.struct_info().as<TensorStructInfoNode>();
      if (t != nullptr && t->shape.has_value()) {
        for (const PrimExpr& d : *t->shape) collect(d);
      }
      for (const Expr& arg : cands_[m].call->args) {
        if (const auto* s = arg.as<ShapeExprNode>()) {
          for (const PrimExpr& d : s->values) collect(d);
        } else if (const auto* p = arg.as<PrimValueNode>()) {
          collect(p->value);
        } else if (const auto* a = arg.struct_info().as<TensorStructInfoNode>();
                   a != nullptr && a->shape.has_value()) {
          for (const PrimExpr& d : *a->shape) collect(d);
        }
      }
    }
    for (const Var& v : used) {
      if (bound.insert(v.get()).second) params->push_back(KernelParam::Scalar(v));
    }
  }

  // Members on the path from the anchor to the output: they see the
  // anchor's value through the epilogue.
  void MarkDownstream() {
    downstream_.insert(group_.anchor);
    for (int m : group_.members) {
      if (m <= group_.anchor) continue;
      for (const Expr& arg : cands_[m].call->args) {
        if (downstream_.count(Producer(arg))) downstream_.insert(m);
      }
    }
  }

  // The context of member m; with `epilogue_value`, in-group downstream
  // arguments read that value (the epilogue's shapes equal the anchor's, so
  // the consumer's indices are the anchor's).
  LowerContext Context(int m, const PrimExpr* epilogue_value) {
    const Candidate& c = cands_[m];
    LowerContext ctx;
    ctx.call = c.call;
    ctx.out_sinfo = block_.bindings[m].var.struct_info();
    ctx.target = target_;
    for (const Expr& arg : c.call->args) {
      const int producer = Producer(arg);
      if (producer >= 0) {
        ctx.input_buffers.push_back(Buffer());
        if (epilogue_value != nullptr && downstream_.count(producer)) {
          PrimExpr value = *epilogue_value;
          ctx.inputs.push_back([this, producer, value](const std::vector<PrimExpr>& idx) {
            return EpilogueValue(producer, value, idx);
          });
        } else {
          ctx.inputs.push_back(
              [this, producer](const std::vector<PrimExpr>& idx) { return Value(producer, idx); });
        }
      } else if (PrimExpr c = ScalarConstant(arg); c.defined()) {
        ctx.input_buffers.push_back(Buffer());
        ctx.inputs.push_back([c](const std::vector<PrimExpr>&) { return c; });
      } else if (auto it = param_of_.find(arg.get()); it != param_of_.end()) {
        Buffer buf = it->second;
        ctx.input_buffers.push_back(buf);
        ctx.inputs.push_back([buf](const std::vector<PrimExpr>& idx) { return Load(buf, idx); });
      } else {
        ctx.input_buffers.push_back(Buffer());
        ctx.inputs.push_back(TensorReader());
      }
    }
    return ctx;
  }

  // Member m's element at `idx` (an inlined, non-downstream member).
  PrimExpr Value(int m, const std::vector<PrimExpr>& idx) {
    LowerContext ctx = Context(m, nullptr);
    return cands_[m].info->compute(ctx, idx);
  }

  // Member m's element at the anchor's `idx`, given the anchor's `value` there.
  PrimExpr EpilogueValue(int m, const PrimExpr& value, const std::vector<PrimExpr>& idx) {
    if (m == group_.anchor) return value;
    LowerContext ctx = Context(m, &value);
    return cands_[m].info->compute(ctx, idx);
  }

  const BindingBlock& block_;
  const std::vector<Candidate>& cands_;
  const Group& group_;
  const KernelTarget target_;
  absl::flat_hash_map<const VarNode*, int> member_of_var_;
  absl::flat_hash_map<const ExprNode*, Buffer> param_of_;
  std::vector<Expr> inputs_;
  std::set<int> downstream_;
};

class Fuser {
 public:
  Fuser(KernelDeduplicator* kernels, const FuseOptions& options)
      : kernels_(kernels), options_(options) {}

  absl::StatusOr<Expr> Run(const Expr& body) {
    uses_ = CountVarUses(body);
    return FuseSeq(body);
  }

 private:
  // The dataflow blocks of `body` (a SeqExpr) fused, and those of the
  // branches of every If bound in its other blocks.
  absl::StatusOr<Expr> FuseSeq(const Expr& body) {
    const auto* seq = body.as<SeqExprNode>();
    if (seq == nullptr) return body;
    std::vector<BindingBlock> blocks;
    bool changed = false;
    for (const BindingBlock& block : seq->blocks) {
      if (block.is_dataflow) {
        TETHER_ASSIGN_OR_RETURN(BindingBlock nb, FuseBlock(block));
        changed |= nb.bindings.size() != block.bindings.size();
        blocks.push_back(std::move(nb));
        continue;
      }
      BindingBlock nb = block;
      for (Binding& b : nb.bindings) {
        const auto* node = b.value.as<IfNode>();
        if (node == nullptr || b.is_match_cast()) continue;
        TETHER_ASSIGN_OR_RETURN(Expr t, FuseSeq(node->true_branch));
        TETHER_ASSIGN_OR_RETURN(Expr f, FuseSeq(node->false_branch));
        if (t.same_as(node->true_branch) && f.same_as(node->false_branch)) continue;
        Expr e = MakeIf(node->cond, std::move(t), std::move(f));
        e->set_struct_info(b.value.struct_info());
        b.value = std::move(e);
        changed = true;
      }
      blocks.push_back(std::move(nb));
    }
    if (!changed) return body;
    return MakeSeqExprOf(std::move(blocks), seq->body);
  }

  static Candidate AsCandidate(const Binding& b) {
    if (b.is_match_cast()) return {};
    const absl::string_view op = CalledOpName(b.value);
    const OpInfo* info = op.empty() ? nullptr : FindOp(op);
    if (info == nullptr || !info->lowers_to_kernel() || info->pattern == OpPattern::kOpaque) {
      return {};
    }
    if (info->pattern <= OpPattern::kInjective && info->compute == nullptr) return {};
    if (info->pattern > OpPattern::kInjective && info->schedule == nullptr) return {};
    const auto* t = b.var.struct_info().as<TensorStructInfoNode>();
    if (t == nullptr || !t->shape.has_value() || !t->dtype.has_value()) return {};
    const auto* call = b.value.as<CallNode>();
    for (const Expr& arg : call->args) {
      if (arg.struct_info().as<TupleStructInfoNode>() != nullptr) return {};  // concat: unfused
      if (!arg.struct_info().defined()) return {};
    }
    return {call, info};
  }

  absl::StatusOr<BindingBlock> FuseBlock(const BindingBlock& block) {
    const int n = static_cast<int>(block.bindings.size());
    std::vector<Candidate> cands(n);
    absl::flat_hash_map<const VarNode*, int> def;
    for (int i = 0; i < n; ++i) {
      cands[i] = AsCandidate(block.bindings[i]);
      def[block.bindings[i].var.as<VarNode>()] = i;
    }
    std::vector<std::unique_ptr<Group>> groups;
    std::vector<Group*> group_of(n, nullptr);
    for (int c = 0; c < n; ++c) {
      if (cands[c].call == nullptr) continue;
      const OpPattern pattern = cands[c].info->pattern;
      // Producer groups this call could absorb.
      std::vector<Group*> plain, anchored;
      std::vector<std::pair<const VarNode*, Group*>> shared;  // outputs used more than once
      for (const Expr& arg : cands[c].call->args) {
        const auto* v = arg.as<VarNode>();
        if (v == nullptr || arg.kind() != ExprKind::kDataflowVar) continue;
        auto it = def.find(v);
        if (it == def.end() || group_of[it->second] == nullptr) continue;
        Group* g = group_of[it->second];
        if (g->output != it->second) continue;
        if (uses_[v] != 1) {
          shared.emplace_back(v, g);
          continue;
        }
        (g->anchor >= 0 ? anchored : plain).push_back(g);
      }
      auto group = std::make_unique<Group>();
      std::vector<Group*> merge;
      if (pattern == OpPattern::kOutEWiseFusable) {
        group->anchor = c;
      } else if (pattern == OpPattern::kCommReduce) {
        merge = plain;
        group->anchor = c;
      } else {
        merge = plain;
        // An elementwise call joins one anchored producer as its epilogue:
        // of several (a residual add of two convolutions, ResNet's first
        // block of each stage), the one computed last, the others' outputs
        // read by the epilogue. Left alone, the add was a kernel of its own
        // and each of its operands a round trip through memory (3.2 MB
        // each at 256 x 56 x 56).
        if (pattern <= OpPattern::kBroadcast) {
          const auto* out_t = block.bindings[c].var.struct_info().as<TensorStructInfoNode>();
          Group* last = nullptr;
          for (Group* a : anchored) {
            const auto* anchor_t =
                block.bindings[a->anchor].var.struct_info().as<TensorStructInfoNode>();
            if (!SameShape(*anchor_t->shape, *out_t->shape)) continue;
            if (last == nullptr || a->output > last->output) last = a;
          }
          if (last != nullptr) {
            merge.push_back(last);
            group->anchor = last->anchor;
          }
        }
      }
      if (pattern <= OpPattern::kBroadcast && !shared.empty()) {
        AbsorbDiamonds(block, cands, c, shared, &merge, &group->anchor);
      }
      for (Group* g : merge) {
        group->members.insert(group->members.end(), g->members.begin(), g->members.end());
      }
      group->members.push_back(c);
      std::sort(group->members.begin(), group->members.end());
      group->output = c;
      for (int m : group->members) group_of[m] = group.get();
      groups.push_back(std::move(group));
    }

    // Lower the groups of two or more calls; place each at its output.
    absl::flat_hash_map<int, Expr> replacement;  // output index -> call_tir
    absl::flat_hash_set<int> removed;
    for (const auto& g : groups) {
      if (g->members.size() < 2 || group_of[g->output] != g.get()) continue;
      GroupLowering lowering(block, cands, *g, options_.target);
      absl::StatusOr<KernelFunc> kernel = lowering.Lower();
      if (!kernel.ok()) continue;  // stays unfused; LegalizeOps lowers the calls one by one
      std::string hint = "fused";
      for (int m : g->members) {
        absl::StrAppend(&hint, "_", ShortOpName(CalledOpName(block.bindings[m].value)));
      }
      const std::string name = kernels_->Add(*kernel, hint);
      replacement[g->output] = MakeCallTIR(name, *kernel, lowering.inputs(),
                                           block.bindings[g->output].var.struct_info());
      for (int m : g->members) {
        if (m != g->output) removed.insert(m);
      }
    }
    BindingBlock out;
    out.is_dataflow = true;
    for (int i = 0; i < n; ++i) {
      if (removed.count(i)) continue;
      Binding b = block.bindings[i];
      if (auto it = replacement.find(i); it != replacement.end()) b.value = it->second;
      out.bindings.push_back(std::move(b));
    }
    return out;
  }

  // Diamonds (x * sigmoid(x), PyTorch's erf GELU after a linear layer): a
  // producer group whose output is used several times joins the group `c`
  // forms (with the groups in `merge`) when every one of those uses is by a
  // member of it. An anchored producer joins only while the group has no
  // anchor and `c`'s output has the anchor's shape (the epilogue rule).
  // Absorbing one group can bring in the remaining users of another, so this
  // runs to a fixed point.
  void AbsorbDiamonds(const BindingBlock& block, const std::vector<Candidate>& cands, int c,
                      const std::vector<std::pair<const VarNode*, Group*>>& shared,
                      std::vector<Group*>* merge, int* anchor) {
    std::set<int> members = {c};
    std::set<const Group*> taken;
    for (Group* g : *merge) {
      taken.insert(g);
      members.insert(g->members.begin(), g->members.end());
    }
    const auto* out_t = block.bindings[c].var.struct_info().as<TensorStructInfoNode>();
    for (bool grew = true; grew;) {
      grew = false;
      for (const auto& [v, g] : shared) {
        if (taken.count(g)) continue;
        if (g->anchor >= 0) {
          const auto* anchor_t =
              block.bindings[g->anchor].var.struct_info().as<TensorStructInfoNode>();
          if (*anchor >= 0 || !SameShape(*anchor_t->shape, *out_t->shape)) continue;
        }
        int64_t inside = 0;
        for (int m : members) {
          for (const Expr& arg : cands[m].call->args) inside += arg.as<VarNode>() == v ? 1 : 0;
        }
        if (inside != uses_[v]) continue;
        taken.insert(g);
        members.insert(g->members.begin(), g->members.end());
        merge->push_back(g);
        if (g->anchor >= 0) *anchor = g->anchor;
        grew = true;
      }
    }
  }

  KernelDeduplicator* kernels_;
  const FuseOptions& options_;
  absl::flat_hash_map<const VarNode*, int> uses_;
};

}  // namespace

absl::StatusOr<IRModule> FuseOps(IRModule module, const FuseOptions& options) {
  std::unique_ptr<KernelDeduplicator> kernels;
  return RewriteFunctionBodies(
      std::move(module),
      [&](const std::string&, const Expr& body, IRModule* m) -> absl::StatusOr<Expr> {
        if (kernels == nullptr) kernels = std::make_unique<KernelDeduplicator>(m);
        Fuser fuser(kernels.get(), options);
        return fuser.Run(body);
      });
}

}  // namespace tether::compiler
