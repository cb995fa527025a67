// relax.nn.conv2d in NCHW / OIHW with strides, padding, dilation and
// groups, and its tiled schedule.
//
// A 1x1 convolution with no padding and one group is a matrix product per
// image (W[o][c] times the image as a [c][pixel] matrix, the pixels it
// reads where it has strides): with at least kGemmMinPixels pixels it runs
// the CPU GEMM schedule of cpu_gemm.h, as matmul does. The others:
//
// The wide schedule (8 or more output channels per group): weights are
// packed into Wp[group * blocks][ic][kh][kw][BO] (output channels of a
// block contiguous, zero past the group's channels; BO = WideBlock: 32, or
// 48 where that wastes fewer lanes) and the input is copied once into a
// zero-padded buffer, so the inner loops have no bounds checks. The
// parallel loop runs over batch x channel-block x output row; each task
// walks its row in tiles of `wt` output columns, accumulating a wt x BO
// kLocal tile (columns unrolled, output channels vectorized a vector of 16
// at a time) over ic, kh, kw.
// The rows schedule (column stride 1 or 2, constant sizes, and few output
// channels or short rows: image stems, small feature maps, depthwise; short
// rows only where the weight is not a constant, which a whole block of
// output channels packs for the wide schedule, Conv2dPacksWeights)
// vectorizes over the output columns of a row with a block of output
// channels in registers, reads the OIHW weights in place, and pads the few
// input rows each task reads into a stack strip, so a small convolution is
// one parallel loop with contiguous stores. The narrow schedule (other thin
// groups, column strides) vectorizes over output columns one channel at a
// time. A depthwise convolution (one channel per group) with constant sizes
// and rows short enough (DepthwiseBand) takes none of these: the depthwise
// schedule vectorizes across blocks of channels held channel-last in stack
// strips, transposed on the way in and out (ScheduleConv2dDepthwise).
// All apply the epilogue at the final store.
//
// For a GPU (LowerContext::gpu) there is no packing and no padded copy.
// With at least 16 output channels per group and 16 output pixels (or
// symbolic ones), a convolution is an implicit GEMM through block_gemm.h:
// per (image, group), C[oc][pixel] = sum over k = (channel, kh, kw) of
// W[oc][k] (W's rows as they are) times the input tap of that pixel, zero
// in the padding; with fewer than 16 output pixels (a squeeze-excite 1x1
// convolution of a 1x1 image), the same product through block_gemm.h's
// skinny schedule. Otherwise (fewer than 16 output channels per group) one
// parallel loop runs over the output elements, each a serial reduction over
// its group's input channels and the window into a kLocal accumulator, with
// taps that fall into the padding skipped by bounds checks.
#include "compiler/op/conv2d.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "compiler/lower/lower.h"
#include "compiler/op/block_gemm.h"
#include "compiler/op/cpu_gemm.h"
#include "compiler/op/nn_common.h"
#include "compiler/op/op.h"
#include "compiler/tir/arith.h"
#include "runtime/core/error.h"

namespace tether::compiler {
namespace {

using nn_internal::CeilDiv;
using nn_internal::IsConst;
using nn_internal::Loop;
using nn_internal::ShapeString;

constexpr char kConv2d[] = "relax.nn.conv2d";
constexpr int64_t kBlock = 32;           // output channels per packed block (wide schedule)
constexpr int64_t kWideBlock48 = 48;     // the other block: 3 vectors x 8 columns = 24 accumulators
constexpr int64_t kNarrowTile = 64;      // output columns per tile (narrow schedule)
constexpr int64_t kRowsMaxWidth = 32;    // output columns per tile (rows schedule)
constexpr int64_t kRowsLanes = 16;       // floats per vector register assumed (rows schedule)
constexpr int64_t kRowsAccVectors = 16;  // accumulator vectors per tile (rows schedule)
constexpr int64_t kRowsMaxStripFloats = 8192;  // per-task padded input rows (rows schedule)
constexpr int64_t kWideMinChannels = 8;        // output channels per group (wide schedule)
constexpr int64_t kGemmMinPixels = 16;         // output pixels per image (1x1 as a GEMM)
constexpr int64_t kDwLanes = 16;               // channels per block (depthwise schedule)
constexpr int64_t kDwMaxStripFloats = 32768;   // per-task channel-last strips (depthwise, 128 KiB)
constexpr int64_t kDwMaxUnitStrideWidth = 64;  // output columns at column stride 1 (depthwise)

struct ConvParams {
  std::vector<int64_t> strides, padding, dilation;  // padding: top, left, bottom, right
  int64_t groups = 1;
};

absl::StatusOr<ConvParams> ParseConvAttrs(const Attrs& attrs) {
  ConvParams p;
  absl::StatusOr<std::vector<int64_t>> v = nn_internal::Pair(attrs, "strides", {1, 1}, 1, kConv2d);
  if (!v.ok()) return v.status();
  p.strides = *v;
  v = nn_internal::Pair(attrs, "dilation", {1, 1}, 1, kConv2d);
  if (!v.ok()) return v.status();
  p.dilation = *v;
  v = nn_internal::Padding4(attrs, kConv2d);
  if (!v.ok()) return v.status();
  p.padding = *v;
  p.groups = GetIntAttr(attrs, "groups", 1);
  if (p.groups < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(kConv2d, ": groups must be positive, got ", p.groups));
  }
  for (const char* key : {"data_layout", "kernel_layout", "out_layout"}) {
    std::string expected = std::string(key) == "kernel_layout" ? "OIHW" : "NCHW";
    if (absl::Status s = nn_internal::CheckLayout(attrs, key, expected, kConv2d); !s.ok()) return s;
  }
  return p;
}

// (extent + pad_lo + pad_hi - dilation * (k - 1) - 1) / stride + 1
PrimExpr OutDim(const PrimExpr& in, const PrimExpr& k, int64_t pad, int64_t dil, int64_t stride) {
  return FloorDiv(in + PrimExpr(pad) - PrimExpr(dil) * (k - 1) - 1, PrimExpr(stride)) + 1;
}

// The output of conv2d(x, w) with the call's attributes, `w` the weight in
// OIHW (for conv2d_packed, the weight its panels were packed from).
absl::StatusOr<StructInfo> InferConv2dOf(const CallNode& call,
                                         absl::StatusOr<const TensorStructInfoNode*> x,
                                         absl::StatusOr<const TensorStructInfoNode*> w) {
  if (!x.ok()) return x.status();
  if (!w.ok()) return w.status();
  absl::StatusOr<ConvParams> p = ParseConvAttrs(call.attrs);
  if (!p.ok()) return p.status();
  std::optional<DataType> dtype = GetDTypeAttr(call.attrs, "out_dtype");
  if (!dtype.has_value()) dtype = (*x)->dtype;
  for (const auto* t : {*x, *w}) {
    if (t->ndim != -1 && t->ndim != 4) {
      return absl::InvalidArgumentError(absl::StrCat(kConv2d, ": ", t == *x ? "data" : "weight",
                                                     " must have 4 dims, got ", t->ndim));
    }
  }
  if (!(*x)->shape.has_value() || !(*w)->shape.has_value()) return TensorSInfoOfRank(4, dtype);
  const std::vector<PrimExpr>& xs = *(*x)->shape;
  const std::vector<PrimExpr>& ws = *(*w)->shape;
  const int64_t g = p->groups;
  const int64_t* c = xs[1].as_int();
  const int64_t* o = ws[0].as_int();
  const int64_t* cg = ws[1].as_int();
  if (c && cg && *c != *cg * g) {
    return absl::InvalidArgumentError(absl::StrCat(kConv2d, ": data has ", *c,
                                                   " channels but weight ", ShapeString(ws),
                                                   " with ", g, " groups expects ", *cg * g));
  }
  if (o && *o % g != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kConv2d, ": ", *o, " output channels do not divide into ", g, " groups"));
  }
  PrimExpr oh =
      OutDim(xs[2] + PrimExpr(p->padding[2]), ws[2], p->padding[0], p->dilation[0], p->strides[0]);
  PrimExpr ow =
      OutDim(xs[3] + PrimExpr(p->padding[3]), ws[3], p->padding[1], p->dilation[1], p->strides[1]);
  for (const PrimExpr& d : {oh, ow}) {
    if (const int64_t* v = d.as_int(); v && *v < 1) {
      return absl::InvalidArgumentError(absl::StrCat(kConv2d, ": the kernel ", ShapeString(ws),
                                                     " does not fit the padded input ",
                                                     ShapeString(xs)));
    }
  }
  return TensorSInfo({xs[0], ws[0], oh, ow}, dtype);
}

