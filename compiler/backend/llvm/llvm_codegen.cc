// The LLVM half of code generation: target machines, the O3 pipeline, object
// and assembly emission, the in-process lld link and static archives. The
// one place llvm::Error becomes absl::Status is LLVMErrorToStatus below.
#include "compiler/backend/llvm/llvm_codegen.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "compiler/backend/cuda/device_split.h"
#include "compiler/backend/cuda/wgmma.h"
#include "compiler/backend/llvm/kernel_emitter.h"
#include "compiler/backend/llvm/object_cache.h"
#include "compiler/backend/llvm/vm_function_emitter.h"
#include "compiler/backend/llvm/work_estimate.h"
#include "compiler/tir/arith.h"
#include "lld/Common/Driver.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/IR/DiagnosticHandler.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Linker/Linker.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Object/ArchiveWriter.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "runtime/core/error.h"
#include "runtime/core/file.h"
#include "runtime/cuda/cuda_kernel_library.h"

LLD_HAS_DRIVER(elf)

namespace tether::compiler {
namespace {

absl::Status LLVMErrorToStatus(llvm::Error error, absl::string_view what) {
  std::string message;
  llvm::handleAllErrors(std::move(error), [&](const llvm::ErrorInfoBase& info) {
    if (!message.empty()) message += "; ";
    message += info.message();
  });
  return absl::InternalError(absl::StrCat(what, ": ", message));
}

void InitializeLLVM() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
    llvm::InitializeAllAsmParsers();
  });
}

llvm::CodeGenOptLevel CodeGenLevel(int opt_level) {
  return opt_level <= 0   ? llvm::CodeGenOptLevel::None
         : opt_level == 1 ? llvm::CodeGenOptLevel::Less
         : opt_level == 2 ? llvm::CodeGenOptLevel::Default
                          : llvm::CodeGenOptLevel::Aggressive;
}

// The NVPTX target machine for sm_<sm> (sm_<sm>a with `arch_specific`: the
// features of that architecture alone, such as sm_90a's wgmma, in PTX only
// a GPU of exactly that architecture runs); LLVM picks the lowest PTX ISA
// version that architecture needs.
absl::StatusOr<std::unique_ptr<llvm::TargetMachine>> CreateCudaTargetMachine(int sm, int opt_level,
                                                                             bool arch_specific) {
  InitializeLLVM();
  constexpr char kTriple[] = "nvptx64-nvidia-cuda";
  std::string error;
  const llvm::Target* llvm_target = llvm::TargetRegistry::lookupTarget(kTriple, error);
  if (llvm_target == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "this LLVM has no NVPTX backend, so it cannot generate cuda kernels: ", error));
  }
  llvm::TargetOptions options;
  options.AllowFPOpFusion = llvm::FPOpFusion::Fast;  // as on the CPU (fma.rn)
  std::string cpu = absl::StrCat("sm_", sm, arch_specific ? "a" : "");
  std::unique_ptr<llvm::TargetMachine> tm(llvm_target->createTargetMachine(
      kTriple, cpu, "", options, std::nullopt, std::nullopt, CodeGenLevel(opt_level)));
  if (!tm)
    return absl::InvalidArgumentError(absl::StrCat("cannot create an nvptx target for ", cpu));
  return tm;
}

// `target` with the host filled in where it names none (triple, CPU and
// features), and "generic" for a CPU it leaves open.
Target Resolved(const Target& target) {
  Target t = target;
  if (t.triple.empty()) {
    Target host = Target::Host();
    t.triple = host.triple;
    if (t.cpu.empty()) t.cpu = host.cpu;
    if (t.attrs.empty()) t.attrs = host.attrs;
  }
  if (t.cpu.empty()) t.cpu = "generic";
  return t;
}

// What a kernel library records as its target: resolved, with the features
// it turns on, so that a loader on another machine can tell whether it runs
// there (runtime/device/host_target.h, CheckRunsOn).
std::string RecordedTarget(const Target& target) {
  Target t = Resolved(target);
  std::vector<std::string> on;
  for (absl::string_view attr : absl::StrSplit(t.attrs, ',', absl::SkipEmpty())) {
    if (absl::StartsWith(attr, "+")) on.emplace_back(attr);
  }
  t.attrs = absl::StrJoin(on, ",");
  return t.ToString();
}

