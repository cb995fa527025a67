// ConstantFolding: compile-time evaluation of calls on constants through
// the host JIT, in waves of one compilation each.
#include "compiler/transform/constant_fold.h"

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "compiler/backend/llvm/jit.h"
#include "compiler/backend/llvm/llvm_codegen.h"
#include "compiler/lower/lower.h"
#include "compiler/op/op.h"
#include "compiler/transform/relax_rewrite.h"
#include "runtime/core/error.h"

namespace tether::compiler {
namespace {

bool IsLiteral(const Expr& e) {
  switch (e.kind()) {
    case ExprKind::kConstant:
    case ExprKind::kShapeExpr:
    case ExprKind::kPrimValue:
    case ExprKind::kStringImm:
    case ExprKind::kDataTypeImm:
      return true;
    default:
      return false;
  }
}

bool IsConstPrim(const PrimExpr& e) {
  return e.kind() == PrimKind::kIntImm || e.kind() == PrimKind::kFloatImm;
}

// A wave computing more than this many bytes is compiled optimized.
constexpr int64_t kOptimizedFoldBytes = int64_t{64} << 20;

// Folding runs in waves: each wave walks the bindings in order, folds what
// needs no kernel (shape_of, TupleGetItem) on the spot, and lowers every
// call whose tensor arguments are all constants now or results of calls
// lowered before it in the same wave (lowering needs only their struct
// info); the wave's kernels, identical ones once, are compiled as one
// library (unoptimized, since each runs once, unless the wave computes
// more than kOptimizedFoldBytes) and run in binding order, each on the
// results before it. A model's constant subgraphs (BatchNorm statistics
// folded into scales, reshaped biases, transposed weights) are a few
// levels deep, and all of them are one compilation; the next wave only
// finds what the first made foldable in place.
class Folder {
 public:
  explicit Folder(const ConstantFoldingOptions& options) : options_(options) {}

  absl::StatusOr<Expr> Run(const Expr& body) {
    const auto* seq = body.as<SeqExprNode>();
    std::vector<BindingBlock> blocks = seq->blocks;
    bool changed = false;
    for (;;) {
      std::vector<Pending> wave;
      planned_.clear();
      for (BindingBlock& block : blocks) {
        for (Binding& b : block.bindings) {
          if (b.is_match_cast()) continue;
          Expr folded = FoldInPlace(b.value);
          if (!folded.same_as(b.value)) {
            changed = true;
            b.value = folded;
          }
          if (IsLiteral(b.value) || b.value.kind() == ExprKind::kTuple) {
            known_[b.var.as<VarNode>()] = b.value;
            continue;
          }
          if (tried_.contains(b.var.as<VarNode>())) continue;
          if (std::optional<Pending> p = Lower(b); p.has_value()) wave.push_back(*std::move(p));
        }
      }
      if (wave.empty()) break;
      changed |= RunWave(&wave);
    }
    if (!changed) return body;
    return MakeSeqExprOf(std::move(blocks), seq->body);
  }

 private:
  // A call lowered for evaluation: its kernel, the constant inputs, and the
  // binding its result replaces. An input that is the result of an earlier
  // call of the wave is empty until that call has run.
  struct Pending {
    Binding* binding;
    KernelFunc kernel;
    std::vector<Value> inputs;
    std::vector<std::pair<size_t, size_t>> from_wave;  // (input, earlier call of the wave)
    std::string name;  // of the compiled kernel (shared by identical ones)
  };

  // The literal (or literal tuple) behind `e`, else `e`.
  Expr Resolve(const Expr& e) const {
    if (const auto* v = e.as<VarNode>()) {
      auto it = known_.find(v);
      if (it != known_.end()) return it->second;
    }
    return e;
  }

  // The folds that need no kernel: a field of a literal tuple, the shape of
  // a tensor with a static shape.
  Expr FoldInPlace(const Expr& value) {
    if (const auto* item = value.as<TupleGetItemNode>()) {
      const auto* tuple = Resolve(item->tuple).as<TupleNode>();
      if (tuple != nullptr && item->index >= 0 &&
          item->index < static_cast<int>(tuple->fields.size())) {
        Expr field = Resolve(tuple->fields[item->index]);
        if (IsLiteral(field)) return field;
      }
      return value;
    }
    if (CalledOpName(value) == "relax.shape_of") {
      const auto* call = value.as<CallNode>();
      if (call->args.size() != 1) return value;
      auto dims = StaticShape(call->args[0].struct_info());
      if (!dims.has_value()) return value;
      std::vector<PrimExpr> values(dims->begin(), dims->end());
      return MakeShapeExpr(std::move(values));
    }
    return value;
  }

