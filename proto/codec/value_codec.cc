// The Value <-> wire codec. Decoding trusts nothing: every dtype, shape, byte
// count, device and nesting level from a message is checked before use.
#include "proto/codec/value_codec.h"

#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "runtime/core/error.h"
#include "runtime/core/function.h"

namespace tether::rpc {
namespace {

constexpr int kMaxDims = 32;

absl::Status EncodeValueAt(const Value& value, const EncodeOptions& options, int depth,
                           v1::Value* out);
absl::StatusOr<Value> DecodeValueAt(const v1::Value& value, const DecodeOptions& options,
                                    int depth);

}  // namespace

void EncodeDataType(DataType dtype, v1::DataType* out) {
  out->set_code(dtype.code());
  out->set_bits(dtype.bits());
  out->set_lanes(dtype.lanes());
}

absl::StatusOr<DataType> DecodeDataType(const v1::DataType& dtype) {
  if (dtype.code() > 255 || dtype.bits() > 255 || dtype.lanes() > 65535) {
    return ValueError("invalid data type code ", dtype.code(), " bits ", dtype.bits(), " lanes ",
                      dtype.lanes());
  }
  DataType t(static_cast<uint8_t>(dtype.code()), static_cast<uint8_t>(dtype.bits()),
             static_cast<uint16_t>(dtype.lanes()));
  if (!t.IsValidStorageType()) return ValueError("unsupported data type ", t.ToString());
  return t;
}

void EncodeDevice(Device device, v1::Device* out) {
  out->set_type(static_cast<int32_t>(device.type));
  out->set_id(device.id);
}

absl::StatusOr<Device> DecodeDevice(const v1::Device& device) {
  if (!IsKnownDeviceType(device.type())) return ValueError("unknown device type ", device.type());
  if (device.id() < 0) return ValueError("negative device index ", device.id());
  // Each device a request names may get a process-lifetime allocator: ids
  // are bounded so requests cannot grow that table without end (M6).
  if (device.id() > kMaxDeviceIndex) {
    return ValueError("device index ", device.id(), " out of range (at most ", kMaxDeviceIndex,
                      ")");
  }
  return Device{static_cast<DLDeviceType>(device.type()), device.id()};
}

void EncodeTensorHeader(DataType dtype, std::span<const int64_t> shape, Device device,
                        v1::TensorHeader* out) {
  EncodeDataType(dtype, out->mutable_dtype());
  out->mutable_shape()->Assign(shape.begin(), shape.end());
  EncodeDevice(device, out->mutable_device());
}

absl::StatusOr<TensorSpec> DecodeTensorHeader(const v1::TensorHeader& header) {
  if (!header.has_dtype()) return ValueError("tensor header has no data type");
  TensorSpec spec;
  TETHER_ASSIGN_OR_RETURN(spec.dtype, DecodeDataType(header.dtype()));
  if (header.shape_size() > kMaxDims) {
    return ValueError("tensor has ", header.shape_size(), " dims, at most ", kMaxDims,
                      " supported");
  }
  spec.shape.assign(header.shape().begin(), header.shape().end());
  TETHER_ASSIGN_OR_RETURN(spec.num_bytes,
                          CheckedNumBytes({spec.shape.data(), spec.shape.size()}, spec.dtype));
  if (header.has_device()) {
    TETHER_ASSIGN_OR_RETURN(spec.device, DecodeDevice(header.device()));
  } else {
    spec.device = Device::Cpu();
  }
  return spec;
}

absl::StatusOr<Tensor> DecodeInlineTensor(const v1::InlineTensor& tensor) {
  TETHER_ASSIGN_OR_RETURN(TensorSpec spec, DecodeTensorHeader(tensor.header()));
  if (static_cast<int64_t>(tensor.data().size()) != spec.num_bytes) {
    return ValueError("tensor payload has ", tensor.data().size(), " bytes but ",
                      spec.dtype.ToString(), ShapeToString({spec.shape.data(), spec.shape.size()}),
                      " needs ", spec.num_bytes);
  }
  return Tensor::FromBytes({spec.shape.data(), spec.shape.size()}, spec.dtype, tensor.data().data(),
                           tensor.data().size());
}

namespace {

// Copies a strided CPU tensor into compact row-major bytes.
void GatherStrided(const TensorObj& t, int axis, const char* src, char*& dst, int64_t elem) {
  int64_t extent = t.shape()[static_cast<size_t>(axis)];
  int64_t stride = t.strides()[static_cast<size_t>(axis)] * elem;
  for (int64_t i = 0; i < extent; ++i) {
    if (axis + 1 == t.ndim()) {
      std::memcpy(dst, src + i * stride, static_cast<size_t>(elem));
      dst += elem;
    } else {
      GatherStrided(t, axis + 1, src + i * stride, dst, elem);
    }
  }
}

}  // namespace

absl::Status EncodeInlineTensor(const Tensor& tensor, v1::InlineTensor* out) {
  EncodeTensorHeader(tensor->dtype(), tensor->shape(), tensor->device(), out->mutable_header());
  std::string* data = out->mutable_data();
  data->resize(static_cast<size_t>(tensor->NumBytes()));
  if (tensor->IsContiguous()) return tensor.CopyToBytes(data->data(), data->size());
  if (tensor->device().type != kDLCPU) {
    return absl::UnimplementedError(
        absl::StrCat("cannot send non-contiguous device tensor ", tensor.ToString()));
  }
  // Non-contiguous CPU tensors are compacted on the way out.
  char* dst = data->data();
  if (tensor->NumElements() > 0) {
    GatherStrided(*tensor.get(), 0, static_cast<const char*>(tensor->element_data()), dst,
                  tensor->dtype().bytes());
  }
  return absl::OkStatus();
}

namespace {

absl::Status EncodeValueAt(const Value& value, const EncodeOptions& options, int depth,
                           v1::Value* out) {
  if (depth > kMaxValueDepth)
    return ValueError("value nests deeper than ", kMaxValueDepth, " levels");
  switch (value.kind()) {
    case Value::Kind::kNone:
      out->set_none(true);
      return absl::OkStatus();
    case Value::Kind::kInt:
      out->set_int_value(value.int_value());
      return absl::OkStatus();
    case Value::Kind::kFloat:
      out->set_float_value(value.float_value());
      return absl::OkStatus();
    case Value::Kind::kBool:
      out->set_bool_value(value.bool_value());
      return absl::OkStatus();
    case Value::Kind::kDataType:
      EncodeDataType(value.dtype_value(), out->mutable_dtype());
      return absl::OkStatus();
    case Value::Kind::kDevice:
      EncodeDevice(value.device_value(), out->mutable_device());
      return absl::OkStatus();
    case Value::Kind::kOpaquePtr:
      return TypeError("a raw pointer cannot cross the wire");
    case Value::Kind::kObject:
      break;
  }
  switch (value.object_type()) {
    case TypeIndex::kString:
      out->set_string_value(value.string_value());
      return absl::OkStatus();
    case TypeIndex::kShape: {
      const auto& dims = value.AsRef<ShapeObj>()->dims;
      out->mutable_shape()->mutable_dims()->Assign(dims.begin(), dims.end());
      return absl::OkStatus();
    }
    case TypeIndex::kTensor: {
      Tensor t(value.AsRef<TensorObj>());
      bool handle = options.make_tensor_handle &&
                    (options.always_handle ||
                     static_cast<uint64_t>(t->NumBytes()) > options.max_inline_bytes);
      if (handle) {
        TETHER_ASSIGN_OR_RETURN(uint64_t id, options.make_tensor_handle(t));
        v1::TensorHandle* h = out->mutable_tensor_handle();
        h->set_id(id);
        EncodeTensorHeader(t->dtype(), t->shape(), t->device(), h->mutable_header());
        return absl::OkStatus();
      }
      return EncodeInlineTensor(t, out->mutable_tensor());
    }
    case TypeIndex::kTuple: {
      v1::Tuple* tuple = out->mutable_tuple();
      for (const Value& field : value.AsRef<TupleObj>()->fields) {
        TETHER_RETURN_IF_ERROR(EncodeValueAt(field, options, depth + 1, tuple->add_fields()));
      }
      return absl::OkStatus();
    }
    default: {
      if (!options.make_object_handle) {
        return TypeError("a value of type ", value.TypeName(), " cannot cross the wire");
      }
      TETHER_ASSIGN_OR_RETURN(uint64_t id, options.make_object_handle(value));
      out->mutable_object()->set_id(id);
      out->mutable_object()->set_type_key(value.TypeName());
      return absl::OkStatus();
    }
  }
}

absl::StatusOr<Value> DecodeValueAt(const v1::Value& value, const DecodeOptions& options,
                                    int depth) {
  if (depth > kMaxValueDepth)
    return ValueError("value nests deeper than ", kMaxValueDepth, " levels");
  switch (value.kind_case()) {
    case v1::Value::KIND_NOT_SET:
    case v1::Value::kNone:
      return Value();
    case v1::Value::kIntValue:
      return Value(value.int_value());
    case v1::Value::kFloatValue:
      return Value(value.float_value());
    case v1::Value::kBoolValue:
      return Value(value.bool_value());
    case v1::Value::kStringValue:
      return Value(value.string_value());
    case v1::Value::kDtype: {
      TETHER_ASSIGN_OR_RETURN(DataType t, DecodeDataType(value.dtype()));
      return Value(t);
    }
    case v1::Value::kDevice: {
      TETHER_ASSIGN_OR_RETURN(Device d, DecodeDevice(value.device()));
      return Value(d);
    }
    case v1::Value::kShape: {
      if (value.shape().dims_size() > kMaxDims)
        return ValueError("shape has ", value.shape().dims_size(), " dims");
      return MakeShape(ShapeObj::Dims(value.shape().dims().begin(), value.shape().dims().end()));
    }
    case v1::Value::kTensor: {
      TETHER_ASSIGN_OR_RETURN(Tensor t, DecodeInlineTensor(value.tensor()));
      return Value(t);
    }
    case v1::Value::kTensorHandle:
      if (!options.resolve_tensor_handle) return ValueError("tensor handles are not accepted here");
      return options.resolve_tensor_handle(value.tensor_handle().id());
    case v1::Value::kTuple: {
      std::vector<Value> fields;
      fields.reserve(static_cast<size_t>(value.tuple().fields_size()));
      for (const v1::Value& f : value.tuple().fields()) {
        TETHER_ASSIGN_OR_RETURN(Value v, DecodeValueAt(f, options, depth + 1));
        fields.push_back(std::move(v));
      }
      return MakeTuple(std::move(fields));
    }
    case v1::Value::kObject:
      if (!options.resolve_object_handle) return ValueError("object handles are not accepted here");
      return options.resolve_object_handle(value.object().id());
  }
  return ValueError("unknown value kind ", static_cast<int>(value.kind_case()));
}

}  // namespace

absl::Status EncodeValue(const Value& value, const EncodeOptions& options, v1::Value* out) {
  return EncodeValueAt(value, options, 0, out);
}

absl::StatusOr<Value> DecodeValue(const v1::Value& value, const DecodeOptions& options) {
  return DecodeValueAt(value, options, 0);
}

void EncodeBenchmarkResult(const profiling::BenchmarkResult& result, v1::BenchmarkResult* out) {
  out->mutable_samples()->Assign(result.results.begin(), result.results.end());
  out->set_mean(result.mean);
  out->set_median(result.median);
  out->set_min(result.min);
  out->set_max(result.max);
  out->set_std(result.std);
  out->set_total_calls(result.total_calls);
  out->set_number_per_repeat(result.number_per_repeat);
  out->set_exclusive(result.exclusive);
  out->set_wait_seconds(result.wait_seconds);
}

profiling::BenchmarkResult DecodeBenchmarkResult(const v1::BenchmarkResult& result) {
  profiling::BenchmarkResult out = profiling::BenchmarkResult::FromSamples(
      std::vector<double>(result.samples().begin(), result.samples().end()), result.total_calls(),
      result.number_per_repeat());
  out.exclusive = result.exclusive();
  out.wait_seconds = result.wait_seconds();
  return out;
}

namespace {

void EncodeMetric(const profiling::Metric& metric, v1::Metric* out) {
  if (auto* d = std::get_if<profiling::Duration>(&metric))
    out->set_microseconds(d->microseconds);
  else if (auto* c = std::get_if<profiling::Count>(&metric))
    out->set_count(c->value);
  else if (auto* p = std::get_if<profiling::Percent>(&metric))
    out->set_percent(p->percent);
  else if (auto* r = std::get_if<profiling::Ratio>(&metric))
    out->set_ratio(r->ratio);
  else
    out->set_text(std::get<std::string>(metric));
}

absl::StatusOr<profiling::Metric> DecodeMetric(const v1::Metric& metric) {
  switch (metric.kind_case()) {
    case v1::Metric::kMicroseconds:
      return profiling::Metric(profiling::Duration{metric.microseconds()});
    case v1::Metric::kCount:
      return profiling::Metric(profiling::Count{metric.count()});
    case v1::Metric::kPercent:
      return profiling::Metric(profiling::Percent{metric.percent()});
    case v1::Metric::kRatio:
      return profiling::Metric(profiling::Ratio{metric.ratio()});
    case v1::Metric::kText:
      return profiling::Metric(metric.text());
    default:
      return ValueError("report metric has no value");
  }
}

void EncodeRow(const profiling::MetricMap& row, v1::MetricRow* out) {
  for (const auto& [key, metric] : row) EncodeMetric(metric, &(*out->mutable_metrics())[key]);
}

absl::StatusOr<profiling::MetricMap> DecodeRow(const v1::MetricRow& row) {
  profiling::MetricMap out;
  for (const auto& [key, metric] : row.metrics()) {
    TETHER_ASSIGN_OR_RETURN(out[key], DecodeMetric(metric));
  }
  return out;
}

}  // namespace

void EncodeReport(const profiling::Report& report, v1::Report* out) {
  for (const auto& row : report.calls) EncodeRow(row, out->add_calls());
  for (const auto& [device, row] : report.device_metrics)
    EncodeRow(row, &(*out->mutable_device_metrics())[device]);
  EncodeRow(report.configuration, out->mutable_configuration());
}

absl::StatusOr<profiling::Report> DecodeReport(const v1::Report& report) {
  profiling::Report out;
  for (const auto& row : report.calls()) {
    TETHER_ASSIGN_OR_RETURN(profiling::MetricMap m, DecodeRow(row));
    out.calls.push_back(std::move(m));
  }
  for (const auto& [device, row] : report.device_metrics()) {
    TETHER_ASSIGN_OR_RETURN(out.device_metrics[device], DecodeRow(row));
  }
  TETHER_ASSIGN_OR_RETURN(out.configuration, DecodeRow(report.configuration()));
  return out;
}

void EncodeTimeEvaluatorOptions(const profiling::TimeEvaluatorOptions& options,
                                v1::TimeEvaluatorOptions* out) {
  out->set_number(options.number);
  out->set_repeat(options.repeat);
  out->set_min_repeat_ms(options.min_repeat_ms);
  out->set_limit_zero_time_iterations(options.limit_zero_time_iterations);
  out->set_cooldown_interval_ms(options.cooldown_interval_ms);
  out->set_repeats_to_cooldown(options.repeats_to_cooldown);
  out->set_cache_flush_bytes(options.cache_flush_bytes);
  out->set_f_preproc(options.f_preproc);
}

profiling::TimeEvaluatorOptions DecodeTimeEvaluatorOptions(
    const v1::TimeEvaluatorOptions& options) {
  // Absent: the default; present: as given (0 included, so number=0 is
  // refused by Validate() and limit_zero_time_iterations=0 means one batch,
  // as for a local VM).
  profiling::TimeEvaluatorOptions out;
  if (options.has_number()) out.number = options.number();
  if (options.has_repeat()) out.repeat = options.repeat();
  out.min_repeat_ms = options.min_repeat_ms();
  if (options.has_limit_zero_time_iterations()) {
    out.limit_zero_time_iterations = options.limit_zero_time_iterations();
  }
  out.cooldown_interval_ms = options.cooldown_interval_ms();
  if (options.has_repeats_to_cooldown()) out.repeats_to_cooldown = options.repeats_to_cooldown();
  out.cache_flush_bytes = options.cache_flush_bytes();
  out.f_preproc = options.f_preproc();
  return out;
}

}  // namespace tether::rpc
