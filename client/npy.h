// .npy files (NumPy's array format, versions 1.0-3.0) for tether run's inputs
// and outputs. Every data type Tether supports is written and read:
//   float16 '<f2', float32 '<f4', float64 '<f8', int8..int64 '|i1' '<i2' '<i4' '<i8',
//   uint8..uint64 '|u1' '<u2' '<u4' '<u8', bool '|b1';
//   bfloat16 has no NumPy type: it is written as 2-byte void '|V2' holding the
//   raw bfloat16 bits (np.load gives a void array; `.view(ml_dtypes.bfloat16)`
//   reinterprets it), and '|V2' / '<V2' read back as bfloat16.
// Big-endian files ('>') are byte-swapped on read; Fortran-ordered arrays are
// refused with a clear error. A malformed file is INVALID_ARGUMENT naming what
// is wrong, never a crash.
#ifndef TETHER_CLIENT_NPY_H_
#define TETHER_CLIENT_NPY_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/tensor.h"

namespace tether::client {

// The .npy bytes of a tensor (any device; copied to the host).
absl::StatusOr<std::string> EncodeNpy(const Tensor& tensor);
// A CPU tensor from .npy bytes.
absl::StatusOr<Tensor> DecodeNpy(absl::string_view bytes);

absl::Status WriteNpyFile(const std::string& path, const Tensor& tensor);
absl::StatusOr<Tensor> ReadNpyFile(const std::string& path);

// The NumPy descr of a Tether data type ("<f4"); INVALID_ARGUMENT for types
// .npy cannot hold (lanes > 1, handles).
absl::StatusOr<std::string> NpyDescr(DataType dtype);

}  // namespace tether::client

#endif  // TETHER_CLIENT_NPY_H_
