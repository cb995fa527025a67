// The relax.nn operators: conv2d (strides, padding, dilation, groups,
// depthwise), max/avg/adaptive-avg pooling, batch_norm, layer_norm, softmax
// and log_softmax — inference (shapes and errors) and schedules run against
// plain C++ references on random inputs, with odd sizes and size 1, and a
// fused epilogue.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/lower/lower.h"
#include "compiler/op/conv2d.h"
#include "gtest/gtest.h"
#include "tests/compiler/op_test_util.h"
#include "tests/testing/test_functions.h"

namespace tether::compiler {
namespace {

using optest::HostTensor;
using optest::kF16;
using optest::kF32;
using optest::Random;
using optest::Shape;

double& At4(HostTensor& t, int64_t a, int64_t b, int64_t c, int64_t d) {
  const Shape& s = t.shape;
  return t.data[static_cast<size_t>(((a * s[1] + b) * s[2] + c) * s[3] + d)];
}
double At4(const HostTensor& t, int64_t a, int64_t b, int64_t c, int64_t d) {
  const Shape& s = t.shape;
  return t.data[static_cast<size_t>(((a * s[1] + b) * s[2] + c) * s[3] + d)];
}

struct Conv {
  std::vector<int64_t> strides{1, 1}, padding{0, 0, 0, 0}, dilation{1, 1};
  int64_t groups = 1;
  Attrs attrs() const {
    return {{"strides", strides}, {"padding", padding}, {"dilation", dilation}, {"groups", groups}};
  }
};

HostTensor Conv2dRef(const HostTensor& x, const HostTensor& w, const Conv& p) {
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t O = w.shape[0], Cg = w.shape[1], KH = w.shape[2], KW = w.shape[3];
  const int64_t OH =
      (H + p.padding[0] + p.padding[2] - p.dilation[0] * (KH - 1) - 1) / p.strides[0] + 1;
  const int64_t OW =
      (W + p.padding[1] + p.padding[3] - p.dilation[1] * (KW - 1) - 1) / p.strides[1] + 1;
  const int64_t Og = O / p.groups;
  (void)C;
  HostTensor y{{N, O, OH, OW}, x.dtype, std::vector<double>(static_cast<size_t>(N * O * OH * OW))};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double s = 0;
          const int64_t g = o / Og;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t ih = oh * p.strides[0] - p.padding[0] + kh * p.dilation[0];
                int64_t iw = ow * p.strides[1] - p.padding[1] + kw * p.dilation[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                s += At4(x, n, g * Cg + c, ih, iw) * At4(w, o, c, kh, kw);
              }
          At4(y, n, o, oh, ow) = optest::RoundTo(x.dtype, s);
        }
  return y;
}

void ExpectConv(const Shape& xs, const Shape& ws, const Conv& p, uint32_t seed,
                DataType dtype = kF32) {
  HostTensor x = Random(xs, dtype, seed), w = Random(ws, dtype, seed + 1);
  OP_TEST_ASSERT_OK_AND_ASSIGN(out, optest::RunOp("relax.nn.conv2d", {x, w}, p.attrs()));
  const double red = static_cast<double>(ws[1] * ws[2] * ws[3]);
  optest::ExpectClose(out[0], Conv2dRef(x, w, p), optest::Tolerance(dtype) * (1 + red / 8));
}

// Lowers one call with a custom epilogue (what fusion does) and runs it.
absl::StatusOr<std::vector<HostTensor>> RunWithEpilogue(const std::string& op,
                                                        const std::vector<HostTensor>& inputs,
                                                        Attrs attrs, const Epilogue& epilogue) {
  std::vector<Expr> args;
  std::vector<Buffer> buffers;
  std::vector<KernelParam> params;
  for (size_t i = 0; i < inputs.size(); ++i) {
    args.push_back(optest::TensorVar(absl::StrCat("x", i), inputs[i]));
    buffers.push_back(
        MakeBuffer(absl::StrCat("X", i), inputs[i].dtype, optest::Dims(inputs[i].shape)));
    params.push_back(KernelParam::Tensor(buffers.back()));
  }
  absl::StatusOr<Expr> call = optest::MakeOpCall(op, std::move(args), std::move(attrs));
  if (!call.ok()) return call.status();
  absl::StatusOr<Buffer> out = BufferForStructInfo(call->struct_info(), "Y");
  if (!out.ok()) return out.status();
  LowerContext ctx;
  ctx.call = call->as<CallNode>();
  ctx.input_buffers = buffers;
  for (const Buffer& b : buffers) {
    ctx.inputs.push_back([b](const std::vector<PrimExpr>& i) { return Load(b, i); });
  }
  ctx.out_sinfo = call->struct_info();
  absl::StatusOr<Stmt> body = FindOp(op)->schedule(ctx, {*out}, epilogue);
  if (!body.ok()) return body.status();
  params.push_back(KernelParam::Tensor(*out));
  absl::StatusOr<optest::CompiledKernel> k =
      optest::CompiledKernel::Create(MakeKernelFunc("epilogue_under_test", params, *body));
  if (!k.ok()) return k.status();
  return k->Run(inputs);
}

PrimExpr AddOneRelu(const PrimExpr& v, const std::vector<PrimExpr>&) {
  return Max(v + FloatImm(v.dtype(), 1), FloatImm(v.dtype(), 0));
}

// ---- conv2d ----

TEST(Conv2dInferTest, OutputShapeWithStridePaddingDilation) {
  Conv p;
  p.strides = {2, 1};
  p.padding = {1, 2, 1, 0};
  p.dilation = {1, 2};
  absl::StatusOr<StructInfo> s = optest::InferOp(
      "relax.nn.conv2d",
      {optest::TensorVar("x", {2, 4, 9, 10}, kF32), optest::TensorVar("w", {8, 4, 3, 3}, kF32)},
      p.attrs());
  ASSERT_TRUE(s.ok()) << s.status();
  // OH = (9 + 2 - 2 - 1) / 2 + 1 = 5; OW = (10 + 2 - 4 - 1) / 1 + 1 = 8.
  EXPECT_EQ(ToString(*s), "R.Tensor((2, 8, 5, 8), \"float32\")");
}

TEST(Conv2dInferTest, KeepsSymbolicBatchAndSpatialDims) {
  Var n("n"), h("h");
  absl::StatusOr<StructInfo> s = optest::InferOp(
      "relax.nn.conv2d",
      {optest::TensorVar("x", {n, 3, h, 8}, kF32), optest::TensorVar("w", {4, 3, 3, 3}, kF32)},
      Conv{}.attrs());
  ASSERT_TRUE(s.ok()) << s.status();
  const auto* t = s->as<TensorStructInfoNode>();
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE((*t->shape)[0].same_as(n));
  EXPECT_EQ(*(*t->shape)[3].as_int(), 6);
}

TEST(Conv2dInferTest, RejectsChannelAndGroupMismatch) {
  absl::StatusOr<StructInfo> s = optest::InferOp(
      "relax.nn.conv2d",
      {optest::TensorVar("x", {1, 4, 8, 8}, kF32), optest::TensorVar("w", {8, 3, 3, 3}, kF32)});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("relax.nn.conv2d: data has 4 channels"), std::string::npos)
      << s.status();
  Conv p;
  p.groups = 3;
  s = optest::InferOp(
      "relax.nn.conv2d",
      {optest::TensorVar("x", {1, 6, 8, 8}, kF32), optest::TensorVar("w", {8, 2, 3, 3}, kF32)},
      p.attrs());
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("8 output channels do not divide into 3 groups"),
            std::string::npos)
      << s.status();
}

