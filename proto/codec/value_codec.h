// Conversions between runtime values and their wire form (tether.v1.Value and
// friends), shared by the daemon and the client so both sides agree exactly.
// Everything decoded from the wire is checked: data types, shapes (negative,
// overflowing, too many dims), byte counts against dtype x shape, device types,
// nesting depth. Bad input is INVALID_ARGUMENT naming the problem. Errors
// travel through status_codec.h; module digests through sha256.h.
#ifndef TETHER_PROTO_CODEC_VALUE_CODEC_H_
#define TETHER_PROTO_CODEC_VALUE_CODEC_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/core/tensor.h"
#include "runtime/core/value.h"
#include "runtime/profiling/benchmark_result.h"
#include "runtime/profiling/report.h"
#include "runtime/profiling/time_evaluator.h"
#include "tether/v1/tether.pb.h"
#include "tether/v1/values.pb.h"

namespace tether::rpc {

// The protocol version this build speaks. Peers must share the major.
inline constexpr uint32_t kProtocolMajor = 1;
inline constexpr uint32_t kProtocolMinor = 6;

// Tuples nested deeper than this are refused (a hostile message must not
// exhaust the stack).
inline constexpr int kMaxValueDepth = 64;

// A validated tensor header.
struct TensorSpec {
  DataType dtype;
  TensorObj::Dims shape;
  Device device;
  int64_t num_bytes = 0;  // numel x element size, overflow-checked
};

absl::StatusOr<TensorSpec> DecodeTensorHeader(const v1::TensorHeader& header);
void EncodeTensorHeader(DataType dtype, std::span<const int64_t> shape, Device device,
                        v1::TensorHeader* out);

// A CPU tensor holding the inline bytes (which must be exactly num_bytes).
absl::StatusOr<Tensor> DecodeInlineTensor(const v1::InlineTensor& tensor);
// Copies `tensor` (any device; compacted if strided) into `out`.
absl::Status EncodeInlineTensor(const Tensor& tensor, v1::InlineTensor* out);

void EncodeDataType(DataType dtype, v1::DataType* out);
absl::StatusOr<DataType> DecodeDataType(const v1::DataType& dtype);
void EncodeDevice(Device device, v1::Device* out);
// The largest device index a request may name.
inline constexpr int32_t kMaxDeviceIndex = 1023;
// INVALID_ARGUMENT (ValueError) for an unknown type or an index outside
// [0, kMaxDeviceIndex].
absl::StatusOr<Device> DecodeDevice(const v1::Device& device);

// How EncodeValue treats tensors and objects that should stay remote.
struct EncodeOptions {
  // Tensors above this many bytes go through `make_tensor_handle` when it is set.
  uint64_t max_inline_bytes = uint64_t{1} << 20;
  // Registers a tensor as a session handle and returns its id (daemon side).
  std::function<absl::StatusOr<uint64_t>(const Tensor&)> make_tensor_handle;
  // Registers any other object (closures) and returns its id (daemon side).
  std::function<absl::StatusOr<uint64_t>(const Value&)> make_object_handle;
  // Every tensor becomes a handle (ReturnMode HANDLE); needs make_tensor_handle.
  bool always_handle = false;
};

absl::Status EncodeValue(const Value& value, const EncodeOptions& options, v1::Value* out);

// How DecodeValue resolves handles (daemon side: the session's objects).
struct DecodeOptions {
  std::function<absl::StatusOr<Value>(uint64_t id)> resolve_tensor_handle;
  std::function<absl::StatusOr<Value>(uint64_t id)> resolve_object_handle;
};

absl::StatusOr<Value> DecodeValue(const v1::Value& value, const DecodeOptions& options);

// Results.
void EncodeBenchmarkResult(const profiling::BenchmarkResult& result, v1::BenchmarkResult* out);
profiling::BenchmarkResult DecodeBenchmarkResult(const v1::BenchmarkResult& result);
void EncodeReport(const profiling::Report& report, v1::Report* out);
absl::StatusOr<profiling::Report> DecodeReport(const v1::Report& report);
void EncodeTimeEvaluatorOptions(const profiling::TimeEvaluatorOptions& options,
                                v1::TimeEvaluatorOptions* out);
profiling::TimeEvaluatorOptions DecodeTimeEvaluatorOptions(const v1::TimeEvaluatorOptions& options);

}  // namespace tether::rpc

#endif  // TETHER_PROTO_CODEC_VALUE_CODEC_H_
