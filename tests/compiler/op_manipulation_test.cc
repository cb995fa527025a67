// The manipulation and creation operators: inferred shapes (including -1
// and symbolic dims), errors, and kernels against C++ references.
#include "compiler/tir/arith.h"
#include "tests/compiler/op_test_util.h"

namespace tether::compiler::optest {
namespace {

// out[idx] = x[map(idx)] for every output index.
HostTensor GatherRef(const HostTensor& x, const Shape& out_shape,
                     const std::function<Shape(const Shape&)>& map) {
  HostTensor out{out_shape, x.dtype, {}};
  const Shape strides = Strides(x.shape);
  for (int64_t i = 0; i < NumElements(out_shape); ++i) {
    const Shape in = map(Unravel(i, out_shape));
    int64_t flat = 0;
    for (size_t k = 0; k < in.size(); ++k) flat += in[k] * strides[k];
    out.data.push_back(x.data[static_cast<size_t>(flat)]);
  }
  return out;
}

HostTensor Reshaped(HostTensor x, Shape shape) {
  x.shape = std::move(shape);
  return x;
}

TEST(ManipulationOpTest, ReshapeInfersMinusOne) {
  absl::StatusOr<StructInfo> s =
      InferOp("relax.reshape",
              {TensorVar("x", {2, 3, 4}, kF32), MakeShapeExpr({PrimExpr(-1), PrimExpr(4)})});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(ToString(*s), ToString(TensorSInfo({6, 4}, kF32)));
}

TEST(ManipulationOpTest, ReshapeInfersSymbolicMinusOne) {
  Var n("n");
  absl::StatusOr<StructInfo> s =
      InferOp("relax.reshape",
              {TensorVar("x", {n, 3, 4}, kF32), MakeShapeExpr({PrimExpr(-1), PrimExpr(12)})});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(ProveEqual((*s->as<TensorStructInfoNode>()->shape)[0], n)) << ToString(*s);
}

TEST(ManipulationOpTest, ReshapeRejectsWrongElementCount) {
  absl::StatusOr<StructInfo> s = InferOp(
      "relax.reshape", {TensorVar("x", {2, 3}, kF32), MakeShapeExpr({PrimExpr(4), PrimExpr(2)})});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("relax.reshape"), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("cannot reshape"), std::string::npos) << s.status();
}

TEST(ManipulationOpTest, ReshapeAndFlattenMatchReference) {
  HostTensor x = Random({2, 3, 5}, kF32, 1);
  OP_TEST_ASSERT_OK_AND_ASSIGN(
      out, RunOp("relax.reshape", {x}, {}, {MakeShapeExpr({PrimExpr(5), PrimExpr(-1)})}));
  ExpectClose(out[0], Reshaped(x, {5, 6}));
  OP_TEST_ASSERT_OK_AND_ASSIGN(flat, RunOp("relax.flatten", {x}));
  ExpectClose(flat[0], Reshaped(x, {30}));
  HostTensor y = Random({7}, kI32, 2, -9, 9);
  OP_TEST_ASSERT_OK_AND_ASSIGN(
      out3,
      RunOp("relax.reshape", {y}, {}, {MakeShapeExpr({PrimExpr(1), PrimExpr(7), PrimExpr(1)})}));
  ExpectClose(out3[0], Reshaped(y, {1, 7, 1}));
}

TEST(ManipulationOpTest, SymbolicReshapeRunsAtTwoSizes) {
  Var n("n");
  absl::StatusOr<Expr> call = MakeOpCall(
      "relax.reshape", {TensorVar("x", {n, 6}, kF32), MakeShapeExpr({n * 3, PrimExpr(2)})});
  ASSERT_TRUE(call.ok()) << call.status();
  absl::StatusOr<KernelFunc> kernel = LowerCallToKernel(*call->as<CallNode>(), "reshape_n");
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  OP_TEST_ASSERT_OK_AND_ASSIGN(compiled, CompiledKernel::Create(*kernel));
  for (int64_t rows : {1, 17}) {
    HostTensor x = Random({rows, 6}, kF32, 3);
    absl::StatusOr<std::vector<HostTensor>> out = compiled.Run({x}, {{rows * 3, 2}});
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectClose((*out)[0], Reshaped(x, {rows * 3, 2}));
  }
}

TEST(ManipulationOpTest, PermuteDimsMatchesReference) {
  HostTensor x = Random({2, 3, 5}, kF32, 4);
  OP_TEST_ASSERT_OK_AND_ASSIGN(
      out, RunOp("relax.permute_dims", {x}, {{"axes", std::vector<int64_t>{1, 2, 0}}}));
  ExpectClose(out[0], GatherRef(x, {3, 5, 2}, [](const Shape& i) {
                return Shape{i[2], i[0], i[1]};
              }));
  OP_TEST_ASSERT_OK_AND_ASSIGN(rev, RunOp("relax.permute_dims", {x}));
  ExpectClose(rev[0], GatherRef(x, {5, 3, 2}, [](const Shape& i) {
                return Shape{i[2], i[1], i[0]};
              }));
  HostTensor y = Random({65, 1}, kI64, 5, -9, 9);
  OP_TEST_ASSERT_OK_AND_ASSIGN(t, RunOp("relax.permute_dims", {y}));
  ExpectClose(t[0], Reshaped(y, {1, 65}));
}

// Both channel orders, unequal blocks, odd widths, a batch; the kernel is a
// schedule (rows of r2 interleaved planes), so every lane is checked.
TEST(ManipulationOpTest, DepthToSpaceMatchesReference) {
  HostTensor x = Random({2, 12, 3, 5}, kF32, 41);
  for (const std::string mode : {"CRD", "DCR"}) {
    SCOPED_TRACE(mode);
    OP_TEST_ASSERT_OK_AND_ASSIGN(
        out, RunOp("relax.nn.depth_to_space", {x},
                   {{"block_size", std::vector<int64_t>{2, 3}}, {"mode", mode}}));
    ExpectClose(out[0], GatherRef(x, {2, 2, 6, 15}, [&](const Shape& i) {
                  const int64_t a = i[2] % 2, b = i[3] % 3, c = i[1];
                  const int64_t ch = mode == "CRD" ? (c * 2 + a) * 3 + b : (a * 3 + b) * 2 + c;
                  return Shape{i[0], ch, i[2] / 2, i[3] / 3};
                }));
  }
  HostTensor y = Random({1, 4, 2, 33}, kI64, 42, -9, 9);
  OP_TEST_ASSERT_OK_AND_ASSIGN(
      o, RunOp("relax.nn.depth_to_space", {y}, {{"block_size", std::vector<int64_t>{2, 2}}}));
  ExpectClose(o[0], GatherRef(y, {1, 1, 4, 66}, [](const Shape& i) {
                return Shape{0, (i[2] % 2) * 2 + i[3] % 2, i[2] / 2, i[3] / 2};
              }));
}

TEST(ManipulationOpTest, DepthToSpaceRejectsBadBlocks) {
  absl::StatusOr<StructInfo> s =
      InferOp("relax.nn.depth_to_space", {TensorVar("x", {1, 6, 2, 2}, kF32)},
              {{"block_size", std::vector<int64_t>{2, 2}}});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("not a multiple of 4"), std::string::npos) << s.status();
  s = InferOp("relax.nn.depth_to_space", {TensorVar("x", {1, 4, 2, 2}, kF32)},
              {{"block_size", std::vector<int64_t>{2, 2}}, {"mode", std::string("XYZ")}});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  s = InferOp("relax.nn.depth_to_space", {TensorVar("x", {1, 4, 2, 2}, kF32)},
              {{"block_size", std::vector<int64_t>{0, 2}}});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ManipulationOpTest, PermuteDimsRejectsWrongAxes) {
  absl::StatusOr<StructInfo> s = InferOp("relax.permute_dims", {TensorVar("x", {2, 3}, kF32)},
                                         {{"axes", std::vector<int64_t>{0, 0}}});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("relax.permute_dims"), std::string::npos) << s.status();
}

