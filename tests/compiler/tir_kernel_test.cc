// Kernels written by the user as TVMScript @T.prim_func members: parsed into
// the kernel IR, called with R.call_tir (with tir_vars) and R.call_tir_inplace,
// compiled by the same LLVM path as the built-in operators, and run on the
// local VM and on a real tetherd on 127.0.0.1 (one suite, both paths), each
// checked against a plain C++ reference. Also: the compiler's own kernels
// print and parse back to programs that compute the same thing, and the
// errors a user meets name the place and the mismatch.
#include <cmath>
#include <random>

#include "compiler/build.h"
#include "compiler/relax/block_builder.h"
#include "compiler/text/parser.h"
#include "compiler/text/printer.h"
#include "compiler/transform/fuse.h"
#include "compiler/transform/legalize.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/vm/local_vm.h"
#include "tests/compiler/vm_host.h"
#include "tests/testing/repo_root.h"
#include "tests/testing/test_functions.h"

namespace tether::compiler {
namespace {

using ::testing::HasSubstr;
using tether::testing::MakeFloatTensor;
using tether::testing::ReadFloats;

std::vector<float> Random(size_t n, uint32_t seed) {
  return tether::testing::RandomFloats(n, seed);
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-4f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1.0f + std::fabs(want[i]))) << "at " << i;
  }
}

// C (m, n) = A (m, k) @ B (k, n).
std::vector<float> MatmulReference(const std::vector<float>& a, const std::vector<float>& b,
                                   int64_t m, int64_t k, int64_t n) {
  std::vector<float> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) acc += double(a[i * k + p]) * b[p * n + j];
      c[i * n + j] = static_cast<float>(acc);
    }
  }
  return c;
}

constexpr char kMatmul[] = R"(
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tir as T

@I.ir_module
class Module:
    @T.prim_func
    def matmul(A: T.Buffer((24, 40), "float32"), B: T.Buffer((40, 16), "float32"),
               C: T.Buffer((24, 16), "float32")):
        T.func_attr({"global_symbol": "matmul", "tir.noalias": True})
        for i in T.parallel(24):
            for j, k in T.grid(16, 40):
                with T.block("C"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    T.reads(A[vi, vk], B[vk, vj])
                    T.writes(C[vi, vj])
                    with T.init():
                        C[vi, vj] = T.float32(0)
                    C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    @R.function
    def main(x: R.Tensor((24, 40), "float32"), w: R.Tensor((40, 16), "float32")):
        cls = Module
        with R.dataflow():
            y = R.call_tir(cls.matmul, (x, w), out_sinfo=R.Tensor((24, 16), "float32"))
            R.output(y)
        return y
)";

// A[i] += B[i] in place, then a scaled copy: the KV-cache style of update.
constexpr char kInplace[] = R"(
@I.ir_module
class Module:
    @T.prim_func
    def add_inplace(A: T.Buffer((n,), "float32"), B: T.Buffer((n,), "float32")):
        for i in T.serial(n):
            A[i] += B[i]

    @T.prim_func
    def scale(A: T.Buffer((n,), "float32"), C: T.Buffer((n,), "float32")):
        for i in T.vectorized(n):
            C[i] = A[i] * T.float32(2)

    @R.function
    def main(x: R.Tensor(("n",), "float32"), y: R.Tensor(("n",), "float32")):
        n = T.int64()
        with R.dataflow():
            s = R.call_tir(cls.scale, (x,), out_sinfo=R.Tensor((n,), "float32"))
            t = R.call_tir_inplace(cls.add_inplace, (s, y), inplace_indices=[0],
                                   out_sinfo=R.Tensor((n,), "float32"))
            R.output(t)
        return t
)";

