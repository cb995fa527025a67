// The device-IR verifier: whether a kernel's statements can run on a GPU
// (no assertion, no kGlobal allocation below the top level) and follow the
// rules of block schedules in kernel_ir.h (kThread/kWarp loops inside a
// kBlock body, shared memory read only after a barrier, async copies and
// matrix tiles as the hardware has them). SplitForDevice (device_split.h)
// runs it on every launch; each check returns INVALID_ARGUMENT naming the
// kernel and "cannot run on a gpu".
//
// Thread contract: free functions over immutable IR; thread-safe.
#ifndef TETHER_COMPILER_BACKEND_CUDA_DEVICE_VERIFY_H_
#define TETHER_COMPILER_BACKEND_CUDA_DEVICE_VERIFY_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "compiler/tir/kernel_ir.h"

namespace tether::compiler {

// Where a statement stands, for the rules of block schedules (kernel_ir.h).
struct DeviceWhere {
  bool in_block = false;            // inside a kBlock body
  const ForNode* thread = nullptr;  // the enclosing kThread loop
  const ForNode* warp = nullptr;    // the enclosing kWarp loop
  int block = 0;                    // the kBlock body's threads
};

// INVALID_ARGUMENT "kernel <name>: <what> cannot run on a gpu".
absl::Status RejectForDevice(const KernelFunc& k, absl::string_view what);

// Loads of kPerThread buffers in `e` index dimension 0 with the enclosing
// kThread loop's var.
absl::Status CheckDeviceLoads(const KernelFunc& k, const PrimExpr& e, const DeviceWhere& w);

// Rejects statements a device cannot run anywhere in `s`.
absl::Status CheckDeviceStmt(const KernelFunc& k, const Stmt& s, const DeviceWhere& w);

// A shared buffer read by some threads must not be stored again before a
// barrier has passed, in the body of a kBlock loop (two walks, so the next
// iteration's stores are seen).
absl::Status CheckSharedReads(const KernelFunc& k, const Stmt& block_body);

// The block size of a kBlock body: the extent of its first kThread loop, or
// 32 times its first kWarp loop's (CheckDeviceStmt holds the others to it),
// 0 when it has none.
int BlockThreads(const Stmt& s);

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_BACKEND_CUDA_DEVICE_VERIFY_H_