TEST(ManipulationOpTest, ExpandDimsAndSqueezeMatchReference) {
  HostTensor x = Random({3, 4}, kF32, 6);
  OP_TEST_ASSERT_OK_AND_ASSIGN(
      e, RunOp("relax.expand_dims", {x}, {{"axis", std::vector<int64_t>{0, -1}}}));
  ExpectClose(e[0], Reshaped(x, {1, 3, 4, 1}));
  OP_TEST_ASSERT_OK_AND_ASSIGN(e1, RunOp("relax.expand_dims", {x}, {{"axis", int64_t{1}}}));
  ExpectClose(e1[0], Reshaped(x, {3, 1, 4}));
  HostTensor y = Random({1, 5, 1, 2}, kF32, 7);
  OP_TEST_ASSERT_OK_AND_ASSIGN(sq, RunOp("relax.squeeze", {y}));
  ExpectClose(sq[0], Reshaped(y, {5, 2}));
  OP_TEST_ASSERT_OK_AND_ASSIGN(sq2,
                               RunOp("relax.squeeze", {y}, {{"axis", std::vector<int64_t>{2}}}));
  ExpectClose(sq2[0], Reshaped(y, {1, 5, 2}));
}

TEST(ManipulationOpTest, SqueezeRejectsNonUnitAxis) {
  absl::StatusOr<StructInfo> s =
      InferOp("relax.squeeze", {TensorVar("x", {2, 3}, kF32)}, {{"axis", std::vector<int64_t>{1}}});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("relax.squeeze"), std::string::npos) << s.status();
}

