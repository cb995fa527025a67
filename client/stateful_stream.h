// StatefulStream: a model whose outputs feed its next call's inputs
// (recurrent state, caches) run chunk after chunk on a daemon with that state
// kept there. Each Step is one round trip (RemoteVM::InvokeKeeping): the
// streamed inputs go up, the carried outputs stay on the daemon as handles
// that become the next call's inputs, the previous state is freed by the same
// call, and only the outputs that are not carried come back. So no state
// crosses the network between chunks, and the session's handles on the daemon
// stay as many whatever the number of chunks (docs/design/rpc-protocol.md,
// "Streaming").
//
//   StatefulStream::Create(vm, "main", {Value(), sr, zeros}, {{1, 2}})
//   for each chunk: stream->Step({{0, Value(chunk)}})   // -> (output, state handle)
//   stream->DownloadState(2)                            // the final state, once
#ifndef TETHER_CLIENT_STATEFUL_STREAM_H_
#define TETHER_CLIENT_STATEFUL_STREAM_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/remote_vm.h"
#include "runtime/core/tensor.h"
#include "runtime/core/value.h"

namespace tether::client {

// Output `output` of a call (a field of the result tuple; 0 for a result that
// is no tuple) becomes input `input` (a parameter index) of the next call.
struct CarriedState {
  int output = 0;
  int input = 0;
};

// Thread contract: thread-hostile (one caller at a time, like its VM).
class StatefulStream {
 public:
  // `vm` is borrowed and must outlive the stream. `inputs` holds one value
  // per parameter of `function`, what the first call takes: local tensors are
  // uploaded once here and passed by handle to every call (freed by Close);
  // remote handles are passed as they are and stay the caller's; a streamed
  // input's entry is ignored (none will do). `carries` names the state; each
  // input is carried at most once, each output too. INVALID_ARGUMENT for a count of inputs
  // other than the function's arity, an index out of range, an input carried
  // twice or a carried input that is not a tensor; FAILED_PRECONDITION from a
  // daemon older than protocol 1.5; the upload's errors.
  static absl::StatusOr<std::unique_ptr<StatefulStream>> Create(RemoteVM* vm, std::string function,
                                                                std::vector<Value> inputs,
                                                                std::vector<CarriedState> carries);
  ~StatefulStream();
  StatefulStream(const StatefulStream&) = delete;
  StatefulStream& operator=(const StatefulStream&) = delete;

  // Runs one call with `streamed` (parameter index, value) in place of those
  // inputs for this call only. Returns the function's top-level outputs in
  // order: a carried one as the stream's new state handle (a RemoteHandle
  // value the stream owns: valid until the next Step or Close), the others as
  // the VM's fetch_outputs says. The call's errors leave the state as it was.
  // A carried output that is not a tensor, or whose dtype or shape differs
  // from its input's, is INVALID_ARGUMENT naming both; on the first Step the
  // state is then as it was, on a later one (a model whose state changes
  // shape between chunks) the previous state is gone and so the stream is
  // over: later Steps are FAILED_PRECONDITION. An output index past the
  // outputs fails with kind IndexError.
  absl::StatusOr<std::vector<Value>> Step(std::span<const std::pair<int, Value>> streamed);

  // What carried input `input` holds now: the last Step's output (a remote
  // handle), or before any Step the first call's input. NOT_FOUND for an
  // input that is not carried.
  absl::StatusOr<Value> State(int input) const;
  // Downloads that value (it is always remote: Create uploads a local first
  // state): the one transfer of the state a stream needs, at its end.
  absl::StatusOr<Tensor> DownloadState(int input);
  // Names of the inputs and outputs (by index; either may be short or
  // empty) for error messages: "output 1 (stateN)".
  void set_names(std::vector<std::string> inputs, std::vector<std::string> outputs) {
    input_names_ = std::move(inputs);
    output_names_ = std::move(outputs);
  }
  // Steps that succeeded.
  int64_t steps() const { return steps_; }
  // Frees what the stream holds on the daemon (its state and the inputs it
  // uploaded). Idempotent; the destructor calls it. Later Steps are
  // FAILED_PRECONDITION.
  absl::Status Close();

 private:
  StatefulStream(RemoteVM* vm, std::string function) : vm_(vm), function_(std::move(function)) {}

  struct Slot {
    Value value;         // what the next call takes (a handle when uploaded or carried)
    bool owned = false;  // a handle this stream made (uploaded or carried), freed by it
  };
  // Frees the owned handles among `ids` now (best effort, for cleanup).
  void FreeNow(std::vector<uint64_t> ids);
  // "input 1 (state)" / "output 1 (stateN)".
  std::string InputName(int index) const;
  std::string OutputName(int index) const;

  RemoteVM* vm_;
  std::string function_;
  std::vector<Slot> inputs_;
  std::vector<CarriedState> carries_;
  std::vector<uint32_t> carried_outputs_;  // carries_[i].output, for InvokeKeeping
  std::vector<std::string> input_names_, output_names_;
  int64_t steps_ = 0;
  absl::Status broken_;  // set once the state was lost or the stream closed
};

}  // namespace tether::client

#endif  // TETHER_CLIENT_STATEFUL_STREAM_H_