absl::StatusOr<StructInfo> InferConv2d(const CallNode& call) {
  if (absl::Status s = nn_internal::CheckArity(call, 2, kConv2d); !s.ok()) return s;
  return InferConv2dOf(call, nn_internal::TensorArg(call, 0, kConv2d),
                       nn_internal::TensorArg(call, 1, kConv2d));
}

// Output channels per packed block of the wide schedule for `og` per group:
// all of them up to kBlock, else kBlock, or kWideBlock48 where that wastes
// fewer lanes (48 channels: one block of three vectors instead of 32 and a
// half-empty 32, which computed 64 channels for 48).
int64_t WideBlock(int64_t og) {
  if (og <= kBlock) return og;
  auto waste = [og](int64_t b) { return (og + b - 1) / b * b - og; };
  return waste(kWideBlock48) < waste(kBlock) ? kWideBlock48 : kBlock;
}

// relax.nn.conv2d_packed(x, wp, out_channels=O, <conv2d's attributes>): the
// convolution with its constant weight packed at compile time
// (PackConv2dWeights) into the wide schedule's blocks
// [groups * ceil(O / groups / BO), Cg, KH, KW, BO].
constexpr char kConv2dPacked[] = "relax.nn.conv2d_packed";

absl::StatusOr<StructInfo> InferConv2dPacked(const CallNode& call) {
  if (absl::Status s = nn_internal::CheckArity(call, 2, kConv2dPacked); !s.ok()) return s;
  absl::StatusOr<const TensorStructInfoNode*> wp = nn_internal::TensorArg(call, 1, kConv2dPacked);
  if (!wp.ok()) return wp.status();
  const int64_t o = GetIntAttr(call.attrs, "out_channels", -1);
  const int64_t g = GetIntAttr(call.attrs, "groups", 1);
  const auto& ws = (*wp)->shape;
  // The kernel reads the blocks by these extents: they must be exactly
  // PackConv2dWeights' for out_channels and groups.
  bool packed = o >= 1 && g >= 1 && o % g == 0 && ws.has_value() && ws->size() == 5;
  for (size_t i = 0; packed && i < 5; ++i) packed = (*ws)[i].as_int() != nullptr;
  if (packed) {
    const int64_t og = o / g, bo = WideBlock(og);
    packed = *(*ws)[4].as_int() == bo && *(*ws)[0].as_int() == g * ((og + bo - 1) / bo);
  }
  if (!packed) {
    return absl::InvalidArgumentError(absl::StrCat(
        kConv2dPacked, ": needs out_channels and a weight packed by PackConv2dWeights for ", o,
        " output channels in ", g, " groups, got ", ws.has_value() ? ShapeString(*ws) : "?"));
  }
  StructInfo w = TensorSInfo({PrimExpr(o), (*ws)[1], (*ws)[2], (*ws)[3]}, (*wp)->dtype);
  return InferConv2dOf(call, nn_internal::TensorArg(call, 0, kConv2dPacked),
                       w.as<TensorStructInfoNode>());
}

// The rows schedule: the register tile is kRowsChannels output channels x
// `vw` output columns of one output row, vectorized over the columns. Each
// reduction step (input channel, kh, kw) loads one contiguous input vector,
// shared by the tile's channels, and multiplies it by one weight per
// channel (a broadcast scalar read straight from the OIHW weight, so nothing
// is packed). The stores are whole output rows, so the epilogue runs on
// contiguous vectors. Needs a column stride of 1 or 2 (2 through the strip)
// and a constant output width;
// the last column tile of a row is shifted left to end at the row's end
// (recomputing a few columns) rather than masked.
struct RowsTile {
  int64_t vw = 0;  // output columns per tile (the vector length)
  int64_t ob = 0;  // output channels per tile
};

// The tile for an output row of `ow` columns and `og` output channels per
// group: vw up to kRowsMaxWidth (all of a row of up to kRowsLanes, else a
// power of two), and as many channels
// as keep the accumulators within kRowsAccVectors vectors of kRowsLanes,
// preferring a count that divides `og` so no channel tile is partial.
RowsTile ChooseRowsTile(int64_t ow, int64_t og) {
  RowsTile t;
  // A row of up to one vector is one tile; longer rows take tiles of a power
  // of two. A vector of another length past one register (30 floats) is
  // split by LLVM into pieces it shuffles through the stack, a tenth of the
  // speed.
  t.vw = std::min(ow, kRowsMaxWidth);
  if (t.vw > kRowsLanes) {
    while ((t.vw & (t.vw - 1)) != 0) t.vw &= t.vw - 1;
  }
  const int64_t vectors_per_row = (t.vw + kRowsLanes - 1) / kRowsLanes;
  const int64_t max_ob = std::max<int64_t>(1, std::min(og, kRowsAccVectors / vectors_per_row));
  t.ob = max_ob;
  for (int64_t cand = max_ob; cand >= (max_ob + 1) / 2; --cand) {
    if (og % cand == 0) {
      t.ob = cand;
      break;
    }
  }
  return t;
}

// Whether the rows schedule suits the convolution: a column stride of 1 or
// 2 (2 through a strip whose columns are split by parity, see
// ScheduleConv2dRows; rows of at most kRowsMaxWidth there) and constant sizes (it tiles rows with
// constant-length vectors), rows of at least half a vector, and either few output channels (the
// wide schedule's channel block would be mostly empty) or short rows (there the wide schedule's
// column tiles are short and its stores scatter across channels).
bool UseRowsSchedule(const int64_t* ow, const int64_t* og, int64_t stride_w) {
  if (ow == nullptr || og == nullptr || (stride_w != 1 && stride_w != 2)) return false;
  if (*ow < kRowsLanes / 2) return false;
  // A stride-2 row longer than one tile costs more in its strip (copied and
  // split per output row) than the narrow schedule's strided reads (a 3x3
  // depthwise convolution 112 -> 56 wide: 2.5x slower).
  if (stride_w == 2 && *ow > kRowsMaxWidth) return false;
  return *og < kBlock || *ow <= kRowsMaxWidth;
}

// The input rows one task of the rows schedule reads (its input channels x
// KH rows x the padded width), copied zero-padded into a kLocal strip so the
// reduction has no bounds checks and no separate padding pass over the
// whole input is needed. Null when the strip has no constant size or would
// not fit the stack budget.
std::optional<std::vector<int64_t>> RowsStripShape(const PrimExpr& cg, const PrimExpr& kh,
                                                   const PrimExpr& wp) {
  const int64_t *c = cg.as_int(), *h = kh.as_int(), *w = wp.as_int();
  if (c == nullptr || h == nullptr || w == nullptr) return std::nullopt;
  if (*c * *h * *w > kRowsMaxStripFloats) return std::nullopt;
  return std::vector<int64_t>{*c, *h, *w};
}

