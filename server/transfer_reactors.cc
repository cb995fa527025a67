// The module and tensor stream reactors (transfer_reactors.h).
#include "server/transfer_reactors.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "proto/codec/status_codec.h"
#include "proto/codec/value_codec.h"
#include "runtime/core/error.h"
#include "server/staging_buffer.h"

namespace tether::server {
namespace {

using rpc::ToGrpcStatus;

// Cancels a module or tensor stream after `limit` without progress (M5).
// Touch() restarts the clock; called from the reactor's callbacks, one at a
// time. Destroying it (with its reactor) cancels the timer first.
class StreamIdleWatch {
 public:
  StreamIdleWatch(DeadlineTimer* timer, absl::Duration limit, grpc::CallbackServerContext* context)
      : timer_(timer), limit_(limit), context_(context) {
    Touch();
  }
  ~StreamIdleWatch() {
    if (token_ != 0) timer_->Cancel(token_);
  }
  StreamIdleWatch(const StreamIdleWatch&) = delete;
  StreamIdleWatch& operator=(const StreamIdleWatch&) = delete;
  void Touch() {
    if (timer_ == nullptr || limit_ == absl::InfiniteDuration()) return;
    if (token_ != 0) timer_->Cancel(token_);
    token_ = timer_->Schedule(absl::Now() + limit_, [context = context_] { context->TryCancel(); });
  }

 private:
  DeadlineTimer* const timer_;
  const absl::Duration limit_;
  grpc::CallbackServerContext* const context_;
  uint64_t token_ = 0;
};

// UploadModule: header, then data chunks into a ModuleStore::Upload. A cut
// stream never reaches Finish with the right size, and destroying the upload
// removes its temp file.
class UploadModuleReactor : public grpc::ServerReadReactor<v1::UploadModuleRequest> {
 public:
  UploadModuleReactor(grpc::CallbackServerContext* context, ModuleStore* store,
                      DeadlineTimer* timer, absl::Duration idle_timeout,
                      v1::UploadModuleResponse* response)
      : context_(context), store_(store), response_(response), idle_(timer, idle_timeout, context) {
    StartRead(&request_);
  }
  void OnReadDone(bool ok) override {
    idle_.Touch();
    if (!ok) {
      if (!upload_) return Fail(absl::InvalidArgumentError("module upload sent no header"));
      absl::Status status = upload_->Finish();
      upload_.reset();
      return Fail(status);
    }
    if (request_.has_header()) {
      if (upload_ || header_seen_) {
        return Fail(absl::InvalidArgumentError("module upload sent a second header"));
      }
      header_seen_ = true;
      const auto& h = request_.header();
      response_->set_sha256(h.sha256());
      absl::StatusOr<std::optional<uint64_t>> present = store_->Find(h.sha256());
      if (!present.ok()) return Fail(present.status());
      if (present->has_value()) {
        response_->set_already_present(true);
        return Fail(absl::OkStatus());
      }
      absl::StatusOr<std::unique_ptr<ModuleStore::Upload>> upload =
          store_->BeginUpload(h.sha256(), h.size_bytes());
      if (!upload.ok()) return Fail(upload.status());
      upload_ = std::move(*upload);
    } else {
      if (!upload_) return Fail(absl::InvalidArgumentError("module upload data before the header"));
      absl::Status status = upload_->Append(request_.data());
      if (!status.ok()) return Fail(status);
    }
    StartRead(&request_);
  }
  void OnDone() override { delete this; }

 private:
  void Fail(const absl::Status& status) {
    upload_.reset();
    Finish(ToGrpcStatus(status, context_));
  }

