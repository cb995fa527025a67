// Little-endian bytes: ByteWriter builds a file format, ByteReader reads one
// back from untrusted bytes. The executable format, parameter files and CUDA
// kernel blobs are all read through ByteReader, so "never read past the end,
// never believe a count that cannot fit" is written and audited once.
//
// Every read checks what is left first. A short read is INVALID_ARGUMENT
// "truncated <region> at offset <pos>: <what> needs <n> bytes but only <m>
// remain"; the region ("executable header", "param dict") names the bytes.
//
// Thread contract: thread-hostile (a cursor); one per thread.
#ifndef TETHER_RUNTIME_CORE_BYTE_IO_H_
#define TETHER_RUNTIME_CORE_BYTE_IO_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tether {

class ByteWriter {
 public:
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void U16(uint16_t v) { Le(v, 2); }
  void U32(uint32_t v) { Le(v, 4); }
  void U64(uint64_t v) { Le(v, 8); }
  void I32(int32_t v) { U32(static_cast<uint32_t>(v)); }
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  void F64(double v);
  void Bytes(absl::string_view b) { out_.append(b.data(), b.size()); }
  // A u32 length, then the bytes.
  void String(absl::string_view s);
  // Zero bytes up to a multiple of `alignment`.
  void PadTo(size_t alignment);

  std::string& out() { return out_; }

 private:
  void Le(uint64_t v, int bytes);
  std::string out_;
};

// Holds a view of the bytes: they must outlive the reader.
class ByteReader {
 public:
  ByteReader(absl::string_view data, std::string region)
      : data_(data), region_(std::move(region)) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return data_.size() - pos_; }
  bool done() const { return pos_ == data_.size(); }

  // OK when `n` more bytes are there, else the truncation error.
  absl::Status Need(uint64_t n, absl::string_view what) const;
  absl::StatusOr<uint8_t> U8(absl::string_view what);
  absl::StatusOr<uint16_t> U16(absl::string_view what);
  absl::StatusOr<uint32_t> U32(absl::string_view what);
  absl::StatusOr<uint64_t> U64(absl::string_view what);
  absl::StatusOr<int32_t> I32(absl::string_view what);
  absl::StatusOr<int64_t> I64(absl::string_view what);
  absl::StatusOr<double> F64(absl::string_view what);
  // The next `n` bytes (a view into the data).
  absl::StatusOr<absl::string_view> Bytes(uint64_t n, absl::string_view what);
  // A u32 length (at most `max_len`), then the bytes.
  absl::StatusOr<std::string> String(uint32_t max_len, absl::string_view what);
  // Believes `count` elements of at least `min_bytes` each only if they fit
  // in what remains (so a hostile count never sizes an allocation).
  absl::Status CheckCount(uint64_t count, uint64_t min_bytes, absl::string_view what) const;
  // INVALID_ARGUMENT "<region>: <args...>".
  template <typename... Args>
  absl::Status Error(const Args&... args) const {
    return absl::InvalidArgumentError(absl::StrCat(region_, ": ", args...));
  }

 private:
  absl::StatusOr<uint64_t> Le(int n, absl::string_view what);

  absl::string_view data_;
  std::string region_;
  size_t pos_ = 0;
};

}  // namespace tether

#endif  // TETHER_RUNTIME_CORE_BYTE_IO_H_
