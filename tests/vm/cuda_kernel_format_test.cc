// Tests of the CUDA kernel library format ("ptx") that need no GPU: the
// manifest and blob readers and writers, the launch count evaluator, loading,
// the argument checks a kernel call makes before it touches the driver, and
// the VM's refusal to run GPU kernels without a GPU. Launches on a real GPU
// are in tests/gpu/cuda_kernel_library_test.cc.
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "dlpack/dlpack.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/core/tensor.h"
#include "runtime/cuda/cuda_kernel_library.h"
#include "runtime/device/device_api.h"
#include "runtime/vm/exec_builder.h"
#include "runtime/vm/local_vm.h"
#include "tests/testing/cuda_fixtures.h"

namespace tether {
namespace {

using ::testing::HasSubstr;

// A tiny but valid PTX module with the entries the manifests below name.
const std::string& Ptx() {
  static const std::string* ptx = new std::string(
      testing::PtxModule(R"(.visible .entry add_k0(.param .u64 p0, .param .u64 p1, .param .u64 p2,
                       .param .u64 p3, .param .u64 p4, .param .u64 p5)
{
  ret;
}
.visible .entry rows_k0(.param .u64 p0)
{
  ret;
}
.visible .entry rows_k1(.param .u64 p0)
{
  ret;
}
.visible .entry part_k0(.param .u64 p0)
{
  ret;
}
)"));
  return *ptx;
}

// The add kernel, rows (two launches) and part (a scratch buffer).
const std::string& Manifest() {
  static const std::string* manifest =
      new std::string(testing::CudaManifestWithAdd("kernel rows 4 2\n"
                                                   "tensor float32 2 * 4\n"
                                                   "int64\n"
                                                   "tensor float32 2 =d0.0 =s1\n"
                                                   "tensor int32 0\n"
                                                   "launch rows_k0 1 1 1\n"
                                                   "launch rows_k1 128 3 d0.0 s1 /\n"
                                                   "kernel part 2 1 1\n"
                                                   "tensor float32 1 *\n"
                                                   "int64\n"
                                                   "scratch float32 1 s1\n"
                                                   "launch part_k0 1 1 1\n"));
  return *manifest;
}

CudaKernelInfo AddKernel() {
  CudaKernelInfo k;
  k.name = "add";
  for (int i = 0; i < 3; ++i) {
    CudaParamInfo p;
    p.is_tensor = true;
    p.dtype = DataType::Float(32);
    p.dims = {i == 0 ? "*" : "=d0.0"};
    k.params.push_back(p);
  }
  k.launches.push_back(CudaLaunchInfo{"add_k0", 256, {"d0.0"}});
  return k;
}

absl::Status ParseStatus(absl::string_view text) { return ParseCudaManifest(text).status(); }

// The manifest with line `line` (1-based) replaced by `replacement`.
std::string WithLine(int line, absl::string_view replacement) {
  std::vector<std::string> lines = absl::StrSplit(Manifest(), '\n');
  lines[line - 1] = std::string(replacement);
  return absl::StrJoin(lines, "\n");
}

vm::KernelLibraryBlob PtxBlob(absl::string_view manifest = Manifest(),
                              std::vector<CudaImage> images = {{75, Ptx()}}) {
  return MakeCudaKernelLibraryBlob("cuda -arch=sm_75", images, manifest);
}

// A tensor that claims to live on `device` but whose data is never touched:
// the checks under test run before any driver call.
Tensor FakeTensor(std::vector<int64_t> shape, DataType dtype, Device device,
                  std::vector<int64_t> strides = {}) {
  struct Holder {
    DLManagedTensor managed{};
    std::vector<int64_t> shape;
    std::vector<int64_t> strides;
    alignas(64) float data[8] = {};
  };
  auto* h = new Holder;
  h->shape = std::move(shape);
  h->strides = std::move(strides);
  DLTensor& dl = h->managed.dl_tensor;
  dl.data = h->data;
  dl.device = device.dl();
  dl.ndim = static_cast<int32_t>(h->shape.size());
  dl.dtype = dtype.dl();
  dl.shape = h->shape.data();
  dl.strides = h->strides.empty() ? nullptr : h->strides.data();
  h->managed.manager_ctx = h;
  h->managed.deleter = [](DLManagedTensor* self) {
    delete static_cast<Holder*>(self->manager_ctx);
  };
  absl::StatusOr<Tensor> t = Tensor::FromDLPack(&h->managed);
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

Function LoadKernel(absl::string_view name) {
  absl::StatusOr<Ref<Module>> lib = LoadCudaKernelLibrary(PtxBlob());
  EXPECT_TRUE(lib.ok()) << lib.status();
  absl::StatusOr<Function> f = (*lib)->GetFunction(name);
  EXPECT_TRUE(f.ok()) << f.status();
  return *f;
}

absl::Status CallStatus(const Function& f, std::vector<Value> args) {
  return f(ArgSpan(args.data(), args.size())).status();
}

// ---- Manifest ------------------------------------------------------------------

TEST(CudaManifestTest, FormatParseRoundTrip) {
  absl::StatusOr<std::vector<CudaKernelInfo>> parsed = ParseCudaManifest(Manifest());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 3u);
  const CudaKernelInfo& rows = (*parsed)[1];
  EXPECT_EQ(rows.name, "rows");
  ASSERT_EQ(rows.params.size(), 4u);
  EXPECT_TRUE(rows.params[0].is_tensor);
  EXPECT_EQ(rows.params[0].dims, (std::vector<std::string>{"*", "4"}));
  EXPECT_FALSE(rows.params[1].is_tensor);
  EXPECT_EQ(rows.params[2].dims, (std::vector<std::string>{"=d0.0", "=s1"}));
  EXPECT_EQ(rows.params[3].dtype, DataType::Int(32));
  EXPECT_TRUE(rows.params[3].dims.empty());
  ASSERT_EQ(rows.launches.size(), 2u);
  EXPECT_EQ(rows.launches[1].entry, "rows_k1");
  EXPECT_EQ(rows.launches[1].block, 128);
  EXPECT_EQ(rows.launches[1].count, (std::vector<std::string>{"d0.0", "s1", "/"}));
  // Formatting what was parsed gives the same text back.
  EXPECT_EQ(FormatCudaManifest(*parsed), Manifest());

  std::vector<CudaKernelInfo> kernels = {AddKernel()};
  kernels[0].launches.push_back(CudaLaunchInfo{"add_k1", 64, {}});  // unknown count
  absl::StatusOr<std::vector<CudaKernelInfo>> again =
      ParseCudaManifest(FormatCudaManifest(kernels));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(FormatCudaManifest(*again), FormatCudaManifest(kernels));
  EXPECT_TRUE((*again)[0].launches[1].count.empty());
}

TEST(CudaManifestTest, ParsesTheSpecExample) {
  // docs/design/kernel-abi.md, "The CUDA manifest", without the annotations.
  absl::StatusOr<std::vector<CudaKernelInfo>> parsed = ParseCudaManifest(
      "tether-cuda-manifest 1\n"
      "kernel fused_add_relu 3 1\n"
      "tensor float32 2 * 4\n"
      "tensor float32 2 =d0.0 4\n"
      "tensor float32 2 =d0.0 4\n"
      "launch fused_add_relu_k0 256 3 d0.0 4 *\n"
      "kernel sum_rows 3 2\n"
      "tensor float32 2 * *\n"
      "int64\n"
      "tensor float32 1 =d0.0\n"
      "launch sum_rows_k0 1 1 1\n"
      "launch sum_rows_k1 256 1 d0.0\n"
      "kernel total 2 2 1\n"
      "tensor float32 2 * *\n"
      "tensor float32 0\n"
      "scratch float32 1 64\n"
      "launch total_k0 256 1 16384\n"
      "launch total_k1 256 1 256\n"
      "kernel gemm 3 1\n"
      "tensor float16 2 * *\n"
      "tensor float16 2 =d0.1 *\n"
      "tensor float32 2 =d0.0 =d1.1\n"
      "launch gemm_k0 128 1 16384\n"
      "shared 196608\n"
      "end\n");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 4u);
  EXPECT_EQ((*parsed)[2].scratch.size(), 1u);
  EXPECT_EQ((*parsed)[3].launches[0].dynamic_shared_bytes, 196608);
  EXPECT_EQ((*parsed)[0].launches[0].count, (std::vector<std::string>{"d0.0", "4", "*"}));
  EXPECT_EQ((*parsed)[1].launches.size(), 2u);
  EXPECT_FALSE((*parsed)[1].params[1].is_tensor);
}

TEST(CudaManifestTest, EmptyManifestHasNoKernels) {
  absl::StatusOr<std::vector<CudaKernelInfo>> parsed = ParseCudaManifest(FormatCudaManifest({}));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->empty());
}

