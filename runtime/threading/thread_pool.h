// Data parallelism for kernels: a process-wide pool of persistent worker
// threads behind ParallelLaunch (task ids, the shape of the kernel ABI's
// parallel-for) and ParallelFor (a chunked index range). ParallelLaunch's
// tasks are dealt out statically; ParallelFor's shares are balanced, and a
// thread done with its own takes the rest of the others'. The calling thread
// runs a share itself, and a call made from
// inside a parallel region (or while another thread's launch is running) runs
// serially on the caller, so nesting never deadlocks.
#ifndef TETHER_RUNTIME_THREADING_THREAD_POOL_H_
#define TETHER_RUNTIME_THREADING_THREAD_POOL_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

namespace tether {

// Threads a parallel region uses, the caller included: TETHER_NUM_THREADS when
// it is a positive integer, else the hardware's thread count (at least 1), or
// the last SetNumThreads value. Thread-safe.
int NumThreads();

// Changes the thread count; `num_threads` <= 0 restores the default. Waits for
// a running launch to finish, then restarts the workers, so it is not free:
// call it at setup, not per kernel. Thread-safe.
void SetNumThreads(int num_threads);

// Whether the calling thread is running inside a parallel region.
bool InParallelRegion();

// Runs task(task_id, num_tasks) for every task_id in [0, num_tasks), spread
// over up to NumThreads() threads (task t runs on participant t % threads).
// num_tasks <= 0 means NumThreads(). Returns the first error a task returned;
// after an error, tasks not yet started may be skipped. Thread-safe.
using ParallelTask = absl::FunctionRef<absl::Status(int task_id, int num_tasks)>;
absl::Status ParallelLaunch(int num_tasks, ParallelTask task);

// Splits [begin, end) into one balanced contiguous share per thread (at most
// NumThreads() of them, each at least `min_chunk` indices), each share into
// up to kParallelForPieces pieces of at least `min_chunk` (the last one
// taking the remainder), and runs body(piece_begin, piece_end) on each piece,
// exactly once. A thread runs its own share's pieces in order, then takes the
// remaining pieces of the others' (a thread the machine delays does not
// hold up the region for its whole share). A range shorter than
// 2 * min_chunk, one thread, or a nested call runs inline as
// body(begin, end). Returns the first error (a thread stops at its first;
// the others finish the pieces they claim). Thread-safe.
inline constexpr int64_t kParallelForPieces = 8;
using ParallelBody = absl::FunctionRef<absl::Status(int64_t begin, int64_t end)>;
absl::Status ParallelFor(int64_t begin, int64_t end, ParallelBody body, int64_t min_chunk = 1);

// While it lives, parallel regions started on this thread use at most
// `max_threads` threads (<= 0: no cap; a cap never raises NumThreads()).
// Nests: the innermost cap applies. How a VM created with num_threads keeps
// its kernels to that many threads in a daemon shared by several clients.
class ScopedThreadLimit {
 public:
  explicit ScopedThreadLimit(int max_threads);
  ~ScopedThreadLimit();
  ScopedThreadLimit(const ScopedThreadLimit&) = delete;
  ScopedThreadLimit& operator=(const ScopedThreadLimit&) = delete;

 private:
  int saved_;
};

}  // namespace tether

#endif  // TETHER_RUNTIME_THREADING_THREAD_POOL_H_
