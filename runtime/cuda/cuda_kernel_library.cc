// CUDA kernel libraries (format "ptx"), the runtime side: the Module that
// checks a call's arguments against the manifest and launches the kernel's
// PTX entries through the driver API, loading the best image per device on
// first use. The blob, manifest and count formats are
// cuda_kernel_format.cc.
//
// The per-device module loading and cuLaunchKernel are cuda_kernel_launch.h
// (the driver); a runtime built without CUDA answers UNAVAILABLE after the
// call's checks.
#include "runtime/cuda/cuda_kernel_library.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "runtime/core/error.h"
#include "runtime/core/tensor.h"
#include "runtime/cuda/cuda_kernel_format_internal.h"
#include "runtime/cuda/cuda_kernel_launch.h"
#include "runtime/kernel/kernel_signature.h"
#include "runtime/kernel/loader_registry.h"

namespace tether {
namespace {

using cuda_internal::CudaRef;
using cuda_internal::ParseDecimal;
using cuda_internal::ParseRef;
using cuda_internal::PtxEntryNames;
using cuda_internal::RefDescription;
using cuda_launch::BoundCall;
using cuda_launch::DeviceModule;
using cuda_launch::DeviceModulePtr;

// ---- The library -------------------------------------------------------------

// Thread contract: thread-safe. Images and kernels are immutable after
// construction; per-device modules are loaded once under mu_ and never
// removed before destruction.
class CudaKernelLibrary final : public KernelLibraryModule {
 public:
  CudaKernelLibrary(std::string target, std::vector<CudaImage> images,
                    std::vector<CudaKernelInfo> kernels)
      : target_(std::move(target)), images_(std::move(images)), kernels_(std::move(kernels)) {
    for (size_t i = 0; i < kernels_.size(); ++i) index_.emplace(kernels_[i].name, i);
  }
  absl::string_view type_key() const override { return "library.ptx"; }

  const std::vector<CudaKernelInfo>& kernels() const { return kernels_; }
  std::vector<KernelSignature> Kernels() const override;

  // The library's module on `device`, loaded on the first call there.
  absl::StatusOr<const DeviceModule*> ModuleFor(Device device);

 protected:
  absl::StatusOr<Function> GetOwnFunction(absl::string_view name) override;
  bool ImplementsOwnFunction(absl::string_view name) const override {
    return index_.contains(name);
  }

