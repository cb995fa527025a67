// Kernel code generation end to end: hand-built KernelFuncs compiled with real
// LLVM, linked with in-process lld, loaded with memfd + dlopen and called
// through the kernel ABI.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "compiler/backend/llvm/jit.h"
#include "compiler/backend/llvm/llvm_codegen.h"
#include "compiler/backend/llvm/target.h"
#include "compiler/tir/kernel_ir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/device/host_target.h"
#include "runtime/kernel/kernel_library.h"
#include "runtime/vm/exec_builder.h"
#include "runtime/vm/local_vm.h"

namespace tether::compiler {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const DataType kF32 = DataType::Float(32);

template <typename T>
Tensor MakeTensor(std::vector<int64_t> shape, DataType dtype, const std::vector<T>& values) {
  absl::StatusOr<Tensor> t =
      Tensor::FromBytes(shape, dtype, values.data(), values.size() * sizeof(T));
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}
template <typename T>
std::vector<T> Read(const Tensor& t) {
  std::vector<T> out(t->NumElements());
  EXPECT_TRUE(t.CopyToBytes(out.data(), out.size() * sizeof(T)).ok());
  return out;
}

// C[i] = A[i] + B[i] over a symbolic n.
KernelFunc AddKernel(const std::string& name = "add") {
  Var n("n");
  Buffer a = MakeBuffer("A", kF32, {n});
  Buffer b = MakeBuffer("B", kF32, {n});
  Buffer c = MakeBuffer("C", kF32, {n});
  Var i("i");
  Stmt body = For(i, 0, n, ForKind::kSerial, Store(c, {i}, Load(a, {i}) + Load(b, {i})));
  return MakeKernelFunc(
      name, {KernelParam::Tensor(a), KernelParam::Tensor(b), KernelParam::Tensor(c)}, body);
}

// Y[i] = op(X[i]) over n.
KernelFunc UnaryKernel(const std::string& op) {
  Var n("n");
  Buffer x = MakeBuffer("X", kF32, {n});
  Buffer y = MakeBuffer("Y", kF32, {n});
  Var i("i");
  Stmt body = For(i, 0, n, ForKind::kVectorized, Store(y, {i}, Call(kF32, op, {Load(x, {i})})));
  return MakeKernelFunc(op + "_kernel", {KernelParam::Tensor(x), KernelParam::Tensor(y)}, body);
}

// The same over rows of 16, the row loop emitted as explicit vector code
// (vectorize.h), so the math runs on <16 x float>.
KernelFunc UnaryRowsKernel(const std::string& op) {
  Var n("n");
  Buffer x = MakeBuffer("X", kF32, {n, 16});
  Buffer y = MakeBuffer("Y", kF32, {n, 16});
  Var i("i"), j("j");
  Stmt body =
      For(i, 0, n, ForKind::kSerial,
          For(j, 0, 16, ForKind::kVectorized, Store(y, {i, j}, Call(kF32, op, {Load(x, {i, j})}))));
  return MakeKernelFunc(op + "_rows", {KernelParam::Tensor(x), KernelParam::Tensor(y)}, body);
}

Function GetKernel(const Ref<Module>& lib, const std::string& name) {
  absl::StatusOr<Function> f = lib->GetFunction(name);
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? *f : Function();
}

TEST(CodegenTest, ElementwiseAddRunsWithTwoSizesFromOneLibrary) {
  absl::StatusOr<Ref<Module>> lib = BuildAndLoad({AddKernel()});
  ASSERT_TRUE(lib.ok()) << lib.status();
  Function add = GetKernel(*lib, "add");
  for (int64_t n : {3, 1000}) {
    std::vector<float> a(n), b(n);
    for (int64_t i = 0; i < n; ++i) {
      a[i] = static_cast<float>(i);
      b[i] = 0.5f * static_cast<float>(i) + 1;
    }
    Tensor ta = MakeTensor({n}, kF32, a), tb = MakeTensor({n}, kF32, b);
    Tensor tc = MakeTensor({n}, kF32, std::vector<float>(n, 0));
    ASSERT_TRUE(add.Call(ta, tb, tc).ok());
    std::vector<float> c = Read<float>(tc);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(c[i], a[i] + b[i]) << i;
  }
}

TEST(CodegenTest, ParallelVectorizedLoopNestOver2D) {
  Var m("m"), n("n");
  Buffer a = MakeBuffer("A", kF32, {m, n});
  Buffer c = MakeBuffer("C", kF32, {m, n});
  Var i("i"), j("j");
  Stmt body = For(i, 0, m, ForKind::kParallel,
                  For(j, 0, n, ForKind::kVectorized,
                      Store(c, {i, j}, Load(a, {i, j}) * MakeConst(kF32, 2) + Cast(kF32, i))));
  KernelFunc k = MakeKernelFunc("scale2d", {KernelParam::Tensor(a), KernelParam::Tensor(c)}, body);
  absl::StatusOr<Ref<Module>> lib = BuildAndLoad({k});
  ASSERT_TRUE(lib.ok()) << lib.status();
  // 37 rows are too little work to hand to the pool and run inline; 400 rows
  // go through the services' parallel_for.
  for (int64_t rows : {37, 400}) {
    const int64_t cols = 129;
    std::vector<float> av(rows * cols);
    for (size_t x = 0; x < av.size(); ++x) av[x] = static_cast<float>(x % 17) - 3;
    Tensor ta = MakeTensor({rows, cols}, kF32, av);
    Tensor tc = MakeTensor({rows, cols}, kF32, std::vector<float>(rows * cols, 0));
    ASSERT_TRUE(GetKernel(*lib, "scale2d").Call(ta, tc).ok());
    std::vector<float> cv = Read<float>(tc);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t col = 0; col < cols; ++col) {
        ASSERT_EQ(cv[r * cols + col], av[r * cols + col] * 2 + static_cast<float>(r)) << rows;
      }
    }
  }
  absl::StatusOr<std::string> ir = EmitLLVMIR({k}, Target::Host());
  ASSERT_TRUE(ir.ok()) << ir.status();
  // The outlined parallel body and the vectorizer's work are in the IR.
  EXPECT_NE(ir->find("scale2d.body.par0"), std::string::npos);
  EXPECT_NE(ir->find("par.inline"), std::string::npos);
  EXPECT_NE(ir->find("llvm.loop.isvectorized"), std::string::npos);
}