absl::StatusOr<std::unique_ptr<llvm::TargetMachine>> CreateTargetMachine(const Target& target,
                                                                         int opt_level) {
  InitializeLLVM();
  if (target.kind != "llvm") {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot generate code for target kind ", target.kind));
  }
  const Target t = Resolved(target);
  std::string error;
  const llvm::Target* llvm_target = llvm::TargetRegistry::lookupTarget(t.triple, error);
  if (llvm_target == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown target triple ", t.triple, ": ", error));
  }
  llvm::TargetOptions options;
  // Fuse a multiply feeding an add into one fused multiply-add where the
  // target has it (one rounding instead of two; C's FP_CONTRACT, and what
  // BLAS libraries do). Where multiplies and adds share execution ports it
  // halves the work of matmul and conv inner loops.
  options.AllowFPOpFusion = llvm::FPOpFusion::Fast;
  std::unique_ptr<llvm::TargetMachine> tm(llvm_target->createTargetMachine(
      t.triple, t.cpu, t.attrs, options, llvm::Reloc::PIC_, std::nullopt, CodeGenLevel(opt_level)));
  if (!tm)
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create a target machine for ", t.ToString()));
  return tm;
}

absl::Status Optimize(llvm::Module& module_ref, llvm::TargetMachine* tm, int opt_level);

double SecondsSince(absl::Time start) { return absl::ToDoubleSeconds(absl::Now() - start); }

// Lowers, verifies and optimizes `kernels` into a module for `tm`.
// `emit` selects the kernels (and globals) of one module; default: all.
// Adds its times to `stats` when given.
absl::StatusOr<std::unique_ptr<llvm::Module>> BuildModule(
    llvm::LLVMContext& context, const std::vector<KernelFunc>& kernels, llvm::TargetMachine* tm,
    const CodegenOptions& options, codegen::EmitOptions emit = {}, CodegenStats* stats = nullptr) {
  emit.system_lib = options.system_lib;
  emit.system_lib_prefix = options.system_lib_prefix;
  absl::Time start = absl::Now();
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<llvm::Module> module,
                          codegen::EmitKernels(context, kernels, emit));
  absl::Time emitted = absl::Now();
  TETHER_RETURN_IF_ERROR(Optimize(*module, tm, options.opt_level));
  if (stats != nullptr) {
    stats->emit_seconds += absl::ToDoubleSeconds(emitted - start);
    stats->optimize_seconds += SecondsSince(emitted);
  }
  return module;
}

// Verifies `module` and runs the optimization pipeline of `opt_level` for `tm`.
absl::Status Optimize(llvm::Module& module_ref, llvm::TargetMachine* tm, int opt_level) {
  llvm::Module* module = &module_ref;
  module->setTargetTriple(tm->getTargetTriple().str());
  module->setDataLayout(tm->createDataLayout());
  std::string verify;
  llvm::raw_string_ostream verify_os(verify);
  if (llvm::verifyModule(*module, &verify_os)) {
    return absl::InternalError(absl::StrCat("generated kernel IR is invalid: ", verify));
  }
  for (llvm::Function& f : *module) {
    if (f.isDeclaration()) continue;
    f.addFnAttr("target-cpu", tm->getTargetCPU());
    if (!tm->getTargetFeatureString().empty())
      f.addFnAttr("target-features", tm->getTargetFeatureString());
  }
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = opt_level >= 2;
  tuning.SLPVectorization = opt_level >= 2;
  llvm::PassBuilder pb(tm, tuning);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm;
  if (opt_level <= 0) {
    mpm = pb.buildO0DefaultPipeline(llvm::OptimizationLevel::O0);
  } else {
    llvm::OptimizationLevel level = opt_level == 1   ? llvm::OptimizationLevel::O1
                                    : opt_level == 2 ? llvm::OptimizationLevel::O2
                                                     : llvm::OptimizationLevel::O3;
    mpm = pb.buildPerModuleDefaultPipeline(level);
  }
  mpm.run(*module, mam);
  return absl::OkStatus();
}