// Symbolic sizes through T.handle + T.match_buffer, an int scalar passed as
// tir_vars, a let, an if/else, a local scratch buffer, T.where and min/max.
constexpr char kRows[] = R"(
@I.ir_module
class Module:
    @T.prim_func
    def clipped_row_max(a: T.handle, o: T.handle, limit: T.int64):
        m = T.int64()
        X = T.match_buffer(a, (m, 8), "float32")
        Out = T.match_buffer(o, (m,), "float32")
        for i in T.serial(m):
            acc = T.alloc_buffer((1,), "float32", scope="local")
            acc[0] = T.min_value("float32")
            for j in range(8):
                with T.block("reduce"):
                    T.where(j < limit)
                    acc[0] = T.max(acc[0], X[i, j])
            half: T.float32 = acc[0] * T.float32(0.5)
            if half > T.float32(1):
                Out[i] = T.Cast("float32", 1) + T.if_then_else(i % 2 == 0, half, -half)
            else:
                Out[i] = T.exp(half) - 1.0

    @R.function
    def main(x: R.Tensor(("m", 8), "float32")):
        m = T.int64()
        with R.dataflow():
            y = R.call_tir(cls.clipped_row_max, (x,), out_sinfo=R.Tensor((m,), "float32"),
                           tir_vars=R.shape([5]))
            R.output(y)
        return y
)";

std::vector<float> RowsReference(const std::vector<float>& x, int64_t m) {
  std::vector<float> out(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) {
    float acc = -3.4028234663852886e38f;
    for (int64_t j = 0; j < 5; ++j) acc = std::max(acc, x[i * 8 + j]);
    const float half = acc * 0.5f;
    out[i] = half > 1 ? 1 + (i % 2 == 0 ? half : -half) : std::exp(half) - 1.0f;
  }
  return out;
}

Ref<vm::Executable> BuildOrDie(const std::string& text, const std::string& file = "<text>") {
  auto module = ParseModule(text, file);
  EXPECT_TRUE(module.ok()) << module.status();
  if (!module.ok()) return Ref<vm::Executable>();
  auto exec = Build(*module, {});
  EXPECT_TRUE(exec.ok()) << exec.status();
  return exec.ok() ? *exec : Ref<vm::Executable>();
}

// The VM of an executable, local or on a real tetherd.
class TirKernelTest : public ::testing::TestWithParam<bool> {
 protected:
  vm::VirtualMachine* Load(Ref<vm::Executable> exec) { return host_.Load(std::move(exec)); }

  tether::testing::VmHost host_{GetParam()};
};

TEST_P(TirKernelTest, HandWrittenMatmulMatchesReference) {
  Ref<vm::Executable> exec = BuildOrDie(kMatmul);
  ASSERT_TRUE(exec);
  vm::VirtualMachine* vm = Load(exec);
  ASSERT_NE(vm, nullptr);
  std::vector<float> a = Random(24 * 40, 1), b = Random(40 * 16, 2);
  Value args[] = {MakeFloatTensor({24, 40}, a), MakeFloatTensor({40, 16}, b)};
  auto out = vm->Invoke("main", args);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectNear(ReadFloats(Tensor(out->AsRef<TensorObj>())), MatmulReference(a, b, 24, 40, 16));
}

TEST_P(TirKernelTest, InplaceCallUpdatesItsArgument) {
  Ref<vm::Executable> exec = BuildOrDie(kInplace);
  ASSERT_TRUE(exec);
  vm::VirtualMachine* vm = Load(exec);
  ASSERT_NE(vm, nullptr);
  for (int64_t n : {3, 37}) {
    std::vector<float> x = Random(n, 3), y = Random(n, 4), want(n);
    for (int64_t i = 0; i < n; ++i) want[i] = 2 * x[i] + y[i];
    Value args[] = {MakeFloatTensor({n}, x), MakeFloatTensor({n}, y)};
    auto out = vm->Invoke("main", args);
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectNear(ReadFloats(Tensor(out->AsRef<TensorObj>())), want);
  }
}

TEST_P(TirKernelTest, SymbolicKernelWithTirVarsAndControlFlow) {
  Ref<vm::Executable> exec = BuildOrDie(kRows);
  ASSERT_TRUE(exec);
  vm::VirtualMachine* vm = Load(exec);
  ASSERT_NE(vm, nullptr);
  for (int64_t m : {1, 6}) {
    std::vector<float> x = Random(m * 8, 5 + m);
    for (float& v : x) v *= 6;  // both branches of the if
    Value args[] = {MakeFloatTensor({m, 8}, x)};
    auto out = vm->Invoke("main", args);
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectNear(ReadFloats(Tensor(out->AsRef<TensorObj>())), RowsReference(x, m));
  }
}

