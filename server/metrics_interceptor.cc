// The byte-counting interceptor: a received message's size from the parsed
// message, a sent one's from its serialized form.
#include "server/metrics_interceptor.h"

#include <string>

#include "absl/strings/match.h"
#include "google/protobuf/message_lite.h"
#include "grpcpp/support/byte_buffer.h"

namespace tether::server {
namespace {

constexpr char kServicePrefix[] = "/tether.v1.Tether/";

class ByteCounter final : public grpc::experimental::Interceptor {
 public:
  ByteCounter(DaemonMetrics* metrics, std::string method)
      : metrics_(metrics), method_(std::move(method)) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      if (grpc::ByteBuffer* sent = methods->GetSerializedSendMessage(); sent != nullptr) {
        metrics_->BytesSent(method_, sent->Length());
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      // Every message of the Tether service is a generated protobuf class,
      // whose MessageLite base is where gRPC's pointer points.
      if (const void* received = methods->GetRecvMessage(); received != nullptr) {
        metrics_->BytesReceived(
            method_, static_cast<const google::protobuf::MessageLite*>(received)->ByteSizeLong());
      }
    }
    methods->Proceed();
  }

 private:
  DaemonMetrics* metrics_;
  const std::string method_;
};

class ByteCounterFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit ByteCounterFactory(DaemonMetrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    const char* method = info->method();
    if (method == nullptr || !absl::StartsWith(method, kServicePrefix)) return nullptr;
    return new ByteCounter(metrics_, std::string(method + sizeof(kServicePrefix) - 1));
  }

 private:
  DaemonMetrics* metrics_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> NewByteCounterFactory(
    DaemonMetrics* metrics) {
  return std::make_unique<ByteCounterFactory>(metrics);
}

}  // namespace tether::server