// `X` is the input as given (strip == true, or no padding and the
// accumulation type) or the zero-padded copy (strip == false); in both
// cases the reduction reads columns in padded coordinates.
Stmt ScheduleConv2dRows(const Buffer& X, const Buffer& W, const Buffer& Y, DataType acc_t,
                        const ConvParams& p, const RowsTile& tile, bool strip,
                        const Epilogue& epilogue) {
  const PrimExpr N = Y->shape[0], O = W->shape[0], Cg = W->shape[1], KH = W->shape[2],
                 KW = W->shape[3];
  const PrimExpr H = X->shape[2], Wd = X->shape[3];
  const PrimExpr OH = Y->shape[2], OW = Y->shape[3];
  const PrimExpr G(p.groups);
  const PrimExpr Og = FloorDiv(O, G);
  const int64_t sh = p.strides[0], sw = p.strides[1], dh = p.dilation[0], dw = p.dilation[1];
  const int64_t pt = strip ? p.padding[0] : 0, pl = strip ? p.padding[1] : 0;
  const int64_t pr = strip ? p.padding[3] : 0;
  const PrimExpr VW(tile.vw), OB(tile.ob);
  const PrimExpr obg = CeilDiv(Og, tile.ob);
  const int64_t* kw_const = KW.as_int();
  const ForKind kw_kind =
      kw_const != nullptr && *kw_const <= 7 ? ForKind::kUnrolled : ForKind::kSerial;
  return Loop("cb", N * G * obg * OH, ForKind::kParallel, [&](const PrimExpr& t) {
    std::vector<PrimExpr> i = Unflatten(t, {N, G * obg, OH});
    PrimExpr n = i[0], gob = i[1], oh = i[2];
    PrimExpr g = FloorDiv(gob, obg), ob = FloorMod(gob, obg);
    // The reduction's input: tap (c, kh, kw) of output column ow of this task.
    std::function<PrimExpr(const PrimExpr&, const PrimExpr&, const PrimExpr&, const PrimExpr&)> in;
    Stmt fill;
    Buffer rows;
    // Input row (c, kh) of this task zero-padded to `width` columns (pl
    // zeros, the row, zeros to `width`; all zeros where the row is outside
    // the input), as put(column, value).
    const PrimExpr Wp = Wd + PrimExpr(pl + pr);
    auto padded_row = [&](const PrimExpr& c, const PrimExpr& kh, const PrimExpr& width,
                          const std::function<Stmt(const PrimExpr&, const PrimExpr&)>& put) {
      PrimExpr ih = oh * PrimExpr(sh) + kh * PrimExpr(dh) - PrimExpr(pt);
      PrimExpr valid = And(GE(ih, 0), LT(ih, H));
      PrimExpr ihc = Max(Min(ih, H - 1), 0);
      std::vector<Stmt> parts;
      if (pl > 0) {
        parts.push_back(Loop("fl", PrimExpr(pl), ForKind::kVectorized,
                             [&](const PrimExpr& w) { return put(w, MakeConst(acc_t, 0)); }));
      }
      parts.push_back(Loop("fw", Wd, ForKind::kVectorized, [&](const PrimExpr& w) {
        PrimExpr v = Cast(acc_t, Load(X, {n, g * Cg + c, ihc, w}));
        return put(w + PrimExpr(pl), Select(valid, v, MakeConst(acc_t, 0)));
      }));
      const PrimExpr right = width - Wd - PrimExpr(pl);
      if (!IsConst(right, 0)) {
        parts.push_back(Loop("fr", right, ForKind::kVectorized, [&](const PrimExpr& w) {
          return put(w + Wd + PrimExpr(pl), MakeConst(acc_t, 0));
        }));
      }
      return Seq(std::move(parts));
    };
    if (strip && sw == 2) {
      // Column 2 * ow + kw * dw of the padded rows is element
      // ow + (kw * dw) / 2 of phase (kw * dw) % 2: the strip keeps the even
      // and the odd columns apart, so a tile's taps are contiguous vectors.
      // Each input row is first copied whole (contiguous, no per-column
      // bounds) into a padded line (one more zero where the padded width is
      // odd), then split by parity.
      const PrimExpr half = FloorDiv(Wp + 1, PrimExpr(2));
      rows = MakeBuffer("conv_rows", acc_t, {Cg, KH, PrimExpr(2), half}, BufferNode::Scope::kLocal);
      Buffer line = MakeBuffer("conv_line", acc_t, {half * PrimExpr(2)}, BufferNode::Scope::kLocal);
      fill = Loop("fc", Cg, ForKind::kSerial, [&](const PrimExpr& c) {
        return Loop("fh", KH, ForKind::kSerial, [&](const PrimExpr& kh) {
          Stmt copy = padded_row(
              c, kh, half * PrimExpr(2),
              [&](const PrimExpr& col, const PrimExpr& v) { return Store(line, {col}, v); });
          Stmt split = Loop("fp", PrimExpr(2), ForKind::kUnrolled, [&](const PrimExpr& ph) {
            return Loop("fs", half, ForKind::kVectorized, [&](const PrimExpr& j) {
              return Store(rows, {c, kh, ph, j}, Load(line, {j * PrimExpr(2) + ph}));
            });
          });
          return Seq({copy, split});
        });
      });
      fill = Allocate(line, fill);
      in = [&](const PrimExpr& c, const PrimExpr& kh, const PrimExpr& ow, const PrimExpr& kw) {
        PrimExpr tap = kw * PrimExpr(dw);
        return Load(rows, {c, kh, FloorMod(tap, PrimExpr(2)), ow + FloorDiv(tap, PrimExpr(2))});
      };
    } else if (strip) {
      rows = MakeBuffer("conv_rows", acc_t, {Cg, KH, Wp}, BufferNode::Scope::kLocal);
      fill = Loop("fc", Cg, ForKind::kSerial, [&](const PrimExpr& c) {
        return Loop("fh", KH, ForKind::kSerial, [&](const PrimExpr& kh) {
          return padded_row(c, kh, Wp, [&](const PrimExpr& col, const PrimExpr& v) {
            return Store(rows, {c, kh, col}, v);
          });
        });
      });
      in = [&](const PrimExpr& c, const PrimExpr& kh, const PrimExpr& ow, const PrimExpr& kw) {
        return Load(rows, {c, kh, ow + kw * PrimExpr(dw)});
      };
    } else {
      in = [&](const PrimExpr& c, const PrimExpr& kh, const PrimExpr& ow, const PrimExpr& kw) {
        return Cast(acc_t, Load(X, {n, g * Cg + c, oh * PrimExpr(sh) + kh * PrimExpr(dh),
                                    ow + kw * PrimExpr(dw)}));
      };
    }
    Stmt tiles = Loop("wo", CeilDiv(OW, tile.vw), ForKind::kSerial, [&](const PrimExpr& wo) {
      PrimExpr ow0 = Min(wo * VW, OW - VW);
      Buffer acc = MakeBuffer("conv_acc", acc_t, {OB, VW}, BufferNode::Scope::kLocal);
      Buffer xv = MakeBuffer("conv_in", acc_t, {VW}, BufferNode::Scope::kLocal);
      Stmt zero = Loop("zo", OB, ForKind::kUnrolled, [&](const PrimExpr& o) {
        return Loop("zw", VW, ForKind::kVectorized, [&](const PrimExpr& w) {
          return Store(acc, {o, w}, MakeConst(acc_t, 0));
        });
      });
      Stmt red = Loop("rc", Cg, ForKind::kSerial, [&](const PrimExpr& c) {
        return Loop("rh", KH, ForKind::kSerial, [&](const PrimExpr& kh) {
          return Loop("rw", KW, kw_kind, [&](const PrimExpr& kw) {
            Stmt load = Loop("lw", VW, ForKind::kVectorized, [&](const PrimExpr& w) {
              return Store(xv, {w}, in(c, kh, ow0 + w, kw));
            });
            Stmt fma = Loop("o", OB, ForKind::kUnrolled, [&](const PrimExpr& o) {
              PrimExpr oc = g * Og + Min(ob * OB + o, Og - 1);
              PrimExpr wv = Cast(acc_t, Load(W, {oc, c, kh, kw}));
              return Loop("w", VW, ForKind::kVectorized, [&](const PrimExpr& w) {
                return Store(acc, {o, w}, Load(acc, {o, w}) + Load(xv, {w}) * wv);
              });
            });
            return Seq({load, fma});
          });
        });
      });
      Stmt store = Loop("so", Min(OB, Og - ob * OB), ForKind::kSerial, [&](const PrimExpr& o) {
        return Loop("sw", VW, ForKind::kVectorized, [&](const PrimExpr& w) {
          std::vector<PrimExpr> yi = {n, g * Og + ob * OB + o, oh, ow0 + w};
          PrimExpr v = Cast(Y->dtype, Load(acc, {o, w}));
          return Store(Y, yi, epilogue ? epilogue(v, yi) : v);
        });
      });
      return Allocate(acc, Allocate(xv, Seq({zero, red, store})));
    });
    if (!strip) return tiles;
    return Allocate(rows, Seq({fill, tiles}));
  });
}

