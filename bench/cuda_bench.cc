// GPU benchmarks: executables compiled for `cuda` (the GPU's own
// architecture) run by a LocalVirtualMachine on cuda:0, against their
// anchors in the same run, every figure timed with CUDA events around the
// work (never kernel submission), on random data:
//   Matmul/<dtype>/N:  relax.matmul N x N x N (float32, float16 and bfloat16
//                      operands; float32 accumulation) vs cublasGemmEx with
//                      CUBLAS_COMPUTE_32F (TFLOP/s, ratio = ours / cuBLAS).
//                      Ours is checked against cuBLAS's product of the same
//                      operands first (relative Frobenius error); a wrong
//                      product is an error, never a figure.
//   Elementwise:       add, and a fused add + relu + multiply, over 1 GiB
//                      float32 operands vs cuMemcpyDtoD of 1 GiB (GB/s of
//                      bytes moved, ratio = ours / memcpy).
//   Rows:              softmax, layer_norm and sum over the rows of a
//                      16384 x 8192 float32 matrix (512 MiB), in GB/s of the
//                      bytes they must move (the matrix read once, the result
//                      written once) vs the same memcpy.
// cuBLAS is reached with dlopen (libcublas.so.13 from the CUDA toolkit), like
// the driver, so this builds without the toolkit; its rows are skipped when
// the library is absent, and every row is skipped without a CUDA device. Each
// row's set-up (operands, compile, first call) is timed on stderr, and a
// summary table is printed at the end.
#include <dlfcn.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "bench/figures.h"
#include "benchmark/benchmark.h"
#include "compiler/backend/llvm/target.h"
#include "compiler/build.h"
#include "compiler/text/parser.h"
#include "runtime/core/scalar.h"
#include "runtime/core/tensor.h"
#include "runtime/device/device_api.h"
#include "runtime/vm/local_vm.h"

