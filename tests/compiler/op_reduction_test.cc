// The reduction operators: inferred shapes for axis/keepdims, errors, and
// kernels against C++ references on random inputs.
#include <cmath>
#include <limits>

#include "tests/compiler/op_test_util.h"

namespace tether::compiler::optest {
namespace {

enum class Kind { kSum, kMean, kMax, kMin, kProd, kArgMax, kArgMin };

// Reference: reduces `x` over `axes` (sorted; empty = all), keepdims.
HostTensor ReduceRef(const HostTensor& x, std::vector<int64_t> axes, bool keepdims, Kind kind) {
  const int64_t ndim = static_cast<int64_t>(x.shape.size());
  if (axes.empty()) {
    for (int64_t k = 0; k < ndim; ++k) axes.push_back(k);
  }
  auto reduced = [&](int64_t k) { return std::find(axes.begin(), axes.end(), k) != axes.end(); };
  Shape out_shape, kept_shape;
  for (int64_t k = 0; k < ndim; ++k) {
    if (!reduced(k)) {
      out_shape.push_back(x.shape[k]);
      kept_shape.push_back(x.shape[k]);
    } else {
      if (keepdims) out_shape.push_back(1);
      kept_shape.push_back(1);
    }
  }
  const bool arg = kind == Kind::kArgMax || kind == Kind::kArgMin;
  HostTensor out{out_shape, arg ? kI64 : x.dtype, {}};
  const int64_t n_out = NumElements(kept_shape);
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> acc(static_cast<size_t>(n_out)), best(static_cast<size_t>(n_out), -1);
  std::vector<int64_t> pos(static_cast<size_t>(n_out), 0);
  for (auto& a : acc) {
    a = kind == Kind::kProd                           ? 1
        : kind == Kind::kMax || kind == Kind::kArgMax ? -inf
        : kind == Kind::kMin || kind == Kind::kArgMin ? inf
                                                      : 0;
  }
  const Shape kept_strides = Strides(kept_shape);
  for (int64_t i = 0; i < NumElements(x.shape); ++i) {
    const Shape idx = Unravel(i, x.shape);
    int64_t o = 0, p = 0;
    for (int64_t k = 0; k < ndim; ++k) {
      if (!reduced(k)) {
        o += idx[k] * kept_strides[k];
      } else {
        p = p * x.shape[k] + idx[k];
      }
    }
    const double v = x.data[static_cast<size_t>(i)];
    double& a = acc[static_cast<size_t>(o)];
    switch (kind) {
      case Kind::kSum:
      case Kind::kMean:
        a += v;
        break;
      case Kind::kProd:
        a *= v;
        break;
      case Kind::kMax:
        a = std::max(a, v);
        break;
      case Kind::kMin:
        a = std::min(a, v);
        break;
      case Kind::kArgMax:
        if (v > a) a = v, pos[static_cast<size_t>(o)] = p;
        break;
      case Kind::kArgMin:
        if (v < a) a = v, pos[static_cast<size_t>(o)] = p;
        break;
    }
  }
  int64_t count = 1;
  for (int64_t a : axes) count *= x.shape[a];
  for (int64_t o = 0; o < n_out; ++o) {
    double v = acc[static_cast<size_t>(o)];
    if (kind == Kind::kMean) v /= static_cast<double>(count);
    if (arg) v = static_cast<double>(pos[static_cast<size_t>(o)]);
    out.data.push_back(RoundTo(out.dtype, v));
  }
  return out;
}

struct Case {
  Shape shape;
  std::vector<int64_t> axes;  // empty: attr absent (all)
  bool keepdims;
};

void CheckReduce(const std::string& op, Kind kind, DataType dtype, double lo = -3, double hi = 3,
                 double tol = -1) {
  const std::vector<Case> cases = {
      {{5}, {}, false},
      {{4, 7}, {1}, false},
      {{4, 7}, {0}, true},
      {{3, 1, 9}, {0, 2}, false},
      {{2, 3, 5}, {}, true},
      {{130, 33}, {-1}, false},
      {{1}, {0}, true},
      // Trailing axes of 32+ elements fold in vector lanes: a tail, none.
      {{2, 3, 7, 11}, {2, 3}, true},
      {{2, 64}, {}, false},
  };
  uint32_t seed = 40;
  for (const Case& c : cases) {
    SCOPED_TRACE(op + " " + dtype.ToString() + " rank " + std::to_string(c.shape.size()) +
                 " axes " + std::to_string(c.axes.size()) + (c.keepdims ? " keepdims" : ""));
    HostTensor x = Random(c.shape, dtype, seed++, lo, hi);
    Attrs attrs{{"keepdims", c.keepdims}};
    std::vector<int64_t> norm;
    if (!c.axes.empty()) {
      attrs["axis"] = c.axes;
      for (int64_t a : c.axes) norm.push_back(a < 0 ? a + static_cast<int64_t>(c.shape.size()) : a);
    }
    OP_TEST_ASSERT_OK_AND_ASSIGN(out, RunOp(op, {x}, attrs));
    ExpectClose(out[0], ReduceRef(x, norm, c.keepdims, kind), tol);
  }
}

TEST(ReductionOpTest, InfersShapes) {
  absl::StatusOr<StructInfo> s =
      InferOp("relax.sum", {TensorVar("x", {2, 3, 4}, kF32)}, {{"axis", std::vector<int64_t>{1}}});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(ToString(*s), ToString(TensorSInfo({2, 4}, kF32)));
  s = InferOp("relax.max", {TensorVar("x", {2, 3, 4}, kF32)},
              {{"axis", std::vector<int64_t>{0, -1}}, {"keepdims", true}});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(ToString(*s), ToString(TensorSInfo({1, 3, 1}, kF32)));
  s = InferOp("relax.mean", {TensorVar("x", {2, 3}, kF32)});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(ToString(*s), ToString(TensorSInfo({}, kF32)));
  s = InferOp("relax.argmax", {TensorVar("x", {2, 3}, kF32)}, {{"axis", int64_t{1}}});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(ToString(*s), ToString(TensorSInfo({2}, kI64)));
}

TEST(ReductionOpTest, KeepsSymbolicDims) {
  Var n("n");
  absl::StatusOr<StructInfo> s =
      InferOp("relax.sum", {TensorVar("x", {n, 8}, kF32)}, {{"axis", std::vector<int64_t>{1}}});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(ToString(*s), ToString(TensorSInfo({n}, kF32)));
}

TEST(ReductionOpTest, RejectsBadAxis) {
  absl::StatusOr<StructInfo> s =
      InferOp("relax.sum", {TensorVar("x", {2, 3}, kF32)}, {{"axis", std::vector<int64_t>{2}}});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("relax.sum"), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("axis 2"), std::string::npos) << s.status();
}

TEST(ReductionOpTest, RejectsRepeatedAxis) {
  absl::StatusOr<StructInfo> s =
      InferOp("relax.min", {TensorVar("x", {2, 3}, kF32)}, {{"axis", std::vector<int64_t>{1, -1}}});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("repeated"), std::string::npos) << s.status();
}

