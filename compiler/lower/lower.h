// Lowering of one operator call to a kernel: the default loop nest for
// per-element operators, buffers for struct infos, and LowerCallToKernel,
// which turns one normalized call of a registered operator (compiler/relax/op_registry.h)
// into a KernelFunc that codegen can compile. Fusion builds on the same
// pieces (MakeElementwiseLoopNest, BufferForStructInfo) for fused groups.
//
// Tuple arguments (concat's tensors) are flattened: every tensor field of a
// Tuple argument gets its own kernel parameter, and its reader and buffer
// are appended to LowerContext::inputs / input_buffers after the entries of
// the call's own arguments, in argument order then field order (the Tuple
// argument's own entry is empty). Operators taking a Tuple read it there.
//
// Thread contract: free functions over immutable IR; thread-safe.
#ifndef TETHER_COMPILER_LOWER_LOWER_H_
#define TETHER_COMPILER_LOWER_LOWER_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/relax/expr.h"
#include "compiler/relax/struct_info.h"
#include "compiler/tir/kernel_ir.h"
#include "compiler/tir/kernel_target.h"

namespace tether::compiler {

// The loop nest writing compute(indices) to every element of `out` (one index
// per dimension of `out`). Leading dimensions are fused into one parallel
// loop until it has enough iterations (64, or any symbolic extent), the
// dimensions between run serially, and the innermost is vectorized. When
// the outer dimensions together are a small constant (a 1-D output, or
// (2, 1000000)), the innermost dimension is split into parallel chunks so
// the work still spreads over threads. Short constant rows that are not
// whole vectors (a 28 x 28 map) are walked inside the parallel loop as one
// flat row of 16-lane vectors where every load is contiguous or uniform
// along it. Rank 0 gives a single Store. Extents may be symbolic. With
// `gpu`, the nest is MakeFlatParallelLoop's.
Stmt MakeElementwiseLoopNest(const Buffer& out,
                             const std::function<PrimExpr(const std::vector<PrimExpr>&)>& compute,
                             bool gpu = false);

// The same nest over `shape` with a statement per element: body(indices)
// is placed inside the loops, and the innermost loop gets `inner_kind`
// (kVectorized for stores, kSerial when the body itself loops, as a
// reduction's does). Allocations made by `body` are per iteration, so a
// kLocal accumulator is private to the thread running it. With `gpu`, the
// nest is MakeFlatParallelLoop's and `inner_kind` is unused.
Stmt MakeParallelLoopNest(const std::vector<PrimExpr>& shape,
                          const std::function<Stmt(const std::vector<PrimExpr>&)>& body,
                          ForKind inner_kind = ForKind::kVectorized, bool gpu = false);

// Row-major indices of `flat` over `dims` (empty for no dims): the first
// index needs no modulo, unit dims give 0.
std::vector<PrimExpr> Unflatten(const PrimExpr& flat, const std::vector<PrimExpr>& dims);

// The GPU form of the nest: one kParallel loop over every element of
// `shape` (row-major; the indices are unflattened from the loop variable),
// body(indices) inside, so a device launch gets one thread per element
// however small or unbalanced the dimensions are. Rank 0 gives a loop of
// one iteration (one thread). Extents may be symbolic.
Stmt MakeFlatParallelLoop(const std::vector<PrimExpr>& shape,
                          const std::function<Stmt(const std::vector<PrimExpr>&)>& body);

// GPU block schedules over rows (kernel_ir.h): a block of kDeviceBlockThreads
// threads per row (or per output element of a reduction) pays for rows at
// least kGpuMinBlockRow long or of unknown length; shorter ones stay one
// thread per row.
inline constexpr int64_t kGpuMinBlockRow = 64;
bool WorthBlockRow(const PrimExpr& length);

// In a kBlock body: one kThread loop in which thread t runs body(r) for
// r = t, t + kDeviceBlockThreads, ... below `extent` (coalesced).
Stmt BlockStrided(const std::string& name, const PrimExpr& extent,
                  const std::function<Stmt(const PrimExpr&)>& body);

// In a kBlock body: the block-wide fold of reader(r) over [0, extent) into
// red[0] (`red` a kShared buffer of kDeviceBlockThreads elements): each
// thread folds its strided share into red[t], then a tree halves the live
// entries, one kThread loop (one barrier) per step. Block-level code after it
// reads red[0]; nothing may store to `red` again in that kBlock iteration
// (a thread still reading it would see the new value). With `each`, every
// element's value v = reader(r) is also given to each(r, v) (as a let,
// computed once) in the thread that folds it: the thread BlockStrided gives
// element r, so a later BlockStrided pass reads what each stored there.
using ElementStmt = std::function<Stmt(const PrimExpr& r, const PrimExpr& value)>;
Stmt BlockReduce(const std::string& name, const PrimExpr& extent, DataType dtype,
                 const PrimExpr& init, const std::function<PrimExpr(const PrimExpr&)>& reader,
                 const std::function<PrimExpr(const PrimExpr&, const PrimExpr&)>& combine,
                 const Buffer& red, const ElementStmt& each = nullptr);

// Rows held in registers: a row of constant length at most
// kDeviceBlockThreads * kMaxRowSlots is read once into a kPerThread buffer
// [kDeviceBlockThreads, RowSlots(length)] (RowSlotBuffer) and every later
// pass works there. Element r of the row is slot i = r / kDeviceBlockThreads
// of thread t = r % kDeviceBlockThreads (coalesced, as BlockStrided).
inline constexpr int64_t kMaxRowSlots = 32;
int64_t RowSlots(int64_t length);
Buffer RowSlotBuffer(const std::string& name, int64_t length, DataType dtype);
struct RowSlot {
  PrimExpr r;  // the element of the row
  PrimExpr t;  // the kThread loop's var (undefined outside BlockSlots passes)
  PrimExpr i;  // the slot: a RowSlotBuffer's element [t, i] holds element r
};
using SlotExpr = std::function<PrimExpr(const RowSlot&)>;
using SlotStmt = std::function<Stmt(const RowSlot& s, const PrimExpr& value)>;

// In a kBlock body: one kThread loop in which thread t runs body(slot) for
// its slots of a row of `length` elements (an unrolled loop; slots past the
// row skipped).
Stmt BlockSlots(const std::string& name, int64_t length,
                const std::function<Stmt(const RowSlot&)>& body);
// BlockReduce over the slots of a row of `length` elements: reader(slot)
// folded into red[0], each(slot, value) (optional) run on every value.
Stmt BlockSlotReduce(const std::string& name, int64_t length, DataType dtype, const PrimExpr& init,
                     const SlotExpr& reader,
                     const std::function<PrimExpr(const PrimExpr&, const PrimExpr&)>& combine,
                     const Buffer& red, const SlotStmt& each = nullptr);

// A global-scope buffer named `name` for a tensor struct info with a known
// shape (dims may be symbolic) and dtype. INVALID_ARGUMENT when `sinfo` is
// not a tensor or its shape or dtype is unknown.
absl::StatusOr<Buffer> BufferForStructInfo(const StructInfo& sinfo, const std::string& name);

// The kernel `kernel_name` for one normalized call (op an OpNode naming a
// registered operator that lowers to a kernel; args and the call carry
// struct info). Parameters: one tensor per tensor argument (Tuple fields
// flattened, see above), shaped by its struct info, then one output buffer
// per output tensor (a Tuple struct info gives several), then one int64
// scalar per symbolic variable that no parameter's shape has as a dimension
// of its own (it appears only inside expressions; the caller passes its
// value, as call_tir's tir_vars), in order of first use. A `compute`
// operator runs through MakeElementwiseLoopNest; a `schedule` operator is
// called with the identity epilogue. Readers Load from the parameter
// buffers. For a GPU target, the kernel is lowered for a GPU (LowerContext::target;
// per-element operators through MakeFlatParallelLoop).
// INVALID_ARGUMENT: not an operator call, unknown operator, an operator that
// does not lower to a kernel, missing struct info or an unknown shape.
// Errors of the operator's schedule pass through.
absl::StatusOr<KernelFunc> LowerCallToKernel(const CallNode& call, const std::string& kernel_name,
                                             const KernelTarget& target = {});

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_LOWER_LOWER_H_
