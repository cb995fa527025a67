// A harness for operator tests: build one normalized call of an operator
// (tensor operands as Vars carrying their struct info, struct info of the
// call inferred by the operator), lower it to a kernel with
// LowerCallToKernel, compile and load it with the JIT
// (compiler/backend/llvm/jit.h), run it on CPU tensors and compare with a plain
// C++ reference computed in the test.
//
// Host data is held as std::vector<double> in row-major order whatever the
// dtype (exact for every integer up to 2^53 and for float16/float32), so one
// reference implementation serves every dtype.
#ifndef TETHER_TESTS_COMPILER_OP_TEST_UTIL_H_
#define TETHER_TESTS_COMPILER_OP_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "compiler/backend/llvm/jit.h"
#include "compiler/lower/lower.h"
#include "compiler/op/op.h"
#include "compiler/relax/expr.h"
#include "gtest/gtest.h"
#include "runtime/core/error.h"
#include "runtime/core/scalar.h"
#include "runtime/core/tensor.h"
#include "runtime/module/module.h"

namespace tether::compiler::optest {

inline constexpr DataType kF32 = DataType::Float(32);
inline constexpr DataType kF16 = DataType::Float(16);
inline constexpr DataType kI32 = DataType::Int(32);
inline constexpr DataType kI64 = DataType::Int(64);
inline constexpr DataType kBool = DataType::Bool();

using Shape = std::vector<int64_t>;

// Host data of one tensor.
struct HostTensor {
  Shape shape;
  DataType dtype = kF32;
  std::vector<double> data;  // row-major
};

inline int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

inline std::vector<PrimExpr> Dims(const Shape& shape) {
  std::vector<PrimExpr> dims;
  for (int64_t d : shape) dims.push_back(PrimExpr(d));
  return dims;
}

inline HostTensor Filled(Shape shape, DataType dtype, double value) {
  HostTensor t{std::move(shape), dtype, {}};
  t.data.assign(static_cast<size_t>(NumElements(t.shape)), value);
  return t;
}

// IEEE half and bfloat16 <-> float, rounded to nearest even (runtime/core/scalar.h).
using ::tether::BFloat16ToFloat;
using ::tether::FloatToBFloat16;
using ::tether::FloatToHalf;
using ::tether::HalfToFloat;

// Random values in [lo, hi); integers (and bool, with lo 0 hi 2) when the
// dtype is not float. Same seed, same values.
inline HostTensor Random(Shape shape, DataType dtype, uint32_t seed, double lo = -2.0,
                         double hi = 2.0) {
  HostTensor t{std::move(shape), dtype, {}};
  std::mt19937 rng(seed);
  const int64_t n = NumElements(t.shape);
  const bool is_float = dtype.is_float() || dtype.is_bfloat16();
  if (dtype.is_bool()) {
    lo = 0;
    hi = 2;
  }
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < n; ++i) {
    double v = dist(rng);
    if (!is_float) v = std::floor(v);
    if (dtype.is_float() && dtype.bits() == 16) {
      v = HalfToFloat(FloatToHalf(static_cast<float>(v)));  // exactly representable
    }
    if (dtype.is_bfloat16()) v = BFloat16ToFloat(FloatToBFloat16(static_cast<float>(v)));
    t.data.push_back(v);
  }
  return t;
}

// A CPU runtime tensor holding `t` converted to its dtype.
inline absl::StatusOr<Tensor> ToTensor(const HostTensor& t) {
  const DataType d = t.dtype;
  std::vector<uint8_t> bytes(t.data.size() * static_cast<size_t>(d.bytes()));
  for (size_t i = 0; i < t.data.size(); ++i) {
    void* p = bytes.data() + i * static_cast<size_t>(d.bytes());
    const double v = t.data[i];
    if (d == kF32) {
      float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
    } else if (d == DataType::Float(64)) {
      std::memcpy(p, &v, 8);
    } else if (d == kF16) {
      uint16_t h = FloatToHalf(static_cast<float>(v));
      std::memcpy(p, &h, 2);
    } else if (d.is_bfloat16()) {
      uint16_t h = FloatToBFloat16(static_cast<float>(v));
      std::memcpy(p, &h, 2);
    } else if (d.is_bool()) {
      uint8_t b = v != 0;
      std::memcpy(p, &b, 1);
    } else if (d.is_int() || d.is_uint()) {
      int64_t x = static_cast<int64_t>(v);
      std::memcpy(p, &x, static_cast<size_t>(d.bytes()));  // little-endian truncation
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("op test: no host conversion for ", d.ToString()));
    }
  }
  return Tensor::FromBytes(t.shape, d, bytes.data(), bytes.size());
}

