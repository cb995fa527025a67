// Loading "so" kernel libraries from memory (memfd + dlopen), the kernel
// ABI's services table, the manifest, and the Function that checks arguments
// and calls a kernel.
#include "runtime/kernel/kernel_library.h"

#include <dlfcn.h>
#include <elf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "runtime/core/error.h"
#include "runtime/device/host_target.h"
#include "runtime/kernel/ar_archive.h"
#include "runtime/kernel/elf_section.h"
#include "runtime/kernel/kernel_signature.h"
#include "runtime/kernel/loader_registry.h"
#include "runtime/module/system_lib.h"
#include "runtime/threading/thread_pool.h"

namespace tether {
namespace {

constexpr absl::string_view kManifestMagic = "tether-kernel-manifest 1";
constexpr int kMaxManifestNdim = 64;
constexpr int kMaxManifestParams = 1 << 16;

// ---- Services ----------------------------------------------------------------

// The per-call state behind TetherKernelServices::ctx.
struct KernelCallContext {
  absl::Mutex mu;
  std::string error ABSL_GUARDED_BY(mu);
  bool has_error ABSL_GUARDED_BY(mu) = false;
};

int32_t ServiceParallelFor(void* /*ctx*/, int64_t n,
                           int32_t (*body)(int64_t begin, int64_t end, void* closure),
                           void* closure) {
  if (n <= 0) return 0;
  std::atomic<int32_t> first_code{0};
  absl::Status status = ParallelFor(0, n, [&](int64_t begin, int64_t end) -> absl::Status {
    int32_t code = body(begin, end, closure);
    if (code == 0) return absl::OkStatus();
    int32_t expected = 0;
    first_code.compare_exchange_strong(expected, code);
    return absl::InternalError("kernel parallel body failed");
  });
  if (!status.ok() && first_code.load() == 0) return TETHER_KERNEL_INVALID_ARGUMENT;
  return first_code.load();
}

void* ServiceWorkspaceAlloc(void* /*ctx*/, uint64_t bytes, uint64_t align) {
  if (align < sizeof(void*) || (align & (align - 1)) != 0) align = 64;
  void* ptr = nullptr;
  if (posix_memalign(&ptr, align, bytes == 0 ? 1 : bytes) != 0) return nullptr;
  return ptr;
}

void ServiceWorkspaceFree(void* /*ctx*/, void* ptr) { std::free(ptr); }

void ServiceSetError(void* ctx, const char* message) {
  auto* call = static_cast<KernelCallContext*>(ctx);
  absl::MutexLock lock(&call->mu);
  if (call->has_error) return;
  call->has_error = true;
  call->error = message != nullptr ? message : "kernel failed without a message";
}

// ---- Calling a kernel --------------------------------------------------------

std::string ParamKindName(const KernelParamInfo& p) {
  return p.is_tensor ? absl::StrCat("Tensor(ndim=", p.ndim, ", dtype=", p.dtype.ToString(), ")")
                     : "int";
}

// Checks `arg` against parameter `index` of `kernel` and fills `out`.
absl::Status BindArgument(const KernelInfo& kernel, size_t index, const Value& arg,
                          TetherKernelArg* out) {
  const KernelParamInfo& param = kernel.params[index];
  if (!param.is_tensor) {
    if (arg.is_int()) {
      out->i64 = arg.int_value();
    } else if (arg.is_bool()) {
      out->i64 = arg.bool_value() ? 1 : 0;
    } else {
      return TypeError("kernel ", kernel.name, ": argument ", index, " must be an int, got ",
                       arg.TypeName());
    }
    return absl::OkStatus();
  }
  if (!arg.is_tensor()) {
    return TypeError("kernel ", kernel.name, ": argument ", index, " must be a ",
                     ParamKindName(param), ", got ", arg.TypeName());
  }
  TensorObj* t = arg.AsRef<TensorObj>().get();
  DLTensor* dl = t->mutable_dl();
  if (dl->device.device_type != kDLCPU) {
    return ValueError("kernel ", kernel.name, ": argument ", index, " is on ",
                      t->device().ToString(), ", expected the cpu");
  }
  if (t->dtype() != param.dtype) {
    return TypeError("kernel ", kernel.name, ": argument ", index, " has dtype ",
                     t->dtype().ToString(), ", expected ", param.dtype.ToString());
  }
  if (dl->ndim != param.ndim) {
    return ValueError("kernel ", kernel.name, ": argument ", index, " has ", dl->ndim,
                      " dims, expected ", param.ndim);
  }
  if (dl->strides != nullptr) {
    int64_t expected = 1;
    for (int d = dl->ndim - 1; d >= 0; --d) {
      if (dl->shape[d] != 1 && dl->strides[d] != expected) {
        return ValueError("kernel ", kernel.name, ": argument ", index,
                          " is not compact row-major (dim ", d, " has stride ", dl->strides[d],
                          ", expected ", expected, ")");
      }
      expected *= dl->shape[d];
    }
  }
  out->tensor = dl;
  return absl::OkStatus();
}

// A kernel of a loaded library as a Function. Keeps the library alive.
class KernelFunctionObj final : public FunctionObj {
 public:
  KernelFunctionObj(Ref<Object> library, TetherKernelFn fn, const KernelInfo* info)
      : FunctionObj(info->name), library_(std::move(library)), fn_(fn), info_(info) {}

