// CallValues: argument encoding and result decoding for calls on a session.
#include "client/call_values.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "proto/codec/value_codec.h"
#include "runtime/core/error.h"

namespace tether::client {

absl::Status CallValues::EncodeArg(const Value& value, int depth, v1::Value* out) {
  if (depth > rpc::kMaxValueDepth) {
    return ValueError("argument nests deeper than ", rpc::kMaxValueDepth, " levels");
  }
  if (RemoteHandleObj* handle = AsRemoteHandle(value)) {
    if (handle->kind() == RemoteHandleObj::Kind::kTensor) {
      out->mutable_tensor_handle()->set_id(handle->id());
    } else {
      out->mutable_object()->set_id(handle->id());
      out->mutable_object()->set_type_key(handle->remote_type_key());
    }
    return absl::OkStatus();
  }
  if (value.is_tuple()) {
    v1::Tuple* tuple = out->mutable_tuple();
    for (const Value& field : value.AsRef<TupleObj>()->fields) {
      TETHER_RETURN_IF_ERROR(EncodeArg(field, depth + 1, tuple->add_fields()));
    }
    return absl::OkStatus();
  }
  if (value.is_tensor()) {
    Tensor t(value.AsRef<TensorObj>());
    if (static_cast<uint64_t>(t->NumBytes()) > session_->limits().max_inline_tensor_bytes()) {
      TETHER_ASSIGN_OR_RETURN(Value remote, session_->UploadTensor(t, Device::Cpu()));
      temps_.push_back(AsRemoteHandle(remote)->id());
      out->mutable_tensor_handle()->set_id(AsRemoteHandle(remote)->id());
      return absl::OkStatus();
    }
  }
  rpc::EncodeOptions options;
  options.max_inline_bytes = UINT64_MAX;
  return rpc::EncodeValue(value, options, out);
}

absl::Status CallValues::EncodeArgs(ArgSpan args,
                                    google::protobuf::RepeatedPtrField<v1::Value>* out) {
  for (const Value& arg : args) TETHER_RETURN_IF_ERROR(EncodeArg(arg, 0, out->Add()));
  return absl::OkStatus();
}

void CallValues::FreeTemps() {
  std::vector<uint64_t> ids = std::move(temps_);
  ids.insert(ids.end(), fetched_.begin(), fetched_.end());
  temps_.clear();
  fetched_.clear();
  if (ids.empty()) return;
  v1::CallRequest request;
  request.mutable_free_objects()->mutable_ids()->Assign(ids.begin(), ids.end());
  (void)session_->Call(request, transport_);
}

absl::StatusOr<Value> CallValues::DecodeResult(const v1::Value& value, int depth, bool keep) {
  if (depth > rpc::kMaxValueDepth) {
    return ValueError("result nests deeper than ", rpc::kMaxValueDepth, " levels");
  }
  switch (value.kind_case()) {
    case v1::Value::kTuple: {
      std::vector<Value> fields;
      fields.reserve(static_cast<size_t>(value.tuple().fields_size()));
      for (const v1::Value& field : value.tuple().fields()) {
        TETHER_ASSIGN_OR_RETURN(Value v, DecodeResult(field, depth + 1, keep));
        fields.push_back(std::move(v));
      }
      return MakeTuple(std::move(fields));
    }
    case v1::Value::kTensorHandle: {
      const uint64_t id = value.tensor_handle().id();
      if (fetch_outputs_ && !keep) {
        fetched_.push_back(id);
        TETHER_ASSIGN_OR_RETURN(Tensor t, session_->DownloadTensor(id));
        return Value(t);
      }
      TETHER_ASSIGN_OR_RETURN(rpc::TensorSpec spec,
                              rpc::DecodeTensorHeader(value.tensor_handle().header()));
      return MakeRemoteTensorValue(id, std::move(spec));
    }
    case v1::Value::kObject:
      return Value(Ref<RemoteHandleObj>(new RemoteHandleObj(
          RemoteHandleObj::Kind::kObject, value.object().id(), value.object().type_key(), {})));
    default:
      return rpc::DecodeValue(value, {});
  }
}

}  // namespace tether::client
