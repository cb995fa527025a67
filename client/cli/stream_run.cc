// The chunk loop of `tether run --stream` (stream_run.h): the state stays on
// the daemon (client::StatefulStream), the outputs that are not carried come
// back each chunk, and the latency of each chunk is what the client waited
// for its one round trip.
#include "client/cli/stream_run.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/cli/commands.h"
#include "client/npy.h"
#include "client/stateful_stream.h"
#include "runtime/core/error.h"

namespace tether::cli {
namespace {

// Per-chunk latency statistics, in milliseconds.
struct Latency {
  double mean = 0, median = 0, p90 = 0, min = 0, max = 0;
};

Latency Summarize(std::vector<double> ms) {
  Latency l;
  if (ms.empty()) return l;
  std::sort(ms.begin(), ms.end());
  for (double v : ms) l.mean += v;
  l.mean /= static_cast<double>(ms.size());
  auto at = [&](double q) {
    const double pos = q * static_cast<double>(ms.size() - 1);
    const size_t lo = static_cast<size_t>(pos);
    const size_t hi = std::min(lo + 1, ms.size() - 1);
    return ms[lo] + (ms[hi] - ms[lo]) * (pos - static_cast<double>(lo));
  };
  l.median = at(0.5);
  l.p90 = at(0.9);
  l.min = ms.front();
  l.max = ms.back();
  return l;
}

std::string FormatLatency(const Latency& l) {
  return absl::StrFormat("mean %.4f ms   median %.4f ms   p90 %.4f ms   min %.4f ms   max %.4f ms",
                         l.mean, l.median, l.p90, l.min, l.max);
}

// Chunk `i` of `chunks` (a view, no copy).
absl::StatusOr<Tensor> Chunk(const Tensor& chunks, int64_t i) {
  const std::span<const int64_t> shape = chunks->shape();
  std::vector<int64_t> one(shape.begin() + 1, shape.end());
  const uint64_t bytes = static_cast<uint64_t>(chunks->NumBytes() / shape[0]);
  return chunks.CreateView(one, chunks->dtype(), bytes * static_cast<uint64_t>(i));
}

// The outputs of every chunk along a new first axis.
absl::StatusOr<Tensor> Stack(const std::vector<Tensor>& parts, const std::string& what) {
  const Tensor& first = parts.front();
  std::vector<int64_t> shape = {static_cast<int64_t>(parts.size())};
  shape.insert(shape.end(), first->shape().begin(), first->shape().end());
  TETHER_ASSIGN_OR_RETURN(Tensor out, Tensor::Empty(shape, first->dtype(), Device::Cpu()));
  const size_t bytes = static_cast<size_t>(first->NumBytes());
  char* dst = static_cast<char*>(out->element_data());
  for (size_t i = 0; i < parts.size(); ++i) {
    const Tensor& t = parts[i];
    if (t->dtype() != first->dtype() || !std::equal(t->shape().begin(), t->shape().end(),
                                                    first->shape().begin(), first->shape().end())) {
      return ValueError(what, " of chunk ", i, " is ", t->dtype().ToString(), " ",
                        ShapeToString(t->shape()), ", chunk 0's ", first->dtype().ToString(), " ",
                        ShapeToString(first->shape()), ": outputs of changing shape do not stack");
    }
    TETHER_RETURN_IF_ERROR(t.CopyToBytes(dst + i * bytes, bytes));
  }
  return out;
}

absl::Status Print(const Tensor& t, const std::string& label, const std::string& file_stem,
                   const std::string& dir, std::string* summary) {
  std::string where;
  if (!dir.empty()) {
    where = (std::filesystem::path(dir) / (file_stem + ".npy")).string();
    TETHER_RETURN_IF_ERROR(client::WriteNpyFile(where, t));
  }
  const std::string line = absl::StrFormat(
      "  %-22s %-8s %-16s %s%s\n", label, t->dtype().ToString(), ShapeToString(t->shape()),
      PreviewValues(t), where.empty() ? "" : absl::StrCat("  -> ", where));
  std::printf("%s", line.c_str());
  absl::StrAppend(summary, line);
  return absl::OkStatus();
}

// The output's index from --carry's OUT: an ONNX output name, or an index.
absl::StatusOr<int> OutputIndex(const StreamJob& job, const std::string& name) {
  for (size_t i = 0; i < job.output_names.size(); ++i) {
    if (job.output_names[i] == name) return static_cast<int>(i);
  }
  int index = -1;
  if (absl::SimpleAtoi(name, &index) && index >= 0 &&
      (job.output_names.empty() || static_cast<size_t>(index) < job.output_names.size())) {
    return index;
  }
  if (job.output_names.empty()) {
    return ValueError("--carry ", name, "=...: this executable's outputs have no names; give ",
                      "the output's index (0, 1, ...)");
  }
  return ValueError("--carry ", name, "=...: ", job.function, " has no output named ", name,
                    "; its outputs are ", absl::StrJoin(job.output_names, ", "));
}

absl::StatusOr<int> InputIndex(const StreamJob& job, const std::string& name) {
  auto it = std::find(job.params.begin(), job.params.end(), name);
  if (it == job.params.end()) {
    return ValueError("--carry ...=", name, ": ", job.function, " has no input named ", name,
                      "; its inputs are ", absl::StrJoin(job.params, ", "));
  }
  return static_cast<int>(it - job.params.begin());
}

std::string OutputLabel(const StreamJob& job, size_t i) {
  return i < job.output_names.size() ? job.output_names[i] : absl::StrCat(i);
}

}  // namespace

absl::StatusOr<std::string> RunStream(client::RemoteVM* vm, const StreamJob& job) {
  std::vector<client::CarriedState> carries;
  for (const auto& [out, in] : job.carries) {
    TETHER_ASSIGN_OR_RETURN(int output, OutputIndex(job, out));
    TETHER_ASSIGN_OR_RETURN(int input, InputIndex(job, in));
    carries.push_back({output, input});
  }
  // Streamed inputs by parameter index, all of one chunk count.
  std::vector<std::pair<int, Tensor>> streamed;
  int64_t num_chunks = -1;
  std::string first_stream;
  for (const auto& [name, chunks] : job.chunks) {
    TETHER_ASSIGN_OR_RETURN(int index, InputIndex(job, name));
    const int64_t n = chunks->shape()[0];
    if (num_chunks >= 0 && n != num_chunks) {
      return ValueError("--stream ", name, " has ", n, " chunks, --stream ", first_stream, " ",
                        num_chunks, ": every stream needs as many");
    }
    num_chunks = n;
    first_stream = name;
    streamed.emplace_back(index, chunks);
  }

  TETHER_ASSIGN_OR_RETURN(
      std::unique_ptr<client::StatefulStream> stream,
      client::StatefulStream::Create(vm, job.function, job.first_inputs, carries));
  stream->set_names(job.params, job.output_names);
  std::vector<std::vector<Tensor>> outputs;  // [output][chunk], outputs not carried
  std::vector<double> streamed_ms;
  auto is_carried = [&](size_t output) {
    return std::any_of(carries.begin(), carries.end(),
                       [&](const client::CarriedState& c) { return c.output == int(output); });
  };
  for (int64_t i = 0; i < num_chunks; ++i) {
    std::vector<std::pair<int, Value>> args;
    for (const auto& [index, chunks] : streamed) {
      TETHER_ASSIGN_OR_RETURN(Tensor chunk, Chunk(chunks, i));
      args.emplace_back(index, Value(chunk));
    }
    const absl::Time start = absl::Now();
    absl::StatusOr<std::vector<Value>> out = stream->Step(args);
    streamed_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
    if (!out.ok()) {
      return absl::Status(out.status().code(),
                          absl::StrCat("chunk ", i, ": ", out.status().message()));
    }
    outputs.resize(out->size());
    for (size_t k = 0; k < out->size(); ++k) {
      if (is_carried(k)) continue;
      const Value& v = (*out)[k];
      if (!v.is_tensor()) {
        return ValueError("output ", OutputLabel(job, k), " of chunk ", i, " is a ", v.TypeName(),
                          ", and only tensor outputs are collected");
      }
      outputs[k].push_back(Tensor(v.AsRef<TensorObj>()));
    }
  }

  std::string summary;
  if (!job.output_dir.empty()) std::filesystem::create_directories(job.output_dir);
  const std::string head = absl::StrFormat(
      "outputs of %s over %d chunks (stacked along a new first axis):\n", job.function, num_chunks);
  std::printf("%s", head.c_str());
  absl::StrAppend(&summary, head);
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (is_carried(k)) continue;
    const std::string label = OutputLabel(job, k);
    TETHER_ASSIGN_OR_RETURN(Tensor stacked, Stack(outputs[k], absl::StrCat("output ", label)));
    TETHER_RETURN_IF_ERROR(Print(stacked, absl::StrCat("out ", label), absl::StrCat("out_", label),
                                 job.output_dir, &summary));
  }
  // The final state: the one download of it.
  std::vector<std::pair<int, Tensor>> final_states;
  for (const client::CarriedState& c : carries) {
    TETHER_ASSIGN_OR_RETURN(Tensor state, stream->DownloadState(c.input));
    const std::string& input = job.params[static_cast<size_t>(c.input)];
    TETHER_RETURN_IF_ERROR(Print(state,
                                 absl::StrCat("state ", OutputLabel(job, c.output), "->", input),
                                 absl::StrCat("state_", input), job.output_dir, &summary));
    final_states.emplace_back(c.input, std::move(state));
  }
  TETHER_RETURN_IF_ERROR(stream->Close());

