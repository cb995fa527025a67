// Target: what kernels are generated for, parsed from the reference's target
// strings ("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+neon").
// An empty triple means the host (its triple, CPU name and features).
//
// Thread contract: a value type; thread-compatible.
#ifndef TETHER_COMPILER_CODEGEN_TARGET_H_
#define TETHER_COMPILER_CODEGEN_TARGET_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tether::compiler {

struct Target {
  std::string kind = "llvm";
  std::string triple;  // empty = host
  std::string cpu;     // empty = host cpu (for the host) or generic
  std::string attrs;   // "+neon,-sve"; empty = host features (for the host)

  // Parses "llvm [-mtriple=T] [-mcpu=C] [-mattr=A]" (also "cpu" as an alias of
  // "llvm"). INVALID_ARGUMENT on another kind, an unknown flag or an empty value.
  static absl::StatusOr<Target> Parse(absl::string_view text);
  // The host: its triple, cpu name and features filled in.
  static Target Host();
  // "llvm -mtriple=... -mcpu=... -mattr=..." (empty parts left out).
  std::string ToString() const;
  // No triple, or the host's triple.
  bool is_host() const;
};

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_CODEGEN_TARGET_H_
