// VM code generation: Relax functions of a lowered module to bytecode through
// the runtime's ExecBuilder. Each function is generated twice: a dry run into
// a scratch builder measures what the real run needs up front (the number of
// shape-heap slots, allocated at entry, and the instruction count of each If
// branch, which the If and Goto offsets need before the branch is emitted).
// Generation is deterministic, so both runs emit the same instructions.
//
// A call of a function to itself in tail position (its value is what the
// function returns, through any nesting of If branches) becomes a jump: the
// arguments are copied into the parameter registers and the function starts
// over, in the same frame. This is how loops (recursive functions, as the
// ONNX importer emits for Loop and Scan) run in constant VM stack.
#include "compiler/backend/vm/vm_codegen.h"

#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/core/error.h"
#include "runtime/vm/exec_builder.h"

namespace tether::compiler {
namespace {

using vm::Arg;
using vm::ExecBuilder;
using vm::RegName;

// Codes of vm.builtin.match_shape / make_shape (runtime/vm/builtins.cc).
constexpr int64_t kAssertEqualToImm = 0;
constexpr int64_t kStoreToHeap = 1;
constexpr int64_t kNoOp = 2;
constexpr int64_t kAssertEqualToLoad = 3;
constexpr int64_t kUseImm = 0;
constexpr int64_t kLoadShape = 1;

// Device index of tensors allocated without a memory plan: the VM's first
// (default) device, as TVM's R.builtin.alloc_tensor.
constexpr int64_t kDefaultDeviceIndex = 0;

Arg Imm(int64_t v) { return Arg::Immediate(v); }
Arg Reg(RegName r) { return Arg::Register(r); }
const Arg kVM = Arg::Register(vm::kVMRegister);
const Arg kVoid = Arg::Register(vm::kVoidRegister);

template <typename... Args>
absl::Status Invalid(const Args&... args) {
  return absl::InvalidArgumentError(absl::StrCat(args...));
}

// What the dry run measures for the real one.
struct FunctionPlan {
  int64_t num_slots = 0;
  // Per If, in order of encounter: instructions of the true and false branch
  // (each including the copy into the merge register).
  std::vector<std::pair<int64_t, int64_t>> if_branches;
};

// A dimension still to be checked once every variable of the group is known
// (a compound expression such as n * 2 in a parameter annotation).
struct PendingCheck {
  Arg value;
  bool is_prim = false;  // a PrimValue rather than a Tensor/Shape dimension
  int64_t ndim = 0;
  int64_t dim = 0;
  PrimExpr expr;
  std::string err_ctx;
};

// Thread contract: thread-hostile; one per function and run.
class FunctionCodegen {
 public:
  FunctionCodegen(const IRModule& module, ExecBuilder* builder, std::string name,
                  const FunctionNode* func, const FunctionPlan* plan)
      : module_(module), b_(builder), name_(std::move(name)), func_(func), plan_(plan) {}

  absl::Status Run();
  FunctionPlan TakePlan() {
    measured_.num_slots = num_slots_;
    return std::move(measured_);
  }

 private:
  RegName NewReg() { return next_reg_++; }
  int64_t NewSlot() { return num_slots_++; }
  Arg Heap() const { return heap_reg_ >= 0 ? Reg(heap_reg_) : kVoid; }

  // Every emitted instruction goes through these, so branches can be counted.
  void Call(absl::string_view func, const std::vector<Arg>& args, RegName dst) {
    b_->EmitCall(func, std::span<const Arg>(args.data(), args.size()), dst);
    ++num_instrs_;
  }
  RegName CallToNew(absl::string_view func, const std::vector<Arg>& args) {
    RegName dst = NewReg();
    Call(func, args, dst);
    return dst;
  }
  Arg Str(const std::string& s) { return b_->ConvertConstant(Value(s)); }

  // Symbolic values.
  absl::Status AppendProgram(const PrimExpr& e, std::vector<int64_t>* prog);
  // Codes and values (make_shape pairs) for `dims`; compound dimensions are
  // computed into fresh heap slots by one compute_shape_heap call.
  absl::StatusOr<std::vector<std::pair<int64_t, int64_t>>> PrepareDims(
      const std::vector<PrimExpr>& dims);
  absl::StatusOr<Arg> ShapeArg(const std::vector<PrimExpr>& dims);
  absl::StatusOr<Arg> PrimArg(const PrimExpr& value);

  // Run-time checks of `value` against `sinfo`, defining unseen variables.
  absl::Status MatchStructInfo(Arg value, const StructInfo& sinfo, const std::string& err_ctx,
                               std::vector<PendingCheck>* pending);
  absl::Status MatchDims(Arg value, const std::vector<PrimExpr>& dims, const std::string& err_ctx,
                         std::vector<PendingCheck>* pending);
  absl::Status ResolvePending(const std::vector<PendingCheck>& pending);