inline HostTensor FromTensor(const Tensor& t) {
  HostTensor h;
  h.shape.assign(t->shape().begin(), t->shape().end());
  h.dtype = t->dtype();
  const auto* p = static_cast<const uint8_t*>(t->element_data());
  const int64_t n = t->NumElements();
  const size_t sz = static_cast<size_t>(h.dtype.bytes());
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* e = p + static_cast<size_t>(i) * sz;
    double v = 0;
    if (h.dtype == kF32) {
      float f;
      std::memcpy(&f, e, 4);
      v = f;
    } else if (h.dtype == DataType::Float(64)) {
      std::memcpy(&v, e, 8);
    } else if (h.dtype == kF16) {
      uint16_t x;
      std::memcpy(&x, e, 2);
      v = HalfToFloat(x);
    } else if (h.dtype.is_bfloat16()) {
      uint16_t x;
      std::memcpy(&x, e, 2);
      v = BFloat16ToFloat(x);
    } else if (h.dtype.is_bool()) {
      v = *e != 0;
    } else if (h.dtype.is_int()) {
      int64_t x = 0;
      std::memcpy(&x, e, sz);
      const int shift = 64 - 8 * static_cast<int>(sz);  // sign-extend
      v = static_cast<double>(shift ? (x << shift) >> shift : x);
    } else if (h.dtype.is_uint()) {
      uint64_t x = 0;
      std::memcpy(&x, e, sz);
      v = static_cast<double>(x);
    }
    h.data.push_back(v);
  }
  return h;
}

// Operands of the call under test.
inline Expr TensorVar(const std::string& name, std::vector<PrimExpr> shape, DataType dtype) {
  return MakeVar(name, TensorSInfo(std::move(shape), dtype));
}
inline Expr TensorVar(const std::string& name, const HostTensor& t) {
  return TensorVar(name, Dims(t.shape), t.dtype);
}

// The normalized call: its struct info inferred by the operator.
inline absl::StatusOr<Expr> MakeOpCall(const std::string& op, std::vector<Expr> args,
                                       Attrs attrs = {}) {
  const OpInfo* info = FindOp(op);
  if (info == nullptr) return absl::NotFoundError(absl::StrCat("no operator ", op));
  Expr call = MakeCall(GetOp(op), std::move(args), std::move(attrs));
  absl::StatusOr<StructInfo> s = info->infer(*call.as<CallNode>());
  if (!s.ok()) return s.status();
  call->set_struct_info(*s);
  return call;
}

// The struct info an operator infers for a call (the error tests' entry).
inline absl::StatusOr<StructInfo> InferOp(const std::string& op, std::vector<Expr> args,
                                          Attrs attrs = {}) {
  absl::StatusOr<Expr> call = MakeOpCall(op, std::move(args), std::move(attrs));
  if (!call.ok()) return call.status();
  return call->struct_info();
}

// A kernel compiled and loaded once, run any number of times.
class CompiledKernel {
 public:
  static absl::StatusOr<CompiledKernel> Create(const KernelFunc& kernel) {
    absl::StatusOr<Ref<Module>> mod = BuildAndLoad({kernel});
    if (!mod.ok()) return Annotate(mod.status(), "kernel:\n", ToString(kernel), "\n");
    absl::StatusOr<Function> fn = (*mod)->GetFunction(kernel->name);
    if (!fn.ok()) return fn.status();
    return CompiledKernel(kernel, *mod, *fn);
  }

  const KernelFunc& kernel() const { return kernel_; }