// The depthwise schedule's band: output rows per task, so that the task's
// input rows and output rows, channel-last, fit kDwMaxStripFloats (bands of
// even height); nullopt when the convolution is not depthwise with constant
// sizes, not even one output row's strips fit, or its rows are long enough
// for the rows and narrow schedules to do better. Fewer than kDwLanes
// channels copy element by element (DwTransposeCopy's tiles need whole
// blocks): there that is past kRowsMaxWidth outputs (measured at one
// thread on an AMD EPYC, old -> this schedule with scalar copies, in us: 16
// channels 112x112 3x3 120 -> 287..400, 72 56x56 3x3 164 -> 401). With
// the copies in registers, column stride 1 past kDwMaxUnitStrideWidth
// (rows schedule -> this one: 16 channels 160x240 341 -> 447, 48 80x120
// 219 -> 266; but 72 56x56 198 -> 116, 96 40x60 169 -> 127) and stride 2
// never (64 channels 112x112 -> 56x56 420 -> 180, 24 160x240 -> 80x120
// 588 -> 418).
struct DwBand {
  int64_t rows = 0;        // output rows per band
  int64_t strip_rows = 0;  // input rows a band reads
  int64_t strip_cols = 0;  // input columns (padded) a row of outputs reads
};
std::optional<DwBand> DepthwiseBand(const ConvParams& p, const Buffer& W, const Buffer& Y) {
  const int64_t *cg = W->shape[1].as_int(), *kh = W->shape[2].as_int(), *kw = W->shape[3].as_int(),
                *o = Y->shape[1].as_int(), *oh = Y->shape[2].as_int(), *ow = Y->shape[3].as_int();
  if (!cg || !kh || !kw || !o || !oh || !ow || *cg != 1 || p.groups != *o) return std::nullopt;
  const int64_t longest = *o < kDwLanes       ? kRowsMaxWidth
                          : p.strides[1] == 1 ? kDwMaxUnitStrideWidth
                                              : std::numeric_limits<int64_t>::max();
  if (*ow > longest) return std::nullopt;
  DwBand b;
  b.strip_cols = (*ow - 1) * p.strides[1] + (*kw - 1) * p.dilation[1] + 1;
  auto strip_rows = [&](int64_t rows) {
    return (rows - 1) * p.strides[0] + (*kh - 1) * p.dilation[0] + 1;
  };
  int64_t most = 0;
  for (int64_t rows = *oh; rows >= 1 && most == 0; --rows) {
    if ((strip_rows(rows) * b.strip_cols + rows * *ow) * kDwLanes <= kDwMaxStripFloats) {
      most = rows;
    }
  }
  if (most == 0) return std::nullopt;
  const int64_t bands = (*oh + most - 1) / most;
  b.rows = (*oh + bands - 1) / bands;
  b.strip_rows = strip_rows(b.rows);
  return b;
}

// Copies `count` pixels between a channel-first tensor and a channel-last
// strip, kDwLanes channels at a time: `copy(pixel, c)` is the store of one
// element. From kDwLanes pixels on, in tiles of kDwLanes pixels that are
// transpose tiles (two nested vector loops, emitted as a transpose in
// registers: vectorize.h), the last tile overlapping the one before it
// (copying some pixels twice); fewer pixels element by element, a path
// left out where the caller knows `count` is never below kDwLanes
// (`always_tiles`: it costs each kernel compile time and never runs).
Stmt DwTransposeCopy(const std::string& name, const PrimExpr& count, bool always_tiles,
                     const std::function<Stmt(const PrimExpr&, const PrimExpr&)>& copy) {
  const PrimExpr L(kDwLanes);
  Stmt tiles = Loop(name + "t", CeilDiv(count, kDwLanes), ForKind::kSerial, [&](const PrimExpr& t) {
    PrimExpr first = Min(t * L, count - L);
    return Loop(name + "p", L, ForKind::kVectorized, [&](const PrimExpr& p) {
      return Loop(name + "c", L, ForKind::kVectorized,
                  [&](const PrimExpr& c) { return copy(first + p, c); });
    });
  });
  if (always_tiles) return tiles;
  Stmt few = Loop(name + "c", L, ForKind::kSerial, [&](const PrimExpr& c) {
    return Loop(name + "q", count, ForKind::kSerial, [&](const PrimExpr& q) { return copy(q, c); });
  });
  return IfThenElse(GE(count, L), tiles, few);
}