  grpc::CallbackServerContext* context_;
  ModuleStore* store_;
  v1::UploadModuleResponse* response_;
  v1::UploadModuleRequest request_;
  std::unique_ptr<ModuleStore::Upload> upload_;
  bool header_seen_ = false;
  StreamIdleWatch idle_;
};

// UploadTensor: header (session, dtype, shape, device), then exactly
// dtype x shape bytes. CPU tensors are written in place; others are staged on
// the host and copied once at the end. An isolated session's tensor is
// relayed to its worker message by message from the executor: the next
// message is read only once the worker took the last, so the daemon holds
// one chunk, whatever the size (H3).
// The session a transfer names, once the fence (null outside a farm) admits
// its fencing token, as RunCall does for every call.
absl::StatusOr<std::shared_ptr<Session>> FencedSession(SessionTable* sessions, SessionFence* fence,
                                                       const std::string& session_id) {
  TETHER_ASSIGN_OR_RETURN(std::shared_ptr<Session> session, sessions->Get(session_id));
  if (fence != nullptr) TETHER_RETURN_IF_ERROR(fence->Admit(session->fencing_token(), false));
  return session;
}

class UploadTensorReactor : public grpc::ServerReadReactor<v1::UploadTensorRequest> {
 public:
  UploadTensorReactor(grpc::CallbackServerContext* context, SessionTable* sessions,
                      SessionFence* fence, Executor* executor, DeadlineTimer* timer,
                      absl::Duration idle_timeout, v1::UploadTensorResponse* response)
      : context_(context),
        sessions_(sessions),
        fence_(fence),
        executor_(executor),
        response_(response),
        idle_(timer, idle_timeout, context) {
    StartRead(&request_);
  }
  void OnReadDone(bool ok) override {
    idle_.Touch();
    if (!ok) return Done();
    if (request_.has_header()) {
      if (session_) return Fail(absl::InvalidArgumentError("tensor upload sent a second header"));
      absl::StatusOr<std::shared_ptr<Session>> session =
          FencedSession(sessions_, fence_, request_.header().session_id());
      if (!session.ok()) return Fail(session.status());
      absl::StatusOr<rpc::TensorSpec> spec = rpc::DecodeTensorHeader(request_.header().tensor());
      if (!spec.ok()) return Fail(spec.status());
      // Before any allocation: the session's byte limit (its worker checks
      // its own too).
      if (absl::Status room = (*session)->CheckTensorRoom(static_cast<uint64_t>(spec->num_bytes));
          !room.ok()) {
        return Fail(room);
      }
      if ((*session)->worker() != nullptr) {
        // The worker allocates the tensor, and refuses what it cannot hold.
        session_ = std::move(*session);
        session_->BeginCall();
        spec_ = std::move(*spec);
        upload_ = session_->worker()->NewUpload();
        relay_.store(upload_.get());
        executor_->Post([this, header = request_.header()] {
          Executor::BlockingScope waiting;  // on the worker
          absl::Status started = upload_->Start(header);
          if (!started.ok()) return Fail(started);
          StartRead(&request_);
        });
        return;
      } else {
        absl::StatusOr<Tensor> tensor = Tensor::Empty(spec->shape, spec->dtype, spec->device);
        if (!tensor.ok()) return Fail(tensor.status());
        tensor_ = std::move(*tensor);
      }
      session_ = std::move(*session);
      session_->BeginCall();
      spec_ = std::move(*spec);
      if (spec_.device.type == kDLCPU) {
        dest_ = static_cast<char*>(tensor_->element_data());
      } else {
        // Bounded before a byte arrives: the size is the client's word.
        absl::StatusOr<StagingBuffer> staging =
            StagingBuffer::Allocate(static_cast<uint64_t>(spec_.num_bytes), "an uploaded tensor");
        if (!staging.ok()) return Fail(staging.status());
        staging_ = std::move(*staging);
        dest_ = staging_.data();
      }
    } else {
      if (!session_)
        return Fail(absl::InvalidArgumentError("tensor upload data before the header"));
      const std::string& data = request_.data();
      if (data.size() > static_cast<uint64_t>(spec_.num_bytes) - received_) {
        return Fail(ValueError("tensor upload sends more than the ", spec_.num_bytes,
                               " bytes of dtype x shape"));
      }
      received_ += data.size();
      if (upload_) {
        executor_->Post([this, chunk = std::move(*request_.mutable_data())]() mutable {
          Executor::BlockingScope waiting;  // on the worker
          if (upload_->Write(std::move(chunk))) return StartRead(&request_);
          // The worker stopped reading: its status says why.
          absl::StatusOr<v1::TensorHandle> ended = upload_->Finish();
          Fail(ended.ok() ? absl::InternalError("the session worker stopped reading the tensor")
                          : ended.status());
        });
        return;
      }
      if (!data.empty()) std::memcpy(dest_ + received_ - data.size(), data.data(), data.size());
    }
    StartRead(&request_);
  }
  void OnCancel() override {
    // A relay waiting on a worker that stopped answering ends now.
    if (SessionWorker::TensorUpload* relay = relay_.load()) relay->Cancel();
  }
  void OnDone() override {
    if (session_) session_->EndCall();
    delete this;
  }