namespace tether {
namespace {

const Device kGpu = Device::Cuda(0);

using bench::Figure;
using bench::Figures;

bool HaveGpu(benchmark::State& state) {
  if (DeviceExists(kGpu)) return true;
  state.SkipWithError("no CUDA device (cuda:0 does not exist)");
  return false;
}

// Seconds of wall time since `start`, for the set-up lines on stderr.
double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// "cuda -arch=sm_XY" for cuda:0 (the default cuda target if it does not say).
std::string GpuTarget() {
  absl::StatusOr<std::string> target = compiler::CudaTargetForDevice(kGpu);
  return target.ok() ? *target : std::string("cuda");
}

// A tensor of `shape` on the GPU with values in [-1, 1) (bit patterns made
// on the host for 16-bit types by truncating floats).
absl::StatusOr<Tensor> RandomGpuTensor(const std::vector<int64_t>& shape, DataType dtype,
                                       uint32_t seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<uint8_t> bytes(static_cast<size_t>(n * dtype.bytes()));
  for (int64_t i = 0; i < n; ++i) {
    float f = dist(rng);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    if (dtype.bits() == 32) {
      std::memcpy(&bytes[static_cast<size_t>(i) * 4], &f, 4);
    } else if (dtype.is_bfloat16()) {
      uint16_t h = static_cast<uint16_t>(bits >> 16);
      std::memcpy(&bytes[static_cast<size_t>(i) * 2], &h, 2);
    } else {  // float16: a small normal number, exactly representable
      uint16_t h = static_cast<uint16_t>(((bits >> 16) & 0x8000) | 0x3800 | ((bits >> 13) & 0x3ff));
      std::memcpy(&bytes[static_cast<size_t>(i) * 2], &h, 2);
    }
  }
  TETHER_ASSIGN_OR_RETURN(Tensor host, Tensor::FromBytes(shape, dtype, bytes.data(), bytes.size()));
  return host.CopyTo(kGpu);
}

// A compiled function on cuda:0 with its arguments.
struct GpuProgram {
  std::unique_ptr<vm::LocalVirtualMachine> vm;
  std::vector<Value> args;
};

absl::StatusOr<GpuProgram> Compile(const std::string& text, std::vector<Value> args) {
  TETHER_ASSIGN_OR_RETURN(compiler::IRModule m, compiler::ParseModule(text));
  compiler::BuildOptions options;
  options.target = GpuTarget();
  TETHER_ASSIGN_OR_RETURN(Ref<vm::Executable> exec, compiler::Build(m, options));
  GpuProgram p;
  TETHER_ASSIGN_OR_RETURN(p.vm, vm::LocalVirtualMachine::Create(exec, {kGpu}));
  p.args = std::move(args);
  return p;
}

// The one row whose set-up is kept (RowState).
struct RowCache {
  std::string key;
  std::shared_ptr<void> state;
  absl::Status status;
};
RowCache* TheRowCache() {
  static RowCache* const cache = new RowCache;
  return cache;
}

// Google Benchmark calls a benchmark function several times (to size its
// iteration count, then once per repetition), and runs one row's calls
// before the next row's: a row's operands and program are made once, by
// `make`, and kept until another row asks for its own (which frees them
// first). The same failure is returned to every call.
template <typename T, typename Make>
absl::StatusOr<T*> RowState(const std::string& key, Make make) {
  RowCache* const cache = TheRowCache();
  if (cache->key != key) {
    cache->state.reset();
    cache->key = key;
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<T> made = make();
    cache->status = made.status();
    if (made.ok()) cache->state = std::make_shared<T>(std::move(*made));
    std::cerr << "cuda_bench: " << key << ": set-up " << Since(start) << " s"
              << (made.ok() ? "" : absl::StrCat(", failed: ", made.status().message())) << "\n";
  }
  if (!cache->status.ok()) return cache->status;
  return static_cast<T*>(cache->state.get());
}

// Times `work` with CUDA events, once per benchmark iteration; returns the
// total of the timings in seconds (0 when it failed and skipped).
template <typename F>
double TimeOnGpu(benchmark::State& state, F work) {
  absl::StatusOr<DeviceAPI*> api = DeviceAPI::Get(kDLCUDA);
  absl::StatusOr<std::unique_ptr<DeviceTimer>> timer = (*api)->CreateTimer(kGpu);
  if (!timer.ok()) {
    state.SkipWithError(std::string(timer.status().message()).c_str());
    return 0;
  }
  if (absl::Status s = work(); !s.ok()) {  // warm-up: module load, first allocations
    state.SkipWithError(std::string(s.message()).c_str());
    return 0;
  }
  double total = 0;
  for (auto _ : state) {
    absl::Status s = (*timer)->Start();
    if (s.ok()) s = work();
    if (s.ok()) s = (*timer)->Stop();
    absl::StatusOr<int64_t> ns = s.ok() ? (*timer)->ElapsedNanos() : absl::StatusOr<int64_t>(s);
    if (!ns.ok()) {
      state.SkipWithError(std::string(ns.status().message()).c_str());
      return 0;
    }
    state.SetIterationTime(static_cast<double>(*ns) / 1e9);
    total += static_cast<double>(*ns) / 1e9;
  }
  return total;
}

// Records `units` per iteration over `seconds` as the anchor's or our figure
// for `key`, with the counter `unit` and, for ours, the ratio.
void Report(benchmark::State& state, const std::string& key, const std::string& unit, double units,
            double seconds, bool anchor) {
  if (seconds <= 0) return;
  const double rate = units * static_cast<double>(state.iterations()) / seconds;
  state.counters[unit] = rate;
  Figure& f = Figures()[key];
  f.unit = unit;
  (anchor ? f.anchor : f.ours) = rate;
  if (!anchor && f.anchor > 0) state.counters["ratio"] = rate / f.anchor;
}

// ---- cuBLAS through dlopen ----------------------------------------------------

struct Cublas {
  using Handle = void*;
  int (*create)(Handle*) = nullptr;
  int (*gemm_ex)(Handle, int, int, int, int, int, const void*, const void*, int, int, const void*,
                 int, int, const void*, void*, int, int, int, int) = nullptr;
  Handle handle = nullptr;