TEST(CudaManifestTest, RejectsMalformedLinesNamingTheLine) {
  struct Case {
    int line;
    const char* text;
    const char* fragment;
  };
  const Case cases[] = {
      {2, "kernal add 3 1", "line 2: expected kernel or end"},
      {2, "kernel add 3", "line 2: expected kernel <name>"},
      {2, "kernel add x 1", "line 2: bad parameter count x"},
      {2, "kernel add -3 1", "line 2: bad parameter count -3"},
      {2, "kernel add 3 0", "line 2: bad launch count 0"},
      {3, "tensor floaty32 1 *", "line 3: bad dtype floaty32"},
      {3, "tensor float32 x *", "line 3: bad ndim x"},
      {3, "tensor float32 65 *", "line 3: bad ndim 65"},
      {3, "tensor float32 2 *", "line 3: a tensor of 2 dims needs 2 dim specs, got 1"},
      {3, "tensor float32 1 abc", "line 3: bad dim spec \"abc\""},
      {3, "tensor float32 1 -4", "line 3: bad dim spec \"-4\""},
      {3, "tensor float32 1 =d1.0", "line 3: dim 0 refers to d1.0"},    // a later parameter
      {4, "tensor float32 1 =d0.1", "line 4: dim 0 refers to d0.1"},    // past ndim
      {4, "tensor float32 1 =s0", "line 4: dim 0 refers to s0"},        // a tensor, not a scalar
      {3, "tensor float32 2 =d0.1 *", "line 3: dim 0 refers to d0.1"},  // own later dim
      {3, "int32", "line 3: expected parameter 0 of kernel add"},
      {6, "launch add_k0 256 1 d0.0 4", "line 6: count has 2 tokens, expected 1"},
      {6, "launch add_k0 0 1 d0.0", "line 6: bad block size 0"},
      {6, "launch add_k0 257 1 d0.0", "line 6: bad block size 257 (expected 1 to 256)"},
      {6, "launch 9add 256 1 d0.0", "line 6: entry \"9add\" is not a ptx name"},
      {6, "launch add_k0 256 1 d3.0", "line 6: count refers to d3.0"},
      {6, "launch add_k0 256 1 s0", "line 6: count refers to s0"},
      {6, "launch add_k0 256 1 pow", "line 6: bad count token \"pow\""},
      {6, "launch add_k0 256 1 +", "line 6: count operator + has too few operands"},
      {6, "launch add_k0 256 2 d0.0 4", "line 6: count program leaves 2 values"},
      {6, "launch add_k0 256 x d0.0", "line 6: bad count length x"},
      {6, "tensor float32 1 *", "line 6: expected launch 0 of kernel add"},
      {7, "kernel add 1 1", "line 7: duplicate kernel add"},
  };
  for (const Case& c : cases) {
    absl::Status s = ParseStatus(WithLine(c.line, c.text));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.text << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr(c.fragment)) << c.text;
  }
}

