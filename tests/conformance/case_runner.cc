// RunCase: import, build, run and compare one ONNX test case. Every step's
// error is caught here and turned into a result, so the caller only has to
// guard against crashes and hangs (runner.cc runs each case in a child
// process for that).
#include "tests/conformance/case_runner.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "client/remote_session.h"
#include "client/remote_vm.h"
#include "compiler/backend/llvm/target.h"
#include "compiler/build.h"
#include "compiler/frontend/onnx/importer.h"
#include "compiler/frontend/onnx/tensor_proto.h"
#include "onnx/onnx-data_pb.h"
#include "onnx/onnx_pb.h"
#include "runtime/core/value.h"
#include "runtime/vm/local_vm.h"
#include "tests/conformance/compare.h"

namespace tether::conformance {
namespace {

namespace fs = std::filesystem;
using compiler::onnx_frontend::ImportOnnxFile;
using compiler::onnx_frontend::ReadTensorProtoFile;

class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double Seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

// One line, for the table.
std::string OneLine(absl::string_view text) {
  return absl::StrReplaceAll(text, {{"\r", " "}, {"\n", " | "}, {"\t", " "}});
}

CaseResult Finish(CaseResult result, Outcome outcome, absl::string_view stage,
                  absl::string_view reason) {
  result.outcome = outcome;
  result.stage = std::string(stage);
  result.reason = OneLine(reason);
  return result;
}

// A status from `stage` as a result: UNIMPLEMENTED is unsupported, anything
// else a failure.
CaseResult FromStatus(CaseResult result, absl::string_view stage, const absl::Status& status) {
  const Outcome outcome =
      status.code() == absl::StatusCode::kUnimplemented ? Outcome::kUnsupported : Outcome::kFail;
  return Finish(std::move(result), outcome, stage,
                absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message()));
}

// What the runner needs from the model besides the import: its op types (for
// grouping) and the declared element types of graph inputs and outputs.
struct ModelInfo {
  std::string ops;  // distinct op types, in order of first use
  // The declared types of the non-initializer graph inputs and of the
  // outputs, in order.
  std::vector<onnx::TypeProto> input_types;
  std::vector<onnx::TypeProto> output_types;
};

absl::StatusOr<ModelInfo> ReadModelInfo(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  onnx::ModelProto model;
  if (!model.ParseFromIstream(&in)) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not an onnx ModelProto"));
  }
  ModelInfo info;
  std::vector<std::string> ops;
  std::set<std::string> seen;
  for (const onnx::NodeProto& node : model.graph().node()) {
    std::string op = node.domain().empty() || node.domain() == "ai.onnx"
                         ? node.op_type()
                         : absl::StrCat(node.domain(), ".", node.op_type());
    if (seen.insert(op).second) ops.push_back(op);
  }
  info.ops = absl::StrJoin(ops, ",");
  std::set<std::string> initializers;
  for (const onnx::TensorProto& t : model.graph().initializer()) initializers.insert(t.name());
  for (const onnx::ValueInfoProto& v : model.graph().input()) {
    if (initializers.count(v.name()) > 0) continue;
    info.input_types.push_back(v.type());
  }
  for (const onnx::ValueInfoProto& v : model.graph().output())
    info.output_types.push_back(v.type());
  return info;
}

// ONNX's test data stores bfloat16 tensors as uint16 (NumPy has no bfloat16;
// the cast tests of onnx 1.12 do this): a uint16 tensor where the model
// declares bfloat16 is the same bits, viewed as bfloat16.
absl::StatusOr<Tensor> AsDeclaredType(const Tensor& t, int declared_onnx_type) {
  if (declared_onnx_type != onnx::TensorProto::BFLOAT16 || t->dtype() != DataType::UInt(16)) {
    return t;
  }
  return t.CreateView(t->shape(), DataType::BFloat16());
}

// The element type of a declared tensor type (0 for any other type).
int TensorElemType(const onnx::TypeProto& type) {
  return type.has_tensor_type() ? type.tensor_type().elem_type() : 0;
}