TEST(Conv2dInferTest, RejectsKernelLargerThanInputAndBadAttrs) {
  absl::StatusOr<StructInfo> s = optest::InferOp(
      "relax.nn.conv2d",
      {optest::TensorVar("x", {1, 1, 2, 2}, kF32), optest::TensorVar("w", {1, 1, 3, 3}, kF32)});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("does not fit the padded input"), std::string::npos)
      << s.status();
  s = optest::InferOp(
      "relax.nn.conv2d",
      {optest::TensorVar("x", {1, 1, 4, 4}, kF32), optest::TensorVar("w", {1, 1, 3, 3}, kF32)},
      {{"padding", std::vector<int64_t>{1, 1, 1}}});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("padding must have 1, 2 or 4 values, got 3"),
            std::string::npos);
  s = optest::InferOp(
      "relax.nn.conv2d",
      {optest::TensorVar("x", {1, 1, 4, 4}, kF32), optest::TensorVar("w", {1, 1, 3, 3}, kF32)},
      {{"data_layout", std::string("NHWC")}});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("NHWC"), std::string::npos);
}

TEST(Conv2dScheduleTest, Basic3x3WithPadding) {
  Conv p;
  p.padding = {1, 1, 1, 1};
  ExpectConv({1, 16, 12, 12}, {32, 16, 3, 3}, p, 1);
}

TEST(Conv2dScheduleTest, OddSizesAndChannelTails) {
  Conv p;
  p.padding = {0, 1, 2, 0};
  ExpectConv({2, 3, 11, 13}, {37, 3, 3, 2}, p, 2);
  ExpectConv({1, 5, 7, 5}, {9, 5, 1, 1}, Conv{}, 3);
}

TEST(Conv2dScheduleTest, SizeOne) {
  ExpectConv({1, 1, 1, 1}, {1, 1, 1, 1}, Conv{}, 4);
  ExpectConv({1, 8, 1, 1}, {16, 8, 1, 1}, Conv{}, 5);
}

TEST(Conv2dScheduleTest, StridesAndDilation) {
  Conv p;
  p.strides = {2, 3};
  p.dilation = {2, 1};
  p.padding = {1, 1, 1, 1};
  ExpectConv({1, 4, 15, 17}, {12, 4, 3, 3}, p, 6);
}

TEST(Conv2dScheduleTest, GroupedAndDepthwise) {
  Conv p;
  p.groups = 2;
  p.padding = {1, 1, 1, 1};
  ExpectConv({1, 8, 9, 10}, {16, 4, 3, 3}, p, 7);  // wide groups (8 per group)
  p.groups = 4;
  ExpectConv({2, 8, 9, 10}, {8, 2, 3, 3}, p, 8);  // narrow groups
  p.groups = 6;
  p.strides = {2, 2};
  ExpectConv({1, 6, 10, 9}, {6, 1, 3, 3}, p, 9);  // depthwise
}

// The depthwise schedule: channel blocks of 16 (the last overlapping the
// one before), strides, dilation, uneven padding, batches, bands of rows,
// tiles of 16 pixels with and without a rest, long rows, input rows the
// outputs do not reach to the end, fewer than 16 channels, and float16
// (converted in the strip).
TEST(Conv2dScheduleTest, DepthwiseChannelBlocks) {
  Conv p;
  p.groups = 20;
  p.padding = {1, 2, 0, 1};
  ExpectConv({2, 20, 9, 11}, {20, 1, 3, 3}, p, 21);  // a 4-channel tail, uneven padding
  p.groups = 33;
  p.padding = {2, 2, 2, 2};
  p.strides = {2, 1};
  p.dilation = {1, 2};
  ExpectConv({1, 33, 14, 15}, {33, 1, 5, 3}, p, 22);  // two blocks and a tail, strides, dilation
  p.groups = 16;
  p.padding = {1, 1, 1, 1};
  p.strides = {1, 1};
  p.dilation = {1, 1};
  ExpectConv({1, 16, 70, 30}, {16, 1, 3, 3}, p, 23);  // 70 rows: two bands
  ExpectConv({1, 16, 7, 7}, {16, 1, 3, 3}, p, 24, kF16);
  p.groups = 24;
  ExpectConv({2, 24, 10, 62}, {24, 1, 3, 3}, p, 25);  // rows of 62, two images
  p.groups = 32;
  p.strides = {2, 2};
  ExpectConv({1, 32, 21, 100}, {32, 1, 3, 3}, p, 26);  // 50 columns out, stride 2
  p.groups = 16;
  p.padding = {0, 0, 0, 0};
  ExpectConv({1, 16, 9, 22}, {16, 1, 3, 3}, p, 27);  // the last input column unread
  p.groups = 12;
  p.strides = {1, 1};
  p.padding = {1, 1, 1, 1};
  ExpectConv({1, 12, 8, 8}, {12, 1, 3, 3}, p, 28);  // one partial block
  p.groups = 16;
  ExpectConv({1, 16, 3, 3}, {16, 1, 3, 3}, p, 29);  // 9 pixels: no whole tile
}

// Thin groups with column stride 2 on rows longer than the rows schedule
// takes (the narrow schedule).
TEST(Conv2dScheduleTest, NarrowScheduleWithColumnStrideTwo) {
  Conv p;
  p.groups = 3;
  p.strides = {2, 2};
  p.padding = {1, 1, 1, 0};
  ExpectConv({1, 3, 9, 71}, {3, 1, 3, 3}, p, 31);  // depthwise, 35 columns out
  p.groups = 4;
  p.strides = {1, 2};
  p.dilation = {1, 2};
  p.padding = {0, 2, 1, 1};
  ExpectConv({2, 8, 6, 80}, {8, 2, 3, 3}, p, 32);  // 2 channels per group, dilated taps
  p.dilation = {1, 1};
  p.padding = {1, 1, 1, 1};
  ExpectConv({1, 8, 5, 81}, {8, 2, 3, 3}, p, 33);  // odd taps: both phases
}

TEST(Conv2dScheduleTest, Float16) {
  Conv p;
  p.padding = {1, 1, 1, 1};
  ExpectConv({1, 4, 6, 7}, {8, 4, 3, 3}, p, 10, kF16);
}

// The kernel IR text of conv2d on inputs of these shapes (which schedule ran).
std::string Conv2dKernelText(const Shape& xs, const Shape& ws, const Conv& p) {
  absl::StatusOr<Expr> call = optest::MakeOpCall("relax.nn.conv2d",
                                                 {optest::TensorVar("x", optest::Dims(xs), kF32),
                                                  optest::TensorVar("w", optest::Dims(ws), kF32)},
                                                 p.attrs());
  if (!call.ok()) return std::string(call.status().message());
  absl::StatusOr<KernelFunc> kernel = LowerCallToKernel(*call->as<CallNode>(), "conv");
  if (!kernel.ok()) return std::string(kernel.status().message());
  return ToString(*kernel);
}