  TETHER_CALLS_GENERATED_CODE absl::StatusOr<Value> Call(ArgSpan args) const override {
    const KernelInfo& k = *info_;
    if (args.size() != k.params.size()) {
      return TypeError("kernel ", k.name, " takes ", k.params.size(), " arguments, got ",
                       args.size());
    }
    absl::InlinedVector<TetherKernelArg, 8> c_args(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      TETHER_RETURN_IF_ERROR(BindArgument(k, i, args[i], &c_args[i]));
    }
    KernelCallContext call;
    TetherKernelServices services{};
    services.abi_version = TETHER_KERNEL_ABI_VERSION;
    services.ctx = &call;
    services.parallel_for = &ServiceParallelFor;
    services.workspace_alloc = &ServiceWorkspaceAlloc;
    services.workspace_free = &ServiceWorkspaceFree;
    services.set_error = &ServiceSetError;
    int32_t code = fn_(c_args.data(), static_cast<int32_t>(c_args.size()), &services);
    if (code == TETHER_KERNEL_OK) return Value();
    std::string message;
    {
      absl::MutexLock lock(&call.mu);
      message =
          call.has_error ? call.error : absl::StrCat("kernel ", k.name, " failed with code ", code);
    }
    if (code == TETHER_KERNEL_OUT_OF_MEMORY) return OutOfMemoryError(message);
    return ValueError(message);
  }

 private:
  Ref<Object> library_;
  TetherKernelFn fn_;
  const KernelInfo* info_;  // owned by library_
};

// CPU kernels check every dim on entry (docs/design/kernel-abi.md, "What a
// generated kernel does on entry") after the wrapper's checks above.
std::vector<KernelSignature> CpuSignatures(const std::vector<KernelInfo>& kernels) {
  std::vector<KernelSignature> out;
  out.reserve(kernels.size());
  for (const KernelInfo& k : kernels) {
    KernelSignature sig;
    sig.name = k.name;
    sig.device_type = kDLCPU;
    for (const KernelParamInfo& p : k.params) {
      sig.params.push_back({p.is_tensor, p.dtype, p.ndim, {}});
    }
    out.push_back(std::move(sig));
  }
  return out;
}

// ---- ELF checks --------------------------------------------------------------

bool RangeInside(uint64_t offset, uint64_t size, uint64_t total) {
  return offset <= total && size <= total - offset;
}

// Everything the dynamic loader reads from the file must lie inside the blob,
// or it faults on pages past the end of the memfd instead of failing.
absl::Status CheckElfImage(absl::string_view data) {
  if (data.size() < sizeof(Elf64_Ehdr) || std::memcmp(data.data(), ELFMAG, SELFMAG) != 0) {
    return ValueError("kernel library is not an ELF image (", data.size(), " bytes)");
  }
  Elf64_Ehdr eh;
  std::memcpy(&eh, data.data(), sizeof(eh));
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB) {
    return ValueError("kernel library is not a little-endian 64-bit ELF image");
  }
  if (eh.e_type != ET_DYN) {
    return ValueError("kernel library is not a shared object (ELF type ", eh.e_type, ")");
  }
  if (eh.e_machine != HostElfMachine()) {
    return ValueError("kernel library is built for ", ElfMachineName(eh.e_machine),
                      ", but this runtime runs on ", ElfMachineName(HostElfMachine()));
  }
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 ||
      !RangeInside(eh.e_phoff, uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr), data.size())) {
    return ValueError("kernel library has a corrupt program header table");
  }
  if (eh.e_shnum != 0 &&
      (eh.e_shentsize != sizeof(Elf64_Shdr) ||
       !RangeInside(eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr), data.size()))) {
    return ValueError("kernel library has a corrupt section header table");
  }
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, data.data() + eh.e_phoff + i * sizeof(Elf64_Phdr), sizeof(ph));
    if (ph.p_type == PT_NULL) continue;
    if (!RangeInside(ph.p_offset, ph.p_filesz, data.size()) || ph.p_filesz > ph.p_memsz) {
      return ValueError("kernel library segment ", i, " (offset ", ph.p_offset, ", ", ph.p_filesz,
                        " bytes) lies outside the ", data.size(), "-byte image");
    }
  }
  return absl::OkStatus();
}