TEST(ManipulationOpTest, ConcatMatchesReference) {
  for (int64_t axis : {0, 1, -1}) {
    HostTensor a = Random({2, 3}, kF32, 8), b = Random({2, 1}, kF32, 9),
               c = Random({2, 4}, kF32, 10);
    if (axis == 0) {
      b = Random({1, 3}, kF32, 9);
      c = Random({4, 3}, kF32, 10);
    }
    Expr tuple =
        MakeVar("t", TupleSInfo({TensorSInfo(Dims(a.shape), kF32), TensorSInfo(Dims(b.shape), kF32),
                                 TensorSInfo(Dims(c.shape), kF32)}));
    absl::StatusOr<Expr> call = MakeOpCall("relax.concat", {tuple}, {{"axis", axis}});
    ASSERT_TRUE(call.ok()) << call.status();
    OP_TEST_ASSERT_OK_AND_ASSIGN(out, RunCall(*call, {a, b, c}));
    const size_t ax = axis == 0 ? 0 : 1;
    Shape out_shape = a.shape;
    out_shape[ax] = a.shape[ax] + b.shape[ax] + c.shape[ax];
    HostTensor expected{out_shape, kF32, {}};
    for (int64_t i = 0; i < NumElements(out_shape); ++i) {
      Shape idx = Unravel(i, out_shape);
      const HostTensor* src = &a;
      if (idx[ax] >= a.shape[ax]) {
        idx[ax] -= a.shape[ax];
        src = &b;
        if (idx[ax] >= b.shape[ax]) {
          idx[ax] -= b.shape[ax];
          src = &c;
        }
      }
      expected.data.push_back(BroadcastAt(*src, idx));
    }
    ExpectClose(out[0], expected);
  }
}

TEST(ManipulationOpTest, ConcatRejectsMismatchedDims) {
  Expr tuple = MakeVar("t", TupleSInfo({TensorSInfo({2, 3}, kF32), TensorSInfo({3, 3}, kF32)}));
  absl::StatusOr<StructInfo> s = InferOp("relax.concat", {tuple}, {{"axis", int64_t{1}}});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("relax.concat"), std::string::npos) << s.status();
}

TEST(ManipulationOpTest, SplitMatchesReference) {
  HostTensor x = Random({4, 6}, kF32, 11);
  OP_TEST_ASSERT_OK_AND_ASSIGN(
      out, RunOp("relax.split", {x}, {{"indices_or_sections", int64_t{3}}, {"axis", int64_t{1}}}));
  ASSERT_EQ(out.size(), 3u);
  for (int64_t k = 0; k < 3; ++k) {
    ExpectClose(out[static_cast<size_t>(k)], GatherRef(x, {4, 2}, [k](const Shape& i) {
                  return Shape{i[0], i[1] + 2 * k};
                }));
  }
  OP_TEST_ASSERT_OK_AND_ASSIGN(
      pieces, RunOp("relax.split", {x}, {{"indices_or_sections", std::vector<int64_t>{1, 3}}}));
  ASSERT_EQ(pieces.size(), 3u);
  ExpectClose(pieces[0], GatherRef(x, {1, 6}, [](const Shape& i) { return i; }));
  ExpectClose(pieces[1], GatherRef(x, {2, 6}, [](const Shape& i) {
                return Shape{i[0] + 1, i[1]};
              }));
  ExpectClose(pieces[2], GatherRef(x, {1, 6}, [](const Shape& i) {
                return Shape{i[0] + 3, i[1]};
              }));
}

TEST(ManipulationOpTest, SplitRejectsUnevenSections) {
  absl::StatusOr<StructInfo> s =
      InferOp("relax.split", {TensorVar("x", {5}, kF32)}, {{"indices_or_sections", int64_t{2}}});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("relax.split"), std::string::npos) << s.status();
}

