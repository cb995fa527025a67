// Little-endian writer and bounded reader (byte_io.h).
#include "runtime/core/byte_io.h"

#include <cstring>

#include "runtime/core/error.h"

namespace tether {

void ByteWriter::Le(uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void ByteWriter::F64(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  U64(bits);
}

void ByteWriter::String(absl::string_view s) {
  U32(static_cast<uint32_t>(s.size()));
  Bytes(s);
}

void ByteWriter::PadTo(size_t alignment) {
  while (out_.size() % alignment != 0) out_.push_back('\0');
}

absl::Status ByteReader::Need(uint64_t n, absl::string_view what) const {
  if (n > remaining()) {
    return absl::InvalidArgumentError(absl::StrCat("truncated ", region_, " at offset ", pos_, ": ",
                                                   what, " needs ", n, " bytes but only ",
                                                   remaining(), " remain"));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> ByteReader::Le(int n, absl::string_view what) {
  TETHER_RETURN_IF_ERROR(Need(n, what));
  uint64_t x = 0;
  for (int i = 0; i < n; ++i) x |= uint64_t{static_cast<unsigned char>(data_[pos_ + i])} << (8 * i);
  pos_ += n;
  return x;
}

absl::StatusOr<uint8_t> ByteReader::U8(absl::string_view what) {
  TETHER_ASSIGN_OR_RETURN(uint64_t x, Le(1, what));
  return static_cast<uint8_t>(x);
}

absl::StatusOr<uint16_t> ByteReader::U16(absl::string_view what) {
  TETHER_ASSIGN_OR_RETURN(uint64_t x, Le(2, what));
  return static_cast<uint16_t>(x);
}

absl::StatusOr<uint32_t> ByteReader::U32(absl::string_view what) {
  TETHER_ASSIGN_OR_RETURN(uint64_t x, Le(4, what));
  return static_cast<uint32_t>(x);
}

absl::StatusOr<uint64_t> ByteReader::U64(absl::string_view what) { return Le(8, what); }

absl::StatusOr<int32_t> ByteReader::I32(absl::string_view what) {
  TETHER_ASSIGN_OR_RETURN(uint64_t x, Le(4, what));
  return static_cast<int32_t>(static_cast<uint32_t>(x));
}

absl::StatusOr<int64_t> ByteReader::I64(absl::string_view what) {
  TETHER_ASSIGN_OR_RETURN(uint64_t x, Le(8, what));
  return static_cast<int64_t>(x);
}

absl::StatusOr<double> ByteReader::F64(absl::string_view what) {
  TETHER_ASSIGN_OR_RETURN(uint64_t bits, Le(8, what));
  double v;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}

absl::StatusOr<absl::string_view> ByteReader::Bytes(uint64_t n, absl::string_view what) {
  TETHER_RETURN_IF_ERROR(Need(n, what));
  absl::string_view out = data_.substr(pos_, n);
  pos_ += n;
  return out;
}

absl::StatusOr<std::string> ByteReader::String(uint32_t max_len, absl::string_view what) {
  TETHER_ASSIGN_OR_RETURN(uint32_t len, U32(what));
  if (len > max_len) return Error(what, " is ", len, " bytes, at most ", max_len, " allowed");
  TETHER_ASSIGN_OR_RETURN(absl::string_view bytes, Bytes(len, what));
  return std::string(bytes);
}

absl::Status ByteReader::CheckCount(uint64_t count, uint64_t min_bytes,
                                    absl::string_view what) const {
  if (count > remaining() / min_bytes) {
    return Error(count, " ", what, " cannot fit in the ", remaining(), " bytes that remain");
  }
  return absl::OkStatus();
}

}  // namespace tether
