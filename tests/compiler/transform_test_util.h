// Helpers for the transform tests: building small normalized Relax functions
// by hand (struct info set explicitly, so they need no block builder) and
// looking at the result of a pass (bindings by operator, kernels).
#ifndef TETHER_TESTS_COMPILER_TRANSFORM_TEST_UTIL_H_
#define TETHER_TESTS_COMPILER_TRANSFORM_TEST_UTIL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/relax/block_builder.h"
#include "compiler/relax/expr.h"
#include "compiler/relax/module.h"
#include "compiler/transform/relax_rewrite.h"

namespace tether::compiler::testing {

inline const DataType kF32 = DataType::Float(32);

inline StructInfo F32(std::vector<PrimExpr> shape) { return TensorSInfo(std::move(shape), kF32); }

// Builds one function with a single dataflow block.
class FunctionSketch {
 public:
  Expr Param(const std::string& name, StructInfo sinfo) {
    Expr p = MakeVar(name, std::move(sinfo));
    params_.push_back(p);
    return p;
  }
  // lv = value (a DataflowVar), with `sinfo` set on both.
  Expr Bind(Expr value, StructInfo sinfo, const std::string& name = "lv") {
    return Add(std::move(value), std::move(sinfo), MakeDataflowVar(name, sinfo));
  }
  // gv = value, a Var visible after the block (R.output).
  Expr Output(Expr value, StructInfo sinfo, const std::string& name = "gv") {
    return Add(std::move(value), std::move(sinfo), MakeVar(name, sinfo));
  }
  // A call of operator `op`, its struct info given.
  Expr BindOp(const std::string& op, std::vector<Expr> args, StructInfo sinfo, Attrs attrs = {},
              const std::string& name = "lv") {
    return Bind(MakeCall(GetOp(op), std::move(args), std::move(attrs)), std::move(sinfo), name);
  }
  Expr Finish(Expr body) {
    Expr seq = MakeSeqExprOf({BindingBlock{bindings_, true}}, body);
    return MakeFunction(params_, seq, body.struct_info());
  }

 private:
  Expr Add(Expr value, StructInfo sinfo, Expr var) {
    value->set_struct_info(sinfo);
    bindings_.push_back(Binding{var, value, {}, {}});
    return var;
  }
  std::vector<Expr> params_;
  std::vector<Binding> bindings_;
};

// Builds one function from raw (unnormalized) calls with a single dataflow
// block; NormalizedModule infers the struct info.
class RawFunction {
 public:
  Expr Param(const std::string& name, StructInfo sinfo) {
    Expr p = MakeVar(name, std::move(sinfo));
    params_.push_back(p);
    return p;
  }
  Expr Bind(const std::string& name, Expr value) {
    Expr v = MakeDataflowVar(name);
    bindings_.push_back(Binding{v, std::move(value), {}, {}});
    return v;
  }
  Expr Output(const std::string& name, Expr value) {
    Expr v = MakeVar(name);
    bindings_.push_back(Binding{v, std::move(value), {}, {}});
    return v;
  }
  Expr Finish(Expr body) const {
    return MakeFunction(params_, MakeSeqExpr({BindingBlock{bindings_, true}}, std::move(body)),
                        StructInfo());
  }

 private:
  std::vector<Expr> params_;
  std::vector<Binding> bindings_;
};

inline Expr Op(const std::string& op, std::vector<Expr> args, Attrs attrs = {}) {
  return MakeCall(GetOp(op), std::move(args), std::move(attrs));
}

// A module of `main`, normalized.
inline absl::StatusOr<IRModule> NormalizedModule(Expr main) {
  IRModule m;
  m.functions["main"] = std::move(main);
  return NormalizeModule(std::move(m));
}

// A float32 constant of `shape` holding `values`.
inline Expr ConstF32(std::vector<int64_t> shape, const std::vector<float>& values) {
  auto t = Tensor::FromBytes(shape, kF32, values.data(), values.size() * sizeof(float));
  return MakeConstant(*t);
}

// x (n, 784) -> matmul w1 (784, 128) + b1 -> relu -> matmul w2 (128, 10) + b2.
inline Expr MlpFunction(int64_t in = 784, int64_t hidden = 128, int64_t out = 10) {
  RawFunction f;
  Var n("n");
  Expr x = f.Param("x", F32({n, in}));
  Expr w1 = f.Param("w1", F32({in, hidden}));
  Expr b1 = f.Param("b1", F32({hidden}));
  Expr w2 = f.Param("w2", F32({hidden, out}));
  Expr b2 = f.Param("b2", F32({out}));
  Expr lv0 = f.Bind("lv0", Op("relax.matmul", {x, w1}));
  Expr lv1 = f.Bind("lv1", Op("relax.add", {lv0, b1}));
  Expr lv2 = f.Bind("lv2", Op("relax.nn.relu", {lv1}));
  Expr lv3 = f.Bind("lv3", Op("relax.matmul", {lv2, w2}));
  Expr gv = f.Output("gv", Op("relax.add", {lv3, b2}));
  return f.Finish(gv);
}

// R.call_tir(kernel, (args...), out_sinfo=sinfo) with its struct info.
inline Expr CallTIR(const std::string& kernel, std::vector<Expr> args, StructInfo sinfo) {
  Expr gv = MakeGlobalVar(kernel);
  gv->set_struct_info(OpaqueFuncSInfo());
  Expr call = MakeCall(GetOp("relax.call_tir"), {gv, MakeTuple(std::move(args))}, {}, {sinfo});
  call->set_struct_info(sinfo);
  return call;
}

// A placeholder kernel (memory planning only checks that it exists).
inline KernelFunc EmptyKernel(const std::string& name) {
  return MakeKernelFunc(name, {}, Seq({}), 1);
}

// Every top-level binding of function `fn`.
inline std::vector<Binding> Bindings(const IRModule& module, const std::string& fn = "main") {
  std::vector<Binding> out;
  const auto* f = module.Lookup(fn).as<FunctionNode>();
  if (f == nullptr) return out;
  for (const BindingBlock& block : f->body.as<SeqExprNode>()->blocks) {
    out.insert(out.end(), block.bindings.begin(), block.bindings.end());
  }
  return out;
}

// The top-level bindings of `fn` whose value calls operator `op`.
inline std::vector<Binding> BindingsCalling(const IRModule& module, absl::string_view op,
                                            const std::string& fn = "main") {
  std::vector<Binding> out;
  for (const Binding& b : Bindings(module, fn)) {
    if (CalledOpName(b.value) == op) out.push_back(b);
  }
  return out;
}

// The binding of `fn` that defines a var named `name` (first match).
// The result points into `bindings`, so a temporary vector is refused.
const Binding* FindBinding(std::vector<Binding>&& bindings, const std::string& name) = delete;
inline const Binding* FindBinding(const std::vector<Binding>& bindings, const std::string& name) {
  for (const Binding& b : bindings) {
    if (b.var.as<VarNode>()->name_hint == name) return &b;
  }
  return nullptr;
}

}  // namespace tether::compiler::testing

#endif  // TETHER_TESTS_COMPILER_TRANSFORM_TEST_UTIL_H_