// ---- Modules -----------------------------------------------------------------

// Owns a dlopen handle and the memfd behind it.
class SoKernelLibrary final : public KernelLibraryModule {
 public:
  SoKernelLibrary() = default;
  SoKernelLibrary(const SoKernelLibrary&) = delete;
  SoKernelLibrary& operator=(const SoKernelLibrary&) = delete;
  ~SoKernelLibrary() override {
    if (handle_ != nullptr) dlclose(handle_);
    if (fd_ >= 0) close(fd_);
  }
  absl::string_view type_key() const override { return "library.so"; }
  std::vector<KernelSignature> Kernels() const override { return CpuSignatures(kernels_); }
  void* FindSymbol(const std::string& name) const override {
    return handle_ == nullptr ? nullptr : dlsym(handle_, name.c_str());
  }

  absl::Status Open(const KernelLibraryBlob& blob) {
    // Built for another machine: say so before the loader sees it.
    TETHER_RETURN_IF_ERROR(CheckRunsOn(blob.target, ThisHostTarget()));
    TETHER_RETURN_IF_ERROR(CheckElfImage(blob.data));
    fd_ = memfd_create("tether-kernels", MFD_CLOEXEC);
    if (fd_ < 0) return RuntimeError("memfd_create failed: ", std::strerror(errno));
    size_t written = 0;
    while (written < blob.data.size()) {
      ssize_t n = write(fd_, blob.data.data() + written, blob.data.size() - written);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return RuntimeError("writing the kernel library failed: ", std::strerror(errno));
      written += static_cast<size_t>(n);
    }
    std::string path = absl::StrCat("/proc/self/fd/", fd_);
    handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) {
      const char* err = dlerror();
      return ValueError("cannot load kernel library (target ", blob.target,
                        "): ", err != nullptr ? err : "unknown dlopen error");
    }
    auto* version = static_cast<const uint32_t*>(dlsym(handle_, "tether_kernel_abi_version"));
    if (version == nullptr) {
      return ValueError("kernel library has no tether_kernel_abi_version symbol");
    }
    if (*version != TETHER_KERNEL_ABI_VERSION) {
      return ValueError("kernel library has kernel abi version ", *version,
                        ", this runtime supports version ", TETHER_KERNEL_ABI_VERSION);
    }
    auto* manifest = static_cast<const char*>(dlsym(handle_, "tether_kernel_manifest"));
    if (manifest == nullptr) return ValueError("kernel library has no tether_kernel_manifest");
    // The manifest lies in the mapped image; bound the scan by the image size.
    size_t len = strnlen(manifest, blob.data.size());
    if (len == blob.data.size()) return ValueError("kernel library manifest is not terminated");
    TETHER_ASSIGN_OR_RETURN(kernels_, ParseKernelManifest(absl::string_view(manifest, len)));
    for (const KernelInfo& k : kernels_) {
      void* sym = dlsym(handle_, k.name.c_str());
      if (sym == nullptr) {
        return ValueError("kernel library lists kernel ", k.name, " but does not define it");
      }
      symbols_.emplace(k.name, std::make_pair(reinterpret_cast<TetherKernelFn>(sym), &k));
    }
    return absl::OkStatus();
  }

 protected:
  absl::StatusOr<Function> GetOwnFunction(absl::string_view name) override {
    auto it = symbols_.find(name);
    if (it == symbols_.end()) {
      return NotFoundError("kernel ", std::string(name), " is not in this kernel library");
    }
    return Function(
        MakeRef<KernelFunctionObj>(Ref<Object>(this), it->second.first, it->second.second));
  }
  bool ImplementsOwnFunction(absl::string_view name) const override {
    return symbols_.contains(name);
  }

 private:
  int fd_ = -1;
  void* handle_ = nullptr;
  std::vector<KernelInfo> kernels_;  // never resized after Open
  absl::flat_hash_map<std::string, std::pair<TetherKernelFn, const KernelInfo*>> symbols_;
};

