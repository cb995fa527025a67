// Result documents: writing with JsonWriter, reading with the runtime's
// strict JSON parser, and the checks that make a baseline comparable.
#include "client/results/bench_document.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/profiling/json.h"

namespace tether::results {
namespace {

using profiling::JsonValue;

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

void WriteTiming(JsonWriter& w, const TimingSettings& t) {
  w.BeginObject()
      .Key("number")
      .Int(t.number)
      .Key("repeat")
      .Int(t.repeat)
      .Key("min_repeat_ms")
      .Int(t.min_repeat_ms)
      .Key("limit_zero_time_iterations")
      .Int(t.limit_zero_time_iterations)
      .Key("cooldown_interval_ms")
      .Int(t.cooldown_interval_ms)
      .Key("repeats_to_cooldown")
      .Int(t.repeats_to_cooldown)
      .Key("cache_flush_bytes")
      .Int(t.cache_flush_bytes)
      .Key("f_preproc")
      .String(t.f_preproc)
      .Key("concurrent")
      .Bool(t.concurrent)
      .EndObject();
}

absl::Status Invalid(absl::string_view path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, " ", what));
}

const JsonValue* Member(const JsonValue& object, absl::string_view key, JsonValue::Kind kind) {
  if (object.kind != JsonValue::Kind::kObject) return nullptr;
  const JsonValue* v = object.Find(key);
  return v != nullptr && v->kind == kind ? v : nullptr;
}

std::string StringAt(const JsonValue& object, absl::string_view key) {
  const JsonValue* v = Member(object, key, JsonValue::Kind::kString);
  return v == nullptr ? "" : v->text;
}

bool NumberAt(const JsonValue& object, absl::string_view key, double* out) {
  const JsonValue* v = Member(object, key, JsonValue::Kind::kNumber);
  return v != nullptr && absl::SimpleAtod(v->text, out);
}

template <typename Int>
void IntAt(const JsonValue& object, absl::string_view key, Int* out) {
  const JsonValue* v = Member(object, key, JsonValue::Kind::kNumber);
  int64_t n = 0;
  if (v != nullptr && v->IsIntegerLiteral() && absl::SimpleAtoi(v->text, &n)) {
    *out = static_cast<Int>(n);
  }
}

}  // namespace

void WriteProvenance(JsonWriter& w, const Provenance& p) {
  w.BeginObject();
  w.Key("timestamp").String(p.timestamp);
  w.Key("model").BeginObject();
  w.Key("path").String(p.model_path).Key("sha256").String(p.model_sha256);
  w.EndObject();
  w.Key("module_sha256").String(p.module_sha256);
  w.Key("function").String(p.function);
  w.Key("device").String(p.device);
  w.Key("inputs").BeginArray();
  for (const InputRecord& in : p.inputs) {
    w.BeginObject().Key("name").String(in.name).Key("dtype").String(in.dtype);
    w.Key("shape").BeginArray();
    for (int64_t d : in.shape) w.Int(d);
    w.EndArray();
    w.Key("source").String(in.source);
    if (in.source == "file") {
      w.Key("path").String(in.path).Key("sha256").String(in.sha256);
    } else {
      w.Key("seed").Int(static_cast<int64_t>(in.seed)).Key("low").Double(in.low);
      w.Key("high").Double(in.high);
    }
    w.EndObject();
  }
  w.EndArray();
  w.Key("client").BeginObject();
  w.Key("version").String(p.client_version).Key("host").String(p.client_host);
  w.EndObject();
  w.Key("compiler").BeginObject();
  w.Key("version").String(p.compiler_version).Key("target").String(p.compile_target);
  w.EndObject();
  w.Key("daemon").BeginObject();
  w.Key("address").String(p.daemon_address).Key("version").String(p.daemon_version);
  w.Key("protocol").String(p.protocol);
  w.Key("farm");
  if (p.farm_device.empty() && p.fencing_token == 0) {
    w.Null();
  } else {
    w.BeginObject().Key("key").String(p.farm_key).Key("device").String(p.farm_device);
    w.Key("fencing_token").Int(p.fencing_token).EndObject();
  }
  w.Key("target").BeginObject();
  w.Key("triple").String(p.daemon_triple).Key("cpu").String(p.daemon_cpu);
  w.Key("description").String(p.daemon_cpu_description);
  w.Key("features").BeginArray();
  for (const std::string& f : p.daemon_features) w.String(f);
  w.EndArray().EndObject().EndObject();
  w.Key("device_state");
  if (p.device_state_json.empty()) {
    w.Null();
  } else {
    w.Raw(p.device_state_json);
  }
  w.EndObject();
}

