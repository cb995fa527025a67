// PrimExpr: scalar expressions shared by the whole compiler. Relax uses them
// for symbolic shape dimensions (R.Tensor(("n", 784))); the kernel IR uses
// them for loop bounds, indices and element values. One node set, as TVM's
// tir.PrimExpr, so a dimension computed in the graph and the loop bound of a
// kernel are the same object and can be compared and substituted.
//
// Nodes are immutable and shared through the runtime's intrusive Ref. A Var
// is identified by its node (two vars named "n" are different variables).
// Operators on PrimExpr build nodes and fold constants on the spot
// (Add(2, 3) is IntImm 5, x * 1 is x); the full simplifier is in arith.h.
//
// Thread contract: nodes are immutable after construction and may be shared
// across threads; building expressions is thread-safe.
#ifndef TETHER_COMPILER_TIR_PRIM_EXPR_H_
#define TETHER_COMPILER_TIR_PRIM_EXPR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "runtime/core/data_type.h"
#include "runtime/core/object.h"

namespace tether::compiler {

enum class PrimKind : uint8_t {
  kIntImm,
  kFloatImm,
  kVar,
  // Binary, both operands of the node's dtype (comparisons: operands of one
  // dtype, result bool).
  kAdd,
  kSub,
  kMul,
  kDiv,       // float division, or C truncating division for ints (rare; prefer FloorDiv)
  kFloorDiv,  // ints: rounds towards negative infinity
  kFloorMod,  // ints: result has the sign of the divisor
  kMin,
  kMax,
  kEQ,
  kNE,
  kLT,
  kLE,
  kGT,
  kGE,
  kAnd,
  kOr,
  kNot,
  kSelect,  // cond ? true_value : false_value (both evaluated)
  kCast,
  kLoad,  // buffer[indices...]
  kCall,  // math intrinsic by name, see PrimCallNode
};

class PrimExprNode;
class BufferNode;
class PrimVarNode;

// A handle to an immutable PrimExprNode; null when default-constructed.
class PrimExpr {
 public:
  PrimExpr() = default;
  // An int64 constant.
  PrimExpr(int64_t value);  // NOLINT(google-explicit-constructor)
  PrimExpr(int value) : PrimExpr(static_cast<int64_t>(value)) {}  // NOLINT
  explicit PrimExpr(Ref<const PrimExprNode> node) : node_(std::move(node)) {}

  const PrimExprNode* get() const { return node_.get(); }
  const PrimExprNode* operator->() const { return node_.get(); }
  bool defined() const { return node_ != nullptr; }
  DataType dtype() const;
  PrimKind kind() const;
  // The node as T when its kind matches T::kKinds, else nullptr.
  template <typename T>
  const T* as() const;
  // Same node (not structural equality; see arith.h for that).
  bool same_as(const PrimExpr& other) const { return node_.get() == other.node_.get(); }
  // The constant when this is an IntImm.
  const int64_t* as_int() const;

 private:
  Ref<const PrimExprNode> node_;
};

class PrimExprNode : public Object {
 public:
  PrimExprNode(PrimKind kind, DataType dtype) : kind_(kind), dtype_(dtype) {}
  absl::string_view type_key() const override { return "PrimExpr"; }
  PrimKind kind() const { return kind_; }
  DataType dtype() const { return dtype_; }