// A kernel's body and each parallel loop's chunk are functions of their own
// (noalias buffer arguments), each called from one place. They are marked
// always-inline so that even the -O0 pipeline merges them into their callers
// before LLVM simplifies anything: inlined later, as the default inliner
// would, each body went through the simplification pipeline twice. Only the
// trampoline the thread pool calls stays a function; the library built at
// -O0 computes what the optimized one does.
TEST(CodegenTest, OutlinedBodiesAreInlinedBeforeSimplification) {
  Var m("m");
  Buffer a = MakeBuffer("A", kF32, {m, 64});
  Buffer c = MakeBuffer("C", kF32, {m, 64});
  Var i("i"), j("j");
  Stmt body =
      For(i, 0, m, ForKind::kParallel,
          For(j, 0, 64, ForKind::kSerial, Store(c, {i, j}, Load(a, {i, j}) + MakeConst(kF32, 1))));
  KernelFunc k = MakeKernelFunc("plus1", {KernelParam::Tensor(a), KernelParam::Tensor(c)}, body);
  absl::StatusOr<std::string> ir = EmitLLVMIR({k}, Target::Host(), /*opt_level=*/0);
  ASSERT_TRUE(ir.ok()) << ir.status();
  EXPECT_THAT(*ir, HasSubstr("define internal i32 @plus1.body.par0("));
  EXPECT_THAT(*ir, Not(HasSubstr("@plus1.body(")));
  EXPECT_THAT(*ir, Not(HasSubstr("@plus1.body.par0.inner(")));
  CodegenOptions o0;
  o0.opt_level = 0;
  absl::StatusOr<Ref<Module>> lib = BuildAndLoad({k}, o0);
  ASSERT_TRUE(lib.ok()) << lib.status();
  const int64_t rows = 300;
  std::vector<float> av(rows * 64);
  for (size_t x = 0; x < av.size(); ++x) av[x] = static_cast<float>(x % 23) - 5;
  Tensor ta = MakeTensor({rows, 64}, kF32, av);
  Tensor tc = MakeTensor({rows, 64}, kF32, std::vector<float>(rows * 64, 0));
  ASSERT_TRUE(GetKernel(*lib, "plus1").Call(ta, tc).ok());
  std::vector<float> cv = Read<float>(tc);
  for (size_t x = 0; x < av.size(); ++x) ASSERT_EQ(cv[x], av[x] + 1) << x;
}

// A short constant-extent kVectorized loop is emitted as vector code
// (compiler/backend/llvm/vectorize.h): contiguous, uniform and gathered loads, a
// lane-varying let, and a contiguous store, here under an unrolled loop.
TEST(CodegenTest, ShortConstantLoopsBecomeVectorCode) {
  Var m("m");
  Buffer a = MakeBuffer("A", kF32, {m, 8});
  Buffer at = MakeBuffer("At", kF32, {8, m});
  Buffer c = MakeBuffer("C", kF32, {m, 8});
  Var i("i"), u("u"), j("j"), t("t", kF32);
  Stmt lanes = LetStmt(
      t, Load(a, {i, j}) * MakeConst(kF32, 2),
      Store(c, {i, j},
            t + Load(at, {j, i}) + Load(a, {i, PrimExpr(0)}) + Cast(kF32, u) * MakeConst(kF32, 0)));
  Stmt body = For(i, 0, m, ForKind::kSerial,
                  For(u, 0, 2, ForKind::kUnrolled, For(j, 0, 8, ForKind::kVectorized, lanes)));
  KernelFunc k = MakeKernelFunc(
      "lanes", {KernelParam::Tensor(a), KernelParam::Tensor(at), KernelParam::Tensor(c)}, body);
  absl::StatusOr<std::string> ir = EmitLLVMIR({k}, Target::Host());
  ASSERT_TRUE(ir.ok()) << ir.status();
  EXPECT_THAT(*ir, HasSubstr("<8 x float>"));
  EXPECT_THAT(*ir, HasSubstr("llvm.masked.gather"));
  absl::StatusOr<Ref<Module>> lib = BuildAndLoad({k});
  ASSERT_TRUE(lib.ok()) << lib.status();
  const int64_t rows = 5;
  std::vector<float> av(rows * 8), atv(8 * rows);
  for (size_t x = 0; x < av.size(); ++x) av[x] = static_cast<float>(x) * 0.5f - 7;
  for (size_t x = 0; x < atv.size(); ++x) atv[x] = static_cast<float>(x % 7) + 0.25f;
  Tensor ta = MakeTensor({rows, 8}, kF32, av), tat = MakeTensor({8, rows}, kF32, atv);
  Tensor tc = MakeTensor({rows, 8}, kF32, std::vector<float>(rows * 8, 0));
  ASSERT_TRUE(GetKernel(*lib, "lanes").Call(ta, tat, tc).ok());
  std::vector<float> cv = Read<float>(tc);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t col = 0; col < 8; ++col) {
      ASSERT_EQ(cv[r * 8 + col], av[r * 8 + col] * 2 + atv[col * rows + r] + av[r * 8]) << r;
    }
  }
}

