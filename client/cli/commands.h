// The subcommands of the `tether` CLI. Each takes the arguments after its name
// and returns the process exit code: 0 on success, 1 on a failure of the work,
// 2 on bad usage; `bench --baseline` adds 3, 4 and 5 (result_output.h).
#ifndef TETHER_CLIENT_CLI_COMMANDS_H_
#define TETHER_CLIENT_CLI_COMMANDS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "runtime/core/data_type.h"
#include "runtime/core/tensor.h"

namespace tether::cli {

int RunDemo(const std::vector<std::string>& args);
int RunDemoFile(const std::vector<std::string>& args);
int RunInspect(const std::vector<std::string>& args);
int RunInfo(const std::vector<std::string>& args);
int RunRun(const std::vector<std::string>& args);
int RunBench(const std::vector<std::string>& args);
int RunProfile(const std::vector<std::string>& args);
int RunCompile(const std::vector<std::string>& args);
int RunCompare(const std::vector<std::string>& args);
// `tether farm list|acquire|quarantine|release|probe` (farm_commands.cc; in a
// tether built without the farm, without_farm.cc says so).
int RunFarm(const std::vector<std::string>& args);

// Where and how to reach a device farm, from the --farm flags.
struct FarmFlags {
  std::string url;                                             // --farm etcd://HOST:PORT[,...]
  std::string key;                                             // --key
  std::vector<std::string> where;                              // --where attr=value
  int priority = 0;                                            // --priority
  std::optional<absl::Duration> wait;                          // --wait; unset: as long as it takes
  absl::Duration ttl = absl::Seconds(10);                      // --farm-ttl: the hold's lease
  std::string tls_ca, tls_cert, tls_key, user, password_file;  // etcd credentials
};
// Parses one --farm flag at args[*i] (advancing *i past its value) into
// `flags`. 1: consumed; 0: not a farm flag; -1: bad value (printed).
int ParseFarmFlag(const std::string& command, const std::vector<std::string>& args, size_t* i,
                  FarmFlags* flags);
// The --farm flags' help text.
extern const char kFarmFlagsHelp[];

// A device held through the farm for one command (run/bench/profile
// --farm): released (its etcd lease revoked) when destroyed.
class FarmClaim {
 public:
  virtual ~FarmClaim() = default;
  virtual const std::string& device_id() const = 0;
  virtual const std::string& address() const = 0;
  virtual int64_t fencing_token() const = 0;
};
// Acquires a device as `tether farm acquire` does. Statuses as
// farm::DeviceLease::Acquire; FAILED_PRECONDITION without the farm.
absl::StatusOr<std::unique_ptr<FarmClaim>> ClaimFarmDevice(const FarmFlags& flags);

// Parses dims "2x3x4" (also "2,3,4"; "scalar" for 0-d); nullopt when malformed.
std::optional<std::vector<int64_t>> ParseDims(absl::string_view text);

// How a model file becomes an executable (model_loader.cc).
struct ModelOptions {
  // Fixes the dims of ONNX graph inputs by name (--shape x=1x3x224x224).
  std::map<std::string, std::vector<int64_t>> shapes;
  std::string target = "llvm";
  // ONNX builds are cached on disk (TETHER_CACHE_DIR, else
  // $XDG_CACHE_HOME/tether, else ~/.cache/tether), keyed by the model's
  // SHA-256, the target, the shapes, the compiler version and its build
  // (compiler/build_id.h).
  bool use_cache = true;
  // No progress lines on stderr.
  bool quiet = false;
  // Weights stay parameters of main (an ONNX model's initializers; TVM's
  // keep_params_in_input) for a param file to fill on the daemon.
  bool separate_params = false;
  // "bytecode" or "compiled" (compiler::BuildOptions::exec_mode).
  std::string exec_mode = "bytecode";
};

// The bytes of the executable at `path`. A Relax text model (.rx) or an
// ONNX model (.onnx) is compiled first, for `options.target`; a tether built
// without the compiler (TETHER_BUILD_COMPILER=OFF, without_compiler.cc)
// says so with FAILED_PRECONDITION.
absl::StatusOr<std::string> LoadOrCompileExecutable(const std::string& path,
                                                    const ModelOptions& options = {});

// A graph input of an ONNX model as the file declares it.
struct ModelInput {
  std::vector<int64_t> shape;          // -1 for a dynamic dim
  std::vector<std::string> dim_names;  // each dim's dim_param, or ""
  DataType dtype;
};
// The graph inputs of an ONNX model file by name. Empty for other files.
absl::StatusOr<std::map<std::string, ModelInput>> ModelInputShapes(const std::string& path);
// The graph outputs of an ONNX model file, in order (the fields of the
// result). Empty for other files, whose outputs are known by index only.
absl::StatusOr<std::vector<std::string>> ModelOutputNames(const std::string& path);

// The compiler's version ("tether-compiler 0.1.0"; "" in a tether built
// without the compiler).
std::string CompilerVersion();

// A model source the CLI compiles before running: a .rx or .onnx file.
bool IsModelSource(const std::string& path);

// The compile target for a CUDA device of compute capability
// `compute_version` ("9.0" -> "cuda -arch=sm_90"; compiler/backend/llvm/target.h).
absl::StatusOr<std::string> CompileTargetForCuda(absl::string_view compute_version);

// While alive, and once `what` has taken more than a second, says so on
// stderr ("tether: compiling m.onnx ...") and, when done, how long it took.
class SlowWorkNotice {
 public:
  SlowWorkNotice(std::string what, bool quiet);
  ~SlowWorkNotice();
  SlowWorkNotice(const SlowWorkNotice&) = delete;
  SlowWorkNotice& operator=(const SlowWorkNotice&) = delete;

 private:
  struct State;
  std::shared_ptr<State> state_;
  std::thread thread_;
};

// Registers the demo's C++ kernels (demo.dense, demo.relu) in this process, so
// the embedded daemon of `tether run/bench/profile` can run demo executables.
void RegisterDemoKernels();

// A short preview of a tensor's values: "[0.1234, -1.5, ...]"
// (remote_commands.cc).
std::string PreviewValues(const Tensor& t);

// Prints "tether: <what>: <status>" to stderr and returns 1.
int Fail(const std::string& what, const absl::Status& status);

}  // namespace tether::cli

#endif  // TETHER_CLIENT_CLI_COMMANDS_H_
