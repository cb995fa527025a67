// The emitter behind kernel_emitter.h: one Emitter lowers a set of kernels
// (or of device launches) into one LLVM module. Values are kept in a
// "compute" type (bool as i1, float16/bfloat16 as float) and converted at
// loads and stores to their "storage" type (bool as i8, float16/bfloat16 as
// i16); on a CPU the half conversions are done in integer IR so no
// compiler-rt call is ever needed, on a GPU they are the cvt instructions.
//
// Its members are defined in three files: emitter_expr.cc (types, error
// messages, conversions, expressions), emitter_stmt.cc (statements, loops,
// buffers, tensor cores, parallel loops) and kernel_emitter.cc (kernel
// entries, device entries, the library's globals).
//
// Internal to compiler/backend/llvm/: use kernel_emitter.h.
//
// Thread contract: one Emitter per module and thread.
#ifndef TETHER_COMPILER_BACKEND_LLVM_EMITTER_H_
#define TETHER_COMPILER_BACKEND_LLVM_EMITTER_H_

#include <cctype>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "compiler/backend/llvm/kernel_emitter.h"
#include "compiler/backend/llvm/math_emitter.h"
#include "compiler/backend/llvm/vectorize.h"
#include "compiler/tir/kernel_ir.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Module.h"
#include "runtime/kernel/kernel_library.h"