  // Runs on `inputs` (one per tensor operand, in order, Tuple fields
  // flattened) and returns the outputs, shaped as `out_shapes` (needed when
  // an output shape is symbolic; empty: from the kernel's output buffers).
  absl::StatusOr<std::vector<HostTensor>> Run(const std::vector<HostTensor>& inputs,
                                              std::vector<Shape> out_shapes = {}) const {
    std::vector<Tensor> args;
    for (const HostTensor& h : inputs) {
      absl::StatusOr<Tensor> t = ToTensor(h);
      if (!t.ok()) return t.status();
      args.push_back(*t);
    }
    const size_t num_outputs = static_cast<size_t>(kernel_->num_outputs);
    const std::vector<KernelParam>& params = kernel_->params;
    if (params.size() != inputs.size() + num_outputs) {
      return absl::InvalidArgumentError(absl::StrCat("op test: the kernel has ", params.size(),
                                                     " params, given ", inputs.size(), " inputs"));
    }
    for (size_t k = 0; k < num_outputs; ++k) {
      const Buffer& b = params[inputs.size() + k].buffer;
      Shape shape;
      if (k < out_shapes.size()) {
        shape = out_shapes[k];
      } else {
        for (const PrimExpr& d : b->shape) {
          if (d.as_int() == nullptr) {
            return absl::InvalidArgumentError("op test: symbolic output shape, pass out_shapes");
          }
          shape.push_back(*d.as_int());
        }
      }
      absl::StatusOr<Tensor> t = ToTensor(Filled(shape, b->dtype, 0));
      if (!t.ok()) return t.status();
      args.push_back(*t);
    }
    std::vector<Value> values(args.begin(), args.end());
    absl::StatusOr<Value> r = fn_(ArgSpan(values.data(), values.size()));
    if (!r.ok()) {
      return absl::Status(r.status().code(),
                          absl::StrCat(r.status().message(), "\nkernel:\n", ToString(kernel_)));
    }
    std::vector<HostTensor> outs;
    for (size_t k = 0; k < num_outputs; ++k) outs.push_back(FromTensor(args[inputs.size() + k]));
    return outs;
  }

 private:
  CompiledKernel(KernelFunc kernel, Ref<Module> module, Function fn)
      : kernel_(std::move(kernel)), module_(std::move(module)), fn_(std::move(fn)) {}
  KernelFunc kernel_;
  Ref<Module> module_;  // keeps fn_'s code loaded
  Function fn_;
};

// Lowers `call` (from MakeOpCall), compiles it, runs it once (see CompiledKernel::Run).
inline absl::StatusOr<std::vector<HostTensor>> RunCall(const Expr& call,
                                                       const std::vector<HostTensor>& inputs,
                                                       std::vector<Shape> out_shapes = {}) {
  absl::StatusOr<KernelFunc> kernel = LowerCallToKernel(*call.as<CallNode>(), "op_under_test");
  if (!kernel.ok()) return kernel.status();
  absl::StatusOr<CompiledKernel> compiled = CompiledKernel::Create(*kernel);
  if (!compiled.ok()) return compiled.status();
  return compiled->Run(inputs, std::move(out_shapes));
}

// Makes the call of `op` on tensor Vars shaped like `inputs` and runs it.
inline absl::StatusOr<std::vector<HostTensor>> RunOp(const std::string& op,
                                                     const std::vector<HostTensor>& inputs,
                                                     Attrs attrs = {},
                                                     std::vector<Expr> extra_args = {}) {
  std::vector<Expr> args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    args.push_back(TensorVar(absl::StrCat("x", i), inputs[i]));
  }
  for (Expr& e : extra_args) args.push_back(std::move(e));
  absl::StatusOr<Expr> call = MakeOpCall(op, std::move(args), std::move(attrs));
  if (!call.ok()) return call.status();
  return RunCall(*call, inputs);
}