 private:
  void Done() {
    if (!session_) return Fail(absl::InvalidArgumentError("tensor upload sent no header"));
    if (received_ != static_cast<uint64_t>(spec_.num_bytes)) {
      absl::Status short_upload = ValueError("tensor upload sent ", received_,
                                             " bytes, dtype x shape needs ", spec_.num_bytes);
      if (!upload_) return Fail(short_upload);
      // The worker may have refused the header already (a tensor it cannot
      // allocate): that is the error to report.
      executor_->Post([this, short_upload] {
        Executor::BlockingScope waiting;  // on the worker
        absl::StatusOr<v1::TensorHandle> ended = upload_->Finish();
        Fail(ended.ok() ? short_upload : ended.status());
      });
      return;
    }
    if (upload_) {
      executor_->Post([this] {
        Executor::BlockingScope waiting;  // on the worker
        absl::StatusOr<v1::TensorHandle> handle = upload_->Finish();
        if (!handle.ok()) return Fail(handle.status());
        *response_->mutable_tensor() = std::move(*handle);
        Finish(grpc::Status::OK);
      });
      return;
    }
    if (staging_.size() != 0) {
      absl::Status status = tensor_.CopyFromBytes(staging_.data(), staging_.size());
      if (!status.ok()) return Fail(status);
    }
    absl::StatusOr<uint64_t> id = session_->AddTensor(tensor_);
    if (!id.ok()) return Fail(id.status());
    v1::TensorHandle* handle = response_->mutable_tensor();
    handle->set_id(*id);
    rpc::EncodeTensorHeader(spec_.dtype, spec_.shape, spec_.device, handle->mutable_header());
    Finish(grpc::Status::OK);
  }
  void Fail(const absl::Status& status) { Finish(ToGrpcStatus(status, context_)); }

  grpc::CallbackServerContext* context_;

  SessionTable* sessions_;
  SessionFence* fence_;
  Executor* executor_;
  v1::UploadTensorResponse* response_;
  v1::UploadTensorRequest request_;
  std::shared_ptr<Session> session_;  // co-owned while the stream runs
  // An isolated session's relay to its worker (destroyed before session_);
  // relay_ is the same, for OnCancel on another thread.
  std::unique_ptr<SessionWorker::TensorUpload> upload_;
  std::atomic<SessionWorker::TensorUpload*> relay_{nullptr};
  rpc::TensorSpec spec_;
  Tensor tensor_;
  StagingBuffer staging_;
  char* dest_ = nullptr;
  uint64_t received_ = 0;
  StreamIdleWatch idle_;
};

// DownloadTensor: the header with the first chunk, then chunk_bytes pieces.
// An isolated session's tensor is relayed from its worker message by message
// (on the executor): the next is read from the worker only once the client
// took the last, so the daemon holds one chunk, whatever the size (H3), and
// the worker cannot send more than the header it announced.
class DownloadTensorReactor : public grpc::ServerWriteReactor<v1::DownloadTensorResponse> {
 public:
  DownloadTensorReactor(grpc::CallbackServerContext* context, SessionTable* sessions,
                        SessionFence* fence, Executor* executor, DeadlineTimer* timer,
                        const ServiceLimits& limits, const v1::DownloadTensorRequest& request)
      : context_(context), idle_(timer, limits.stream_idle_timeout, context) {
    absl::Status status = Prepare(sessions, fence, limits, request);
    if (!status.ok()) {
      Finish(ToGrpcStatus(status, context_));
      return;
    }
    if (session_->worker() != nullptr) {
      executor_ = executor;
      download_ = session_->worker()->NewDownload();  // before OnCancel can run
      executor_->Post([this, id = request.tensor_id()] {
        Executor::BlockingScope waiting;  // on the worker
        download_->Start(id, chunk_);
        RelayNext();
      });
      return;
    }
    WriteNext();
  }
  void OnWriteDone(bool ok) override {
    idle_.Touch();
    if (!ok) return Finish(grpc::Status(grpc::StatusCode::CANCELLED, "download cancelled"));
    if (download_) {
      executor_->Post([this] { RelayNext(); });
      return;
    }
    if (offset_ >= size_) return Finish(grpc::Status::OK);
    WriteNext();
  }
  void OnCancel() override {
    // A relay waiting on a worker that stopped answering ends now.
    if (download_) download_->Cancel();
  }
  void OnDone() override {
    if (session_) session_->EndCall();
    delete this;
  }