// Prefetch (kernel_ir.h) is a hint: llvm.prefetch of the element's address
// in a serial loop, nothing inside a vector loop; the kernel computes what
// it computes without it. Its operand must be a buffer element.
TEST(CodegenTest, PrefetchIsAHintThatChangesNothing) {
  Var m("m");
  Buffer a = MakeBuffer("A", kF32, {m});
  Buffer c = MakeBuffer("C", kF32, {m});
  Var i("i"), j("j");
  Stmt serial = For(i, 0, m, ForKind::kSerial,
                    Seq({Prefetch(a, {Min(i + PrimExpr(16), m - PrimExpr(1))}),
                         Store(c, {i}, Load(a, {i}) * MakeConst(kF32, 2))}));
  Stmt vector = For(j, 0, 8, ForKind::kVectorized,
                    Seq({Prefetch(a, {j}), Store(c, {j}, Load(c, {j}) + MakeConst(kF32, 1))}));
  KernelFunc k = MakeKernelFunc("hinted", {KernelParam::Tensor(a), KernelParam::Tensor(c)},
                                Seq({serial, vector}));
  absl::StatusOr<std::string> ir = EmitLLVMIR({k}, Target::Host());
  ASSERT_TRUE(ir.ok()) << ir.status();
  EXPECT_THAT(*ir, HasSubstr("call void @llvm.prefetch"));
  absl::StatusOr<Ref<Module>> lib = BuildAndLoad({k});
  ASSERT_TRUE(lib.ok()) << lib.status();
  const int64_t n = 40;
  std::vector<float> av(n);
  for (int64_t x = 0; x < n; ++x) av[x] = static_cast<float>(x) - 3.5f;
  Tensor ta = MakeTensor({n}, kF32, av), tc = MakeTensor({n}, kF32, std::vector<float>(n, 0));
  ASSERT_TRUE(GetKernel(*lib, "hinted").Call(ta, tc).ok());
  std::vector<float> cv = Read<float>(tc);
  for (int64_t x = 0; x < n; ++x) ASSERT_EQ(cv[x], av[x] * 2 + (x < 8 ? 1 : 0)) << x;

  KernelFunc bad =
      MakeKernelFunc("bad", {KernelParam::Tensor(a)},
                     Evaluate(Call(DataType::Int(32), kPrefetchOp, {MakeConst(kF32, 1)})));
  absl::StatusOr<std::string> rejected = EmitLLVMIR({bad}, Target::Host());
  ASSERT_FALSE(rejected.ok());
  EXPECT_EQ(rejected.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(rejected.status().message(), HasSubstr("T.prefetch takes one buffer element"));
}

// Two nested kVectorized loops of equal power-of-two extent around a copy
// whose load runs along one var and whose store along the other are a
// transpose tile (vectorize.h): vector loads, shuffles and vector stores, no
// gathers. Both directions, with a cast and without (integer lanes), at
// every tile size; from 8 lanes on the shuffles pass through an arithmetic
// fence halfway (TransposeInRegisters: it spares LLVM's shuffle combining).
// A loop nest of unequal extents is not one and still copies right.
TEST(CodegenTest, TransposeTilesMoveThroughRegisters) {
  const DataType i32 = DataType::Int(32);
  for (int64_t n : {2, 4, 8, 16}) {
    SCOPED_TRACE(n);
    // 2n channels, 3n pixels: 2 x 3 tiles.
    const int64_t tiles_n = 3, px_n = tiles_n * n, ch_n = 2 * n;
    Buffer x = MakeBuffer("X", i32, {PrimExpr(ch_n), PrimExpr(px_n)});
    Buffer y = MakeBuffer("Y", kF32, {PrimExpr(px_n), PrimExpr(ch_n)});
    Buffer z = MakeBuffer("Z", kF32, {PrimExpr(ch_n), PrimExpr(px_n)});
    Buffer w = MakeBuffer("W", i32, {PrimExpr(px_n), PrimExpr(ch_n)});
    Var cb("cb"), pb("pb"), p("p"), c("c");
    PrimExpr ch = cb * n + c, px = pb * n + p;
    auto tiles = [&](Stmt copy) {
      return For(cb, 0, 2, ForKind::kSerial,
                 For(pb, 0, tiles_n, ForKind::kSerial,
                     For(p, 0, n, ForKind::kVectorized, For(c, 0, n, ForKind::kVectorized, copy))));
    };
    // X -> Y: the load along p (outer), the store along c; Y -> Z the
    // reverse; X -> W as Y, in integers.
    Stmt body = Seq({tiles(Store(y, {px, ch}, Cast(kF32, Load(x, {ch, px})))),
                     tiles(Store(z, {ch, px}, Load(y, {px, ch}))),
                     tiles(Store(w, {px, ch}, Load(x, {ch, px})))});
    const std::string name = absl::StrCat("transpose", n);
    KernelFunc k = MakeKernelFunc(name,
                                  {KernelParam::Tensor(x), KernelParam::Tensor(y),
                                   KernelParam::Tensor(z), KernelParam::Tensor(w)},
                                  body);
    absl::StatusOr<std::string> ir = EmitLLVMIR({k}, Target::Host());
    ASSERT_TRUE(ir.ok()) << ir.status();
    EXPECT_THAT(*ir, HasSubstr("shufflevector"));
    EXPECT_THAT(*ir, Not(HasSubstr("llvm.masked.gather")));
    EXPECT_EQ(absl::StrContains(*ir, "llvm.arithmetic.fence"), n >= 8);
    absl::StatusOr<Ref<Module>> lib = BuildAndLoad({k});
    ASSERT_TRUE(lib.ok()) << lib.status();
    std::vector<int32_t> xv(ch_n * px_n);
    for (int64_t i = 0; i < ch_n; ++i) {
      for (int64_t j = 0; j < px_n; ++j) xv[i * px_n + j] = static_cast<int32_t>(i * 1000 + j);
    }
    Tensor tx = MakeTensor({ch_n, px_n}, i32, xv);
    Tensor ty = MakeTensor({px_n, ch_n}, kF32, std::vector<float>(px_n * ch_n, -1));
    Tensor tz = MakeTensor({ch_n, px_n}, kF32, std::vector<float>(px_n * ch_n, -1));
    Tensor tw = MakeTensor({px_n, ch_n}, i32, std::vector<int32_t>(px_n * ch_n, -1));
    ASSERT_TRUE(GetKernel(*lib, name).Call(tx, ty, tz, tw).ok());
    std::vector<float> yv = Read<float>(ty), zv = Read<float>(tz);
    std::vector<int32_t> wv = Read<int32_t>(tw);
    for (int64_t i = 0; i < ch_n; ++i) {
      for (int64_t j = 0; j < px_n; ++j) {
        ASSERT_EQ(yv[j * ch_n + i], static_cast<float>(i * 1000 + j)) << i << " " << j;
        ASSERT_EQ(zv[i * px_n + j], static_cast<float>(i * 1000 + j)) << i << " " << j;
        ASSERT_EQ(wv[j * ch_n + i], i * 1000 + j) << i << " " << j;
      }
    }
  }
  // Within one buffer the loops' order decides (A[c][p] = A[p][c] copies
  // the upper triangle down, then back onto itself): not a tile.
  {
    Buffer a = MakeBuffer("A", kF32, {4, 4});
    Var p("p"), c("c");
    KernelFunc k =
        MakeKernelFunc("mirror", {KernelParam::Tensor(a)},
                       For(p, 0, 4, ForKind::kVectorized,
                           For(c, 0, 4, ForKind::kVectorized, Store(a, {c, p}, Load(a, {p, c})))));
    absl::StatusOr<Ref<Module>> lib = BuildAndLoad({k});
    ASSERT_TRUE(lib.ok()) << lib.status();
    std::vector<float> av(16);
    for (size_t i = 0; i < av.size(); ++i) av[i] = static_cast<float>(i);
    Tensor ta = MakeTensor({4, 4}, kF32, av);
    ASSERT_TRUE(GetKernel(*lib, "mirror").Call(ta).ok());
    std::vector<float> got = Read<float>(ta);
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 4; ++j) {
        ASSERT_EQ(got[i * 4 + j], av[std::min(i, j) * 4 + std::max(i, j)]) << i << " " << j;
      }
    }
  }
  // 8 x 4: not a tile (gathers), the same copy.
  Buffer x = MakeBuffer("X", kF32, {4, 8});
  Buffer y = MakeBuffer("Y", kF32, {8, 4});
  Var p("p"), c("c");
  KernelFunc k =
      MakeKernelFunc("rect", {KernelParam::Tensor(x), KernelParam::Tensor(y)},
                     For(p, 0, 8, ForKind::kVectorized,
                         For(c, 0, 4, ForKind::kVectorized, Store(y, {p, c}, Load(x, {c, p})))));
  absl::StatusOr<std::string> ir = EmitLLVMIR({k}, Target::Host());
  ASSERT_TRUE(ir.ok()) << ir.status();
  EXPECT_THAT(*ir, HasSubstr("llvm.masked.gather"));
  absl::StatusOr<Ref<Module>> lib = BuildAndLoad({k});
  ASSERT_TRUE(lib.ok()) << lib.status();
  std::vector<float> xv(32);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i);
  Tensor tx = MakeTensor({4, 8}, kF32, xv), ty = MakeTensor({8, 4}, kF32, std::vector<float>(32));
  ASSERT_TRUE(GetKernel(*lib, "rect").Call(tx, ty).ok());
  std::vector<float> yv = Read<float>(ty);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 8; ++j) ASSERT_EQ(yv[j * 4 + i], xv[i * 8 + j]);
  }
}

