// Operators whose output shape depends on input values, run by the VM on
// the host as packed functions (R.call_pure_packed; the compiler gives their
// results fresh symbolic dims with a match cast, so the rest of the model
// is compiled over those dims):
//
//   vm.builtin.nonzero(x) -> int64 [ndim, n]: the indices of x's nonzero
//     elements, row-major (ONNX NonZero, numpy.nonzero stacked).
//   vm.builtin.compress(x, condition, axis) -> the slices of x along `axis`
//     (an int; -1 after flattening x when ONNX gives none) where the 1-D
//     bool condition holds; a shorter condition leaves the rest out (ONNX
//     Compress).
//   vm.builtin.non_max_suppression(boxes, scores, max_output, iou_threshold,
//     score_threshold, center_point_box) -> int64 [n, 3] of (batch, class,
//     box): greedy non-maximum suppression per batch and class as ONNX
//     NonMaxSuppression defines it (boxes [batches, boxes, 4] as corners or
//     as centre and size; scores [batches, classes, boxes]; the three
//     thresholds one-element tensors, max_output 0 selecting nothing).
//   vm.builtin.unique(x, axis, sorted) -> (y, indices, inverse, counts):
//     the distinct slices of x along `axis` (an int; -1 after flattening x
//     when ONNX gives none), in ascending order when `sorted` (slices
//     compared element by element, as numpy.unique) else in the order of
//     their first occurrence; indices: each one's first occurrence;
//     inverse: per slice of x, its position in y; counts: how often each
//     occurs (ONNX Unique). Slices are compared by their bytes for order of
//     first occurrence and by value for sorting.
//   vm.builtin.det(x) -> [...]: the determinant of each square matrix of
//     x [..., M, M] (float32/float64; LU with partial pivoting in float64,
//     ONNX Det). Its shape is static: it is here as the one other operator
//     the VM runs on the host (a rare op; no kernel is worth it).
//   vm.builtin.roi_align(x [N, C, H, W], rois [R, 4], batch_indices [R],
//     out_h, out_w, spatial_scale, max_mode, half_pixel) -> [R, C, out_h,
//     out_w]: ONNX RoiAlign with sampling_ratio 0, whose sample grid is
//     ceil(roi size / bins) per roi -- a loop bound only the rois' values
//     give, which relax.image.roi_align (a fixed grid) cannot express. The
//     same sampling rules as that operator (ONNX Runtime's); float32 or
//     float64; a batch index out of range is INVALID_ARGUMENT.
//
// Inputs on another device are read through a host copy; the result goes
// back to the first input's device.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <span>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/core/registry.h"
#include "runtime/core/tensor.h"
#include "runtime/vm/local_vm.h"