  const Latency s = Summarize(streamed_ms);
  std::string timing = absl::StrFormat(
      "per chunk (client round trip, state kept on the daemon), %d chunks:\n  streamed  %s\n",
      num_chunks, FormatLatency(s));
  if (job.compare_naive && !carries.empty()) {
    // The naive loop: the state goes up with each call and comes back with
    // its outputs; the inputs that do not change are uploaded once, as the
    // stream does.
    std::vector<Value> args;
    std::vector<uint64_t> uploaded;
    for (const Value& v : job.first_inputs) {
      if (!v.is_tensor()) {
        args.push_back(v);
        continue;
      }
      TETHER_ASSIGN_OR_RETURN(Value remote,
                              vm->session()->UploadTensor(Tensor(v.AsRef<TensorObj>())));
      uploaded.push_back(client::AsRemoteHandle(remote)->id());
      args.push_back(std::move(remote));
    }
    for (const client::CarriedState& c : carries) {
      args[static_cast<size_t>(c.input)] = job.first_inputs[static_cast<size_t>(c.input)];
    }
    std::vector<double> naive_ms;
    absl::Status naive;
    for (int64_t i = 0; i < num_chunks && naive.ok(); ++i) {
      for (const auto& [index, chunks] : streamed) {
        absl::StatusOr<Tensor> chunk = Chunk(chunks, i);
        if (!chunk.ok()) return chunk.status();
        args[static_cast<size_t>(index)] = Value(*chunk);
      }
      const absl::Time start = absl::Now();
      absl::StatusOr<Value> out = vm->Invoke(job.function, args);
      naive_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
      if (!out.ok()) {
        naive = out.status();
        break;
      }
      for (const client::CarriedState& c : carries) {
        args[static_cast<size_t>(c.input)] =
            out->is_tuple() ? out->AsRef<TupleObj>()->fields[static_cast<size_t>(c.output)] : *out;
      }
    }
    if (!uploaded.empty()) (void)vm->session()->FreeObjects(uploaded);
    TETHER_RETURN_IF_ERROR(naive);
    bool same = true;
    for (const auto& [input, state] : final_states) {
      const Value& v = args[static_cast<size_t>(input)];
      if (!v.is_tensor()) {
        same = false;
        continue;
      }
      Tensor t(v.AsRef<TensorObj>());
      same = same && t->NumBytes() == state->NumBytes() &&
             std::memcmp(t->element_data(), state->element_data(),
                         static_cast<size_t>(t->NumBytes())) == 0;
    }
    const Latency n = Summarize(naive_ms);
    absl::StrAppendFormat(&timing,
                          "  naive     %s\n            (the state uploaded and downloaded with "
                          "each call; final state %s)\n  streamed / naive: %.3f (median), %.3f "
                          "(mean)\n",
                          FormatLatency(n), same ? "identical" : "DIFFERS", s.median / n.median,
                          s.mean / n.mean);
  }
  std::printf("%s", timing.c_str());
  absl::StrAppend(&summary, timing);
  return summary;
}

}  // namespace tether::cli