void WriteComparison(JsonWriter& w, const Comparison& c, const CompareOptions& options,
                     absl::string_view baseline_path) {
  auto side = [&](const SampleSummary& s) {
    w.BeginObject().Key("count").Int(static_cast<int64_t>(s.count));
    w.Key("median").Double(s.median).Key("robust_cv").Double(s.robust_cv);
    w.Key("stable").Bool(s.stable).Key("problem").String(s.problem);
    w.EndObject();
  };
  w.BeginObject();
  w.Key("baseline_path").String(baseline_path);
  w.Key("verdict").String(VerdictName(c.verdict));
  w.Key("regression").Bool(c.regression);
  w.Key("explanation").String(c.explanation);
  w.Key("ratio").Double(c.ratio);
  w.Key("ci_low").Double(c.ci_low).Key("ci_high").Double(c.ci_high);
  w.Key("confidence").Double(options.confidence);
  w.Key("method").String("percentile bootstrap of the ratio of medians");
  w.Key("resamples").Int(c.resamples).Key("seed").Int(static_cast<int64_t>(options.seed));
  w.Key("noise_margin").Double(options.noise_margin);
  w.Key("regression_threshold").Double(options.regression_threshold);
  w.Key("baseline");
  side(c.baseline);
  w.Key("candidate");
  side(c.candidate);
  w.EndObject();
}

std::string BenchDocumentJson(const profiling::BenchmarkResult& r, const Provenance& p,
                              const TimingSettings& timing, const Comparison* comparison,
                              const CompareOptions* options, absl::string_view baseline_path) {
  JsonWriter w;
  w.BeginObject();
  w.Key("kind").String(kBenchKind).Key("version").Int(kDocumentVersion);
  w.Key("function").String(p.function).Key("device").String(p.device);
  w.Key("unit").String("seconds");
  w.Key("mean").Double(r.mean).Key("median").Double(r.median);
  w.Key("min").Double(r.min).Key("max").Double(r.max).Key("std").Double(r.std);
  w.Key("p50").Double(r.p50()).Key("p90").Double(r.p90()).Key("p99").Double(r.p99());
  w.Key("number").Int(r.number_per_repeat);
  w.Key("repeat").Int(static_cast<int64_t>(r.results.size()));
  w.Key("total_calls").Int(r.total_calls);
  w.Key("exclusive").Bool(r.exclusive).Key("wait_seconds").Double(r.wait_seconds);
  w.Key("samples").BeginArray();
  for (double s : r.results) w.Double(s);
  w.EndArray();
  w.Key("timing");
  WriteTiming(w, timing);
  w.Key("provenance");
  WriteProvenance(w, p);
  if (comparison != nullptr && options != nullptr) {
    w.Key("comparison");
    WriteComparison(w, *comparison, *options, baseline_path);
  }
  w.EndObject();
  return w.text();
}

absl::StatusOr<StoredBench> ParseBenchDocument(absl::string_view text, absl::string_view path) {
  absl::StatusOr<JsonValue> doc = profiling::ParseJson(text);
  if (!doc.ok()) return Invalid(path, absl::StrCat("is not JSON: ", doc.status().message()));
  if (doc->kind != JsonValue::Kind::kObject) {
    return Invalid(path, "is not a tether bench result (not a JSON object)");
  }
  const std::string kind = StringAt(*doc, "kind");
  if (kind != kBenchKind) {
    if (kind.empty() && doc->Find("samples") != nullptr) {
      return Invalid(path,
                     "is a bench result without provenance (written before tether 0.1's result "
                     "documents); run `tether bench --json` again to make a baseline");
    }
    return Invalid(path, absl::StrCat("is not a tether bench result (its \"kind\" is \"", kind,
                                      "\", expected \"", kBenchKind, "\")"));
  }
  double version = 0;
  if (!NumberAt(*doc, "version", &version) || version < 1) {
    return Invalid(path, "has no valid \"version\"");
  }
  if (version > kDocumentVersion) {
    return Invalid(
        path, absl::StrCat("is a version ", version, " bench result; this tether reads version ",
                           kDocumentVersion, " (upgrade tether)"));
  }
  StoredBench b;
  b.function = StringAt(*doc, "function");
  b.device = StringAt(*doc, "device");
  const JsonValue* samples = Member(*doc, "samples", JsonValue::Kind::kArray);
  if (samples == nullptr) return Invalid(path, "has no \"samples\" array");
  for (const JsonValue& s : samples->items) {
    double v = 0;
    if (s.kind != JsonValue::Kind::kNumber || !absl::SimpleAtod(s.text, &v) || !std::isfinite(v) ||
        v < 0) {
      return Invalid(path, absl::StrCat("has a sample that is not a non-negative number (",
                                        profiling::JsonPosition(text, s.offset), ")"));
    }
    b.samples.push_back(v);
  }
  if (b.samples.empty()) {
    return Invalid(path, "has no samples (an empty \"samples\" array): nothing to compare with");
  }
  if (const JsonValue* t = Member(*doc, "timing", JsonValue::Kind::kObject)) {
    IntAt(*t, "number", &b.timing.number);
    IntAt(*t, "repeat", &b.timing.repeat);
    IntAt(*t, "min_repeat_ms", &b.timing.min_repeat_ms);
    IntAt(*t, "limit_zero_time_iterations", &b.timing.limit_zero_time_iterations);
    IntAt(*t, "cooldown_interval_ms", &b.timing.cooldown_interval_ms);
    IntAt(*t, "repeats_to_cooldown", &b.timing.repeats_to_cooldown);
    IntAt(*t, "cache_flush_bytes", &b.timing.cache_flush_bytes);
    b.timing.f_preproc = StringAt(*t, "f_preproc");
    if (const JsonValue* c = Member(*t, "concurrent", JsonValue::Kind::kBool)) {
      b.timing.concurrent = c->bool_value;
    }
  }
  const JsonValue* p = Member(*doc, "provenance", JsonValue::Kind::kObject);
  if (p == nullptr) return Invalid(path, "has no \"provenance\" object");
  b.timestamp = StringAt(*p, "timestamp");
  if (const JsonValue* m = Member(*p, "model", JsonValue::Kind::kObject)) {
    b.model_path = StringAt(*m, "path");
    b.model_sha256 = StringAt(*m, "sha256");
  }
  b.module_sha256 = StringAt(*p, "module_sha256");
  if (b.model_sha256.empty()) return Invalid(path, "has no model sha256 in its provenance");
  if (const JsonValue* inputs = Member(*p, "inputs", JsonValue::Kind::kArray)) {
    for (const JsonValue& in : inputs->items) {
      InputRecord r;
      r.name = StringAt(in, "name");
      r.dtype = StringAt(in, "dtype");
      r.source = StringAt(in, "source");
      if (const JsonValue* shape = Member(in, "shape", JsonValue::Kind::kArray)) {
        for (const JsonValue& d : shape->items) {
          int64_t dim = 0;
          if (d.kind == JsonValue::Kind::kNumber && absl::SimpleAtoi(d.text, &dim)) {
            r.shape.push_back(dim);
          }
        }
      }
      b.inputs.push_back(std::move(r));
    }
  }
  if (const JsonValue* d = Member(*p, "daemon", JsonValue::Kind::kObject)) {
    b.daemon_version = StringAt(*d, "version");
    if (const JsonValue* f = Member(*d, "farm", JsonValue::Kind::kObject)) {
      b.farm_device = StringAt(*f, "device");
    }
  }
  if (const JsonValue* c = Member(*p, "compiler", JsonValue::Kind::kObject)) {
    b.compiler_version = StringAt(*c, "version");
  }
  return b;
}

