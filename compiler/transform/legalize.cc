// LegalizeOps: operator calls -> call_tir of per-call kernels.
#include "compiler/transform/legalize.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/lower/lower.h"
#include "compiler/op/op.h"
#include "compiler/transform/relax_rewrite.h"
#include "runtime/core/error.h"

namespace tether::compiler {
namespace {

class Legalizer {
 public:
  Legalizer(const std::string& fn_name, KernelDeduplicator* kernels, const LegalizeOptions& options)
      : fn_name_(fn_name), kernels_(kernels), options_(options) {}

  absl::StatusOr<Expr> RewriteSeq(const SeqExprNode& seq, const Expr& original) {
    std::vector<BindingBlock> blocks;
    bool changed = false;
    for (const BindingBlock& block : seq.blocks) {
      BindingBlock out;
      out.is_dataflow = block.is_dataflow;
      for (const Binding& b : block.bindings) {
        Binding nb = b;
        if (!b.is_match_cast()) {
          TETHER_ASSIGN_OR_RETURN(nb.value, RewriteValue(b.value, block.is_dataflow, &out));
        }
        changed |= !nb.value.same_as(b.value);
        out.bindings.push_back(std::move(nb));
      }
      blocks.push_back(std::move(out));
    }
    if (!changed) return original;
    return MakeSeqExprOf(std::move(blocks), seq.body);
  }

 private:
  absl::StatusOr<Expr> RewriteValue(const Expr& value, bool in_dataflow, BindingBlock* out) {
    if (const auto* node = value.as<IfNode>()) {
      TETHER_ASSIGN_OR_RETURN(Expr t,
                              RewriteSeq(*node->true_branch.as<SeqExprNode>(), node->true_branch));
      TETHER_ASSIGN_OR_RETURN(
          Expr f, RewriteSeq(*node->false_branch.as<SeqExprNode>(), node->false_branch));
      if (t.same_as(node->true_branch) && f.same_as(node->false_branch)) return value;
      Expr e = MakeIf(node->cond, std::move(t), std::move(f));
      e->set_struct_info(value.struct_info());
      return e;
    }
    const absl::string_view op_name = CalledOpName(value);
    const OpInfo* info = op_name.empty() ? nullptr : FindOp(op_name);
    if (info == nullptr || !info->lowers_to_kernel()) return value;
    const auto* call = value.as<CallNode>();
    if (op_name == "relax.reshape" && options_.reshape_as_view && call->args.size() == 2 &&
        call->args[0].struct_info().as<TensorStructInfoNode>() != nullptr) {
      Expr view = MakeCall(GetOp("relax.call_pure_packed"),
                           {MakeExternFunc("vm.builtin.reshape"), call->args[0], call->args[1]}, {},
                           {value.struct_info()});
      view->set_struct_info(value.struct_info());
      return view;
    }
    absl::StatusOr<KernelFunc> kernel = LowerCallToKernel(*call, "kernel", options_.target);
    if (!kernel.ok()) {
      return absl::Status(
          kernel.status().code(),
          absl::StrCat(fn_name_, ": cannot legalize ", op_name, ": ", kernel.status().message()));
    }
    const std::string name = kernels_->Add(*kernel, ShortOpName(op_name));
    std::vector<Expr> tensors;
    for (const Expr& arg : call->args) {
      TETHER_RETURN_IF_ERROR(AppendTensors(arg, in_dataflow, &tensors, out));
    }
    return MakeCallTIR(name, *kernel, std::move(tensors), value.struct_info());
  }

  // The kernel parameters behind one argument, in LowerCallToKernel's order:
  // a tensor is one, a tuple contributes its tensor fields.
  absl::Status AppendTensors(const Expr& arg, bool in_dataflow, std::vector<Expr>* tensors,
                             BindingBlock* out) {
    const StructInfo& sinfo = arg.struct_info();
    if (sinfo.as<TensorStructInfoNode>() != nullptr) {
      tensors->push_back(arg);
      return absl::OkStatus();
    }
    const auto* tuple_sinfo = sinfo.as<TupleStructInfoNode>();
    if (tuple_sinfo == nullptr) return absl::OkStatus();  // shapes, prim values: compile time
    if (const auto* tuple = arg.as<TupleNode>()) {
      for (const Expr& f : tuple->fields) {
        TETHER_RETURN_IF_ERROR(AppendTensors(f, in_dataflow, tensors, out));
      }
      return absl::OkStatus();
    }
    // A tuple-valued variable: bind its tensor fields before the call.
    for (size_t i = 0; i < tuple_sinfo->fields.size(); ++i) {
      if (tuple_sinfo->fields[i].as<TensorStructInfoNode>() == nullptr) continue;
      Expr item = MakeTupleGetItem(arg, static_cast<int>(i));
      item->set_struct_info(tuple_sinfo->fields[i]);
      Expr var = in_dataflow ? MakeDataflowVar("lv", tuple_sinfo->fields[i])
                             : MakeVar("lv", tuple_sinfo->fields[i]);
      out->bindings.push_back(Binding{var, item, {}, {}});
      tensors->push_back(var);
    }
    return absl::OkStatus();
  }

  const std::string& fn_name_;
  KernelDeduplicator* kernels_;
  const LegalizeOptions& options_;
};

}  // namespace

std::string KernelDeduplicator::Add(const KernelFunc& kernel, const std::string& name_hint) {
  std::string text =
      ToString(MakeKernelFunc("kernel", kernel->params, kernel->body, kernel->num_outputs));
  auto it = by_text_.find(text);
  if (it != by_text_.end()) return it->second;
  std::string name = module_->UniqueName(name_hint);
  module_->kernels[name] = MakeKernelFunc(name, kernel->params, kernel->body, kernel->num_outputs);
  by_text_.emplace(std::move(text), name);
  return name;
}

absl::StatusOr<IRModule> LegalizeOps(IRModule module, const LegalizeOptions& options) {
  // The deduplicator points into the module being rewritten, so it is
  // created inside the rewrite, once for the whole module.
  std::unique_ptr<KernelDeduplicator> kernels;
  return RewriteFunctionBodies(
      std::move(module),
      [&](const std::string& name, const Expr& body, IRModule* m) -> absl::StatusOr<Expr> {
        if (kernels == nullptr) kernels = std::make_unique<KernelDeduplicator>(m);
        Legalizer legalizer(name, kernels.get(), options);
        return legalizer.RewriteSeq(*body.as<SeqExprNode>(), body);
      });
}

}  // namespace tether::compiler
