// The kernel IR: a small loop-nest language, the compiler's counterpart of
// TVM's TIR. Operators lower to it (compiler/op/), fusion composes it, and
// codegen (compiler/backend/llvm/) turns a KernelFunc into LLVM IR with the C ABI
// of docs/design/kernel-abi.md.
//
// Statements are immutable and shared through Ref; scalar expressions are
// PrimExprs (compiler/tir/prim_expr.h). Buffers are row-major and compact;
// indices are per dimension and flattened by codegen.
//
// Parallelism and vectorization are annotations on loops: a kParallel loop's
// body is outlined and run through the runtime's parallel-for service; a
// kVectorized loop gets LLVM's vectorize metadata (its extent need not be a
// multiple of the vector width).
//
// Block schedules, for a GPU (docs/design/kernel-abi.md, "Block launches"):
// a kBlock loop, a top-level statement of the kernel, spreads its iterations
// over the thread blocks of one launch. Every thread of the block runs its
// body, so the body's control flow must be the same for all of them, and it
// stores only inside kThread loops. A kThread loop (constant extent, at most
// kDeviceBlockThreads, inside a kBlock body) runs its body once per thread of
// the block, the var being the thread's index, and ends with a barrier: what
// one kThread loop stores, the next reads. A kBlock body allocates kShared
// buffers (the block's shared memory) and kPerThread buffers (a private
// slice per thread: dimension 0 is the thread index, and every access is
// inside a kThread loop with that loop's var as index 0; registers on a
// GPU). Run one after the other, as serial loops, the same statements are a
// correct CPU program, which is how block schedules are checked without a
// GPU (device_split.h, SimulateOnCpu).
//
// Tensor cores: a kWarp loop (extent the block's threads / 32, inside a
// kBlock body like a kThread loop, and also ending with a barrier) runs its
// body once per warp, all 32 threads together, the var being the warp's
// index. Its body has no Store: it works through MatrixTile statements on
// fragment buffers (scopes kMatrixA, kMatrixB, kAccumulator), 16 x 16 tiles
// whose elements the warp's threads hold in registers in a layout only the
// hardware knows. On a CPU each MatrixTile statement is the loop nest of
// ExpandMatrixTile, and fragments are ordinary arrays.
//
// Asynchronous copies (sm_80's cp.async): inside a kThread loop, a thread
// may issue AsyncCopy statements, 16 bytes each from a tensor parameter to a
// kShared buffer, that complete in the background, and an AsyncFence that
// groups the copies it issued since its last fence and waits until at most
// `pending` of its groups are still in flight. A copy's data may be read
// only after its group was waited for and a barrier passed (the end of a
// kThread loop), which lets a block schedule fetch the next k step while it
// computes on the current one. On a CPU a copy happens at once and a fence
// does nothing (ExpandAsyncCopy).
//
// Warpgroup MMA (Hopper's wgmma, sm_90a): a kWarpgroup loop (extent the
// block's threads / 128, like a kWarp loop otherwise) runs its body once
// per warpgroup of 4 warps. There a WarpgroupMma statement multiplies a
// 64 x K tile of A by a K x N tile of B, both in kShared buffers of the
// kSwizzle128 layout (prim_expr.h), into the warpgroup's part of a
// kWarpgroupAccumulator buffer [warpgroups, 64, N] (registers on a GPU).
// The tensor cores read shared memory through the async proxy: threads
// that filled a tile with asynchronous copies wait for them and issue
// AsyncProxyFence before the barrier that precedes the WarpgroupMma. The
// multiply runs in the background: a WarpgroupMma leaves at most one group
// of them (its own) in flight, so the tiles that the one before it read may
// be refilled after the next barrier; WarpgroupStore waits for them all and
// writes 64 x W columns of the accumulator to a float32 kShared tile. On a
// CPU both are the loops of ExpandMatrixTile.
//
// Thread contract: immutable after construction; safe to share.
#ifndef TETHER_COMPILER_TIR_KERNEL_IR_H_
#define TETHER_COMPILER_TIR_KERNEL_IR_H_

#include <functional>
#include <string>
#include <vector>

#include "compiler/tir/prim_expr.h"