INSTANTIATE_TEST_SUITE_P(LocalAndRemote, TirKernelTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Tetherd" : "LocalVm";
                         });

// print(parse(text)) parses back and prints the same.
void ExpectRoundTrip(const IRModule& module) {
  const std::string printed = PrintModule(module);
  auto again = ParseModule(printed, "printed.rx");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << printed;
  EXPECT_EQ(PrintModule(*again), printed);
}

// Bodies that hold nothing (a `pass`, a block of annotations) print as
// `pass`, found by the text fuzz target.
constexpr char kEmptyBodies[] = R"(
@I.ir_module
class Module:
    @T.prim_func
    def k(A: T.Buffer((4,), "float32")):
        for i in range(4):
            if i < 2:
                pass
            else:
                with T.block("b"):
                    T.reads(A[i])
)";

TEST(TirKernelTextTest, UserKernelsRoundTrip) {
  for (const char* text : {kMatmul, kInplace, kRows, kEmptyBodies}) {
    auto module = ParseModule(text);
    ASSERT_TRUE(module.ok()) << module.status();
    ExpectRoundTrip(*module);
  }
}

// The compiler's own kernels (fused and legalized) print as T.prim_func
// members that parse back; the re-parsed module builds and computes what
// the original computes.
TEST(TirKernelTextTest, CompilerKernelsParseBackAndComputeTheSame) {
  auto module = ParseModuleFile(tether::testing::RepoRoot() + "/examples/attention.rx");
  ASSERT_TRUE(module.ok()) << module.status();
  auto fused = FuseOps(*module);
  ASSERT_TRUE(fused.ok()) << fused.status();
  auto legal = LegalizeOps(*fused);
  ASSERT_TRUE(legal.ok()) << legal.status();
  ASSERT_FALSE(legal->kernels.empty());
  ExpectRoundTrip(*legal);
  auto reparsed = ParseModule(PrintModule(*legal), "legalized.rx");
  ASSERT_TRUE(reparsed.ok()) << reparsed.status();

  auto original = Build(*module, {});
  ASSERT_TRUE(original.ok()) << original.status();
  auto rebuilt = Build(*reparsed, {});
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  const int64_t s = 5;
  std::vector<Value> args = {MakeFloatTensor({s, 64}, Random(s * 64, 11))};
  for (uint32_t i = 0; i < 3; ++i) {
    std::vector<float> w = Random(64 * 64, 20 + i);
    for (float& v : w) v *= 0.125f;
    args.push_back(MakeFloatTensor({64, 64}, w));
  }
  args.push_back(MakeFloatTensor({64}, Random(64, 30)));
  args.push_back(MakeFloatTensor({64}, Random(64, 31)));
  std::vector<std::vector<float>> results;
  for (const auto& exec : {*original, *rebuilt}) {
    auto vm = vm::LocalVirtualMachine::Create(exec, {Device::Cpu()});
    ASSERT_TRUE(vm.ok()) << vm.status();
    auto out = (*vm)->Invoke("main", args);
    ASSERT_TRUE(out.ok()) << out.status();
    results.push_back(ReadFloats(Tensor(out->AsRef<TensorObj>())));
  }
  ExpectNear(results[1], results[0], 1e-5f);
}

// What a user gets wrong, and the message they get.
absl::Status ParseError(const std::string& text) {
  auto module = ParseModule(text, "k.rx");
  return module.status();
}

std::string Kernel(const std::string& params, const std::string& body,
                   const std::string& call = "") {
  std::string text =
      "@I.ir_module\nclass Module:\n    @T.prim_func\n    def k(" + params + "):\n" + body;
  if (!call.empty()) {
    text +=
        "\n    @R.function\n    def main(x: R.Tensor((4,), \"float32\")):\n        y = " + call +
        "\n        return y\n";
  }
  return text;
}