absl::StatusOr<Value> ValueFromTensor(const onnx::TensorProto& proto,
                                      const onnx::TypeProto& declared) {
  absl::StatusOr<Tensor> t = compiler::onnx_frontend::TensorFromProto(proto, "");
  if (t.ok()) t = AsDeclaredType(*t, TensorElemType(declared));
  if (!t.ok()) return t.status();
  return Value(*t);
}

// A sequence as the VM holds one: a Tuple of its tensors.
absl::StatusOr<Value> ValueFromSequence(const onnx::SequenceProto& seq,
                                        const onnx::TypeProto& declared) {
  if (seq.elem_type() != onnx::SequenceProto::TENSOR && seq.tensor_values_size() == 0 &&
      seq.elem_type() != onnx::SequenceProto::UNDEFINED) {
    return absl::UnimplementedError("a sequence of anything but tensors");
  }
  const onnx::TypeProto& elem = declared.sequence_type().elem_type();
  std::vector<Value> fields;
  for (const onnx::TensorProto& t : seq.tensor_values()) {
    absl::StatusOr<Value> v = ValueFromTensor(t, elem);
    if (!v.ok()) return v.status();
    fields.push_back(*v);
  }
  return MakeTuple(std::move(fields));
}

// A data file as the value `declared` says it holds: a TensorProto, a
// SequenceProto (a Tuple) or an OptionalProto (None when empty).
absl::StatusOr<Value> ReadValueFile(const std::string& file, const onnx::TypeProto& declared) {
  if (declared.has_tensor_type() || declared.value_case() == onnx::TypeProto::VALUE_NOT_SET) {
    absl::StatusOr<Tensor> t = ReadTensorProtoFile(file);
    if (t.ok()) t = AsDeclaredType(*t, TensorElemType(declared));
    if (!t.ok()) return t.status();
    return Value(*t);
  }
  std::ifstream in(file, std::ios::binary);
  if (declared.has_sequence_type()) {
    onnx::SequenceProto seq;
    if (!in || !seq.ParseFromIstream(&in)) {
      return absl::InvalidArgumentError("not an onnx SequenceProto");
    }
    return ValueFromSequence(seq, declared);
  }
  if (declared.has_optional_type()) {
    onnx::OptionalProto opt;
    if (!in || !opt.ParseFromIstream(&in)) {
      return absl::InvalidArgumentError("not an onnx OptionalProto");
    }
    const onnx::TypeProto& elem = declared.optional_type().elem_type();
    if (opt.has_tensor_value()) return ValueFromTensor(opt.tensor_value(), elem);
    if (opt.has_sequence_value()) return ValueFromSequence(opt.sequence_value(), elem);
    if (opt.elem_type() == onnx::OptionalProto::UNDEFINED ||
        opt.elem_type() == onnx::OptionalProto::TENSOR ||
        opt.elem_type() == onnx::OptionalProto::SEQUENCE) {
      return Value();  // empty
    }
    return absl::UnimplementedError("an optional of anything but a tensor or a sequence");
  }
  return absl::UnimplementedError("a value that is not a tensor, a sequence or an optional");
}

// input_0.pb, input_1.pb, ... (or output_N.pb) while they exist.
std::vector<std::string> NumberedFiles(const fs::path& dir, absl::string_view prefix) {
  std::vector<std::string> files;
  for (int i = 0;; ++i) {
    fs::path p = dir / absl::StrCat(prefix, "_", i, ".pb");
    std::error_code ec;
    if (!fs::exists(p, ec)) break;
    files.push_back(p.string());
  }
  return files;
}

std::vector<fs::path> DataSets(const fs::path& dir) {
  std::vector<fs::path> sets;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) {
      sets.push_back(e.path());
    }
  }
  std::sort(sets.begin(), sets.end());
  return sets;
}

// The VM a case runs on: local, or a RemoteVM with the session that owns it.
struct CaseVm {
  std::unique_ptr<client::RemoteSession> session;  // remote only; outlives vm
  std::unique_ptr<vm::VirtualMachine> vm;
};

