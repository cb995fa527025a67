// The runtime's remote-callable global functions: what a daemon's clients
// may call by name (RemoteSession's CallGlobal, Python's
// session.get_function), TVM RPC's `remote.get_function("runtime.X")`.
// Each is registered and marked remote-callable (Registry::SetRemoteCallable);
// every other registry function stays out of a remote caller's reach
// (docs/design/security.md, "Remote functions").
#ifndef TETHER_RUNTIME_VM_REMOTE_GLOBALS_H_
#define TETHER_RUNTIME_VM_REMOTE_GLOBALS_H_

namespace tether::vm {

// Registers and marks remote-callable (idempotent, thread-safe):
//   tether.runtime.num_threads() -> int: the threads kernels may use
//   tether.runtime.device_exists(Device) -> bool
//   tether.runtime.device_attr(Device, str) -> the attribute ("device_name",
//       "total_global_memory", ...; None where meaningless), ValueError for
//       an unknown name
// LocalVirtualMachine::Create and the daemon's start call it.
void RegisterRemoteGlobals();

}  // namespace tether::vm

#endif  // TETHER_RUNTIME_VM_REMOTE_GLOBALS_H_