namespace tether::vm {
namespace {

absl::StatusOr<Tensor> OnHost(const Tensor& t) {
  if (t->device().type == kDLCPU) return t;
  return t.CopyTo(Device::Cpu());
}

absl::StatusOr<Value> ToDeviceOf(const Tensor& like, const Tensor& out) {
  if (like->device().type == kDLCPU) return Value(out);
  TETHER_ASSIGN_OR_RETURN(Tensor moved, out.CopyTo(like->device()));
  return Value(moved);
}

// Element i of a host tensor as a double (the dtypes models use).
absl::StatusOr<double> ElementAsDouble(const Tensor& t, int64_t i, absl::string_view what) {
  const DataType dt = t->dtype();
  const char* p = static_cast<const char*>(t->element_data()) + i * dt.bytes();
  auto read = [p](auto v) {
    std::memcpy(&v, p, sizeof(v));
    return static_cast<double>(v);
  };
  if (dt.lanes() == 1) {
    if (dt == DataType::Float(32)) return read(float{});
    if (dt == DataType::Float(64)) return read(double{});
    if (dt == DataType::Int(64)) return read(int64_t{});
    if (dt == DataType::Int(32)) return read(int32_t{});
    if (dt == DataType::Int(16)) return read(int16_t{});
    if (dt == DataType::Int(8)) return read(int8_t{});
    if (dt == DataType::UInt(64)) return read(uint64_t{});
    if (dt == DataType::UInt(32)) return read(uint32_t{});
    if (dt == DataType::UInt(16)) return read(uint16_t{});
    if (dt == DataType::UInt(8) || dt.is_bool()) return read(uint8_t{});
    if (dt == DataType::Float(16) || dt.is_bfloat16()) {
      // Only zero-ness and sign are needed of these: exact for 0 and -0.
      uint16_t bits;
      std::memcpy(&bits, p, 2);
      return (bits & 0x7fff) == 0 ? 0.0 : ((bits & 0x8000) ? -1.0 : 1.0);
    }
  }
  return TypeError(what, ": unsupported dtype ", dt.ToString());
}

absl::StatusOr<Value> NonZero(const Tensor& x) {
  constexpr absl::string_view kName = "vm.builtin.nonzero";
  TETHER_ASSIGN_OR_RETURN(Tensor host, OnHost(x));
  const int64_t n = host->NumElements();
  const int64_t ndim = host->ndim();
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < n; ++i) {
    TETHER_ASSIGN_OR_RETURN(double v, ElementAsDouble(host, i, kName));
    if (v != 0) hits.push_back(i);
  }
  const int64_t count = static_cast<int64_t>(hits.size());
  // A 0-d input has one index row of... none: ONNX gives [0, count].
  std::vector<int64_t> out(static_cast<size_t>(ndim * count));
  for (int64_t h = 0; h < count; ++h) {
    int64_t rest = hits[static_cast<size_t>(h)];
    for (int64_t d = ndim; d-- > 0;) {
      const int64_t dim = host->shape()[static_cast<size_t>(d)];
      out[static_cast<size_t>(d * count + h)] = rest % dim;
      rest /= dim;
    }
  }
  const int64_t shape[2] = {ndim, count};
  TETHER_ASSIGN_OR_RETURN(Tensor t, Tensor::FromBytes(shape, DataType::Int(64), out.data(),
                                                      out.size() * sizeof(int64_t)));
  return ToDeviceOf(x, t);
}

absl::StatusOr<Value> Compress(const Tensor& x, const Tensor& condition, int64_t axis) {
  constexpr absl::string_view kName = "vm.builtin.compress";
  TETHER_ASSIGN_OR_RETURN(Tensor host, OnHost(x));
  TETHER_ASSIGN_OR_RETURN(Tensor cond, OnHost(condition));
  if (cond->ndim() != 1) {
    return ValueError(kName, ": condition must be 1-D, got ", condition.ToString());
  }
  std::vector<int64_t> shape(host->shape().begin(), host->shape().end());
  if (axis == -1) shape = {host->NumElements()};  // flattened
  const int64_t a = axis == -1 ? 0 : axis;
  if (a < 0 || a >= static_cast<int64_t>(shape.size())) {
    return IndexError(kName, ": axis ", axis, " out of range for ", x.ToString());
  }
  const int64_t len = shape[static_cast<size_t>(a)];
  if (cond->shape()[0] > len) {
    return ValueError(kName, ": condition has ", cond->shape()[0], " entries for an axis of ", len);
  }
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < cond->shape()[0]; ++i) {
    TETHER_ASSIGN_OR_RETURN(double v, ElementAsDouble(cond, i, kName));
    if (v != 0) keep.push_back(i);
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < a; ++d) outer *= shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(a) + 1; d < shape.size(); ++d) inner *= shape[d];
  std::vector<int64_t> out_shape = shape;
  out_shape[static_cast<size_t>(a)] = static_cast<int64_t>(keep.size());
  TETHER_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(out_shape, host->dtype(), Device::Cpu()));
  const size_t row = static_cast<size_t>(inner) * static_cast<size_t>(host->dtype().bytes());
  const char* src = static_cast<const char*>(host->element_data());
  char* dst = static_cast<char*>(out->element_data());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k : keep) {
      std::memcpy(dst, src + (o * len + k) * static_cast<int64_t>(row), row);
      dst += row;
    }
  }
  return ToDeviceOf(x, out);
}