TEST(CudaManifestTest, RejectsBadStructure) {
  EXPECT_THAT(ParseStatus("tether-kernel-manifest 1\nend\n").message(),
              HasSubstr("does not start with \"tether-cuda-manifest 1\""));
  EXPECT_THAT(ParseStatus("").message(), HasSubstr("does not start with"));
  EXPECT_THAT(ParseStatus("tether-cuda-manifest 1\nkernel add 3 1\ntensor float32 1 *").message(),
              HasSubstr("line 2: kernel add is missing parameter 1"));
  EXPECT_THAT(ParseStatus("tether-cuda-manifest 1\nkernel add 0 2\nlaunch a 1 1 1").message(),
              HasSubstr("line 2: kernel add is missing launch 1"));
  absl::Status no_end = ParseStatus("tether-cuda-manifest 1\nkernel f 0 1\nlaunch f_k0 1 1 1\n");
  EXPECT_EQ(no_end.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_end.message(), HasSubstr("no end line"));
  EXPECT_THAT(ParseStatus("tether-cuda-manifest 1\nend\nkernel f 0 1\n").message(),
              HasSubstr("line 3: text after end"));
  // A scalar and an earlier dim of the same tensor are fine references.
  EXPECT_TRUE(ParseStatus("tether-cuda-manifest 1\nkernel f 2 1\nint64\n"
                          "tensor float16 3 =s0 * =d1.1\nlaunch f_k0 32 0\nend")
                  .ok());
}

// Scratch buffers: a fifth number on the kernel line, one line each between
// the parameters and the launches, sized like a launch count.
TEST(CudaManifestTest, ScratchBuffersRoundTripAndAreChecked) {
  const std::string text =
      "tether-cuda-manifest 1\nkernel sum 2 2 2\ntensor float32 2 * *\ntensor float32 0\n"
      "scratch float32 1 64\nscratch int64 3 d0.0 d0.1 *\n"
      "launch sum_k0 256 1 16384\nlaunch sum_k1 256 1 256\nend\n";
  absl::StatusOr<std::vector<CudaKernelInfo>> parsed = ParseCudaManifest(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ((*parsed)[0].scratch.size(), 2u);
  EXPECT_EQ((*parsed)[0].scratch[1].dtype, DataType::Int(64));
  EXPECT_EQ((*parsed)[0].scratch[1].count, (std::vector<std::string>{"d0.0", "d0.1", "*"}));
  EXPECT_EQ(FormatCudaManifest(*parsed), text);
  // Without scratch the kernel line keeps its four words.
  EXPECT_THAT(FormatCudaManifest({CudaKernelInfo{"f", {}, {}, {{"f_k0", 1, {"1"}}}}}),
              HasSubstr("kernel f 0 1\n"));

  auto with = [&](absl::string_view kernel_line, absl::string_view scratch_line) {
    return ParseStatus(absl::StrCat("tether-cuda-manifest 1\n", kernel_line,
                                    "\ntensor float32 1 *\n", scratch_line,
                                    "\nlaunch f_k0 256 1 d0.0\nend\n"));
  };
  EXPECT_TRUE(with("kernel f 1 1 1", "scratch float16 3 d0.0 2 *").ok());
  const struct {
    const char* kernel;
    const char* scratch;
    const char* fragment;
  } bad[] = {
      {"kernel f 1 1 x", "scratch float32 1 4", "line 2: bad scratch count x"},
      {"kernel f 1 1 17", "scratch float32 1 4", "line 2: bad scratch count 17 (expected 0 to 16)"},
      {"kernel f 1 1 1 1", "scratch float32 1 4", "line 2: expected kernel <name>"},
      {"kernel f 1 1 1", "launch f_k0 256 1 d0.0", "line 4: expected scratch 0 of kernel f"},
      {"kernel f 1 1 1", "scratch floaty 1 4", "line 4: bad dtype floaty"},
      {"kernel f 1 1 1", "scratch float32 0 4", "line 4: bad scratch size length 0"},
      {"kernel f 1 1 1", "scratch float32 2 4", "line 4: scratch size has 1 tokens, expected 2"},
      {"kernel f 1 1 1", "scratch float32 1 d1.0", "line 4: count refers to d1.0"},
      {"kernel f 1 1 1", "scratch float32 2 4 +", "line 4: count operator + has too few"},
      {"kernel f 1 1 1", "scratch float32 2 4 4", "line 4: count program leaves 2 values"},
  };
  for (const auto& c : bad) {
    absl::Status s = with(c.kernel, c.scratch);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.scratch << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr(c.fragment)) << c.kernel << " / " << c.scratch;
  }
  EXPECT_THAT(ParseStatus("tether-cuda-manifest 1\nkernel f 0 1 1").message(),
              HasSubstr("line 2: kernel f is missing scratch 0"));
}