// Depthwise (one input and one output channel per group), as MLAS and
// oneDNN do it: channels in blocks of kDwLanes, laid out channel-last in a
// task's stack strip so that every tap is one vector FMA across the block.
// The parallel loop runs over image x channel block x band of output rows;
// a task zeroes its strip (the padding), copies its band's input rows into
// it (channel c of column x at strip[row][x][c]) and the block's weights
// likewise, then walks its rows in tiles of `wt` output columns,
// accumulating a wt x kDwLanes tile over the window, and stores the tile
// (the epilogue applied) into a channel-last output strip, which goes back
// to Y's rows at the end. Both copies are transposes in registers a
// kDwLanes x kDwLanes tile at a time (DwTransposeCopy), since each image
// row of a band is whole in the strip; they were scalar, and 60-90% of the
// time of MobileNetV3's depthwise layers. The last block overlaps the one
// before it where the channels do not divide into blocks. Fewer than
// kDwLanes channels in all are one block that copies element by element
// and stores its tiles to Y directly, channel by channel; its lanes past
// the last channel read the last (clamped) and are not stored.
Stmt ScheduleConv2dDepthwise(const Buffer& X, const Buffer& W, const Buffer& Y, DataType acc_t,
                             const ConvParams& p, const DwBand& band, const Epilogue& epilogue) {
  const PrimExpr N = Y->shape[0], C = Y->shape[1], H = X->shape[2], Wd = X->shape[3];
  const PrimExpr OH = Y->shape[2], OW = Y->shape[3], KH = W->shape[2], KW = W->shape[3];
  const int64_t sh = p.strides[0], sw = p.strides[1], dh = p.dilation[0], dw = p.dilation[1];
  const int64_t pt = p.padding[0], pl = p.padding[1];
  const int64_t ow = *OW.as_int(), kw_const = *KW.as_int();
  // The tile width (3..6) that wastes the fewest columns, larger on ties:
  // 6 x 16 accumulators are 12 AVX2 registers, 6 AVX-512 ones.
  int64_t wt = std::min<int64_t>(6, ow), best_waste = -1;
  for (int64_t cand = std::min<int64_t>(6, ow); cand >= std::min<int64_t>(3, ow); --cand) {
    const int64_t waste = (cand - ow % cand) % cand;
    if (best_waste < 0 || waste < best_waste) best_waste = waste, wt = cand;
  }
  const PrimExpr L(kDwLanes), WT(wt), BH(band.rows), SR(band.strip_rows), SC(band.strip_cols);
  const PrimExpr blocks = CeilDiv(C, kDwLanes), bands = CeilDiv(OH, band.rows);
  // The strip's columns that hold input: from pl, Wd of them (fewer where
  // the outputs do not reach the right edge).
  const PrimExpr cols = Min(Wd, SC - PrimExpr(pl));
  // Whole rows (cols == Wd) are contiguous pixels for the transposing fill.
  const bool whole_rows = ProveEqual(cols, Wd);
  // With at least kDwLanes channels every block is full, the last one
  // overlapping the one before it (both store the same values there).
  const bool blocked = *C.as_int() >= kDwLanes;
  // The fewest pixels any band's fill and write copy, where the shapes are
  // constants (0: not known): from kDwLanes on, both copy in tiles only.
  int64_t fewest_filled = 0, fewest_written = 0;
  if (const int64_t* h = H.as_int(), *wd = Wd.as_int(), *oh = OH.as_int(); h && wd && oh) {
    fewest_filled = fewest_written = std::numeric_limits<int64_t>::max();
    for (int64_t b = 0; b * band.rows < *oh; ++b) {
      const int64_t row0 = b * band.rows * sh - pt;
      const int64_t rows = std::min(band.strip_rows, *h - row0) - std::max<int64_t>(0, -row0);
      fewest_filled = std::min(fewest_filled, std::max<int64_t>(rows, 0) * *wd);
      fewest_written = std::min(fewest_written, std::min(band.rows, *oh - b * band.rows) * ow);
    }
  }
  const ForKind kw_kind = kw_const <= 7 ? ForKind::kUnrolled : ForKind::kSerial;
  return Loop("db", N * blocks * bands, ForKind::kParallel, [&](const PrimExpr& t) {
    std::vector<PrimExpr> i = Unflatten(t, {N, blocks, bands});
    PrimExpr n = i[0], cb = i[1], b = i[2];
    const PrimExpr c0 = blocked ? Min(cb * L, C - L) : cb * L;  // the block's first channel
    Buffer strip = MakeBuffer("dw_strip", acc_t, {SR, SC, L}, BufferNode::Scope::kLocal);
    Buffer wts = MakeBuffer("dw_weights", acc_t, {KH, KW, L}, BufferNode::Scope::kLocal);
    Buffer out = MakeBuffer("dw_out", Y->dtype, {BH, OW, L}, BufferNode::Scope::kLocal);
    Stmt zero = Loop("zs", SR * SC, ForKind::kSerial, [&](const PrimExpr& rx) {
      return Loop("zc", L, ForKind::kVectorized, [&](const PrimExpr& c) {
        return Store(strip, {FloorDiv(rx, SC), FloorMod(rx, SC), c}, MakeConst(acc_t, 0));
      });
    });
    // Input row row0 + r lands in strip row r; rows outside the input stay 0.
    PrimExpr row0 = b * BH * PrimExpr(sh) - PrimExpr(pt);
    PrimExpr r_lo = Max(PrimExpr(0), PrimExpr(0) - row0);
    PrimExpr r_hi = Min(SR, H - row0);
    Stmt weights = Loop("fc", L, ForKind::kSerial, [&](const PrimExpr& c) {
      PrimExpr ch = Min(c0 + c, C - 1);
      return Loop("fk", KH * KW, ForKind::kSerial, [&](const PrimExpr& k) {
        PrimExpr kh = FloorDiv(k, KW), kw = FloorMod(k, KW);
        return Store(wts, {kh, kw, c}, Cast(acc_t, Load(W, {ch, PrimExpr(0), kh, kw})));
      });
    });
    Stmt slow_fill = Loop("fc", L, ForKind::kSerial, [&](const PrimExpr& c) {
      PrimExpr ch = Min(c0 + c, C - 1);
      return Loop("fr", Max(r_hi - r_lo, PrimExpr(0)), ForKind::kSerial, [&](const PrimExpr& rr) {
        PrimExpr r = r_lo + rr;
        return Loop("fx", cols, ForKind::kSerial, [&](const PrimExpr& x) {
          return Store(strip, {r, x + PrimExpr(pl), c}, Cast(acc_t, Load(X, {n, ch, row0 + r, x})));
        });
      });
    });
    Stmt fill = slow_fill;
    if (whole_rows) {
      Stmt fast_fill =
          DwTransposeCopy("f", Max(r_hi - r_lo, PrimExpr(0)) * Wd, fewest_filled >= kDwLanes,
                          [&](const PrimExpr& px, const PrimExpr& c) {
                            PrimExpr r = r_lo + FloorDiv(px, Wd), x = FloorMod(px, Wd);
                            return Store(strip, {r, x + PrimExpr(pl), c},
                                         Cast(acc_t, Load(X, {n, c0 + c, row0 + r, x})));
                          });
      if (blocked) fill = fast_fill;
    }
    Stmt compute = Loop("r", Min(BH, OH - b * BH), ForKind::kSerial, [&](const PrimExpr& r) {
      PrimExpr oh = b * BH + r;
      return Loop("wo", CeilDiv(OW, wt), ForKind::kSerial, [&](const PrimExpr& wo) {
        PrimExpr ow0 = Min(wo * WT, OW - WT);
        Buffer acc = MakeBuffer("dw_acc", acc_t, {WT, L}, BufferNode::Scope::kLocal);
        Stmt clear = Loop("zw", WT, ForKind::kUnrolled, [&](const PrimExpr& w) {
          return Loop("zl", L, ForKind::kVectorized, [&](const PrimExpr& c) {
            return Store(acc, {w, c}, MakeConst(acc_t, 0));
          });
        });
        Stmt red = Loop("rh", KH, ForKind::kSerial, [&](const PrimExpr& kh) {
          return Loop("rw", KW, kw_kind, [&](const PrimExpr& kw) {
            return Loop("w", WT, ForKind::kUnrolled, [&](const PrimExpr& w) {
              PrimExpr row = r * PrimExpr(sh) + kh * PrimExpr(dh);
              PrimExpr col = (ow0 + w) * PrimExpr(sw) + kw * PrimExpr(dw);
              return Loop("c", L, ForKind::kVectorized, [&](const PrimExpr& c) {
                return Store(
                    acc, {w, c},
                    Load(acc, {w, c}) + Load(strip, {row, col, c}) * Load(wts, {kh, kw, c}));
              });
            });
          });
        });
        auto result = [&](const PrimExpr& c, const PrimExpr& w) {
          std::vector<PrimExpr> yi = {n, c0 + c, oh, ow0 + w};
          PrimExpr v = Cast(Y->dtype, Load(acc, {w, c}));
          return epilogue ? epilogue(v, yi) : v;
        };
        Stmt to_out = Loop("ow", WT, ForKind::kUnrolled, [&](const PrimExpr& w) {
          return Loop("oc", L, ForKind::kVectorized, [&](const PrimExpr& c) {
            return Store(out, {r, ow0 + w, c}, result(c, w));
          });
        });
        Stmt to_y = Loop("sc", C, ForKind::kSerial, [&](const PrimExpr& c) {
          return Loop("sw", WT, ForKind::kUnrolled, [&](const PrimExpr& w) {
            return Store(Y, {n, c, oh, ow0 + w}, result(c, w));
          });
        });
        return Allocate(acc, Seq({clear, red, blocked ? to_out : to_y}));
      });
    });
    // The band's output rows, whole, from the output strip to Y.
    PrimExpr oh0 = b * BH;
    Stmt write = DwTransposeCopy("o", Min(BH, OH - oh0) * OW, fewest_written >= kDwLanes,
                                 [&](const PrimExpr& px, const PrimExpr& c) {
                                   PrimExpr r = FloorDiv(px, OW), x = FloorMod(px, OW);
                                   return Store(Y, {n, c0 + c, oh0 + r, x}, Load(out, {r, x, c}));
                                 });
    if (!blocked) return Allocate(strip, Allocate(wts, Seq({zero, weights, fill, compute})));
    return Allocate(strip,
                    Allocate(wts, Allocate(out, Seq({zero, weights, fill, compute, write}))));
  });
}

// Whether the convolution is a matrix product the CPU GEMM schedule runs
// (cpu_gemm.h): a 1x1 kernel, no padding, one group (any strides: a
// strided one's pixels are packed into the GEMM's panels), and at
// least kGemmMinPixels output pixels per image (fewer make it a
// matrix-vector product, where the packed schedules below do better) in
// rows of at least half a vector (a 7x7 map's 49 pixels fill 32-column
// panels a third empty; the wide schedule vectorizes over output channels
// instead: 15-35% faster on MobileNetV3's 7x7 layers).
bool IsPointwiseGemm(const std::vector<PrimExpr>& ws, const std::vector<PrimExpr>& ys,
                     const ConvParams& p) {
  if (p.groups != 1) return false;
  for (int64_t pad : p.padding) {
    if (pad != 0) return false;
  }
  if (!IsConst(ws[2], 1) || !IsConst(ws[3], 1)) return false;
  const int64_t *oh = ys[2].as_int(), *ow = ys[3].as_int();
  if (ow != nullptr && *ow < kRowsLanes / 2) return false;
  return oh == nullptr || ow == nullptr || *oh * *ow >= kGemmMinPixels;
}

