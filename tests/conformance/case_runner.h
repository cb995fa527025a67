// One conformance case: a directory holding model.onnx and
// test_data_set_*/{input,output}_N.pb. RunCase imports the model, builds it,
// runs "main" on every data set (on a local VM, or through a tetherd at
// `remote_target`) and compares each output with the reference.
//
// Thread contract: thread-compatible (RunCase shares no state, but the
// compiler it calls is only thread-safe for distinct modules).
#ifndef TETHER_TESTS_CONFORMANCE_CASE_RUNNER_H_
#define TETHER_TESTS_CONFORMANCE_CASE_RUNNER_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "runtime/core/device.h"

namespace tether::conformance {

enum class Outcome { kPass, kFail, kUnsupported };

// "pass", "fail", "unsupported".
absl::string_view OutcomeName(Outcome outcome);

struct CaseSpec {
  std::string suite;  // "node"
  std::string name;   // "test_add"
  std::string dir;    // the case directory
};

struct CaseOptions {
  // Empty: a local VM in this process; otherwise a tetherd target
  // ("127.0.0.1:PORT") the executable is uploaded to.
  std::string remote_target;
  std::string remote_token;  // the daemon's bearer token, when it needs one
  std::string pipeline = "default";
  // When the importer needs a value at import time that the model feeds from
  // a graph input (Reshape's shape, Slice's starts, ...: "must be known at
  // import time"), retry with every integer or float graph input of rank <= 1 bound as a constant
  // from the data set (one build per data set). Such passes are reported
  // with the names bound (CaseResult::bound_inputs).
  bool bind_shape_inputs = true;
  // > 0: build for "cuda" with compiler::BuildOptions::simulate_gpu_threads,
  // so the GPU lowering of every case runs (and is compared) on the CPU.
  int simulate_gpu_threads = 0;
  // Where the cases run. A cuda device builds every model for cuda_target.
  Device device = Device::Cpu();
  // What models for a cuda device are built for: the GPU's own architecture
  // ("cuda -arch=sm_90"), resolved once by the caller (tether_conformance
  // asks the driver in a child process before the cases start); empty: each
  // case asks the driver itself.
  std::string cuda_target;
  // What models for the CPU are built for: "llvm" (this machine), or a
  // remote daemon's own target (RemoteSession::CpuCompileTarget).
  std::string cpu_target = "llvm";
};

struct CaseResult {
  Outcome outcome = Outcome::kFail;
  // Where it stopped: "model", "import", "build", "data", "run", "compare",
  // "crash", "timeout" (the last two come from the process that ran it), or
  // "" when it passed.
  std::string stage;
  // One line: the importer's or compiler's message, or what differs.
  std::string reason;
  // The distinct op types of the model's graph, in order of first use
  // ("Conv,Relu"); empty when the model could not be read.
  std::string ops;
  // For a pass with bind_shape_inputs: the graph inputs bound ("axes");
  // empty otherwise.
  std::string bound_inputs;
  double compile_seconds = 0;  // import + build
  double run_seconds = 0;      // all data sets, comparison included
};

// The target for cases on the GPU `device`: its own architecture, so the
// suite checks the code it gets (bfloat16 tensor cores and cp.async from
// sm_80), or the three common images when the driver does not say. Starts
// the CUDA driver in the calling process.
std::string CudaTarget(Device device);

// Runs one case. Never fails: every error becomes a kFail or kUnsupported
// result (UNIMPLEMENTED from the importer or compiler is kUnsupported).
CaseResult RunCase(const CaseSpec& spec, const CaseOptions& options);

// The case directories under `suite_dir` (those with a model.onnx), sorted by
// name; `suite` becomes each spec's suite.
std::vector<CaseSpec> ListCases(const std::string& suite_dir, const std::string& suite);

}  // namespace tether::conformance

#endif  // TETHER_TESTS_CONFORMANCE_CASE_RUNNER_H_