// How many symbols of the ELF shared object `so` (its .symtab, where local
// functions are listed too) are named `name`.
int CountSymbols(const std::string& so, const std::string& name) {
  auto read = [&](size_t at, size_t bytes) -> uint64_t {
    uint64_t v = 0;
    if (at + bytes <= so.size()) std::memcpy(&v, so.data() + at, bytes);  // little-endian host
    return v;
  };
  const uint64_t shoff = read(0x28, 8), shentsize = read(0x3a, 2), shnum = read(0x3c, 2);
  int count = 0;
  for (uint64_t i = 0; i < shnum; ++i) {
    const size_t sh = shoff + i * shentsize;
    if (read(sh + 4, 4) != 2) continue;  // SHT_SYMTAB
    const uint64_t off = read(sh + 0x18, 8), size = read(sh + 0x20, 8);
    const uint64_t strtab = shoff + read(sh + 0x28, 4) * shentsize;
    const uint64_t str_off = read(strtab + 0x18, 8);
    for (uint64_t sym = off; sym + 24 <= off + size; sym += 24) {
      const size_t at = str_off + read(sym, 4);
      if (at < so.size() && so.compare(at, name.size() + 1, name.c_str(), name.size() + 1) == 0) {
        ++count;
      }
    }
  }
  return count;
}

// Libraries of several kernels are compiled as one module per kernel on
// parallel threads and linked into one object: every kernel is there once
// and runs, with one manifest, and the library's helpers are compiled once
// (in the module with the library globals), not once per module.
TEST(CodegenTest, ShardedBuildLinksEveryKernelOnce) {
  std::vector<KernelFunc> kernels = {AddKernel("add"), AddKernel("add_again"), UnaryKernel("exp"),
                                     UnaryKernel("sqrt")};
  CodegenOptions options;
  options.threads = 3;
  absl::StatusOr<vm::KernelLibraryBlob> blob = BuildKernelLibrary(kernels, Target::Host(), options);
  ASSERT_TRUE(blob.ok()) << blob.status();
  size_t manifests = 0;
  for (size_t at = blob->data.find("kernel add 3\n"); at != std::string::npos;
       at = blob->data.find("kernel add 3\n", at + 1)) {
    ++manifests;
  }
  EXPECT_EQ(manifests, 1u);
  for (const char* helper : {"memcpy", "memset", "memmove", "tether.check_tensor",
                             "tether.append_str", "tether.append_i64"}) {
    EXPECT_EQ(CountSymbols(blob->data, helper), 1) << helper;
  }
  EXPECT_EQ(CountSymbols(blob->data, "sqrt_kernel"), 1);
  absl::StatusOr<Ref<Module>> lib = LoadKernelLibrary(*blob);
  ASSERT_TRUE(lib.ok()) << lib.status();
  Tensor x = MakeTensor({3}, kF32, std::vector<float>{1, 4, 9});
  Tensor y = MakeTensor({3}, kF32, std::vector<float>(3, 0));
  for (const char* name : {"add", "add_again"}) {
    ASSERT_TRUE(GetKernel(*lib, name).Call(x, x, y).ok()) << name;
    EXPECT_EQ(Read<float>(y), (std::vector<float>{2, 8, 18})) << name;
  }
  ASSERT_TRUE(GetKernel(*lib, "sqrt_kernel").Call(x, y).ok());
  EXPECT_EQ(Read<float>(y), (std::vector<float>{1, 2, 3}));
  ASSERT_TRUE(GetKernel(*lib, "exp_kernel").Call(x, y).ok());
  EXPECT_NEAR(Read<float>(y)[0], std::exp(1.0f), 1e-5);
}

// A kernel that cannot be compiled fails a library of several, whichever
// thread meets it, with its own error (not that of a module left unbuilt).
TEST(CodegenTest, ShardedBuildReportsTheFailingKernel) {
  Var n("n"), unbound("unbound");
  Buffer a = MakeBuffer("A", kF32, {n});
  Var i("i");
  // The largest kernel, so its module is compiled first and the others are
  // skipped once it fails; its error is at its end.
  std::vector<Stmt> stores(64, Store(a, {i}, Load(a, {i}) * MakeConst(kF32, 1.5)));
  stores.push_back(Store(a, {i}, Cast(kF32, unbound)));
  KernelFunc bad =
      MakeKernelFunc("bad", {KernelParam::Tensor(a)}, For(i, 0, n, ForKind::kSerial, Seq(stores)));
  std::vector<KernelFunc> kernels = {AddKernel("add"), UnaryKernel("exp"), UnaryKernel("sqrt"),
                                     AddKernel("add_again"), bad};
  CodegenOptions options;
  options.threads = 2;
  absl::StatusOr<vm::KernelLibraryBlob> blob = BuildKernelLibrary(kernels, Target::Host(), options);
  EXPECT_EQ(blob.status().code(), absl::StatusCode::kInvalidArgument) << blob.status();
  EXPECT_THAT(blob.status().message(), HasSubstr("kernel bad: variable unbound is not bound"));
}