absl::StatusOr<Value> Unique(const Tensor& x, int64_t axis, int64_t sorted) {
  constexpr absl::string_view kName = "vm.builtin.unique";
  TETHER_ASSIGN_OR_RETURN(Tensor host, OnHost(x));
  std::vector<int64_t> shape(host->shape().begin(), host->shape().end());
  if (axis == -1) shape = {host->NumElements()};
  const int64_t a = axis == -1 ? 0 : axis;
  if (a < 0 || a >= static_cast<int64_t>(shape.size())) {
    return IndexError(kName, ": axis ", axis, " out of range for ", x.ToString());
  }
  const int64_t len = shape[static_cast<size_t>(a)];
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < a; ++d) outer *= shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(a) + 1; d < shape.size(); ++d) inner *= shape[d];
  // Slice k is the `outer` runs of `inner` elements at (o * len + k) * inner.
  auto element = [&](int64_t k, int64_t j) {
    const int64_t o = j / inner, i = j % inner;
    return (o * len + k) * inner + i;
  };
  const int64_t width = outer * inner;
  std::vector<std::vector<double>> values(static_cast<size_t>(len));
  for (int64_t k = 0; k < len; ++k) {
    values[static_cast<size_t>(k)].resize(static_cast<size_t>(width));
    for (int64_t j = 0; j < width; ++j) {
      TETHER_ASSIGN_OR_RETURN(values[static_cast<size_t>(k)][static_cast<size_t>(j)],
                              ElementAsDouble(host, element(k, j), kName));
    }
  }
  // The first occurrence of each distinct slice, in order of appearance.
  std::vector<int64_t> first, inverse(static_cast<size_t>(len)), counts;
  for (int64_t k = 0; k < len; ++k) {
    size_t u = 0;
    while (u < first.size() &&
           values[static_cast<size_t>(first[u])] != values[static_cast<size_t>(k)]) {
      ++u;
    }
    if (u == first.size()) {
      first.push_back(k);
      counts.push_back(0);
    }
    ++counts[u];
    inverse[static_cast<size_t>(k)] = static_cast<int64_t>(u);
  }
  std::vector<size_t> order(first.size());
  std::iota(order.begin(), order.end(), size_t{0});
  if (sorted != 0) {
    std::stable_sort(order.begin(), order.end(), [&](size_t p, size_t q) {
      return values[static_cast<size_t>(first[p])] < values[static_cast<size_t>(first[q])];
    });
  }
  std::vector<int64_t> rank(order.size());
  for (size_t r = 0; r < order.size(); ++r) rank[order[r]] = static_cast<int64_t>(r);
  const int64_t n = static_cast<int64_t>(first.size());
  std::vector<int64_t> out_shape = shape;
  out_shape[static_cast<size_t>(a)] = n;
  TETHER_ASSIGN_OR_RETURN(Tensor y, Tensor::Empty(out_shape, host->dtype(), Device::Cpu()));
  const int64_t bytes = host->dtype().bytes();
  const char* src = static_cast<const char*>(host->element_data());
  char* dst = static_cast<char*>(y->element_data());
  std::vector<int64_t> indices(order.size()), sorted_counts(order.size());
  for (size_t r = 0; r < order.size(); ++r) {
    const int64_t k = first[order[r]];
    indices[r] = k;
    sorted_counts[r] = counts[order[r]];
    for (int64_t j = 0; j < width; ++j) {
      const int64_t o = j / inner, i = j % inner;
      std::memcpy(dst + ((o * n + static_cast<int64_t>(r)) * inner + i) * bytes,
                  src + element(k, j) * bytes, static_cast<size_t>(bytes));
    }
  }
  for (int64_t& v : inverse) v = rank[static_cast<size_t>(v)];
  auto ints = [](const std::vector<int64_t>& v) {
    const int64_t shape1[1] = {static_cast<int64_t>(v.size())};
    return Tensor::FromBytes(shape1, DataType::Int(64), v.data(), v.size() * sizeof(int64_t));
  };
  std::vector<Value> fields;
  TETHER_ASSIGN_OR_RETURN(Value yv, ToDeviceOf(x, y));
  fields.push_back(yv);
  for (const std::vector<int64_t>* v : {&indices, &inverse, &sorted_counts}) {
    TETHER_ASSIGN_OR_RETURN(Tensor t, ints(*v));
    TETHER_ASSIGN_OR_RETURN(Value tv, ToDeviceOf(x, t));
    fields.push_back(tv);
  }
  return MakeTuple(std::move(fields));
}