absl::StatusOr<std::string> EmitMachineCode(llvm::Module& module, llvm::TargetMachine* tm,
                                            llvm::CodeGenFileType type) {
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager pm;
  if (tm->addPassesToEmitFile(pm, os, nullptr, type)) {
    return absl::InternalError("the target machine cannot emit this file type");
  }
  pm.run(module);
  return std::string(buffer.data(), buffer.size());
}

// A private temporary directory, removed with its files.
class TempDir {
 public:
  static absl::StatusOr<std::unique_ptr<TempDir>> Create() {
    const char* base = getenv("TMPDIR");
    std::string templ =
        absl::StrCat(base != nullptr && *base ? base : "/tmp", "/tether-lld-XXXXXX");
    if (mkdtemp(templ.data()) == nullptr) {
      return absl::InternalError(absl::StrCat("cannot create a temporary directory from ", templ));
    }
    return std::unique_ptr<TempDir>(new TempDir(templ));
  }
  ~TempDir() {
    for (const std::string& f : files_) unlink(f.c_str());
    rmdir(path_.c_str());
  }
  std::string File(absl::string_view name) {
    files_.push_back(absl::StrCat(path_, "/", name));
    return files_.back();
  }

 private:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
  std::vector<std::string> files_;
};

absl::Status WriteFile(const std::string& path, absl::string_view data) {
  std::ofstream out(path, std::ios::binary);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

// lld keeps global state: one link at a time.
absl::Mutex& LinkMutex() {
  static absl::Mutex* mu = new absl::Mutex();
  return *mu;
}

absl::StatusOr<std::string> LinkSharedObject(const std::vector<std::string>& objects) {
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<TempDir> dir, TempDir::Create());
  std::vector<std::string> obj_paths;
  for (size_t i = 0; i < objects.size(); ++i) {
    obj_paths.push_back(dir->File(absl::StrCat("kernels", i, ".o")));
    TETHER_RETURN_IF_ERROR(WriteFile(obj_paths.back(), objects[i]));
  }
  std::string so_path = dir->File("kernels.so");
  std::vector<const char*> args = {
      "ld.lld", "-shared",          "-z",          "defs", "-z",           "noexecstack", "-z",
      "relro",  "--hash-style=gnu", "--as-needed", "-o",   so_path.c_str()};
  for (const std::string& p : obj_paths) args.push_back(p.c_str());
  std::string out_text, err_text;
  llvm::raw_string_ostream out_os(out_text), err_os(err_text);
  lld::Result result;
  {
    absl::MutexLock lock(&LinkMutex());
    result = lld::lldMain(args, out_os, err_os, {{lld::Gnu, &lld::elf::link}});
  }
  if (result.retCode != 0) {
    return absl::InternalError(absl::StrCat("linking the kernel library failed: ", err_text));
  }
  return ReadFileToString(so_path);
}

absl::StatusOr<std::string> MakeArchive(absl::string_view object) {
  std::vector<llvm::NewArchiveMember> members;
  members.emplace_back(
      llvm::MemoryBufferRef(llvm::StringRef(object.data(), object.size()), "kernels.o"));
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> archive = llvm::writeArchiveToBuffer(
      members, llvm::SymtabWritingMode::NormalSymtab, llvm::object::Archive::K_GNU,
      /*Deterministic=*/true, /*Thin=*/false);
  if (!archive) return LLVMErrorToStatus(archive.takeError(), "writing the kernel archive failed");
  return (*archive)->getBuffer().str();
}

// LLVM's remarks and warnings ("loop not vectorized: ...") are hints about
// our own schedules, not about the user's model: keep them off the user's
// terminal. Errors still take LLVM's default path.
struct QuietDiagnostics : llvm::DiagnosticHandler {
  bool handleDiagnostics(const llvm::DiagnosticInfo& info) override {
    return info.getSeverity() != llvm::DS_Error;
  }
};

// A context for one compilation, with QuietDiagnostics installed.
std::unique_ptr<llvm::LLVMContext> MakeContext() {
  auto context = std::make_unique<llvm::LLVMContext>();
  context->setDiagnosticHandler(std::make_unique<QuietDiagnostics>());
  return context;
}