TEST(ReductionOpTest, ArgMaxRejectsAxisList) {
  absl::StatusOr<StructInfo> s = InferOp("relax.argmax", {TensorVar("x", {2, 3}, kF32)},
                                         {{"axis", std::vector<int64_t>{0, 1}}});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("relax.argmax"), std::string::npos) << s.status();
}

TEST(ReductionOpTest, SumMeanProdMatchReference) {
  CheckReduce("relax.sum", Kind::kSum, kF32, -3, 3, 1e-4);
  CheckReduce("relax.mean", Kind::kMean, kF32, -3, 3, 1e-4);
  CheckReduce("relax.prod", Kind::kProd, kF32, 0.9, 1.1, 1e-4);
  CheckReduce("relax.sum", Kind::kSum, kI32, -50, 50);
  CheckReduce("relax.sum", Kind::kSum, kF16, -1, 1, 1e-2);
}

TEST(ReductionOpTest, MaxMinMatchReference) {
  CheckReduce("relax.max", Kind::kMax, kF32);
  CheckReduce("relax.min", Kind::kMin, kF32);
  CheckReduce("relax.max", Kind::kMax, kI64, -1000, 1000);
  CheckReduce("relax.min", Kind::kMin, kI32, -1000, 1000);
}

TEST(ReductionOpTest, ArgMaxArgMinTakeTheFirstIndexOnTies) {
  // Few distinct values, so ties are everywhere.
  for (const auto& [op, kind] : std::vector<std::pair<std::string, Kind>>{
           {"relax.argmax", Kind::kArgMax}, {"relax.argmin", Kind::kArgMin}}) {
    for (const Case& c : std::vector<Case>{{{6, 9}, {1}, false},
                                           {{6, 9}, {0}, true},
                                           {{3, 4, 5}, {}, false},
                                           {{7}, {-1}, false}}) {
      SCOPED_TRACE(op);
      HostTensor x = Random(c.shape, kI32, 77, -2, 2);
      Attrs attrs{{"keepdims", c.keepdims}};
      std::vector<int64_t> norm;
      if (!c.axes.empty()) {
        attrs["axis"] = c.axes[0];
        norm.push_back(c.axes[0] < 0 ? c.axes[0] + static_cast<int64_t>(c.shape.size())
                                     : c.axes[0]);
      }
      OP_TEST_ASSERT_OK_AND_ASSIGN(out, RunOp(op, {x}, attrs));
      ExpectClose(out[0], ReduceRef(x, norm, c.keepdims, kind));
    }
  }
}

