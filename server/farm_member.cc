// FarmMember over the farm library: the daemon's record from its own
// handshake, the registration, the probe and the fence.
#include "server/farm_member.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "farm/etcd_client.h"
#include "farm/registration.h"
#include "grpcpp/grpcpp.h"
#include "proto/codec/value_codec.h"
#include "runtime/core/file.h"
#include "server/event_log.h"
#include "server/farm_probe.h"
#include "tether/v1/tether.grpc.pb.h"

namespace tether::server {
namespace {

// The daemon's handshake, asked over its probe listener: the record says
// exactly what clients will be told.
absl::StatusOr<v1::HandshakeResponse> OwnHandshake(const FarmDaemonFacts& facts) {
  auto stub = v1::Tether::NewStub(
      grpc::CreateChannel(facts.probe_target, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  if (!facts.auth_token.empty()) {
    context.AddMetadata("authorization", absl::StrCat("Bearer ", facts.auth_token));
  }
  v1::HandshakeRequest request;
  request.mutable_client_protocol()->set_major(rpc::kProtocolMajor);
  request.mutable_client_protocol()->set_minor(rpc::kProtocolMinor);
  request.set_client_name("tetherd-farm");
  v1::HandshakeResponse response;
  grpc::Status status = stub->Handshake(&context, request, &response);
  if (!status.ok()) {
    return absl::UnavailableError(
        absl::StrCat("the daemon's own handshake for its farm record: ", status.error_message()));
  }
  return response;
}

std::string AttributeText(const v1::Value& value) {
  absl::StatusOr<Value> decoded = rpc::DecodeValue(value, {});
  if (!decoded.ok() || decoded->is_none()) return "";
  if (decoded->is_string()) return decoded->string_value();
  return decoded->ToString();
}

farm::v1::DeviceRecord RecordFrom(const v1::HandshakeResponse& handshake,
                                  const FarmMemberOptions& options, const FarmDaemonFacts& facts) {
  farm::v1::DeviceRecord record;
  record.set_id(options.id.empty() ? facts.address : options.id);
  record.set_address(facts.address);
  record.set_protocol(
      absl::StrCat(handshake.protocol().major(), ".", handshake.protocol().minor()));
  record.set_daemon_version(handshake.runtime_version());
  record.mutable_target()->set_triple(handshake.target().triple());
  record.mutable_target()->set_cpu(handshake.target().cpu());
  *record.mutable_target()->mutable_features() = handshake.target().features();
  record.mutable_target()->set_description(handshake.target().description());
  record.mutable_target()->set_cores(handshake.target().cores());
  for (const v1::DeviceInfo& info : handshake.devices()) {
    farm::v1::FarmDevice* device = record.add_devices();
    device->set_name(info.name());
    for (const auto& [name, value] : info.attributes()) {
      std::string text = AttributeText(value);
      if (!text.empty()) (*device->mutable_attributes())[name] = std::move(text);
    }
  }
  for (const auto& [k, v] : options.labels) (*record.mutable_labels())[k] = v;
  record.set_started_unix_ms(absl::ToUnixMillis(absl::Now()));
  record.set_tls(facts.tls);
  return record;
}

class FarmMemberImpl final : public FarmMember {
 public:
  explicit FarmMemberImpl(FarmMemberOptions options, farm::EtcdOptions etcd)
      : options_(std::move(options)), etcd_options_(std::move(etcd)) {}

  absl::Status Start(const FarmDaemonFacts& facts) override {
    absl::StatusOr<v1::HandshakeResponse> handshake = OwnHandshake(facts);
    if (!handshake.ok()) return handshake.status();
    absl::StatusOr<std::unique_ptr<farm::EtcdClient>> etcd =
        farm::EtcdClient::Create(etcd_options_);
    if (!etcd.ok()) return etcd.status();
    farm::RegistrationOptions registration;
    registration.key = options_.key;
    registration.record = RecordFrom(*handshake, options_, facts);
    registration.ttl = options_.ttl;
    registration.probe_interval = options_.probe_interval;
    registration.quarantine_after = options_.quarantine_after;
    registration.quarantine_after_crashes = options_.quarantine_after_crashes;
    registration.crash_window = options_.crash_window;
    if (options_.probe_interval > absl::ZeroDuration()) {
      absl::StatusOr<std::string> builtin = BuildCanaryExecutable();
      if (!builtin.ok()) return builtin.status();
      registration.probe = [facts, canary_file = options_.canary_file,
                            builtin = std::move(*builtin)]() -> absl::Status {
        ProbeOptions probe;
        probe.target = facts.probe_target;
        probe.auth_token = facts.auth_token;
        if (canary_file.empty()) {
          probe.canary = builtin;
          probe.expect_builtin_output = true;
        } else {
          // Read at every probe: an operator may replace it.
          absl::StatusOr<std::string> bytes = ReadFileToString(canary_file);
          if (!bytes.ok()) {
            return absl::FailedPreconditionError(absl::StrCat(
                "cannot read the canary ", canary_file, ": ", bytes.status().message()));
          }
          probe.canary = std::move(*bytes);
        }
        return ProbeDaemon(probe);
      };
    }
    const std::string id = registration.record.id();
    registration.log = [id](absl::string_view event, absl::string_view detail) {
      EventLine().Add("event", event).Add("farm-id", id).Quote("detail", detail).Write();
    };
    if (DaemonMetrics* metrics = facts.metrics) {
      // The farm leases the whole daemon: its one farm device is the id.
      registration.on_state = [metrics, id](const farm::MembershipState& state) {
        metrics->SetFarmRegistered(state.registered);
        // A quarantine keeps the device from the next holder, not from the
        // current one: the token gauge still shows who holds it.
        const FarmDeviceState device_state = state.quarantined ? FarmDeviceState::kQuarantined
                                             : state.holder_token != 0 ? FarmDeviceState::kLeased
                                                                       : FarmDeviceState::kFree;
        metrics->SetFarmDeviceState(id, device_state, state.holder_token);
      };
    }
    absl::StatusOr<std::unique_ptr<farm::Registration>> started =
        farm::Registration::Start(std::move(*etcd), std::move(registration));
    if (!started.ok()) return started.status();
    absl::MutexLock lock(&mu_);
    registration_ = std::move(*started);
    return absl::OkStatus();
  }

  std::string id() const override {
    absl::MutexLock lock(&mu_);
    return registration_ ? registration_->id() : "";
  }

  absl::Status Admit(int64_t token, bool may_block) override {
    std::shared_ptr<farm::Registration> registration;
    {
      absl::MutexLock lock(&mu_);
      registration = registration_;
    }
    if (registration == nullptr) {
      // Not registered yet: nobody can hold the device.
      if (token == 0) return absl::OkStatus();
      return absl::UnavailableError(absl::StrCat("fencing token ", token,
                                                 " cannot be checked: the daemon is not in the "
                                                 "farm (starting, or leaving it)"));
    }
    return registration->CheckFencingToken(token, may_block);
  }

  void Leave() override {
    std::shared_ptr<farm::Registration> registration;
    {
      absl::MutexLock lock(&mu_);
      registration = std::move(registration_);
    }
    // Deregisters once the last Admit using it is done, the lock released.
    registration.reset();
  }

  ~FarmMemberImpl() override { Leave(); }

 private:
  const FarmMemberOptions options_;
  const farm::EtcdOptions etcd_options_;
  mutable absl::Mutex mu_;
  // Set by Start, dropped by Leave; shared with the Admit calls using it.
  std::shared_ptr<farm::Registration> registration_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<FarmMember>> FarmMember::Create(FarmMemberOptions options) {
  farm::EtcdOptions etcd;
  if (absl::Status s = farm::ParseFarmUrl(options.url, &etcd); !s.ok()) return s;
  if (absl::Status s = farm::ValidateName("--farm-key", options.key); !s.ok()) return s;
  if (!options.id.empty()) {
    if (absl::Status s = farm::ValidateName("--farm-id", options.id); !s.ok()) return s;
  }
  etcd.ca_file = options.tls_ca;
  etcd.cert_file = options.tls_cert;
  etcd.key_file = options.tls_key;
  etcd.user = options.user;
  etcd.password_file = options.password_file;
  // The credential files are read now, so a bad one stops the daemon at start.
  absl::StatusOr<std::unique_ptr<farm::EtcdClient>> check = farm::EtcdClient::Create(etcd);
  if (!check.ok()) return check.status();
  return std::unique_ptr<FarmMember>(new FarmMemberImpl(std::move(options), std::move(etcd)));
}

}  // namespace tether::server