  // Expressions.
  absl::StatusOr<Arg> EmitExpr(const Expr& e);
  absl::StatusOr<std::vector<Arg>> EmitArgs(const std::vector<Expr>& args, size_t begin = 0);
  absl::StatusOr<Arg> EmitCall(const CallNode& call);
  absl::StatusOr<Arg> EmitOpCall(const std::string& op, const CallNode& call);
  absl::StatusOr<Arg> EmitDPSCall(const CallNode& call, const std::string& op);
  // `tail`: the value is what the function returns (see the file comment).
  absl::StatusOr<Arg> EmitIf(const IfNode& node, bool tail);
  absl::StatusOr<Arg> EmitSeq(const Expr& e, bool tail = false);
  absl::Status EmitBinding(const Binding& binding, bool tail = false);
  bool IsSelfCall(const Expr& e) const;
  absl::StatusOr<Arg> EmitTailCall(const CallNode& call);
  absl::StatusOr<std::string> CalleeName(const Expr& callee, absl::string_view what);
  absl::StatusOr<std::vector<Arg>> KernelArgs(const std::vector<Expr>& args, size_t begin);

  const IRModule& module_;
  ExecBuilder* b_;
  const std::string name_;
  const FunctionNode* func_;
  const FunctionPlan* plan_;  // null in the dry run
  FunctionPlan measured_;