TEST(ManipulationOpTest, StridedSliceMatchesReference) {
  HostTensor x = Random({6, 7}, kF32, 12);
  // x[1:5:2, -3:]
  OP_TEST_ASSERT_OK_AND_ASSIGN(out, RunOp("relax.strided_slice", {x},
                                          {{"axes", std::vector<int64_t>{0, 1}},
                                           {"begin", std::vector<int64_t>{1, -3}},
                                           {"end", std::vector<int64_t>{5, 100}},
                                           {"strides", std::vector<int64_t>{2, 1}}}));
  ExpectClose(out[0], GatherRef(x, {2, 3}, [](const Shape& i) {
                return Shape{1 + 2 * i[0], 4 + i[1]};
              }));
  // x[:, ::-2] (begin clamped from a huge value)
  OP_TEST_ASSERT_OK_AND_ASSIGN(rev, RunOp("relax.strided_slice", {x},
                                          {{"axes", std::vector<int64_t>{1}},
                                           {"begin", std::vector<int64_t>{1000}},
                                           {"end", std::vector<int64_t>{-1000}},
                                           {"strides", std::vector<int64_t>{-2}}}));
  ExpectClose(rev[0], GatherRef(x, {6, 4}, [](const Shape& i) {
                return Shape{i[0], 6 - 2 * i[1]};
              }));
  // An empty slice.
  absl::StatusOr<StructInfo> s = InferOp("relax.strided_slice", {TensorVar("x", {6}, kF32)},
                                         {{"axes", std::vector<int64_t>{0}},
                                          {"begin", std::vector<int64_t>{4}},
                                          {"end", std::vector<int64_t>{2}}});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(ToString(*s), ToString(TensorSInfo({0}, kF32)));
}

TEST(ManipulationOpTest, TakeMatchesReferenceAndClamps) {
  HostTensor x = Random({5, 3}, kF32, 13);
  HostTensor ind{{2, 2}, kI64, {4, 0, -1, 9}};  // -1 wraps to 4, 9 clamps to 4
  OP_TEST_ASSERT_OK_AND_ASSIGN(out, RunOp("relax.take", {x, ind}, {{"axis", int64_t{0}}}));
  ExpectClose(out[0], GatherRef(x, {2, 2, 3}, [&](const Shape& i) {
                const int64_t raw =
                    static_cast<int64_t>(ind.data[static_cast<size_t>(i[0] * 2 + i[1])]);
                const int64_t r = std::clamp<int64_t>(raw < 0 ? raw + 5 : raw, 0, 4);
                return Shape{r, i[2]};
              }));
  HostTensor ind32{{4}, kI32, {2, 1, 0, 2}};
  OP_TEST_ASSERT_OK_AND_ASSIGN(cols, RunOp("relax.take", {x, ind32}, {{"axis", int64_t{1}}}));
  ExpectClose(cols[0], GatherRef(x, {5, 4}, [&](const Shape& i) {
                return Shape{i[0], static_cast<int64_t>(ind32.data[static_cast<size_t>(i[1])])};
              }));
}

TEST(ManipulationOpTest, TakeRejectsFloatIndices) {
  absl::StatusOr<StructInfo> s = InferOp(
      "relax.take", {TensorVar("x", {5}, kF32), TensorVar("i", {2}, kF32)}, {{"axis", int64_t{0}}});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("relax.take"), std::string::npos) << s.status();
}

TEST(ManipulationOpTest, BroadcastToMatchesReference) {
  HostTensor x = Random({3, 1}, kF32, 14);
  OP_TEST_ASSERT_OK_AND_ASSIGN(out,
                               RunOp("relax.broadcast_to", {x}, {},
                                     {MakeShapeExpr({PrimExpr(2), PrimExpr(3), PrimExpr(5)})}));
  ExpectClose(out[0], GatherRef(x, {2, 3, 5}, [](const Shape& i) { return Shape{i[1], 0}; }));
  absl::StatusOr<StructInfo> bad =
      InferOp("relax.broadcast_to",
              {TensorVar("x", {3, 2}, kF32), MakeShapeExpr({PrimExpr(3), PrimExpr(4)})});
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("relax.broadcast_to"), std::string::npos) << bad.status();
}