// Dynamic shared memory: an optional `shared <bytes>` line right after a
// launch line, written only for a launch that has some.
TEST(CudaManifestTest, SharedLinesRoundTrip) {
  const std::string text =
      "tether-cuda-manifest 1\nkernel gemm 1 3\ntensor float16 2 * *\n"
      "launch gemm_k0 128 1 d0.0\nshared 196608\nlaunch gemm_k1 256 1 d0.0\n"
      "launch gemm_k2 1 1 1\nshared 1\nend\n";
  absl::StatusOr<std::vector<CudaKernelInfo>> parsed = ParseCudaManifest(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const std::vector<CudaLaunchInfo>& launches = (*parsed)[0].launches;
  ASSERT_EQ(launches.size(), 3u);
  EXPECT_EQ(launches[0].dynamic_shared_bytes, 196608);
  EXPECT_EQ(launches[0].count, (std::vector<std::string>{"d0.0"}));
  EXPECT_EQ(launches[1].dynamic_shared_bytes, 0);
  EXPECT_EQ(launches[2].dynamic_shared_bytes, 1);
  EXPECT_EQ(FormatCudaManifest(*parsed), text);

  std::vector<CudaKernelInfo> kernels = {AddKernel()};
  kernels[0].launches[0].dynamic_shared_bytes = 196608;
  const std::string formatted = FormatCudaManifest(kernels);
  EXPECT_THAT(formatted, HasSubstr("launch add_k0 256 1 d0.0\nshared 196608\nend\n"));
  absl::StatusOr<std::vector<CudaKernelInfo>> again = ParseCudaManifest(formatted);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)[0].launches[0].dynamic_shared_bytes, 196608);
  EXPECT_EQ(FormatCudaManifest(*again), formatted);

  // The most any GPU gives a block, 227 KiB, is allowed.
  EXPECT_TRUE(ParseStatus("tether-cuda-manifest 1\nkernel f 0 1\nlaunch f_k0 1 1 1\n"
                          "shared 232448\nend\n")
                  .ok());
}

// Without dynamic shared memory a manifest is byte for byte what it was
// before the `shared` line existed, and parses to launches without any.
TEST(CudaManifestTest, ManifestWithoutSharedLinesIsUnchanged) {
  EXPECT_EQ(FormatCudaManifest({AddKernel()}),
            "tether-cuda-manifest 1\n"
            "kernel add 3 1\n"
            "tensor float32 1 *\n"
            "tensor float32 1 =d0.0\n"
            "tensor float32 1 =d0.0\n"
            "launch add_k0 256 1 d0.0\n"
            "end\n");
  absl::StatusOr<std::vector<CudaKernelInfo>> parsed = ParseCudaManifest(Manifest());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  for (const CudaKernelInfo& k : *parsed) {
    for (const CudaLaunchInfo& l : k.launches) EXPECT_EQ(l.dynamic_shared_bytes, 0) << l.entry;
  }
  EXPECT_EQ(FormatCudaManifest(*parsed), Manifest());
}

TEST(CudaManifestTest, RejectsBadSharedLinesNamingTheLine) {
  // Line 4 is f's first launch, line 5 its shared line, line 6 its second
  // launch.
  auto manifest = [](absl::string_view middle) {
    return absl::StrCat("tether-cuda-manifest 1\nkernel f 1 2\ntensor float32 1 *\n", middle,
                        "end\n");
  };
  const std::string launches = "launch f_k0 256 1 d0.0\nshared 1024\nlaunch f_k1 256 1 d0.0\n";
  ASSERT_TRUE(ParseStatus(manifest(launches)).ok());
  auto with_shared = [&](absl::string_view shared_line) {
    return manifest(absl::StrReplaceAll(launches, {{"shared 1024", shared_line}}));
  };
  const struct {
    std::string text;
    const char* fragment;
  } bad[] = {
      {with_shared("shared 0"),
       "line 5: bad shared line \"shared 0\" for launch f_k0 (expected shared <bytes>, 1 to "
       "232448)"},
      {with_shared("shared -1024"), "line 5: bad shared line \"shared -1024\""},
      {with_shared("shared 232449"), "line 5: bad shared line \"shared 232449\""},
      {with_shared("shared 99999999999999999999"), "line 5: bad shared line"},
      {with_shared("shared 48k"), "line 5: bad shared line \"shared 48k\""},
      {with_shared("shared 0x100"), "line 5: bad shared line \"shared 0x100\""},
      {with_shared("shared +1024"), "line 5: bad shared line \"shared +1024\""},
      {with_shared("shared"), "line 5: bad shared line \"shared\""},
      {with_shared("shared 1024 2048"), "line 5: bad shared line \"shared 1024 2048\""},
      // Two in a row.
      {with_shared("shared 1024\nshared 2048"), "line 6: a second shared line for launch f_k0"},
      {with_shared("shared 1024\nshared 1024"), "line 6: a second shared line for launch f_k0"},
      // Not right after a launch line: after the kernel line, a parameter, a
      // scratch line, or a blank line after the kernel's last launch.
      {absl::StrCat("tether-cuda-manifest 1\nkernel f 1 1\nshared 1024\ntensor float32 1 *\n",
                    "launch f_k0 256 1 d0.0\nend\n"),
       "line 3: a shared line must come right after a launch line"},
      {manifest(absl::StrCat("shared 1024\n", launches)),
       "line 4: a shared line must come right after a launch line"},
      {absl::StrCat("tether-cuda-manifest 1\nkernel f 1 1 1\ntensor float32 1 *\n",
                    "scratch float32 1 64\nshared 1024\nlaunch f_k0 256 1 d0.0\nend\n"),
       "line 5: a shared line must come right after a launch line"},
      {manifest(absl::StrCat(launches, "\nshared 1024\n")),
       "line 8: a shared line must come right after a launch line"},
  };
  for (const auto& c : bad) {
    absl::Status s = ParseStatus(c.text);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.text << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr(c.fragment)) << c.text;
  }
}