TEST(Conv2dScheduleTest, ShortDepthwiseRowsUseTheChannelBlocks) {
  Conv p;
  p.padding = {2, 2, 2, 2};
  p.groups = 960;
  std::string small = Conv2dKernelText({1, 960, 7, 7}, {960, 1, 5, 5}, p);
  EXPECT_NE(small.find("dw_strip"), std::string::npos) << small;
  EXPECT_EQ(small.find("conv_padded"), std::string::npos) << small;
  // So do rows of whole channel blocks, copied through transposes, up to
  // 64 outputs at column stride 1 and any length at stride 2,
  p.padding = {1, 1, 1, 1};
  p.groups = 16;
  std::string mid = Conv2dKernelText({1, 16, 56, 56}, {16, 1, 3, 3}, p);
  EXPECT_NE(mid.find("dw_strip"), std::string::npos) << mid;
  std::string wide = Conv2dKernelText({1, 16, 112, 112}, {16, 1, 3, 3}, p);
  EXPECT_EQ(wide.find("dw_strip"), std::string::npos) << wide;
  p.strides = {2, 2};
  std::string strided = Conv2dKernelText({1, 16, 112, 112}, {16, 1, 3, 3}, p);
  EXPECT_NE(strided.find("dw_strip"), std::string::npos) << strided;
  // but not longer ones of fewer channels (the strip's scalar copy costs more).
  p.groups = 8;
  std::string thin = Conv2dKernelText({1, 8, 16, 112}, {8, 1, 3, 3}, p);
  EXPECT_EQ(thin.find("dw_strip"), std::string::npos) << thin;
}

// The depthwise strip's copies keep their element-by-element path (loops
// fq and oq) only where some band copies fewer pixels than a tile: a path
// that never runs still costs each kernel's compile time.
TEST(Conv2dScheduleTest, DepthwiseCopiesHaveNoElementwisePathThatNeverRuns) {
  Conv p;
  p.padding = {1, 1, 1, 1};
  p.groups = 16;
  std::string big = Conv2dKernelText({1, 16, 56, 56}, {16, 1, 3, 3}, p);
  ASSERT_NE(big.find("dw_strip"), std::string::npos) << big;
  EXPECT_EQ(big.find("for fq"), std::string::npos) << big;
  EXPECT_EQ(big.find("for oq"), std::string::npos) << big;
  std::string small = Conv2dKernelText({1, 16, 3, 3}, {16, 1, 3, 3}, p);
  ASSERT_NE(small.find("dw_strip"), std::string::npos) << small;
  EXPECT_NE(small.find("for fq"), std::string::npos) << small;
  EXPECT_NE(small.find("for oq"), std::string::npos) << small;
}

TEST(Conv2dScheduleTest, ThinConvolutionsUseTheRowsSchedule) {
  Conv p;
  p.padding = {1, 1, 1, 1};
  // Three input channels (an image stem): padded per task, no padded copy.
  std::string stem = Conv2dKernelText({1, 3, 32, 32}, {16, 3, 3, 3}, p);
  EXPECT_NE(stem.find("conv_rows"), std::string::npos) << stem;
  EXPECT_EQ(stem.find("conv_padded"), std::string::npos) << stem;
  EXPECT_EQ(stem.find("conv_packed_w"), std::string::npos) << stem;
  // Many channels on a wide row keep the channel-vectorized schedule.
  std::string wide = Conv2dKernelText({1, 64, 8, 56}, {64, 64, 3, 3}, p);
  EXPECT_NE(wide.find("conv_packed_w"), std::string::npos) << wide;
  // Column stride 2 through a strip split by parity (contiguous taps), for
  // rows of up to one tile; longer ones take the narrow schedule.
  p.strides = {2, 2};
  std::string strided = Conv2dKernelText({1, 3, 32, 32}, {16, 3, 3, 3}, p);
  EXPECT_NE(strided.find("conv_line"), std::string::npos) << strided;
  EXPECT_EQ(strided.find("conv_padded"), std::string::npos) << strided;
  Conv depthwise = p;
  depthwise.groups = 8;
  std::string long_rows = Conv2dKernelText({1, 8, 16, 112}, {8, 1, 3, 3}, depthwise);
  EXPECT_EQ(long_rows.find("conv_rows"), std::string::npos) << long_rows;
}

TEST(Conv2dScheduleTest, RowsColumnStrideTwo) {
  Conv p;
  p.strides = {2, 2};
  p.groups = 8;  // depthwise 5x5, an odd padded width (25)
  p.padding = {2, 2, 2, 2};
  ExpectConv({1, 8, 20, 21}, {8, 1, 5, 5}, p, 40);
  p = Conv{};
  p.strides = {2, 2};
  p.dilation = {1, 2};  // odd and even taps of a dilated row
  p.padding = {1, 2, 1, 2};
  ExpectConv({1, 4, 15, 40}, {6, 4, 3, 3}, p, 41);
  p = Conv{};
  p.strides = {1, 2};
  p.padding = {0, 4, 0, 4};  // 9 taps: a loop, not unrolled
  ExpectConv({1, 2, 6, 40}, {3, 2, 1, 9}, p, 42);
  p = Conv{};
  p.strides = {2, 2};  // no padding: the strip still splits the columns
  ExpectConv({2, 3, 8, 33}, {4, 3, 3, 3}, p, 43);
}

TEST(Conv2dScheduleTest, RowsThinInputChannels) {
  Conv p;
  p.padding = {1, 1, 1, 1};
  ExpectConv({1, 3, 32, 32}, {16, 3, 3, 3}, p, 21);
  ExpectConv({2, 1, 9, 12}, {5, 1, 3, 3}, p, 22);
}

TEST(Conv2dScheduleTest, RowsLastTileShiftedAndChannelTail) {
  Conv p;
  p.padding = {0, 2, 1, 1};  // asymmetric
  // 45 output columns: tiles [0, 32) and [13, 45) overlap.
  ExpectConv({1, 4, 5, 44}, {6, 4, 3, 3}, p, 23);
  // 13 output channels: no tile size divides them, the last tile is partial.
  p.padding = {1, 1, 1, 1};
  ExpectConv({2, 5, 6, 20}, {13, 5, 3, 3}, p, 24);
}

TEST(Conv2dScheduleTest, RowsDilationGroupsAndRowStride) {
  Conv p;
  p.groups = 2;
  p.dilation = {2, 3};
  p.padding = {2, 3, 2, 3};
  ExpectConv({1, 6, 12, 19}, {8, 3, 3, 3}, p, 25);
  p = Conv{};
  p.strides = {2, 1};
  p.padding = {1, 0, 1, 2};
  ExpectConv({1, 4, 11, 17}, {12, 4, 3, 3}, p, 26);
  p = Conv{};
  p.groups = 8;  // depthwise, unit stride
  p.padding = {1, 1, 1, 1};
  ExpectConv({1, 8, 10, 16}, {8, 1, 3, 3}, p, 27);
}