absl::Status CheckSameWorkload(const StoredBench& baseline, const Provenance& run) {
  auto differ = [&](absl::string_view what, absl::string_view was, absl::string_view is) {
    return absl::FailedPreconditionError(
        absl::StrCat("the baseline measured another workload (", what, "): the baseline's ",
                     was.empty() ? "none" : was, "; this run's ", is.empty() ? "none" : is));
  };
  if (baseline.model_sha256 != run.model_sha256) {
    return differ("model (sha256 of the model file)",
                  absl::StrCat(baseline.model_path, " ", baseline.model_sha256.substr(0, 12)),
                  absl::StrCat(run.model_path, " ", run.model_sha256.substr(0, 12)));
  }
  if (baseline.function != run.function) return differ("function", baseline.function, run.function);
  auto signature = [](const std::vector<InputRecord>& inputs) {
    return absl::StrJoin(inputs, ", ", [](std::string* out, const InputRecord& in) {
      absl::StrAppend(out, in.name, " ", in.dtype, ShapeText(in.shape));
    });
  };
  if (signature(baseline.inputs) != signature(run.inputs)) {
    return differ("inputs", signature(baseline.inputs), signature(run.inputs));
  }
  return absl::OkStatus();
}

std::vector<std::string> BaselineDifferences(const StoredBench& baseline, const Provenance& run,
                                             const TimingSettings& timing) {
  std::vector<std::string> out;
  auto note = [&](absl::string_view what, const auto& was, const auto& is) {
    if (was != is) out.push_back(absl::StrCat(what, " ", was, " -> ", is));
  };
  if (baseline.module_sha256 != run.module_sha256) {
    out.push_back(absl::StrCat("module ", baseline.module_sha256.substr(0, 12), " -> ",
                               run.module_sha256.substr(0, 12)));
  }
  note("device", baseline.device, run.device);
  note("compiler", baseline.compiler_version, run.compiler_version);
  note("daemon", baseline.daemon_version, run.daemon_version);
  // Through a farm, two runs of one key may land on different devices.
  if (!baseline.farm_device.empty() || !run.farm_device.empty()) {
    note("farm device", baseline.farm_device.empty() ? "none" : baseline.farm_device,
         run.farm_device.empty() ? "none" : run.farm_device);
  }
  note("number", baseline.timing.number, timing.number);
  note("repeat", baseline.timing.repeat, timing.repeat);
  note("min_repeat_ms", baseline.timing.min_repeat_ms, timing.min_repeat_ms);
  note("cooldown_interval_ms", baseline.timing.cooldown_interval_ms, timing.cooldown_interval_ms);
  note("repeats_to_cooldown", baseline.timing.repeats_to_cooldown, timing.repeats_to_cooldown);
  note("cache_flush_bytes", baseline.timing.cache_flush_bytes, timing.cache_flush_bytes);
  if (baseline.timing.concurrent != timing.concurrent) {
    out.push_back(timing.concurrent ? "timing exclusive -> concurrent"
                                    : "timing concurrent -> exclusive");
  }
  return out;
}

}  // namespace tether::results