  static const Cublas* Get() {
    static const Cublas* cublas = [] {
      void* lib = nullptr;
      for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so",
                               "/usr/local/cuda/lib64/libcublas.so"}) {
        if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
      }
      auto* c = new Cublas;
      if (lib == nullptr) return static_cast<const Cublas*>(nullptr);
      c->create = reinterpret_cast<decltype(c->create)>(dlsym(lib, "cublasCreate_v2"));
      c->gemm_ex = reinterpret_cast<decltype(c->gemm_ex)>(dlsym(lib, "cublasGemmEx"));
      if (c->create == nullptr || c->gemm_ex == nullptr || c->create(&c->handle) != 0) {
        return static_cast<const Cublas*>(nullptr);
      }
      return static_cast<const Cublas*>(c);
    }();
    return cublas;
  }
};
constexpr int kCublasOpN = 0;
constexpr int kCublasCompute32F = 68;
constexpr int kCublasGemmDefault = -1;
int CudaDataType(DataType t) {
  if (t.is_bfloat16()) return 14;  // CUDA_R_16BF
  return t.bits() == 16 ? 2 : 0;   // CUDA_R_16F, CUDA_R_32F
}

DataType DtypeArg(int64_t code) {
  return code == 0 ? DataType::Float(32) : code == 1 ? DataType::Float(16) : DataType::BFloat16();
}

// ---- matmul ----

// C = A B (row-major, all n x n) with cuBLAS: column-major C^T = B^T A^T.
absl::Status CublasMatmul(const Cublas& cublas, const Tensor& a, const Tensor& b, const Tensor& c) {
  const float alpha = 1, beta = 0;
  const int n = static_cast<int>(a->shape()[0]);
  const int type = CudaDataType(a->dtype());
  int r = cublas.gemm_ex(cublas.handle, kCublasOpN, kCublasOpN, n, n, n, &alpha, b->element_data(),
                         type, n, a->element_data(), type, n, &beta, c->element_data(), type, n,
                         kCublasCompute32F, kCublasGemmDefault);
  return r == 0 ? absl::OkStatus() : absl::InternalError(absl::StrCat("cublasGemmEx: ", r));
}

// A floating-point tensor's values as doubles, on the host.
absl::StatusOr<std::vector<double>> HostValues(const Tensor& t) {
  TETHER_ASSIGN_OR_RETURN(Tensor host, t.CopyTo(Device::Cpu()));
  const int64_t n = host->NumElements();
  std::vector<double> out(static_cast<size_t>(n));
  const DataType dt = host->dtype();
  for (int64_t i = 0; i < n; ++i) {
    if (dt.bits() == 32) {
      out[static_cast<size_t>(i)] = static_cast<const float*>(host->element_data())[i];
    } else {
      const uint16_t bits = static_cast<const uint16_t*>(host->element_data())[i];
      out[static_cast<size_t>(i)] = dt.is_bfloat16() ? BFloat16ToFloat(bits) : HalfToFloat(bits);
    }
  }
  return out;
}

// ||got - want|| / ||want||; NaN when either has a NaN.
double RelativeError(const std::vector<double>& got, const std::vector<double>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return std::sqrt(diff) / std::sqrt(norm);
}

struct CublasRow {
  Tensor a, b, c;
};

void BM_MatmulCublas(benchmark::State& state) {
  if (!HaveGpu(state)) return;
  const int64_t n = state.range(0);
  const DataType dt = DtypeArg(state.range(1));
  const Cublas* cublas = Cublas::Get();
  if (cublas == nullptr) {
    state.SkipWithError("cuBLAS (libcublas.so) cannot be loaded");
    return;
  }
  absl::StatusOr<CublasRow*> row = RowState<CublasRow>(
      absl::StrCat("cublas/matmul/", dt.ToString(), "/", n), [&]() -> absl::StatusOr<CublasRow> {
        CublasRow r;
        TETHER_ASSIGN_OR_RETURN(r.a, RandomGpuTensor({n, n}, dt, 1));
        TETHER_ASSIGN_OR_RETURN(r.b, RandomGpuTensor({n, n}, dt, 2));
        TETHER_ASSIGN_OR_RETURN(r.c, RandomGpuTensor({n, n}, dt, 3));
        return r;
      });
  if (!row.ok()) {
    state.SkipWithError(std::string(row.status().message()).c_str());
    return;
  }
  CublasRow& r = **row;
  double seconds = TimeOnGpu(state, [&] { return CublasMatmul(*cublas, r.a, r.b, r.c); });
  Report(state, absl::StrCat("matmul/", dt.ToString(), "/", n), "TFLOP/s",
         2.0 * static_cast<double>(n * n * n) / 1e12, seconds, /*anchor=*/true);
}