  // The binding's call lowered on its constant arguments, or nullopt when it
  // cannot be evaluated now.
  std::optional<Pending> Lower(Binding& b) {
    const absl::string_view op = CalledOpName(b.value);
    if (op.empty()) return std::nullopt;
    const OpInfo* info = FindOp(op);
    if (info == nullptr || !info->lowers_to_kernel()) return std::nullopt;
    const auto* call = b.value.as<CallNode>();
    auto bytes = StaticBytes(b.value.struct_info());
    if (!bytes.has_value() || *bytes > options_.max_result_bytes) return std::nullopt;
    std::vector<Expr> args;
    Pending p{&b, KernelFunc(), {}, {}, ""};
    for (const Expr& arg : call->args) {
      Expr a = Resolve(arg);
      if (a.struct_info().as<TensorStructInfoNode>() != nullptr) {
        const auto* c = a.as<ConstantNode>();
        auto earlier = c == nullptr && a.as<VarNode>() != nullptr ? planned_.find(a.as<VarNode>())
                                                                  : planned_.end();
        if (c == nullptr && earlier == planned_.end()) return std::nullopt;
        if (c == nullptr) p.from_wave.emplace_back(p.inputs.size(), earlier->second);
        p.inputs.push_back(c != nullptr ? Value(c->data) : Value());
      } else if (const auto* s = a.as<ShapeExprNode>()) {
        for (const PrimExpr& d : s->values) {
          if (!IsConstPrim(d)) return std::nullopt;
        }
      } else if (const auto* pv = a.as<PrimValueNode>()) {
        if (!IsConstPrim(pv->value)) return std::nullopt;
      } else if (a.kind() != ExprKind::kStringImm && a.kind() != ExprKind::kDataTypeImm) {
        return std::nullopt;  // tuples of tensors, variables of other kinds
      }
      args.push_back(std::move(a));
    }
    // Every argument is constant: the call is evaluated in this wave or
    // never (a later wave would lower it the same way).
    tried_.insert(b.var.as<VarNode>());
    Expr resolved = MakeCall(call->op, std::move(args), call->attrs, call->sinfo_args);
    resolved->set_struct_info(b.value.struct_info());
    absl::StatusOr<KernelFunc> kernel = LowerCallToKernel(*resolved.as<CallNode>(), "folded_call");
    if (!kernel.ok() || (*kernel)->params.size() != p.inputs.size() + 1) return std::nullopt;
    p.kernel = *std::move(kernel);
    const size_t index = planned_.size();  // in the wave, which gets p next
    planned_[b.var.as<VarNode>()] = index;
    return p;
  }

  // Compiles the wave's kernels (identical ones once) and runs each call;
  // whether any binding became a constant. Where the library does not
  // build, each kernel is compiled alone so one bad call stays unfolded
  // without holding up the others.
  bool RunWave(std::vector<Pending>* wave) {
    std::vector<KernelFunc> kernels;
    std::map<std::string, std::string> by_text;  // kernel text (name elided) -> name
    for (Pending& p : *wave) {
      std::string text = ToString(
          MakeKernelFunc("kernel", p.kernel->params, p.kernel->body, p.kernel->num_outputs));
      auto [it, added] = by_text.emplace(std::move(text), absl::StrCat("fold", by_text.size()));
      p.name = it->second;
      if (added) {
        kernels.push_back(
            MakeKernelFunc(p.name, p.kernel->params, p.kernel->body, p.kernel->num_outputs));
      }
    }
    // On a few MB of results, optimizing the library costs more compile
    // time than it saves in running it (MobileNetV3: 0.23 s of folding at
    // opt level 1, 0.06-0.09 s at 0); on large ones, running dominates.
    int64_t result_bytes = 0;
    for (const Pending& p : *wave) result_bytes += *StaticBytes(p.binding->value.struct_info());
    CodegenOptions codegen;
    codegen.opt_level = result_bytes > kOptimizedFoldBytes ? 1 : 0;
    absl::StatusOr<Ref<Module>> lib = BuildAndLoad(kernels, codegen);
    if (options_.libraries_built != nullptr) ++*options_.libraries_built;
    std::map<std::string, Ref<Module>> alone;
    if (!lib.ok()) {
      for (const KernelFunc& k : kernels) {
        if (options_.libraries_built != nullptr) ++*options_.libraries_built;
        if (absl::StatusOr<Ref<Module>> one = BuildAndLoad({k}, codegen); one.ok()) {
          alone[k->name] = *std::move(one);
        }
      }
    }
    bool changed = false;
    std::vector<std::optional<Tensor>> results(wave->size());
    for (size_t w = 0; w < wave->size(); ++w) {
      Pending& p = (*wave)[w];
      Module* module = lib.ok() ? lib->get() : nullptr;
      if (module == nullptr) {
        auto it = alone.find(p.name);
        if (it == alone.end()) continue;
        module = it->second.get();
      }
      bool ready = true;
      for (const auto& [input, earlier] : p.from_wave) {
        ready &= results[earlier].has_value();
        if (ready) p.inputs[input] = *results[earlier];
      }
      if (!ready) continue;  // an input's call did not fold: nor does this one
      results[w] = Call(*module, p);
      if (results[w].has_value()) {
        p.binding->value = MakeConstant(*results[w]);
        changed = true;
      }
    }
    return changed;
  }

  // The result of p's kernel in `module` on its inputs, or nullopt.
  static std::optional<Tensor> Call(Module& module, Pending& p) {
    absl::StatusOr<Function> fn = module.GetFunction(p.name);
    if (!fn.ok()) return std::nullopt;
    const StructInfo& sinfo = p.binding->value.struct_info();
    const auto* t = sinfo.as<TensorStructInfoNode>();
    absl::StatusOr<Tensor> out = Tensor::Empty(*StaticShape(sinfo), *t->dtype, Device::Cpu());
    if (!out.ok()) return std::nullopt;
    p.inputs.push_back(*out);
    if (!(*fn)(ArgSpan(p.inputs.data(), p.inputs.size())).ok()) return std::nullopt;
    return *out;
  }

  const ConstantFoldingOptions& options_;
  absl::flat_hash_map<const VarNode*, Expr> known_;
  absl::flat_hash_set<const VarNode*> tried_;  // lowered once (folded or not)
  // The calls of the wave being gathered, by the var each binds: their
  // index in the wave.
  absl::flat_hash_map<const VarNode*, size_t> planned_;
};

}  // namespace

absl::StatusOr<IRModule> ConstantFolding(IRModule module, const ConstantFoldingOptions& options) {
  return RewriteFunctionBodies(
      std::move(module),
      [&](const std::string&, const Expr& body, IRModule*) -> absl::StatusOr<Expr> {
        Folder folder(options);
        return folder.Run(body);
      });
}

}  // namespace tether::compiler