// One module of a shared object: the kernels i with emit.emit[i] (and, with
// emit.library_globals, the library's globals and helpers), compiled to an
// object with its own context and target machine, so modules compile on
// threads; taken from `cache` when it has the object (cache may be null).
// Its times go to `stats`.
absl::StatusOr<std::string> CompileModule(const std::vector<KernelFunc>& kernels,
                                          const Target& target, const CodegenOptions& options,
                                          codegen::EmitOptions emit, KernelObjectCache* cache,
                                          CodegenStats* stats) {
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<llvm::TargetMachine> tm,
                          CreateTargetMachine(target, options.opt_level));
  std::unique_ptr<llvm::LLVMContext> context = MakeContext();
  absl::Time start = absl::Now();
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<llvm::Module> module,
                          codegen::EmitKernels(*context, kernels, emit));
  std::string key;
  if (cache != nullptr) {
    std::string ir;
    llvm::raw_string_ostream os(ir);
    module->print(os, nullptr);
    os.flush();
    key = KernelObjectCache::Key(options.compiler_build, tm->getTargetTriple().str(),
                                 tm->getTargetCPU().str(), tm->getTargetFeatureString().str(),
                                 options.opt_level, ir);
  }
  stats->emit_seconds += SecondsSince(start);
  if (cache != nullptr) {
    if (std::optional<std::string> object = cache->Get(key)) {
      ++stats->cached;
      return std::move(*object);
    }
  }
  start = absl::Now();
  TETHER_RETURN_IF_ERROR(Optimize(*module, tm.get(), options.opt_level));
  stats->optimize_seconds += SecondsSince(start);
  start = absl::Now();
  absl::StatusOr<std::string> object =
      EmitMachineCode(*module, tm.get(), llvm::CodeGenFileType::ObjectFile);
  stats->machine_code_seconds += SecondsSince(start);
  if (object.ok() && cache != nullptr) cache->Put(key, *object);
  return object;
}

// Runs work(i, thread) for every i below sizes.size() on `threads` threads,
// the largest sizes first (so the last to start are short). The first
// failure stops the work not yet started and is the result.
absl::Status RunLargestFirst(const std::vector<int64_t>& sizes, int threads,
                             const std::function<absl::Status(size_t i, int thread)>& work) {
  std::vector<std::pair<int64_t, size_t>> order;
  for (size_t i = 0; i < sizes.size(); ++i) order.emplace_back(sizes[i], i);
  std::sort(order.begin(), order.end(), std::greater<>());
  std::atomic<size_t> next{0};
  absl::Mutex failure_mu;
  absl::Status failure;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (size_t u; (u = next++) < order.size();) {
        absl::Status status = work(order[u].second, t);
        if (status.ok()) continue;
        next = order.size();
        absl::MutexLock lock(&failure_mu);
        if (failure.ok()) failure = std::move(status);
      }
    });
  }
  for (std::thread& t : workers) t.join();
  return failure;
}

// Threads for `modules` modules: `requested`, or one a hardware thread when
// 0, at most kMaxCodegenThreads and `modules`, at least 1.
int CodegenThreads(int requested, size_t modules) {
  int threads = requested > 0 ? requested : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::min<int>({threads, static_cast<int>(modules), kMaxCodegenThreads});
  return std::max(threads, 1);
}

// The code size of each kernel (0 for a null one), RunLargestFirst's sizes.
std::vector<int64_t> CodeSizes(const std::vector<KernelFunc>& kernels) {
  std::vector<int64_t> sizes;
  for (const KernelFunc& k : kernels) sizes.push_back(k ? codegen::CodeSize(k->body) : 0);
  return sizes;
}