// Kernels of a statically linked library, through the system library's symbols.
class SystemLibKernels final : public KernelLibraryModule {
 public:
  SystemLibKernels(Ref<Module> system_lib, std::vector<KernelInfo> kernels)
      : system_lib_(std::move(system_lib)), kernels_(std::move(kernels)) {}
  absl::string_view type_key() const override { return "library.static"; }
  std::vector<KernelSignature> Kernels() const override { return CpuSignatures(kernels_); }

 protected:
  absl::StatusOr<Function> GetOwnFunction(absl::string_view name) override {
    auto* lib = static_cast<SystemLibModule*>(system_lib_.get());
    for (const KernelInfo& k : kernels_) {
      if (k.name != name) continue;
      void* sym = lib->GetSymbol(name);
      if (sym == nullptr) {
        return NotFoundError("kernel ", std::string(name), " is listed but not registered");
      }
      return Function(
          MakeRef<KernelFunctionObj>(Ref<Object>(this), reinterpret_cast<TetherKernelFn>(sym), &k));
    }
    return NotFoundError("kernel ", std::string(name), " is not in system library \"",
                         lib->prefix(), "\"");
  }
  bool ImplementsOwnFunction(absl::string_view name) const override {
    for (const KernelInfo& k : kernels_) {
      if (k.name == name) return true;
    }
    return false;
  }

 private:
  Ref<Module> system_lib_;
  std::vector<KernelInfo> kernels_;
};

absl::Status ManifestError(int line, absl::string_view what) {
  return ValueError("kernel manifest line ", line, ": ", what);
}

}  // namespace

std::string FormatKernelManifest(const std::vector<KernelInfo>& kernels) {
  std::string out = absl::StrCat(kManifestMagic, "\n");
  for (const KernelInfo& k : kernels) {
    absl::StrAppend(&out, "kernel ", k.name, " ", k.params.size(), "\n");
    for (const KernelParamInfo& p : k.params) {
      if (p.is_tensor) {
        absl::StrAppend(&out, "tensor ", p.dtype.ToString(), " ", p.ndim, "\n");
      } else {
        absl::StrAppend(&out, "int64\n");
      }
    }
  }
  absl::StrAppend(&out, "end\n");
  return out;
}

absl::StatusOr<std::vector<KernelInfo>> ParseKernelManifest(absl::string_view text) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (lines.empty() || lines[0] != kManifestMagic) {
    return ValueError("kernel manifest does not start with \"", kManifestMagic, "\"");
  }
  std::vector<KernelInfo> kernels;
  absl::flat_hash_map<std::string, int> seen;
  size_t i = 1;
  bool ended = false;
  while (i < lines.size()) {
    int line_no = static_cast<int>(i) + 1;
    std::vector<absl::string_view> w = absl::StrSplit(lines[i], ' ');
    ++i;
    if (w.size() == 1 && w[0] == "end") {
      ended = true;
      break;
    }
    if (w.size() != 3 || w[0] != "kernel") return ManifestError(line_no, "expected kernel or end");
    KernelInfo k;
    k.name = std::string(w[1]);
    if (k.name.empty()) return ManifestError(line_no, "empty kernel name");
    int num_params = 0;
    if (!absl::SimpleAtoi(w[2], &num_params) || num_params < 0 || num_params > kMaxManifestParams) {
      return ManifestError(line_no, absl::StrCat("bad parameter count ", w[2]));
    }
    if (!seen.emplace(k.name, line_no).second) {
      return ManifestError(line_no, absl::StrCat("duplicate kernel ", k.name));
    }
    for (int p = 0; p < num_params; ++p, ++i) {
      if (i >= lines.size()) return ManifestError(line_no, "truncated parameter list");
      std::vector<absl::string_view> pw = absl::StrSplit(lines[i], ' ');
      KernelParamInfo info;
      if (pw.size() == 1 && pw[0] == "int64") {
        info.is_tensor = false;
      } else if (pw.size() == 3 && pw[0] == "tensor") {
        info.is_tensor = true;
        absl::StatusOr<DataType> dtype = DataType::Parse(pw[1]);
        if (!dtype.ok()) return ManifestError(static_cast<int>(i) + 1, "bad dtype");
        info.dtype = *dtype;
        if (!absl::SimpleAtoi(pw[2], &info.ndim) || info.ndim < 0 || info.ndim > kMaxManifestNdim) {
          return ManifestError(static_cast<int>(i) + 1, absl::StrCat("bad ndim ", pw[2]));
        }
      } else {
        return ManifestError(static_cast<int>(i) + 1, "expected a tensor or int64 parameter");
      }
      k.params.push_back(info);
    }
    kernels.push_back(std::move(k));
  }
  if (!ended) return ValueError("kernel manifest has no end line");
  return kernels;
}