 private:
  absl::Status Prepare(SessionTable* sessions, SessionFence* fence, const ServiceLimits& limits,
                       const v1::DownloadTensorRequest& request) {
    TETHER_ASSIGN_OR_RETURN(std::shared_ptr<Session> session,
                            FencedSession(sessions, fence, request.session_id()));
    if (session->worker() == nullptr) {
      TETHER_ASSIGN_OR_RETURN(tensor_, session->FindTensor(request.tensor_id()));
    }
    session_ = std::move(session);
    session_->BeginCall();
    chunk_ = request.chunk_bytes() == 0 ? limits.chunk_bytes : request.chunk_bytes();
    chunk_ = std::clamp<uint64_t>(chunk_, 1, limits.max_message_bytes - (64 << 10));
    if (session_->worker() != nullptr) return absl::OkStatus();
    rpc::EncodeTensorHeader(tensor_->dtype(), tensor_->shape(), tensor_->device(),
                            reply_.mutable_header());
    if (tensor_->device().type == kDLCPU && tensor_->IsContiguous()) {
      data_ = static_cast<const char*>(tensor_->element_data());
      size_ = static_cast<uint64_t>(tensor_->NumBytes());
    } else {
      // Another device, or strided: one compact host copy to stream from.
      TETHER_RETURN_IF_ERROR(rpc::EncodeInlineTensor(tensor_, &compact_));
      data_ = compact_.data().data();
      size_ = compact_.data().size();
    }
    return absl::OkStatus();
  }
  // The worker's next message on to the client, or the end of the stream.
  void RelayNext() {
    Executor::BlockingScope waiting;  // on the worker
    absl::Status status;
    if (download_->Read(&reply_)) {
      if (!announced_) {
        absl::StatusOr<rpc::TensorSpec> spec = rpc::DecodeTensorHeader(reply_.header());
        status = spec.ok() ? absl::OkStatus() : spec.status();
        if (spec.ok()) size_ = static_cast<uint64_t>(spec->num_bytes);
        announced_ = true;
      }
      if (status.ok() && reply_.data().size() > size_ - offset_) {
        status = absl::InternalError("the session worker sent more tensor bytes than its header");
      }
      if (status.ok()) {
        offset_ += reply_.data().size();
        StartWrite(&reply_);  // nothing of this reactor is touched after
        return;
      }
    } else {
      status = download_->Finish();
      if (status.ok() && (!announced_ || offset_ != size_)) {
        status = absl::InternalError(absl::StrCat("the session worker sent ", offset_,
                                                  " tensor bytes, its header announced ", size_));
      }
      if (status.ok()) return Finish(grpc::Status::OK);
    }
    Finish(ToGrpcStatus(status, context_));
  }
  void WriteNext() {
    uint64_t n = std::min(chunk_, size_ - offset_);
    reply_.set_data(n == 0 ? "" : data_ + offset_, n);
    offset_ += n;
    // Nothing of this reactor may be touched after the write starts: its
    // completion can finish and delete it on another thread.
    if (offset_ >= size_) {
      StartWriteLast(&reply_, grpc::WriteOptions());
    } else {
      StartWrite(&reply_);
    }
  }

  grpc::CallbackServerContext* context_;
  std::shared_ptr<Session> session_;
  Tensor tensor_;
  v1::InlineTensor compact_;
  // An isolated session's relay from its worker (destroyed before session_).
  Executor* executor_ = nullptr;
  std::unique_ptr<SessionWorker::TensorDownload> download_;
  bool announced_ = false;  // the worker's header has come
  v1::DownloadTensorResponse reply_;
  const char* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t offset_ = 0;
  uint64_t chunk_ = 0;
  StreamIdleWatch idle_;
};

}  // namespace

grpc::ServerReadReactor<v1::UploadModuleRequest>* NewUploadModuleReactor(
    grpc::CallbackServerContext* context, ModuleStore* store, DeadlineTimer* timer,
    absl::Duration idle_timeout, v1::UploadModuleResponse* response) {
  return new UploadModuleReactor(context, store, timer, idle_timeout, response);
}

grpc::ServerReadReactor<v1::UploadTensorRequest>* NewUploadTensorReactor(
    grpc::CallbackServerContext* context, SessionTable* sessions, SessionFence* fence,
    Executor* executor, DeadlineTimer* timer, absl::Duration idle_timeout,
    v1::UploadTensorResponse* response) {
  return new UploadTensorReactor(context, sessions, fence, executor, timer, idle_timeout, response);
}

grpc::ServerWriteReactor<v1::DownloadTensorResponse>* NewDownloadTensorReactor(
    grpc::CallbackServerContext* context, SessionTable* sessions, SessionFence* fence,
    Executor* executor, DeadlineTimer* timer, const ServiceLimits& limits,
    const v1::DownloadTensorRequest& request) {
  return new DownloadTensorReactor(context, sessions, fence, executor, timer, limits, request);
}

}  // namespace tether::server