// Per image, Y[o][pixel] = sum_c W[o][c] * X[c][pixel]: with unit strides
// the pixels of an image are contiguous in X and Y, so B (the image) is read
// in place or packed like a matrix's; a strided convolution's pixels (every
// other column of every other row) are gathered into the packed panels, one
// pass over the pixels it reads. The epilogue runs at the product's store.
// ResNet-50's stride-2 projections (256 -> 512 on 56 -> 28 pixels) ran at
// 60-85 GFLOP/s on the wide schedule (an Intel Xeon, Emerald Rapids).
Stmt ScheduleConv2dAsGemm(const Buffer& X, const Buffer& W, const Buffer& Y, DataType acc_t,
                          const ConvParams& p, const Epilogue& epilogue,
                          const KernelTarget& target) {
  const PrimExpr OW = Y->shape[3];
  const PrimExpr SH(p.strides[0]), SW(p.strides[1]);
  const bool unit = p.strides[0] == 1 && p.strides[1] == 1;
  CpuGemm g;
  g.cache_budget_bytes = CpuGemmCacheBudget(target);
  g.batches = g.b_batches = Y->shape[0];
  g.m = W->shape[0];
  g.n = Y->shape[2] * OW;
  g.k = W->shape[1];
  g.acc_t = acc_t;
  g.b_contiguous = unit;
  g.b_of = [](const PrimExpr& b) { return b; };
  g.a = [&](const PrimExpr&, const PrimExpr& m, const PrimExpr& k) {
    return Cast(acc_t, Load(W, {m, k, PrimExpr(0), PrimExpr(0)}));
  };
  g.b = [&](const PrimExpr& bb, const PrimExpr& k, const PrimExpr& n) {
    PrimExpr ih = FloorDiv(n, OW), iw = FloorMod(n, OW);
    if (!unit) ih = ih * SH, iw = iw * SW;
    return Cast(acc_t, Load(X, {bb, k, ih, iw}));
  };
  g.store = [&](const PrimExpr& b, const PrimExpr& m, const PrimExpr& n, const PrimExpr& v) {
    std::vector<PrimExpr> yi = {b, m, FloorDiv(n, OW), FloorMod(n, OW)};
    PrimExpr cv = Cast(Y->dtype, v);
    return Store(Y, yi, epilogue ? epilogue(cv, yi) : cv);
  };
  return CpuGemmSchedule(g);
}

// `lo <= e < hi` with only the bounds that can fail (the padding on that side).
PrimExpr TapInside(const PrimExpr& e, bool check_lo, bool check_hi, const PrimExpr& hi) {
  PrimExpr cond;
  if (check_lo) cond = GE(e, 0);
  if (check_hi) cond = cond.defined() ? And(cond, LT(e, hi)) : LT(e, hi);
  return cond;
}

// The GPU schedule (see the file comment).
Stmt ScheduleConv2dGpu(const Buffer& X, const Buffer& W, const Buffer& Y, DataType acc_t,
                       const ConvParams& p, const Epilogue& epilogue, int gpu_arch) {
  const PrimExpr H = X->shape[2], Wd = X->shape[3];
  const PrimExpr O = W->shape[0], Cg = W->shape[1], KH = W->shape[2], KW = W->shape[3];
  const PrimExpr Og = FloorDiv(O, PrimExpr(p.groups));
  const int64_t sh = p.strides[0], sw = p.strides[1];
  const int64_t dh = p.dilation[0], dw = p.dilation[1];
  const int64_t pt = p.padding[0], pl = p.padding[1], pb = p.padding[2], pr = p.padding[3];
  const PrimExpr OH = Y->shape[2], OW = Y->shape[3];
  if (WorthBlockGemm(Og, OH * OW) || (WorthSkinnyGemm(OH * OW) && !WorthSkinnyGemm(Og))) {
    const PrimExpr G(p.groups);
    BlockGemm g;
    g.batches = X->shape[0] * G;
    g.m = Og;
    g.n = OH * OW;
    g.k = Cg * KH * KW;
    g.acc_t = acc_t;
    g.operand_t = X->dtype == W->dtype ? X->dtype : acc_t;
    g.gpu_arch = gpu_arch;
    const DataType op_t = g.operand_t;
    g.a = [&](const PrimExpr& b, const PrimExpr& m, const PrimExpr& k) {
      std::vector<PrimExpr> tap = Unflatten(k, {Cg, KH, KW});
      return Cast(op_t, Load(W, {FloorMod(b, G) * Og + m, tap[0], tap[1], tap[2]}));
    };
    g.b = [&](const PrimExpr& b, const PrimExpr& k, const PrimExpr& n) {
      std::vector<PrimExpr> tap = Unflatten(k, {Cg, KH, KW});
      std::vector<PrimExpr> pixel = Unflatten(n, {OH, OW});
      PrimExpr ih = pixel[0] * PrimExpr(sh) + tap[1] * PrimExpr(dh) - PrimExpr(pt);
      PrimExpr iw = pixel[1] * PrimExpr(sw) + tap[2] * PrimExpr(dw) - PrimExpr(pl);
      PrimExpr in_h = TapInside(ih, pt > 0, pb > 0, H), in_w = TapInside(iw, pl > 0, pr > 0, Wd);
      PrimExpr inside = in_h.defined() && in_w.defined() ? And(in_h, in_w)
                        : in_h.defined()                 ? in_h
                                                         : in_w;
      // Clamped, so a padding tap reads a real element (and is masked).
      PrimExpr v = Cast(op_t, Load(X, {FloorDiv(b, G), FloorMod(b, G) * Cg + tap[0],
                                       Max(Min(ih, H - 1), 0), Max(Min(iw, Wd - 1), 0)}));
      return inside.defined() ? Select(inside, v, MakeConst(op_t, 0)) : v;
    };
    g.store = [&](const PrimExpr& b, const PrimExpr& m, const PrimExpr& n, const PrimExpr& v) {
      std::vector<PrimExpr> pixel = Unflatten(n, {OH, OW});
      std::vector<PrimExpr> yi = {FloorDiv(b, G), FloorMod(b, G) * Og + m, pixel[0], pixel[1]};
      PrimExpr yv = Cast(Y->dtype, v);
      return Store(Y, yi, epilogue ? epilogue(yv, yi) : yv);
    };
    return BlockGemmSchedule(g);
  }
  return MakeFlatParallelLoop(Y->shape, [&](const std::vector<PrimExpr>& yi) {
    const PrimExpr n = yi[0], oc = yi[1], oh = yi[2], ow = yi[3];
    const PrimExpr g = FloorDiv(oc, Og);
    Buffer acc = MakeBuffer("conv_acc", acc_t, {PrimExpr(1)}, BufferNode::Scope::kLocal);
    Stmt red = Loop("rc", Cg, ForKind::kSerial, [&](const PrimExpr& c) {
      return Loop("rh", KH, ForKind::kSerial, [&](const PrimExpr& kh) {
        PrimExpr ih = oh * PrimExpr(sh) + kh * PrimExpr(dh) - PrimExpr(pt);
        Stmt row = Loop("rw", KW, ForKind::kSerial, [&](const PrimExpr& kw) {
          PrimExpr iw = ow * PrimExpr(sw) + kw * PrimExpr(dw) - PrimExpr(pl);
          PrimExpr xv = Cast(acc_t, Load(X, {n, g * Cg + c, ih, iw}));
          PrimExpr wv = Cast(acc_t, Load(W, {oc, c, kh, kw}));
          Stmt tap = Store(acc, {PrimExpr(0)}, Load(acc, {PrimExpr(0)}) + xv * wv);
          PrimExpr inside = TapInside(iw, pl > 0, pr > 0, Wd);
          return inside.defined() ? IfThenElse(inside, tap) : tap;
        });
        PrimExpr inside = TapInside(ih, pt > 0, pb > 0, H);
        return inside.defined() ? IfThenElse(inside, row) : row;
      });
    });
    PrimExpr v = Cast(Y->dtype, Load(acc, {PrimExpr(0)}));
    Stmt store = Store(Y, yi, epilogue ? epilogue(v, yi) : v);
    return Allocate(acc, Seq({Store(acc, {PrimExpr(0)}, MakeConst(acc_t, 0)), red, store}));
  });
}

