// A profile as a Chrome trace (the Trace Event Format that chrome://tracing
// and Perfetto's UI open): one complete event ("ph": "X") per profiled call
// at its start and for its duration, on one track per device, inside a span
// for the whole run; the report's configuration and the result's provenance
// go in "otherData" (docs/design/results.md, "Chrome traces").
//
// Thread contract: pure functions; thread-safe.
#ifndef TETHER_CLIENT_RESULTS_CHROME_TRACE_H_
#define TETHER_CLIENT_RESULTS_CHROME_TRACE_H_

#include <string>

#include "absl/strings/string_view.h"
#include "runtime/profiling/report.h"

namespace tether::results {

// The trace of `report` (a Profile report: rows with Name, Duration (us),
// Device and, since the profiled run records it, Start (us); rows without a
// start are laid end to end after the previous one on their device).
// `process_name` names the trace's process ("tether profile mlp.onnx");
// `provenance_json` is a JSON object put under otherData.provenance ("" for
// none).
std::string ChromeTraceJson(const profiling::Report& report, absl::string_view process_name,
                            absl::string_view provenance_json = "");

}  // namespace tether::results

#endif  // TETHER_CLIENT_RESULTS_CHROME_TRACE_H_