// Compiles one module per kernel and one for the library globals and
// helpers on up to `threads` threads (the largest kernels first, so the
// last to start are short), and links their objects, after `parts`, into
// one shared object, in kernel order whatever the threads' timing.
absl::StatusOr<std::string> BuildSharedObject(const std::vector<KernelFunc>& kernels,
                                              const Target& target, const CodegenOptions& options,
                                              int threads, std::vector<std::string> parts,
                                              CodegenStats* stats) {
  const size_t n = kernels.size();
  // Module i < n is kernel i; module n the library's own, started first.
  std::vector<int64_t> sizes = CodeSizes(kernels);
  sizes.push_back(std::numeric_limits<int64_t>::max());
  std::unique_ptr<KernelObjectCache> cache;
  if (!options.cache_dir.empty() && !options.compiler_build.empty()) {
    cache = std::make_unique<KernelObjectCache>(options.cache_dir, options.cache_max_bytes);
  }
  std::vector<std::string> objects(n + 1);
  std::vector<CodegenStats> thread_stats(threads);
  absl::Status failure = RunLargestFirst(sizes, threads, [&](size_t m, int t) {
    codegen::EmitOptions emit;
    emit.emit.assign(n, false);
    if (m < n) emit.emit[m] = true;
    emit.library_globals = m == n;
    TETHER_ASSIGN_OR_RETURN(objects[m], CompileModule(kernels, target, options, std::move(emit),
                                                      cache.get(), &thread_stats[t]));
    return absl::OkStatus();
  });
  for (const CodegenStats& s : thread_stats) stats->Add(s);
  stats->modules += static_cast<int>(n + 1);
  stats->threads = std::max(stats->threads, threads);
  if (!failure.ok()) return failure;
  for (std::string& o : objects) parts.push_back(std::move(o));
  if (cache != nullptr && cache->misses() > 0) cache->Trim();
  absl::Time start = absl::Now();
  absl::StatusOr<std::string> so = LinkSharedObject(parts);
  stats->link_seconds += SecondsSince(start);
  return so;
}

// The device launches of `kernels` and their manifest entries.
struct DeviceLaunches {
  std::vector<KernelFunc> launches;
  std::vector<CudaKernelInfo> infos;
};
absl::StatusOr<DeviceLaunches> SplitAll(const std::vector<KernelFunc>& kernels) {
  DeviceLaunches out;
  for (const KernelFunc& k : kernels) {
    TETHER_ASSIGN_OR_RETURN(DeviceKernel dk, SplitForDevice(k));
    for (const DeviceLaunch& l : dk.launches) out.launches.push_back(l.kernel);
    out.infos.push_back(DescribeDeviceKernel(dk));
  }
  return out;
}

// The optimized NVPTX module of `launches` for sm_<sm>, and its target machine.
struct CudaModule {
  std::unique_ptr<llvm::LLVMContext> context;
  std::unique_ptr<llvm::TargetMachine> tm;
  std::unique_ptr<llvm::Module> module;
};

// Launch `launch` emitted and optimized for sm_<sm> in a context of its own,
// as bitcode; `arch_specific` says whether it needs sm_<sm>a (wgmma.h).
absl::StatusOr<std::string> OptimizedLaunch(const KernelFunc& launch, int sm, int opt_level,
                                            bool* arch_specific) {
  std::unique_ptr<llvm::LLVMContext> context = MakeContext();
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<llvm::Module> module,
                          codegen::EmitDeviceKernels(*context, {launch}, sm));
  *arch_specific = module->getModuleFlag(codegen::kSm90aFlag) != nullptr;
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<llvm::TargetMachine> tm,
                          CreateCudaTargetMachine(sm, opt_level, *arch_specific));
  TETHER_RETURN_IF_ERROR(Optimize(*module, tm.get(), opt_level));
  llvm::SmallVector<char, 0> bitcode;
  llvm::raw_svector_ostream os(bitcode);
  llvm::WriteBitcodeToFile(*module, os, /*ShouldPreserveUseListOrder=*/true);
  return std::string(bitcode.data(), bitcode.size());
}