  RegName next_reg_ = 0;
  RegName heap_reg_ = -1;
  int64_t num_slots_ = 0;
  int64_t num_instrs_ = 0;
  size_t next_if_ = 0;
  std::map<const PrimVarNode*, int64_t> slots_;  // defined symbolic variables
  std::map<const ExprNode*, Arg> vars_;          // Relax variables
};

absl::Status FunctionCodegen::AppendProgram(const PrimExpr& e, std::vector<int64_t>* prog) {
  auto op = [&](ShapeProgramOp o) { prog->push_back(static_cast<int64_t>(o)); };
  if (const int64_t* v = e.as_int()) {
    op(ShapeProgramOp::kPushImm);
    prog->push_back(*v);
    return absl::OkStatus();
  }
  if (const auto* var = e.as<PrimVarNode>()) {
    auto it = slots_.find(var);
    if (it == slots_.end()) {
      return Invalid(name_, ": symbolic variable ", var->name,
                     " is used before a parameter or match_cast defines it");
    }
    op(ShapeProgramOp::kLoad);
    prog->push_back(it->second);
    return absl::OkStatus();
  }
  if (const auto* bin = e.as<BinaryNode>()) {
    TETHER_RETURN_IF_ERROR(AppendProgram(bin->a, prog));
    TETHER_RETURN_IF_ERROR(AppendProgram(bin->b, prog));
    static const std::map<PrimKind, ShapeProgramOp>* kOps =
        new std::map<PrimKind, ShapeProgramOp>{{PrimKind::kAdd, ShapeProgramOp::kAdd},
                                               {PrimKind::kSub, ShapeProgramOp::kSub},
                                               {PrimKind::kMul, ShapeProgramOp::kMul},
                                               {PrimKind::kDiv, ShapeProgramOp::kTruncDiv},
                                               {PrimKind::kFloorDiv, ShapeProgramOp::kFloorDiv},
                                               {PrimKind::kFloorMod, ShapeProgramOp::kFloorMod},
                                               {PrimKind::kMin, ShapeProgramOp::kMin},
                                               {PrimKind::kMax, ShapeProgramOp::kMax},
                                               {PrimKind::kEQ, ShapeProgramOp::kEQ},
                                               {PrimKind::kNE, ShapeProgramOp::kNE},
                                               {PrimKind::kLT, ShapeProgramOp::kLT},
                                               {PrimKind::kLE, ShapeProgramOp::kLE},
                                               {PrimKind::kGT, ShapeProgramOp::kGT},
                                               {PrimKind::kGE, ShapeProgramOp::kGE},
                                               {PrimKind::kAnd, ShapeProgramOp::kAnd},
                                               {PrimKind::kOr, ShapeProgramOp::kOr}};
    auto it = kOps->find(e.kind());
    if (it == kOps->end()) return Invalid(name_, ": cannot compute ", ToString(e), " at run time");
    op(it->second);
    return absl::OkStatus();
  }
  if (const auto* n = e.as<NotNode>()) {
    TETHER_RETURN_IF_ERROR(AppendProgram(n->a, prog));
    op(ShapeProgramOp::kNot);
    return absl::OkStatus();
  }
  if (const auto* s = e.as<SelectNode>()) {
    TETHER_RETURN_IF_ERROR(AppendProgram(s->cond, prog));
    TETHER_RETURN_IF_ERROR(AppendProgram(s->true_value, prog));
    TETHER_RETURN_IF_ERROR(AppendProgram(s->false_value, prog));
    op(ShapeProgramOp::kSelect);
    return absl::OkStatus();
  }
  if (const auto* c = e.as<CastNode>()) {
    if (c->dtype().is_int() || c->dtype().is_uint() || c->dtype().is_bool()) {
      return AppendProgram(c->value, prog);
    }
  }
  return Invalid(name_, ": cannot compute ", ToString(e), " (", e.dtype().ToString(),
                 ") at run time; only integer shape expressions are supported");
}

absl::StatusOr<std::vector<std::pair<int64_t, int64_t>>> FunctionCodegen::PrepareDims(
    const std::vector<PrimExpr>& dims) {
  std::vector<std::pair<int64_t, int64_t>> codes;
  std::vector<int64_t> prog;
  for (const PrimExpr& d : dims) {
    if (!d.defined()) return Invalid(name_, ": undefined shape dimension");
    if (const int64_t* v = d.as_int()) {
      codes.emplace_back(kUseImm, *v);
    } else if (const auto* var = d.as<PrimVarNode>(); var && slots_.count(var)) {
      codes.emplace_back(kLoadShape, slots_[var]);
    } else {
      TETHER_RETURN_IF_ERROR(AppendProgram(d, &prog));
      int64_t slot = NewSlot();
      prog.push_back(static_cast<int64_t>(ShapeProgramOp::kStore));
      prog.push_back(slot);
      codes.emplace_back(kLoadShape, slot);
    }
  }
  if (!prog.empty()) {
    Arg program = b_->ConvertConstant(MakeShape(ShapeObj::Dims(prog.begin(), prog.end())));
    Call("vm.builtin.compute_shape_heap", {Heap(), program}, vm::kVoidRegister);
  }
  return codes;
}

absl::StatusOr<Arg> FunctionCodegen::ShapeArg(const std::vector<PrimExpr>& dims) {
  TETHER_ASSIGN_OR_RETURN(auto codes, PrepareDims(dims));
  bool all_imm = true;
  ShapeObj::Dims values;
  for (const auto& [code, v] : codes) {
    all_imm = all_imm && code == kUseImm;
    values.push_back(v);
  }
  if (all_imm) return b_->ConvertConstant(MakeShape(std::move(values)));
  std::vector<Arg> args = {Heap(), Imm(static_cast<int64_t>(codes.size()))};
  for (const auto& [code, v] : codes) {
    args.push_back(Imm(code));
    args.push_back(Imm(v));
  }
  return Reg(CallToNew("vm.builtin.make_shape", args));
}

absl::StatusOr<Arg> FunctionCodegen::PrimArg(const PrimExpr& value) {
  if (const int64_t* v = value.as_int()) {
    if (value.dtype().is_bool()) return b_->ConvertConstant(Value(*v != 0));
    return b_->ConvertConstant(Value(*v));
  }
  if (const auto* f = value.as<FloatImmNode>()) return b_->ConvertConstant(Value(f->value));
  TETHER_ASSIGN_OR_RETURN(auto codes, PrepareDims({value}));
  return Reg(
      CallToNew("vm.builtin.make_prim_value", {Heap(), Imm(codes[0].first), Imm(codes[0].second)}));
}

absl::Status FunctionCodegen::MatchDims(Arg value, const std::vector<PrimExpr>& dims,
                                        const std::string& err_ctx,
                                        std::vector<PendingCheck>* pending) {
  const int64_t ndim = static_cast<int64_t>(dims.size());
  std::vector<Arg> args = {value, Heap(), Imm(ndim)};
  for (int64_t i = 0; i < ndim; ++i) {
    const PrimExpr& d = dims[static_cast<size_t>(i)];
    if (!d.defined()) return Invalid(name_, ": undefined dimension in ", err_ctx);
    if (const int64_t* v = d.as_int()) {
      args.insert(args.end(), {Imm(kAssertEqualToImm), Imm(*v)});
    } else if (const auto* var = d.as<PrimVarNode>()) {
      auto it = slots_.find(var);
      if (it != slots_.end()) {
        args.insert(args.end(), {Imm(kAssertEqualToLoad), Imm(it->second)});
      } else {
        int64_t slot = NewSlot();
        slots_[var] = slot;
        args.insert(args.end(), {Imm(kStoreToHeap), Imm(slot)});
      }
    } else {
      args.insert(args.end(), {Imm(kNoOp), Imm(0)});
      pending->push_back(PendingCheck{value, false, ndim, i, d, err_ctx});
    }
  }
  args.push_back(Str(err_ctx));
  Call("vm.builtin.match_shape", args, vm::kVoidRegister);
  return absl::OkStatus();
}

absl::Status FunctionCodegen::MatchStructInfo(Arg value, const StructInfo& sinfo,
                                              const std::string& err_ctx,
                                              std::vector<PendingCheck>* pending) {
  if (!sinfo.defined()) return absl::OkStatus();
  switch (sinfo.kind()) {
    case StructInfoKind::kObject:
    case StructInfoKind::kFunc:
      return absl::OkStatus();
    case StructInfoKind::kTensor: {
      const auto* t = sinfo.as<TensorStructInfoNode>();
      Arg dtype = t->dtype ? b_->ConvertConstant(Value(*t->dtype)) : kVoid;
      Call("vm.builtin.check_tensor_info", {value, Imm(t->ndim), dtype, Str(err_ctx)},
           vm::kVoidRegister);
      if (t->shape) return MatchDims(value, *t->shape, err_ctx, pending);
      return absl::OkStatus();
    }
    case StructInfoKind::kShape: {
      const auto* s = sinfo.as<ShapeStructInfoNode>();
      Call("vm.builtin.check_shape_info", {value, Imm(s->ndim), Str(err_ctx)}, vm::kVoidRegister);
      if (s->values) return MatchDims(value, *s->values, err_ctx, pending);
      return absl::OkStatus();
    }
    case StructInfoKind::kPrim: {
      const auto* p = sinfo.as<PrimStructInfoNode>();
      if (!p->value.defined() || !(p->dtype.is_int() || p->dtype.is_uint())) {
        return absl::OkStatus();
      }
      if (const int64_t* v = p->value.as_int()) {
        Call("vm.builtin.match_prim_value",
             {value, Heap(), Imm(kAssertEqualToImm), Imm(*v), Str(err_ctx)}, vm::kVoidRegister);
      } else if (const auto* var = p->value.as<PrimVarNode>()) {
        auto it = slots_.find(var);
        int64_t code = kAssertEqualToLoad, slot;
        if (it != slots_.end()) {
          slot = it->second;
        } else {
          code = kStoreToHeap;
          slot = NewSlot();
          slots_[var] = slot;
        }
        Call("vm.builtin.match_prim_value", {value, Heap(), Imm(code), Imm(slot), Str(err_ctx)},
             vm::kVoidRegister);
      } else {
        pending->push_back(PendingCheck{value, true, 1, 0, p->value, err_ctx});
      }
      return absl::OkStatus();
    }
    case StructInfoKind::kTuple: {
      const auto* t = sinfo.as<TupleStructInfoNode>();
      Call("vm.builtin.check_tuple_info",
           {value, Imm(static_cast<int64_t>(t->fields.size())), Str(err_ctx)}, vm::kVoidRegister);
      for (size_t i = 0; i < t->fields.size(); ++i) {
        const StructInfo& f = t->fields[i];
        if (!f.defined() || f.kind() == StructInfoKind::kObject) continue;
        RegName field =
            CallToNew("vm.builtin.tuple_getitem", {value, Imm(static_cast<int64_t>(i))});
        std::string ctx = err_ctx;
        if (!ctx.empty() && ctx.back() == ':') ctx.pop_back();
        TETHER_RETURN_IF_ERROR(
            MatchStructInfo(Reg(field), f, absl::StrCat(ctx, " field ", i, ":"), pending));
      }
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

absl::Status FunctionCodegen::ResolvePending(const std::vector<PendingCheck>& pending) {
  for (const PendingCheck& p : pending) {
    std::vector<int64_t> prog;
    TETHER_RETURN_IF_ERROR(AppendProgram(p.expr, &prog));
    int64_t slot = NewSlot();
    prog.push_back(static_cast<int64_t>(ShapeProgramOp::kStore));
    prog.push_back(slot);
    Arg program = b_->ConvertConstant(MakeShape(ShapeObj::Dims(prog.begin(), prog.end())));
    Call("vm.builtin.compute_shape_heap", {Heap(), program}, vm::kVoidRegister);
    if (p.is_prim) {
      Call("vm.builtin.match_prim_value",
           {p.value, Heap(), Imm(kAssertEqualToLoad), Imm(slot), Str(p.err_ctx)},
           vm::kVoidRegister);
      continue;
    }
    std::vector<Arg> args = {p.value, Heap(), Imm(p.ndim)};
    for (int64_t i = 0; i < p.ndim; ++i) {
      if (i == p.dim) {
        args.insert(args.end(), {Imm(kAssertEqualToLoad), Imm(slot)});
      } else {
        args.insert(args.end(), {Imm(kNoOp), Imm(0)});
      }
    }
    args.push_back(Str(p.err_ctx));
    Call("vm.builtin.match_shape", args, vm::kVoidRegister);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Arg>> FunctionCodegen::EmitArgs(const std::vector<Expr>& args,
                                                           size_t begin) {
  std::vector<Arg> out;
  for (size_t i = begin; i < args.size(); ++i) {
    TETHER_ASSIGN_OR_RETURN(Arg a, EmitExpr(args[i]));
    out.push_back(a);
  }
  return out;
}

absl::StatusOr<std::string> FunctionCodegen::CalleeName(const Expr& callee,
                                                        absl::string_view what) {
  if (const auto* g = callee.as<GlobalVarNode>()) {
    Expr f = module_.Lookup(g->name_hint);
    if (f.defined()) {
      if (const auto* ext = f.as<ExternFuncNode>()) return ext->global_symbol;
    }
    return g->name_hint;
  }
  if (const auto* ext = callee.as<ExternFuncNode>()) return ext->global_symbol;
  if (const auto* s = callee.as<StringImmNode>()) return s->value;
  return Invalid(name_, ": ", what, " expects a GlobalVar or ExternFunc callee");
}

// Kernel arguments: tensors and scalars as they are, ShapeExprs (the tir_vars
// of call_tir) flattened into one int64 per dimension.
absl::StatusOr<std::vector<Arg>> FunctionCodegen::KernelArgs(const std::vector<Expr>& args,
                                                             size_t begin) {
  std::vector<Arg> out;
  for (size_t i = begin; i < args.size(); ++i) {
    if (const auto* s = args[i].as<ShapeExprNode>()) {
      for (const PrimExpr& d : s->values) {
        TETHER_ASSIGN_OR_RETURN(Arg a, PrimArg(d));
        out.push_back(a);
      }
      continue;
    }
    TETHER_ASSIGN_OR_RETURN(Arg a, EmitExpr(args[i]));
    out.push_back(a);
  }
  return out;
}

absl::StatusOr<Arg> FunctionCodegen::EmitDPSCall(const CallNode& call, const std::string& op) {
  if (call.args.size() < 2 || call.sinfo_args.empty()) {
    return Invalid(name_, ": ", op,
                   " expects a callee, a tuple of arguments and an output "
                   "struct info");
  }
  TETHER_ASSIGN_OR_RETURN(std::string callee, CalleeName(call.args[0], op));
  std::vector<Expr> inputs;
  if (const auto* t = call.args[1].as<TupleNode>()) {
    inputs = t->fields;
  } else {
    inputs.push_back(call.args[1]);
  }
  TETHER_ASSIGN_OR_RETURN(std::vector<Arg> args, KernelArgs(inputs, 0));
  std::vector<StructInfo> outs;
  if (const auto* t = call.sinfo_args[0].as<TupleStructInfoNode>()) {
    outs = t->fields;
  } else {
    outs.push_back(call.sinfo_args[0]);
  }
  std::vector<Arg> out_regs;
  for (const StructInfo& s : outs) {
    const auto* t = s.as<TensorStructInfoNode>();
    if (t == nullptr || !t->shape || !t->dtype) {
      return Invalid(name_, ": ", op, " to ", callee,
                     " needs outputs with known shape and dtype, "
                     "got ",
                     ToString(s));
    }
    TETHER_ASSIGN_OR_RETURN(Arg shape, ShapeArg(*t->shape));
    out_regs.push_back(Reg(
        CallToNew("vm.builtin.alloc_tensor_for_shape",
                  {kVM, shape, b_->ConvertConstant(Value(*t->dtype)), Imm(kDefaultDeviceIndex)})));
  }
  args.insert(args.end(), out_regs.begin(), out_regs.end());
  if (call.args.size() > 2) {
    TETHER_ASSIGN_OR_RETURN(std::vector<Arg> extra, KernelArgs(call.args, 2));
    args.insert(args.end(), extra.begin(), extra.end());
  }
  Call(callee, args, vm::kVoidRegister);
  if (out_regs.size() == 1 && !call.sinfo_args[0].as<TupleStructInfoNode>()) return out_regs[0];
  return Reg(CallToNew("vm.builtin.make_tuple", out_regs));
}

absl::StatusOr<Arg> FunctionCodegen::EmitOpCall(const std::string& op, const CallNode& call) {
  const auto& a = call.args;
  auto need = [&](size_t n) -> absl::Status {
    if (a.size() != n)
      return Invalid(name_, ": ", op, " expects ", n, " arguments, got ", a.size());
    return absl::OkStatus();
  };
  if (op == "relax.call_tir" || op == "relax.call_dps_packed") return EmitDPSCall(call, op);
  if (op == "relax.call_pure_packed" || op == "relax.call_packed") {
    if (a.empty()) return Invalid(name_, ": ", op, " expects a callee");
    TETHER_ASSIGN_OR_RETURN(std::string callee, CalleeName(a[0], op));
    TETHER_ASSIGN_OR_RETURN(std::vector<Arg> args, EmitArgs(a, 1));
    return Reg(CallToNew(callee, args));
  }
  if (op == "relax.call_builtin_with_ctx") {
    if (a.empty()) return Invalid(name_, ": ", op, " expects a callee");
    TETHER_ASSIGN_OR_RETURN(std::string callee, CalleeName(a[0], op));
    std::vector<Arg> args = {kVM};
    std::vector<Expr> rest;
    if (a.size() > 1) {
      if (const auto* t = a[1].as<TupleNode>()) {
        rest = t->fields;
      } else {
        rest.assign(a.begin() + 1, a.end());
      }
    }
    TETHER_ASSIGN_OR_RETURN(std::vector<Arg> more, EmitArgs(rest));
    args.insert(args.end(), more.begin(), more.end());
    return Reg(CallToNew(callee, args));
  }
  if (op == "relax.memory.alloc_storage" || op == "relax.vm.alloc_storage") {
    // relax.memory: (size, device, scope, dtype); relax.vm: (size, device,
    // dtype, scope). Told apart by kind.
    TETHER_RETURN_IF_ERROR(need(4));
    const Expr* dtype = a[3].as<DataTypeImmNode>() ? &a[3] : &a[2];
    const Expr* scope = a[3].as<DataTypeImmNode>() ? &a[2] : &a[3];
    if (!dtype->as<DataTypeImmNode>() || !scope->as<StringImmNode>()) {
      return Invalid(name_, ": ", op, " expects (size, device index, scope, dtype)");
    }
    TETHER_ASSIGN_OR_RETURN(Arg size, EmitExpr(a[0]));
    TETHER_ASSIGN_OR_RETURN(Arg dev, EmitExpr(a[1]));
    TETHER_ASSIGN_OR_RETURN(Arg dt, EmitExpr(*dtype));
    TETHER_ASSIGN_OR_RETURN(Arg sc, EmitExpr(*scope));
    return Reg(CallToNew("vm.builtin.alloc_storage", {kVM, size, dev, dt, sc}));
  }
  if (op == "relax.memory.alloc_tensor" || op == "relax.vm.alloc_tensor") {
    TETHER_RETURN_IF_ERROR(need(4));
    TETHER_ASSIGN_OR_RETURN(std::vector<Arg> args, EmitArgs(a));
    return Reg(CallToNew("vm.builtin.alloc_tensor", args));
  }
  if (op == "relax.builtin.alloc_tensor") {
    if (a.size() != 2 && a.size() != 3) TETHER_RETURN_IF_ERROR(need(3));
    TETHER_ASSIGN_OR_RETURN(std::vector<Arg> args, EmitArgs(a));
    if (args.size() == 2) args.push_back(Imm(kDefaultDeviceIndex));
    args.insert(args.begin(), kVM);
    return Reg(CallToNew("vm.builtin.alloc_tensor_for_shape", args));
  }
  if (op == "relax.memory.kill_tensor" || op == "relax.memory.kill_storage" ||
      op == "relax.vm.kill_object") {
    TETHER_RETURN_IF_ERROR(need(1));
    auto it = vars_.find(a[0].get());
    if (!a[0].as<VarNode>() || it == vars_.end()) {
      return Invalid(name_, ": ", op, " expects a variable defined earlier");
    }
    if (it->second.kind() == vm::ArgKind::kRegister && it->second.value() >= 0 &&
        it->second.value() < vm::kBeginSpecialReg) {
      Call("vm.builtin.null_value", {}, it->second.value());
    }
    return kVoid;
  }
  if (op == "relax.null_value") return Reg(CallToNew("vm.builtin.null_value", {}));
  if (op == "relax.shape_of" || op == "relax.tensor_to_shape") {
    TETHER_RETURN_IF_ERROR(need(1));
    TETHER_ASSIGN_OR_RETURN(Arg x, EmitExpr(a[0]));
    return Reg(CallToNew(
        op == "relax.shape_of" ? "vm.builtin.shape_of" : "vm.builtin.tensor_to_shape", {x}));
  }
  if (op == "relax.make_closure") {
    TETHER_RETURN_IF_ERROR(need(2));
    const auto* g = a[0].as<GlobalVarNode>();
    const auto* captured = a[1].as<TupleNode>();
    if (!g || !captured) return Invalid(name_, ": ", op, " expects a GlobalVar and a tuple");
    std::vector<Arg> args = {b_->FunctionArg(g->name_hint)};
    TETHER_ASSIGN_OR_RETURN(std::vector<Arg> more, EmitArgs(captured->fields));
    args.insert(args.end(), more.begin(), more.end());
    return Reg(CallToNew("vm.builtin.make_closure", args));
  }
  if (op == "relax.invoke_closure" || op == "relax.invoke_pure_closure") {
    TETHER_RETURN_IF_ERROR(need(2));
    const auto* args_tuple = a[1].as<TupleNode>();
    if (!args_tuple) return Invalid(name_, ": ", op, " expects a tuple of arguments");
    TETHER_ASSIGN_OR_RETURN(Arg clo, EmitExpr(a[0]));
    std::vector<Arg> args = {kVM, clo};
    TETHER_ASSIGN_OR_RETURN(std::vector<Arg> more, EmitArgs(args_tuple->fields));
    args.insert(args.end(), more.begin(), more.end());
    return Reg(CallToNew("vm.builtin.invoke_closure", args));
  }
  return Invalid(name_, ": operator ", op,
                 " was not lowered to a kernel call; run the pipeline first");
}

absl::StatusOr<Arg> FunctionCodegen::EmitCall(const CallNode& call) {
  const Expr& callee = call.op;
  if (const auto* op = callee.as<OpNode>()) return EmitOpCall(op->name, call);
  if (const auto* g = callee.as<GlobalVarNode>()) {
    Expr target = module_.Lookup(g->name_hint);
    if (target.defined() && target.as<FunctionNode>()) {
      TETHER_ASSIGN_OR_RETURN(std::vector<Arg> args, EmitArgs(call.args));
      return Reg(CallToNew(g->name_hint, args));
    }
    // A kernel in destination-passing style, or a function the runtime has.
    TETHER_ASSIGN_OR_RETURN(std::string name, CalleeName(callee, "call"));
    TETHER_ASSIGN_OR_RETURN(std::vector<Arg> args, KernelArgs(call.args, 0));
    return Reg(CallToNew(name, args));
  }
  if (const auto* ext = callee.as<ExternFuncNode>()) {
    TETHER_ASSIGN_OR_RETURN(std::vector<Arg> args, EmitArgs(call.args));
    return Reg(CallToNew(ext->global_symbol, args));
  }
  if (callee.as<VarNode>()) {
    TETHER_ASSIGN_OR_RETURN(Arg clo, EmitExpr(callee));
    std::vector<Arg> args = {kVM, clo};
    TETHER_ASSIGN_OR_RETURN(std::vector<Arg> more, EmitArgs(call.args));
    args.insert(args.end(), more.begin(), more.end());
    return Reg(CallToNew("vm.builtin.invoke_closure", args));
  }
  return Invalid(name_, ": cannot call a value of kind ", static_cast<int>(callee.kind()));
}

absl::StatusOr<Arg> FunctionCodegen::EmitSeq(const Expr& e, bool tail) {
  const auto* seq = e.as<SeqExprNode>();
  if (!seq) return EmitExpr(e);
  const Binding* last = nullptr;
  for (const BindingBlock& block : seq->blocks) {
    if (!block.bindings.empty()) last = &block.bindings.back();
  }
  for (const BindingBlock& block : seq->blocks) {
    for (const Binding& binding : block.bindings) {
      // The last binding is in tail position when the body returns its var.
      const bool tail_binding = tail && &binding == last && seq->body.same_as(binding.var);
      TETHER_RETURN_IF_ERROR(EmitBinding(binding, tail_binding));
    }
  }
  return EmitExpr(seq->body);
}

bool FunctionCodegen::IsSelfCall(const Expr& e) const {
  const auto* call = e.as<CallNode>();
  const auto* g = call ? call->op.as<GlobalVarNode>() : nullptr;
  return g != nullptr && g->name_hint == name_ && call->args.size() == func_->params.size();
}

absl::StatusOr<Arg> FunctionCodegen::EmitTailCall(const CallNode& call) {
  TETHER_ASSIGN_OR_RETURN(std::vector<Arg> args, EmitArgs(call.args));
  // Every argument into a register of its own first: an argument may be a
  // parameter register that an earlier copy overwrites.
  std::vector<RegName> staged;
  for (const Arg& a : args) staged.push_back(CallToNew("vm.builtin.copy", {a}));
  for (size_t i = 0; i < staged.size(); ++i) {
    Call("vm.builtin.copy", {Reg(staged[i])}, static_cast<RegName>(i));
  }
  // Back to the first instruction: the shape heap and the parameter checks
  // are done again for the new arguments.
  b_->EmitGoto(-num_instrs_);
  ++num_instrs_;
  // Nothing after the jump runs; the branch's merge copy reads a register
  // that is always defined.
  return Reg(0);
}

absl::StatusOr<Arg> FunctionCodegen::EmitIf(const IfNode& node, bool tail) {
  TETHER_ASSIGN_OR_RETURN(Arg cond, EmitExpr(node.cond));
  RegName cond_reg = CallToNew("vm.builtin.read_if_cond", {cond});
  size_t index = next_if_++;
  if (plan_ == nullptr) measured_.if_branches.emplace_back(0, 0);
  std::pair<int64_t, int64_t> sizes{1, 1};
  if (plan_ != nullptr) {
    if (index >= plan_->if_branches.size()) return absl::InternalError("vm codegen: plan mismatch");
    sizes = plan_->if_branches[index];
  }
  RegName merge = NewReg();
  b_->EmitIf(cond_reg, sizes.first + 2);
  ++num_instrs_;

  // Each branch sees the symbolic variables defined before the If only.
  auto branch = [&](const Expr& body) -> absl::StatusOr<int64_t> {
    auto saved_slots = slots_;
    int64_t start = num_instrs_;
    TETHER_ASSIGN_OR_RETURN(Arg value, EmitSeq(body, tail));
    Call("vm.builtin.copy", {value}, merge);
    slots_ = std::move(saved_slots);
    return num_instrs_ - start;
  };
  TETHER_ASSIGN_OR_RETURN(int64_t t, branch(node.true_branch));
  b_->EmitGoto(sizes.second + 1);
  ++num_instrs_;
  TETHER_ASSIGN_OR_RETURN(int64_t f, branch(node.false_branch));
  if (plan_ == nullptr) {
    measured_.if_branches[index] = {t, f};
  } else if (t != sizes.first || f != sizes.second) {
    return absl::InternalError(
        absl::StrCat("vm codegen: branch sizes of an if in ", name_, " differ between runs"));
  }
  return Reg(merge);
}

absl::StatusOr<Arg> FunctionCodegen::EmitExpr(const Expr& e) {
  if (!e.defined()) return Invalid(name_, ": undefined expression");
  switch (e.kind()) {
    case ExprKind::kVar:
    case ExprKind::kDataflowVar: {
      auto it = vars_.find(e.get());
      if (it == vars_.end()) {
        return Invalid(name_, ": variable ", e.as<VarNode>()->name_hint,
                       " is used before it is defined");
      }
      return it->second;
    }
    case ExprKind::kConstant:
      return b_->ConvertConstant(Value(e.as<ConstantNode>()->data));
    case ExprKind::kPrimValue:
      return PrimArg(e.as<PrimValueNode>()->value);
    case ExprKind::kStringImm:
      return Str(e.as<StringImmNode>()->value);
    case ExprKind::kDataTypeImm:
      return b_->ConvertConstant(Value(e.as<DataTypeImmNode>()->value));
    case ExprKind::kShapeExpr:
      return ShapeArg(e.as<ShapeExprNode>()->values);
    case ExprKind::kTuple: {
      TETHER_ASSIGN_OR_RETURN(std::vector<Arg> fields, EmitArgs(e.as<TupleNode>()->fields));
      return Reg(CallToNew("vm.builtin.make_tuple", fields));
    }
    case ExprKind::kTupleGetItem: {
      const auto* g = e.as<TupleGetItemNode>();
      TETHER_ASSIGN_OR_RETURN(Arg t, EmitExpr(g->tuple));
      return Reg(CallToNew("vm.builtin.tuple_getitem", {t, Imm(g->index)}));
    }
    case ExprKind::kCall:
      return EmitCall(*e.as<CallNode>());
    case ExprKind::kIf:
      return EmitIf(*e.as<IfNode>(), /*tail=*/false);
    case ExprKind::kSeqExpr:
      return EmitSeq(e);
    case ExprKind::kGlobalVar: {
      const std::string& n = e.as<GlobalVarNode>()->name_hint;
      Expr target = module_.Lookup(n);
      if (!target.defined()) return Invalid(name_, ": unknown global function ", n);
      if (const auto* ext = target.as<ExternFuncNode>()) return b_->FunctionArg(ext->global_symbol);
      return b_->FunctionArg(n);
    }
    case ExprKind::kExternFunc:
      return b_->FunctionArg(e.as<ExternFuncNode>()->global_symbol);
    case ExprKind::kFunction:
      return absl::UnimplementedError(absl::StrCat(
          name_, ": a nested function must be lifted to a global function (LambdaLift) first"));
    case ExprKind::kOp:
      return Invalid(name_, ": operator ", e.as<OpNode>()->name, " used as a value");
  }
  return Invalid(name_, ": unknown expression kind");
}

absl::Status FunctionCodegen::EmitBinding(const Binding& binding, bool tail) {
  const auto* var = binding.var.as<VarNode>();
  if (!var) return Invalid(name_, ": a binding must bind a variable");
  tail = tail && !binding.is_match_cast();
  absl::StatusOr<Arg> emitted;
  if (tail && IsSelfCall(binding.value)) {
    emitted = EmitTailCall(*binding.value.as<CallNode>());
  } else if (tail && binding.value.kind() == ExprKind::kIf) {
    emitted = EmitIf(*binding.value.as<IfNode>(), /*tail=*/true);
  } else {
    emitted = EmitExpr(binding.value);
  }
  TETHER_ASSIGN_OR_RETURN(Arg value, std::move(emitted));
  if (binding.is_match_cast()) {
    std::vector<PendingCheck> pending;
    std::string ctx = absl::StrCat(name_, ": match_cast of ", var->name_hint, " (to ",
                                   ToString(binding.match_cast), "):");
    TETHER_RETURN_IF_ERROR(MatchStructInfo(value, binding.match_cast, ctx, &pending));
    TETHER_RETURN_IF_ERROR(ResolvePending(pending));
  }
  // A variable bound to another variable gets its own register, so killing
  // one (kill_tensor) never clears the other.
  if (binding.value.as<VarNode>() && value.kind() == vm::ArgKind::kRegister) {
    value = Reg(CallToNew("vm.builtin.copy", {value}));
  }
  vars_[binding.var.get()] = value;
  return absl::OkStatus();
}

absl::Status FunctionCodegen::Run() {
  const int64_t num_params = static_cast<int64_t>(func_->params.size());
  std::vector<std::string> names;
  for (const Expr& p : func_->params) {
    const auto* v = p.as<VarNode>();
    if (!v) return Invalid(name_, ": parameters must be variables");
    names.push_back(v->name_hint);
  }
  b_->EmitFunction(name_, num_params, names);
  next_reg_ = num_params;
  for (int64_t i = 0; i < num_params; ++i)
    vars_[func_->params[static_cast<size_t>(i)].get()] = Reg(i);
  int64_t slots = plan_ != nullptr ? plan_->num_slots : 0;
  if (plan_ == nullptr || slots > 0) {
    heap_reg_ = CallToNew("vm.builtin.alloc_shape_heap", {kVM, Imm(slots)});
  }

  std::vector<PendingCheck> pending;
  for (int64_t i = 0; i < num_params; ++i) {
    const Expr& p = func_->params[static_cast<size_t>(i)];
    const StructInfo& s = p.struct_info();
    std::string ctx = absl::StrCat(name_, ": parameter ", names[static_cast<size_t>(i)],
                                   " (annotated ", ToString(s), "):");
    TETHER_RETURN_IF_ERROR(MatchStructInfo(Reg(i), s, ctx, &pending));
  }
  TETHER_RETURN_IF_ERROR(ResolvePending(pending));

  TETHER_ASSIGN_OR_RETURN(Arg result, EmitSeq(func_->body, /*tail=*/true));
  if (result.kind() != vm::ArgKind::kRegister || result.value() >= vm::kBeginSpecialReg) {
    result = Reg(CallToNew("vm.builtin.copy", {result}));
  }
  b_->EmitRet(result);
  ++num_instrs_;
  b_->EndFunction(name_);
  return absl::OkStatus();
}

}  // namespace

std::string FunctionSignature(const Expr& func) {
  const auto* f = func.as<FunctionNode>();
  if (!f) return "";
  std::vector<std::string> params;
  for (const Expr& p : f->params) {
    const auto* v = p.as<VarNode>();
    params.push_back(absl::StrCat(v ? v->name_hint : "?", ": ", ToString(p.struct_info())));
  }
  return absl::StrCat("(", absl::StrJoin(params, ", "), ") -> ", ToString(f->ret_struct_info));
}

absl::StatusOr<Ref<vm::Executable>> VMCodegen(const IRModule& lowered,
                                              std::vector<vm::KernelLibraryBlob> libraries) {
  auto declare_all = [&](ExecBuilder* b) {
    for (const auto& [name, f] : lowered.functions) {
      if (f.as<FunctionNode>()) b->DeclareFunction(name, vm::FunctionKind::kVMFunc);
    }
  };
  ExecBuilder builder;
  declare_all(&builder);
  for (const auto& [name, f] : lowered.functions) {
    const auto* func = f.as<FunctionNode>();
    if (!func) continue;  // ExternFuncs are resolved in the runtime registry
    ExecBuilder scratch;
    declare_all(&scratch);
    FunctionCodegen dry(lowered, &scratch, name, func, nullptr);
    TETHER_RETURN_IF_ERROR(dry.Run());
    FunctionPlan plan = dry.TakePlan();
    FunctionCodegen real(lowered, &builder, name, func, &plan);
    TETHER_RETURN_IF_ERROR(real.Run());
    builder.SetMetadata(absl::StrCat(kSignatureMetadataPrefix, name), FunctionSignature(f));
  }
  for (vm::KernelLibraryBlob& lib : libraries) builder.AddKernelLibrary(std::move(lib));
  TETHER_RETURN_IF_ERROR(builder.status());
  return builder.Get();
}

}  // namespace tether::compiler