absl::StatusOr<CaseVm> MakeVm(const Ref<vm::Executable>& exec, const CaseOptions& options) {
  CaseVm out;
  if (options.remote_target.empty()) {
    absl::StatusOr<std::unique_ptr<vm::LocalVirtualMachine>> local =
        vm::LocalVirtualMachine::Create(exec, {options.device});
    if (!local.ok()) return local.status();
    out.vm = std::move(*local);
    return out;
  }
  client::ConnectOptions connect;
  connect.client_name = "tether-conformance";
  connect.auth_token = options.remote_token;
  absl::StatusOr<std::unique_ptr<client::RemoteSession>> session =
      client::RemoteSession::Connect(options.remote_target, connect);
  if (!session.ok()) return session.status();
  out.session = std::move(*session);
  absl::StatusOr<std::string> sha = out.session->UploadModule(exec->SaveToBytes());
  if (!sha.ok()) return sha.status();
  absl::StatusOr<std::unique_ptr<client::RemoteVM>> remote =
      client::RemoteVM::Create(out.session.get(), *sha, {options.device});
  if (!remote.ok()) return remote.status();
  out.vm = std::move(*remote);
  return out;
}

// The outputs of main as a list: the fields of its tuple when the graph has
// several outputs, else the one value (which may itself be a sequence).
std::vector<Value> FlattenOutputs(const Value& value, size_t num_outputs) {
  if (num_outputs == 1 || !value.is_tuple()) return {value};
  return value.AsRef<TupleObj>()->fields;
}

std::string Describe(const Value& v) {
  if (v.is_none()) return "an empty optional";
  if (v.is_tuple()) {
    return absl::StrCat("a sequence of ", v.AsRef<TupleObj>()->fields.size(), " tensors");
  }
  return absl::StrCat("a ", v.TypeName());
}

// "" when `got` matches `want`: tensors within the dtype's tolerance,
// sequences element by element, an empty optional with an empty one; else
// what differs.
absl::StatusOr<std::string> Mismatch(const Value& want, const Value& got) {
  if (want.is_none() || want.is_tuple()) {
    if (want.is_none() != got.is_none() || want.is_tuple() != got.is_tuple()) {
      return absl::StrCat("main returned ", Describe(got), ", expected ", Describe(want));
    }
    if (want.is_none()) return std::string();
    const std::vector<Value>& w = want.AsRef<TupleObj>()->fields;
    const std::vector<Value>& g = got.AsRef<TupleObj>()->fields;
    if (w.size() != g.size()) {
      return absl::StrCat("main returned ", Describe(got), ", expected ", Describe(want));
    }
    for (size_t k = 0; k < w.size(); ++k) {
      absl::StatusOr<std::string> m = Mismatch(w[k], g[k]);
      if (!m.ok() || !m->empty()) {
        if (!m.ok()) return m;
        return absl::StrCat("sequence element ", k, ": ", *m);
      }
    }
    return std::string();
  }
  if (!got.is_tensor()) {
    return absl::StrCat("main returned ", Describe(got), ", expected a tensor");
  }
  Tensor expected(want.AsRef<TensorObj>());
  Tensor actual(got.AsRef<TensorObj>());
  if (actual->device().type != kDLCPU) {
    absl::StatusOr<Tensor> host = actual.CopyTo(Device::Cpu());
    if (!host.ok()) return host.status();
    actual = *host;
  }
  Comparison cmp;
  absl::Status s = CompareTensors(expected, actual, ToleranceFor(expected->dtype()), &cmp);
  if (!s.ok()) return s;
  return cmp.match ? std::string() : cmp.detail;
}