// The launches are emitted and optimized one module each on up to `threads`
// threads (0: one a hardware thread; at most kMaxCodegenThreads;
// RunLargestFirst), since the optimizer is most of a CUDA build's time and
// it works a function at a time; then they are linked in launch order into
// one module for code generation.
absl::StatusOr<CudaModule> BuildCudaModule(const std::vector<KernelFunc>& launches, int sm,
                                           int opt_level, int threads) {
  threads = CodegenThreads(threads, launches.size());
  absl::flat_hash_set<std::string> names;
  for (const KernelFunc& k : launches) {
    if (k && !names.insert(k->name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("kernel name \"", k->name, "\" is not a usable, unique PTX entry name"));
    }
  }
  const size_t n = launches.size();
  std::vector<std::string> bitcode(n);
  std::vector<char> specific(n, 0);
  TETHER_RETURN_IF_ERROR(RunLargestFirst(CodeSizes(launches), threads, [&](size_t i, int) {
    bool arch_specific = false;
    TETHER_ASSIGN_OR_RETURN(bitcode[i],
                            OptimizedLaunch(launches[i], sm, opt_level, &arch_specific));
    specific[i] = arch_specific;
    return absl::OkStatus();
  }));
  const bool arch_specific = std::find(specific.begin(), specific.end(), 1) != specific.end();
  CudaModule m;
  m.context = MakeContext();
  TETHER_ASSIGN_OR_RETURN(m.tm, CreateCudaTargetMachine(sm, opt_level, arch_specific));
  m.module = std::make_unique<llvm::Module>("tether_cuda", *m.context);
  m.module->setTargetTriple(m.tm->getTargetTriple().str());
  m.module->setDataLayout(m.tm->createDataLayout());
  llvm::Linker linker(*m.module);
  for (size_t i = 0; i < n; ++i) {
    llvm::Expected<std::unique_ptr<llvm::Module>> part =
        llvm::parseBitcodeFile(llvm::MemoryBufferRef(bitcode[i], launches[i]->name), *m.context);
    if (!part) {
      return absl::InternalError(absl::StrCat("cannot read back the optimized kernel ",
                                              launches[i]->name, ": ",
                                              llvm::toString(part.takeError())));
    }
    if (linker.linkInModule(std::move(*part))) {
      return absl::InternalError(
          absl::StrCat("cannot link the optimized kernel ", launches[i]->name));
    }
  }
  return m;
}

absl::StatusOr<vm::KernelLibraryBlob> BuildCudaLibrary(const std::vector<KernelFunc>& kernels,
                                                       const Target& target,
                                                       const CodegenOptions& options) {
  if (options.system_lib) {
    return absl::InvalidArgumentError("cuda kernels cannot be built as a system library");
  }
  TETHER_ASSIGN_OR_RETURN(DeviceLaunches split, SplitAll(kernels));
  std::vector<CudaImage> images;
  for (int sm : target.archs) {
    TETHER_ASSIGN_OR_RETURN(
        CudaModule m, BuildCudaModule(split.launches, sm, options.opt_level, options.threads));
    TETHER_ASSIGN_OR_RETURN(std::string ptx, EmitMachineCode(*m.module, m.tm.get(),
                                                             llvm::CodeGenFileType::AssemblyFile));
    images.push_back(CudaImage{sm, std::move(ptx)});
  }
  return MakeCudaKernelLibraryBlob(target.ToString(), images, FormatCudaManifest(split.infos));
}

}  // namespace

