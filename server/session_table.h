// SessionTable: the open sessions (session.h) by id. It hands out
// unguessable session ids, enforces the session limit and closes sessions
// idle longer than their lease (a reaper thread). Every session event is one
// line of the event log (event_log.h).
#ifndef TETHER_SERVER_SESSION_TABLE_H_
#define TETHER_SERVER_SESSION_TABLE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/executor.h"
#include "server/metrics.h"
#include "server/module_store.h"
#include "server/session.h"

namespace tether::server {

struct SessionLimits {
  uint32_t max_sessions = 64;
  absl::Duration default_idle_timeout = absl::Minutes(10);
  absl::Duration max_idle_timeout = absl::Hours(24);
  size_t max_objects_per_session = Session::kDefaultMaxObjects;
  uint64_t max_tensor_bytes_per_session = 0;  // 0: no limit
  bool log_events = true;                     // a stderr line per session open and close
};

// Thread contract: thread-safe.
class SessionTable {
 public:
  SessionTable(SessionLimits limits, Executor* executor, ModuleStore* store);
  ~SessionTable();  // closes every session, stops the reaper

  // RESOURCE_EXHAUSTED at max_sessions. A zero `idle_timeout` takes the default;
  // longer ones are capped.
  // `id` names the session instead of a fresh random id (a worker serving
  // its daemon's session).
  absl::StatusOr<std::shared_ptr<Session>> Open(absl::string_view client,
                                                absl::Duration idle_timeout, std::string id = "");
  // NOT_FOUND for an unknown or closed session.
  absl::StatusOr<std::shared_ptr<Session>> Get(absl::string_view id);
  // Closes the session: it leaves the table, its running call is interrupted
  // and queued ones fail; what it owns is released once the last call using
  // it returns. `reason` is logged ("client", "client-gone").
  absl::Status Close(absl::string_view id, absl::string_view reason = "client");
  void CloseAll(absl::string_view reason);
  // Sets every session's interrupt flag to `code` (used at shutdown).
  void InterruptAll(absl::StatusCode code);
  size_t size() const;
  // Bytes of the tensor handles every open session holds.
  uint64_t tensor_bytes() const;
  // VMs, tensor and object handles every open session holds (an isolated
  // session's live in its worker and are not counted).
  uint64_t num_objects() const;
  const SessionLimits& limits() const { return limits_; }
  // Where sessions opened and closed are counted (borrowed; the default
  // counts nothing). Set before the first Open.
  void set_metrics(DaemonMetrics* metrics) { metrics_ = metrics; }

 private:
  void ReaperLoop();
  void LogClose(const Session& session, absl::string_view reason) const;

  const SessionLimits limits_;
  DaemonMetrics no_metrics_;
  DaemonMetrics* metrics_ = &no_metrics_;
  Executor* executor_;
  ModuleStore* store_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t opened_ ABSL_GUARDED_BY(mu_) = 0;  // wakes the reaper to recompute its period
  std::thread reaper_;
};

}  // namespace tether::server

#endif  // TETHER_SERVER_SESSION_TABLE_H_