TEST(Conv2dScheduleTest, RowsWithoutPaddingAndWithALargeStrip) {
  // No padding: the rows schedule reads the input in place.
  ExpectConv({1, 2, 7, 16}, {4, 2, 3, 3}, Conv{}, 28);
  // 64 channels x 3 rows x 50 padded columns exceed the per-task strip: the
  // input is padded into a scratch buffer first.
  Conv p;
  p.padding = {1, 1, 1, 1};
  ExpectConv({1, 64, 4, 48}, {8, 64, 3, 3}, p, 29);
}

TEST(Conv2dScheduleTest, RowsFloat16) {
  Conv p;
  p.padding = {1, 1, 1, 1};
  ExpectConv({1, 3, 5, 16}, {4, 3, 3, 3}, p, 30, kF16);
}

TEST(Conv2dScheduleTest, AppliesEpilogue) {
  HostTensor x = Random({1, 6, 8, 9}, kF32, 11), w = Random({10, 6, 3, 3}, kF32, 12);
  Conv p;
  p.padding = {1, 1, 1, 1};
  OP_TEST_ASSERT_OK_AND_ASSIGN(out,
                               RunWithEpilogue("relax.nn.conv2d", {x, w}, p.attrs(), AddOneRelu));
  HostTensor expected = Conv2dRef(x, w, p);
  for (double& v : expected.data) v = std::max(v + 1, 0.0);
  optest::ExpectClose(out[0], expected, 1e-4);
}

// A 1x1 convolution without padding is a matrix product per image: the CPU
// GEMM schedule (cpu_gemm.h), its image read as a [channels][pixels] matrix
// in place or packed (a strided one's pixels always packed).
TEST(Conv2dScheduleTest, PointwiseConvolutionsAreAGemm) {
  std::string text = Conv2dKernelText({1, 192, 20, 30}, {192, 192, 1, 1}, Conv{});
  EXPECT_NE(text.find("gemm_acc"), std::string::npos) << text;
  EXPECT_EQ(text.find("conv_packed_w"), std::string::npos) << text;
  // A 1x1 map is a matrix-vector product: the packed schedules keep it.
  text = Conv2dKernelText({1, 64, 1, 1}, {16, 64, 1, 1}, Conv{});
  EXPECT_EQ(text.find("gemm_acc"), std::string::npos) << text;
  // Padding or groups are not a plain product.
  Conv p;
  p.padding = {1, 1, 1, 1};
  text = Conv2dKernelText({1, 32, 8, 8}, {32, 32, 1, 1}, p);
  EXPECT_EQ(text.find("gemm_acc"), std::string::npos) << text;
  Conv g;
  g.groups = 2;
  text = Conv2dKernelText({1, 32, 8, 8}, {32, 16, 1, 1}, g);
  EXPECT_EQ(text.find("gemm_acc"), std::string::npos) << text;
}

// A strided 1x1 convolution (ResNet's projections, 256 -> 512 on 56 -> 28
// pixels) is the same product over the pixels it reads: they are gathered
// into the GEMM's packed panels, as B's columns are not contiguous. Output
// rows shorter than half a vector keep the wide schedule.
TEST(Conv2dScheduleTest, StridedPointwiseConvolutionsAreAGemm) {
  Conv s2;
  s2.strides = {2, 2};
  std::string text = Conv2dKernelText({1, 32, 56, 56}, {64, 32, 1, 1}, s2);
  EXPECT_NE(text.find("gemm_acc"), std::string::npos) << text;
  EXPECT_NE(text.find("gemm_packed_b"), std::string::npos) << text;
  EXPECT_EQ(text.find("conv_packed_w"), std::string::npos) << text;
  EXPECT_EQ(Conv2dKernelText({1, 32, 14, 14}, {64, 32, 1, 1}, s2).find("gemm_acc"),
            std::string::npos);  // 7 x 7 out
  // Odd sizes (17 x 19 -> 9 x 10: 90 pixels, two panels and 26 columns),
  // two images, a partial row block; strides that differ by axis.
  ExpectConv({2, 24, 17, 19}, {13, 24, 1, 1}, s2, 51);
  Conv s21;
  s21.strides = {2, 1};
  ExpectConv({1, 16, 20, 12}, {40, 16, 1, 1}, s21, 52);
  Conv s13;
  s13.strides = {1, 3};
  ExpectConv({1, 16, 6, 50}, {24, 16, 1, 1}, s13, 53);
  Conv s2d;  // with dilation (a 1x1 kernel has no taps to spread)
  s2d.strides = {2, 2};
  s2d.dilation = {2, 2};
  ExpectConv({1, 8, 33, 33}, {16, 8, 1, 1}, s2d, 54);
}

TEST(Conv2dScheduleTest, PointwiseGemmSizes) {
  // 600 pixels (the last column panel partial: packed alone, the others
  // read in place), 13 output channels (a partial row block), two images.
  ExpectConv({2, 24, 20, 30}, {13, 24, 1, 1}, Conv{}, 41);
  // 64 pixels: the panels tile the image, read in place; more pixels than
  // output channels, so the row blocks run innermost.
  ExpectConv({1, 40, 8, 8}, {24, 40, 1, 1}, Conv{}, 42);
  // Rows of 9 (pixel index arithmetic that does not line up with a panel).
  ExpectConv({1, 16, 9, 9}, {48, 16, 1, 1}, Conv{}, 43);
  // Rows of 7 are shorter than half a vector: the wide schedule runs them.
  EXPECT_EQ(Conv2dKernelText({1, 16, 7, 7}, {48, 16, 1, 1}, Conv{}).find("gemm_acc"),
            std::string::npos);
  ExpectConv({1, 16, 7, 7}, {48, 16, 1, 1}, Conv{}, 48);
}

TEST(Conv2dScheduleTest, PointwiseGemmAppliesEpilogueAtEveryPixel) {
  HostTensor x = Random({2, 12, 5, 9}, kF32, 44), w = Random({20, 12, 1, 1}, kF32, 45);
  // The epilogue adds the pixel's own (h, w) position: a wrong index would show.
  Epilogue epilogue = [](const PrimExpr& v, const std::vector<PrimExpr>& i) {
    return v + Cast(v.dtype(), i[2] * 16 + i[3]) + Cast(v.dtype(), i[0] * 1000 + i[1] * 100);
  };
  OP_TEST_ASSERT_OK_AND_ASSIGN(
      out, RunWithEpilogue("relax.nn.conv2d", {x, w}, Conv{}.attrs(), epilogue));
  HostTensor expected = Conv2dRef(x, w, Conv{});
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t o = 0; o < 20; ++o)
      for (int64_t h = 0; h < 5; ++h)
        for (int64_t c = 0; c < 9; ++c)
          At4(expected, n, o, h, c) += h * 16 + c + n * 1000 + o * 100;
  optest::ExpectClose(out[0], expected, 1e-3);
}