TEST(ManipulationOpTest, FullZerosOnesMatchReference) {
  absl::StatusOr<Expr> full = MakeOpCall("relax.full", {MakeShapeExpr({PrimExpr(2), PrimExpr(3)}),
                                                        MakePrimValue(FloatImm(kF32, 2.5))});
  ASSERT_TRUE(full.ok()) << full.status();
  OP_TEST_ASSERT_OK_AND_ASSIGN(f, RunCall(*full, {}));
  ExpectClose(f[0], Filled({2, 3}, kF32, 2.5));
  absl::StatusOr<Expr> zeros =
      MakeOpCall("relax.zeros", {MakeShapeExpr({PrimExpr(7)})}, {{"dtype", kI32}});
  ASSERT_TRUE(zeros.ok()) << zeros.status();
  OP_TEST_ASSERT_OK_AND_ASSIGN(z, RunCall(*zeros, {}));
  ExpectClose(z[0], Filled({7}, kI32, 0));
  absl::StatusOr<Expr> ones = MakeOpCall("relax.ones", {MakeShapeExpr({PrimExpr(4), PrimExpr(1)})});
  ASSERT_TRUE(ones.ok()) << ones.status();
  OP_TEST_ASSERT_OK_AND_ASSIGN(o, RunCall(*ones, {}));
  ExpectClose(o[0], Filled({4, 1}, kF32, 1));
}

}  // namespace
}  // namespace tether::compiler::optest

namespace tether::compiler::optest {
namespace {

TEST(ManipulationOpTest, FullTakesAScalarTensorFillValue) {
  absl::StatusOr<Tensor> scalar = ToTensor(HostTensor{{}, kI32, {-7}});
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  absl::StatusOr<Expr> full =
      MakeOpCall("relax.full", {MakeShapeExpr({PrimExpr(3), PrimExpr(2)}), MakeConstant(*scalar)},
                 {{"dtype", kF32}});
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(ToString(full->struct_info()), ToString(TensorSInfo({3, 2}, kF32)));
  OP_TEST_ASSERT_OK_AND_ASSIGN(f, RunCall(*full, {HostTensor{{}, kI32, {-7}}}));
  ExpectClose(f[0], Filled({3, 2}, kF32, -7));
}

TEST(ManipulationOpTest, FusedReaderIsInlinedIntoInjectiveCompute) {
  absl::StatusOr<Expr> call = MakeOpCall("relax.permute_dims", {TensorVar("x", {2, 3}, kF32)});
  ASSERT_TRUE(call.ok()) << call.status();
  LowerContext ctx;
  ctx.call = call->as<CallNode>();
  ctx.out_sinfo = call->struct_info();
  std::vector<PrimExpr> seen;
  ctx.inputs = {[&](const std::vector<PrimExpr>& idx) {
    seen = idx;
    return FloatImm(kF32, 1.0);
  }};
  Var i("i"), j("j");
  FindOp("relax.permute_dims")->compute(ctx, {i, j});
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen[0].same_as(j));
  EXPECT_TRUE(seen[1].same_as(i));
}

// ---- gather_elements, tril/triu, cumsum ----

TEST(ManipulationOpTest, GatherElementsMatchesReferenceAndClamps) {
  HostTensor x = Random({3, 4}, kF32, 21);
  HostTensor ind{{2, 4}, kI64, {0, 2, -1, 1, 2, 7, 0, -3}};  // -1 wraps to 2, 7 clamps to 2
  OP_TEST_ASSERT_OK_AND_ASSIGN(out,
                               RunOp("relax.gather_elements", {x, ind}, {{"axis", int64_t{0}}}));
  ExpectClose(out[0], GatherRef(x, {2, 4}, [&](const Shape& i) {
                const int64_t raw =
                    static_cast<int64_t>(ind.data[static_cast<size_t>(i[0] * 4 + i[1])]);
                return Shape{std::clamp<int64_t>(raw < 0 ? raw + 3 : raw, 0, 2), i[1]};
              }));
}

TEST(ManipulationOpTest, GatherElementsRejectsRankMismatch) {
  absl::StatusOr<StructInfo> s =
      InferOp("relax.gather_elements", {TensorVar("x", {3, 4}, kF32), TensorVar("i", {2}, kI64)},
              {{"axis", int64_t{0}}});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("indices have 1 dims, the tensor 2"), std::string::npos)
      << s.status();
}