constexpr char kMatmulModule[] = R"(
@I.ir_module
class Module:
    @R.function
    def main(a: R.Tensor((N, N), "DT"), b: R.Tensor((N, N), "DT")) -> R.Tensor((N, N), "DT"):
        with R.dataflow():
            gv = R.matmul(a, b)
            R.output(gv)
        return gv
)";

// How far a product of random operands in [-1, 1) may be from a reference,
// accumulating in float32: the rounding of the result to its type and the
// order of the sums (METHOD: float32 far under 1e-3; 16-bit results within a
// few of their unit roundoff).
double MatmulTolerance(DataType dt) {
  if (dt.bits() == 32) return 1e-4;
  return dt.is_bfloat16() ? 1e-2 : 2e-3;
}

// Our product `got` (n x n, on the host) against float64 dot products of the
// operands at 256 random positions: ||got - ref|| / ||ref|| over them.
absl::StatusOr<double> ErrorAgainstFloat64(const Tensor& a, const Tensor& b,
                                           const std::vector<double>& got, int64_t n) {
  TETHER_ASSIGN_OR_RETURN(std::vector<double> ha, HostValues(a));
  TETHER_ASSIGN_OR_RETURN(std::vector<double> hb, HostValues(b));
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> pick(0, n - 1);
  std::vector<double> ours, ref;
  for (int s = 0; s < 256; ++s) {
    const int64_t i = pick(rng), j = pick(rng);
    double dot = 0;
    for (int64_t k = 0; k < n; ++k) {
      dot += ha[static_cast<size_t>(i * n + k)] * hb[static_cast<size_t>(k * n + j)];
    }
    ours.push_back(got[static_cast<size_t>(i * n + j)]);
    ref.push_back(dot);
  }
  return RelativeError(ours, ref);
}

struct MatmulRow {
  Tensor a, b;
  std::shared_ptr<GpuProgram> program;
};

// Operands and program for our matmul row, checked first: against float64
// dot products at sampled positions, and against cuBLAS's whole product of
// the same operands when cuBLAS is there. A wrong product is an error.
absl::StatusOr<MatmulRow> MakeMatmulRow(int64_t n, DataType dt) {
  MatmulRow r;
  TETHER_ASSIGN_OR_RETURN(r.a, RandomGpuTensor({n, n}, dt, 1));
  TETHER_ASSIGN_OR_RETURN(r.b, RandomGpuTensor({n, n}, dt, 2));
  std::string text =
      absl::StrReplaceAll(kMatmulModule, {{"N", absl::StrCat(n)}, {"DT", dt.ToString()}});
  TETHER_ASSIGN_OR_RETURN(GpuProgram p, Compile(text, {Value(r.a), Value(r.b)}));
  r.program = std::make_shared<GpuProgram>(std::move(p));
  TETHER_ASSIGN_OR_RETURN(
      Value out,
      r.program->vm->Invoke("main", ArgSpan(r.program->args.data(), r.program->args.size())));
  TETHER_ASSIGN_OR_RETURN(std::vector<double> got, HostValues(Tensor(out.AsRef<TensorObj>())));
  TETHER_ASSIGN_OR_RETURN(double exact, ErrorAgainstFloat64(r.a, r.b, got, n));
  std::string line =
      absl::StrCat("matmul ", dt.ToString(), " ", n, ": |tether - float64| / |float64| = ", exact);
  double vs_cublas = 0;
  if (const Cublas* cublas = Cublas::Get(); cublas != nullptr) {
    TETHER_ASSIGN_OR_RETURN(Tensor ref, Tensor::Empty(std::vector<int64_t>{n, n}, dt, kGpu));
    TETHER_RETURN_IF_ERROR(CublasMatmul(*cublas, r.a, r.b, ref));
    TETHER_ASSIGN_OR_RETURN(std::vector<double> want, HostValues(ref));
    vs_cublas = RelativeError(got, want);
    absl::StrAppend(&line, " (256 positions), |tether - cuBLAS| / |cuBLAS| = ", vs_cublas,
                    " (all of it)");
  }
  std::cerr << "cuda_bench: " << line << "\n";
  if (!(exact <= MatmulTolerance(dt)) || !(vs_cublas <= MatmulTolerance(dt))) {
    return absl::InternalError(absl::StrCat("wrong product: ", line));
  }
  return r;
}

