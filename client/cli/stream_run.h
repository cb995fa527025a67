// `tether run MODEL --stream NAME=@CHUNKS.npy [--carry OUT=IN ...]`: the
// chunk loop of a stateful model over client::StatefulStream
// (stream_run.cc), given a VM the run command prepared.
#ifndef TETHER_CLIENT_CLI_STREAM_RUN_H_
#define TETHER_CLIENT_CLI_STREAM_RUN_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "client/remote_vm.h"
#include "runtime/core/tensor.h"
#include "runtime/core/value.h"

namespace tether::cli {

struct StreamJob {
  std::string function = "main";
  std::vector<std::string> params;        // the function's parameters, in order
  std::vector<std::string> output_names;  // an ONNX model's outputs; empty: by index
  // Streamed inputs by name: the file's first axis is the chunk index.
  std::map<std::string, Tensor> chunks;
  // One per parameter: what the first call takes (none for streamed inputs).
  std::vector<Value> first_inputs;
  std::vector<std::pair<std::string, std::string>> carries;  // --carry OUT=IN
  std::string output_dir;      // stacked outputs and final state as .npy; empty: none
  bool compare_naive = false;  // also time the loop that moves the state each chunk
};

// Runs the chunks on `vm` (fetch_outputs on), prints the outputs (each
// output not carried stacked along a new first axis, each carried one's final
// value) and the per-chunk latency; with compare_naive, the same chunks again
// with the state uploaded and downloaded each call, and the ratio. Returns
// the printed summary. INVALID_ARGUMENT for a --carry naming an unknown output
// or input, streams of different chunk counts, a carried output that does not
// fit its input; the calls' errors.
absl::StatusOr<std::string> RunStream(client::RemoteVM* vm, const StreamJob& job);

}  // namespace tether::cli

#endif  // TETHER_CLIENT_CLI_STREAM_RUN_H_