// Runs main on one data set and compares its outputs. `arg_inputs` are the
// indices of the data set's input files main takes (all of them, unless some
// were bound as constants). nullopt when every output matches; otherwise the
// failed result.
std::optional<CaseResult> RunDataSet(const CaseResult& base, const ModelInfo& info,
                                     const fs::path& set,
                                     const compiler::onnx_frontend::ImportedModel& imported,
                                     const std::vector<size_t>& arg_inputs,
                                     vm::VirtualMachine* vm) {
  const std::string set_name = set.filename().string();
  std::vector<std::string> input_files = NumberedFiles(set, "input");
  std::vector<std::string> output_files = NumberedFiles(set, "output");
  if (input_files.size() != info.input_types.size()) {
    return Finish(base, Outcome::kFail, "data",
                  absl::StrCat(set_name, " has ", input_files.size(), " inputs, the graph has ",
                               info.input_types.size()));
  }
  if (arg_inputs.size() != imported.input_names.size()) {
    return Finish(base, Outcome::kFail, "data",
                  absl::StrCat(set_name, ": main takes ", imported.input_names.size(), " inputs (",
                               absl::StrJoin(imported.input_names, ", "), "), the data set gives ",
                               arg_inputs.size()));
  }
  std::vector<Value> args;
  for (size_t i : arg_inputs) {
    const std::string& file = input_files[i];
    absl::StatusOr<Value> v = ReadValueFile(file, info.input_types[i]);
    if (!v.ok()) {
      return FromStatus(
          base, "data",
          absl::Status(v.status().code(), absl::StrCat(fs::path(file).filename().string(), ": ",
                                                       v.status().message())));
    }
    args.push_back(*v);
  }
  // As a TVM user runs a model on a device: set_input copies the inputs to
  // the VM's device (a direct call never moves its arguments), then
  // invoke_stateful and get_outputs.
  absl::Status ran = vm->SetInput("main", args);
  if (ran.ok()) ran = vm->InvokeStateful("main");
  absl::StatusOr<Value> out = ran.ok() ? vm->GetOutputs("main") : absl::StatusOr<Value>(ran);
  if (!out.ok()) {
    return FromStatus(
        base, "run",
        absl::Status(out.status().code(), absl::StrCat(set_name, ": ", out.status().message())));
  }
  std::vector<Value> outputs = FlattenOutputs(*out, output_files.size());
  if (outputs.size() != output_files.size()) {
    return Finish(base, Outcome::kFail, "compare",
                  absl::StrCat(set_name, ": main returned ", outputs.size(), " outputs, expected ",
                               output_files.size()));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string label = absl::StrCat(
        set_name, " output ", i,
        i < imported.output_names.size() ? absl::StrCat(" (", imported.output_names[i], ")") : "");
    absl::StatusOr<Value> want = ReadValueFile(
        output_files[i], i < info.output_types.size() ? info.output_types[i] : onnx::TypeProto());
    if (!want.ok()) {
      return FromStatus(
          base, "data",
          absl::Status(want.status().code(), absl::StrCat(label, ": ", want.status().message())));
    }
    absl::StatusOr<std::string> mismatch = Mismatch(*want, outputs[i]);
    if (!mismatch.ok()) {
      return FromStatus(base, "compare",
                        absl::Status(mismatch.status().code(),
                                     absl::StrCat(label, ": ", mismatch.status().message())));
    }
    if (!mismatch->empty()) {
      return Finish(base, Outcome::kFail, "compare", absl::StrCat(label, ": ", *mismatch));
    }
  }
  return std::nullopt;
}

absl::StatusOr<Ref<vm::Executable>> BuildModel(
    const compiler::onnx_frontend::ImportedModel& imported, const CaseOptions& options) {
  compiler::BuildOptions build_options;
  build_options.pipeline = options.pipeline;
  build_options.target = options.cpu_target;
  if (options.device.type == kDLCUDA) {
    build_options.target =
        options.cuda_target.empty() ? CudaTarget(options.device) : options.cuda_target;
  }
  if (options.simulate_gpu_threads > 0) {
    build_options.target = "cuda";
    build_options.simulate_gpu_threads = options.simulate_gpu_threads;
  }
  return compiler::Build(imported.module, build_options);
}

