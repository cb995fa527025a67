// Parameter dictionaries: named tensors in the reference's binary layout
// (tvm.runtime.save_param_dict / load_param_dict), so TVM param files load and
// Tether's load in TVM. The format is specified in
// docs/design/param-dict-format.md.
#ifndef TETHER_RUNTIME_MODULE_PARAM_DICT_H_
#define TETHER_RUNTIME_MODULE_PARAM_DICT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/tensor.h"

namespace tether {

// Magic numbers of the format (little-endian u64 on disk).
inline constexpr uint64_t kParamDictMagic = 0xF7E58D4F05049CB7ULL;     // kTVMTensorListMagic
inline constexpr uint64_t kTensorRecordMagic = 0xDD5E40F096B4A13FULL;  // kTVMTensorMagic
// The most dimensions a saved tensor may have.
inline constexpr int kMaxParamDims = 32;

using ParamList = std::vector<std::pair<std::string, Tensor>>;

// Serializes `params` in order. Tensors on other devices are copied to the host.
// INVALID_ARGUMENT for a null tensor, a duplicate name, a non-contiguous tensor,
// more than kMaxParamDims dims, or a dtype with no storage (e.g. handle).
// Thread contract: thread-safe (reads the tensors; do not write them meanwhile).
absl::StatusOr<std::string> SaveParamDict(const ParamList& params);

// Parses a param dict into CPU tensors, in file order. Every length is checked
// against the bytes left before anything is allocated, so a truncated, corrupt
// or hostile file is INVALID_ARGUMENT naming the offset, never a crash or a
// huge allocation. Also rejected: a wrong magic, name and tensor counts that
// differ, a record not marked as CPU, an invalid dtype, ndim outside
// [0, kMaxParamDims], negative dims, a byte size other than numel x element
// size, duplicate names, and trailing bytes. Thread contract: thread-safe.
absl::StatusOr<ParamList> LoadParamDict(absl::string_view bytes);

// File variants: the save writes atomically (a temporary file and a rename);
// the load is NOT_FOUND for a missing file.
absl::Status SaveParamDictToFile(const std::string& path, const ParamList& params);
absl::StatusOr<ParamList> LoadParamDictFromFile(const std::string& path);

}  // namespace tether

#endif  // TETHER_RUNTIME_MODULE_PARAM_DICT_H_