// Asserts that `expr` (a StatusOr) is OK and binds its value to `lhs`. Any
// error fails the test, UNIMPLEMENTED included: a lowering that regresses to
// "not implemented" is a failure, never a skip.
#define OP_TEST_ASSERT_OK_AND_ASSIGN(lhs, expr)    \
  auto lhs##_or = (expr);                          \
  ASSERT_TRUE(lhs##_or.ok()) << lhs##_or.status(); \
  auto lhs = std::move(*lhs##_or)

// Tolerance for comparing results of `dtype`: relative and absolute.
inline double Tolerance(DataType dtype) {
  if (dtype == kF16) return 2e-3;
  if (dtype.is_bfloat16()) return 8e-3;  // 8 significant bits
  if (dtype == kF32) return 2e-5;
  if (dtype.is_float()) return 1e-10;
  return 0;
}

// Expects `actual` to match `expected` element by element (NaNs equal).
inline void ExpectClose(const HostTensor& actual, const HostTensor& expected, double tol = -1) {
  if (tol < 0) tol = Tolerance(expected.dtype);
  ASSERT_EQ(actual.shape, expected.shape);
  ASSERT_EQ(actual.dtype, expected.dtype)
      << actual.dtype.ToString() << " vs " << expected.dtype.ToString();
  ASSERT_EQ(actual.data.size(), expected.data.size());
  int failures = 0;
  for (size_t i = 0; i < actual.data.size() && failures < 10; ++i) {
    const double a = actual.data[i];
    const double e = expected.data[i];
    if (std::isnan(a) && std::isnan(e)) continue;
    if (std::isinf(e) && a == e) continue;
    const double bound = tol * (1.0 + std::fabs(e));
    if (!(std::fabs(a - e) <= bound)) {
      ADD_FAILURE() << "element " << i << ": got " << a << ", expected " << e;
      ++failures;
    }
  }
}

// Row-major strides of `shape`.
inline Shape Strides(const Shape& shape) {
  Shape s(shape.size(), 1);
  for (size_t k = shape.size(); k-- > 1;) s[k - 1] = s[k] * shape[k];
  return s;
}

// Multi-index of flat position `i` in `shape`.
inline Shape Unravel(int64_t i, const Shape& shape) {
  Shape idx(shape.size());
  for (size_t k = shape.size(); k-- > 0;) {
    idx[k] = shape[k] ? i % shape[k] : 0;
    i = shape[k] ? i / shape[k] : 0;
  }
  return idx;
}

// The numpy broadcast of shapes (assumed compatible).
inline Shape BroadcastShape(const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const Shape& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const Shape& s : shapes) {
    for (size_t k = 0; k < s.size(); ++k) {
      int64_t& o = out[rank - s.size() + k];
      if (s[k] != 1) o = s[k];
    }
  }
  return out;
}

// The value of `t` at output multi-index `out_idx` under broadcasting.
inline double BroadcastAt(const HostTensor& t, const Shape& out_idx) {
  int64_t flat = 0;
  const Shape strides = Strides(t.shape);
  const size_t off = out_idx.size() - t.shape.size();
  for (size_t k = 0; k < t.shape.size(); ++k) {
    flat += (t.shape[k] == 1 ? 0 : out_idx[k + off]) * strides[k];
  }
  return t.data[static_cast<size_t>(flat)];
}

// out[i] = f(operands at i) with numpy broadcasting, as `dtype`.
inline HostTensor BroadcastRef(const std::vector<HostTensor>& operands, DataType dtype,
                               const std::function<double(const std::vector<double>&)>& f) {
  std::vector<Shape> shapes;
  for (const HostTensor& t : operands) shapes.push_back(t.shape);
  HostTensor out{BroadcastShape(shapes), dtype, {}};
  const int64_t n = NumElements(out.shape);
  std::vector<double> vals(operands.size());
  for (int64_t i = 0; i < n; ++i) {
    const Shape idx = Unravel(i, out.shape);
    for (size_t j = 0; j < operands.size(); ++j) vals[j] = BroadcastAt(operands[j], idx);
    out.data.push_back(f(vals));
  }
  return out;
}

// Rounds each value as storing it in `dtype` would (float32, float16, ints wrap not modelled).
inline double RoundTo(DataType dtype, double v) {
  if (dtype == kF32) return static_cast<float>(v);
  if (dtype == kF16) return HalfToFloat(FloatToHalf(static_cast<float>(v)));
  if (dtype.is_bfloat16()) return BFloat16ToFloat(FloatToBFloat16(static_cast<float>(v)));
  if (dtype.is_bool()) return v != 0;
  if (dtype.is_int() || dtype.is_uint()) return std::trunc(v);
  return v;
}

}  // namespace tether::compiler::optest

#endif  // TETHER_TESTS_COMPILER_OP_TEST_UTIL_H_
