// Counts the bytes of every message of the tether.v1.Tether service for
// DaemonMetrics (received and sent, by method), as a gRPC server
// interceptor, so no handler or reactor counts for itself. Other services
// (health, reflection) are not counted.
//
// Thread contract: thread-safe; one interceptor per call, the factory shared.
#ifndef TETHER_SERVER_METRICS_INTERCEPTOR_H_
#define TETHER_SERVER_METRICS_INTERCEPTOR_H_

#include <memory>

#include "grpcpp/support/server_interceptor.h"
#include "server/metrics.h"

namespace tether::server {

// Borrows `metrics`, which must outlive the server.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> NewByteCounterFactory(
    DaemonMetrics* metrics);

}  // namespace tether::server

#endif  // TETHER_SERVER_METRICS_INTERCEPTOR_H_
