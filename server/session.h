// A session: what a client opened and owns — its VMs, remote tensors and
// other remote objects (closures), each named by a session-local uint64 id —
// its serial queue for VM work, its idle lease and, when isolated, its
// worker process. SessionTable (session_table.h) opens and closes them.
// Closing a session releases everything it owns once its in-flight call ends.
#ifndef TETHER_SERVER_SESSION_H_
#define TETHER_SERVER_SESSION_H_

#include <atomic>
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
#include "runtime/core/tensor.h"
#include "runtime/core/value.h"
#include "runtime/device/stream.h"
#include "runtime/vm/local_vm.h"
#include "server/executor.h"
#include "server/module_store.h"
#include "server/session_worker.h"

namespace tether::server {

// Thread contract: thread-safe. VM work on a session runs through queue(), one
// task at a time; the object maps have their own lock, so tensor streams may
// run beside a call. Co-owned (shared_ptr) by the SessionTable while open and
// by every task or stream using it, so closing never pulls objects from under
// a running call.
class Session {
 public:
  Session(std::string id, std::string client, absl::Duration idle_timeout, Executor* executor,
          ModuleStore* store);
  ~Session();

  const std::string& id() const { return id_; }
  absl::string_view short_id() const { return absl::string_view(id_).substr(0, 8); }
  absl::Duration idle_timeout() const { return idle_timeout_; }
  SerialQueue& queue() { return queue_; }
  // The interrupt flag of every VM of this session (an absl::StatusCode, 0:
  // run), checked at each instruction boundary.
  std::atomic<int>& interrupt() { return interrupt_; }

  // The call running on queue(). StartRun clears the interrupt flag and
  // numbers the call; Interrupt(run, code) sets the flag only while that call
  // runs, so a late deadline or cancellation never stops the call after it.
  uint64_t StartRun();
  void FinishRun();
  void Interrupt(uint64_t run, absl::StatusCode code);

  // Sets the interrupt flag whichever call runs (daemon shutdown).
  void InterruptAny(absl::StatusCode code);

  // Closing interrupts the running call; calls still queued fail with
  // CANCELLED instead of running.
  void MarkClosed();

  // The worker process of an isolated session; null when the session runs
  // in the daemon. Set once, before the session id is handed out; the
  // session kills its worker when it is released. Interrupts and closing
  // cancel the worker's calls in flight.
  void set_worker(std::unique_ptr<SessionWorker> worker);
  SessionWorker* worker() const { return worker_.get(); }
  bool closed() const { return closed_.load(); }
  // The farm fencing token the session was opened with (0: none); set once,
  // before the session id is handed out.
  void set_fencing_token(int64_t token) { fencing_token_.store(token); }
  int64_t fencing_token() const { return fencing_token_.load(); }

  // Marks activity; calls in flight keep the lease alive.
  void BeginCall();
  void EndCall();
  // Whether the session has been idle past its lease at `now`.
  bool Expired(absl::Time now) const;

  // The most VMs, tensors and object handles one session may hold at once.
  static constexpr size_t kDefaultMaxObjects = 65536;
  void set_max_objects(size_t max_objects) { max_objects_ = max_objects; }
  // The most bytes the session's tensor handles may hold together (0: no
  // limit); a view of another tensor's storage counts as its own bytes.
  void set_max_tensor_bytes(uint64_t max_bytes) { max_tensor_bytes_ = max_bytes; }
  // RESOURCE_EXHAUSTED when a tensor of `bytes` more would pass the limit;
  // checked before an upload allocates, and again by AddTensor.
  absl::Status CheckTensorRoom(uint64_t bytes) const;
  // Bytes of the tensors the session's handles hold now.
  uint64_t tensor_bytes() const;

  // VMs, tensors and objects. NOT_FOUND naming the id when unknown; adding
  // one past max_objects is RESOURCE_EXHAUSTED (the VM or value is dropped).
  // A VM holds the store's pins of its module and of its param file (empty:
  // none) until it is destroyed; AddVm takes them over, even when it fails.
  absl::StatusOr<uint64_t> AddVm(std::unique_ptr<vm::LocalVirtualMachine> vm,
                                 std::string module_sha256, std::string params_sha256 = "");
  absl::StatusOr<vm::LocalVirtualMachine*> FindVm(uint64_t id);
  absl::Status DestroyVm(uint64_t id);
  absl::StatusOr<uint64_t> AddTensor(Tensor tensor);
  absl::StatusOr<Tensor> FindTensor(uint64_t id);
  absl::StatusOr<uint64_t> AddObject(Value object);
  absl::StatusOr<Value> FindObject(uint64_t id);
  // Frees a tensor or object handle.
  absl::Status Free(uint64_t id);
  size_t num_objects() const;

  // The streams set_stream made current for this session's calls, by
  // device (CallHandler installs them around each call). Touched only by
  // the call running on queue().
  StreamMap& streams() { return streams_; }

 private:
  // RESOURCE_EXHAUSTED when the session holds max_objects_ already.
  absl::Status CheckRoomLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckTensorRoomLocked(uint64_t bytes) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  struct VmEntry {
    std::unique_ptr<vm::LocalVirtualMachine> vm;
    std::string module_sha256;
    std::string params_sha256;  // empty: created without params
  };
  // Destroys the VM, then releases its pins in the store.
  void ReleaseVm(VmEntry& entry);

  const std::string id_;
  const std::string client_;
  const absl::Duration idle_timeout_;
  size_t max_objects_ = kDefaultMaxObjects;
  uint64_t max_tensor_bytes_ = 0;
  ModuleStore* store_;
  SerialQueue queue_;
  std::atomic<int> interrupt_{0};  // outlives vms_ (declared first)
  std::atomic<bool> closed_{false};
  std::atomic<int64_t> fencing_token_{0};
  absl::Mutex run_mu_;
  uint64_t running_ ABSL_GUARDED_BY(run_mu_) = 0;  // 0: no call running
  uint64_t runs_ ABSL_GUARDED_BY(run_mu_) = 0;

  mutable absl::Mutex mu_;
  absl::Time last_active_ ABSL_GUARDED_BY(mu_);
  int active_calls_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, VmEntry> vms_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Tensor> tensors_ ABSL_GUARDED_BY(mu_);
  uint64_t tensor_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // NumBytes of tensors_
  absl::flat_hash_map<uint64_t, Value> objects_ ABSL_GUARDED_BY(mu_);
  StreamMap streams_;                      // see streams()
  std::unique_ptr<SessionWorker> worker_;  // last: ends before the rest goes
};

}  // namespace tether::server

#endif  // TETHER_SERVER_SESSION_H_