absl::StatusOr<Stmt> ScheduleConv2d(const LowerContext& ctx, const std::vector<Buffer>& outputs,
                                    const Epilogue& epilogue) {
  absl::StatusOr<Buffer> x_or = nn_internal::InputBuffer(ctx, 0, kConv2d);
  if (!x_or.ok()) return x_or.status();
  absl::StatusOr<Buffer> w_or = nn_internal::InputBuffer(ctx, 1, kConv2d);
  if (!w_or.ok()) return w_or.status();
  absl::StatusOr<ConvParams> p = ParseConvAttrs(ctx.call->attrs);
  if (!p.ok()) return p.status();
  const Buffer& X = *x_or;
  const Buffer& W = *w_or;
  // conv2d_packed's weight is the wide schedule's packed blocks.
  const bool prepacked =
      ctx.call->op.as<OpNode>() != nullptr && ctx.call->op.as<OpNode>()->name == kConv2dPacked;
  if (outputs.size() != 1 || X->shape.size() != 4 || W->shape.size() != (prepacked ? 5u : 4u) ||
      outputs[0]->shape.size() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(kConv2d, ": expects 4-d data, weight and one 4-d output"));
  }
  const Buffer& Y = outputs[0];
  const DataType acc_t = nn_internal::ComputeType(Y->dtype);
  if (prepacked && ctx.target.gpu) {
    return absl::InvalidArgumentError(absl::StrCat(kConv2dPacked, " runs on the CPU only"));
  }
  if (ctx.target.gpu) return ScheduleConv2dGpu(X, W, Y, acc_t, *p, epilogue, ctx.target.gpu_arch);
  if (!prepacked && IsPointwiseGemm(W->shape, Y->shape, *p)) {
    return ScheduleConv2dAsGemm(X, W, Y, acc_t, *p, epilogue, ctx.target);
  }
  if (!prepacked) {
    if (std::optional<DwBand> band = DepthwiseBand(*p, W, Y)) {
      return ScheduleConv2dDepthwise(X, W, Y, acc_t, *p, *band, epilogue);
    }
  }
  const PrimExpr N = X->shape[0], C = X->shape[1], H = X->shape[2], Wd = X->shape[3];
  // W's dims 1..3 are Cg, KH, KW in both layouts; O is the output's.
  const PrimExpr O = Y->shape[1], Cg = W->shape[1], KH = W->shape[2], KW = W->shape[3];
  const PrimExpr OH = Y->shape[2], OW = Y->shape[3];
  const PrimExpr G(p->groups);
  const PrimExpr Og = FloorDiv(O, G);
  const int64_t sh = p->strides[0], sw = p->strides[1];
  const int64_t dh = p->dilation[0], dw = p->dilation[1];
  const int64_t pt = p->padding[0], pl = p->padding[1], pb = p->padding[2], pr = p->padding[3];

  // The zero-padded input, converted to the accumulation type (or X itself).
  const bool padded = pt || pl || pb || pr || X->dtype != acc_t;
  const PrimExpr Hp = H + PrimExpr(pt + pb), Wp = Wd + PrimExpr(pl + pr);
  Buffer Xp = padded ? MakeBuffer("conv_padded", acc_t, {N, C, Hp, Wp}) : X;
  Stmt pad;
  if (padded) {
    // Row by row: a padding row is zeros; an input row is its zero margins
    // and a contiguous copy between them, so the copy is vector loads and
    // stores. (One select per element with clamped indices became gathers:
    // 7-10% of DBNet's 192-channel 80x120 convolutions, 27% of its stem.)
    pad = Loop("ph", N * C * Hp, ForKind::kParallel, [&](const PrimExpr& t) {
      std::vector<PrimExpr> i = Unflatten(t, {N * C, Hp});
      PrimExpr n = FloorDiv(i[0], C), c = FloorMod(i[0], C);
      PrimExpr ih = i[1] - PrimExpr(pt);
      auto zeros = [&](const char* name, const PrimExpr& from, const PrimExpr& count) {
        return Loop(name, count, ForKind::kVectorized, [&](const PrimExpr& w) {
          return Store(Xp, {n, c, i[1], from + w}, MakeConst(acc_t, 0));
        });
      };
      std::vector<Stmt> row;
      if (pl > 0) row.push_back(zeros("pl", PrimExpr(0), PrimExpr(pl)));
      row.push_back(Loop("pw", Wd, ForKind::kVectorized, [&](const PrimExpr& iw) {
        return Store(Xp, {n, c, i[1], iw + PrimExpr(pl)}, Cast(acc_t, Load(X, {n, c, ih, iw})));
      }));
      if (pr > 0) row.push_back(zeros("pr", Wd + PrimExpr(pl), PrimExpr(pr)));
      if (pt == 0 && pb == 0) return Seq(row);
      return IfThenElse(And(GE(ih, 0), LT(ih, H)), Seq(row), zeros("pz", PrimExpr(0), Wp));
    });
  }
  auto input = [&](const PrimExpr& n, const PrimExpr& c, const PrimExpr& oh, const PrimExpr& kh,
                   const PrimExpr& ow, const PrimExpr& kw) {
    return Cast(acc_t, Load(Xp, {n, c, oh * PrimExpr(sh) + kh * PrimExpr(dh),
                                 ow * PrimExpr(sw) + kw * PrimExpr(dw)}));
  };

  const int64_t* og_const = Og.as_int();
  const int64_t* ow_const = OW.as_int();
  Stmt compute;
  // A column stride of 2 needs the strip (its columns split by parity);
  // where the strip would not fit, such a convolution takes the narrow or
  // wide schedule.
  const bool strip_fits = RowsStripShape(Cg, KH, sw == 2 ? Wp + PrimExpr(1) : Wp).has_value();
  if (!prepacked && UseRowsSchedule(ow_const, og_const, sw) && (sw == 1 || strip_fits)) {
    const RowsTile tile = ChooseRowsTile(*ow_const, *og_const);
    if (!padded && sw == 1) {
      return ScheduleConv2dRows(X, W, Y, acc_t, *p, tile, /*strip=*/false, epilogue);
    }
    if (strip_fits) return ScheduleConv2dRows(X, W, Y, acc_t, *p, tile, /*strip=*/true, epilogue);
    compute = ScheduleConv2dRows(Xp, W, Y, acc_t, *p, tile, /*strip=*/false, epilogue);
  } else if (prepacked || og_const == nullptr || *og_const >= kWideMinChannels) {
    // Wide: packed weights (packed here, or at compile time), wt x bo
    // register tile.
    const int64_t bo = og_const ? WideBlock(*og_const) : kBlock;
    int64_t wt = 6;
    if (const int64_t* ow = OW.as_int()) {
      // The tile width (4..8) that wastes the fewest columns, larger on ties.
      int64_t best_waste = -1;
      for (int64_t cand = 8; cand >= 4; --cand) {
        int64_t waste = (cand - *ow % cand) % cand;
        if (best_waste < 0 || waste < best_waste) best_waste = waste, wt = cand;
      }
      wt = std::min(wt, *ow);
    }
    const PrimExpr BO(bo), WT(wt);
    const PrimExpr obg = CeilDiv(Og, bo);
    Buffer Wpk = prepacked ? W : MakeBuffer("conv_packed_w", acc_t, {G * obg, Cg, KH, KW, BO});
    auto pack = [&] {
      return Loop("pg", G * obg, ForKind::kParallel, [&](const PrimExpr& gob) {
        PrimExpr g = FloorDiv(gob, obg), ob = FloorMod(gob, obg);
        return Loop("pc", Cg * KH * KW, ForKind::kSerial, [&](const PrimExpr& r) {
          std::vector<PrimExpr> i = Unflatten(r, {Cg, KH, KW});
          return Loop("po", BO, ForKind::kSerial, [&](const PrimExpr& o) {
            PrimExpr oc = ob * BO + o;
            PrimExpr v = Load(W, {g * Og + Min(oc, Og - 1), i[0], i[1], i[2]});
            return Store(Wpk, {gob, i[0], i[1], i[2], o},
                         Select(LT(oc, Og), Cast(acc_t, v), MakeConst(acc_t, 0)));
          });
        });
      });
    };
    Stmt body = Loop("cb", N * G * obg * OH, ForKind::kParallel, [&](const PrimExpr& t) {
      std::vector<PrimExpr> i = Unflatten(t, {N, G * obg, OH});
      PrimExpr n = i[0], gob = i[1], oh = i[2];
      PrimExpr g = FloorDiv(gob, obg), ob = FloorMod(gob, obg);
      return Loop("wo", CeilDiv(OW, wt), ForKind::kSerial, [&](const PrimExpr& wo) {
        Buffer acc = MakeBuffer("conv_acc", acc_t, {WT, BO}, BufferNode::Scope::kLocal);
        // Blocks of more than one vector: a vector loop per vector of lanes,
        // so each accumulator row is kRowsLanes-lane values the register
        // allocator keeps.
        const int64_t lanes = bo > kRowsLanes && bo % kRowsLanes == 0 ? kRowsLanes : bo;
        auto lane_loop = [&](const char* name, const std::function<Stmt(const PrimExpr&)>& f) {
          if (lanes == bo) return Loop(name, BO, ForKind::kVectorized, f);
          return Loop(absl::StrCat(name, "v"), bo / lanes, ForKind::kUnrolled,
                      [&](const PrimExpr& v) {
                        return Loop(name, lanes, ForKind::kVectorized,
                                    [&](const PrimExpr& l) { return f(v * PrimExpr(lanes) + l); });
                      });
        };
        Stmt zero = Loop("zw", WT, ForKind::kUnrolled, [&](const PrimExpr& w) {
          return lane_loop("zo", [&](const PrimExpr& o) {
            return Store(acc, {w, o}, MakeConst(acc_t, 0));
          });
        });
        Stmt red = Loop("rc", Cg, ForKind::kSerial, [&](const PrimExpr& c) {
          return Loop("rh", KH, ForKind::kSerial, [&](const PrimExpr& kh) {
            return Loop("rw", KW, ForKind::kSerial, [&](const PrimExpr& kw) {
              return Loop("w", WT, ForKind::kUnrolled, [&](const PrimExpr& w) {
                PrimExpr ow = Min(wo * WT + w, OW - 1);
                PrimExpr xv = input(n, g * Cg + c, oh, kh, ow, kw);
                return lane_loop("o", [&](const PrimExpr& o) {
                  return Store(
                      acc, {w, o},
                      Load(acc, {w, o}) + xv * Cast(acc_t, Load(Wpk, {gob, c, kh, kw, o})));
                });
              });
            });
          });
        });
        Stmt store = Loop("so", Min(BO, Og - ob * BO), ForKind::kSerial, [&](const PrimExpr& o) {
          return Loop("sw", Min(WT, OW - wo * WT), ForKind::kVectorized, [&](const PrimExpr& w) {
            std::vector<PrimExpr> yi = {n, g * Og + ob * BO + o, oh, wo * WT + w};
            PrimExpr v = Cast(Y->dtype, Load(acc, {w, o}));
            return Store(Y, yi, epilogue ? epilogue(v, yi) : v);
          });
        });
        return Allocate(acc, Seq({zero, red, store}));
      });
    });
    compute = prepacked ? body : Allocate(Wpk, Seq({pack(), body}));
  } else {
    // Narrow (depthwise and thin groups): vectorize over output columns.
    const PrimExpr T(kNarrowTile);
    compute = Loop("cb", N * O * OH, ForKind::kParallel, [&](const PrimExpr& t) {
      std::vector<PrimExpr> i = Unflatten(t, {N, O, OH});
      PrimExpr n = i[0], oc = i[1], oh = i[2];
      PrimExpr g = FloorDiv(oc, Og);
      return Loop("wo", CeilDiv(OW, kNarrowTile), ForKind::kSerial, [&](const PrimExpr& wo) {
        Buffer acc = MakeBuffer("conv_acc", acc_t, {T}, BufferNode::Scope::kLocal);
        PrimExpr width = Min(T, OW - wo * T);
        Stmt zero = Loop("zw", width, ForKind::kVectorized,
                         [&](const PrimExpr& w) { return Store(acc, {w}, MakeConst(acc_t, 0)); });
        Stmt red = Loop("rc", Cg, ForKind::kSerial, [&](const PrimExpr& c) {
          return Loop("rh", KH, ForKind::kSerial, [&](const PrimExpr& kh) {
            return Loop("rw", KW, ForKind::kSerial, [&](const PrimExpr& kw) {
              PrimExpr wv = Cast(acc_t, Load(W, {oc, c, kh, kw}));
              return Loop("w", width, ForKind::kVectorized, [&](const PrimExpr& w) {
                PrimExpr xv = input(n, g * Cg + c, oh, kh, wo * T + w, kw);
                return Store(acc, {w}, Load(acc, {w}) + xv * wv);
              });
            });
          });
        });
        Stmt store = Loop("sw", width, ForKind::kVectorized, [&](const PrimExpr& w) {
          std::vector<PrimExpr> yi = {n, oc, oh, wo * T + w};
          PrimExpr v = Cast(Y->dtype, Load(acc, {w}));
          return Store(Y, yi, epilogue ? epilogue(v, yi) : v);
        });
        return Allocate(acc, Seq({zero, red, store}));
      });
    });
  }
  if (!padded) return compute;
  return Allocate(Xp, Seq({pad, compute}));
}

}  // namespace