absl::StatusOr<Ref<Module>> LoadKernelLibrary(const KernelLibraryBlob& blob) {
  if (blob.format != "so") {
    return absl::UnimplementedError(
        absl::StrCat("kernel library format \"", blob.format, "\" cannot be loaded from memory"));
  }
  Ref<SoKernelLibrary> lib = MakeRef<SoKernelLibrary>();
  TETHER_RETURN_IF_ERROR(lib->Open(blob));
  return Ref<Module>(lib.get());
}

absl::StatusOr<Ref<Module>> LoadSystemLibKernels(absl::string_view prefix) {
  Ref<Module> lib = SystemLib(prefix);
  auto* sys = static_cast<SystemLibModule*>(lib.get());
  auto* manifest = static_cast<const char*>(sys->GetSymbol("__tether_kernel_manifest"));
  if (manifest == nullptr) {
    return NotFoundError("no kernel library is registered in system library \"",
                         std::string(prefix), "\"");
  }
  TETHER_ASSIGN_OR_RETURN(
      std::vector<KernelInfo> kernels,
      ParseKernelManifest(absl::string_view(manifest, strnlen(manifest, 1 << 24))));
  return Ref<Module>(MakeRef<SystemLibKernels>(std::move(lib), std::move(kernels)).get());
}

absl::StatusOr<std::string> SystemLibPrefixOfArchive(absl::string_view archive) {
  constexpr absl::string_view kRegister = "tether_system_lib_register_";
  absl::StatusOr<ArArchive> read = ReadArArchive(archive);
  if (!read.ok()) return Annotate(read.status(), "system library archive: ");
  std::vector<absl::string_view> prefixes;
  for (const ArSymbol& symbol : read->symbols) {
    absl::string_view name = symbol.name;
    if (absl::ConsumePrefix(&name, kRegister)) prefixes.push_back(name);
  }
  if (prefixes.size() != 1) {
    return ValueError("system library archive: expected one ", kRegister,
                      "<prefix> symbol in its symbol table, found ", prefixes.size());
  }
  return std::string(prefixes[0]);
}

absl::StatusOr<Ref<Module>> LoadStaticKernelLibrary(const KernelLibraryBlob& blob) {
  TETHER_RETURN_IF_ERROR(CheckRunsOn(blob.target, ThisHostTarget()));
  TETHER_ASSIGN_OR_RETURN(std::string prefix, SystemLibPrefixOfArchive(blob.data));
  absl::StatusOr<Ref<Module>> kernels = LoadSystemLibKernels(prefix);
  if (kernels.status().code() == absl::StatusCode::kNotFound) {
    return NotFoundError("the executable's kernels are a system library (\"", prefix,
                         "\") that is not linked into this process: link its archive into the "
                         "daemon (docs/design/boards.md, \"Boards without dlopen\")");
  }
  return kernels;
}

void RegisterKernelLibraryLoaders() {
  static std::once_flag once;
  std::call_once(once, [] {
    // ALREADY_EXISTS only if someone registered "so" first; theirs stays.
    (void)RegisterKernelLibraryLoader("so", &LoadKernelLibrary);
    (void)RegisterKernelLibraryLoader("static", &LoadStaticKernelLibrary);
  });
}

}  // namespace tether
