// The wire form of a module's functions (protocol 1.6, docs/design/
// rpc-protocol.md "Module functions"): vm::ModuleFunction <-> v1::ModuleFunction,
// shared by the daemon (ListFunctions) and the client.
#ifndef TETHER_PROTO_CODEC_FUNCTION_CODEC_H_
#define TETHER_PROTO_CODEC_FUNCTION_CODEC_H_

#include "absl/status/statusor.h"
#include "runtime/vm/virtual_machine.h"
#include "tether/v1/tether.pb.h"

namespace tether::rpc {

void EncodeModuleFunction(const vm::ModuleFunction& function, v1::ModuleFunction* out);
// INVALID_ARGUMENT for a kind other than a VM function or kernel, or a bad
// dtype or device type.
absl::StatusOr<vm::ModuleFunction> DecodeModuleFunction(const v1::ModuleFunction& function);

}  // namespace tether::rpc

#endif  // TETHER_PROTO_CODEC_FUNCTION_CODEC_H_