// Whether an import error is the importer asking for a value it can only use
// when known at import time (a shape, axes, a count) that the model feeds
// from a graph input.
bool NeedsConstantInputs(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnimplemented &&
         absl::StrContains(status.message(), "must be known at import time");
}

// The model with every integer or float graph input of rank 0 or 1 (what
// shapes, axes, counts, scales and bounds look like) turned into an
// initializer holding that input's value from `set`. Returns the serialized model, the names
// bound, and the indices of the inputs that stay inputs.
struct BoundModel {
  std::string bytes;
  std::vector<std::string> bound;
  std::vector<size_t> remaining;
};

absl::StatusOr<BoundModel> BindShapeInputs(const std::string& model_path, const fs::path& set) {
  std::ifstream in(model_path, std::ios::binary);
  onnx::ModelProto model;
  if (!in || !model.ParseFromIstream(&in)) {
    return absl::InvalidArgumentError(absl::StrCat(model_path, " is not an onnx ModelProto"));
  }
  std::set<std::string> initializers;
  for (const onnx::TensorProto& t : model.graph().initializer()) initializers.insert(t.name());
  std::vector<std::string> input_files = NumberedFiles(set, "input");
  BoundModel out;
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> kept;
  size_t index = 0;  // among non-initializer inputs
  for (const onnx::ValueInfoProto& v : model.graph().input()) {
    if (initializers.count(v.name()) > 0) {
      *kept.Add() = v;
      continue;
    }
    const int type = v.type().has_tensor_type() ? v.type().tensor_type().elem_type() : 0;
    const bool bindable = type == onnx::TensorProto::INT64 || type == onnx::TensorProto::INT32 ||
                          type == onnx::TensorProto::FLOAT || type == onnx::TensorProto::DOUBLE;
    if (bindable && index < input_files.size()) {
      std::ifstream data(input_files[index], std::ios::binary);
      onnx::TensorProto value;
      if (!data || !value.ParseFromIstream(&data)) {
        return absl::InvalidArgumentError(
            absl::StrCat(input_files[index], " is not an onnx TensorProto"));
      }
      if (value.dims_size() > 1) {  // data, not a shape, axes, scales or count: stays an input
        *kept.Add() = v;
        out.remaining.push_back(index++);
        continue;
      }
      value.set_name(v.name());
      *model.mutable_graph()->add_initializer() = std::move(value);
      out.bound.push_back(v.name());
    } else {
      *kept.Add() = v;
      out.remaining.push_back(index);
    }
    ++index;
  }
  model.mutable_graph()->mutable_input()->Swap(&kept);
  if (!model.SerializeToString(&out.bytes)) {
    return absl::InternalError("cannot serialize the model with bound inputs");
  }
  return out;
}

// The import needed input values at import time: imports and builds the
// model once per data set with its shape inputs bound as constants (the
// values differ between data sets), runs and compares. A pass says which
// inputs were bound.
CaseResult RunWithBoundInputs(CaseResult result, const ModelInfo& info, const fs::path& dir,
                              const std::vector<fs::path>& sets, const CaseOptions& options,
                              const absl::Status& first_error) {
  const std::string model_path = (dir / "model.onnx").string();
  std::vector<std::string> bound_names;
  for (const fs::path& set : sets) {
    Stopwatch compile_clock;
    absl::StatusOr<BoundModel> bound = BindShapeInputs(model_path, set);
    if (!bound.ok()) return FromStatus(std::move(result), "import", bound.status());
    if (bound->bound.empty()) return FromStatus(std::move(result), "import", first_error);
    absl::StatusOr<compiler::onnx_frontend::ImportedModel> imported =
        compiler::onnx_frontend::ImportOnnxBytes(bound->bytes, {}, dir.string());
    if (!imported.ok()) {
      result.compile_seconds += compile_clock.Seconds();
      return FromStatus(std::move(result), "import", imported.status());
    }
    absl::StatusOr<Ref<vm::Executable>> exec = BuildModel(*imported, options);
    result.compile_seconds += compile_clock.Seconds();
    if (!exec.ok()) return FromStatus(std::move(result), "build", exec.status());
    Stopwatch run_clock;
    absl::StatusOr<CaseVm> vm = MakeVm(*exec, options);
    if (!vm.ok()) return FromStatus(std::move(result), "run", vm.status());
    std::optional<CaseResult> failed =
        RunDataSet(result, info, set, *imported, bound->remaining, vm->vm.get());
    result.run_seconds += run_clock.Seconds();
    if (failed) return std::move(*failed);
    bound_names = bound->bound;
  }
  result.outcome = Outcome::kPass;
  result.bound_inputs = absl::StrJoin(bound_names, ",");
  result.reason = absl::StrCat("shape inputs bound as constants: ", result.bound_inputs);
  return result;
}

}  // namespace

