// Result documents: what `tether bench --json` writes and `--baseline`
// reads back, and the provenance that `tether profile` results carry too
// (docs/design/results.md, "The result document"). A document names
// everything that produced its numbers — the model and module hashes, the
// inputs, the compiler and daemon versions, the target, the device's state
// as the daemon read it, every timing setting — next to the raw samples.
//
// Thread contract: value types and pure functions; thread-compatible.
#ifndef TETHER_CLIENT_RESULTS_BENCH_DOCUMENT_H_
#define TETHER_CLIENT_RESULTS_BENCH_DOCUMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/results/comparison.h"
#include "client/results/json_writer.h"
#include "runtime/profiling/benchmark_result.h"

namespace tether::results {

// The document's "kind" and format version. A reader takes any document of
// its major version; fields are only ever added.
inline constexpr char kBenchKind[] = "tether.bench";
inline constexpr char kProfileKind[] = "tether.profile";
inline constexpr int kDocumentVersion = 1;

// One input of the measured function: a file (hashed) or made up on the
// device from a seed.
struct InputRecord {
  std::string name;
  std::string dtype;  // "float32"
  std::vector<int64_t> shape;
  std::string source;  // "file" or "random"
  std::string path;    // file: as given
  std::string sha256;  // file: of the tensor's bytes (row-major, little-endian)
  uint64_t seed = 0;   // random: uniform in [low, high)
  double low = 0;
  double high = 0;
};

// The time evaluator's settings as asked for (docs/design/profiling.md).
struct TimingSettings {
  int number = 10;
  int repeat = 1;
  int min_repeat_ms = 0;
  int limit_zero_time_iterations = 100;
  int cooldown_interval_ms = 0;
  int repeats_to_cooldown = 1;
  int64_t cache_flush_bytes = 0;
  std::string f_preproc;
  bool concurrent = false;  // --concurrent-timing: measured beside other sessions
};

struct Provenance {
  std::string timestamp;      // when the client started the run, RFC 3339 UTC
  std::string model_path;     // as given on the command line
  std::string model_sha256;   // of the model file (.rx, .onnx or executable)
  std::string module_sha256;  // of the executable the daemon ran
  std::string function;
  std::string device;  // "cpu:0"
  std::vector<InputRecord> inputs;
  std::string client_version;    // the tether CLI's release
  std::string compiler_version;  // "" when the model was an executable
  std::string compile_target;    // the --target it was compiled for, when compiled
  std::string client_host;
  std::string daemon_address;  // "embedded" or HOST:PORT
  // The farm device the run held (`--farm URL --key KEY`, or `--remote`
  // with `--fencing-token`); empty key and device when not through a farm.
  std::string farm_key;
  std::string farm_device;
  int64_t fencing_token = 0;
  std::string daemon_version;
  std::string protocol;  // "1.4"
  std::string daemon_triple;
  std::string daemon_cpu;
  std::string daemon_cpu_description;
  std::vector<std::string> daemon_features;
  // The device's state read by the daemon right after the measurement
  // (clocks, governor, temperatures, GPU), as a JSON object; "" when the
  // daemon sent none.
  std::string device_state_json;
};

// Writes `p` as the value of the current key (an object).
void WriteProvenance(JsonWriter& w, const Provenance& p);
// Writes the comparison with a baseline as the value of the current key.
void WriteComparison(JsonWriter& w, const Comparison& c, const CompareOptions& options,
                     absl::string_view baseline_path);

// The whole bench document: the result's statistics and raw samples at the
// top level (the keys `tether bench --json` always had), then "timing",
// "provenance" and, with a baseline, "comparison".
std::string BenchDocumentJson(const profiling::BenchmarkResult& result, const Provenance& p,
                              const TimingSettings& timing, const Comparison* comparison = nullptr,
                              const CompareOptions* options = nullptr,
                              absl::string_view baseline_path = "");

// A stored bench document as a baseline needs it.
struct StoredBench {
  std::string timestamp;
  std::string function;
  std::string device;
  std::string model_path;
  std::string model_sha256;
  std::string module_sha256;
  std::vector<InputRecord> inputs;  // name, dtype and shape (the workload)
  TimingSettings timing;
  std::vector<double> samples;
  std::string daemon_version;
  std::string farm_device;  // "" when the baseline did not run on a farm device
  std::string compiler_version;
};

// Reads a bench document. INVALID_ARGUMENT naming `path` and what is wrong:
// not JSON, not a bench result (another "kind", or none: an old `bench
// --json` output without provenance), a newer format version, a sample that
// is not a non-negative number, no samples at all.
absl::StatusOr<StoredBench> ParseBenchDocument(absl::string_view text, absl::string_view path);

// Whether `baseline` measured the same workload as this run: the same model
// file, function and inputs' dtypes and shapes. FAILED_PRECONDITION naming
// the first difference ("the baseline measured model sha256 ab12... and
// this run cd34...") otherwise. A different device, module or timing
// settings are allowed (that is what a comparison is for) and reported by
// BaselineDifferences.
absl::Status CheckSameWorkload(const StoredBench& baseline, const Provenance& run);

// What differs between the baseline and this run besides the workload, one
// phrase each ("module sha256", "device cuda:0 -> cuda:1", "number 10 ->
// 20"), for the report.
std::vector<std::string> BaselineDifferences(const StoredBench& baseline, const Provenance& run,
                                             const TimingSettings& timing);

}  // namespace tether::results

#endif  // TETHER_CLIENT_RESULTS_BENCH_DOCUMENT_H_