// The wide schedule's channel blocks: 48 channels are one block of three
// vectors, 40 one block of 48 with 8 lanes empty, 144 three blocks of 48,
// 80 blocks of 32 (48 would waste as much), each against the reference.
TEST(Conv2dScheduleTest, WideChannelBlocksOf32And48) {
  Conv p;
  p.padding = {1, 1, 1, 1};
  for (const auto& [xs, ws, block] :
       {std::tuple<Shape, Shape, std::string>{{1, 6, 3, 35}, {48, 6, 3, 3}, "(1, 6, 3, 3, 48)"},
        {{1, 5, 4, 36}, {40, 5, 3, 3}, "(1, 5, 3, 3, 48)"},
        {{1, 3, 2, 34}, {144, 3, 3, 3}, "(3, 3, 3, 3, 48)"},
        {{1, 4, 3, 33}, {80, 4, 3, 3}, "(3, 4, 3, 3, 32)"}}) {
    std::string text = Conv2dKernelText(xs, ws, p);
    EXPECT_NE(text.find("conv_packed_w = T.alloc_buffer(" + block), std::string::npos) << text;
  }
  ExpectConv({1, 6, 3, 35}, {48, 6, 3, 3}, p, 11);
  ExpectConv({1, 5, 4, 36}, {40, 5, 3, 3}, p, 12);
  ExpectConv({1, 3, 2, 34}, {144, 3, 3, 3}, p, 13);
  ExpectConv({1, 4, 3, 33}, {80, 4, 3, 3}, p, 14);
  Conv grouped = p;
  grouped.groups = 2;
  ExpectConv({1, 4, 2, 34}, {96, 2, 3, 3}, grouped, 15);
}

// PackConv2dWeights: blocks of BO = min(32, Og) output channels of a
// group, [groups * blocks, Cg, KH, KW, BO], zero past the group's channels;
// only calls that run the wide schedule pack.
TEST(Conv2dScheduleTest, PackedWeightBlocksAndWhichCallsPack) {
  const int64_t o = 40, cg = 2, groups = 2;  // 20 per group: one block of 20
  std::vector<float> w(o * cg * 3 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i + 1);
  absl::StatusOr<Tensor> p =
      PackConv2dWeights(tether::testing::MakeFloatTensor({o, cg, 3, 3}, w), groups);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(std::vector<int64_t>((*p)->shape().begin(), (*p)->shape().end()),
            (std::vector<int64_t>{2, cg, 3, 3, 20}));
  std::vector<float> got = tether::testing::ReadFloats(*p);
  for (int64_t oc = 0; oc < o; ++oc)
    for (int64_t t = 0; t < cg * 9; ++t) {
      EXPECT_EQ(got[((oc / 20) * cg * 9 + t) * 20 + oc % 20], w[oc * cg * 9 + t]) << oc;
    }
  EXPECT_FALSE(
      PackConv2dWeights(tether::testing::MakeFloatTensor({3, 1, 1, 1}, {1, 2, 3}), 2).ok());
  auto packs = [](const Shape& xs, const Shape& ws, const Conv& p) {
    absl::StatusOr<Expr> call = optest::MakeOpCall("relax.nn.conv2d",
                                                   {optest::TensorVar("x", optest::Dims(xs), kF32),
                                                    optest::TensorVar("w", optest::Dims(ws), kF32)},
                                                   p.attrs());
    return call.ok() && Conv2dPacksWeights(*call->as<CallNode>());
  };
  Conv pad;
  pad.padding = {1, 1, 1, 1};
  EXPECT_TRUE(packs({1, 64, 8, 56}, {64, 64, 3, 3}, pad));      // wide
  EXPECT_FALSE(packs({1, 3, 32, 32}, {16, 3, 3, 3}, pad));      // rows (a stem)
  EXPECT_FALSE(packs({1, 64, 8, 56}, {64, 64, 1, 1}, Conv{}));  // a 1x1 product
  // Short rows with a whole block of output channels: packed for the wide
  // schedule (a constant weight), at stride 1 and 2, 3x3 and 1x1; with
  // fewer than 32 the rows schedule keeps them.
  EXPECT_TRUE(packs({1, 256, 14, 14}, {256, 256, 3, 3}, pad));
  EXPECT_TRUE(packs({1, 128, 28, 28}, {128, 128, 3, 3}, pad));
  Conv s2 = pad;
  s2.strides = {2, 2};
  EXPECT_TRUE(packs({1, 256, 28, 28}, {256, 256, 3, 3}, s2));
  Conv s2_1x1;
  s2_1x1.strides = {2, 2};
  EXPECT_TRUE(packs({1, 1024, 14, 14}, {2048, 1024, 1, 1}, s2_1x1));  // 7 x 7 out: wide
  EXPECT_FALSE(packs({1, 512, 28, 28}, {1024, 512, 1, 1}, s2_1x1));   // 14 x 14: a GEMM
  EXPECT_FALSE(packs({1, 64, 14, 14}, {16, 64, 3, 3}, pad));
  // conv2d_packed checks the blocks against out_channels and groups: a
  // hand-written call with another layout would read past the weight.
  auto infer = [](const Shape& wp, int64_t out_channels) {
    Attrs attrs = Conv{}.attrs();
    attrs["out_channels"] = out_channels;
    return optest::InferOp("relax.nn.conv2d_packed",
                           {optest::TensorVar("x", optest::Dims({1, 8, 6, 40}), kF32),
                            optest::TensorVar("wp", optest::Dims(wp), kF32)},
                           attrs);
  };
  // 40 channels: one block of 48 (8 lanes empty) rather than 32 and a
  // block of 32 holding 8; 64: two of 32.
  absl::StatusOr<StructInfo> ok = infer({1, 8, 3, 3, 48}, 40);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ToString(*ok), "R.Tensor((1, 40, 4, 38), \"float32\")");
  ok = infer({2, 8, 3, 3, 32}, 64);
  ASSERT_TRUE(ok.ok()) << ok.status();
  for (const Shape& bad :
       {Shape{2, 8, 3, 3, 32}, Shape{1, 8, 3, 3, 32}, Shape{3, 8, 3, 3, 16}, Shape{1, 8, 3, 3}}) {
    absl::StatusOr<StructInfo> s = infer(bad, 40);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << ToString(*s);
  }
}

TEST(Conv2dScheduleTest, RowsTilesArePowersOfTwoPastOneVector) {
  Conv p;
  p.padding = {1, 1, 1, 1};
  // 30 output columns: two overlapping tiles of 16, not one of 30 (a vector
  // LLVM would split into pieces).
  std::string text = Conv2dKernelText({1, 8, 6, 30}, {16, 8, 3, 3}, p);
  EXPECT_NE(text.find("for w in T.vectorized(16)"), std::string::npos) << text;
  EXPECT_EQ(text.find("for w in T.vectorized(30)"), std::string::npos) << text;
  ExpectConv({1, 8, 6, 30}, {16, 8, 3, 3}, p, 46);
  ExpectConv({1, 128, 3, 28}, {40, 128, 3, 3}, p, 47);
}

// ---- pooling ----

struct Pool {
  std::vector<int64_t> size{2, 2}, strides{2, 2}, padding{0, 0, 0, 0}, dilation{1, 1};
  bool ceil_mode = false, count_include_pad = false;
  Attrs attrs() const {
    return {{"pool_size", size},      {"strides", strides},
            {"padding", padding},     {"dilation", dilation},
            {"ceil_mode", ceil_mode}, {"count_include_pad", count_include_pad}};
  }
};