TEST(CodegenTest, MathIntrinsicsMatchStd) {
  std::vector<float> xs;
  for (int i = -400; i <= 400; ++i) xs.push_back(static_cast<float>(i) * 0.0371f);
  for (float v : {1e-6f, -1e-6f, 1e-3f, 7.5f, -7.5f, 30.f, -30.f, 80.f}) xs.push_back(v);
  struct Case {
    const char* op;
    double (*ref)(double);
    bool positive_only;
  };
  const Case cases[] = {
      {"exp", [](double x) { return std::exp(x); }, false},
      {"tanh", [](double x) { return std::tanh(x); }, false},
      {"erf", [](double x) { return std::erf(x); }, false},
      {"log", [](double x) { return std::log(x); }, true},
      {"sqrt", [](double x) { return std::sqrt(x); }, true},
      {"sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }, false},
  };
  std::vector<KernelFunc> kernels;
  for (const Case& c : cases) {
    kernels.push_back(UnaryKernel(c.op));
    kernels.push_back(UnaryRowsKernel(c.op));
  }
  for (const KernelFunc& k : {UnaryRowsKernel("erf")}) {
    absl::StatusOr<std::string> ir = EmitLLVMIR({k}, Target::Host());
    ASSERT_TRUE(ir.ok()) << ir.status();
    EXPECT_THAT(*ir, HasSubstr("<16 x float>"));  // single precision, 16 lanes
  }
  absl::StatusOr<Ref<Module>> lib = BuildAndLoad(kernels);
  ASSERT_TRUE(lib.ok()) << lib.status();
  for (const Case& c : cases) {
    std::vector<float> in;
    for (float x : xs) {
      if (!c.positive_only || x > 0) in.push_back(c.positive_only ? std::fabs(x) : x);
    }
    while (in.size() % 16 != 0) in.push_back(in[in.size() % 7]);
    int64_t n = static_cast<int64_t>(in.size());
    for (bool rows : {false, true}) {
      Tensor tx = rows ? MakeTensor({n / 16, 16}, kF32, in) : MakeTensor({n}, kF32, in);
      Tensor ty = rows ? MakeTensor({n / 16, 16}, kF32, std::vector<float>(n, 0))
                       : MakeTensor({n}, kF32, std::vector<float>(n, 0));
      std::string name = std::string(c.op) + (rows ? "_rows" : "_kernel");
      ASSERT_TRUE(GetKernel(*lib, name).Call(tx, ty).ok()) << name;
      std::vector<float> out = Read<float>(ty);
      for (int64_t i = 0; i < n; ++i) {
        double want = c.ref(in[i]);
        double tol = 2e-6 * std::fabs(want) + 1e-30;
        ASSERT_NEAR(out[i], want, tol) << name << "(" << in[i] << ")";
      }
    }
  }
}

TEST(CodegenTest, ReductionWithLocalAccumulator) {
  Var m("m"), n("n");
  Buffer a = MakeBuffer("A", kF32, {m, n});
  Buffer s = MakeBuffer("S", kF32, {m});
  Buffer acc = MakeBuffer("acc", kF32, {1}, BufferNode::Scope::kLocal);
  Var i("i"), j("j");
  Stmt row = Allocate(
      acc, Seq({Store(acc, {0}, MakeConst(kF32, 0)),
                For(j, 0, n, ForKind::kSerial, Store(acc, {0}, Load(acc, {0}) + Load(a, {i, j}))),
                Store(s, {i}, Load(acc, {0}))}));
  KernelFunc k = MakeKernelFunc("rowsum", {KernelParam::Tensor(a), KernelParam::Tensor(s)},
                                For(i, 0, m, ForKind::kParallel, row));
  absl::StatusOr<Ref<Module>> lib = BuildAndLoad({k});
  ASSERT_TRUE(lib.ok()) << lib.status();
  Tensor ta = MakeTensor({3, 4}, kF32, std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  Tensor ts = MakeTensor({3}, kF32, std::vector<float>(3, -1));
  ASSERT_TRUE(GetKernel(*lib, "rowsum").Call(ta, ts).ok());
  EXPECT_EQ(Read<float>(ts), (std::vector<float>{10, 26, 42}));
}

TEST(CodegenTest, WorkspaceAllocationHoldsIntermediate) {
  Var n("n");
  Buffer a = MakeBuffer("A", kF32, {n});
  Buffer c = MakeBuffer("C", kF32, {n});
  Buffer tmp = MakeBuffer("tmp", kF32, {n}, BufferNode::Scope::kGlobal);
  Var i("i"), j("j");
  Stmt body = Allocate(
      tmp, Seq({For(i, 0, n, ForKind::kSerial, Store(tmp, {i}, Load(a, {i}) * Load(a, {i}))),
                For(j, 0, n, ForKind::kSerial,
                    Store(c, {j}, Load(tmp, {n - 1 - j}) + MakeConst(kF32, 1)))}));
  KernelFunc k = MakeKernelFunc("rev_sq", {KernelParam::Tensor(a), KernelParam::Tensor(c)}, body);
  absl::StatusOr<Ref<Module>> lib = BuildAndLoad({k});
  ASSERT_TRUE(lib.ok()) << lib.status();
  Tensor ta = MakeTensor({4}, kF32, std::vector<float>{1, 2, 3, 4});
  Tensor tc = MakeTensor({4}, kF32, std::vector<float>(4, 0));
  ASSERT_TRUE(GetKernel(*lib, "rev_sq").Call(ta, tc).ok());
  EXPECT_EQ(Read<float>(tc), (std::vector<float>{17, 10, 5, 2}));
}

TEST(CodegenTest, IntBoolAndFloat16LoadStore) {
  Var n("n");
  Buffer a32 = MakeBuffer("A", DataType::Int(32), {n});
  Buffer b64 = MakeBuffer("B", DataType::Int(64), {n});
  Buffer mask = MakeBuffer("M", DataType::Bool(), {n});
  Buffer h = MakeBuffer("H", DataType::Float(16), {n});
  Buffer h_out = MakeBuffer("HO", DataType::Float(16), {n});
  Var i("i");
  Stmt body = For(i, 0, n, ForKind::kSerial,
                  Seq({Store(b64, {i}, Cast(DataType::Int(64), Load(a32, {i})) * 3),
                       Store(mask, {i}, GT(Load(a32, {i}), IntImm(DataType::Int(32), 1))),
                       Store(h_out, {i}, Load(h, {i}) * MakeConst(DataType::Float(16), 2))}));
  KernelFunc k =
      MakeKernelFunc("mixed",
                     {KernelParam::Tensor(a32), KernelParam::Tensor(h), KernelParam::Tensor(b64),
                      KernelParam::Tensor(mask), KernelParam::Tensor(h_out)},
                     body, 3);
  absl::StatusOr<Ref<Module>> lib = BuildAndLoad({k});
  ASSERT_TRUE(lib.ok()) << lib.status();
  // float16 bits: 1.0 = 0x3c00, -2.5 = 0xc100, 0.5 = 0x3800.
  Tensor ta = MakeTensor({3}, DataType::Int(32), std::vector<int32_t>{1, 2, -7});
  Tensor th = MakeTensor({3}, DataType::Float(16), std::vector<uint16_t>{0x3c00, 0xc100, 0x3800});
  Tensor tb = MakeTensor({3}, DataType::Int(64), std::vector<int64_t>(3, 0));
  Tensor tm = MakeTensor({3}, DataType::Bool(), std::vector<uint8_t>(3, 7));
  Tensor tho = MakeTensor({3}, DataType::Float(16), std::vector<uint16_t>(3, 0));
  ASSERT_TRUE(GetKernel(*lib, "mixed").Call(ta, th, tb, tm, tho).ok());
  EXPECT_EQ(Read<int64_t>(tb), (std::vector<int64_t>{3, 6, -21}));
  EXPECT_EQ(Read<uint8_t>(tm), (std::vector<uint8_t>{0, 1, 0}));
  // 2.0 = 0x4000, -5.0 = 0xc500, 1.0 = 0x3c00.
  EXPECT_EQ(Read<uint16_t>(tho), (std::vector<uint16_t>{0x4000, 0xc500, 0x3c00}));
}

TEST(CodegenTest, AssertFailureReturnsItsMessage) {
  Var n("n");
  Buffer a = MakeBuffer("A", kF32, {n});
  Var i("i");
  Stmt body = AssertStmt(LT(n, 4), "n must be below 4",
                         For(i, 0, n, ForKind::kSerial, Store(a, {i}, MakeConst(kF32, 1))));
  absl::StatusOr<Ref<Module>> lib =
      BuildAndLoad({MakeKernelFunc("guarded", {KernelParam::Tensor(a)}, body)});
  ASSERT_TRUE(lib.ok()) << lib.status();
  Function f = GetKernel(*lib, "guarded");
  EXPECT_TRUE(f.Call(MakeTensor({3}, kF32, std::vector<float>(3, 0))).ok());
  absl::StatusOr<Value> r = f.Call(MakeTensor({5}, kF32, std::vector<float>(5, 0)));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("n must be below 4"));
}

TEST(CodegenTest, ShapeMismatchBetweenArgumentsIsAClearError) {
  absl::StatusOr<Ref<Module>> lib = BuildAndLoad({AddKernel()});
  ASSERT_TRUE(lib.ok()) << lib.status();
  absl::StatusOr<Value> r = GetKernel(*lib, "add")
                                .Call(MakeTensor({4}, kF32, std::vector<float>(4, 0)),
                                      MakeTensor({3}, kF32, std::vector<float>(3, 0)),
                                      MakeTensor({4}, kF32, std::vector<float>(4, 0)));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("kernel add: argument 1 dim 0 is 3, expected n = 4"));
}

