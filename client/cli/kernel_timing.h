// One kernel of a model, from the command line: `tether profile --top N`
// names the slowest kernels of a profile, and `tether bench --kernel NAME`
// times one of them on the daemon with the argument shapes a profile run
// recorded for it (docs/design/profiling.md, "Argument Shapes").
#ifndef TETHER_CLIENT_CLI_KERNEL_TIMING_H_
#define TETHER_CLIENT_CLI_KERNEL_TIMING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/remote_session.h"
#include "runtime/core/data_type.h"
#include "runtime/profiling/report.h"
#include "runtime/vm/virtual_machine.h"

namespace tether::cli {

// One argument as a profile's Argument Shapes records it: a tensor
// "float32[4, 3]" or an int "4".
struct RecordedArg {
  bool is_tensor = false;
  DataType dtype;
  std::vector<int64_t> shape;
  int64_t value = 0;
};
// Parses "float32[4, 3], float32[4, 3], 4"; INVALID_ARGUMENT naming the
// part that is neither.
absl::StatusOr<std::vector<RecordedArg>> ParseArgumentShapes(absl::string_view text);

// A kernel's calls in a profile with the same argument shapes, summed.
struct KernelCalls {
  std::string name;
  std::string argument_shapes;
  double duration_us = 0;  // all calls
  double percent = 0;
  int64_t count = 0;
};
// The kernels of `kernels` (a module's ListFunctions) among the rows of
// `report`, slowest first (by summed duration), at most `top` (0: all).
std::vector<KernelCalls> SlowestKernels(const profiling::Report& report,
                                        const std::vector<vm::ModuleFunction>& kernels, size_t top);
// The table `tether profile --top` prints.
std::string SlowestKernelsTable(const std::vector<KernelCalls>& rows, absl::string_view model);

// The arguments of kernel `kernel` for one call as `args` recorded them,
// allocated on the daemon on `device` (tensors filled with uniform values
// in [0, 1) from `seed`; integer tensors with zeros, so index arguments stay
// in range). INVALID_ARGUMENT when the record does not match the kernel's
// signature.
absl::StatusOr<std::vector<Value>> AllocateKernelArgs(client::RemoteSession* session,
                                                      const vm::ModuleFunction& kernel,
                                                      const std::vector<RecordedArg>& args,
                                                      Device device, uint64_t seed);

}  // namespace tether::cli

#endif  // TETHER_CLIENT_CLI_KERNEL_TIMING_H_