namespace tether::compiler {

// Threads per block of a GPU launch, and the most a kThread loop may have.
inline constexpr int kDeviceBlockThreads = 256;
// Threads of a warp, and the side of a MatrixTile fragment.
inline constexpr int kWarpThreads = 32;
inline constexpr int kMatrixTileSide = 16;

enum class StmtKind : uint8_t {
  kFor,
  kStore,
  kLet,
  kAllocate,
  kSeq,
  kIf,
  kAssert,
  kEvaluate,
  kMatrixTile,
  kAsyncCopy
};
enum class ForKind : uint8_t {
  kSerial,
  kParallel,
  kVectorized,
  kUnrolled,
  kBlock,
  kThread,
  kWarp,
  kWarpgroup
};

class StmtNode : public Object {
 public:
  explicit StmtNode(StmtKind kind) : kind_(kind) {}
  absl::string_view type_key() const override { return "Stmt"; }
  StmtKind kind() const { return kind_; }

 private:
  StmtKind kind_;
};

class Stmt {
 public:
  Stmt() = default;
  explicit Stmt(Ref<const StmtNode> node) : node_(std::move(node)) {}
  const StmtNode* get() const { return node_.get(); }
  const StmtNode* operator->() const { return node_.get(); }
  bool defined() const { return node_ != nullptr; }
  StmtKind kind() const { return node_->kind(); }
  template <typename T>
  const T* as() const {
    return node_ && node_->kind() == T::kKind ? static_cast<const T*>(node_.get()) : nullptr;
  }