TEST(ReductionOpTest, SymbolicKernelRunsAtTwoSizes) {
  Var n("n");
  absl::StatusOr<Expr> call =
      MakeOpCall("relax.sum", {TensorVar("x", {n, 6}, kF32)}, {{"axis", std::vector<int64_t>{0}}});
  ASSERT_TRUE(call.ok()) << call.status();
  absl::StatusOr<KernelFunc> kernel = LowerCallToKernel(*call->as<CallNode>(), "sum_n");
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  OP_TEST_ASSERT_OK_AND_ASSIGN(compiled, CompiledKernel::Create(*kernel));
  for (int64_t rows : {1, 333}) {
    HostTensor x = Random({rows, 6}, kF32, 9);
    absl::StatusOr<std::vector<HostTensor>> out = compiled.Run({x});
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectClose((*out)[0], ReduceRef(x, {0}, false, Kind::kSum), 1e-4);
  }
}

// On a CPU, reductions over trailing axes of at least 32 elements (or a
// symbolic count) fold into a vector of 16 lanes, then the lanes and the
// tail; others fold one element at a time.
TEST(ReductionOpTest, TrailingAxesFoldInVectorLanes) {
  auto text = [](const std::string& op, const std::vector<PrimExpr>& shape, int64_t axis) {
    absl::StatusOr<Expr> call =
        MakeOpCall(op, {TensorVar("x", shape, kF32)}, {{"axis", std::vector<int64_t>{axis}}});
    if (!call.ok()) return std::string(call.status().message());
    absl::StatusOr<KernelFunc> kernel = LowerCallToKernel(*call->as<CallNode>(), "reduce");
    return kernel.ok() ? ToString(*kernel) : std::string(kernel.status().message());
  };
  EXPECT_NE(text("relax.mean", {8, 200}, 1).find("acc_lanes"), std::string::npos);
  EXPECT_EQ(text("relax.mean", {200, 8}, 0).find("acc_lanes"), std::string::npos);
  EXPECT_EQ(text("relax.mean", {8, 20}, 1).find("acc_lanes"), std::string::npos);
  EXPECT_EQ(text("relax.argmax", {8, 200}, 1).find("acc_lanes"), std::string::npos);
  Var n("n");
  for (const auto& [op, kind] : std::vector<std::pair<std::string, Kind>>{
           {"relax.sum", Kind::kSum}, {"relax.max", Kind::kMax}, {"relax.min", Kind::kMin}}) {
    SCOPED_TRACE(op);
    absl::StatusOr<Expr> call =
        MakeOpCall(op, {TensorVar("x", {3, n}, kF32)}, {{"axis", std::vector<int64_t>{1}}});
    ASSERT_TRUE(call.ok()) << call.status();
    absl::StatusOr<KernelFunc> kernel = LowerCallToKernel(*call->as<CallNode>(), "reduce_n");
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_NE(ToString(*kernel).find("acc_lanes"), std::string::npos);
    OP_TEST_ASSERT_OK_AND_ASSIGN(compiled, CompiledKernel::Create(*kernel));
    for (int64_t cols : {5, 16, 100}) {
      HostTensor x = Random({3, cols}, kF32, 11);
      absl::StatusOr<std::vector<HostTensor>> out = compiled.Run({x});
      ASSERT_TRUE(out.ok()) << out.status();
      ExpectClose((*out)[0], ReduceRef(x, {1}, false, kind), 1e-5);
    }
  }
}

}  // namespace
}  // namespace tether::compiler::optest