TEST(TirKernelTextTest, ErrorsNameThePlaceAndTheMismatch) {
  const std::string buf = "A: T.Buffer((4,), \"float32\"), B: T.Buffer((4,), \"float32\")";
  struct Case {
    std::string text;
    std::string message;
  } cases[] = {
      {Kernel(buf, "        for i in range(4):\n            B[i, 0] = A[i]\n"),
       "k.rx:6:13: expected 1 indices into 'B' (1-d), got 2"},
      {Kernel(buf, "        for i in range(4):\n            B[i] = C[i]\n"),
       "k.rx:6:20: expected a value, got 'C' (undefined)"},
      {Kernel("a: T.handle", "        for i in range(4):\n            pass\n"),
       "k.rx:4:11: parameter 'a' (T.handle) is never bound with T.match_buffer"},
      {Kernel(buf,
              "        for i in range(4):\n            with T.block(\"b\"):\n"
              "                vi = T.axis.spatial(4, i)\n                with T.init():\n"
              "                    B[vi] = 0.0\n"),
       "k.rx:8:17: T.init() in block 'b', which has no reduction axis (T.axis.reduce)"},
      {Kernel(buf, "        for i in range(4):\n            B[i] = T.exp(i)\n"),
       "k.rx:6:20: expected a float argument to T.exp, got i (cast it with T.Cast)"},
      {Kernel("A: T.Buffer((n * 2,), \"float32\")", "        pass\n"),
       "k.rx:4:24: expected symbolic size 'n' to be declared (n = T.int64()) before it is used "
       "in an expression"},
      {Kernel(buf, "        for i in T.spin(4):\n            B[i] = A[i]\n"),
       "k.rx:5:18: expected a loop kind"},
      // Found by the text fuzzer: a declared size that no parameter's
      // shape binds parsed, printed without its declaration, and the
      // printed text did not parse.
      {Kernel(buf, "        m = T.int64()\n        for i in range(m):\n            B[i] = A[i]\n"),
       "k.rx:5:9: symbolic size 'm' is not a dimension of any parameter's buffer (nothing binds "
       "its value; use it in a T.Buffer or T.match_buffer shape)"},
      {Kernel(buf, "        for i in range(4):\n            B[i] = A[i]\n",
              "R.call_tir(cls.k, (x,), out_sinfo=R.Tensor((5,), \"float32\"))"),
       "k.rx:10:13: call to kernel 'k': output 0 is R.Tensor((5,), \"float32\"), but parameter "
       "'B' is T.Buffer((4,), \"float32\")"},
      {Kernel(buf, "        for i in range(4):\n            B[i] = A[i]\n",
              "R.call_tir(cls.k, (x, x), out_sinfo=R.Tensor((4,), \"float32\"))"),
       "call to kernel 'k': the kernel takes 2 buffers and 0 int scalars; the call passes 2 "
       "arguments and 1 outputs (buffers) and 0 tir_vars"},
      {Kernel(buf, "        for i in range(4):\n            B[i] = A[i]\n",
              "R.call_tir(cls.main, (x,), out_sinfo=R.Tensor((4,), \"float32\"))"),
       "expected a kernel (@T.prim_func) as the callee of R.call_tir, got relax function 'main'"},
      {Kernel(buf, "        for i in range(4):\n            B[i] = A[i]\n",
              "R.call_tir_inplace(cls.k, (x, x), inplace_indices=[-1], "
              "out_sinfo=R.Tensor((4,), \"float32\"))"),
       "no output overwrites an argument (all inplace_indices are -1); use R.call_tir"},
  };
  for (const Case& c : cases) {
    absl::Status s = ParseError(c.text);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(s.message(), HasSubstr(c.message)) << c.text;
  }
}

TEST(TirKernelTextTest, InplaceArgumentReadAfterTheCallIsRefused) {
  const std::string text = R"(
@I.ir_module
class Module:
    @T.prim_func
    def bump(A: T.Buffer((4,), "float32")):
        for i in range(4):
            A[i] = A[i] + T.float32(1)

    @R.function
    def main(x: R.Tensor((4,), "float32")):
        with R.dataflow():
            a = R.add(x, x)
            b = R.call_tir_inplace(cls.bump, (a,), inplace_indices=0,
                                   out_sinfo=R.Tensor((4,), "float32"))
            c = R.add(a, b)
            R.output(c)
        return c
)";
  auto module = ParseModule(text);
  ASSERT_TRUE(module.ok()) << module.status();
  auto exec = Build(*module, {});
  ASSERT_FALSE(exec.ok());
  EXPECT_THAT(exec.status().message(),
              HasSubstr("'a' is used after call_tir_inplace of 'b' overwrote it"));
}

}  // namespace
}  // namespace tether::compiler