// Det: the determinant of each M x M matrix of [..., M, M] (float32 or
// float64), by LU decomposition with partial pivoting in float64.
absl::StatusOr<Value> Det(const Tensor& x) {
  constexpr absl::string_view kName = "vm.builtin.det";
  TETHER_ASSIGN_OR_RETURN(Tensor host, OnHost(x));
  const DataType dt = host->dtype();
  if (dt != DataType::Float(32) && dt != DataType::Float(64)) {
    return TypeError(kName, ": float32 or float64 only, got ", dt.ToString());
  }
  const std::span<const int64_t> shape = host->shape();
  const size_t nd = shape.size();
  if (nd < 2 || shape[nd - 1] != shape[nd - 2]) {
    return ValueError(kName, ": the last two dims must be equal (square matrices), got ",
                      x.ToString());
  }
  const int64_t m = shape[nd - 1];
  const std::vector<int64_t> out_shape(shape.begin(), shape.end() - 2);
  TETHER_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(out_shape, dt, Device::Cpu()));
  const int64_t batch = m == 0 ? out->NumElements() : host->NumElements() / (m * m);
  std::vector<double> a(static_cast<size_t>(m * m));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t e = 0; e < m * m; ++e) {
      TETHER_ASSIGN_OR_RETURN(a[static_cast<size_t>(e)],
                              ElementAsDouble(host, b * m * m + e, kName));
    }
    auto at = [&](int64_t r, int64_t c) -> double& { return a[static_cast<size_t>(r * m + c)]; };
    double det = 1.0;
    for (int64_t k = 0; k < m && det != 0.0; ++k) {
      int64_t p = k;
      for (int64_t r = k + 1; r < m; ++r) {
        if (std::fabs(at(r, k)) > std::fabs(at(p, k))) p = r;
      }
      if (at(p, k) == 0.0) {
        det = 0.0;
        break;
      }
      if (p != k) {
        for (int64_t c = 0; c < m; ++c) std::swap(at(p, c), at(k, c));
        det = -det;
      }
      det *= at(k, k);
      for (int64_t r = k + 1; r < m; ++r) {
        const double f = at(r, k) / at(k, k);
        for (int64_t c = k; c < m; ++c) at(r, c) -= f * at(k, c);
      }
    }
    char* dst = static_cast<char*>(out->element_data()) + b * dt.bytes();
    if (dt == DataType::Float(32)) {
      const float v = static_cast<float>(det);
      std::memcpy(dst, &v, sizeof(v));
    } else {
      std::memcpy(dst, &det, sizeof(det));
    }
  }
  return ToDeviceOf(x, out);
}

struct Box {
  double y1, x1, y2, x2;
};

double IoU(const Box& a, const Box& b) {
  const double ih = std::min(a.y2, b.y2) - std::max(a.y1, b.y1);
  const double iw = std::min(a.x2, b.x2) - std::max(a.x1, b.x1);
  if (ih <= 0 || iw <= 0) return 0;
  const double inter = ih * iw;
  const double uni = (a.y2 - a.y1) * (a.x2 - a.x1) + (b.y2 - b.y1) * (b.x2 - b.x1) - inter;
  return uni <= 0 ? 0 : inter / uni;
}