// ---- Blob ----------------------------------------------------------------------

// A PTX header for `target` (".target sm_90a" etc.).
std::string PtxFor(const std::string& target) {
  return absl::StrCat("//\n// Generated by LLVM NVPTX Back-End\n//\n\n.version 8.0\n.target ",
                      target, "\n.address_size 64\n\n.visible .entry add_k0()\n{\n  ret;\n}\n");
}

TEST(CudaImagePickTest, ArchSpecificPtxRunsOnlyOnItsOwnArchitecture) {
  EXPECT_TRUE(IsArchSpecific(CudaImage{90, PtxFor("sm_90a")}));
  EXPECT_FALSE(IsArchSpecific(CudaImage{90, PtxFor("sm_90")}));
  EXPECT_FALSE(IsArchSpecific(CudaImage{80, PtxFor("sm_80, debug")}));
  EXPECT_FALSE(IsArchSpecific(CudaImage{80, "no header"}));

  const std::vector<CudaImage> images = {{75, PtxFor("sm_75")}, {90, PtxFor("sm_90a")}};
  EXPECT_EQ(CudaImageNames(images), "sm_75, sm_90a");
  // A Hopper card (9.0) runs the sm_90a image; a newer card (10.0, 12.0)
  // cannot, and falls back to the portable sm_75 image; a Turing card
  // (7.5) takes sm_75; an older one nothing.
  ASSERT_NE(PickCudaImage(images, 90), nullptr);
  EXPECT_EQ(PickCudaImage(images, 90)->sm, 90);
  ASSERT_NE(PickCudaImage(images, 100), nullptr);
  EXPECT_EQ(PickCudaImage(images, 100)->sm, 75);
  EXPECT_EQ(PickCudaImage(images, 120)->sm, 75);
  EXPECT_EQ(PickCudaImage(images, 75)->sm, 75);
  EXPECT_EQ(PickCudaImage(images, 70), nullptr);
  // Only an arch-specific image: nothing for any other card.
  const std::vector<CudaImage> only = {{90, PtxFor("sm_90a")}};
  EXPECT_EQ(PickCudaImage(only, 90), &only[0]);
  EXPECT_EQ(PickCudaImage(only, 100), nullptr);
  // Portable PTX runs on every later card (the driver JIT-compiles it).
  const std::vector<CudaImage> portable = {{80, PtxFor("sm_80")}, {90, PtxFor("sm_90")}};
  EXPECT_EQ(PickCudaImage(portable, 100)->sm, 90);
  EXPECT_EQ(PickCudaImage(portable, 89)->sm, 80);
}

TEST(CudaBlobTest, WriteReadRoundTrip) {
  std::vector<CudaImage> images = {{90, "ptx for hopper"}, {75, "ptx for turing"}};
  std::string blob = WriteCudaBlob(images, Manifest());
  EXPECT_EQ(blob.substr(0, 4), "TPTX");
  absl::StatusOr<CudaBlobContents> read = ReadCudaBlob(blob);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->images.size(), 2u);  // written sorted by sm
  EXPECT_EQ(read->images[0].sm, 75);
  EXPECT_EQ(read->images[0].ptx, "ptx for turing");
  EXPECT_EQ(read->images[1].sm, 90);
  EXPECT_EQ(read->images[1].ptx, "ptx for hopper");
  EXPECT_EQ(read->manifest, Manifest());
  // Byte layout: magic, version, count, then sm, reserved, size (with the NUL).
  EXPECT_EQ(blob.size(), 4 + 4 + 4 + 2 * 16 + 15 + 15 + 8 + Manifest().size());
  EXPECT_EQ(static_cast<uint8_t>(blob[4]), 1);
  EXPECT_EQ(static_cast<uint8_t>(blob[8]), 2);
  EXPECT_EQ(static_cast<uint8_t>(blob[12]), 75);
  EXPECT_EQ(static_cast<uint8_t>(blob[20]), 15);
}

// Little-endian helpers to assemble hostile blobs by hand.
void PutU32(std::string* s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s->push_back(static_cast<char>(v >> (8 * i)));
}
void PutU64(std::string* s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s->push_back(static_cast<char>(v >> (8 * i)));
}
std::string Header(uint32_t version, uint32_t count) {
  std::string s = "TPTX";
  PutU32(&s, version);
  PutU32(&s, count);
  return s;
}
std::string Image(uint32_t sm, absl::string_view bytes, uint64_t size, uint32_t reserved = 0) {
  std::string s;
  PutU32(&s, sm);
  PutU32(&s, reserved);
  PutU64(&s, size);
  s.append(bytes.data(), bytes.size());
  return s;
}
std::string Manifest(absl::string_view m) {
  std::string s;
  PutU64(&s, m.size());
  s.append(m.data(), m.size());
  return s;
}