namespace tether::compiler::codegen::emitter_internal {

inline constexpr int kMessageBytes = 512;

// DLTensor field indices (DLPack 0.6).
enum DLField {
  kDLData = 0,
  kDLDevice = 1,
  kDLNdim = 2,
  kDLDtype = 3,
  kDLShape = 4,
  kDLStrides = 5,
  kDLByteOffset = 6
};
// TetherKernelServices field indices.
enum ServiceField {
  kSvcVersion = 0,
  kSvcCtx = 2,
  kSvcParallelFor = 3,
  kSvcWorkspaceAlloc = 4,
  kSvcWorkspaceFree = 5,
  kSvcSetError = 6
};

inline bool IsCIdentifier(absl::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

// A piece of a runtime error message: text, an i64 value printed in
// decimal, or (String) a NUL-terminated string the code points to.
struct MsgPart {
  std::string text;
  llvm::Value* value = nullptr;
  bool value_is_string = false;
  MsgPart(std::string t) : text(std::move(t)) {}  // NOLINT
  MsgPart(const char* t) : text(t) {}             // NOLINT
  MsgPart(llvm::Value* v) : value(v) {}           // NOLINT
  static MsgPart String(llvm::Value* p) {
    MsgPart part(p);
    part.value_is_string = true;
    return part;
  }
};

class Emitter {
 public:
  Emitter(llvm::LLVMContext& ctx, const EmitOptions& options)
      : ctx_(ctx),
        options_(options),
        module_(std::make_unique<llvm::Module>("tether_kernels", ctx)),
        b_(ctx),
        math_(module_.get()) {
    i8_ = b_.getInt8Ty();
    i16_ = b_.getInt16Ty();
    i32_ = b_.getInt32Ty();
    i64_ = b_.getInt64Ty();
    ptr_ = b_.getPtrTy();
    dltensor_ty_ =
        llvm::StructType::create(ctx,
                                 {ptr_, llvm::StructType::get(ctx, {i32_, i32_}), i32_,
                                  llvm::StructType::get(ctx, {i8_, i8_, i16_}), ptr_, ptr_, i64_},
                                 "DLTensor");
    services_ty_ = llvm::StructType::create(ctx, {i32_, i32_, ptr_, ptr_, ptr_, ptr_, ptr_},
                                            "TetherKernelServices");
  }

  absl::StatusOr<std::unique_ptr<llvm::Module>> Run(const std::vector<KernelFunc>& kernels);

  // Device launch kernels (device_split.h) as PTX entries for sm_<sm>.
  absl::StatusOr<std::unique_ptr<llvm::Module>> RunDevice(const std::vector<KernelFunc>& launches,
                                                          int sm);

 private:
  // ---- Per-function state ----
  struct FnState {
    llvm::Function* fn = nullptr;
    llvm::Value* services = nullptr;
    std::vector<llvm::Value*> workspaces;  // live, freed on error returns
    bool in_parallel = false;
    std::string kernel;
    int64_t shared_bytes = 0;  // of the kShared buffers so far (device entries)
    // A launch with dynamic shared memory (DynamicSharedBytes): its base,
    // aligned to kSharedAlignment, and the next free offset.
    llvm::Value* dynamic_shared = nullptr;
    int64_t dynamic_offset = 0;
  };

  // ---- Types ----
  absl::StatusOr<llvm::Type*> ComputeType(DataType t);
  absl::StatusOr<llvm::Type*> StorageType(DataType t);
  template <typename... A>
  absl::Status Unsupported(const A&... a) {
    return absl::InvalidArgumentError(absl::StrCat("kernel ", fs_.kernel, ": unsupported ", a...));
  }

  // ---- Services and errors ----
  llvm::Value* Service(ServiceField field);
  llvm::FunctionType* SetErrorTy();
  // Emits: build the message, set_error, free live workspaces, return `code`.
  // Leaves the builder in a fresh (unreachable) block.
  void EmitFail(const std::vector<MsgPart>& parts, int32_t code);
  // if (!ok) fail; continues on the ok path.
  void EmitCheck(llvm::Value* ok, const std::vector<MsgPart>& parts, int32_t code);
  void FreeWorkspace(llvm::Value* p);
  llvm::Value* EntryAlloca(llvm::Type* ty, const char* name);

  // i64 append_str(ptr buf, i64 pos, ptr str): copies until NUL or the buffer is full.
  llvm::Function* AppendStrFn();
  // i64 append_i64(ptr buf, i64 pos, i64 v): decimal digits.
  llvm::Function* AppendI64Fn();
  // A helper of the library: a definition with an entry block, or, where
  // HelpersElsewhere(), a declaration to leave as it is.
  llvm::Function* NewHelper(const char* name, std::vector<llvm::Type*> params);
  // The library's helpers (the append and check functions, the memory
  // builtins) exist once per library. In a whole library they are internal
  // to its one module; in a sharded one (EmitOptions::emit) the module with
  // the library globals defines them, hidden, and the others declare them,
  // so each module's optimizer and code generator do not compile them again.
  bool HelpersElsewhere() const { return !options_.emit.empty() && !options_.library_globals; }
  // `name` of `type` as a helper: declared (HelpersElsewhere) or to be defined here.
  llvm::Function* HelperFunction(llvm::FunctionType* type, const std::string& name);
  // i32 check_tensor(ptr services, ptr tensor, ptr desc): the checks of a
  // tensor argument that need nothing but the argument (non-NULL, on the
  // CPU, ndim, dtype, compact strides, the dims that are constants), against
  // `desc` (TensorCheckDesc); 0, or the error set and
  // TETHER_KERNEL_INVALID_ARGUMENT. One per module: the kernels' entries call
  // it instead of carrying the checks inline, which kept half of every
  // kernel's code in argument checks and their messages.
  llvm::Function* CheckTensorFn();
  // The constant descriptor of parameter `i` (a tensor) of `k` for CheckTensorFn.
  llvm::Constant* TensorCheckDesc(const KernelFunc& k, int i);

  // ---- half <-> float: the GPU's cvt instructions, in integer IR on a CPU ----
  llvm::Value* HalfToFloat(llvm::Value* h16);
  llvm::Value* FloatToHalf(llvm::Value* f);
  llvm::Value* BF16ToFloat(llvm::Value* h);
  llvm::Value* FloatToBF16(llvm::Value* f);

  absl::StatusOr<llvm::Value*> ToCompute(llvm::Value* v, DataType t);
  llvm::Value* ToStorage(llvm::Value* v, DataType t);

  // ---- Casts between compute values ----
  absl::StatusOr<llvm::Value*> CastValue(llvm::Value* v, DataType from, DataType to);

  // ---- Expressions ----
  absl::StatusOr<llvm::Value*> EmitExprAs(const PrimExpr& e, DataType t);
  absl::StatusOr<llvm::Value*> EmitIndex(const PrimExpr& e);

  absl::StatusOr<llvm::Value*> EmitExpr(const PrimExpr& e);

  absl::StatusOr<llvm::Value*> EmitBinary(const PrimExpr& e);

  // Row-major flat address of buffer[indices].
  absl::StatusOr<llvm::Value*> ElementAddress(const Buffer& buffer,
                                              const std::vector<PrimExpr>& indices);

  // A 16-bit float value that is a load of the same dtype (or a select of
  // such loads and constants) in its storage form, with no conversion to
  // float and back: copies, staging and padding of float16 / bfloat16 data.
  // Null when `e` is anything else.
  absl::StatusOr<llvm::Value*> EmitStorageCopy(const PrimExpr& e, DataType t);
  static bool IsStorageCopy(const PrimExpr& e);

  // ---- Statements ----
  absl::Status EmitStmt(const Stmt& s);

  // A kThread loop on a GPU: the body once, var = the thread's index in its
  // block (the loop's extent is the block size), then a barrier. A kWarp
  // loop likewise with var = the warp's index (`shift` 5: the thread's / 32),
  // a kWarpgroup loop with the warpgroup's (`shift` 7).
  absl::Status EmitThreadLoop(const ForNode* n, int shift);

  // ---- Tensor cores (device entries; rules checked by SplitForDevice) ----

  // The thread's registers of the fragment `t`.
  absl::StatusOr<llvm::Value*> FragmentSlot(const TileRef& t);

  absl::Status EmitMatrixTile(const MatrixTileNode& n);
  // Hopper's warpgroup MMA (sm_90a; kernel_ir.h, "Warpgroup MMA").
  absl::Status EmitWarpgroupMma(const MatrixTileNode& n);
  absl::Status EmitWarpgroupStore(const MatrixTileNode& n);
  // The address of element `indices` of a kSwizzle128 buffer (prim_expr.h).
  absl::StatusOr<llvm::Value*> SwizzledAddress(const Buffer& buffer,
                                               const std::vector<PrimExpr>& indices);

  // cp.async (sm_80 and newer; rules checked by SplitForDevice).
  absl::Status EmitAsyncCopy(const AsyncCopyNode& n);

  // ---- Buffers and loops ----
  absl::Status EmitAllocate(const AllocateNode* n);

  llvm::MDNode* LoopMetadata(ForKind kind);

  // for var in [begin, end): body, with `var` = the induction variable.
  absl::Status EmitRange(const Var& var, llvm::Value* begin, llvm::Value* end, ForKind kind,
                         const Stmt& body);

  absl::Status EmitPrefetch(const PrimCallNode& call);
  absl::Status EmitLoop(const ForNode* n);

  // A kUnrolled loop with a small constant extent: the body once per
  // iteration, the var a constant offset from min, so the accesses of a
  // register tile have constant offsets before any LLVM pass runs.
  static constexpr int64_t kMaxUnroll = 16;
  absl::Status EmitUnrolled(const ForNode* n, int64_t extent);

  // A loop VectorizableLanes accepted (vectorize.h): the body once, with the
  // loop var a vector <min, min+1, ...>; contiguous accesses become vector
  // loads and stores at the lane-0 address, others gathers.
  absl::Status EmitVectorLoop(const ForNode* n, int64_t lanes);

  // A transpose tile (vectorize.h): n vector loads along the load's var, a
  // transpose in registers, n vector stores along the store's.
  absl::Status EmitTransposeTile(const ForNode* outer, const TransposeTile& t);
  // Rows r[i] (lane j: element (i, j)) to columns (lane i of result j).
  std::vector<llvm::Value*> TransposeInRegisters(std::vector<llvm::Value*> r);
  // `v` through llvm.arithmetic.fence: no instruction, but the combiners
  // do not look through it.
  llvm::Value* ArithmeticFence(llvm::Value* v);

  // The address of lane 0's element of a contiguous access.
  absl::StatusOr<llvm::Value*> Lane0Address(const Buffer& buffer,
                                            const std::vector<PrimExpr>& indices);

  absl::Status EmitVectorStore(const StoreNode* n);

  absl::StatusOr<llvm::Value*> EmitVectorLoad(const LoadNode* l);

  // `v` as a vector of the current lane count (a splat when scalar).
  llvm::Value* Widen(llvm::Value* v);
  // Splats the scalar one when the other is a vector.
  void Unify(llvm::Value*& a, llvm::Value*& c);

  // The state one function sees: bound vars and buffers. Captured by value
  // into outlined functions.
  struct Capture {
    const Object* key;
    bool is_buffer;
    llvm::Value* value;
  };
  std::vector<Capture> LiveCaptures();

  // Creates `name`(services, captures...) with noalias buffer pointers, maps
  // the captures to its arguments and leaves the builder in its entry block.
  llvm::Function* BeginInner(const std::string& name, const std::vector<Capture>& caps,
                             std::vector<llvm::Type*> leading);

  absl::Status EmitParallelFor(const ForNode* n);

  // ---- Kernel entry ----
  absl::StatusOr<llvm::Function*> EmitKernel(const KernelFunc& k);

  // One PTX entry (docs/design/kernel-abi.md, "PTX entries"): the kernel's
  // parameters but the last two as 64-bit values, then every tensor dim;
  // tether_tid and tether_nthreads from the special registers.
  absl::Status EmitDeviceEntry(const KernelFunc& k);

  // Binds `var` to `value` (an i64) or, when bound, checks equality.
  absl::Status BindOrCheck(const PrimExpr& var, llvm::Value* value, std::vector<MsgPart> msg);

  // The backend lowers llvm.memset/memcpy/memmove (which the optimizer forms
  // from loops) to calls of the C functions; the library defines its own
  // (helpers: local, or hidden in a sharded library) and keeps them alive
  // through llvm.compiler.used, so nothing is undefined.
  void EmitMemoryBuiltins();

  // ---- System library registration ----
  void EmitRegistration(const std::vector<KernelInfo>& infos,
                        const std::vector<llvm::Function*>& entries,
                        llvm::GlobalVariable* manifest);

  llvm::LLVMContext& ctx_;
  EmitOptions options_;
  std::unique_ptr<llvm::Module> module_;
  llvm::IRBuilder<> b_;
  MathEmitter math_;
  llvm::Type* i8_;
  llvm::Type* i16_;
  llvm::IntegerType* i32_;
  llvm::Type* i64_;
  llvm::PointerType* ptr_;
  llvm::StructType* dltensor_ty_;
  llvm::StructType* services_ty_;
  llvm::Function* append_str_ = nullptr;
  llvm::Function* append_i64_ = nullptr;
  llvm::Function* check_tensor_ = nullptr;
  // CheckTensorFn's descriptor, {ndim, dtype (code | bits << 8 | lanes << 16),
  // argument text, dim text, dtype name, dims (-1: not a constant)}.
  llvm::StructType* check_desc_ty_ = nullptr;
  int parallel_count_ = 0;
  bool device_ = false;  // emitting PTX entries (RunDevice)
  int sm_ = 0;           // their architecture
  FnState fs_;
  // Inside EmitVectorLoop: the lane count (0 outside), the loop var, its
  // lane-0 value and the vars that vary across lanes.
  struct VecState {
    int64_t lanes = 0;
    Var var;
    llvm::Value* lane0 = nullptr;
    VaryingVars varying;
  };
  VecState vec_;
  absl::flat_hash_map<const PrimExprNode*, llvm::Value*> vars_;
  absl::flat_hash_map<const BufferNode*, llvm::Value*> buffers_;
  // kPerThread buffers emitted as one thread's slice (device kernels).
  absl::flat_hash_set<const BufferNode*> slices_;
  // Fragment buffers: the thread's registers of each (device kernels).
  absl::flat_hash_map<const BufferNode*, llvm::Value*> fragments_;
  // Static shared memory a block may have on every architecture we target,
  // and the most dynamic shared memory any GPU gives a block (227 KiB).
  static constexpr int64_t kMaxSharedBytes = 48 << 10;
  static constexpr int64_t kMaxDynamicSharedBytes = 227 << 10;
};

}  // namespace tether::compiler::codegen::emitter_internal

#endif  // TETHER_COMPILER_BACKEND_LLVM_EMITTER_H_