absl::StatusOr<Value> NonMaxSuppression(ArgSpan args) {
  constexpr absl::string_view kName = "vm.builtin.non_max_suppression";
  if (args.size() != 6) {
    return ValueError(kName, " expects 6 arguments (boxes, scores, max_output, iou_threshold, ",
                      "score_threshold, center_point_box), got ", args.size());
  }
  Tensor boxes_in, scores_in, max_in, iou_in, score_in;
  int64_t center = 0;
  if (!ValueTraits<Tensor>::From(args[0], &boxes_in) ||
      !ValueTraits<Tensor>::From(args[1], &scores_in) ||
      !ValueTraits<Tensor>::From(args[2], &max_in) ||
      !ValueTraits<Tensor>::From(args[3], &iou_in) ||
      !ValueTraits<Tensor>::From(args[4], &score_in) ||
      !ValueTraits<int64_t>::From(args[5], &center)) {
    return TypeError(kName, ": expected (Tensor x 5, int)");
  }
  TETHER_ASSIGN_OR_RETURN(Tensor boxes, OnHost(boxes_in));
  TETHER_ASSIGN_OR_RETURN(Tensor scores, OnHost(scores_in));
  auto scalar = [&](const Tensor& t, absl::string_view what) -> absl::StatusOr<double> {
    TETHER_ASSIGN_OR_RETURN(Tensor h, OnHost(t));
    if (h->NumElements() != 1) {
      return ValueError(kName, ": ", what, " must have one element, got ", t.ToString());
    }
    return ElementAsDouble(h, 0, kName);
  };
  TETHER_ASSIGN_OR_RETURN(double max_output, scalar(max_in, "max_output_boxes_per_class"));
  TETHER_ASSIGN_OR_RETURN(double iou_threshold, scalar(iou_in, "iou_threshold"));
  TETHER_ASSIGN_OR_RETURN(double score_threshold, scalar(score_in, "score_threshold"));
  if (boxes->ndim() != 3 || boxes->shape()[2] != 4 || scores->ndim() != 3 ||
      scores->shape()[0] != boxes->shape()[0] || scores->shape()[2] != boxes->shape()[1]) {
    return ValueError(kName, ": boxes ", boxes_in.ToString(), " and scores ", scores_in.ToString(),
                      " do not match ([batches, boxes, 4] and [batches, classes, boxes])");
  }
  const int64_t batches = boxes->shape()[0], num_boxes = boxes->shape()[1];
  const int64_t classes = scores->shape()[1];
  std::vector<int64_t> out;
  for (int64_t b = 0; b < batches; ++b) {
    std::vector<Box> bx(static_cast<size_t>(num_boxes));
    for (int64_t i = 0; i < num_boxes; ++i) {
      double c[4];
      for (int k = 0; k < 4; ++k) {
        TETHER_ASSIGN_OR_RETURN(c[k], ElementAsDouble(boxes, (b * num_boxes + i) * 4 + k, kName));
      }
      Box& box = bx[static_cast<size_t>(i)];
      if (center != 0) {  // [x_center, y_center, width, height]
        box = {c[1] - c[3] / 2, c[0] - c[2] / 2, c[1] + c[3] / 2, c[0] + c[2] / 2};
      } else {  // [y1, x1, y2, x2], either corner first
        box = {std::min(c[0], c[2]), std::min(c[1], c[3]), std::max(c[0], c[2]),
               std::max(c[1], c[3])};
      }
    }
    for (int64_t c = 0; c < classes; ++c) {
      std::vector<double> s(static_cast<size_t>(num_boxes));
      std::vector<int64_t> order;
      for (int64_t i = 0; i < num_boxes; ++i) {
        TETHER_ASSIGN_OR_RETURN(s[static_cast<size_t>(i)],
                                ElementAsDouble(scores, (b * classes + c) * num_boxes + i, kName));
        if (s[static_cast<size_t>(i)] > score_threshold) order.push_back(i);
      }
      std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
        return s[static_cast<size_t>(x)] > s[static_cast<size_t>(y)];
      });
      std::vector<int64_t> selected;
      for (int64_t i : order) {
        if (static_cast<double>(selected.size()) >= max_output) break;
        bool keep = true;
        for (int64_t j : selected) {
          if (IoU(bx[static_cast<size_t>(i)], bx[static_cast<size_t>(j)]) > iou_threshold) {
            keep = false;
            break;
          }
        }
        if (!keep) continue;
        selected.push_back(i);
        out.insert(out.end(), {b, c, i});
      }
    }
  }
  const int64_t shape[2] = {static_cast<int64_t>(out.size() / 3), 3};
  TETHER_ASSIGN_OR_RETURN(Tensor t, Tensor::FromBytes(shape, DataType::Int(64), out.data(),
                                                      out.size() * sizeof(int64_t)));
  return ToDeviceOf(boxes_in, t);
}