TEST(ManipulationOpTest, TrilAndTriuMatchReference) {
  HostTensor x = Random({2, 3, 4}, kF32, 22);
  for (int64_t k : {-1, 0, 2}) {
    for (bool lower : {true, false}) {
      OP_TEST_ASSERT_OK_AND_ASSIGN(out,
                                   RunOp(lower ? "relax.tril" : "relax.triu", {x}, {{"k", k}}));
      HostTensor want = x;
      for (int64_t i = 0; i < NumElements(x.shape); ++i) {
        const Shape idx = Unravel(i, x.shape);
        const int64_t diff = idx[2] - idx[1];
        if (lower ? diff > k : diff < k) want.data[static_cast<size_t>(i)] = 0;
      }
      ExpectClose(out[0], want);
    }
  }
}

TEST(ManipulationOpTest, TrilRejectsVector) {
  absl::StatusOr<StructInfo> s = InferOp("relax.tril", {TensorVar("x", {4}, kF32)});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("at least 2 dims"), std::string::npos) << s.status();
}

TEST(ManipulationOpTest, CumsumMatchesReferenceInEveryMode) {
  HostTensor x = Random({3, 5}, kF32, 23);
  for (int64_t axis : {0, -1}) {
    for (bool exclusive : {false, true}) {
      for (bool reverse : {false, true}) {
        OP_TEST_ASSERT_OK_AND_ASSIGN(
            out, RunOp("relax.cumsum", {x},
                       {{"axis", axis}, {"exclusive", exclusive}, {"reverse", reverse}}));
        const int64_t a = axis < 0 ? axis + 2 : axis;
        HostTensor want = x;
        for (int64_t i = 0; i < NumElements(x.shape); ++i) {
          const Shape idx = Unravel(i, x.shape);
          double sum = 0;
          for (int64_t j = 0; j < x.shape[a]; ++j) {
            const bool before = reverse ? j > idx[a] : j < idx[a];
            if (!(before || (!exclusive && j == idx[a]))) continue;
            Shape src = idx;
            src[a] = j;
            sum += x.data[static_cast<size_t>(src[0] * x.shape[1] + src[1])];
          }
          want.data[static_cast<size_t>(i)] = sum;
        }
        ExpectClose(out[0], want);
      }
    }
  }
}

TEST(ManipulationOpTest, CumsumOfIntsIsExact) {
  HostTensor x{{4}, kI64, {1, 2, 3, 4}};
  OP_TEST_ASSERT_OK_AND_ASSIGN(out, RunOp("relax.cumsum", {x}, {{"axis", int64_t{0}}}));
  ExpectClose(out[0], HostTensor{{4}, kI64, {1, 3, 6, 10}});
}

TEST(ManipulationOpTest, CumsumRejectsMissingAxis) {
  absl::StatusOr<StructInfo> s = InferOp("relax.cumsum", {TensorVar("x", {4}, kF32)});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("missing attribute axis"), std::string::npos) << s.status();
}

TEST(ManipulationOpTest, ScatterElementsMatchesReferenceInEveryMode) {
  HostTensor x = Random({3, 4}, kF32, 24);
  HostTensor ind{{2, 4}, kI64, {0, 2, -1, 1, 0, 2, 1, -3}};  // -1 wraps to 2, -3 to 0
  HostTensor upd = Random({2, 4}, kF32, 25);
  for (const std::string reduction : {"update", "add", "mul"}) {
    OP_TEST_ASSERT_OK_AND_ASSIGN(out, RunOp("relax.scatter_elements", {x, ind, upd},
                                            {{"axis", int64_t{0}}, {"reduction", reduction}}));
    HostTensor want = x;
    for (int64_t p = 0; p < 8; ++p) {
      const int64_t raw = static_cast<int64_t>(ind.data[static_cast<size_t>(p)]);
      const int64_t row = raw < 0 ? raw + 3 : raw;
      double& dst = want.data[static_cast<size_t>(row * 4 + p % 4)];
      const double u = upd.data[static_cast<size_t>(p)];
      dst = reduction == "add" ? dst + u : reduction == "mul" ? dst * u : u;
    }
    ExpectClose(out[0], want);
  }
}

TEST(ManipulationOpTest, ScatterElementsRejectsUnknownReduction) {
  absl::StatusOr<StructInfo> s =
      InferOp("relax.scatter_elements",
              {TensorVar("x", {4}, kF32), TensorVar("i", {2}, kI64), TensorVar("u", {2}, kF32)},
              {{"reduction", std::string("max")}});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("unknown reduction 'max'"), std::string::npos) << s.status();
}

}  // namespace
}  // namespace tether::compiler::optest