TEST(CodegenTest, WrongDtypeOrNdimNamesTheArgument) {
  absl::StatusOr<Ref<Module>> lib = BuildAndLoad({AddKernel()});
  ASSERT_TRUE(lib.ok()) << lib.status();
  Function add = GetKernel(*lib, "add");
  Tensor ok = MakeTensor({2}, kF32, std::vector<float>(2, 0));
  absl::StatusOr<Value> r =
      add.Call(ok, MakeTensor({2}, DataType::Int(32), std::vector<int32_t>(2, 0)), ok);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(),
              HasSubstr("kernel add: argument 1 has dtype int32, expected float32"));
  r = add.Call(ok, ok, MakeTensor({1, 2}, kF32, std::vector<float>(2, 0)));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("kernel add: argument 2 has 2 dims, expected 1"));
  r = add.Call(ok, ok);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("takes 3 arguments, got 2"));
}

// The kernel's own checks, for a caller of the C symbol that skips the
// runtime's manifest checks: each names the argument and what is wrong.
TEST(CodegenTest, KernelEntryChecksEachArgumentItself) {
  Var n("n");
  Buffer a = MakeBuffer("A", kF32, {2, n});
  Buffer b = MakeBuffer("B", kF32, {2, n});
  Var i("i"), j("j");
  Stmt body = For(i, 0, 2, ForKind::kSerial,
                  For(j, 0, n, ForKind::kSerial, Store(b, {i, j}, Load(a, {i, j}) * 2)));
  absl::StatusOr<Ref<Module>> lib = BuildAndLoad(
      {MakeKernelFunc("rows", {KernelParam::Tensor(a), KernelParam::Tensor(b)}, body)});
  ASSERT_TRUE(lib.ok()) << lib.status();
  auto* kernels = dynamic_cast<KernelLibraryModule*>(lib->get());
  ASSERT_NE(kernels, nullptr);
  auto fn = reinterpret_cast<TetherKernelFn>(kernels->FindSymbol("rows"));
  ASSERT_NE(fn, nullptr);
  std::string error;
  TetherKernelServices services{};
  services.abi_version = TETHER_KERNEL_ABI_VERSION;
  services.ctx = &error;
  services.set_error = [](void* ctx, const char* message) {
    *static_cast<std::string*>(ctx) = message;
  };
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> y(8, 0);
  std::vector<int64_t> shape_a = {2, 4}, shape_b = {2, 4};
  DLTensor ta{x.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape_a.data(), nullptr, 0};
  DLTensor tb{y.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape_b.data(), nullptr, 0};
  auto call = [&](DLTensor* first, DLTensor* second) {
    error.clear();
    TetherKernelArg args[2];
    args[0].tensor = first;
    args[1].tensor = second;
    return fn(args, 2, &services);
  };
  ASSERT_EQ(call(&ta, &tb), TETHER_KERNEL_OK) << error;
  EXPECT_EQ(y, (std::vector<float>{2, 4, 6, 8, 10, 12, 14, 16}));
  std::vector<int64_t> compact = {4, 1};
  ta.strides = compact.data();
  EXPECT_EQ(call(&ta, &tb), TETHER_KERNEL_OK) << error;

  EXPECT_EQ(call(nullptr, &tb), TETHER_KERNEL_INVALID_ARGUMENT);
  EXPECT_EQ(error, "kernel rows: argument 0 (A) is null");
  std::vector<int64_t> padded = {5, 1};
  ta.strides = padded.data();
  EXPECT_EQ(call(&ta, &tb), TETHER_KERNEL_INVALID_ARGUMENT);
  EXPECT_EQ(error, "kernel rows: argument 0 (A) is not compact row-major");
  ta.strides = nullptr;
  tb.device.device_type = kDLCUDA;
  EXPECT_EQ(call(&ta, &tb), TETHER_KERNEL_INVALID_ARGUMENT);
  EXPECT_EQ(error, "kernel rows: argument 1 (B) is not on the cpu (device type 2)");
  tb.device.device_type = kDLCPU;
  tb.ndim = 1;
  EXPECT_EQ(call(&ta, &tb), TETHER_KERNEL_INVALID_ARGUMENT);
  EXPECT_EQ(error, "kernel rows: argument 1 (B) has 1 dims, expected 2");
  tb.ndim = 2;
  tb.dtype = {kDLInt, 32, 1};
  EXPECT_EQ(call(&ta, &tb), TETHER_KERNEL_INVALID_ARGUMENT);
  EXPECT_EQ(error, "kernel rows: argument 1 (B) has the wrong dtype, expected float32");
  tb.dtype = {kDLFloat, 32, 2};
  EXPECT_EQ(call(&ta, &tb), TETHER_KERNEL_INVALID_ARGUMENT);
  EXPECT_EQ(error, "kernel rows: argument 1 (B) has the wrong dtype, expected float32");
  tb.dtype = {kDLFloat, 32, 1};
  shape_a = {3, 4};
  EXPECT_EQ(call(&ta, &tb), TETHER_KERNEL_INVALID_ARGUMENT);
  EXPECT_EQ(error, "kernel rows: argument 0 dim 0 is 3, expected 2");
  shape_a = {2, 4};
  shape_b = {2, 3};
  EXPECT_EQ(call(&ta, &tb), TETHER_KERNEL_INVALID_ARGUMENT);
  EXPECT_EQ(error, "kernel rows: argument 1 dim 1 is 3, expected n = 4");
  EXPECT_EQ(y, (std::vector<float>{2, 4, 6, 8, 10, 12, 14, 16}));  // no failed call wrote
}

