// StatefulStream: the chunk loop over RemoteVM::InvokeKeeping.
#include "client/stateful_stream.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/core/error.h"

namespace tether::client {
namespace {

// "float32 (2, 1, 128)".
std::string Describe(DataType dtype, std::span<const int64_t> shape) {
  return absl::StrCat(dtype.ToString(), " ", ShapeToString(shape));
}

}  // namespace

absl::StatusOr<std::unique_ptr<StatefulStream>> StatefulStream::Create(
    RemoteVM* vm, std::string function, std::vector<Value> inputs,
    std::vector<CarriedState> carries) {
  if (vm == nullptr) return absl::InvalidArgumentError("a stateful stream needs a remote vm");
  TETHER_ASSIGN_OR_RETURN(int64_t arity, vm->GetFunctionArity(function));
  if (static_cast<int64_t>(inputs.size()) != arity) {
    return ValueError("stream of ", function, ": ", inputs.size(), " inputs given, ", function,
                      " takes ", arity);
  }
  std::set<int> carried_in, carried_out;
  for (const CarriedState& c : carries) {
    if (c.input < 0 || c.input >= arity) {
      return ValueError("stream of ", function, ": carried input ", c.input,
                        " is out of range; it takes ", arity, " inputs");
    }
    if (c.output < 0) return ValueError("stream of ", function, ": carried output ", c.output);
    if (!carried_in.insert(c.input).second) {
      return ValueError("stream of ", function, ": input ", c.input, " is carried twice");
    }
    if (!carried_out.insert(c.output).second) {
      return ValueError("stream of ", function, ": output ", c.output, " is carried twice");
    }
    const Value& first = inputs[static_cast<size_t>(c.input)];
    const RemoteHandleObj* handle = AsRemoteHandle(first);
    if (!first.is_tensor() &&
        (handle == nullptr || handle->kind() != RemoteHandleObj::Kind::kTensor)) {
      return ValueError("stream of ", function, ": carried input ", c.input,
                        " needs a first value that is a tensor, got ", first.TypeName());
    }
  }
  std::unique_ptr<StatefulStream> stream(new StatefulStream(vm, std::move(function)));
  stream->carries_ = std::move(carries);
  for (const CarriedState& c : stream->carries_) {
    stream->carried_outputs_.push_back(static_cast<uint32_t>(c.output));
  }
  // Local tensors go up once; every call then names them by handle.
  for (Value& input : inputs) {
    Slot slot;
    if (input.is_tensor()) {
      absl::StatusOr<Value> remote = vm->session()->UploadTensor(Tensor(input.AsRef<TensorObj>()));
      if (!remote.ok()) return remote.status();  // the destructor frees the earlier ones
      slot.value = std::move(*remote);
      slot.owned = true;
    } else {
      slot.value = std::move(input);
    }
    stream->inputs_.push_back(std::move(slot));
  }
  return stream;
}

StatefulStream::~StatefulStream() { (void)Close(); }

namespace {

std::string Named(const char* what, int index, const std::vector<std::string>& names) {
  const bool named = index >= 0 && static_cast<size_t>(index) < names.size() &&
                     !names[static_cast<size_t>(index)].empty();
  return named ? absl::StrCat(what, " ", index, " (", names[static_cast<size_t>(index)], ")")
               : absl::StrCat(what, " ", index);
}

}  // namespace

std::string StatefulStream::InputName(int index) const {
  return Named("input", index, input_names_);
}
std::string StatefulStream::OutputName(int index) const {
  return Named("output", index, output_names_);
}

void StatefulStream::FreeNow(std::vector<uint64_t> ids) {
  if (!ids.empty()) (void)vm_->session()->FreeObjects(std::move(ids));
}

absl::StatusOr<std::vector<Value>> StatefulStream::Step(
    std::span<const std::pair<int, Value>> streamed) {
  TETHER_RETURN_IF_ERROR(broken_);
  std::vector<Value> args;
  args.reserve(inputs_.size());
  for (const Slot& slot : inputs_) args.push_back(slot.value);
  for (const auto& [index, value] : streamed) {
    if (index < 0 || static_cast<size_t>(index) >= args.size()) {
      return ValueError("stream of ", function_, ": streamed input ", index,
                        " is out of range; it takes ", args.size(), " inputs");
    }
    args[static_cast<size_t>(index)] = value;
  }
  // The previous state, freed by the call itself once it succeeded; the
  // first state only after its outputs were checked, so a bad carry leaves
  // the stream as it was.
  std::vector<uint64_t> previous;
  for (const CarriedState& c : carries_) {
    const Slot& slot = inputs_[static_cast<size_t>(c.input)];
    if (slot.owned) previous.push_back(AsRemoteHandle(slot.value)->id());
  }
  const std::span<const uint64_t> free_now =
      steps_ == 0 ? std::span<const uint64_t>() : std::span<const uint64_t>(previous);
  TETHER_ASSIGN_OR_RETURN(Value out,
                          vm_->InvokeKeeping(function_, args, carried_outputs_, free_now));
  std::vector<Value> outputs;
  if (out.is_tuple()) {
    outputs = out.AsRef<TupleObj>()->fields;
  } else {
    outputs.push_back(std::move(out));
  }
  // The daemon kept every carried output (it checked the indices); each must
  // fit the input it feeds.
  absl::Status fits;
  std::vector<uint64_t> kept;
  for (const CarriedState& c : carries_) {
    if (static_cast<size_t>(c.output) >= outputs.size()) {
      return absl::InternalError(absl::StrCat("the daemon returned ", outputs.size(),
                                              " outputs without output ", c.output));
    }
  }
  for (const CarriedState& c : carries_) {
    const RemoteHandleObj* now = AsRemoteHandle(outputs[static_cast<size_t>(c.output)]);
    const RemoteHandleObj* before = AsRemoteHandle(inputs_[static_cast<size_t>(c.input)].value);
    if (now != nullptr) kept.push_back(now->id());
    if (!fits.ok()) continue;
    if (now == nullptr || now->kind() != RemoteHandleObj::Kind::kTensor) {
      fits = ValueError("stream of ", function_, ": carried ", OutputName(c.output),
                        " is not a tensor, so it cannot become ", InputName(c.input));
    } else if (now->spec().dtype != before->spec().dtype ||
               !std::equal(now->spec().shape.begin(), now->spec().shape.end(),
                           before->spec().shape.begin(), before->spec().shape.end())) {
      fits =
          ValueError("stream of ", function_, ": carried ", OutputName(c.output), " is ",
                     Describe(now->spec().dtype, now->spec().shape), ", but ", InputName(c.input),
                     " it feeds is ", Describe(before->spec().dtype, before->spec().shape));
    }
  }
  if (!fits.ok()) {
    FreeNow(std::move(kept));
    if (steps_ > 0) {
      for (const CarriedState& c : carries_) inputs_[static_cast<size_t>(c.input)] = Slot();
      broken_ = absl::FailedPreconditionError(absl::StrCat("stream of ", function_,
                                                           " is over: its state was lost at chunk ",
                                                           steps_, " (", fits.message(), ")"));
    }
    return fits;
  }
  if (steps_ == 0) FreeNow(std::move(previous));
  for (const CarriedState& c : carries_) {
    Slot& slot = inputs_[static_cast<size_t>(c.input)];
    slot.value = outputs[static_cast<size_t>(c.output)];
    slot.owned = true;
  }
  ++steps_;
  return outputs;
}

absl::StatusOr<Value> StatefulStream::State(int input) const {
  for (const CarriedState& c : carries_) {
    if (c.input == input && static_cast<size_t>(input) < inputs_.size()) {
      return inputs_[static_cast<size_t>(input)].value;
    }
  }
  return NotFoundError("stream of ", function_, ": input ", input, " is not carried");
}

absl::StatusOr<Tensor> StatefulStream::DownloadState(int input) {
  TETHER_RETURN_IF_ERROR(broken_);
  TETHER_ASSIGN_OR_RETURN(Value state, State(input));
  return vm_->session()->DownloadTensor(state);
}

absl::Status StatefulStream::Close() {
  std::vector<uint64_t> owned;
  for (const Slot& slot : inputs_) {
    if (slot.owned) owned.push_back(AsRemoteHandle(slot.value)->id());
  }
  inputs_.clear();
  broken_ = absl::FailedPreconditionError(absl::StrCat("stream of ", function_, " is closed"));
  if (owned.empty()) return absl::OkStatus();
  return vm_->session()->FreeObjects(std::move(owned));
}

}  // namespace tether::client