TEST(CudaBlobTest, RejectsMalformedBlobs) {
  const std::string ptx("ptx\0", 4);
  struct Case {
    std::string name;
    std::string bytes;
    const char* fragment;
  };
  const std::string good = Header(1, 1) + Image(80, ptx, 4) + Manifest("m");
  ASSERT_TRUE(ReadCudaBlob(good).ok());
  const Case cases[] = {
      {"empty", "", "does not start with \"TPTX\""},
      {"bad magic", "TPTY" + good.substr(4), "does not start with \"TPTX\""},
      {"truncated header", good.substr(0, 9), "truncated in its header"},
      {"bad version", Header(2, 1) + good.substr(12),
       "has version 2, this runtime reads version 1"},
      {"no images", Header(1, 0) + Manifest("m"), "has 0 images, expected 1 to 16"},
      {"too many images", Header(1, 17) + good.substr(12), "has 17 images"},
      {"truncated image header", Header(1, 1) + Image(80, "", 4).substr(0, 10),
       "truncated in the header of image 0"},
      {"reserved", Header(1, 1) + Image(80, ptx, 4, 7) + Manifest("m"), "reserved field 7"},
      {"bad sm", Header(1, 1) + Image(0, ptx, 4) + Manifest("m"), "is for sm_0"},
      {"unsorted", Header(1, 2) + Image(90, ptx, 4) + Image(80, ptx, 4) + Manifest("m"),
       "not sorted by sm and distinct: sm_80 follows sm_90"},
      {"duplicate sm", Header(1, 2) + Image(80, ptx, 4) + Image(80, ptx, 4) + Manifest("m"),
       "sm_80 follows sm_80"},
      {"empty image", Header(1, 1) + Image(80, "", 0) + Manifest("m"), "has size 0"},
      {"missing nul", Header(1, 1) + Image(80, "ptxx", 4) + Manifest("m"), "not NUL-terminated"},
      {"inner nul", Header(1, 1) + Image(80, std::string("p\0x\0", 4), 4) + Manifest("m"),
       "has a NUL byte at offset 1"},
      {"huge image", Header(1, 1) + Image(80, ptx, uint64_t{1} << 63) + Manifest("m"),
       "has size 9223372036854775808"},
      {"image past end", Header(1, 1) + Image(80, ptx, 4 + 9 + 1) + Manifest("m"),
       "has size 14; 13 bytes are left"},
      {"no manifest size", Header(1, 1) + Image(80, ptx, 4) + "abc",
       "truncated before its manifest size"},
      {"huge manifest",
       Header(1, 1) + Image(80, ptx, 4) + Manifest("m").substr(0, 8).replace(7, 1, "\x7f"),
       "bytes are left in the blob"},
      {"trailing", good + "xy", "has 2 trailing bytes"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<CudaBlobContents> r = ReadCudaBlob(c.bytes);
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(r.status().message(), HasSubstr(c.fragment)) << c.name;
  }
  // Every truncation of a good blob is an error, never a crash.
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(ReadCudaBlob(good.substr(0, n)).ok()) << n;
  }
}

// ---- Counts --------------------------------------------------------------------

absl::StatusOr<int64_t> Eval(absl::string_view program, const CudaCountArgs& args = {}) {
  std::vector<std::string> tokens = absl::StrSplit(program, ' ', absl::SkipEmpty());
  return EvalCudaCount(tokens, args);
}

TEST(CudaCountTest, EvaluatesEveryOperator) {
  EXPECT_EQ(*Eval("7"), 7);
  EXPECT_EQ(*Eval("-7"), -7);
  EXPECT_EQ(*Eval("2 3 +"), 5);
  EXPECT_EQ(*Eval("2 3 -"), -1);
  EXPECT_EQ(*Eval("4 3 *"), 12);
  EXPECT_EQ(*Eval("7 2 /"), 3);
  EXPECT_EQ(*Eval("7 2 %"), 1);
  EXPECT_EQ(*Eval("7 2 min"), 2);
  EXPECT_EQ(*Eval("7 2 max"), 7);
  EXPECT_EQ(*Eval("1 2 + 3 4 + *"), 21);  // (1 + 2) * (3 + 4)
}

TEST(CudaCountTest, DivisionAndModuloFloor) {
  EXPECT_EQ(*Eval("-7 2 /"), -4);
  EXPECT_EQ(*Eval("7 -2 /"), -4);
  EXPECT_EQ(*Eval("-7 -2 /"), 3);
  EXPECT_EQ(*Eval("-8 2 /"), -4);
  EXPECT_EQ(*Eval("-7 2 %"), 1);
  EXPECT_EQ(*Eval("7 -2 %"), -1);
  EXPECT_EQ(*Eval("-7 -2 %"), -1);
  EXPECT_EQ(*Eval("-8 2 %"), 0);
  EXPECT_EQ(*Eval("-9223372036854775808 -1 %"), 0);
}

TEST(CudaCountTest, ReadsDimsAndScalars) {
  CudaCountArgs args;
  args.dims = {{3, 5}, {}, {7}};
  args.scalars = {0, 11, 0};
  EXPECT_EQ(*Eval("d0.0 d0.1 * s1 + d2.0 -", args), 3 * 5 + 11 - 7);
}