TEST(CodegenTest, ScalarParameterIsPassedAsInt) {
  Var n("n"), k("k");
  Buffer a = MakeBuffer("A", DataType::Int(64), {n});
  Var i("i");
  KernelFunc f = MakeKernelFunc("fill", {KernelParam::Tensor(a), KernelParam::Scalar(k)},
                                For(i, 0, n, ForKind::kSerial, Store(a, {i}, k + i)));
  absl::StatusOr<Ref<Module>> lib = BuildAndLoad({f});
  ASSERT_TRUE(lib.ok()) << lib.status();
  Tensor ta = MakeTensor({3}, DataType::Int(64), std::vector<int64_t>(3, 0));
  ASSERT_TRUE(GetKernel(*lib, "fill").Call(ta, int64_t{40}).ok());
  EXPECT_EQ(Read<int64_t>(ta), (std::vector<int64_t>{40, 41, 42}));
}

TEST(CodegenTest, LibraryCarriesManifest) {
  absl::StatusOr<vm::KernelLibraryBlob> blob =
      BuildKernelLibrary({AddKernel(), UnaryKernel("exp")}, Target::Host());
  ASSERT_TRUE(blob.ok()) << blob.status();
  EXPECT_EQ(blob->format, "so");
  EXPECT_THAT(blob->data, HasSubstr("kernel add 3\ntensor float32 1\n"));
  absl::StatusOr<Ref<Module>> lib = LoadKernelLibrary(*blob);
  ASSERT_TRUE(lib.ok()) << lib.status();
  EXPECT_TRUE((*lib)->ImplementsFunction("add"));
  EXPECT_TRUE((*lib)->ImplementsFunction("exp_kernel"));
  EXPECT_EQ((*lib)->GetFunction("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST(CodegenTest, CorruptOrTruncatedBlobIsAnError) {
  absl::StatusOr<vm::KernelLibraryBlob> blob = BuildKernelLibrary({AddKernel()}, Target::Host());
  ASSERT_TRUE(blob.ok()) << blob.status();
  vm::KernelLibraryBlob truncated = *blob;
  truncated.data.resize(truncated.data.size() / 2);
  absl::StatusOr<Ref<Module>> lib = LoadKernelLibrary(truncated);
  EXPECT_EQ(lib.status().code(), absl::StatusCode::kInvalidArgument);
  vm::KernelLibraryBlob garbage = *blob;
  garbage.data = "not an elf file at all";
  lib = LoadKernelLibrary(garbage);
  EXPECT_EQ(lib.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(lib.status().message(), HasSubstr("not an ELF image"));
}

TEST(CodegenTest, ManifestParserRejectsMalformedText) {
  EXPECT_FALSE(ParseKernelManifest("hello").ok());
  EXPECT_FALSE(
      ParseKernelManifest("tether-kernel-manifest 1\nkernel add 2\ntensor float32 1\n").ok());
  EXPECT_FALSE(ParseKernelManifest("tether-kernel-manifest 1\nkernel add -1\nend\n").ok());
  absl::StatusOr<std::vector<KernelInfo>> ok =
      ParseKernelManifest("tether-kernel-manifest 1\nkernel f 2\ntensor float16 3\nint64\nend\n");
  ASSERT_TRUE(ok.ok()) << ok.status();
  ASSERT_EQ(ok->size(), 1u);
  EXPECT_EQ((*ok)[0].params[0].ndim, 3);
  EXPECT_FALSE((*ok)[0].params[1].is_tensor);
}

TEST(CodegenTest, CrossCompilesAnAArch64SharedObject) {
  absl::StatusOr<Target> target =
      Target::Parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+neon");
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_FALSE(target->is_host());
  absl::StatusOr<vm::KernelLibraryBlob> blob =
      BuildKernelLibrary({AddKernel(), UnaryKernel("tanh")}, *target);
  ASSERT_TRUE(blob.ok()) << blob.status();
  ASSERT_GT(blob->data.size(), 20u);
  uint16_t machine;
  std::memcpy(&machine, blob->data.data() + 18, 2);
  EXPECT_EQ(machine, 183);  // EM_AARCH64
#if defined(__x86_64__)
  // Refused for its recorded target, naming both machines...
  absl::Status refused = LoadKernelLibrary(*blob).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("aarch64-linux-gnu, cortex-a72"));
  EXPECT_THAT(refused.message(), HasSubstr("x86_64-linux-gnu machine"));
  // ... and for its ELF machine when the recorded target lies.
  vm::KernelLibraryBlob lying = *blob;
  lying.target = ThisHostTarget().CompileTarget();
  absl::Status lied = LoadKernelLibrary(lying).status();
  EXPECT_EQ(lied.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(lied.message(), HasSubstr("built for aarch64, but this runtime runs on x86_64"));
#endif
}

TEST(CodegenTest, TargetParseRejectsUnknownKindAndFlag) {
  EXPECT_EQ(Target::Parse("rocm -mcpu=gfx90a").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Target::Parse("llvm -mfoo=bar").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Target::Host().is_host());
}

// A target names one core's caches, which the schedules block for; the text
// round-trips, and a size that is not one is refused.
TEST(CodegenTest, TargetCarriesCacheSizes) {
  absl::StatusOr<Target> t = Target::Parse(
      "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a76 -l1d-cache=64K -l2-cache=512K");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->l1d_cache, 64 << 10);
  EXPECT_EQ(t->l2_cache, 512 << 10);
  EXPECT_EQ(t->ToString(),
            "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a76 -l1d-cache=64K -l2-cache=512K");
  EXPECT_EQ(Target::Parse("llvm -mcpu=x86-64")->l2_cache, 0);
  for (const char* bad : {"llvm -l2-cache=", "llvm -l2-cache=0", "llvm -l2-cache=2G"}) {
    absl::Status s = Target::Parse(bad).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("cache size")) << bad;
  }
  // The daemon's compile target is the host's, caches included.
  absl::StatusOr<Target> host = Target::Parse(ThisHostTarget().CompileTarget());
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(host->l2_cache, ThisHostTarget().l2_cache_bytes);
  EXPECT_EQ(Target::Host().l2_cache, ThisHostTarget().l2_cache_bytes);
}

TEST(CodegenTest, EmitAssemblyContainsKernelName) {
  absl::StatusOr<std::string> s = EmitAssembly({AddKernel("my_add")}, Target::Host());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(*s, HasSubstr("my_add:"));
}

TEST(CodegenTest, SystemLibBuildsAnArchiveWithRegistration) {
  CodegenOptions options;
  options.system_lib = true;
  options.system_lib_prefix = "demo";
  absl::StatusOr<vm::KernelLibraryBlob> blob =
      BuildKernelLibrary({AddKernel()}, Target::Host(), options);
  ASSERT_TRUE(blob.ok()) << blob.status();
  EXPECT_EQ(blob->format, "static");
  EXPECT_EQ(blob->data.substr(0, 8), "!<arch>\n");
  EXPECT_THAT(blob->data, HasSubstr("tether_system_lib_register_demo"));
  // The loader reads the prefix from the archive's symbol table; this
  // process has no "demo" kernels linked in, so it says what to link.
  absl::StatusOr<std::string> prefix = SystemLibPrefixOfArchive(blob->data);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  EXPECT_EQ(*prefix, "demo");
  absl::Status missing = LoadStaticKernelLibrary(*blob).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
  EXPECT_THAT(missing.message(), HasSubstr("(\"demo\") that is not linked into this process"));
  // Damaged archives are refused, not read past their end.
  std::string archive = blob->data;
  for (size_t cut : {size_t{0}, size_t{7}, size_t{60}, size_t{70}}) {
    EXPECT_EQ(SystemLibPrefixOfArchive(archive.substr(0, cut)).status().code(),
              absl::StatusCode::kInvalidArgument)
        << cut;
  }
  std::string huge_count = archive;
  huge_count[68] = '\x7f';  // the symbol count's high byte
  EXPECT_EQ(SystemLibPrefixOfArchive(huge_count).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SystemLibPrefixOfArchive("!<arch>\n").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CodegenTest, VirtualMachineCallsKernelFromEmbeddedLibrary) {
  absl::StatusOr<vm::KernelLibraryBlob> blob =
      BuildKernelLibrary({AddKernel("vm_add")}, Target::Host());
  ASSERT_TRUE(blob.ok()) << blob.status();
  vm::ExecBuilder b;
  b.AddKernelLibrary(*blob);
  b.EmitFunction("main", 3, {"a", "b", "c"});
  b.EmitCall("vm_add", {vm::Arg::Register(0), vm::Arg::Register(1), vm::Arg::Register(2)});
  b.EmitRet(2);
  b.EndFunction("main");
  absl::StatusOr<Ref<vm::Executable>> exec = b.Get();
  ASSERT_TRUE(exec.ok()) << exec.status();
  absl::StatusOr<std::unique_ptr<vm::LocalVirtualMachine>> machine =
      vm::LocalVirtualMachine::Create(*exec, {Device::Cpu()});
  ASSERT_TRUE(machine.ok()) << machine.status();
  Tensor ta = MakeTensor({2}, kF32, std::vector<float>{1, 2});
  Tensor tb = MakeTensor({2}, kF32, std::vector<float>{10, 20});
  Tensor tc = MakeTensor({2}, kF32, std::vector<float>{0, 0});
  Value args[] = {ta, tb, tc};
  absl::StatusOr<Value> r = (*machine)->Invoke("main", ArgSpan(args, 3));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Read<float>(tc), (std::vector<float>{11, 22}));
}

}  // namespace
}  // namespace tether::compiler