 private:
  std::string target_;
  std::vector<CudaImage> images_;  // sorted by sm
  std::vector<CudaKernelInfo> kernels_;
  absl::flat_hash_map<std::string, size_t> index_;
  absl::Mutex mu_;
  absl::flat_hash_map<int, DeviceModulePtr> modules_ ABSL_GUARDED_BY(mu_);
};

// A dim spec `?` is an expression the host does not check (kernel-abi.md,
// "The CUDA manifest"), and GPU kernels check nothing: such a kernel is
// safe only with the arguments its own bytecode passes.
std::vector<KernelSignature> CudaKernelLibrary::Kernels() const {
  std::vector<KernelSignature> out;
  out.reserve(kernels_.size());
  for (const CudaKernelInfo& k : kernels_) {
    KernelSignature sig;
    sig.name = k.name;
    sig.device_type = kDLCUDA;
    for (size_t p = 0; p < k.params.size(); ++p) {
      const CudaParamInfo& param = k.params[p];
      sig.params.push_back(
          {param.is_tensor, param.dtype, static_cast<int>(param.dims.size()), param.dims});
      for (size_t d = 0; d < param.dims.size() && sig.unchecked.empty(); ++d) {
        if (param.dims[d] == "?") {
          sig.unchecked = absl::StrCat("parameter ", p, " dim ", d,
                                       " is an expression its manifest leaves unchecked");
        }
      }
    }
    out.push_back(std::move(sig));
  }
  return out;
}

absl::StatusOr<const DeviceModule*> CudaKernelLibrary::ModuleFor(Device device) {
  absl::MutexLock lock(&mu_);
  auto it = modules_.find(device.id);
  if (it != modules_.end()) return it->second.get();
  // Failures are not cached: they may be transient (out of memory).
  TETHER_ASSIGN_OR_RETURN(DeviceModulePtr loaded,
                          cuda_launch::LoadDeviceModule(device, target_, images_, kernels_));
  const DeviceModule* module = loaded.get();
  modules_.emplace(device.id, std::move(loaded));
  return module;
}

// ---- Calling a kernel --------------------------------------------------------

std::string ParamKindName(const CudaParamInfo& p) {
  return p.is_tensor
             ? absl::StrCat("Tensor(ndim=", p.dims.size(), ", dtype=", p.dtype.ToString(), ")")
             : "int";
}

// Checks argument `index` of `kernel` against its parameter and records it
// in `call`. Dim specs may refer to earlier arguments, which are bound first.
absl::Status BindArgument(const CudaKernelInfo& kernel, size_t index, const Value& arg,
                          BoundCall* call) {
  const CudaParamInfo& param = kernel.params[index];
  if (!param.is_tensor) {
    int64_t v = 0;
    if (arg.is_int()) {
      v = arg.int_value();
    } else if (arg.is_bool()) {
      v = arg.bool_value() ? 1 : 0;
    } else {
      return TypeError("kernel ", kernel.name, ": argument ", index, " must be an int, got ",
                       arg.TypeName());
    }
    call->counts.scalars[index] = v;
    call->words[index] = v;
    return absl::OkStatus();
  }
  if (!arg.is_tensor()) {
    return TypeError("kernel ", kernel.name, ": argument ", index, " must be a ",
                     ParamKindName(param), ", got ", arg.TypeName());
  }
  const TensorObj* t = arg.AsRef<TensorObj>().get();
  const DLTensor& dl = t->dl();
  const Device device = t->device();
  if (device.type != kDLCUDA) {
    return ValueError("kernel ", kernel.name, ": argument ", index, " is on ", device.ToString(),
                      ", expected a cuda device");
  }
  if (!call->device.has_value()) {
    call->device = device;
  } else if (*call->device != device) {
    return ValueError("kernel ", kernel.name, ": argument ", index, " is on ", device.ToString(),
                      ", expected ", call->device->ToString(),
                      " like the tensor arguments before it");
  }
  if (t->dtype() != param.dtype) {
    return TypeError("kernel ", kernel.name, ": argument ", index, " has dtype ",
                     t->dtype().ToString(), ", expected ", param.dtype.ToString());
  }
  if (dl.ndim != static_cast<int>(param.dims.size())) {
    return ValueError("kernel ", kernel.name, ": argument ", index, " has ", dl.ndim,
                      " dims, expected ", param.dims.size());
  }
  if (dl.strides != nullptr) {
    int64_t expected = 1;
    for (int d = dl.ndim - 1; d >= 0; --d) {
      if (dl.shape[d] != 1 && dl.strides[d] != expected) {
        return ValueError("kernel ", kernel.name, ": argument ", index,
                          " is not compact row-major (dim ", d, " has stride ", dl.strides[d],
                          ", expected ", expected, ")");
      }
      expected *= dl.shape[d];
    }
  }
  std::vector<int64_t>& dims = call->counts.dims[index];
  dims.assign(dl.shape, dl.shape + dl.ndim);
  for (int d = 0; d < dl.ndim; ++d) {
    const std::string& spec = param.dims[d];
    if (spec == "*" || spec == "?") continue;
    int64_t expected = 0;
    std::string because;
    if (spec[0] == '=') {
      CudaRef ref;
      // The manifest was checked at load: the reference exists and is earlier.
      if (!ParseRef(absl::string_view(spec).substr(1), &ref)) {
        return ValueError("kernel ", kernel.name, ": bad dim spec ", spec);
      }
      expected =
          ref.is_dim ? call->counts.dims[ref.param][ref.dim] : call->counts.scalars[ref.param];
      because = absl::StrCat(" (= ", RefDescription(ref), ")");
    } else if (!ParseDecimal(spec, /*allow_negative=*/false, &expected)) {
      return ValueError("kernel ", kernel.name, ": bad dim spec ", spec);
    }
    if (dims[d] != expected) {
      return ValueError("kernel ", kernel.name, ": argument ", index, " dim ", d, " is ", dims[d],
                        ", expected ", expected, because);
    }
  }
  if (dl.data == nullptr && t->NumElements() > 0) {
    return ValueError("kernel ", kernel.name, ": argument ", index, " has no data");
  }
  const uintptr_t address = reinterpret_cast<uintptr_t>(dl.data) + dl.byte_offset;
  if (address % kCudaTensorAlignment != 0 && t->NumElements() > 0) {
    return ValueError("kernel ", kernel.name, ": argument ", index, " data is not ",
                      kCudaTensorAlignment, "-byte aligned (byte_offset ", dl.byte_offset, ")");
  }
  call->words[index] = static_cast<int64_t>(address);
  return absl::OkStatus();
}

// A kernel of a loaded library as a Function. Keeps the library alive.
class CudaKernelFunctionObj final : public FunctionObj {
 public:
  CudaKernelFunctionObj(Ref<CudaKernelLibrary> library, size_t kernel)
      : FunctionObj(library->kernels()[kernel].name),
        library_(std::move(library)),
        kernel_(kernel) {}

