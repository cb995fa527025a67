// `tether info`, `tether run`, `tether bench`, `tether profile`: the commands
// that drive a daemon. With --remote they talk to a tetherd; without it they
// start an embedded daemon in this process, on a private unix socket with a
// random token, and use the very same gRPC path, so a local run measures what
// a remote one would.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cli/commands.h"
#include "client/cli/embedded_daemon.h"
#include "client/cli/kernel_timing.h"
#include "client/cli/result_output.h"
#include "client/cli/stream_run.h"
#include "client/npy.h"
#include "client/remote_session.h"
#include "client/remote_vm.h"
#include "client/results/chrome_trace.h"
#include "proto/codec/auth_token.h"
#include "proto/codec/sha256.h"
#include "runtime/core/file.h"
#include "runtime/core/scalar.h"
#include "runtime/module/module.h"
#include "runtime/vm/executable.h"
#include "runtime/vm/virtual_machine.h"

namespace tether::cli {
namespace {

struct Options {
  std::string file;  // the executable
  std::string remote;
  // TLS and token options of --remote connections.
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_server_name;
  std::string token_file;
  bool isolate = false;            // the session in its own worker process on the daemon
  bool concurrent_timing = false;  // measure beside other sessions' calls
  Device device = Device::Cpu();
  std::string target;                  // for .rx/.onnx models; empty: from the device
  std::string exec_mode = "bytecode";  // for .rx/.onnx models
  std::string function = "main";
  std::string memory_cfg;
  // --params FILE: a param file the daemon binds into the VM (weights on
  // the device; the executable keeps them as parameters of its functions).
  std::string params;
  std::vector<std::pair<std::string, std::string>> inputs;  // name -> .npy path
  // run --stream NAME=@CHUNKS.npy (name -> path) and --carry OUT=IN.
  std::vector<std::pair<std::string, std::string>> streams;
  std::vector<std::pair<std::string, std::string>> carries;
  bool compare_naive = false;
  std::map<std::string, std::pair<std::vector<int64_t>, DataType>> shapes;
  bool random_inputs = false;
  std::string output_dir;
  profiling::TimeEvaluatorOptions timing;
  bool json = false;
  std::string format = "table";
  int threads = 0;  // the VM's kernel threads on the daemon; 0: its default
  bool quiet = false;
  bool no_cache = false;
  uint64_t seed = 42;  // of --random-inputs
  // Results a CI can judge (docs/design/results.md).
  std::string baseline;                // bench: a stored `bench --json` result
  double regression_threshold = 5.0;   // percent
  std::string junit;                   // run, bench: write JUnit XML here
  std::set<std::string> timing_flags;  // the time_evaluator options given on the command line
  std::string kernel;                  // bench --kernel: time this kernel alone
  int top = 0;                         // profile --top: name the N slowest kernels
  FarmFlags farm;                      // --farm URL --key KEY: a farm device for this command
  int64_t fencing_token = 0;           // --fencing-token: a hold from `tether farm acquire`
};

#ifndef TETHER_VERSION_STRING
#define TETHER_VERSION_STRING "0.0.0"
#endif

constexpr char kSecurityHelp[] =
    "  --tls-ca FILE          the CA of the daemon's certificate (enables TLS; with --remote)\n"
    "  --tls-cert FILE --tls-key FILE  a client certificate (mutual TLS)\n"
    "  --tls-server-name NAME the name to check the daemon's certificate against\n"
    "  --token-file FILE      send the bearer token in FILE (trimmed) on every call; without\n"
    "                         it, a loopback or unix: --remote gets this user's default\n"
    "                         token ($TETHER_TOKEN_FILE, else ~/.config/tether/token)\n"
    "  --isolate              run the session in its own worker process on the daemon, so a\n"
    "                         crash or a GPU fault ends only this session (with --remote)\n"
    "  --fencing-token N      the token of a hold from `tether farm acquire` on --remote's\n"
    "                         farm device (a farm daemon refuses work without the current one)\n"
    "device farm: instead of --remote, acquire a device for this command and release it after\n";

constexpr char kCommonHelp[] =
    "  --remote HOST:PORT     a running tetherd (default: an embedded daemon on a private socket)\n"
    "  --device DEV           cpu:0 (default), cuda:0, ...\n"
    "  --target TARGET        what a .rx/.onnx model is compiled for (default: the daemon's\n"
    "                         CPU as its handshake reports it, \"cuda -arch=sm_XY\" from its GPU)\n"
    "  --exec-mode MODE       bytecode (default) or compiled: a .rx/.onnx model's Relax\n"
    "                         functions compiled to native code (no interpreter in the loop)\n"
    "  --function NAME        the function to run (default main)\n"
    "  --memory-cfg CFG       naive | pooled | cpu:0=naive,...\n"
    "  --params FILE          weights (TVM's param dict, from `tether compile\n"
    "                         --separate-params`) kept on the daemon and bound to the\n"
    "                         parameters they name; uploaded only when the daemon lacks them\n"
    "  --input NAME=@FILE     a .npy input for parameter NAME (repeatable); an ONNX model's\n"
    "                         free dims of NAME are compiled for the file's shape\n"
    "  --random-inputs        fill inputs not given by --input with random values on the device\n"
    "  --seed N               the seed of --random-inputs (default 42)\n"
    "  --shape NAME=2x32[:dtype]  the shape (and dtype, default float32) of a random input;\n"
    "                         for an ONNX model, also fixes the input's dynamic dims\n"
    "  --threads N            threads the model's kernels use on the daemon (default: its\n"
    "                         TETHER_NUM_THREADS, else its core count)\n"
    "  --quiet                no progress lines for slow compiles and uploads\n"
    "  --no-cache             compile an ONNX model even when the compile cache has it\n";

// -1: go on; otherwise the exit code.
int ParseArgs(const std::string& command, const std::vector<std::string>& args, bool want_file,
              const char* extra_help, Options* o) {
  auto usage = [&](FILE* out) {
    std::fprintf(out, "usage: tether %s %s[options]\n%s%s%s%s", command.c_str(),
                 want_file ? "EXEC|MODEL.rx|MODEL.onnx " : "",
                 want_file
                     ? kCommonHelp
                     : "  --remote HOST:PORT     a running tetherd (default: an embedded daemon)\n",
                 kSecurityHelp, kFarmFlagsHelp, extra_help);
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto next = [&]() -> const std::string* {
      if (i + 1 >= args.size()) {
        std::fprintf(stderr, "tether %s: %s needs a value\n", command.c_str(), a.c_str());
        return nullptr;
      }
      return &args[++i];
    };
    auto int_flag = [&](int* out) -> bool {
      const std::string* v = next();
      if (!v || !absl::SimpleAtoi(*v, out) || *out < 0) {
        if (v)
          std::fprintf(stderr, "tether %s: %s needs a non-negative integer\n", command.c_str(),
                       a.c_str());
        return false;
      }
      return true;
    };
    if (int farm = ParseFarmFlag(command, args, &i, &o->farm); farm != 0) {
      if (farm < 0) return 2;
      continue;
    }
    if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    } else if (a == "--fencing-token") {
      const std::string* v = next();
      if (!v) return 2;
      if (!absl::SimpleAtoi(*v, &o->fencing_token) || o->fencing_token <= 0) {
        std::fprintf(stderr, "tether %s: --fencing-token wants a positive integer, got \"%s\"\n",
                     command.c_str(), v->c_str());
        return 2;
      }
    } else if (a == "--remote") {
      const std::string* v = next();
      if (!v) return 2;
      o->remote = *v;
    } else if (a == "--isolate") {
      o->isolate = true;
    } else if (a == "--concurrent-timing") {
      o->concurrent_timing = true;
    } else if (a == "--tls-ca" || a == "--tls-cert" || a == "--tls-key" ||
               a == "--tls-server-name" || a == "--token-file") {
      const std::string* v = next();
      if (!v) return 2;
      std::string* field = a == "--tls-ca"            ? &o->tls_ca
                           : a == "--tls-cert"        ? &o->tls_cert
                           : a == "--tls-key"         ? &o->tls_key
                           : a == "--tls-server-name" ? &o->tls_server_name
                                                      : &o->token_file;
      *field = *v;
    } else if (a == "--device") {
      const std::string* v = next();
      if (!v) return 2;
      auto d = Device::Parse(*v);
      if (!d.ok()) return Fail("bad --device", d.status()) + 1;
      o->device = *d;
    } else if (a == "--target") {
      const std::string* v = next();
      if (!v) return 2;
      o->target = *v;
    } else if (a == "--exec-mode") {
      const std::string* v = next();
      if (!v) return 2;
      o->exec_mode = *v;
    } else if (a == "--function") {
      const std::string* v = next();
      if (!v) return 2;
      o->function = *v;
    } else if (a == "--memory-cfg") {
      const std::string* v = next();
      if (!v) return 2;
      o->memory_cfg = *v;
    } else if (a == "--input") {
      const std::string* v = next();
      if (!v) return 2;
      size_t eq = v->find('=');
      if (eq == std::string::npos || eq == 0) {
        std::fprintf(stderr, "tether %s: --input wants NAME=@FILE.npy, got \"%s\"\n",
                     command.c_str(), v->c_str());
        return 2;
      }
      std::string path = v->substr(eq + 1);
      if (!path.empty() && path[0] == '@') path = path.substr(1);
      o->inputs.emplace_back(v->substr(0, eq), path);
    } else if (a == "--stream" || a == "--carry") {
      const std::string* v = next();
      if (!v) return 2;
      const size_t eq = v->find('=');
      if (command != "run") {
        std::fprintf(stderr, "tether %s: %s is for tether run\n", command.c_str(), a.c_str());
        return 2;
      }
      if (eq == std::string::npos || eq == 0 || eq + 1 == v->size()) {
        std::fprintf(stderr, "tether %s: %s wants %s, got \"%s\"\n", command.c_str(), a.c_str(),
                     a == "--stream" ? "NAME=@CHUNKS.npy" : "OUTPUT=INPUT", v->c_str());
        return 2;
      }
      std::string value = v->substr(eq + 1);
      if (a == "--stream") {
        if (value[0] == '@') value = value.substr(1);
        o->streams.emplace_back(v->substr(0, eq), value);
      } else {
        o->carries.emplace_back(v->substr(0, eq), value);
      }
    } else if (a == "--compare-naive") {
      o->compare_naive = true;
    } else if (a == "--shape") {
      const std::string* v = next();
      if (!v) return 2;
      size_t eq = v->find('=');
      std::string spec = eq == std::string::npos ? "" : v->substr(eq + 1);
      DataType dtype = DataType::Float(32);
      if (size_t colon = spec.find(':'); colon != std::string::npos) {
        auto t = DataType::Parse(spec.substr(colon + 1));
        if (!t.ok()) return Fail("bad --shape", t.status()) + 1;
        dtype = *t;
        spec = spec.substr(0, colon);
      }
      auto dims = ParseDims(spec);
      if (eq == std::string::npos || eq == 0 || !dims) {
        std::fprintf(stderr, "tether %s: --shape wants NAME=2x32[:dtype], got \"%s\"\n",
                     command.c_str(), v->c_str());
        return 2;
      }
      o->shapes[v->substr(0, eq)] = {*dims, dtype};
    } else if (a == "--random-inputs") {
      o->random_inputs = true;
    } else if (a == "--threads") {
      if (!int_flag(&o->threads)) return 2;
    } else if (a == "--quiet") {
      o->quiet = true;
    } else if (a == "--params") {
      const std::string* v = next();
      if (!v) return 2;
      o->params = *v;
    } else if (a == "--no-cache") {
      o->no_cache = true;
    } else if (a == "--output-dir") {
      const std::string* v = next();
      if (!v) return 2;
      o->output_dir = *v;
    } else if (a == "--number") {
      if (!int_flag(&o->timing.number)) return 2;
      o->timing_flags.insert("number");
    } else if (a == "--repeat") {
      if (!int_flag(&o->timing.repeat)) return 2;
      o->timing_flags.insert("repeat");
    } else if (a == "--min-repeat-ms") {
      if (!int_flag(&o->timing.min_repeat_ms)) return 2;
      o->timing_flags.insert("min_repeat_ms");
    } else if (a == "--cooldown-ms") {
      if (!int_flag(&o->timing.cooldown_interval_ms)) return 2;
      o->timing_flags.insert("cooldown_interval_ms");
    } else if (a == "--repeats-to-cooldown") {
      if (!int_flag(&o->timing.repeats_to_cooldown)) return 2;
      o->timing_flags.insert("repeats_to_cooldown");
    } else if (a == "--cache-flush-bytes") {
      int v = 0;
      if (!int_flag(&v)) return 2;
      o->timing.cache_flush_bytes = v;
      o->timing_flags.insert("cache_flush_bytes");
    } else if (a == "--seed") {
      const std::string* v = next();
      if (!v || !absl::SimpleAtoi(*v, &o->seed)) {
        std::fprintf(stderr, "tether %s: --seed needs a non-negative integer\n", command.c_str());
        return 2;
      }
    } else if (a == "--baseline" || a == "--junit") {
      const std::string* v = next();
      if (!v) return 2;
      (a == "--baseline" ? o->baseline : o->junit) = *v;
    } else if (a == "--regression-threshold") {
      const std::string* v = next();
      std::string text = v ? *v : "";
      if (!text.empty() && text.back() == '%') text.pop_back();
      if (!v || !absl::SimpleAtod(text, &o->regression_threshold) ||
          !(o->regression_threshold > 0) || o->regression_threshold > 1000) {
        std::fprintf(stderr,
                     "tether %s: --regression-threshold wants a percentage above 0, like 5\n",
                     command.c_str());
        return 2;
      }
    } else if (a == "--kernel") {
      const std::string* v = next();
      if (!v) return 2;
      o->kernel = *v;
    } else if (a == "--top") {
      if (!int_flag(&o->top) || o->top <= 0) {
        std::fprintf(stderr, "tether %s: --top needs a positive count\n", command.c_str());
        return 2;
      }
    } else if (a == "--json") {
      o->json = true;
    } else if (a == "--format") {
      const std::string* v = next();
      if (!v) return 2;
      if (*v != "table" && *v != "csv" && *v != "json" && *v != "chrome-trace") {
        std::fprintf(stderr, "tether %s: --format is table, csv, json or chrome-trace\n",
                     command.c_str());
        return 2;
      }
      o->format = *v;
    } else if (want_file && o->file.empty() && !a.empty() && a[0] != '-') {
      o->file = a;
    } else {
      std::fprintf(stderr, "tether %s: unexpected argument %s\n", command.c_str(), a.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (want_file && o->file.empty()) {
    usage(stderr);
    return 2;
  }
  if (!o->farm.url.empty() && !o->remote.empty()) {
    std::fprintf(stderr, "tether %s: give --remote or --farm, not both\n", command.c_str());
    return 2;
  }
  if (o->farm.url.empty() && (!o->farm.key.empty() || !o->farm.where.empty())) {
    std::fprintf(stderr, "tether %s: --key and --where need --farm etcd://HOST:PORT\n",
                 command.c_str());
    return 2;
  }
  if (!o->farm.url.empty() && o->farm.key.empty()) {
    std::fprintf(stderr, "tether %s: --farm needs --key KEY (the farm key)\n", command.c_str());
    return 2;
  }
  if (o->streams.empty() && (!o->carries.empty() || o->compare_naive)) {
    std::fprintf(stderr, "tether %s: --carry and --compare-naive go with --stream\n",
                 command.c_str());
    return 2;
  }
  if (o->fencing_token != 0 && o->remote.empty()) {
    std::fprintf(stderr,
                 "tether %s: --fencing-token goes with --remote (with --farm the token "
                 "is the acquisition's)\n",
                 command.c_str());
    return 2;
  }
  return -1;
}

// A connection: a farm device held for the command (with --farm) or an
// embedded daemon (when no --remote), and a session on it. Declared so that
// the session closes first, then the daemon, and last the farm device is
// released.
struct Connection {
  std::unique_ptr<FarmClaim> farm;
  std::unique_ptr<EmbeddedDaemon> daemon;
  std::unique_ptr<client::RemoteSession> session;
};

absl::StatusOr<Connection> Connect(const Options& o) {
  Connection c;
  std::string target = o.remote;
  client::ConnectOptions options;
  options.client_name = "tether-cli";
  if (o.isolate && o.remote.empty() && o.farm.url.empty()) {
    return absl::InvalidArgumentError("--isolate needs --remote (a tetherd to start workers)");
  }
  options.isolate = o.isolate;
  options.fencing_token = o.fencing_token;
  if (!o.farm.url.empty()) {
    TETHER_ASSIGN_OR_RETURN(c.farm, ClaimFarmDevice(o.farm));
    target = c.farm->address();
    options.fencing_token = c.farm->fencing_token();
    if (!o.quiet) {
      std::fprintf(stderr, "tether: acquired farm device %s at %s (fencing token %lld)\n",
                   c.farm->device_id().c_str(), target.c_str(),
                   static_cast<long long>(c.farm->fencing_token()));
    }
  }
  if (target.empty()) {
    TETHER_ASSIGN_OR_RETURN(c.daemon, EmbeddedDaemon::Start());
    options.auth_token = c.daemon->auth_token();
    target = c.daemon->target();
  } else {
    options.tls_ca_file = o.tls_ca;
    options.tls_cert_file = o.tls_cert;
    options.tls_key_file = o.tls_key;
    options.tls_server_name = o.tls_server_name;
    if (!o.token_file.empty()) {
      absl::StatusOr<std::string> token = rpc::ReadTokenFile(o.token_file, false);
      if (!token.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("--token-file: ", token.status().message()));
      }
      options.auth_token = std::move(*token);
    } else if (rpc::IsLocalAddress(target)) {
      // A daemon of this user on this host asks for the user's default
      // token; send it when there is one (never to another host).
      const std::string path = rpc::DefaultTokenPath();
      if (!path.empty() && ::access(path.c_str(), F_OK) == 0) {
        absl::StatusOr<std::string> token = rpc::ReadTokenFile(path, true);
        if (!token.ok()) return token.status();
        options.auth_token = std::move(*token);
      }
    }
  }
  TETHER_ASSIGN_OR_RETURN(c.session, client::RemoteSession::Connect(target, options));
  return c;
}

std::string FormatValue(const Value& v) {
  if (v.is_dtype()) return v.dtype_value().ToString();
  if (v.is_shape())
    return ShapeToString({v.AsRef<ShapeObj>()->dims.data(), v.AsRef<ShapeObj>()->dims.size()});
  if (v.is_string()) return v.string_value();
  return v.ToString();
}

}  // namespace

std::string PreviewValues(const Tensor& t) {
  std::string out = "[";
  int64_t n = std::min<int64_t>(t->NumElements(), 5);
  const char* p = static_cast<const char*>(t->element_data());
  DataType dt = t->dtype();
  for (int64_t i = 0; i < n; ++i) {
    std::string s = "?";
    DispatchScalarType(dt, [&](auto tag) {
      using T = decltype(tag);
      T v;
      std::memcpy(&v, p + i * dt.bytes(), sizeof(T));
      if constexpr (std::is_integral_v<T>) {
        s = absl::StrCat(
            static_cast<std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>(v));
      } else if constexpr (std::is_same_v<T, Bool>) {
        s = v.bits != 0 ? "1" : "0";
      } else {
        s = absl::StrFormat("%.5g", ScalarToDouble(v));
      }
    });
    absl::StrAppend(&out, i ? ", " : "", s);
  }
  absl::StrAppend(&out, t->NumElements() > n ? ", ...]" : "]");
  return out;
}

namespace {

// Loads the executable locally first: a corrupt file is reported before any
// connection is made, and the function's parameter names are known.
// An input's dims as text, a free one by its name: "N" ("?" when it has
// none), or for --shape "<N>" ("<dim2>").
std::vector<std::string> DimTexts(const ModelInput& in, bool for_shape) {
  std::vector<std::string> dims;
  for (size_t i = 0; i < in.shape.size(); ++i) {
    const std::string name = i < in.dim_names.size() ? in.dim_names[i] : "";
    if (in.shape[i] >= 0) {
      dims.push_back(absl::StrCat(in.shape[i]));
    } else if (for_shape) {
      dims.push_back(absl::StrCat("<", name.empty() ? absl::StrCat("dim", i) : name, ">"));
    } else {
      dims.push_back(name.empty() ? "?" : name);
    }
  }
  return dims;
}

// "(N, 3, H, W)".
std::string DescribeDims(const ModelInput& in) {
  return absl::StrCat("(", absl::StrJoin(DimTexts(in, false), ", "), ")");
}

// "<N>x3x<H>x<W>": what --shape needs, the free dims to fill in.
std::string ShapeTemplate(const ModelInput& in) { return absl::StrJoin(DimTexts(in, true), "x"); }

struct Prepared {
  Connection connection;
  std::unique_ptr<client::RemoteVM> vm;
  std::vector<std::string> params;
  // With --stream: what the first call takes, one per parameter (none for a
  // streamed input), the chunk files, and the ONNX model's output names.
  std::vector<Value> first_inputs;
  std::map<std::string, Tensor> chunks;
  std::vector<std::string> output_names;
  // What produced the results: filled as the model is loaded, uploaded and
  // given its inputs; the device state is added after a measurement.
  results::Provenance provenance;
};

// "float32"; the shape as a vector.
results::InputRecord InputOf(const std::string& name, std::span<const int64_t> shape,
                             DataType dtype) {
  results::InputRecord r;
  r.name = name;
  r.dtype = dtype.ToString();
  r.shape.assign(shape.begin(), shape.end());
  return r;
}

// The target a model is compiled for when --target is not given, from the
// daemon's handshake: for its CPU, RemoteSession::CpuCompileTarget; for a
// CUDA device, "cuda -arch=sm_XY" from the compute capability it reports.
absl::StatusOr<std::string> DefaultTarget(const Options& o, const client::RemoteSession& session) {
  if (o.device.type == kDLCPU) return session.CpuCompileTarget();
  if (o.device.type != kDLCUDA) {
    return absl::InvalidArgumentError(
        absl::StrCat("no compile target for ", o.device.ToString(), "; give --target"));
  }
  std::vector<std::string> names;
  for (const v1::DeviceInfo& d : session.handshake().devices()) {
    names.push_back(d.name());
    if (d.name() != o.device.ToString()) continue;
    auto it = d.attributes().find("compute_version");
    absl::StatusOr<Value> v = it == d.attributes().end() ? absl::NotFoundError("no compute_version")
                                                         : rpc::DecodeValue(it->second, {});
    if (!v.ok() || !v->is_string()) break;
    absl::StatusOr<std::string> target = CompileTargetForCuda(v->string_value());
    if (!target.ok()) break;
    return *target;
  }
  return absl::UnavailableError(absl::StrCat("the daemon has no usable ", o.device.ToString(),
                                             " (its devices: ", absl::StrJoin(names, ", "), ")"));
}

// Uploads `bytes` (the file `path`, a module or a param file) unless the
// daemon has them, and says which on stderr unless `quiet` or the daemon is
// the `embedded` one: "tether: module 3f2a1b9c0d12 (mlp.tx, 12428 bytes):
// uploaded" or "...: already on the daemon".
absl::StatusOr<std::string> UploadToDaemon(client::RemoteSession& session, absl::string_view what,
                                           const std::string& path, const std::string& bytes,
                                           bool quiet, bool embedded) {
  const uint64_t before = session.store_bytes_sent();
  std::string sha;
  {
    SlowWorkNotice notice(absl::StrFormat("uploading %s (%.1f MB)", path, bytes.size() / 1e6),
                          quiet);
    TETHER_ASSIGN_OR_RETURN(
        sha, what == "module" ? session.UploadModule(bytes) : session.UploadParams(bytes));
  }
  // What travels is news only for a daemon elsewhere (--remote, --farm).
  if (!quiet && !embedded) {
    std::fprintf(stderr, "tether: %s %s (%s, %zu bytes): %s\n", std::string(what).c_str(),
                 sha.substr(0, 12).c_str(), path.c_str(), bytes.size(),
                 session.store_bytes_sent() > before ? "uploaded" : "already on the daemon");
  }
  return sha;
}

absl::StatusOr<Prepared> Prepare(const Options& o) {
  Prepared p;
  p.provenance.timestamp = TimestampNow();
  p.provenance.model_path = o.file;
  p.provenance.function = o.function;
  p.provenance.device = o.device.ToString();
  p.provenance.client_version = TETHER_VERSION_STRING;
  p.provenance.client_host = HostName();
  {
    TETHER_ASSIGN_OR_RETURN(std::string model_bytes, ReadFileToString(o.file));
    p.provenance.model_sha256 = rpc::Sha256Hex(model_bytes);
  }
  RegisterDemoKernels();  // the embedded daemon runs demo executables too
  // A .rx or .onnx model is compiled on the fly, for --target or the device.
  ModelOptions model;
  model.target = o.target;
  if (model.target.empty() && IsModelSource(o.file)) {
    TETHER_ASSIGN_OR_RETURN(p.connection, Connect(o));
    TETHER_ASSIGN_OR_RETURN(model.target, DefaultTarget(o, *p.connection.session));
  }
  if (model.target.empty()) model.target = "llvm";
  model.exec_mode = o.exec_mode;
  model.quiet = o.quiet;
  model.use_cache = !o.no_cache;
  // A model compiled here for --params keeps its weights as parameters.
  model.separate_params = !o.params.empty();
  for (const auto& [name, spec] : o.shapes) model.shapes[name] = spec.first;
  // An ONNX model's declared inputs (shapes, dtypes), read when inputs are
  // given or made up (it parses the whole model again).
  std::map<std::string, ModelInput> model_inputs;
  if (!o.inputs.empty() || o.random_inputs || !o.streams.empty()) {
    TETHER_ASSIGN_OR_RETURN(model_inputs, ModelInputShapes(o.file));
  }
  if (!o.streams.empty()) {
    TETHER_ASSIGN_OR_RETURN(p.output_names, ModelOutputNames(o.file));
  }
  auto has_free_dims = [](const ModelInput& in) {
    return std::find(in.shape.begin(), in.shape.end(), -1) != in.shape.end();
  };
  // The .npy inputs, read first: an ONNX input's free dims are bound from the
  // shape of the file given for it (--shape decides where given), and the
  // compile cache keys on them.
  std::map<std::string, Tensor> files;
  for (const auto& [name, path] : o.inputs) {
    TETHER_ASSIGN_OR_RETURN(files[name], client::ReadNpyFile(path));
    auto declared = model_inputs.find(name);
    if (declared != model_inputs.end() && has_free_dims(declared->second) &&
        !o.shapes.contains(name)) {
      const std::span<const int64_t> shape = files[name]->shape();
      model.shapes[name] = std::vector<int64_t>(shape.begin(), shape.end());
    }
  }
  // The chunk files: the first axis counts the chunks, the rest is one
  // chunk's shape, which must fit the input (its free dims are bound by it).
  for (const auto& [name, path] : o.streams) {
    if (files.contains(name) || p.chunks.contains(name)) {
      return ValueError("input ", name, " is given twice (--stream and --input, or twice)");
    }
    TETHER_ASSIGN_OR_RETURN(Tensor chunks, client::ReadNpyFile(path));
    if (chunks->ndim() == 0 || chunks->shape()[0] == 0) {
      return ValueError("--stream ", name, "=@", path, ": the first axis counts the chunks, but ",
                        "the file holds ", ShapeToString(chunks->shape()));
    }
    const std::vector<int64_t> chunk(chunks->shape().begin() + 1, chunks->shape().end());
    auto declared = model_inputs.find(name);
    if (declared != model_inputs.end()) {
      const ModelInput& in = declared->second;
      bool fits = in.shape.size() == chunk.size() && in.dtype == chunks->dtype();
      for (size_t i = 0; fits && i < chunk.size(); ++i) {
        fits = in.shape[i] < 0 || in.shape[i] == chunk[i];
      }
      if (!fits) {
        return ValueError("--stream ", name, "=@", path, ": each chunk is ",
                          chunks->dtype().ToString(), " (", absl::StrJoin(chunk, ", "),
                          "), but input ", name, " is ", in.dtype.ToString(), " ",
                          DescribeDims(in));
      }
      if (has_free_dims(in) && !o.shapes.contains(name)) model.shapes[name] = chunk;
    }
    p.chunks[name] = std::move(chunks);
  }
  // A random input with free dims and no --shape is named before anything
  // is compiled.
  if (o.random_inputs) {
    for (const auto& [name, in] : model_inputs) {
      if (files.contains(name) || p.chunks.contains(name) || o.shapes.contains(name) ||
          !has_free_dims(in)) {
        continue;
      }
      return ValueError("--random-inputs needs the shape of ", name, ", whose dims ",
                        DescribeDims(in), " are not all fixed: give --shape ", name, "=",
                        ShapeTemplate(in), " (or --input ", name, "=@FILE.npy)");
    }
  }
  TETHER_ASSIGN_OR_RETURN(std::string bytes, LoadOrCompileExecutable(o.file, model));
  if (IsModelSource(o.file)) {
    p.provenance.compiler_version = CompilerVersion();
    p.provenance.compile_target = model.target;
  }
  TETHER_ASSIGN_OR_RETURN(Ref<vm::Executable> exec, vm::Executable::LoadFromBytes(bytes));
  auto it = exec->function_map.find(o.function);
  if (it == exec->function_map.end() || !vm::IsVMFunction(exec->functions[it->second].kind)) {
    return NotFoundError(o.file, " has no function ", o.function);
  }
  const vm::FunctionInfo& info = exec->functions[it->second];
  p.params = info.param_names;
  if (p.params.empty()) {
    for (int64_t i = 0; i < info.num_args; ++i) p.params.push_back(absl::StrCat("arg", i));
  }
  if (!p.connection.session) {
    TETHER_ASSIGN_OR_RETURN(p.connection, Connect(o));
  }
  client::RemoteSession& session = *p.connection.session;
  const bool embedded = p.connection.daemon != nullptr;
  TETHER_ASSIGN_OR_RETURN(std::string sha,
                          UploadToDaemon(session, "module", o.file, bytes, o.quiet, embedded));
  p.provenance.module_sha256 = sha;
  std::string params_sha;
  if (!o.params.empty()) {
    TETHER_ASSIGN_OR_RETURN(std::string param_bytes, ReadFileToString(o.params));
    TETHER_ASSIGN_OR_RETURN(params_sha, UploadToDaemon(session, "param file", o.params, param_bytes,
                                                       o.quiet, embedded));
  }
  if (const FarmClaim* farm = p.connection.farm.get()) {
    AddDaemonProvenance(*p.connection.session, farm->address(), &p.provenance);
    p.provenance.farm_key = o.farm.key;
    p.provenance.farm_device = farm->device_id();
    p.provenance.fencing_token = farm->fencing_token();
  } else {
    AddDaemonProvenance(*p.connection.session, o.remote, &p.provenance);
    p.provenance.fencing_token = o.fencing_token;
  }
  client::RemoteVmOptions vm_options;
  vm_options.num_threads = o.threads;
  vm_options.concurrent_timing = o.concurrent_timing;
  vm_options.params_sha256 = params_sha;
  TETHER_ASSIGN_OR_RETURN(p.vm, client::RemoteVM::Create(p.connection.session.get(), sha,
                                                         {o.device}, o.memory_cfg, vm_options));
  if (!params_sha.empty()) {
    // The weights fill some parameters; the caller gives the others.
    TETHER_ASSIGN_OR_RETURN(p.params, p.vm->GetFunctionParamNames(o.function));
  }

  // Inputs: .npy files by name, random ones filled on the device.
  std::map<std::string, Value> given;
  auto check_param = [&](const std::string& name) -> absl::Status {
    if (std::find(p.params.begin(), p.params.end(), name) == p.params.end()) {
      return ValueError(o.function, " has no parameter named ", name, "; parameters are ",
                        absl::StrJoin(p.params, ", "));
    }
    return absl::OkStatus();
  };
  for (const auto& [name, tensor] : files) {
    TETHER_RETURN_IF_ERROR(check_param(name));
    given[name] = Value(tensor);
  }
  for (const auto& [name, chunks] : p.chunks) TETHER_RETURN_IF_ERROR(check_param(name));
  std::set<std::string> carried;
  for (const auto& [out, in] : o.carries) {
    if (absl::Status s = check_param(in); !s.ok()) {
      return ValueError("--carry ", out, "=", in, ": ", s.message());
    }
    if (p.chunks.contains(in)) {
      return ValueError("--carry ", out, "=", in, ": input ", in, " is streamed (--stream)");
    }
    carried.insert(in);
  }
  std::vector<Value> args;
  for (const std::string& name : p.params) {
    if (auto c = p.chunks.find(name); c != p.chunks.end()) {
      results::InputRecord in = InputOf(name, c->second->shape(), c->second->dtype());
      in.source = "stream";
      in.path = std::find_if(o.streams.begin(), o.streams.end(), [&](const auto& i) {
                  return i.first == name;
                })->second;
      p.provenance.inputs.push_back(std::move(in));
      args.push_back(Value());
      continue;
    }
    if (auto g = given.find(name); g != given.end()) {
      const Tensor& t = files[name];
      results::InputRecord in = InputOf(name, t->shape(), t->dtype());
      in.source = "file";
      in.path = std::find_if(o.inputs.begin(), o.inputs.end(), [&](const auto& i) {
                  return i.first == name;
                })->second;
      in.sha256 = rpc::Sha256Hex(absl::string_view(static_cast<const char*>(t->element_data()),
                                                   static_cast<size_t>(t->NumBytes())));
      p.provenance.inputs.push_back(std::move(in));
      args.push_back(g->second);
      continue;
    }
    if (carried.contains(name)) {
      // A carried input's first value: zeros of its declared shape.
      auto declared = model_inputs.find(name);
      if (declared == model_inputs.end() || has_free_dims(declared->second)) {
        return ValueError(
            "carried input ", name, " needs a first value: give --input ", name, "=@FILE.npy (",
            declared == model_inputs.end()
                ? std::string("the executable does not declare its shape")
                : absl::StrCat("its dims ", DescribeDims(declared->second), " are not all fixed"),
            ", so it cannot start as zeros)");
      }
      const ModelInput& in = declared->second;
      TETHER_ASSIGN_OR_RETURN(Tensor zeros, Tensor::Empty(in.shape, in.dtype, Device::Cpu()));
      std::memset(zeros->element_data(), 0, static_cast<size_t>(zeros->NumBytes()));
      results::InputRecord record = InputOf(name, in.shape, in.dtype);
      record.source = "zeros";
      p.provenance.inputs.push_back(std::move(record));
      args.push_back(Value(zeros));
      continue;
    }
    if (!o.random_inputs) {
      return ValueError("no input for parameter ", name, " of ", o.function, "; give --input ",
                        name, "=@FILE.npy or --random-inputs with --shape ", name, "=DIMS");
    }
    // The shape: --shape, else the model's own when it has no dynamic dim.
    std::pair<std::vector<int64_t>, DataType> spec;
    auto declared = model_inputs.find(name);
    if (auto s = o.shapes.find(name); s != o.shapes.end()) {
      spec = s->second;
      if (declared != model_inputs.end()) spec.second = declared->second.dtype;
    } else if (declared != model_inputs.end() &&
               std::find(declared->second.shape.begin(), declared->second.shape.end(), -1) ==
                   declared->second.shape.end()) {
      spec = {declared->second.shape, declared->second.dtype};
    } else {
      return ValueError("--random-inputs needs the shape of parameter ", name, ": --shape ", name,
                        "=2x32[:dtype]");
    }
    TETHER_ASSIGN_OR_RETURN(Value remote,
                            p.connection.session->AllocTensor(spec.first, spec.second, o.device));
    TETHER_RETURN_IF_ERROR(p.connection.session->FillRandom(remote, o.seed, -1.0, 1.0));
    results::InputRecord in = InputOf(name, spec.first, spec.second);
    in.source = "random";
    in.seed = o.seed;
    in.low = -1.0;
    in.high = 1.0;
    p.provenance.inputs.push_back(std::move(in));
    args.push_back(remote);
  }
  if (!o.streams.empty()) {
    p.first_inputs = std::move(args);  // the stream makes the calls
    return p;
  }
  TETHER_RETURN_IF_ERROR(p.vm->SetInput(o.function, args));
  return p;
}

// Writes every tensor leaf of `out` as PREFIX_<index path>.npy and prints a line per leaf.
absl::Status WriteOutputs(const Value& out, const std::string& dir, const std::string& name) {
  if (out.is_tuple()) {
    const auto& fields = out.AsRef<TupleObj>()->fields;
    for (size_t i = 0; i < fields.size(); ++i) {
      TETHER_RETURN_IF_ERROR(WriteOutputs(fields[i], dir, absl::StrCat(name, "_", i)));
    }
    return absl::OkStatus();
  }
  if (!out.is_tensor()) {
    std::printf("  %-12s %s\n", name.c_str(), out.ToString().c_str());
    return absl::OkStatus();
  }
  Tensor t(out.AsRef<TensorObj>());
  std::string where;
  if (!dir.empty()) {
    where = (std::filesystem::path(dir) / (name + ".npy")).string();
    TETHER_RETURN_IF_ERROR(client::WriteNpyFile(where, t));
  }
  std::printf("  %-12s %-10s %-16s %s%s\n", name.c_str(), t->dtype().ToString().c_str(),
              ShapeToString(t->shape()).c_str(), PreviewValues(t).c_str(),
              where.empty() ? "" : ("  -> " + where).c_str());
  return absl::OkStatus();
}

}  // namespace

int RunInfo(const std::vector<std::string>& args) {
  Options o;
  if (int rc = ParseArgs("info", args, false, "", &o); rc >= 0) return rc;
  auto c = Connect(o);
  if (!c.ok()) return Fail("cannot connect", c.status());
  const v1::HandshakeResponse& h = c->session->handshake();
  std::printf(
      "daemon      %s\n",
      c->farm
          ? absl::StrCat(c->farm->address(), " (farm device ", c->farm->device_id(), ")").c_str()
      : o.remote.empty() ? "embedded (private unix socket)"
                         : o.remote.c_str());
  std::printf("protocol    %u.%u\nruntime     %s\n", h.protocol().major(), h.protocol().minor(),
              h.runtime_version().c_str());
  std::printf(
      "limits      inline tensors <= %llu bytes, chunks of %llu bytes, messages <= %llu bytes, %u "
      "sessions\n",
      static_cast<unsigned long long>(h.limits().max_inline_tensor_bytes()),
      static_cast<unsigned long long>(h.limits().chunk_bytes()),
      static_cast<unsigned long long>(h.limits().max_message_bytes()), h.limits().max_sessions());
  std::printf("dtypes      %s\n", absl::StrJoin(h.dtypes(), " ").c_str());
  if (h.has_target()) {
    const v1::TargetInfo& t = h.target();
    std::printf("target      %s (%s)%s%s\n", t.triple().c_str(), t.cpu().c_str(),
                t.description().empty() ? "" : ", ", t.description().c_str());
    std::printf("  features  %s\n", absl::StrJoin(t.features(), " ").c_str());
    std::printf("  cores     %u, page size %llu bytes\n", t.cores(),
                static_cast<unsigned long long>(t.page_size()));
    std::printf("  compile   --target \"%s\"\n", t.compile_target().c_str());
  }
  for (const v1::DeviceInfo& d : h.devices()) {
    std::printf("\ndevice %s\n", d.name().c_str());
    std::map<std::string, std::string> attrs;
    for (const auto& [key, value] : d.attributes()) {
      auto v = rpc::DecodeValue(value, {});
      if (v.ok() && v->is_none()) continue;  // not defined for this kind of device
      attrs[key] = v.ok() ? FormatValue(*v) : "?";
    }
    for (const auto& [key, value] : attrs) std::printf("  %-32s %s\n", key.c_str(), value.c_str());
  }
  return 0;
}

namespace {

// The JUnit case a run or bench produces: named after the model and function.
results::JunitCase CaseFor(const char* command, const Options& o) {
  results::JunitCase c;
  c.classname =
      absl::StrCat("tether.", command, ".", std::filesystem::path(o.file).stem().string());
  c.name = absl::StrCat(o.function, " on ", o.device.ToString());
  return c;
}

results::JunitSuite SuiteFor(const char* command, results::JunitCase c) {
  results::JunitSuite suite;
  suite.name = absl::StrCat("tether ", command);
  suite.timestamp = absl::FormatTime("%Y-%m-%dT%H:%M:%S", absl::Now(), absl::UTCTimeZone());
  suite.hostname = HostName();
  suite.cases.push_back(std::move(c));
  return suite;
}

// Adds the provenance's essentials to a JUnit case's properties.
void AddProperties(const results::Provenance& p, results::JunitCase* c) {
  c->properties.insert(c->properties.end(), {{"model", p.model_path},
                                             {"model_sha256", p.model_sha256},
                                             {"module_sha256", p.module_sha256},
                                             {"device", p.device},
                                             {"daemon", p.daemon_address},
                                             {"daemon_version", p.daemon_version},
                                             {"compiler_version", p.compiler_version},
                                             {"target", p.compile_target}});
  if (!p.farm_device.empty()) {
    c->properties.push_back({"farm_device", p.farm_device});
    c->properties.push_back({"fencing_token", absl::StrCat(p.fencing_token)});
  }
}

// Prints `status` as Fail does and, with --junit, writes the error case.
int FailWithJunit(const char* command, const Options& o, const std::string& what,
                  const absl::Status& status, double seconds) {
  int rc = Fail(what, status);
  if (!o.junit.empty()) {
    results::JunitCase c = ErrorCase(CaseFor(command, o), status);
    c.seconds = seconds;
    WriteJunit(o.junit, SuiteFor(command, std::move(c)));
  }
  return rc;
}

double SecondsSince(absl::Time start) { return absl::ToDoubleSeconds(absl::Now() - start); }

// What Prepare gives for a baseline: the stored result read and checked
// against this run, the time_evaluator options it ran with taken where the
// command line gave none.
absl::StatusOr<results::StoredBench> ReadBaseline(Options* o) {
  absl::StatusOr<std::string> text = ReadFileToString(o->baseline);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read --baseline: ", text.status().message()));
  }
  TETHER_ASSIGN_OR_RETURN(results::StoredBench b, results::ParseBenchDocument(*text, o->baseline));
  // The same measurement as the baseline unless the command line says otherwise.
  auto take = [&](const char* flag, int* field, int value) {
    if (!o->timing_flags.contains(flag)) *field = value;
  };
  take("number", &o->timing.number, b.timing.number);
  take("repeat", &o->timing.repeat, b.timing.repeat);
  take("min_repeat_ms", &o->timing.min_repeat_ms, b.timing.min_repeat_ms);
  take("cooldown_interval_ms", &o->timing.cooldown_interval_ms, b.timing.cooldown_interval_ms);
  take("repeats_to_cooldown", &o->timing.repeats_to_cooldown, b.timing.repeats_to_cooldown);
  if (!o->timing_flags.contains("cache_flush_bytes")) {
    o->timing.cache_flush_bytes = b.timing.cache_flush_bytes;
  }
  return b;
}

}  // namespace

int RunRun(const std::vector<std::string>& args) {
  Options o;
  if (int rc = ParseArgs(
          "run", args, true,
          "  --output-dir DIR       write each output leaf as DIR/out_<index path>.npy\n"
          "  --junit FILE           write the outcome as JUnit XML (for CI)\n"
          "streaming: a model whose outputs feed its next call (recurrent state, caches)\n"
          "  --stream NAME=@CHUNKS.npy  call the function once per chunk: the file's\n"
          "                         first axis counts the chunks, chunk i is input NAME\n"
          "                         of call i (repeatable, one chunk count for all)\n"
          "  --carry OUT=IN         output OUT of each call becomes input IN of the next,\n"
          "                         kept on the daemon: the state never crosses the\n"
          "                         network between chunks. OUT is an ONNX output name or\n"
          "                         an output index; IN starts as --input IN=@FILE.npy,\n"
          "                         else as zeros of the ONNX model's declared shape\n"
          "                         (when all its dims are fixed). Other inputs go up once\n"
          "  --compare-naive        also time the same chunks with the state uploaded and\n"
          "                         downloaded each call, and print the ratio\n"
          "  with --stream, --output-dir writes out_<output>.npy (each output not carried,\n"
          "  stacked along a new first axis) and state_<input>.npy (the final state);\n"
          "  the latency per chunk (mean, median, p90) is printed\n",
          &o);
      rc >= 0)
    return rc;
  const absl::Time start = absl::Now();
  auto p = Prepare(o);
  if (!p.ok()) return FailWithJunit("run", o, "", p.status(), SecondsSince(start));
  if (!o.streams.empty()) {
    StreamJob job;
    job.function = o.function;
    job.params = p->params;
    job.output_names = p->output_names;
    job.chunks = p->chunks;
    job.first_inputs = p->first_inputs;
    job.carries = o.carries;
    job.output_dir = o.output_dir;
    job.compare_naive = o.compare_naive;
    absl::StatusOr<std::string> summary = RunStream(p->vm.get(), job);
    if (!summary.ok())
      return FailWithJunit("run", o, "stream", summary.status(), SecondsSince(start));
    if (o.junit.empty()) return 0;
    results::JunitCase c = CaseFor("run", o);
    c.seconds = SecondsSince(start);
    c.system_out = *summary;
    AddProperties(p->provenance, &c);
    return WriteJunit(o.junit, SuiteFor("run", std::move(c)));
  }
  if (absl::Status s = p->vm->InvokeStateful(o.function); !s.ok())
    return FailWithJunit("run", o, "invoke_stateful", s, SecondsSince(start));
  auto out = p->vm->GetOutputs(o.function);
  if (!out.ok()) return FailWithJunit("run", o, "get_outputs", out.status(), SecondsSince(start));
  if (!o.output_dir.empty()) std::filesystem::create_directories(o.output_dir);
  std::printf("outputs of %s:\n", o.function.c_str());
  if (absl::Status s = WriteOutputs(*out, o.output_dir, "out"); !s.ok())
    return FailWithJunit("run", o, "writing outputs", s, SecondsSince(start));
  if (!o.junit.empty()) {
    results::JunitCase c = CaseFor("run", o);
    c.seconds = SecondsSince(start);
    AddProperties(p->provenance, &c);
    return WriteJunit(o.junit, SuiteFor("run", std::move(c)));
  }
  return 0;
}

// bench --kernel: a profile run of o.function records the kernel's argument
// shapes (its slowest set, when it ran with several); arguments of those
// shapes are allocated on the daemon and the kernel alone is timed there.
// `subject` becomes what the summary names.
absl::StatusOr<profiling::BenchmarkResult> TimeKernel(const Options& o, Prepared& p,
                                                      std::string* subject) {
  TETHER_ASSIGN_OR_RETURN(std::vector<vm::ModuleFunction> functions, p.vm->ListFunctions());
  std::vector<std::string> kernels;
  const vm::ModuleFunction* kernel = nullptr;
  for (const vm::ModuleFunction& f : functions) {
    if (f.kind != vm::ModuleFunction::Kind::kKernel) continue;
    kernels.push_back(f.name);
    if (f.name == o.kernel) kernel = &f;
  }
  if (kernel == nullptr) {
    return NotFoundError("the model has no kernel named ", o.kernel,
                         " (its kernels: ", absl::StrJoin(kernels, ", "), ")");
  }
  TETHER_ASSIGN_OR_RETURN(profiling::Report report, p.vm->Profile(o.function, {}));
  std::vector<KernelCalls> calls = SlowestKernels(report, {*kernel}, 1);
  if (calls.empty()) {
    return PreconditionError("kernel ", o.kernel, " did not run in a call of ", o.function,
                             ", so no profile recorded its argument shapes");
  }
  TETHER_ASSIGN_OR_RETURN(std::vector<RecordedArg> recorded,
                          ParseArgumentShapes(calls[0].argument_shapes));
  client::RemoteSession* session = p.vm->session();
  TETHER_ASSIGN_OR_RETURN(std::vector<Value> args,
                          AllocateKernelArgs(session, *kernel, recorded, o.device, o.seed));
  *subject = absl::StrCat("kernel ", o.kernel, " (", calls[0].argument_shapes, ") of ", o.function);
  absl::StatusOr<profiling::BenchmarkResult> r =
      p.vm->TimeEvaluator(o.kernel, o.device, o.timing, args);
  std::vector<uint64_t> ids;
  for (const Value& a : args) {
    if (client::RemoteHandleObj* h = client::AsRemoteHandle(a)) ids.push_back(h->id());
  }
  (void)session->FreeObjects(std::move(ids));
  return r;
}

int RunBench(const std::vector<std::string>& args) {
  Options o;
  if (int rc = ParseArgs(
          "bench", args, true,
          "  --number N --repeat R --min-repeat-ms M --cooldown-ms C --repeats-to-cooldown K\n"
          "  --cache-flush-bytes B  time_evaluator options (run on the daemon)\n"
          "  --concurrent-timing    measure beside other sessions' calls instead of waiting\n"
          "                         for exclusive use of the daemon\n"
          "  --json                 the result with its provenance and raw samples, as JSON\n"
          "                         (what --baseline reads back)\n"
          "  --baseline OLD.json    compare with a stored --json result: faster, slower, same\n"
          "                         within noise, or unstable (a bootstrap interval of the\n"
          "                         ratio of medians; timing options default to the baseline's)\n"
          "  --regression-threshold PCT  a slowdown past PCT percent is a regression (default 5)\n"
          "  --junit FILE           write the outcome as JUnit XML (for CI)\n"
          "  --kernel NAME          time one kernel of the model alone, with the argument\n"
          "                         shapes a profile run of --function recorded for it\n"
          "                         (`tether profile --top N` names the slowest)\n"
          "exit status: 0 done, 1 failed, 2 bad usage; with --baseline 3 a regression past\n"
          "the threshold, 4 unstable (rerun with more repeats), 5 the baseline is unusable\n",
          &o);
      rc >= 0) {
    return rc;
  }
  const absl::Time start = absl::Now();
  if (!o.kernel.empty() && !o.baseline.empty()) {
    std::fprintf(stderr, "tether bench: --kernel does not combine with --baseline\n");
    return 2;
  }
  std::optional<results::StoredBench> baseline;
  if (!o.baseline.empty()) {
    absl::StatusOr<results::StoredBench> b = ReadBaseline(&o);
    if (!b.ok()) {
      FailWithJunit("bench", o, "", b.status(), SecondsSince(start));
      return kExitBadBaseline;
    }
    baseline = std::move(*b);
  }
  if (o.timing.number == 0) o.timing.number = 10;
  if (o.timing.repeat == 0) o.timing.repeat = 1;
  if (o.timing.repeats_to_cooldown == 0) o.timing.repeats_to_cooldown = 1;
  auto p = Prepare(o);
  if (!p.ok()) return FailWithJunit("bench", o, "", p.status(), SecondsSince(start));
  results::Provenance& provenance = p->provenance;
  const results::TimingSettings timing = TimingOf(o.timing, o.concurrent_timing);
  if (baseline) {
    if (absl::Status s = results::CheckSameWorkload(*baseline, provenance); !s.ok()) {
      FailWithJunit("bench", o,
                    absl::StrCat("--baseline ", o.baseline, " cannot be compared with this run"), s,
                    SecondsSince(start));
      return kExitBadBaseline;
    }
  }
  std::string subject = o.function;
  Value name[] = {Value(o.function)};
  auto r = o.kernel.empty()
               ? p->vm->TimeEvaluator(vm::kInvokeStatefulName, o.device, o.timing, name)
               : TimeKernel(o, *p, &subject);
  if (!r.ok()) return FailWithJunit("bench", o, "time_evaluator", r.status(), SecondsSince(start));
  provenance.device_state_json = DeviceStateJson(p->vm->last_device_state());

  results::CompareOptions compare;
  compare.regression_threshold = o.regression_threshold / 100;
  std::optional<results::Comparison> comparison;
  std::vector<std::string> differences;
  if (baseline) {
    comparison = results::Compare(baseline->samples, r->results, compare);
    differences = results::BaselineDifferences(*baseline, provenance, timing);
  }
  int rc = 0;
  if (comparison && comparison->regression) rc = kExitRegression;
  if (comparison && comparison->verdict == results::Verdict::kUnstable) rc = kExitUnstable;

  std::string summary;
  if (o.json) {
    std::printf(
        "%s", results::BenchDocumentJson(*r, provenance, timing,
                                         comparison ? &*comparison : nullptr, &compare, o.baseline)
                  .c_str());
  }
  absl::StrAppendFormat(
      &summary,
      "%s on %s, %zu repeats of %lld calls (%lld calls in all, timed on the daemon)\n%s\n", subject,
      o.device.ToString(), r->results.size(), static_cast<long long>(r->number_per_repeat),
      static_cast<long long>(r->total_calls), r->ToString());
  absl::StrAppendFormat(&summary, "p50 %.4f ms   p90 %.4f ms   p99 %.4f ms\n", r->p50() * 1e3,
                        r->p90() * 1e3, r->p99() * 1e3);
  if (r->exclusive) {
    absl::StrAppendFormat(
        &summary, "timing exclusive: no other session's call ran meanwhile (waited %.3f ms)\n",
        r->wait_seconds * 1e3);
  } else {
    absl::StrAppend(&summary, "timing concurrent: other sessions' calls may have run meanwhile\n");
  }
  if (comparison) {
    const results::Comparison& c = *comparison;
    absl::StrAppendFormat(&summary, "baseline  %s (%s, %d samples, median %.4f ms)\n", o.baseline,
                          baseline->timestamp, c.baseline.count, c.baseline.median * 1e3);
    if (!differences.empty()) {
      absl::StrAppend(&summary, "differs   ", absl::StrJoin(differences, ", "), "\n");
    }
    absl::StrAppendFormat(&summary, "verdict   %s: %s\n", results::VerdictName(c.verdict),
                          c.explanation);
  }
  // With --json, stdout is the document; the summary goes to stderr only
  // when there is a verdict to read.
  if (!o.json) {
    std::printf("%s", summary.c_str());
  } else if (comparison) {
    std::fprintf(stderr, "%s", summary.c_str());
  }
  if (!o.junit.empty()) {
    results::JunitCase c = CaseFor("bench", o);
    c.seconds = SecondsSince(start);
    c.system_out = summary;
    AddProperties(provenance, &c);
    c.properties.push_back({"median_seconds", absl::StrCat(r->median)});
    c.properties.push_back({"exclusive", r->exclusive ? "true" : "false"});
    if (comparison) {
      c.properties.push_back({"baseline", o.baseline});
      c.properties.push_back({"verdict", results::VerdictName(comparison->verdict)});
      c.properties.push_back({"ratio", absl::StrCat(comparison->ratio)});
      c.properties.push_back({"ci_low", absl::StrCat(comparison->ci_low)});
      c.properties.push_back({"ci_high", absl::StrCat(comparison->ci_high)});
      if (rc != 0) {
        c.outcome = results::JunitCase::Outcome::kFailure;
        c.type = comparison->regression ? "regression" : "unstable";
        c.message = comparison->explanation;
        c.detail = summary;
      }
    }
    if (int written = WriteJunit(o.junit, SuiteFor("bench", std::move(c))); written != 0) {
      return rc != 0 ? rc : written;
    }
  }
  return rc;
}

int RunProfile(const std::vector<std::string>& args) {
  Options o;
  if (int rc = ParseArgs("profile", args, true,
                         "  --format table|csv|json|chrome-trace\n"
                         "                         json: the report with its provenance;\n"
                         "                         chrome-trace: a trace for chrome://tracing or\n"
                         "                         Perfetto (one event per call)\n"
                         "  --concurrent-timing    profile beside other sessions' calls\n"
                         "  --top N                name the N slowest kernels (with the shapes\n"
                         "                         they ran with) instead of the whole table\n",
                         &o);
      rc >= 0)
    return rc;
  auto p = Prepare(o);
  if (!p.ok()) return Fail("", p.status());
  auto report = p->vm->Profile(o.function, {});
  if (!report.ok()) return Fail("profile", report.status());
  p->provenance.device_state_json = DeviceStateJson(p->vm->last_device_state());
  auto provenance_json = [&] {
    results::JsonWriter w;
    results::WriteProvenance(w, p->provenance);
    return w.text();
  };
  if (o.top > 0) {
    auto functions = p->vm->ListFunctions();
    if (!functions.ok()) return Fail("profile", functions.status());
    std::printf("%s", SlowestKernelsTable(
                          SlowestKernels(*report, *functions, static_cast<size_t>(o.top)), o.file)
                          .c_str());
  } else if (o.format == "csv") {
    std::printf("%s", report->Csv().c_str());
  } else if (o.format == "json") {
    // The report as Report::Json writes it (Report::FromJson reads it back
    // and ignores the rest), then the result's kind and provenance.
    std::string json = report->Json();
    while (!json.empty() && json.back() != '}') json.pop_back();
    if (!json.empty()) json.pop_back();
    std::printf("%s,\"kind\":\"%s\",\"version\":%d,\"provenance\":%s}\n", json.c_str(),
                results::kProfileKind, results::kDocumentVersion, provenance_json().c_str());
  } else if (o.format == "chrome-trace") {
    std::printf("%s",
                results::ChromeTraceJson(*report,
                                         absl::StrCat("tether profile ", o.file, " (", o.function,
                                                      " on ", o.device.ToString(), ")"),
                                         provenance_json())
                    .c_str());
  } else {
    std::printf("%s\n", report->Table().c_str());
  }
  return 0;
}

}  // namespace tether::cli