HostTensor PoolRef(const HostTensor& x, const Pool& p, bool is_max) {
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  auto out_dim = [&](int64_t in, int d) {
    int64_t num = in + p.padding[d] + p.padding[d + 2] - p.dilation[d] * (p.size[d] - 1) - 1;
    if (p.ceil_mode) num += p.strides[d] - 1;
    return num / p.strides[d] + 1;
  };
  const int64_t OH = out_dim(H, 0), OW = out_dim(W, 1);
  HostTensor y{{N, C, OH, OW}, x.dtype, std::vector<double>(static_cast<size_t>(N * C * OH * OW))};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = is_max ? -std::numeric_limits<double>::infinity() : 0;
          double count = 0;
          for (int64_t kh = 0; kh < p.size[0]; ++kh)
            for (int64_t kw = 0; kw < p.size[1]; ++kw) {
              int64_t ih = oh * p.strides[0] - p.padding[0] + kh * p.dilation[0];
              int64_t iw = ow * p.strides[1] - p.padding[1] + kw * p.dilation[1];
              bool inside = ih >= 0 && ih < H && iw >= 0 && iw < W;
              bool in_pad = ih < H + p.padding[2] && iw < W + p.padding[3];
              if (inside)
                acc = is_max ? std::max(acc, At4(x, n, c, ih, iw)) : acc + At4(x, n, c, ih, iw);
              if (p.count_include_pad ? in_pad : inside) count += 1;
            }
          At4(y, n, c, oh, ow) =
              optest::RoundTo(x.dtype, is_max ? acc : acc / std::max(count, 1.0));
        }
  return y;
}

void ExpectPool(const Shape& xs, const Pool& p, bool is_max, uint32_t seed) {
  HostTensor x = Random(xs, kF32, seed);
  OP_TEST_ASSERT_OK_AND_ASSIGN(
      out, optest::RunOp(is_max ? "relax.nn.max_pool2d" : "relax.nn.avg_pool2d", {x}, p.attrs()));
  optest::ExpectClose(out[0], PoolRef(x, p, is_max));
}

TEST(Pool2dInferTest, OutputShapeFloorAndCeilMode) {
  Pool p;
  p.size = {3, 3};
  absl::StatusOr<StructInfo> s = optest::InferOp(
      "relax.nn.max_pool2d", {optest::TensorVar("x", {1, 2, 8, 9}, kF32)}, p.attrs());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(ToString(*s), "R.Tensor((1, 2, 3, 4), \"float32\")");
  p.ceil_mode = true;
  s = optest::InferOp("relax.nn.max_pool2d", {optest::TensorVar("x", {1, 2, 8, 9}, kF32)},
                      p.attrs());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(ToString(*s), "R.Tensor((1, 2, 4, 4), \"float32\")");
}

TEST(Pool2dInferTest, RejectsBadAttrsAndRank) {
  absl::StatusOr<StructInfo> s =
      optest::InferOp("relax.nn.avg_pool2d", {optest::TensorVar("x", {1, 2, 8, 9}, kF32)},
                      {{"pool_size", std::vector<int64_t>{2, 2, 2}}});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(
      s.status().message().find("relax.nn.avg_pool2d: pool_size must have 1 or 2 values, got 3"),
      std::string::npos)
      << s.status();
  s = optest::InferOp("relax.nn.max_pool2d", {optest::TensorVar("x", {2, 8, 9}, kF32)});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("must have 4 dims"), std::string::npos);
  s = optest::InferOp("relax.nn.max_pool2d", {optest::TensorVar("x", {1, 1, 2, 2}, kF32)},
                      {{"pool_size", std::vector<int64_t>{3, 3}}});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("does not fit"), std::string::npos);
}

TEST(Pool2dScheduleTest, MaxPoolVariants) {
  ExpectPool({2, 3, 8, 8}, Pool{}, true, 1);
  Pool p;
  p.size = {3, 3};
  p.strides = {2, 2};
  p.padding = {1, 1, 1, 1};
  p.ceil_mode = true;
  ExpectPool({1, 4, 11, 13}, p, true, 2);
  Pool d;
  d.size = {2, 3};
  d.strides = {1, 2};
  d.dilation = {2, 2};
  ExpectPool({1, 2, 9, 70}, d, true, 3);  // wider than one column tile
  Pool one;
  one.size = {1, 1};
  one.strides = {1, 1};
  ExpectPool({1, 1, 1, 1}, one, true, 4);
}

TEST(Pool2dScheduleTest, AvgPoolCountIncludePadOrNot) {
  Pool p;
  p.size = {3, 3};
  p.strides = {2, 2};
  p.padding = {1, 1, 1, 1};
  ExpectPool({1, 3, 7, 9}, p, false, 5);
  p.count_include_pad = true;
  ExpectPool({1, 3, 7, 9}, p, false, 6);
  p.ceil_mode = true;
  p.padding = {0, 1, 0, 1};
  ExpectPool({2, 2, 8, 5}, p, false, 7);
}

TEST(Pool2dScheduleTest, AppliesEpilogue) {
  HostTensor x = Random({1, 2, 6, 6}, kF32, 8);
  Pool p;
  OP_TEST_ASSERT_OK_AND_ASSIGN(out,
                               RunWithEpilogue("relax.nn.max_pool2d", {x}, p.attrs(), AddOneRelu));
  HostTensor expected = PoolRef(x, p, true);
  for (double& v : expected.data) v = std::max(v + 1, 0.0);
  optest::ExpectClose(out[0], expected);
}

HostTensor AdaptiveRef(const HostTensor& x, int64_t OH, int64_t OW) {
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  HostTensor y{{N, C, OH, OW}, x.dtype, std::vector<double>(static_cast<size_t>(N * C * OH * OW))};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          int64_t hs = oh * H / OH, he = ((oh + 1) * H + OH - 1) / OH;
          int64_t ws = ow * W / OW, we = ((ow + 1) * W + OW - 1) / OW;
          double s = 0;
          for (int64_t h = hs; h < he; ++h)
            for (int64_t w = ws; w < we; ++w) s += At4(x, n, c, h, w);
          At4(y, n, c, oh, ow) =
              optest::RoundTo(x.dtype, s / static_cast<double>((he - hs) * (we - ws)));
        }
  return y;
}

TEST(AdaptiveAvgPool2dTest, GlobalAndUnevenBins) {
  HostTensor x = Random({2, 3, 7, 40}, kF32, 9);
  OP_TEST_ASSERT_OK_AND_ASSIGN(g, optest::RunOp("relax.nn.adaptive_avg_pool2d", {x},
                                                {{"output_size", std::vector<int64_t>{1, 1}}}));
  optest::ExpectClose(g[0], AdaptiveRef(x, 1, 1), 1e-4);
  OP_TEST_ASSERT_OK_AND_ASSIGN(u, optest::RunOp("relax.nn.adaptive_avg_pool2d", {x},
                                                {{"output_size", std::vector<int64_t>{3, 6}}}));
  optest::ExpectClose(u[0], AdaptiveRef(x, 3, 6), 1e-4);
}