  absl::StatusOr<Value> Call(ArgSpan args) const override {
    const CudaKernelInfo& k = library_->kernels()[kernel_];
    if (args.size() != k.params.size()) {
      return TypeError("kernel ", k.name, " takes ", k.params.size(), " arguments, got ",
                       args.size());
    }
    BoundCall call;
    call.counts.dims.resize(args.size());
    call.counts.scalars.assign(args.size(), 0);
    call.words.assign(args.size(), 0);
    for (size_t i = 0; i < args.size(); ++i) {
      TETHER_RETURN_IF_ERROR(BindArgument(k, i, args[i], &call));
    }
    // Counts and scratch sizes before the driver: a bad count is the
    // caller's, not the GPU's.
    std::vector<int64_t> scratch_sizes;
    for (const CudaScratchInfo& b : k.scratch) {
      absl::StatusOr<int64_t> n = EvalCudaCount(b.count, call.counts);
      if (n.ok() && *n < 0) n = ValueError("size ", *n, " is negative");
      if (n.ok() &&
          *n > std::numeric_limits<int64_t>::max() / std::max<int64_t>(1, b.dtype.bytes())) {
        n = ValueError(*n, " elements of ", b.dtype.ToString(), " overflow");
      }
      if (!n.ok()) {
        return ValueError("kernel ", k.name, " scratch ", scratch_sizes.size(), ": ",
                          n.status().message());
      }
      scratch_sizes.push_back(*n);
    }
    std::vector<std::optional<int64_t>> counts(k.launches.size());
    for (size_t l = 0; l < k.launches.size(); ++l) {
      if (k.launches[l].count.empty()) continue;  // unknown: a full grid
      absl::StatusOr<int64_t> count = EvalCudaCount(k.launches[l].count, call.counts);
      if (!count.ok()) {
        return ValueError("kernel ", k.name, " launch ", k.launches[l].entry, ": ",
                          count.status().message());
      }
      counts[l] = *count;
    }
    // A kernel without tensor arguments has nothing to say where it runs.
    const Device device = call.device.value_or(Device::Cuda(0));
    TETHER_ASSIGN_OR_RETURN(const DeviceModule* module, library_->ModuleFor(device));
    // Then the dims of every tensor parameter; Launch adds the scratch
    // buffers' pointers and dims.
    for (size_t i = 0; i < args.size(); ++i) {
      if (!k.params[i].is_tensor) continue;
      call.dims.insert(call.dims.end(), call.counts.dims[i].begin(), call.counts.dims[i].end());
    }
    TETHER_RETURN_IF_ERROR(
        cuda_launch::LaunchKernel(k, kernel_, *module, counts, scratch_sizes, &call));
    return Value();
  }

 private:
  Ref<CudaKernelLibrary> library_;
  size_t kernel_;
};

absl::StatusOr<Function> CudaKernelLibrary::GetOwnFunction(absl::string_view name) {
  auto it = index_.find(name);
  if (it == index_.end()) {
    return NotFoundError("kernel ", std::string(name), " is not in this cuda kernel library");
  }
  return Function(MakeRef<CudaKernelFunctionObj>(Ref<CudaKernelLibrary>(this), it->second));
}

}  // namespace

absl::StatusOr<Ref<Module>> LoadCudaKernelLibrary(const KernelLibraryBlob& blob) {
  if (blob.format != "ptx") {
    return absl::UnimplementedError(absl::StrCat("kernel library format \"", blob.format,
                                                 "\" is not a cuda kernel library (\"ptx\")"));
  }
  TETHER_ASSIGN_OR_RETURN(CudaBlobContents contents, ReadCudaBlob(blob.data));
  TETHER_ASSIGN_OR_RETURN(std::vector<CudaKernelInfo> kernels,
                          ParseCudaManifest(contents.manifest));
  // Every image must define every entry: which image runs is the device's
  // choice, and a missing entry is better found here than on that device.
  for (const CudaImage& img : contents.images) {
    absl::flat_hash_set<std::string> entries = PtxEntryNames(img.ptx);
    for (const CudaKernelInfo& k : kernels) {
      for (size_t l = 0; l < k.launches.size(); ++l) {
        if (!entries.contains(k.launches[l].entry)) {
          return ValueError("cuda kernel library (target ", blob.target, "): the ptx for sm_",
                            img.sm, " has no entry ", k.launches[l].entry, " (kernel ", k.name,
                            " launch ", l, ")");
        }
      }
    }
  }
  Ref<CudaKernelLibrary> lib =
      MakeRef<CudaKernelLibrary>(blob.target, std::move(contents.images), std::move(kernels));
  return Ref<Module>(lib.get());
}

void RegisterCudaKernelLibraryLoader() {
  static std::once_flag once;
  std::call_once(once, [] {
    // ALREADY_EXISTS only if someone registered "ptx" first; theirs stays.
    (void)RegisterKernelLibraryLoader("ptx", &LoadCudaKernelLibrary);
  });
}

}  // namespace tether