TEST(CudaCountTest, RejectsBadPrograms) {
  CudaCountArgs args;
  args.dims = {{3}, {}};
  args.scalars = {0, 2};
  struct Case {
    const char* program;
    const char* fragment;
  };
  const Case cases[] = {
      {"", "empty program"},
      {"5 0 /", "division by zero"},
      {"5 0 %", "division by zero"},
      {"9223372036854775807 1 +", "overflow in 9223372036854775807 + 1"},
      {"-9223372036854775808 1 -", "overflow"},
      {"4611686018427387904 2 *", "overflow"},
      {"-9223372036854775808 -1 /", "overflow"},
      {"99999999999999999999", "bad token"},
      {"1 +", "operator + has too few operands"},
      {"1 2", "leaves 2 values, expected 1"},
      {"1 2 pow", "bad token \"pow\""},
      {"d0.1", "reference d0.1 is out of range"},
      {"d2.0", "reference d2.0 is out of range"},
      {"s5", "reference s5 is out of range"},
      {"+1", "bad token \"+1\""},
  };
  for (const Case& c : cases) {
    absl::StatusOr<int64_t> r = Eval(c.program, args);
    ASSERT_FALSE(r.ok()) << c.program;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.program;
    EXPECT_THAT(r.status().message(), HasSubstr(c.fragment)) << c.program;
  }
}

// ---- Loading and argument checks -----------------------------------------------

TEST(CudaKernelLibraryTest, LoadsWithoutAGpuAndListsItsKernels) {
  absl::StatusOr<Ref<Module>> lib = LoadCudaKernelLibrary(PtxBlob());
  ASSERT_TRUE(lib.ok()) << lib.status();
  EXPECT_EQ((*lib)->type_key(), "library.ptx");
  EXPECT_TRUE((*lib)->ImplementsFunction("add"));
  EXPECT_TRUE((*lib)->ImplementsFunction("rows"));
  EXPECT_TRUE((*lib)->GetFunction("add").ok());
  absl::StatusOr<Function> missing = (*lib)->GetFunction("mul");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("mul"));
}

TEST(CudaKernelLibraryTest, RejectsOtherFormatsAndCorruptBlobs) {
  vm::KernelLibraryBlob so = PtxBlob();
  so.format = "so";
  EXPECT_EQ(LoadCudaKernelLibrary(so).status().code(), absl::StatusCode::kUnimplemented);

  vm::KernelLibraryBlob corrupt = PtxBlob();
  corrupt.data.resize(corrupt.data.size() - 3);
  absl::Status s = LoadCudaKernelLibrary(corrupt).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);

  absl::Status bad_manifest =
      LoadCudaKernelLibrary(PtxBlob("tether-cuda-manifest 1\nkernel f 0 1\nend\n")).status();
  EXPECT_EQ(bad_manifest.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_manifest.message(), HasSubstr("line 3"));
}

TEST(CudaKernelLibraryTest, RejectsAnImageWithoutAListedEntry) {
  std::string ptx = absl::StrReplaceAll(Ptx(), {{"rows_k1", "rows_k9"}});
  absl::Status s = LoadCudaKernelLibrary(PtxBlob(Manifest(), {{75, Ptx()}, {90, ptx}})).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("the ptx for sm_90 has no entry rows_k1 (kernel rows launch 1)"));
}

TEST(CudaKernelLibraryTest, CallChecksArityAndKinds) {
  Function add = LoadKernel("add");
  Tensor t = FakeTensor({4}, DataType::Float(32), Device::Cuda(0));
  absl::Status s = CallStatus(add, {t, t});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("kernel add takes 3 arguments, got 2"));

  s = CallStatus(add, {t, Value(int64_t{3}), t});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("kernel add: argument 1 must be a Tensor(ndim=1, dtype=float32)"));

  Function rows = LoadKernel("rows");
  Tensor x = FakeTensor({2, 4}, DataType::Float(32), Device::Cuda(0));
  Tensor i32 = FakeTensor({}, DataType::Int(32), Device::Cuda(0));
  s = CallStatus(rows, {x, x, x, i32});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("kernel rows: argument 1 must be an int"));
}

TEST(CudaKernelLibraryTest, CallWithCpuTensorsNamesTheKernelAndArgument) {
  Function add = LoadKernel("add");
  absl::StatusOr<Tensor> cpu =
      Tensor::Empty(std::vector<int64_t>{4}, DataType::Float(32), Device::Cpu());
  ASSERT_TRUE(cpu.ok());
  absl::Status s = CallStatus(add, {*cpu, *cpu, *cpu});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("kernel add: argument 0 is on cpu:0, expected a cuda device"));
}

TEST(CudaKernelLibraryTest, CallChecksDevicesDtypesAndStrides) {
  Function add = LoadKernel("add");
  Tensor a = FakeTensor({4}, DataType::Float(32), Device::Cuda(0));
  absl::Status s = CallStatus(add, {a, FakeTensor({4}, DataType::Float(32), Device::Cuda(1)), a});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("kernel add: argument 1 is on cuda:1, expected cuda:0"));

  s = CallStatus(add, {a, FakeTensor({4}, DataType::Float(16), Device::Cuda(0)), a});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("kernel add: argument 1 has dtype float16, expected float32"));

  s = CallStatus(add, {a, a, FakeTensor({2, 2}, DataType::Float(32), Device::Cuda(0))});
  EXPECT_THAT(s.message(), HasSubstr("kernel add: argument 2 has 2 dims, expected 1"));

  Function rows = LoadKernel("rows");
  Tensor strided = FakeTensor({2, 4}, DataType::Float(32), Device::Cuda(0), {8, 2});
  Tensor i32 = FakeTensor({}, DataType::Int(32), Device::Cuda(0));
  s = CallStatus(rows, {strided, Value(int64_t{4}), strided, i32});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("kernel rows: argument 0 is not compact row-major (dim 1 has stride 2"));
}