bool Conv2dPacksWeights(const CallNode& call) {
  const auto* x =
      call.args.size() == 2 ? call.args[0].struct_info().as<TensorStructInfoNode>() : nullptr;
  const auto* w = x ? call.args[1].struct_info().as<TensorStructInfoNode>() : nullptr;
  const auto* y = call.struct_info().as<TensorStructInfoNode>();
  if (x == nullptr || w == nullptr || y == nullptr || !w->shape.has_value() ||
      !y->shape.has_value() || w->shape->size() != 4 || y->shape->size() != 4) {
    return false;
  }
  absl::StatusOr<ConvParams> p = ParseConvAttrs(call.attrs);
  if (!p.ok() || x->dtype != w->dtype || GetDTypeAttr(call.attrs, "out_dtype").has_value()) {
    return false;
  }
  const std::vector<PrimExpr>& ws = *w->shape;
  for (const PrimExpr& d : ws) {
    if (d.as_int() == nullptr) return false;
  }
  if (IsPointwiseGemm(ws, *y->shape, *p)) return false;
  const int64_t og = *ws[0].as_int() / p->groups;
  // With a block of output channels to fill, a constant weight packed once
  // makes the wide schedule the faster one at any row length and stride:
  // 14 and 28 columns leave lanes of the rows schedule's vectors empty
  // (16 of 14, 32 of 28). ResNet-50 at one thread on an AMD EPYC, rows ->
  // wide, us: 256 ch 14x14 3x3 11,771 -> 10,726, 128 ch 28x28 3x3 7,121 ->
  // 6,535, 3x3 stride 2 256 ch 28 -> 14 2,842 -> 2,245, 1x1 stride 2 512 ->
  // 1024 28 -> 14 2,669 -> 2,211; the model 90.9 -> 84.0 ms. DBNet's 3x3
  // 192 -> 48 on 20x30 1,185 -> 958. The rows schedule stays for weights
  // that are not constant (the wide schedule would pack them on every call).
  if (og >= kBlock) return true;
  if (UseRowsSchedule((*y->shape)[3].as_int(), &og, p->strides[1])) return false;
  return og >= kWideMinChannels;
}

bool Conv2dIsPlainProduct(const Attrs& attrs) {
  absl::StatusOr<ConvParams> p = ParseConvAttrs(attrs);
  if (!p.ok() || p->groups != 1 || p->strides != std::vector<int64_t>{1, 1}) return false;
  if (GetDTypeAttr(attrs, "out_dtype").has_value()) return false;
  return std::all_of(p->padding.begin(), p->padding.end(), [](int64_t v) { return v == 0; });
}

absl::StatusOr<Tensor> PackConv2dWeights(const Tensor& w, int64_t groups) {
  if (w->ndim() != 4 || w->device() != Device::Cpu() || groups < 1 || w->shape()[0] % groups) {
    return absl::InvalidArgumentError("PackConv2dWeights: an OIHW weight on the CPU");
  }
  const int64_t o = w->shape()[0], cg = w->shape()[1], kh = w->shape()[2], kw = w->shape()[3];
  const int64_t og = o / groups, bo = WideBlock(og), obg = (og + bo - 1) / bo;
  const int64_t shape[] = {groups * obg, cg, kh, kw, bo};
  TETHER_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(shape, w->dtype(), Device::Cpu()));
  const size_t elem = (w->dtype().bits() + 7) / 8;
  const int64_t taps = cg * kh * kw;
  const char* src = static_cast<const char*>(w->element_data());
  char* dst = static_cast<char*>(out->element_data());
  std::memset(dst, 0, static_cast<size_t>(groups * obg * taps * bo) * elem);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t oc = 0; oc < og; ++oc) {
      const int64_t block = g * obg + oc / bo, lane = oc % bo;
      for (int64_t t = 0; t < taps; ++t) {
        std::memcpy(dst + static_cast<size_t>((block * taps + t) * bo + lane) * elem,
                    src + static_cast<size_t>((g * og + oc) * taps + t) * elem, elem);
      }
    }
  }
  return out;
}

// Registered from nn.cc with the rest of the family.
void RegisterConv2dOp() {
  OpInfo info;
  info.name = kConv2d;
  info.pattern = OpPattern::kOutEWiseFusable;
  info.num_args = 2;
  info.infer = InferConv2d;
  info.schedule = ScheduleConv2d;
  RegisterOp(info);
  info.name = kConv2dPacked;
  info.infer = InferConv2dPacked;
  RegisterOp(std::move(info));
}

}  // namespace tether::compiler