TEST(AdaptiveAvgPool2dTest, DefaultOutputSizeIsTheInputSize) {
  absl::StatusOr<StructInfo> s =
      optest::InferOp("relax.nn.adaptive_avg_pool2d", {optest::TensorVar("x", {1, 2, 5, 6}, kF32)});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(ToString(*s), "R.Tensor((1, 2, 5, 6), \"float32\")");
  s = optest::InferOp("relax.nn.adaptive_avg_pool2d", {optest::TensorVar("x", {1, 2, 5, 6}, kF32)},
                      {{"output_size", std::vector<int64_t>{0}}});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("output_size must be 1 or 2 positive ints"),
            std::string::npos);
}

// ---- batch_norm ----

TEST(BatchNormTest, InfersTupleAndRejectsBadParams) {
  absl::StatusOr<StructInfo> s =
      optest::InferOp("relax.nn.batch_norm",
                      {optest::TensorVar("x", {2, 3, 4, 5}, kF32),
                       optest::TensorVar("g", {3}, kF32), optest::TensorVar("b", {3}, kF32),
                       optest::TensorVar("m", {3}, kF32), optest::TensorVar("v", {3}, kF32)});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(
      ToString(*s),
      "R.Tuple(R.Tensor((2, 3, 4, 5), \"float32\"), R.Tensor((3,), \"float32\"), R.Tensor((3,), "
      "\"float32\"))");
  s = optest::InferOp("relax.nn.batch_norm",
                      {optest::TensorVar("x", {2, 3, 4, 5}, kF32),
                       optest::TensorVar("g", {4}, kF32), optest::TensorVar("b", {3}, kF32),
                       optest::TensorVar("m", {3}, kF32), optest::TensorVar("v", {3}, kF32)});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("relax.nn.batch_norm: gamma has shape (4,), expected (3,)"),
            std::string::npos)
      << s.status();
}

void ExpectBatchNorm(const Shape& xs, int axis, bool center, bool scale, uint32_t seed) {
  const int64_t ch = xs[static_cast<size_t>(axis)];
  HostTensor x = Random(xs, kF32, seed), g = Random({ch}, kF32, seed + 1),
             b = Random({ch}, kF32, seed + 2);
  HostTensor m = Random({ch}, kF32, seed + 3), v = Random({ch}, kF32, seed + 4, 0.1, 2.0);
  const double eps = 1e-3;
  OP_TEST_ASSERT_OK_AND_ASSIGN(
      out, optest::RunOp(
               "relax.nn.batch_norm", {x, g, b, m, v},
               {{"axis", int64_t{axis}}, {"epsilon", eps}, {"center", center}, {"scale", scale}}));
  ASSERT_EQ(out.size(), 3u);
  HostTensor expected = x;
  const Shape strides = optest::Strides(xs);
  for (size_t i = 0; i < x.data.size(); ++i) {
    const size_t c =
        static_cast<size_t>((static_cast<int64_t>(i) / strides[static_cast<size_t>(axis)]) % ch);
    double y = (x.data[i] - m.data[c]) / std::sqrt(v.data[c] + eps);
    if (scale) y *= g.data[c];
    if (center) y += b.data[c];
    expected.data[i] = optest::RoundTo(kF32, y);
  }
  optest::ExpectClose(out[0], expected, 1e-5);
  optest::ExpectClose(out[1], m);
  optest::ExpectClose(out[2], v);
}

TEST(BatchNormTest, NormalizesWithMovingStatistics) {
  ExpectBatchNorm({2, 3, 5, 7}, 1, true, true, 1);
  ExpectBatchNorm({4, 5}, 1, false, true, 2);
  ExpectBatchNorm({3, 1, 6}, 0, true, false, 3);
  ExpectBatchNorm({1, 1, 1, 1}, 1, true, true, 4);
}

// ---- layer_norm ----

void ExpectLayerNorm(const Shape& xs, const std::vector<int64_t>& axes, uint32_t seed,
                     DataType dtype = kF32) {
  std::vector<bool> reduced(xs.size(), false);
  Shape ps;
  for (int64_t a : axes)
    reduced[static_cast<size_t>(a < 0 ? a + static_cast<int64_t>(xs.size()) : a)] = true;
  for (size_t d = 0; d < xs.size(); ++d)
    if (reduced[d]) ps.push_back(xs[d]);
  HostTensor x = Random(xs, dtype, seed), g = Random(ps, dtype, seed + 1),
             b = Random(ps, dtype, seed + 2);
  const double eps = 1e-5;
  OP_TEST_ASSERT_OK_AND_ASSIGN(
      out, optest::RunOp("relax.nn.layer_norm", {x, g, b}, {{"axes", axes}, {"epsilon", eps}}));
  // Reference: group elements by their non-reduced index.
  const int64_t n = optest::NumElements(xs);
  std::map<Shape, std::vector<int64_t>> rows;
  for (int64_t i = 0; i < n; ++i) {
    Shape idx = optest::Unravel(i, xs), key;
    for (size_t d = 0; d < xs.size(); ++d)
      if (!reduced[d]) key.push_back(idx[d]);
    rows[key].push_back(i);
  }
  HostTensor expected = x;
  for (const auto& [key, members] : rows) {
    double mean = 0, var = 0;
    for (int64_t i : members) mean += x.data[static_cast<size_t>(i)];
    mean /= static_cast<double>(members.size());
    for (int64_t i : members) var += std::pow(x.data[static_cast<size_t>(i)] - mean, 2);
    var /= static_cast<double>(members.size());
    for (size_t r = 0; r < members.size(); ++r) {
      const size_t i = static_cast<size_t>(members[r]);
      expected.data[i] =
          optest::RoundTo(dtype, (x.data[i] - mean) / std::sqrt(var + eps) * g.data[r] + b.data[r]);
    }
  }
  optest::ExpectClose(out[0], expected, dtype == kF16 ? 1e-2 : 1e-4);
}

TEST(LayerNormTest, LastAxisOddSizesAndSizeOne) {
  ExpectLayerNorm({4, 37}, {-1}, 1);
  ExpectLayerNorm({2, 3, 64}, {-1}, 2);
  ExpectLayerNorm({3, 1}, {-1}, 3);
}

TEST(LayerNormTest, SeveralAxes) {
  ExpectLayerNorm({2, 5, 6}, {1, 2}, 4);
  ExpectLayerNorm({3, 4, 5}, {0, 2}, 5);
}

TEST(LayerNormTest, Float16) { ExpectLayerNorm({3, 40}, {-1}, 6, kF16); }

TEST(LayerNormTest, RejectsBadAxesAndGammaShape) {
  absl::StatusOr<StructInfo> s =
      optest::InferOp("relax.nn.layer_norm",
                      {optest::TensorVar("x", {2, 3}, kF32), optest::TensorVar("g", {3}, kF32),
                       optest::TensorVar("b", {3}, kF32)},
                      {{"axes", std::vector<int64_t>{2}}});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("relax.nn.layer_norm: axis 2 is out of range for 2 dims"),
            std::string::npos)
      << s.status();
  s = optest::InferOp("relax.nn.layer_norm",
                      {optest::TensorVar("x", {2, 3}, kF32), optest::TensorVar("g", {2}, kF32),
                       optest::TensorVar("b", {3}, kF32)});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("gamma has shape (2,), expected (3,)"), std::string::npos)
      << s.status();
}

// ---- softmax / log_softmax ----