TEST(CudaKernelLibraryTest, CallChecksTheAlignmentKernelsRelyOn) {
  Function add = LoadKernel("add");
  Tensor a = FakeTensor({4}, DataType::Float(32), Device::Cuda(0));
  Tensor eight = FakeTensor({8}, DataType::Float(32), Device::Cuda(0));
  // 4 bytes into the data: a float view that is not 16-byte aligned.
  absl::StatusOr<Tensor> shifted =
      eight.CreateView(std::vector<int64_t>{4}, DataType::Float(32), 4);
  ASSERT_TRUE(shifted.ok()) << shifted.status();
  absl::Status s = CallStatus(add, {a, *shifted, a});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("kernel add: argument 1 data is not 16-byte aligned (byte_offset 4)"));
}

TEST(CudaKernelLibraryTest, CallChecksDimSpecs) {
  Function add = LoadKernel("add");
  Tensor four = FakeTensor({4}, DataType::Float(32), Device::Cuda(0));
  Tensor three = FakeTensor({3}, DataType::Float(32), Device::Cuda(0));
  absl::Status s = CallStatus(add, {four, three, four});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("kernel add: argument 1 dim 0 is 3, expected 4 (= argument 0 dim 0)"));

  Function rows = LoadKernel("rows");
  Tensor i32 = FakeTensor({}, DataType::Int(32), Device::Cuda(0));
  Tensor x23 = FakeTensor({2, 3}, DataType::Float(32), Device::Cuda(0));
  s = CallStatus(rows, {x23, Value(int64_t{3}), x23, i32});
  EXPECT_THAT(s.message(), HasSubstr("kernel rows: argument 0 dim 1 is 3, expected 4"));

  Tensor x24 = FakeTensor({2, 4}, DataType::Float(32), Device::Cuda(0));
  s = CallStatus(rows, {x24, Value(int64_t{5}), x24, i32});
  EXPECT_THAT(s.message(),
              HasSubstr("kernel rows: argument 2 dim 1 is 4, expected 5 (= argument 1)"));
}

TEST(CudaKernelLibraryTest, CallEvaluatesCountsBeforeTheDriver) {
  Function rows = LoadKernel("rows");
  Tensor i32 = FakeTensor({}, DataType::Int(32), Device::Cuda(0));
  Tensor x20 = FakeTensor({2, 4}, DataType::Float(32), Device::Cuda(0));
  Tensor y20 = FakeTensor({2, 0}, DataType::Float(32), Device::Cuda(0));
  // rows_k1's count is d0.0 / s1, and s1 is 0.
  absl::Status s = CallStatus(rows, {x20, Value(int64_t{0}), y20, i32});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("kernel rows launch rows_k1: count program \"d0.0 s1 /\": "
                                     "division by zero"));
}

TEST(CudaKernelLibraryTest, CallSizesScratchBeforeTheDriver) {
  Function part = LoadKernel("part");
  Tensor x = FakeTensor({4}, DataType::Float(32), Device::Cuda(0));
  absl::Status s = CallStatus(part, {x, Value(int64_t{-3})});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("kernel part scratch 0: size -3 is negative"));
  s = CallStatus(part, {x, Value(int64_t{1} << 62)});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("kernel part scratch 0: 4611686018427387904 elements of float32 overflow"));
}

TEST(CudaKernelLibraryTest, CheckedCallWithoutAGpuIsUnavailable) {
  if (DeviceExists(Device::Cuda(0))) {
    GTEST_SKIP() << "a GPU is present; the fake tensors of this test must not reach it";
  }
  Function add = LoadKernel("add");
  Tensor a = FakeTensor({4}, DataType::Float(32), Device::Cuda(0));
  absl::Status s = CallStatus(add, {a, a, a});
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
}

// ---- The VM ---------------------------------------------------------------------

absl::StatusOr<Ref<vm::Executable>> ExecutableCallingAdd() {
  vm::ExecBuilder b;
  b.EmitFunction("main", 3, {"a", "b", "c"});
  b.EmitCall("add", {vm::Arg::Register(0), vm::Arg::Register(1), vm::Arg::Register(2)});
  b.EmitRet(2);
  b.EndFunction("main");
  b.AddKernelLibrary(PtxBlob());
  return b.Get();
}

TEST(CudaKernelLibraryVmTest, VmOnCpuRejectsPtxKernels) {
  absl::StatusOr<Ref<vm::Executable>> exec = ExecutableCallingAdd();
  ASSERT_TRUE(exec.ok()) << exec.status();
  auto made = vm::LocalVirtualMachine::Create(*exec, {Device::Cpu()});
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(made.status().message(),
              HasSubstr("the executable's kernels were compiled for cuda -arch=sm_75; create the "
                        "VM on a cuda device (e.g. cuda:0)"));
}

TEST(CudaKernelLibraryVmTest, VmOnMissingGpuIsUnavailable) {
  if (DeviceExists(Device::Cuda(0))) GTEST_SKIP() << "cuda:0 exists on this machine";
  absl::StatusOr<Ref<vm::Executable>> exec = ExecutableCallingAdd();
  ASSERT_TRUE(exec.ok()) << exec.status();
  auto made = vm::LocalVirtualMachine::Create(*exec, {Device::Cuda(0)});
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(made.status().message(), HasSubstr("device cuda:0 does not exist on this machine"));
}

}  // namespace
}  // namespace tether