void BM_MatmulTether(benchmark::State& state) {
  if (!HaveGpu(state)) return;
  const int64_t n = state.range(0);
  const DataType dt = DtypeArg(state.range(1));
  absl::StatusOr<MatmulRow*> row = RowState<MatmulRow>(
      absl::StrCat("tether/matmul/", dt.ToString(), "/", n), [&] { return MakeMatmulRow(n, dt); });
  if (!row.ok()) {
    state.SkipWithError(std::string(row.status().message()).c_str());
    return;
  }
  GpuProgram& p = *(*row)->program;
  double seconds = TimeOnGpu(state, [&]() -> absl::Status {
    return p.vm->Invoke("main", ArgSpan(p.args.data(), p.args.size())).status();
  });
  Report(state, absl::StrCat("matmul/", dt.ToString(), "/", n), "TFLOP/s",
         2.0 * static_cast<double>(n * n * n) / 1e12, seconds, /*anchor=*/false);
}

// ---- elementwise over 1 GiB, rows of 512 MiB ----

constexpr int64_t kElems = int64_t{1} << 28;    // 1 GiB of float32
constexpr int64_t kRows = 16384, kCols = 8192;  // 512 MiB of float32

// The bandwidth keys the device-to-device copy anchors.
constexpr const char* kBandwidthKeys[] = {"elementwise/add", "elementwise/add_relu_mul",
                                          "rows/softmax", "rows/layer_norm", "rows/sum"};

void BM_MemcpyDtoD(benchmark::State& state) {
  if (!HaveGpu(state)) return;
  absl::StatusOr<CublasRow*> row = RowState<CublasRow>("memcpy", []() -> absl::StatusOr<CublasRow> {
    const int64_t shape[] = {kElems};
    CublasRow r;  // a: the source, b: the destination
    TETHER_ASSIGN_OR_RETURN(r.a, Tensor::Empty(shape, DataType::Float(32), kGpu));
    TETHER_ASSIGN_OR_RETURN(r.b, Tensor::Empty(shape, DataType::Float(32), kGpu));
    return r;
  });
  if (!row.ok()) {
    state.SkipWithError(std::string(row.status().message()).c_str());
    return;
  }
  double seconds = TimeOnGpu(state, [&]() { return (*row)->b.CopyFrom((*row)->a); });
  // The anchor of the bandwidth rows: bytes read plus bytes written per second.
  for (const char* key : kBandwidthKeys) {
    Report(state, key, "GB/s", 2.0 * kElems * 4 / 1e9, seconds, /*anchor=*/true);
  }
}