 private:
  PrimKind kind_;
  DataType dtype_;
};

class IntImmNode : public PrimExprNode {
 public:
  static bool Is(PrimKind k) { return k == PrimKind::kIntImm; }
  IntImmNode(DataType dtype, int64_t value)
      : PrimExprNode(PrimKind::kIntImm, dtype), value(value) {}
  const int64_t value;
};

class FloatImmNode : public PrimExprNode {
 public:
  static bool Is(PrimKind k) { return k == PrimKind::kFloatImm; }
  FloatImmNode(DataType dtype, double value)
      : PrimExprNode(PrimKind::kFloatImm, dtype), value(value) {}
  const double value;
};

class PrimVarNode : public PrimExprNode {
 public:
  static bool Is(PrimKind k) { return k == PrimKind::kVar; }
  PrimVarNode(std::string name, DataType dtype)
      : PrimExprNode(PrimKind::kVar, dtype), name(std::move(name)) {}
  const std::string name;
};

// kAdd .. kOr (b undefined never happens for these kinds).
class BinaryNode : public PrimExprNode {
 public:
  static bool Is(PrimKind k) { return k >= PrimKind::kAdd && k <= PrimKind::kOr; }
  BinaryNode(PrimKind kind, DataType dtype, PrimExpr a, PrimExpr b)
      : PrimExprNode(kind, dtype), a(std::move(a)), b(std::move(b)) {}
  const PrimExpr a;
  const PrimExpr b;
};

class NotNode : public PrimExprNode {
 public:
  static bool Is(PrimKind k) { return k == PrimKind::kNot; }
  explicit NotNode(PrimExpr a) : PrimExprNode(PrimKind::kNot, DataType::Bool()), a(std::move(a)) {}
  const PrimExpr a;
};

class SelectNode : public PrimExprNode {
 public:
  static bool Is(PrimKind k) { return k == PrimKind::kSelect; }
  SelectNode(PrimExpr cond, PrimExpr t, PrimExpr f)
      : PrimExprNode(PrimKind::kSelect, t.dtype()),
        cond(std::move(cond)),
        true_value(std::move(t)),
        false_value(std::move(f)) {}
  const PrimExpr cond;
  const PrimExpr true_value;
  const PrimExpr false_value;
};

class CastNode : public PrimExprNode {
 public:
  static bool Is(PrimKind k) { return k == PrimKind::kCast; }
  CastNode(DataType dtype, PrimExpr value)
      : PrimExprNode(PrimKind::kCast, dtype), value(std::move(value)) {}
  const PrimExpr value;
};

// A buffer: a named, typed, row-major compact n-d array. Kernel parameters,
// kernel scratch allocations and placeholders of compute definitions are
// buffers. Shape entries may be symbolic (vars bound from the DLTensor
// shape at kernel entry, or expressions of such vars).
class BufferNode : public Object {
 public:
  enum class Scope : uint8_t {
    kGlobal,     // a kernel parameter (a DLTensor) or a workspace allocation
    kLocal,      // a small scratch array private to one thread (stack)
    kShared,     // a GPU block's shared memory (compiler/tir/kernel_ir.h)
    kPerThread,  // one slice per thread of a GPU block, dim 0 the thread index
    // Tensor-core fragments of a GPU block, dim 0 the warp index, the last
    // two 16 x 16 (compiler/tir/kernel_ir.h, MatrixTileNode): opaque, only
    // MatrixTile statements touch them.
    kMatrixA,
    kMatrixB,
    kAccumulator,
    // A warpgroup's accumulator of Hopper's warpgroup MMA (kernel_ir.h,
    // "Warpgroup MMA"): [warpgroups, 64, n] float32, dim 0 the warpgroup;
    // opaque like the fragments above.
    kWarpgroupAccumulator,
  };
  // How a kShared buffer's elements are placed (the others are row-major):
  //   kRowMajor    compact, row-major
  //   kSwizzle128  what Hopper's tensor cores read (kernel_ir.h, "Warpgroup
  //                MMA"): the last dim cut into 128-byte column blocks; the
  //                rows of one block, for a fixed index of the leading dims,
  //                are 128 bytes apart, the blocks one after the other; and
  //                in each 1024 bytes (8 rows) the 16-byte chunk c of row r
  //                sits at chunk c ^ (r % 8). Rows of the last dim are whole
  //                128-byte multiples.
  enum class Layout : uint8_t { kRowMajor, kSwizzle128 };
  BufferNode(std::string name, DataType dtype, std::vector<PrimExpr> shape, Scope scope,
             Layout layout = Layout::kRowMajor)
      : name(std::move(name)),
        dtype(dtype),
        shape(std::move(shape)),
        scope(scope),
        layout(layout) {}
  absl::string_view type_key() const override { return "Buffer"; }
  const std::string name;
  const DataType dtype;
  const std::vector<PrimExpr> shape;
  const Scope scope;
  const Layout layout;
};
using Buffer = Ref<const BufferNode>;
Buffer MakeBuffer(std::string name, DataType dtype, std::vector<PrimExpr> shape,
                  BufferNode::Scope scope = BufferNode::Scope::kGlobal,
                  BufferNode::Layout layout = BufferNode::Layout::kRowMajor);

class LoadNode : public PrimExprNode {
 public:
  static bool Is(PrimKind k) { return k == PrimKind::kLoad; }
  LoadNode(Buffer buffer, std::vector<PrimExpr> indices)
      : PrimExprNode(PrimKind::kLoad, buffer->dtype),
        buffer(std::move(buffer)),
        indices(std::move(indices)) {}
  const Buffer buffer;
  const std::vector<PrimExpr> indices;  // one per buffer dimension
};

// A pure math intrinsic on floats, applied elementwise: "exp", "log", "sqrt",
// "rsqrt", "tanh", "erf", "sigmoid", "pow" (2 args), "fabs", "floor", "ceil",
// "round", "trunc", "sin", "cos". Codegen maps each to an LLVM intrinsic or an
// inline polynomial (a kernel library has no undefined symbols).
class PrimCallNode : public PrimExprNode {
 public:
  static bool Is(PrimKind k) { return k == PrimKind::kCall; }
  PrimCallNode(DataType dtype, std::string op, std::vector<PrimExpr> args)
      : PrimExprNode(PrimKind::kCall, dtype), op(std::move(op)), args(std::move(args)) {}
  const std::string op;
  const std::vector<PrimExpr> args;
};

template <typename T>
const T* PrimExpr::as() const {
  return node_ && T::Is(node_->kind()) ? static_cast<const T*>(node_.get()) : nullptr;
}

// A variable handle: a PrimExpr known to be a Var.
class Var : public PrimExpr {
 public:
  Var() = default;
  explicit Var(std::string name, DataType dtype = DataType::Int(64));
  const PrimVarNode* get() const { return static_cast<const PrimVarNode*>(PrimExpr::get()); }
  const PrimVarNode* operator->() const { return get(); }
  const std::string& name() const { return get()->name; }
};

// Constructors. Each folds constants when both sides are constants and
// applies the identities that keep shapes readable (x+0, x*1, x*0, x-0,
// floordiv(x,1)); ints of different widths promote to the wider.
PrimExpr IntImm(DataType dtype, int64_t value);
PrimExpr FloatImm(DataType dtype, double value);
PrimExpr BoolImm(bool value);
// A constant of `dtype` with `value` (float for float dtypes, else int).
PrimExpr MakeConst(DataType dtype, double value);
PrimExpr Add(PrimExpr a, PrimExpr b);
PrimExpr Sub(PrimExpr a, PrimExpr b);
PrimExpr Mul(PrimExpr a, PrimExpr b);
PrimExpr Div(PrimExpr a, PrimExpr b);
PrimExpr FloorDiv(PrimExpr a, PrimExpr b);
PrimExpr FloorMod(PrimExpr a, PrimExpr b);
PrimExpr Min(PrimExpr a, PrimExpr b);
PrimExpr Max(PrimExpr a, PrimExpr b);
PrimExpr EQ(PrimExpr a, PrimExpr b);
PrimExpr NE(PrimExpr a, PrimExpr b);
PrimExpr LT(PrimExpr a, PrimExpr b);
PrimExpr LE(PrimExpr a, PrimExpr b);
PrimExpr GT(PrimExpr a, PrimExpr b);
PrimExpr GE(PrimExpr a, PrimExpr b);
PrimExpr And(PrimExpr a, PrimExpr b);
PrimExpr Or(PrimExpr a, PrimExpr b);
PrimExpr Not(PrimExpr a);
PrimExpr Select(PrimExpr cond, PrimExpr t, PrimExpr f);
// No node when value already has `dtype`.
PrimExpr Cast(DataType dtype, PrimExpr value);
PrimExpr Load(Buffer buffer, std::vector<PrimExpr> indices);
PrimExpr Call(DataType dtype, std::string op, std::vector<PrimExpr> args);
// The same node kind over new operands (used by mutators).
PrimExpr MakeBinary(PrimKind kind, PrimExpr a, PrimExpr b);

inline PrimExpr operator+(PrimExpr a, PrimExpr b) { return Add(std::move(a), std::move(b)); }
inline PrimExpr operator-(PrimExpr a, PrimExpr b) { return Sub(std::move(a), std::move(b)); }
inline PrimExpr operator*(PrimExpr a, PrimExpr b) { return Mul(std::move(a), std::move(b)); }
inline PrimExpr operator/(PrimExpr a, PrimExpr b) { return Div(std::move(a), std::move(b)); }
inline PrimExpr operator-(PrimExpr a) {
  const DataType dtype = a.dtype();  // read before `a` is moved from
  return Sub(MakeConst(dtype, 0), std::move(a));
}

// Integer floor division and modulo (b != 0): the quotient rounds towards
// negative infinity and the remainder has the sign of b, as FloorDiv/FloorMod.
int64_t FloorDivInt(int64_t a, int64_t b);
int64_t FloorModInt(int64_t a, int64_t b);

// The product of `dims` (1 for none).
PrimExpr Product(const std::vector<PrimExpr>& dims);

// Text: "n * 4 + 1", "floordiv(n, 2)", "A[i, j]", "exp(x)"; casts as
// "float32(x)"; constants of non-default dtype with a suffix ("1f", "2i32").
std::string ToString(const PrimExpr& e);
const char* PrimKindName(PrimKind kind);  // "add", "floordiv", ...

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_TIR_PRIM_EXPR_H_
