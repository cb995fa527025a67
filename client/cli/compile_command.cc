// `tether compile MODEL.rx|MODEL.onnx -o OUT.tx`: parse a Relax text module
// (or import an ONNX model), build it for a target and write the executable;
// --emit prints an intermediate form instead of (or besides) writing it.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/cli/commands.h"
#include "client/cli/model_loader.h"
#include "compiler/build.h"
#include "compiler/text/parser.h"
#include "runtime/core/error.h"
#include "runtime/core/file.h"
#include "runtime/module/module.h"
#include "runtime/module/param_dict.h"
#include "runtime/vm/executable.h"

namespace tether::cli {
namespace {

constexpr char kCompileUsage[] =
    "usage: tether compile MODEL.rx|MODEL.onnx [-o OUT.tx|OUT.so] [--target TARGET]\n"
    "                      [--emit ir|bytecode|asm] [--shape NAME=DIMS] [--pipeline default|zero]\n"
    "                      [--system-lib PREFIX] [--num-threads N] [--exec-mode MODE]\n"
    "                      [--params FILE] [--separate-params] [--time-passes] [--no-cache]\n"
    "Parses MODEL.rx (or imports MODEL.onnx), runs the pipeline, generates the kernels\n"
    "for TARGET and the bytecode, and writes the executable to OUT.tx. --emit prints\n"
    "the lowered IR, the bytecode listing or the kernels' assembly to stdout.\n"
    "  -o, --output FILE   where to write the executable; FILE.so writes it as a shared\n"
    "                      library (TVM's export_library): the CPU kernels, loadable\n"
    "                      with dlopen, carrying the executable; run, inspect and the\n"
    "                      daemon take it as they take OUT.tx\n"
    "  --target TARGET     \"llvm\" (this host, the default) or e.g.\n"
    "                      \"llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72\", or\n"
    "                      \"cuda -arch=sm_90[,sm_80...]\" (PTX for NVIDIA GPUs)\n"
    "  --emit FORM         ir | bytecode | asm\n"
    "  --shape NAME=DIMS   fix the dims of an ONNX graph input (e.g. x=1x3x224x224)\n"
    "  --pipeline NAME     default (fusion, constant folding, memory planning) or zero\n"
    "  --system-lib PREFIX emit the kernels as a static system library: OUT.a beside\n"
    "                      OUT.tx, to link into the daemon (no dlopen on the device)\n"
    "  --num-threads N     threads the kernels are tuned for (0: unknown)\n"
    "  --exec-mode MODE    bytecode (default: the VM interprets the Relax functions) or\n"
    "                      compiled (they are compiled to native code in the kernel\n"
    "                      library, TVM's exec_mode=\"compiled\"; CPU targets)\n"
    "  --params FILE       weights for main's parameters of their names (TVM's param\n"
    "                      dict): bound into the executable as constants\n"
    "  --separate-params   keep the weights (an ONNX model's initializers, and --params)\n"
    "                      as parameters of main and write them to OUT.params beside\n"
    "                      OUT.tx: `tether run OUT.tx --params OUT.params` keeps them on\n"
    "                      the daemon, so new weights or new code upload only what changed\n"
    "  --time-passes       print where the compile's time went to stderr: the import,\n"
    "                      each pass, the VM code and the kernels' code generation (its\n"
    "                      LLVM IR, optimization, machine code and link), and writing\n"
    "  --no-cache          compile every kernel: without it, kernels compiled before (by\n"
    "                      this build of tether, for this target) come from the kernel\n"
    "                      cache, TETHER_CACHE_DIR/kernels (else $XDG_CACHE_HOME/tether/\n"
    "                      kernels, else ~/.cache/tether/kernels), at most 1 GiB\n";

}  // namespace

int RunCompile(const std::vector<std::string>& args) {
  std::string input, output, emit, params_file;
  compiler::BuildOptions options;
  compiler::BuildTimings timings;
  ModelOptions model;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string* out) -> bool {
      if (i + 1 >= args.size()) {
        std::fprintf(stderr, "tether compile: %s needs a value\n", a.c_str());
        return false;
      }
      *out = args[++i];
      return true;
    };
    if (a == "--help" || a == "-h") {
      std::printf("%s", kCompileUsage);
      return 0;
    } else if (a == "-o" || a == "--output") {
      if (!value(&output)) return 2;
    } else if (a == "--target") {
      if (!value(&options.target)) return 2;
    } else if (a == "--emit") {
      if (!value(&emit)) return 2;
      if (emit != "ir" && emit != "bytecode" && emit != "asm") {
        std::fprintf(stderr, "tether compile: --emit takes ir, bytecode or asm, got \"%s\"\n",
                     emit.c_str());
        return 2;
      }
    } else if (a == "--shape") {
      std::string v;
      if (!value(&v)) return 2;
      size_t eq = v.find('=');
      std::optional<std::vector<int64_t>> dims =
          eq == std::string::npos ? std::nullopt : ParseDims(v.substr(eq + 1));
      if (eq == std::string::npos || eq == 0 || !dims) {
        std::fprintf(stderr, "tether compile: --shape wants NAME=1x3x224x224, got \"%s\"\n",
                     v.c_str());
        return 2;
      }
      model.shapes[v.substr(0, eq)] = *dims;
    } else if (a == "--pipeline") {
      if (!value(&options.pipeline)) return 2;
    } else if (a == "--exec-mode") {
      if (!value(&options.exec_mode)) return 2;
    } else if (a == "--system-lib") {
      if (!value(&options.system_lib_prefix)) return 2;
      options.system_lib = true;
    } else if (a == "--params") {
      if (!value(&params_file)) return 2;
    } else if (a == "--separate-params") {
      options.separate_params = true;
      model.separate_params = true;
    } else if (a == "--no-cache") {
      model.use_cache = false;
    } else if (a == "--time-passes") {
      options.timings = &timings;
    } else if (a == "--num-threads") {
      std::string v;
      if (!value(&v)) return 2;
      if (!absl::SimpleAtoi(v, &options.num_threads) || options.num_threads < 0) {
        std::fprintf(stderr, "tether compile: --num-threads needs a non-negative integer\n");
        return 2;
      }
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "tether compile: unknown option %s\n%s", a.c_str(), kCompileUsage);
      return 2;
    } else if (input.empty()) {
      input = a;
    } else {
      std::fprintf(stderr, "tether compile: more than one model given\n");
      return 2;
    }
  }
  if (input.empty() || (output.empty() && emit.empty())) {
    std::fprintf(stderr, "%s", kCompileUsage);
    return 2;
  }
  if (options.separate_params && output.empty()) {
    std::fprintf(stderr,
                 "tether compile: --separate-params needs -o OUT.tx (it writes OUT.params)\n");
    return 2;
  }
  model.target = options.target;
  if (model.use_cache) options.kernel_cache_dir = KernelCacheDir();
  absl::Time start = absl::Now();
  auto module = LoadModelSource(input, model, &options.params);
  if (!module.ok()) return Fail(input, module.status());
  timings.Add(absl::EndsWith(input, ".onnx") ? "ONNX import" : "parse",
              absl::ToDoubleSeconds(absl::Now() - start));
  if (!params_file.empty()) {
    // The file's weights win over an ONNX model's initializers of the same name.
    absl::StatusOr<ParamList> weights = LoadParamDictFromFile(params_file);
    if (!weights.ok()) return Fail(params_file, weights.status());
    for (auto& [name, tensor] : *weights) options.params[name] = std::move(tensor);
  }
  if (options.separate_params && options.params.empty()) {
    return Fail(input, absl::InvalidArgumentError(
                           "--separate-params: the model has no weights to separate (an ONNX "
                           "model's initializers, or --params FILE for a .rx model's main)"));
  }

  if (emit == "ir" || emit == "asm") {
    compiler::BuildOptions untimed = options;
    untimed.timings = nullptr;
    auto text = emit == "ir" ? compiler::EmitLoweredIR(*module, untimed)
                             : compiler::EmitKernelAssembly(*module, untimed);
    if (!text.ok()) return Fail(input, text.status());
    std::printf("%s", text->c_str());
    if (output.empty()) return 0;
  }
  auto built = compiler::BuildModel(std::move(*module), options);
  if (!built.ok()) return Fail(input, built.status());
  const Ref<vm::Executable>* exec = &built->exec;
  if (emit == "bytecode") std::printf("%s", (*exec)->AsText().c_str());
  if (!output.empty()) {
    // OUT.so: the executable exported as a shared library (export_library).
    const bool library = absl::EndsWith(output, ".so");
    start = absl::Now();
    absl::Status s =
        library ? compiler::ExportLibrary(exec->get(), output) : (*exec)->SaveToFile(output);
    if (!s.ok()) return Fail(output, s);
    timings.Add("write", absl::ToDoubleSeconds(absl::Now() - start));
    std::fprintf(stderr, "tether compile: wrote %s (%s, target %s, %zu kernel libraries)\n",
                 output.c_str(),
                 library ? "a shared library carrying the executable" : "executable",
                 (*exec)->metadata["target"].c_str(), (*exec)->kernel_libraries.size());
    // A system library is also written as its own archive, to link into the
    // daemon that runs the executable (docs/design/boards.md).
    for (const KernelLibraryBlob& lib : (*exec)->kernel_libraries) {
      if (lib.format != "static") continue;
      std::string archive = output;
      if (absl::EndsWith(archive, ".tx")) archive.resize(archive.size() - 3);
      archive += ".a";
      if (absl::Status w = WriteStringToFileAtomic(archive, lib.data); !w.ok()) {
        return Fail(archive, w);
      }
      std::fprintf(stderr,
                   "tether compile: wrote %s, the kernels as system library \"%s\": link it "
                   "into the daemon that runs %s (tether_add_daemon in "
                   "cmake/TetherSystemLib.cmake)\n",
                   archive.c_str(), options.system_lib_prefix.c_str(), output.c_str());
    }
    if (options.separate_params) {
      std::string params_out = output;
      if (absl::EndsWith(params_out, ".tx") || absl::EndsWith(params_out, ".so")) {
        params_out.resize(params_out.size() - 3);
      }
      params_out += ".params";
      if (absl::Status w = SaveParamDictToFile(params_out, built->params); !w.ok()) {
        return Fail(params_out, w);
      }
      int64_t bytes = 0;
      for (const auto& [name, tensor] : built->params) bytes += tensor->NumBytes();
      std::fprintf(stderr,
                   "tether compile: wrote %s, %zu weights (%lld bytes of tensors) that main "
                   "takes as its last parameters: run with --params %s\n",
                   params_out.c_str(), built->params.size(), static_cast<long long>(bytes),
                   params_out.c_str());
    }
  }
  if (options.timings != nullptr) {
    std::fprintf(stderr, "tether compile: where the time of %s went (wall seconds)\n%s",
                 input.c_str(), timings.Format().c_str());
  }
  return 0;
}

}  // namespace tether::cli
