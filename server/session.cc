// A session's object maps, run bookkeeping and idle lease (session.h).
#include "server/session.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/core/error.h"

namespace tether::server {

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
  for (auto& [id, entry] : vms_) ReleaseVm(entry);
}

void Session::ReleaseVm(VmEntry& entry) {
  entry.vm.reset();
  store_->Release(entry.module_sha256);
  if (!entry.params_sha256.empty()) store_->Release(entry.params_sha256);
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
                                        std::string module_sha256, std::string params_sha256) {
  vm->SetInterrupt(&interrupt_);
  VmEntry entry{std::move(vm), std::move(module_sha256), std::move(params_sha256)};
  absl::MutexLock lock(&mu_);
  if (absl::Status room = CheckRoomLocked(); !room.ok()) {
    ReleaseVm(entry);
    return room;
  }
  uint64_t id = next_id_++;
  vms_[id] = std::move(entry);
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
  ReleaseVm(entry);
  return absl::OkStatus();
}

uint64_t Session::tensor_bytes() const {
  absl::MutexLock lock(&mu_);
  return tensor_bytes_;
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

}  // namespace tether::server
