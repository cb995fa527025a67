// The chunked stream reactors of the Tether service: UploadModule (into the
// module store), UploadTensor and DownloadTensor (a session's tensors,
// relayed chunk by chunk to and from an isolated session's worker). Each
// cancels its stream after the service's stream idle timeout without
// progress. TetherService (tether_service.h) creates them once the call is
// authenticated; gRPC deletes them when they finish. A farm daemon's tensor
// streams ask its fence (`fence`, null outside a farm) once the session is
// known, as every call does: a stale holder's transfer is refused.
//
// Thread contract: each reactor follows gRPC's callback rules (one callback
// at a time); the factories are thread-safe.
#ifndef TETHER_SERVER_TRANSFER_REACTORS_H_
#define TETHER_SERVER_TRANSFER_REACTORS_H_

#include "absl/time/time.h"
#include "grpcpp/support/server_callback.h"
#include "server/deadline_timer.h"
#include "server/executor.h"
#include "server/module_store.h"
#include "server/session_fence.h"
#include "server/session_table.h"
#include "server/tether_service.h"
#include "tether/v1/tether.grpc.pb.h"

namespace tether::server {

grpc::ServerReadReactor<v1::UploadModuleRequest>* NewUploadModuleReactor(
    grpc::CallbackServerContext* context, ModuleStore* store, DeadlineTimer* timer,
    absl::Duration idle_timeout, v1::UploadModuleResponse* response);

grpc::ServerReadReactor<v1::UploadTensorRequest>* NewUploadTensorReactor(
    grpc::CallbackServerContext* context, SessionTable* sessions, SessionFence* fence,
    Executor* executor, DeadlineTimer* timer, absl::Duration idle_timeout,
    v1::UploadTensorResponse* response);

grpc::ServerWriteReactor<v1::DownloadTensorResponse>* NewDownloadTensorReactor(
    grpc::CallbackServerContext* context, SessionTable* sessions, SessionFence* fence,
    Executor* executor, DeadlineTimer* timer, const ServiceLimits& limits,
    const v1::DownloadTensorRequest& request);

}  // namespace tether::server

#endif  // TETHER_SERVER_TRANSFER_REACTORS_H_