// The target for cases on the GPU `device`: its own architecture, so the
// suite checks the code it gets (bfloat16 tensor cores and cp.async from
// sm_80), or the three common images when the driver does not say.
std::string CudaTarget(Device device) {
  absl::StatusOr<std::string> target = compiler::CudaTargetForDevice(device);
  return target.ok() ? *target : std::string("cuda -arch=sm_75,sm_80,sm_90");
}

absl::string_view OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kPass:
      return "pass";
    case Outcome::kFail:
      return "fail";
    case Outcome::kUnsupported:
      return "unsupported";
  }
  return "fail";
}

CaseResult RunCase(const CaseSpec& spec, const CaseOptions& options) {
  CaseResult result;
  const fs::path dir(spec.dir);
  const std::string model_path = (dir / "model.onnx").string();
  absl::StatusOr<ModelInfo> info = ReadModelInfo(model_path);
  if (!info.ok()) return FromStatus(std::move(result), "model", info.status());
  result.ops = info->ops;
  const std::vector<fs::path> sets = DataSets(dir);
  if (sets.empty()) {
    return Finish(std::move(result), Outcome::kFail, "data", "no test_data_set_* directory");
  }

  Stopwatch compile_clock;
  absl::StatusOr<compiler::onnx_frontend::ImportedModel> imported = ImportOnnxFile(model_path);
  if (!imported.ok()) {
    result.compile_seconds = compile_clock.Seconds();
    if (options.bind_shape_inputs && NeedsConstantInputs(imported.status())) {
      return RunWithBoundInputs(std::move(result), *info, dir, sets, options, imported.status());
    }
    return FromStatus(std::move(result), "import", imported.status());
  }
  absl::StatusOr<Ref<vm::Executable>> exec = BuildModel(*imported, options);
  result.compile_seconds = compile_clock.Seconds();
  if (!exec.ok()) return FromStatus(std::move(result), "build", exec.status());

  Stopwatch run_clock;
  absl::StatusOr<CaseVm> vm = MakeVm(*exec, options);
  if (!vm.ok()) return FromStatus(std::move(result), "run", vm.status());
  std::vector<size_t> all_inputs(imported->input_names.size());
  for (size_t i = 0; i < all_inputs.size(); ++i) all_inputs[i] = i;
  for (const fs::path& set : sets) {
    std::optional<CaseResult> failed =
        RunDataSet(result, *info, set, *imported, all_inputs, vm->vm.get());
    if (failed) return std::move(*failed);
  }
  result.run_seconds = run_clock.Seconds();
  result.outcome = Outcome::kPass;
  return result;
}

std::vector<CaseSpec> ListCases(const std::string& suite_dir, const std::string& suite) {
  std::vector<CaseSpec> cases;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(suite_dir, ec)) {
    std::error_code ec2;
    if (!e.is_directory(ec2) || !fs::exists(e.path() / "model.onnx", ec2)) continue;
    cases.push_back({suite, e.path().filename().string(), e.path().string()});
  }
  std::sort(cases.begin(), cases.end(),
            [](const CaseSpec& a, const CaseSpec& b) { return a.name < b.name; });
  return cases;
}

}  // namespace tether::conformance