// A bandwidth row: `body` (a Relax expression of `a` and `b`, shaped
// `a_shape` and `b_shape`) compiled for cuda:0 on random operands, timed,
// and reported as `bytes` moved per call under `key`.
void BandwidthRow(benchmark::State& state, const std::string& key, const std::string& body,
                  const std::vector<int64_t>& a_shape, const std::vector<int64_t>& b_shape,
                  const std::string& out_type, double bytes) {
  if (!HaveGpu(state)) return;
  absl::StatusOr<GpuProgram*> p = RowState<GpuProgram>(key, [&]() -> absl::StatusOr<GpuProgram> {
    TETHER_ASSIGN_OR_RETURN(Tensor a, RandomGpuTensor(a_shape, DataType::Float(32), 1));
    TETHER_ASSIGN_OR_RETURN(Tensor b, RandomGpuTensor(b_shape, DataType::Float(32), 2));
    auto type = [](const std::vector<int64_t>& shape) {
      return absl::StrCat("R.Tensor((", absl::StrJoin(shape, ", "), shape.size() == 1 ? "," : "",
                          "), \"float32\")");
    };
    const std::string text = absl::StrCat(
        "@I.ir_module\nclass Module:\n    @R.function\n    def main(a: ", type(a_shape),
        ", b: ", type(b_shape), ") -> ", out_type,
        ":\n        with R.dataflow():\n            gv = ", body,
        "\n            R.output(gv)\n        return gv\n");
    return Compile(text, {Value(a), Value(b)});
  });
  if (!p.ok()) {
    state.SkipWithError(std::string(p.status().message()).c_str());
    return;
  }
  double seconds = TimeOnGpu(state, [&]() -> absl::Status {
    return (*p)->vm->Invoke("main", ArgSpan((*p)->args.data(), (*p)->args.size())).status();
  });
  Report(state, key, "GB/s", bytes / 1e9, seconds, /*anchor=*/false);
}

void BM_ElementwiseTether(benchmark::State& state, bool fused) {
  // Two operands read, one result written.
  BandwidthRow(state, fused ? "elementwise/add_relu_mul" : "elementwise/add",
               fused ? "R.multiply(R.nn.relu(R.add(a, b)), b)" : "R.add(a, b)", {kElems}, {kElems},
               "R.Tensor((268435456,), \"float32\")", 3.0 * kElems * 4);
}

// Rows of a: the matrix read once, the result written once (b, the
// layer_norm's gamma and beta, a row long: not counted).
void BM_RowsTether(benchmark::State& state, const std::string& op) {
  const std::string rows = absl::StrCat("R.Tensor((", kRows, ", ", kCols, "), \"float32\")");
  const double matrix = static_cast<double>(kRows * kCols) * 4;
  if (op == "softmax") {
    BandwidthRow(state, "rows/softmax", "R.nn.softmax(a, axis=-1)", {kRows, kCols}, {kCols}, rows,
                 2 * matrix);
  } else if (op == "layer_norm") {
    BandwidthRow(state, "rows/layer_norm", "R.nn.layer_norm(a, b, b, axes=[-1], epsilon=1e-5)",
                 {kRows, kCols}, {kCols}, rows, 2 * matrix);
  } else {
    BandwidthRow(state, "rows/sum", "R.sum(a, axis=[1])", {kRows, kCols}, {kCols},
                 absl::StrCat("R.Tensor((", kRows, ",), \"float32\")"), matrix + kRows * 4.0);
  }
}

}  // namespace
}  // namespace tether

int main(int argc, char** argv) {
  using namespace tether;  // NOLINT(build/namespaces): the registration list below
  // float32 at 4096; the 16-bit types at 4096 and 8192.
  for (auto [n, dt] :
       {std::pair<int64_t, int64_t>{4096, 0}, {4096, 1}, {4096, 2}, {8192, 1}, {8192, 2}}) {
    benchmark::RegisterBenchmark("Matmul/cuBLAS", BM_MatmulCublas)
        ->Args({n, dt})
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("Matmul/Tether", BM_MatmulTether)
        ->Args({n, dt})
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
  // The big rows run a fixed count: each call moves gigabytes, and a count
  // grown to a minimum time would spend minutes on set-up and host work.
  benchmark::RegisterBenchmark("Bandwidth/memcpy_dtod", BM_MemcpyDtoD)
      ->UseManualTime()
      ->Iterations(50)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("Bandwidth/add", BM_ElementwiseTether, false)
      ->UseManualTime()
      ->Iterations(50)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("Bandwidth/add_relu_mul", BM_ElementwiseTether, true)
      ->UseManualTime()
      ->Iterations(50)
      ->Unit(benchmark::kMillisecond);
  for (const char* op : {"softmax", "layer_norm", "sum"}) {
    benchmark::RegisterBenchmark(absl::StrCat("Bandwidth/", op).c_str(), BM_RowsTether,
                                 std::string(op))
        ->UseManualTime()
        ->Iterations(50)
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  tether::bench::PrintFigures();
  return 0;
}