void ExpectSoftmax(const Shape& xs, int64_t axis, bool log, uint32_t seed, double scale = 1.0) {
  HostTensor x = Random(xs, kF32, seed, -2.0 * scale, 2.0 * scale);
  OP_TEST_ASSERT_OK_AND_ASSIGN(
      out, optest::RunOp(log ? "relax.nn.log_softmax" : "relax.nn.softmax", {x}, {{"axis", axis}}));
  const size_t a = static_cast<size_t>(axis < 0 ? axis + static_cast<int64_t>(xs.size()) : axis);
  const Shape strides = optest::Strides(xs);
  HostTensor expected = x;
  for (size_t i = 0; i < x.data.size(); ++i) {
    Shape idx = optest::Unravel(static_cast<int64_t>(i), xs);
    if (idx[a] != 0) continue;
    double mx = -INFINITY, sum = 0;
    for (int64_t r = 0; r < xs[a]; ++r)
      mx = std::max(mx, x.data[i + static_cast<size_t>(r * strides[a])]);
    for (int64_t r = 0; r < xs[a]; ++r)
      sum += std::exp(x.data[i + static_cast<size_t>(r * strides[a])] - mx);
    for (int64_t r = 0; r < xs[a]; ++r) {
      const size_t j = i + static_cast<size_t>(r * strides[a]);
      expected.data[j] = optest::RoundTo(
          kF32, log ? x.data[j] - mx - std::log(sum) : std::exp(x.data[j] - mx) / sum);
    }
  }
  optest::ExpectClose(out[0], expected, 1e-5);
}

TEST(SoftmaxTest, LastAndInnerAxes) {
  ExpectSoftmax({5, 37}, -1, false, 1);
  ExpectSoftmax({3, 4, 6}, 1, false, 2);
  ExpectSoftmax({2, 1}, -1, false, 3);
  ExpectSoftmax({7}, 0, false, 4);
}

TEST(SoftmaxTest, StableForLargeInputs) { ExpectSoftmax({4, 50}, -1, false, 5, 200.0); }

TEST(LogSoftmaxTest, LastAndInnerAxesAndLargeInputs) {
  ExpectSoftmax({5, 37}, -1, true, 6);
  ExpectSoftmax({3, 4, 6}, 0, true, 7);
  ExpectSoftmax({4, 50}, -1, true, 8, 200.0);
}

TEST(SoftmaxTest, AppliesEpilogue) {
  HostTensor x = Random({3, 20}, kF32, 9);
  OP_TEST_ASSERT_OK_AND_ASSIGN(out,
                               RunWithEpilogue("relax.nn.softmax", {x}, {{"axis", int64_t{-1}}},
                                               [](const PrimExpr& v, const std::vector<PrimExpr>&) {
                                                 return v * FloatImm(kF32, 2);
                                               }));
  for (int64_t r = 0; r < 3; ++r) {
    double s = 0;
    for (int64_t c = 0; c < 20; ++c) s += out[0].data[static_cast<size_t>(r * 20 + c)];
    EXPECT_NEAR(s, 2.0, 1e-5);
  }
}

TEST(SoftmaxTest, RejectsIntegerInputAndBadAxis) {
  absl::StatusOr<StructInfo> s =
      optest::InferOp("relax.nn.softmax", {optest::TensorVar("x", {2, 3}, optest::kI32)});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("relax.nn.softmax: requires a float tensor, got int32"),
            std::string::npos);
  s = optest::InferOp("relax.nn.log_softmax", {optest::TensorVar("x", {2, 3}, kF32)},
                      {{"axis", int64_t{-3}}});
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("axis -3 is out of range for 2 dims"), std::string::npos);
}

// ---- pad ----

TEST(PadTest, InfersShapeAndRejectsBadWidths) {
  Attrs a = {{"pad_width", std::vector<int64_t>{1, 2, 0, -1}}};
  absl::StatusOr<StructInfo> s =
      optest::InferOp("relax.nn.pad", {optest::TensorVar("x", {2, 3}, kF32)}, a);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(ToString(*s), "R.Tensor((5, 2), \"float32\")");
  s = optest::InferOp("relax.nn.pad", {optest::TensorVar("x", {2, 3}, kF32)},
                      {{"pad_width", std::vector<int64_t>{1, 1}}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("pad_width [1, 1] must have 4 values for 2 dims"),
            std::string::npos)
      << s.status();
  s = optest::InferOp(
      "relax.nn.pad", {optest::TensorVar("x", {2, 3}, kF32)},
      {{"pad_width", std::vector<int64_t>{0, 0, 3, 0}}, {"pad_mode", std::string("reflect")}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("must be smaller than dim 1 of size 3"), std::string::npos)
      << s.status();
  s = optest::InferOp(
      "relax.nn.pad", {optest::TensorVar("x", {2, 3}, kF32)},
      {{"pad_width", std::vector<int64_t>{0, 0, 0, 0}}, {"pad_mode", std::string("wrap")}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("pad_mode must be constant, edge or reflect, got 'wrap'"),
            std::string::npos)
      << s.status();
}

// numpy.pad of a 2-D tensor with interleaved (before, after) widths.
HostTensor PadRef(const HostTensor& x, const std::vector<int64_t>& w, const std::string& mode,
                  double value) {
  const int64_t h = x.shape[0], wd = x.shape[1];
  HostTensor y{{h + w[0] + w[1], wd + w[2] + w[3]}, x.dtype, {}};
  auto map = [&](int64_t i, int64_t d, bool* in) {
    *in = i >= 0 && i < d;
    if (mode == "edge") return std::clamp<int64_t>(i, 0, d - 1);
    if (mode == "reflect") {
      while (i < 0 || i >= d) i = i < 0 ? -i : 2 * (d - 1) - i;
      return i;
    }
    return std::clamp<int64_t>(i, 0, d - 1);
  };
  for (int64_t r = 0; r < y.shape[0]; ++r)
    for (int64_t c = 0; c < y.shape[1]; ++c) {
      bool in_r = false, in_c = false;
      const int64_t xr = map(r - w[0], h, &in_r), xc = map(c - w[2], wd, &in_c);
      y.data.push_back(mode == "constant" && !(in_r && in_c) ? value : x.data[xr * wd + xc]);
    }
  return y;
}

TEST(PadTest, ConstantEdgeReflectAndCrop) {
  HostTensor x = Random({3, 4}, kF32, 7);
  for (const char* mode : {"constant", "edge", "reflect"}) {
    for (const std::vector<int64_t>& w :
         {std::vector<int64_t>{1, 2, 2, 0}, std::vector<int64_t>{0, 0, 3, 3},
          std::vector<int64_t>{-1, 1, 1, -2}}) {
      SCOPED_TRACE(absl::StrCat(mode, " ", absl::StrJoin(w, ",")));
      Attrs a = {{"pad_width", w}, {"pad_mode", std::string(mode)}, {"pad_value", 1.5}};
      OP_TEST_ASSERT_OK_AND_ASSIGN(out, optest::RunOp("relax.nn.pad", {x}, a));
      optest::ExpectClose(out[0], PadRef(x, w, mode, 1.5));
    }
  }
}

}  // namespace
}  // namespace tether::compiler
