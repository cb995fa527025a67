// What `tether run`, `bench` and `profile` write for a CI: result
// documents with provenance, the verdict against a baseline, JUnit XML and
// Chrome traces (docs/design/results.md). The documents, statistics and
// formats are client/results/; this file fills them from a session, a VM
// and the command's options.
#ifndef TETHER_CLIENT_CLI_RESULT_OUTPUT_H_
#define TETHER_CLIENT_CLI_RESULT_OUTPUT_H_

#include <string>

#include "absl/status/status.h"
#include "client/remote_session.h"
#include "client/results/bench_document.h"
#include "client/results/comparison.h"
#include "client/results/junit.h"
#include "runtime/profiling/time_evaluator.h"
#include "tether/v1/tether.pb.h"

namespace tether::cli {

// Exit codes past the usual 0 (success), 1 (the work failed) and 2 (bad
// usage), for a CI to tell apart.
inline constexpr int kExitRegression = 3;   // bench --baseline: slower beyond the threshold
inline constexpr int kExitUnstable = 4;     // bench --baseline: the samples cannot be judged
inline constexpr int kExitBadBaseline = 5;  // bench --baseline: the file is no usable baseline

// The state the daemon read, as a JSON object (the provenance's
// "device_state").
std::string DeviceStateJson(const v1::DeviceState& state);

// Now, as RFC 3339 UTC with milliseconds: "2026-12-01T10:00:00.123Z".
std::string TimestampNow();
// This machine's host name ("" when unknown).
std::string HostName();

// The daemon's part of the provenance, from the session's handshake.
// `address` is the --remote given, "" for the embedded daemon.
void AddDaemonProvenance(const client::RemoteSession& session, const std::string& address,
                         results::Provenance* p);

results::TimingSettings TimingOf(const profiling::TimeEvaluatorOptions& options, bool concurrent);

// A JUnit case for an error (the command could not do its work): the
// status's code as its type.
results::JunitCase ErrorCase(results::JunitCase c, const absl::Status& status);

// Writes `suite` to `path` as JUnit XML; an error is printed and returned
// as exit code 1 (0 when written).
int WriteJunit(const std::string& path, const results::JunitSuite& suite);

}  // namespace tether::cli

#endif  // TETHER_CLIENT_CLI_RESULT_OUTPUT_H_