absl::StatusOr<Value> RoiAlignAdaptive(ArgSpan args) {
  constexpr absl::string_view kName = "vm.builtin.roi_align";
  Tensor x_in, rois_in, idx_in;
  int64_t out_h = 0, out_w = 0, max_mode = 0, half_pixel = 0;
  double scale = 0;
  if (args.size() != 8 || !ValueTraits<Tensor>::From(args[0], &x_in) ||
      !ValueTraits<Tensor>::From(args[1], &rois_in) ||
      !ValueTraits<Tensor>::From(args[2], &idx_in) ||
      !ValueTraits<int64_t>::From(args[3], &out_h) ||
      !ValueTraits<int64_t>::From(args[4], &out_w) || !ValueTraits<double>::From(args[5], &scale) ||
      !ValueTraits<int64_t>::From(args[6], &max_mode) ||
      !ValueTraits<int64_t>::From(args[7], &half_pixel)) {
    return TypeError(kName, " expects (x, rois, batch_indices, out_h, out_w, spatial_scale, ",
                     "max_mode, half_pixel)");
  }
  TETHER_ASSIGN_OR_RETURN(Tensor x, OnHost(x_in));
  TETHER_ASSIGN_OR_RETURN(Tensor rois, OnHost(rois_in));
  TETHER_ASSIGN_OR_RETURN(Tensor idx, OnHost(idx_in));
  const DataType dt = x->dtype();
  if ((dt != DataType::Float(32) && dt != DataType::Float(64)) || x->ndim() != 4 ||
      rois->ndim() != 2 || rois->shape()[1] != 4 || idx->ndim() != 1 ||
      idx->shape()[0] != rois->shape()[0] || out_h < 1 || out_w < 1) {
    return ValueError(kName, ": expected float x [N, C, H, W], rois [R, 4], batch_indices [R] ",
                      "and a positive output size, got ", x_in.ToString(), ", ", rois_in.ToString(),
                      ", ", idx_in.ToString());
  }
  const int64_t n = x->shape()[0], c = x->shape()[1], h = x->shape()[2], w = x->shape()[3];
  const int64_t r_count = rois->shape()[0];
  const int64_t out_shape[4] = {r_count, c, out_h, out_w};
  TETHER_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(out_shape, dt, Device::Cpu()));
  auto read = [&](const Tensor& t, int64_t i) { return ElementAsDouble(t, i, kName); };
  for (int64_t r = 0; r < r_count; ++r) {
    TETHER_ASSIGN_OR_RETURN(double bd, read(idx, r));
    const int64_t b = static_cast<int64_t>(bd);
    if (b < 0 || b >= n) {
      return ValueError(kName, ": batch index ", b, " of roi ", r, " is out of range for ", n,
                        " images");
    }
    double roi[4];
    for (int k = 0; k < 4; ++k) {
      TETHER_ASSIGN_OR_RETURN(roi[k], read(rois, r * 4 + k));
      roi[k] = roi[k] * scale - (half_pixel != 0 ? 0.5 : 0.0);
    }
    double rw = roi[2] - roi[0], rh = roi[3] - roi[1];
    if (half_pixel == 0) {
      rw = std::max(rw, 1.0);
      rh = std::max(rh, 1.0);
    }
    const double bin_h = rh / static_cast<double>(out_h), bin_w = rw / static_cast<double>(out_w);
    const int64_t grid_h = static_cast<int64_t>(std::ceil(rh / static_cast<double>(out_h)));
    const int64_t grid_w = static_cast<int64_t>(std::ceil(rw / static_cast<double>(out_w)));
    const double count = static_cast<double>(std::max<int64_t>(grid_h * grid_w, 1));
    for (int64_t ch = 0; ch < c; ++ch) {
      const int64_t plane = (b * c + ch) * h * w;
      for (int64_t ph = 0; ph < out_h; ++ph) {
        for (int64_t pw = 0; pw < out_w; ++pw) {
          double acc = 0;
          bool first = true;
          for (int64_t iy = 0; iy < grid_h; ++iy) {
            const double yy = roi[1] + static_cast<double>(ph) * bin_h +
                              (static_cast<double>(iy) + 0.5) * bin_h / static_cast<double>(grid_h);
            for (int64_t ix = 0; ix < grid_w; ++ix) {
              const double xx =
                  roi[0] + static_cast<double>(pw) * bin_w +
                  (static_cast<double>(ix) + 0.5) * bin_w / static_cast<double>(grid_w);
              double s = 0;
              if (!(yy < -1.0 || yy > static_cast<double>(h) || xx < -1.0 ||
                    xx > static_cast<double>(w))) {
                const double y = std::max(yy, 0.0), xq = std::max(xx, 0.0);
                int64_t y0 = static_cast<int64_t>(std::floor(y));
                int64_t x0 = static_cast<int64_t>(std::floor(xq));
                int64_t y1 = y0 + 1, x1 = x0 + 1;
                double ly = y - static_cast<double>(y0), lx = xq - static_cast<double>(x0);
                if (y0 >= h - 1) {
                  y0 = y1 = h - 1;
                  ly = 0;
                }
                if (x0 >= w - 1) {
                  x0 = x1 = w - 1;
                  lx = 0;
                }
                double v[4];
                const int64_t at[4] = {y0 * w + x0, y0 * w + x1, y1 * w + x0, y1 * w + x1};
                for (int k = 0; k < 4; ++k) {
                  TETHER_ASSIGN_OR_RETURN(v[k], read(x, plane + at[k]));
                }
                const double t[4] = {(1 - ly) * (1 - lx) * v[0], (1 - ly) * lx * v[1],
                                     ly * (1 - lx) * v[2], ly * lx * v[3]};
                s = max_mode != 0 ? std::max({t[0], t[1], t[2], t[3]}) : t[0] + t[1] + t[2] + t[3];
              }
              acc = first ? s : (max_mode != 0 ? std::max(acc, s) : acc + s);
              first = false;
            }
          }
          if (max_mode == 0) acc /= count;
          const int64_t o = ((r * c + ch) * out_h + ph) * out_w + pw;
          if (dt == DataType::Float(32)) {
            static_cast<float*>(out->element_data())[o] = static_cast<float>(acc);
          } else {
            static_cast<double*>(out->element_data())[o] = acc;
          }
        }
      }
    }
  }
  return ToDeviceOf(x_in, out);
}

void Check(absl::Status s) {
  if (!s.ok()) internal::DieOnRegistrationError(s);
}

}  // namespace

void RegisterDataDependentOps() {
  Check(Registry::RegisterTyped("vm.builtin.nonzero", NonZero));
  Check(Registry::RegisterTyped("vm.builtin.compress", Compress));
  Check(Registry::RegisterTyped("vm.builtin.unique", Unique));
  Check(Registry::RegisterTyped("vm.builtin.det", Det));
  Check(Registry::RegisterPacked("vm.builtin.non_max_suppression", NonMaxSuppression));
  Check(Registry::RegisterPacked("vm.builtin.roi_align", RoiAlignAdaptive));
}

}  // namespace tether::vm