 private:
  Ref<const StmtNode> node_;
};

// for var in [min, min + extent): body
class ForNode : public StmtNode {
 public:
  static constexpr StmtKind kKind = StmtKind::kFor;
  ForNode(Var var, PrimExpr min, PrimExpr extent, ForKind for_kind, Stmt body)
      : StmtNode(kKind),
        var(std::move(var)),
        min(std::move(min)),
        extent(std::move(extent)),
        for_kind(for_kind),
        body(std::move(body)) {}
  const Var var;
  const PrimExpr min;
  const PrimExpr extent;
  const ForKind for_kind;
  const Stmt body;
};

// buffer[indices...] = value (value converted to the buffer's dtype by the builder).
class StoreNode : public StmtNode {
 public:
  static constexpr StmtKind kKind = StmtKind::kStore;
  StoreNode(Buffer buffer, std::vector<PrimExpr> indices, PrimExpr value)
      : StmtNode(kKind),
        buffer(std::move(buffer)),
        indices(std::move(indices)),
        value(std::move(value)) {}
  const Buffer buffer;
  const std::vector<PrimExpr> indices;
  const PrimExpr value;
};

// let var = value in body (var is immutable).
class LetStmtNode : public StmtNode {
 public:
  static constexpr StmtKind kKind = StmtKind::kLet;
  LetStmtNode(Var var, PrimExpr value, Stmt body)
      : StmtNode(kKind), var(std::move(var)), value(std::move(value)), body(std::move(body)) {}
  const Var var;
  const PrimExpr value;
  const Stmt body;
};

// Scratch memory for `buffer` during body. kLocal buffers must have a
// constant shape and live on the stack of the thread that runs the
// statement; kGlobal ones come from the runtime's workspace service (any
// shape) and are freed when body ends. Mutable through Store.
class AllocateNode : public StmtNode {
 public:
  static constexpr StmtKind kKind = StmtKind::kAllocate;
  AllocateNode(Buffer buffer, Stmt body)
      : StmtNode(kKind), buffer(std::move(buffer)), body(std::move(body)) {}
  const Buffer buffer;
  const Stmt body;
};

class SeqStmtNode : public StmtNode {
 public:
  static constexpr StmtKind kKind = StmtKind::kSeq;
  explicit SeqStmtNode(std::vector<Stmt> seq) : StmtNode(kKind), seq(std::move(seq)) {}
  const std::vector<Stmt> seq;
};

class IfThenElseNode : public StmtNode {
 public:
  static constexpr StmtKind kKind = StmtKind::kIf;
  IfThenElseNode(PrimExpr cond, Stmt then_case, Stmt else_case)
      : StmtNode(kKind),
        cond(std::move(cond)),
        then_case(std::move(then_case)),
        else_case(std::move(else_case)) {}
  const PrimExpr cond;
  const Stmt then_case;
  const Stmt else_case;  // may be undefined
};

// If cond is false the kernel reports `message` through the runtime's error
// service and returns non-zero; otherwise body runs.
class AssertStmtNode : public StmtNode {
 public:
  static constexpr StmtKind kKind = StmtKind::kAssert;
  AssertStmtNode(PrimExpr cond, std::string message, Stmt body)
      : StmtNode(kKind),
        cond(std::move(cond)),
        message(std::move(message)),
        body(std::move(body)) {}
  const PrimExpr cond;
  const std::string message;
  const Stmt body;
};

// Evaluates an expression for its side effects (rare; a no-op when pure).
class EvaluateNode : public StmtNode {
 public:
  static constexpr StmtKind kKind = StmtKind::kEvaluate;
  explicit EvaluateNode(PrimExpr value) : StmtNode(kKind), value(std::move(value)) {}
  const PrimExpr value;
};

// A 16 x 16 tile: of a fragment buffer, `at` indexes all but its last two
// dims (dim 0 the warp); of a kShared buffer, `at` indexes every dim and
// names the tile's top-left element, the tile spanning the last two dims.
// (AsyncCopy: the first of a run of elements along the last dim.)
struct TileRef {
  Buffer buffer;
  std::vector<PrimExpr> at;
};

// A warp-collective tensor-core statement (kernel_ir.h, "Tensor cores"),
// one of:
//   kFill   frag = value                     (an accumulator)
//   kLoad   frag = args[0]                   (kMatrixA / kMatrixB from shared)
//   kMma    frag += args[0] x args[1]        (accumulator += A x B, float32)
//   kStore  args[0] = frag                   (an accumulator to shared)
// and the warpgroup statements ("Warpgroup MMA" above; frag is the
// warpgroup's accumulator, at = {warpgroup}):
//   kWarpgroupMma    frag = (value ? frag : 0) + args[0] x args[1]
//                    (args[0] the 64 x K tile of A at its first element,
//                    args[1] the K x N tile of B at its first element)
//   kWarpgroupStore  args[0][i][j] = frag[i][value + j] for i < 64, j < W
//                    (args[0] a float32 shared tile of W columns at its
//                    first element; value a constant column)
// Operands are float16 or bfloat16 (both the same), accumulators float32.
enum class MatrixOp : uint8_t { kFill, kLoad, kMma, kStore, kWarpgroupMma, kWarpgroupStore };
class MatrixTileNode : public StmtNode {
 public:
  static constexpr StmtKind kKind = StmtKind::kMatrixTile;
  MatrixTileNode(MatrixOp op, TileRef frag, std::vector<TileRef> args, PrimExpr value)
      : StmtNode(kKind),
        op(op),
        frag(std::move(frag)),
        args(std::move(args)),
        value(std::move(value)) {}
  const MatrixOp op;
  const TileRef frag;
  const std::vector<TileRef> args;
  const PrimExpr value;  // kFill
};

// One thread's asynchronous copy or fence (kernel_ir.h, "Asynchronous
// copies"), one of:
//   kCopy   dst[.., j + e] = valid ? src[.., j + e] : 0  for e < lanes
//           (dst kShared, src a tensor parameter, lanes x dtype = 16 bytes;
//           src is read only where valid, but must be in range regardless)
//   kFence  commit this thread's copies since its last fence as a group,
//           then wait until at most `pending` of its groups are in flight
//   kProxyFence  make this thread's completed shared-memory writes visible
//           to the tensor cores' reads ("Warpgroup MMA")
enum class AsyncOp : uint8_t { kCopy, kFence, kProxyFence };
class AsyncCopyNode : public StmtNode {
 public:
  static constexpr StmtKind kKind = StmtKind::kAsyncCopy;
  AsyncCopyNode(AsyncOp op, TileRef dst, TileRef src, int lanes, PrimExpr valid, int pending)
      : StmtNode(kKind),
        op(op),
        dst(std::move(dst)),
        src(std::move(src)),
        lanes(lanes),
        valid(std::move(valid)),
        pending(pending) {}
  const AsyncOp op;
  const TileRef dst, src;  // kCopy
  const int lanes;         // kCopy
  const PrimExpr valid;    // kCopy; undefined: always
  const int pending;       // kFence
};

// Whether `scope` is one of a tensor-core fragment's.
inline bool IsFragmentScope(BufferNode::Scope scope) {
  return scope == BufferNode::Scope::kMatrixA || scope == BufferNode::Scope::kMatrixB ||
         scope == BufferNode::Scope::kAccumulator ||
         scope == BufferNode::Scope::kWarpgroupAccumulator;
}

// Rows of a warpgroup's accumulator, and threads of a warpgroup.
inline constexpr int kWarpgroupRows = 64;
inline constexpr int kWarpgroupThreads = 128;

Stmt For(Var var, PrimExpr min, PrimExpr extent, ForKind kind, Stmt body);
// Converts value to the buffer's dtype when they differ.
Stmt Store(Buffer buffer, std::vector<PrimExpr> indices, PrimExpr value);
Stmt LetStmt(Var var, PrimExpr value, Stmt body);
Stmt Allocate(Buffer buffer, Stmt body);
// Flattens nested sequences and drops undefined entries; one entry is returned as is.
Stmt Seq(std::vector<Stmt> seq);
Stmt IfThenElse(PrimExpr cond, Stmt then_case, Stmt else_case = Stmt());
Stmt AssertStmt(PrimExpr cond, std::string message, Stmt body);
Stmt Evaluate(PrimExpr value);
// A hint, no effect on results: the cache line holding buffer[indices] is
// fetched toward the L1 (a CPU's prefetch instruction; nothing on a GPU).
// The element need not be read later, but must be in bounds. It is
// Evaluate(PrimCall(int32, kPrefetchOp, {Load(buffer, indices)})), in the
// text `T.evaluate(T.prefetch(A[i, j]))` (TVM's T.prefetch takes a region).
inline constexpr char kPrefetchOp[] = "prefetch";
Stmt Prefetch(Buffer buffer, std::vector<PrimExpr> indices);
Stmt MatrixFill(TileRef acc, PrimExpr value);
Stmt MatrixLoad(TileRef frag, TileRef src);
Stmt MatrixMma(TileRef acc, TileRef a, TileRef b);
Stmt MatrixStore(TileRef dst, TileRef acc);
Stmt WarpgroupMma(TileRef acc, TileRef a, TileRef b, PrimExpr accumulate);
Stmt WarpgroupStore(TileRef dst, TileRef acc, int64_t first_col);
// What a MatrixTile statement does, as loops over the 16 x 16 elements of
// ordinary buffers: the CPU's code for it, and its definition.
Stmt ExpandMatrixTile(const MatrixTileNode& n);
Stmt AsyncCopy(TileRef dst, TileRef src, int lanes, PrimExpr valid = PrimExpr());
Stmt AsyncFence(int pending);
Stmt AsyncProxyFence();
// What an AsyncCopyNode does on a CPU: the copy's element loop, or nothing
// (an undefined Stmt) for a fence.
Stmt ExpandAsyncCopy(const AsyncCopyNode& n);

// The dynamic shared memory a device launch whose body is `body` asks for:
// 0 when it allocates no kSwizzle128 buffer (its shared buffers are static
// then); else all its kShared buffers come from dynamic shared memory, each
// at a 1024-byte boundary (a swizzle period) and taking a multiple of 1024
// bytes, after 1024 bytes of slack that align the block's base to 1024.
int64_t DynamicSharedBytes(const Stmt& body);
inline constexpr int64_t kSharedAlignment = 1024;

// Calls f(buffer) for each store in `s` (stores, tensor-core stores,
// asynchronous copies), in statement order.
void VisitStoredBuffers(const Stmt& s, const std::function<void(const Buffer&)>& f);

// A kernel parameter: a tensor (a DLTensor* at run time, described by
// `buffer`, whose shape vars are bound from the DLTensor at entry and whose
// shape expressions are checked) or an int64 scalar (`var`).
struct KernelParam {
  Buffer buffer;  // set for tensors
  Var var;        // set for scalars
  static KernelParam Tensor(Buffer b) { return KernelParam{std::move(b), Var()}; }
  static KernelParam Scalar(Var v) { return KernelParam{Buffer(), std::move(v)}; }
  bool is_tensor() const { return buffer != nullptr; }
};

// A kernel: the unit of code generation, exported from the kernel library
// under `name` with the ABI of docs/design/kernel-abi.md. By convention
// inputs come first and outputs (written by the kernel) last.
class KernelFuncNode : public Object {
 public:
  KernelFuncNode(std::string name, std::vector<KernelParam> params, Stmt body, int num_outputs)
      : name(std::move(name)),
        params(std::move(params)),
        body(std::move(body)),
        num_outputs(num_outputs) {}
  absl::string_view type_key() const override { return "KernelFunc"; }
  const std::string name;
  const std::vector<KernelParam> params;
  const Stmt body;
  const int num_outputs;
};
using KernelFunc = Ref<const KernelFuncNode>;
KernelFunc MakeKernelFunc(std::string name, std::vector<KernelParam> params, Stmt body,
                          int num_outputs = 1);

// TVMScript-like text of a kernel, for --emit ir and test failure messages:
//   @T.prim_func
//   def add(A: T.Buffer((n, 4), "float32"), B: ..., C: ...):
//       for i0 in T.parallel(n):
//           for i1 in T.vectorized(4):
//               C[i0, i1] = A[i0, i1] + B[i0, i1]
std::string ToString(const KernelFunc& func);
std::string ToString(const Stmt& stmt, int indent = 0);

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_TIR_KERNEL_IR_H_