namespace tether::compiler::optest {
namespace {

// The fusion contract: a schedule reads inputs only through ctx.inputs and
// passes the final value through the epilogue.
TEST(ReductionOpTest, ScheduleUsesReadersAndEpilogue) {
  absl::StatusOr<Expr> call =
      MakeOpCall("relax.max", {TensorVar("x", {3, 4}, kF32)}, {{"axis", std::vector<int64_t>{1}}});
  ASSERT_TRUE(call.ok()) << call.status();
  const CallNode* node = call->as<CallNode>();
  Buffer in = MakeBuffer("X", kF32, {3, 4});
  Buffer out = MakeBuffer("Y", kF32, {3});
  LowerContext ctx;
  ctx.call = node;
  ctx.out_sinfo = node->struct_info();
  // An inlined producer: exp(X[i, j]).
  ctx.inputs = {
      [in](const std::vector<PrimExpr>& idx) { return Call(kF32, "exp", {Load(in, idx)}); }};
  ctx.input_buffers = {Buffer()};
  Epilogue twice = [](const PrimExpr& v, const std::vector<PrimExpr>&) {
    return v * FloatImm(kF32, 2.0);
  };
  absl::StatusOr<Stmt> body = FindOp("relax.max")->schedule(ctx, {out}, twice);
  ASSERT_TRUE(body.ok()) << body.status();
  KernelFunc k = MakeKernelFunc("fused_exp_max_twice",
                                {KernelParam::Tensor(in), KernelParam::Tensor(out)}, *body);
  std::string text = ToString(k);
  EXPECT_NE(text.find("exp(X["), std::string::npos) << text;
  OP_TEST_ASSERT_OK_AND_ASSIGN(compiled, CompiledKernel::Create(k));
  HostTensor x = Random({3, 4}, kF32, 5);
  absl::StatusOr<std::vector<HostTensor>> got = compiled.Run({x});
  ASSERT_TRUE(got.ok()) << got.status();
  HostTensor expected{{3}, kF32, {}};
  for (int64_t i = 0; i < 3; ++i) {
    double m = -1e300;
    for (int64_t j = 0; j < 4; ++j)
      m = std::max(m, std::exp(x.data[static_cast<size_t>(i * 4 + j)]));
    expected.data.push_back(RoundTo(kF32, 2 * m));
  }
  ExpectClose((*got)[0], expected, 1e-5);
}

}  // namespace
}  // namespace tether::compiler::optest
