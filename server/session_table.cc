// The session table: random ids, the limit, idle leases and the reaper thread.
#include "server/session_table.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "proto/codec/auth_token.h"
#include "runtime/core/error.h"
#include "server/event_log.h"

namespace tether::server {
namespace {

// 128 random bits from the kernel, as 32 hex digits.
std::string NewSessionId() { return rpc::RandomHex(16); }

}  // namespace

SessionTable::SessionTable(SessionLimits limits, Executor* executor, ModuleStore* store)
    : limits_(limits), executor_(executor), store_(store), reaper_([this] { ReaperLoop(); }) {}

SessionTable::~SessionTable() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  reaper_.join();
  CloseAll("shutdown");
}

absl::StatusOr<std::shared_ptr<Session>> SessionTable::Open(absl::string_view client,
                                                            absl::Duration idle_timeout,
                                                            std::string id) {
  if (idle_timeout <= absl::ZeroDuration()) idle_timeout = limits_.default_idle_timeout;
  idle_timeout = std::min(idle_timeout, limits_.max_idle_timeout);
  std::string client_name(client.substr(0, 128));
  absl::MutexLock lock(&mu_);
  if (sessions_.size() >= limits_.max_sessions) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the daemon has its maximum of ", limits_.max_sessions, " sessions open"));
  }
  if (id.empty()) id = NewSessionId();
  auto session =
      std::make_shared<Session>(std::move(id), client_name, idle_timeout, executor_, store_);
  session->set_max_objects(limits_.max_objects_per_session);
  session->set_max_tensor_bytes(limits_.max_tensor_bytes_per_session);
  sessions_[session->id()] = session;
  ++opened_;
  metrics_->SessionOpened();
  if (limits_.log_events) {
    EventLine()
        .Add("session", session->short_id())
        .Add("event", "open")
        .Quote("client", client_name)
        .Add("idle_timeout_ms", absl::ToInt64Milliseconds(idle_timeout))
        .Write();
  }
  return session;
}

absl::StatusOr<std::shared_ptr<Session>> SessionTable::Get(absl::string_view id) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) {
    return NotFoundError("session \"", absl::CEscape(id.substr(0, 64)), "\" not found");
  }
  return it->second;
}

void SessionTable::LogClose(const Session& session, absl::string_view reason) const {
  metrics_->SessionClosed(reason);
  if (!limits_.log_events) return;
  EventLine()
      .Add("session", session.short_id())
      .Add("event", "close")
      .Add("reason", reason)
      .Add("objects", static_cast<int64_t>(session.num_objects()))
      .Write();
}

absl::Status SessionTable::Close(absl::string_view id, absl::string_view reason) {
  std::shared_ptr<Session> session;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) {
      return NotFoundError("session \"", absl::CEscape(id.substr(0, 64)), "\" not found");
    }
    session = std::move(it->second);
    sessions_.erase(it);
  }
  session->MarkClosed();
  LogClose(*session, reason);
  return absl::OkStatus();
}

void SessionTable::CloseAll(absl::string_view reason) {
  absl::flat_hash_map<std::string, std::shared_ptr<Session>> sessions;
  {
    absl::MutexLock lock(&mu_);
    sessions.swap(sessions_);
  }
  for (auto& [id, session] : sessions) {
    session->MarkClosed();
    LogClose(*session, reason);
  }
}

void SessionTable::InterruptAll(absl::StatusCode code) {
  absl::MutexLock lock(&mu_);
  for (auto& [id, session] : sessions_) session->InterruptAny(code);
}

uint64_t SessionTable::tensor_bytes() const {
  // Each session is asked outside the table's lock (a session's lock is
  // never taken inside it).
  std::vector<std::shared_ptr<Session>> open;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, session] : sessions_) open.push_back(session);
  }
  uint64_t bytes = 0;
  for (const std::shared_ptr<Session>& session : open) bytes += session->tensor_bytes();
  return bytes;
}

uint64_t SessionTable::num_objects() const {
  std::vector<std::shared_ptr<Session>> open;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, session] : sessions_) open.push_back(session);
  }
  uint64_t objects = 0;
  for (const std::shared_ptr<Session>& session : open) objects += session->num_objects();
  return objects;
}

size_t SessionTable::size() const {
  absl::MutexLock lock(&mu_);
  return sessions_.size();
}

void SessionTable::ReaperLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    // Checks at a quarter of the shortest lease (within [1 ms, 1 s]).
    absl::Duration period = absl::Seconds(1);
    for (auto& [id, session] : sessions_) period = std::min(period, session->idle_timeout() / 4);
    period = std::max(period, absl::Milliseconds(1));
    struct Wake {
      SessionTable* table;
      uint64_t opened;
    } wake{this, opened_};
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](Wake* w) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                               return w->table->stopping_ || w->table->opened_ != w->opened;
                             },
                             &wake),
                         period);
    if (stopping_) break;
    absl::Time now = absl::Now();
    std::vector<std::shared_ptr<Session>> expired;
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      if (it->second->Expired(now)) {
        expired.push_back(std::move(it->second));
        sessions_.erase(it++);
      } else {
        ++it;
      }
    }
    if (expired.empty()) continue;
    mu_.Unlock();
    for (auto& session : expired) {
      session->MarkClosed();
      LogClose(*session, "idle");
    }
    expired.clear();  // releases what the sessions own, outside the lock
    mu_.Lock();
  }
}

}  // namespace tether::server