absl::StatusOr<vm::KernelLibraryBlob> BuildKernelLibrary(const std::vector<KernelFunc>& kernels,
                                                         const Target& target,
                                                         const CodegenOptions& options) {
  if (options.vm_functions != nullptr && (target.is_cuda() || options.system_lib)) {
    return absl::InvalidArgumentError(
        "compiled VM functions go into a CPU kernel library of format \"so\" only");
  }
  if (target.is_cuda()) return BuildCudaLibrary(kernels, target, options);
  CodegenStats ignored;
  CodegenStats* stats = options.stats != nullptr ? options.stats : &ignored;
  stats->kernels += static_cast<int>(kernels.size());
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<llvm::TargetMachine> tm,
                          CreateTargetMachine(target, options.opt_level));
  if (!tm->getTargetTriple().isOSBinFormatELF()) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel libraries are ELF only; target ", target.ToString(), " is not"));
  }
  // The compiled VM functions: one more object to link.
  std::vector<std::string> vm_object;
  if (options.vm_functions != nullptr) {
    std::unique_ptr<llvm::LLVMContext> context = MakeContext();
    TETHER_ASSIGN_OR_RETURN(std::unique_ptr<llvm::Module> module,
                            codegen::EmitVMFunctions(*context, *options.vm_functions));
    TETHER_RETURN_IF_ERROR(Optimize(*module, tm.get(), options.opt_level));
    TETHER_ASSIGN_OR_RETURN(std::string object,
                            EmitMachineCode(*module, tm.get(), llvm::CodeGenFileType::ObjectFile));
    vm_object.push_back(std::move(object));
  }
  const int threads = CodegenThreads(options.threads, kernels.size() + 1);
  vm::KernelLibraryBlob blob;
  blob.target = RecordedTarget(target);
  if (!options.system_lib) {
    blob.format = "so";
    TETHER_ASSIGN_OR_RETURN(blob.data,
                            BuildSharedObject(kernels, target, options, threads, vm_object, stats));
    return blob;
  }
  // A system library is one module: its registration function names every kernel.
  std::unique_ptr<llvm::LLVMContext> context = MakeContext();
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<llvm::Module> module,
                          BuildModule(*context, kernels, tm.get(), options, {}, stats));
  absl::Time start = absl::Now();
  TETHER_ASSIGN_OR_RETURN(std::string object,
                          EmitMachineCode(*module, tm.get(), llvm::CodeGenFileType::ObjectFile));
  stats->machine_code_seconds += SecondsSince(start);
  stats->modules += 1;
  stats->threads = std::max(stats->threads, 1);
  start = absl::Now();
  blob.format = "static";
  TETHER_ASSIGN_OR_RETURN(blob.data, MakeArchive(object));
  stats->link_seconds += SecondsSince(start);
  return blob;
}

absl::StatusOr<std::string> EmitLLVMIR(const std::vector<KernelFunc>& kernels, const Target& target,
                                       int opt_level) {
  if (target.is_cuda()) {
    TETHER_ASSIGN_OR_RETURN(DeviceLaunches split, SplitAll(kernels));
    TETHER_ASSIGN_OR_RETURN(CudaModule m,
                            BuildCudaModule(split.launches, target.archs.front(), opt_level, 0));
    std::string text;
    llvm::raw_string_ostream os(text);
    m.module->print(os, nullptr);
    os.flush();
    return text;
  }
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<llvm::TargetMachine> tm,
                          CreateTargetMachine(target, opt_level));
  std::unique_ptr<llvm::LLVMContext> context = MakeContext();
  CodegenOptions options;
  options.opt_level = opt_level;
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<llvm::Module> module,
                          BuildModule(*context, kernels, tm.get(), options));
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os, nullptr);
  os.flush();
  return text;
}

absl::StatusOr<std::string> EmitAssembly(const std::vector<KernelFunc>& kernels,
                                         const Target& target) {
  if (target.is_cuda()) {
    TETHER_ASSIGN_OR_RETURN(DeviceLaunches split, SplitAll(kernels));
    std::string out;
    for (int sm : target.archs) {
      TETHER_ASSIGN_OR_RETURN(CudaModule m, BuildCudaModule(split.launches, sm, 3, 0));
      TETHER_ASSIGN_OR_RETURN(
          std::string ptx,
          EmitMachineCode(*m.module, m.tm.get(), llvm::CodeGenFileType::AssemblyFile));
      absl::StrAppend(&out, "// ---- sm_", sm, " ----\n", ptx);
    }
    return out;
  }
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<llvm::TargetMachine> tm, CreateTargetMachine(target, 3));
  std::unique_ptr<llvm::LLVMContext> context = MakeContext();
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<llvm::Module> module,
                          BuildModule(*context, kernels, tm.get(), CodegenOptions()));
  return EmitMachineCode(*module, tm.get(), llvm::CodeGenFileType::AssemblyFile);
}

void CodegenStats::Add(const CodegenStats& other) {
  kernels += other.kernels;
  modules += other.modules;
  cached += other.cached;
  threads = std::max(threads, other.threads);
  emit_seconds += other.emit_seconds;
  optimize_seconds += other.optimize_seconds;
  machine_code_seconds += other.machine_code_seconds;
  link_seconds += other.link_seconds;
}

}  // namespace tether::compiler
