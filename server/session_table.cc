// Sessions and the session table: random ids, the object maps, idle leases
// and the reaper thread.
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

Session::Session(std::string id, std::string client, absl::Duration idle_timeout,
                 Executor* executor, ModuleStore* store)
    : id_(std::move(id)),
      client_(std::move(client)),
      idle_timeout_(idle_timeout),
      store_(store),
      queue_(executor),
      last_active_(absl::Now()) {}

Session::~Session() {
  absl::MutexLock lock(&mu_);
  for (auto& [id, entry] : vms_) {
    entry.vm.reset();
    store_->Release(entry.module_sha256);
  }
}

void Session::BeginCall() {
  absl::MutexLock lock(&mu_);
  ++active_calls_;
  last_active_ = absl::Now();
}

void Session::EndCall() {
  absl::MutexLock lock(&mu_);
  --active_calls_;
  last_active_ = absl::Now();
}

uint64_t Session::StartRun() {
  absl::MutexLock lock(&run_mu_);
  interrupt_.store(closed_.load() ? static_cast<int>(absl::StatusCode::kCancelled) : 0);
  running_ = ++runs_;
  return running_;
}

void Session::FinishRun() {
  absl::MutexLock lock(&run_mu_);
  running_ = 0;
  if (!closed_.load()) interrupt_.store(0);
}

void Session::Interrupt(uint64_t run, absl::StatusCode code) {
  absl::MutexLock lock(&run_mu_);
  if (run != 0 && run == running_) {
    interrupt_.store(static_cast<int>(code));
    if (worker_) worker_->CancelCalls();
  }
}

void Session::InterruptAny(absl::StatusCode code) {
  absl::MutexLock lock(&run_mu_);
  interrupt_.store(static_cast<int>(code));
  if (worker_) worker_->CancelCalls();
}

void Session::set_worker(std::unique_ptr<SessionWorker> worker) {
  absl::MutexLock lock(&run_mu_);  // Interrupt and MarkClosed may run meanwhile
  worker_ = std::move(worker);
}

void Session::MarkClosed() {
  absl::MutexLock lock(&run_mu_);
  closed_.store(true);
  interrupt_.store(static_cast<int>(absl::StatusCode::kCancelled));
  if (worker_) worker_->CancelCalls();
}

bool Session::Expired(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  return active_calls_ == 0 && now - last_active_ > idle_timeout_;
}

absl::Status Session::CheckRoomLocked() const {
  const size_t held = vms_.size() + tensors_.size() + objects_.size();
  if (held < max_objects_) return absl::OkStatus();
  return OutOfMemoryError("session ", short_id(), " holds ", held,
                          " VMs, tensors and handles, the daemon's limit per session; free some "
                          "(free_objects, destroy_vm) first");
}

absl::StatusOr<uint64_t> Session::AddVm(std::unique_ptr<vm::LocalVirtualMachine> vm,
                                        std::string module_sha256) {
  vm->SetInterrupt(&interrupt_);
  absl::MutexLock lock(&mu_);
  TETHER_RETURN_IF_ERROR(CheckRoomLocked());
  uint64_t id = next_id_++;
  vms_[id] = VmEntry{std::move(vm), std::move(module_sha256)};
  return id;
}

absl::StatusOr<vm::LocalVirtualMachine*> Session::FindVm(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = vms_.find(id);
  if (it == vms_.end()) return NotFoundError("vm ", id, " not found in session ", short_id());
  return it->second.vm.get();
}

absl::Status Session::DestroyVm(uint64_t id) {
  VmEntry entry;
  {
    absl::MutexLock lock(&mu_);
    auto it = vms_.find(id);
    if (it == vms_.end()) return NotFoundError("vm ", id, " not found in session ", short_id());
    entry = std::move(it->second);
    vms_.erase(it);
  }
  entry.vm.reset();
  store_->Release(entry.module_sha256);
  return absl::OkStatus();
}

absl::Status Session::CheckTensorRoom(uint64_t bytes) const {
  absl::MutexLock lock(&mu_);
  return CheckTensorRoomLocked(bytes);
}

absl::Status Session::CheckTensorRoomLocked(uint64_t bytes) const {
  if (max_tensor_bytes_ == 0 ||
      bytes <= max_tensor_bytes_ - std::min(tensor_bytes_, max_tensor_bytes_)) {
    return absl::OkStatus();
  }
  return OutOfMemoryError("session ", short_id(), " holds ", tensor_bytes_,
                          " bytes of tensors; another ", bytes,
                          " would pass the daemon's limit of ", max_tensor_bytes_,
                          " per session (tetherd --max-session-bytes); free some first");
}

absl::StatusOr<uint64_t> Session::AddTensor(Tensor tensor) {
  absl::MutexLock lock(&mu_);
  TETHER_RETURN_IF_ERROR(CheckRoomLocked());
  const uint64_t bytes = tensor->NumBytes();
  TETHER_RETURN_IF_ERROR(CheckTensorRoomLocked(bytes));
  uint64_t id = next_id_++;
  tensors_.emplace(id, std::move(tensor));
  tensor_bytes_ += bytes;
  return id;
}

absl::StatusOr<Tensor> Session::FindTensor(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = tensors_.find(id);
  if (it == tensors_.end()) {
    return NotFoundError("tensor handle ", id, " not found in session ", short_id());
  }
  return it->second;
}

absl::StatusOr<uint64_t> Session::AddObject(Value object) {
  absl::MutexLock lock(&mu_);
  TETHER_RETURN_IF_ERROR(CheckRoomLocked());
  uint64_t id = next_id_++;
  objects_.emplace(id, std::move(object));
  return id;
}

absl::StatusOr<Value> Session::FindObject(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(id);
  if (it == objects_.end()) {
    return NotFoundError("object handle ", id, " not found in session ", short_id());
  }
  return it->second;
}

absl::Status Session::Free(uint64_t id) {
  absl::MutexLock lock(&mu_);
  if (auto it = tensors_.find(id); it != tensors_.end()) {
    tensor_bytes_ -= it->second->NumBytes();
    tensors_.erase(it);
    return absl::OkStatus();
  }
  if (objects_.erase(id) > 0) return absl::OkStatus();
  return NotFoundError("handle ", id, " not found in session ", short_id());
}

size_t Session::num_objects() const {
  absl::MutexLock lock(&mu_);
  return vms_.size() + tensors_.size() + objects_.size();
}

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
