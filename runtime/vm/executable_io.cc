// Executable file format: writer, reader and the "vm.Executable" module loader.
// The layout is specified in docs/design/executable-format.md; keep the two in
// step.
//
// The reader treats its input as hostile. Every count, length and offset is
// checked against the bytes that remain before anything is allocated or read
// (a count is only believed when count x minimum element size fits), strings
// are capped, and the result goes through Executable::Validate() before it is
// returned. Integers are assembled byte by byte, so the code is independent of
// the host's endianness and alignment.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/core/error.h"
#include "runtime/core/file.h"
#include "runtime/core/tensor.h"
#include "runtime/kernel/crc32c.h"
#include "runtime/vm/executable.h"

namespace tether::vm {
namespace {

// --- Layout constants ----------------------------------------------------------

enum SectionId : uint32_t {
  kSectionFunctions = 1,
  kSectionConstants = 2,
  kSectionBytecode = 3,
  kSectionKernelLibraries = 4,
  kSectionMetadata = 5,
};

enum ConstantTag : uint8_t {
  kTagInt = 1,
  kTagFloat = 2,
  kTagBool = 3,
  kTagString = 4,
  kTagShape = 5,
  kTagDataType = 6,
  kTagDevice = 7,
  kTagTensor = 8,
};

constexpr size_t kMagicSize = 8;
constexpr size_t kFixedHeaderSize = 20;  // magic, major, minor, section count, producer length
constexpr size_t kChecksumSize = 4;
constexpr size_t kSectionEntrySize = 24;  // u32 id, u32 reserved, u64 offset, u64 size
constexpr uint32_t kMaxSections = 64;
constexpr uint32_t kMaxProducerBytes = 256;
constexpr uint32_t kMaxNameBytes = uint32_t{1} << 16;    // names, keys, targets, formats
constexpr uint32_t kMaxStringBytes = uint32_t{1} << 28;  // string constants, metadata values
constexpr uint32_t kMaxTensorDims = 32;
constexpr uint32_t kMaxShapeDims = uint32_t{1} << 16;
// Smallest encodings, used to bound counts before allocating.
constexpr uint64_t kMinFunctionBytes = 4 + 4 + 4 * 8 + 4;
constexpr uint64_t kMinConstantBytes = 2;  // tag + bool
constexpr uint64_t kMinKernelLibraryBytes = 4 + 4 + 8;
constexpr uint64_t kMinMetadataEntryBytes = 4 + 4;

absl::string_view SectionName(uint32_t id) {
  switch (id) {
    case kSectionFunctions:
      return "function table";
    case kSectionConstants:
      return "constants";
    case kSectionBytecode:
      return "bytecode";
    case kSectionKernelLibraries:
      return "kernel libraries";
    case kSectionMetadata:
      return "metadata";
    default:
      return "unknown";
  }
}

// --- Writer --------------------------------------------------------------------

class Writer {
 public:
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void U16(uint16_t v) { Le(v, 2); }
  void U32(uint32_t v) { Le(v, 4); }
  void U64(uint64_t v) { Le(v, 8); }
  void I32(int32_t v) { U32(static_cast<uint32_t>(v)); }
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  void F64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    U64(bits);
  }
  void Bytes(absl::string_view b) { out_.append(b.data(), b.size()); }
  // u32 length + bytes.
  void String(absl::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    Bytes(s);
  }
  void PadTo(size_t alignment) {
    while (out_.size() % alignment != 0) out_.push_back('\0');
  }
  std::string& out() { return out_; }

 private:
  void Le(uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  }
  std::string out_;
};

void WriteConstant(Writer& w, const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kInt:
      w.U8(kTagInt);
      w.I64(v.int_value());
      return;
    case Value::Kind::kFloat:
      w.U8(kTagFloat);
      w.F64(v.float_value());
      return;
    case Value::Kind::kBool:
      w.U8(kTagBool);
      w.U8(v.bool_value() ? 1 : 0);
      return;
    case Value::Kind::kDataType: {
      DataType t = v.dtype_value();
      w.U8(kTagDataType);
      w.U8(t.code());
      w.U8(t.bits());
      w.U16(t.lanes());
      return;
    }
    case Value::Kind::kDevice: {
      Device d = v.device_value();
      w.U8(kTagDevice);
      w.I32(static_cast<int32_t>(d.type));
      w.I32(d.id);
      return;
    }
    default:
      break;
  }
  if (v.is_string()) {
    w.U8(kTagString);
    w.String(v.string_value());
    return;
  }
  if (v.is_shape()) {
    const auto& dims = v.AsRef<ShapeObj>()->dims;
    w.U8(kTagShape);
    w.U32(static_cast<uint32_t>(dims.size()));
    for (int64_t d : dims) w.I64(d);
    return;
  }
  if (v.is_tensor()) {
    Tensor t(v.AsRef<TensorObj>());
    std::string bytes(static_cast<size_t>(std::max<int64_t>(t->NumBytes(), 0)), '\0');
    if (t.CopyToBytes(bytes.data(), bytes.size()).ok()) {
      DataType dtype = t->dtype();
      w.U8(kTagTensor);
      w.U8(dtype.code());
      w.U8(dtype.bits());
      w.U16(dtype.lanes());
      w.U32(static_cast<uint32_t>(t->ndim()));
      for (int64_t d : t->shape()) w.I64(d);
      w.U64(bytes.size());
      w.Bytes(bytes);
      return;
    }
  }
  // Not representable (Validate() would have rejected it): tag 0 makes the
  // file fail to load instead of silently holding a wrong value.
  w.U8(0);
  w.U8(0);
}

// --- Reader --------------------------------------------------------------------

// A bounds-checked cursor over one region of the file.
class Reader {
 public:
  Reader(absl::string_view data, absl::string_view region) : data_(data), region_(region) {}

  size_t remaining() const { return data_.size() - pos_; }
  size_t pos() const { return pos_; }
  bool done() const { return pos_ == data_.size(); }

  absl::Status Need(uint64_t n, absl::string_view what) const {
    if (n > remaining()) {
      return absl::InvalidArgumentError(absl::StrCat("truncated ", region_, ": ", what, " needs ",
                                                     n, " bytes but only ", remaining(),
                                                     " remain"));
    }
    return absl::OkStatus();
  }
  absl::Status U8(uint8_t* v, absl::string_view what) {
    uint64_t x;
    TETHER_RETURN_IF_ERROR(Le(1, &x, what));
    *v = static_cast<uint8_t>(x);
    return absl::OkStatus();
  }
  absl::Status U16(uint16_t* v, absl::string_view what) {
    uint64_t x;
    TETHER_RETURN_IF_ERROR(Le(2, &x, what));
    *v = static_cast<uint16_t>(x);
    return absl::OkStatus();
  }
  absl::Status U32(uint32_t* v, absl::string_view what) {
    uint64_t x;
    TETHER_RETURN_IF_ERROR(Le(4, &x, what));
    *v = static_cast<uint32_t>(x);
    return absl::OkStatus();
  }
  absl::Status I32(int32_t* v, absl::string_view what) {
    uint32_t x;
    TETHER_RETURN_IF_ERROR(U32(&x, what));
    *v = static_cast<int32_t>(x);
    return absl::OkStatus();
  }
  absl::Status U64(uint64_t* v, absl::string_view what) { return Le(8, v, what); }
  absl::Status I64(int64_t* v, absl::string_view what) {
    uint64_t x;
    TETHER_RETURN_IF_ERROR(Le(8, &x, what));
    *v = static_cast<int64_t>(x);
    return absl::OkStatus();
  }
  absl::Status Bytes(uint64_t n, absl::string_view* out, absl::string_view what) {
    TETHER_RETURN_IF_ERROR(Need(n, what));
    *out = data_.substr(pos_, n);
    pos_ += n;
    return absl::OkStatus();
  }
  // u32 length (at most `max_len`) + bytes.
  absl::Status String(std::string* out, uint32_t max_len, absl::string_view what) {
    uint32_t len;
    TETHER_RETURN_IF_ERROR(U32(&len, what));
    if (len > max_len) {
      return absl::InvalidArgumentError(
          absl::StrCat(region_, ": ", what, " is ", len, " bytes, at most ", max_len, " allowed"));
    }
    absl::string_view bytes;
    TETHER_RETURN_IF_ERROR(Bytes(len, &bytes, what));
    out->assign(bytes.data(), bytes.size());
    return absl::OkStatus();
  }
  // Believes `count` elements of at least `min_bytes` each only if they fit.
  absl::Status CheckCount(uint64_t count, uint64_t min_bytes, absl::string_view what) const {
    if (count > remaining() / min_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(region_, ": ", count, " ", what,
                                                     " cannot fit in the ", remaining(),
                                                     " bytes that remain"));
    }
    return absl::OkStatus();
  }
  template <typename... Args>
  absl::Status Error(const Args&... args) const {
    return absl::InvalidArgumentError(absl::StrCat(region_, ": ", args...));
  }

 private:
  absl::Status Le(int n, uint64_t* v, absl::string_view what) {
    TETHER_RETURN_IF_ERROR(Need(n, what));
    uint64_t x = 0;
    for (int i = 0; i < n; ++i) {
      x |= uint64_t{static_cast<unsigned char>(data_[pos_ + i])} << (8 * i);
    }
    pos_ += n;
    *v = x;
    return absl::OkStatus();
  }

  absl::string_view data_;
  std::string region_;
  size_t pos_ = 0;
};

absl::Status ReadFunctions(Reader& r, Executable& exec) {
  uint32_t count;
  TETHER_RETURN_IF_ERROR(r.U32(&count, "function count"));
  TETHER_RETURN_IF_ERROR(r.CheckCount(count, kMinFunctionBytes, "functions"));
  exec.functions.resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    FunctionInfo& f = exec.functions[i];
    int32_t kind;
    TETHER_RETURN_IF_ERROR(r.I32(&kind, "function kind"));
    f.kind = static_cast<FunctionKind>(kind);  // Validate() rejects unknown kinds
    TETHER_RETURN_IF_ERROR(r.String(&f.name, kMaxNameBytes, "function name"));
    TETHER_RETURN_IF_ERROR(r.I64(&f.start_instr, "function start"));
    TETHER_RETURN_IF_ERROR(r.I64(&f.end_instr, "function end"));
    TETHER_RETURN_IF_ERROR(r.I64(&f.num_args, "function argument count"));
    TETHER_RETURN_IF_ERROR(r.I64(&f.register_file_size, "function register file size"));
    uint32_t num_params;
    TETHER_RETURN_IF_ERROR(r.U32(&num_params, "parameter name count"));
    TETHER_RETURN_IF_ERROR(r.CheckCount(num_params, 4, "parameter names"));
    f.param_names.resize(num_params);
    for (std::string& name : f.param_names) {
      TETHER_RETURN_IF_ERROR(r.String(&name, kMaxNameBytes, "parameter name"));
    }
    if (!exec.function_map.emplace(f.name, static_cast<Index>(i)).second) {
      return r.Error("duplicate function name ", f.name);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Value> ReadTensor(Reader& r, uint32_t index) {
  uint8_t code, bits;
  uint16_t lanes;
  TETHER_RETURN_IF_ERROR(r.U8(&code, "tensor dtype"));
  TETHER_RETURN_IF_ERROR(r.U8(&bits, "tensor dtype"));
  TETHER_RETURN_IF_ERROR(r.U16(&lanes, "tensor dtype"));
  DataType dtype(code, bits, lanes);
  if (!dtype.IsValidStorageType()) {
    return r.Error("tensor constant ", index, " has unsupported data type code ", int{code},
                   " bits ", int{bits}, " lanes ", lanes);
  }
  uint32_t ndim;
  TETHER_RETURN_IF_ERROR(r.U32(&ndim, "tensor ndim"));
  if (ndim > kMaxTensorDims) {
    return r.Error("tensor constant ", index, " has ", ndim, " dims, at most ", kMaxTensorDims,
                   " allowed");
  }
  std::vector<int64_t> shape(ndim);
  for (int64_t& d : shape) {
    TETHER_RETURN_IF_ERROR(r.I64(&d, "tensor shape"));
    if (d < 0) return r.Error("tensor constant ", index, " has negative dimension ", d);
  }
  absl::StatusOr<int64_t> expected = CheckedNumBytes(shape, dtype);
  if (!expected.ok()) {
    return r.Error("tensor constant ", index, " has invalid shape ", ShapeToString(shape), ": ",
                   expected.status().message());
  }
  uint64_t nbytes;
  TETHER_RETURN_IF_ERROR(r.U64(&nbytes, "tensor byte size"));
  if (nbytes != static_cast<uint64_t>(*expected)) {
    return r.Error("tensor constant ", index, " of ", dtype.ToString(), ShapeToString(shape),
                   " has ", nbytes, " bytes, expected ", *expected);
  }
  absl::string_view data;
  TETHER_RETURN_IF_ERROR(r.Bytes(nbytes, &data, "tensor data"));
  TETHER_ASSIGN_OR_RETURN(Tensor t, Tensor::FromBytes(shape, dtype, data.data(), data.size()));
  return Value(t.ref());
}

absl::Status ReadConstants(Reader& r, Executable& exec) {
  uint32_t count;
  TETHER_RETURN_IF_ERROR(r.U32(&count, "constant count"));
  TETHER_RETURN_IF_ERROR(r.CheckCount(count, kMinConstantBytes, "constants"));
  exec.constants.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    uint8_t tag;
    TETHER_RETURN_IF_ERROR(r.U8(&tag, "constant tag"));
    switch (tag) {
      case kTagInt: {
        int64_t v;
        TETHER_RETURN_IF_ERROR(r.I64(&v, "int constant"));
        exec.constants.emplace_back(v);
        break;
      }
      case kTagFloat: {
        uint64_t bits;
        TETHER_RETURN_IF_ERROR(r.U64(&bits, "float constant"));
        double v;
        std::memcpy(&v, &bits, sizeof(v));
        exec.constants.emplace_back(v);
        break;
      }
      case kTagBool: {
        uint8_t v;
        TETHER_RETURN_IF_ERROR(r.U8(&v, "bool constant"));
        if (v > 1) return r.Error("bool constant ", i, " has value ", int{v});
        exec.constants.emplace_back(v == 1);
        break;
      }
      case kTagString: {
        std::string s;
        TETHER_RETURN_IF_ERROR(r.String(&s, kMaxStringBytes, "string constant"));
        exec.constants.emplace_back(std::move(s));
        break;
      }
      case kTagShape: {
        uint32_t ndim;
        TETHER_RETURN_IF_ERROR(r.U32(&ndim, "shape ndim"));
        if (ndim > kMaxShapeDims) {
          return r.Error("shape constant ", i, " has ", ndim, " dims, at most ", kMaxShapeDims,
                         " allowed");
        }
        TETHER_RETURN_IF_ERROR(r.CheckCount(ndim, 8, "shape dims"));
        ShapeObj::Dims dims(ndim);
        for (int64_t& d : dims) TETHER_RETURN_IF_ERROR(r.I64(&d, "shape dim"));
        exec.constants.push_back(MakeShape(std::move(dims)));
        break;
      }
      case kTagDataType: {
        uint8_t code, bits;
        uint16_t lanes;
        TETHER_RETURN_IF_ERROR(r.U8(&code, "dtype constant"));
        TETHER_RETURN_IF_ERROR(r.U8(&bits, "dtype constant"));
        TETHER_RETURN_IF_ERROR(r.U16(&lanes, "dtype constant"));
        exec.constants.emplace_back(DataType(code, bits, lanes));
        break;
      }
      case kTagDevice: {
        int32_t type, id;
        TETHER_RETURN_IF_ERROR(r.I32(&type, "device constant"));
        TETHER_RETURN_IF_ERROR(r.I32(&id, "device constant"));
        // Checked before the cast: DLDeviceType has no fixed underlying type.
        if (!IsKnownDeviceType(type) || id < 0) {
          return r.Error("device constant ", i, " has unknown type ", type, " or negative id ", id);
        }
        exec.constants.emplace_back(Device{static_cast<DLDeviceType>(type), id});
        break;
      }
      case kTagTensor: {
        TETHER_ASSIGN_OR_RETURN(Value t, ReadTensor(r, i));
        exec.constants.push_back(std::move(t));
        break;
      }
      default:
        return r.Error("constant ", i, " has unknown tag ", int{tag});
    }
  }
  return absl::OkStatus();
}

absl::Status ReadWords(Reader& r, std::vector<int64_t>* out, absl::string_view what) {
  uint64_t count;
  TETHER_RETURN_IF_ERROR(r.U64(&count, what));
  TETHER_RETURN_IF_ERROR(r.CheckCount(count, 8, what));
  out->resize(count);
  for (int64_t& w : *out) TETHER_RETURN_IF_ERROR(r.I64(&w, what));
  return absl::OkStatus();
}

absl::Status ReadBytecode(Reader& r, Executable& exec) {
  TETHER_RETURN_IF_ERROR(ReadWords(r, &exec.instr_offset, "instruction offsets"));
  return ReadWords(r, &exec.instr_data, "instruction words");
}

absl::Status ReadKernelLibraries(Reader& r, Executable& exec) {
  uint32_t count;
  TETHER_RETURN_IF_ERROR(r.U32(&count, "kernel library count"));
  TETHER_RETURN_IF_ERROR(r.CheckCount(count, kMinKernelLibraryBytes, "kernel libraries"));
  exec.kernel_libraries.resize(count);
  for (KernelLibraryBlob& lib : exec.kernel_libraries) {
    TETHER_RETURN_IF_ERROR(r.String(&lib.target, kMaxNameBytes, "kernel library target"));
    TETHER_RETURN_IF_ERROR(r.String(&lib.format, kMaxNameBytes, "kernel library format"));
    uint64_t size;
    TETHER_RETURN_IF_ERROR(r.U64(&size, "kernel library size"));
    absl::string_view data;
    TETHER_RETURN_IF_ERROR(r.Bytes(size, &data, "kernel library data"));
    lib.data.assign(data.data(), data.size());
  }
  return absl::OkStatus();
}

absl::Status ReadMetadata(Reader& r, Executable& exec) {
  uint32_t count;
  TETHER_RETURN_IF_ERROR(r.U32(&count, "metadata count"));
  TETHER_RETURN_IF_ERROR(r.CheckCount(count, kMinMetadataEntryBytes, "metadata entries"));
  std::string previous;
  for (uint32_t i = 0; i < count; ++i) {
    std::string key, value;
    TETHER_RETURN_IF_ERROR(r.String(&key, kMaxNameBytes, "metadata key"));
    TETHER_RETURN_IF_ERROR(r.String(&value, kMaxStringBytes, "metadata value"));
    if (i > 0 && key <= previous) {
      return r.Error("metadata key \"", key, "\" is out of order or duplicated");
    }
    previous = key;
    exec.metadata.emplace_hint(exec.metadata.end(), std::move(key), std::move(value));
  }
  return absl::OkStatus();
}

struct SectionEntry {
  uint32_t id;
  uint64_t offset;
  uint64_t size;
};

absl::StatusOr<Ref<Executable>> Parse(absl::string_view bytes) {
  if (bytes.size() < kMagicSize || bytes.substr(0, kMagicSize) != kExecutableMagic) {
    return absl::InvalidArgumentError("not a tether executable (bad magic)");
  }
  Reader header(bytes, "executable header");
  absl::string_view magic;
  TETHER_RETURN_IF_ERROR(header.Bytes(kMagicSize, &magic, "magic"));
  uint16_t major, minor;
  TETHER_RETURN_IF_ERROR(header.U16(&major, "format version"));
  TETHER_RETURN_IF_ERROR(header.U16(&minor, "format version"));
  if (major > kExecutableFormatMajor) {
    return absl::InvalidArgumentError(
        absl::StrCat("executable format ", major, ".", minor, " is newer than this runtime's ",
                     kExecutableFormatMajor, ".", kExecutableFormatMinor));
  }
  if (major < kExecutableFormatMajor) {
    return absl::InvalidArgumentError(absl::StrCat(
        "executable format ", major, ".", minor, " is older than this runtime's ",
        kExecutableFormatMajor, ".", kExecutableFormatMinor, " and no longer supported"));
  }
  if (bytes.size() < kFixedHeaderSize + kChecksumSize) {
    return absl::InvalidArgumentError(absl::StrCat("truncated executable: ", bytes.size(),
                                                   " bytes, at least ",
                                                   kFixedHeaderSize + kChecksumSize, " needed"));
  }
  // Everything after the version is covered by the checksum: check it before
  // believing any count or offset.
  const absl::string_view body = bytes.substr(0, bytes.size() - kChecksumSize);
  uint32_t stored = 0;
  for (size_t i = 0; i < kChecksumSize; ++i) {
    stored |= uint32_t{static_cast<unsigned char>(bytes[body.size() + i])} << (8 * i);
  }
  const uint32_t computed = Crc32c(body);
  if (stored != computed) {
    return absl::InvalidArgumentError(
        absl::StrFormat("executable checksum mismatch (stored 0x%08x, computed 0x%08x): the file "
                        "is corrupt or truncated",
                        stored, computed));
  }

  Reader r(body, "executable header");
  TETHER_RETURN_IF_ERROR(r.Bytes(kMagicSize + 4, &magic, "magic and version"));
  uint32_t section_count, producer_len;
  TETHER_RETURN_IF_ERROR(r.U32(&section_count, "section count"));
  if (section_count > kMaxSections) {
    return r.Error(section_count, " sections, at most ", kMaxSections, " allowed");
  }
  TETHER_RETURN_IF_ERROR(r.U32(&producer_len, "producer length"));
  if (producer_len > kMaxProducerBytes) {
    return r.Error("producer is ", producer_len, " bytes, at most ", kMaxProducerBytes, " allowed");
  }
  absl::string_view producer;
  TETHER_RETURN_IF_ERROR(r.Bytes(producer_len, &producer, "producer"));
  TETHER_RETURN_IF_ERROR(r.CheckCount(section_count, kSectionEntrySize, "section table entries"));

  std::vector<SectionEntry> sections;
  sections.reserve(section_count);
  for (uint32_t i = 0; i < section_count; ++i) {
    SectionEntry s;
    uint32_t reserved;
    TETHER_RETURN_IF_ERROR(r.U32(&s.id, "section id"));
    TETHER_RETURN_IF_ERROR(r.U32(&reserved, "section flags"));
    TETHER_RETURN_IF_ERROR(r.U64(&s.offset, "section offset"));
    TETHER_RETURN_IF_ERROR(r.U64(&s.size, "section size"));
    sections.push_back(s);
  }
  const uint64_t table_end = r.pos();
  for (const SectionEntry& s : sections) {
    if (s.offset < table_end || s.offset > body.size() || s.size > body.size() - s.offset) {
      return absl::InvalidArgumentError(absl::StrCat(
          "section ", s.id, " (", SectionName(s.id), ") at offset ", s.offset, " with size ",
          s.size, " lies outside the payload [", table_end, ", ", body.size(), ")"));
    }
  }
  std::vector<SectionEntry> by_offset = sections;
  std::sort(by_offset.begin(), by_offset.end(),
            [](const SectionEntry& a, const SectionEntry& b) { return a.offset < b.offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i].offset < by_offset[i - 1].offset + by_offset[i - 1].size) {
      return absl::InvalidArgumentError(
          absl::StrCat("sections ", by_offset[i - 1].id, " and ", by_offset[i].id, " overlap"));
    }
  }

  auto exec = MakeRef<Executable>();
  bool seen[kSectionMetadata + 1] = {};
  for (const SectionEntry& s : sections) {
    if (s.id < kSectionFunctions || s.id > kSectionMetadata) continue;  // newer minor: skip
    if (seen[s.id]) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate ", SectionName(s.id), " section"));
    }
    seen[s.id] = true;
    Reader sr(body.substr(s.offset, s.size), absl::StrCat(SectionName(s.id), " section"));
    switch (s.id) {
      case kSectionFunctions:
        TETHER_RETURN_IF_ERROR(ReadFunctions(sr, *exec));
        break;
      case kSectionConstants:
        TETHER_RETURN_IF_ERROR(ReadConstants(sr, *exec));
        break;
      case kSectionBytecode:
        TETHER_RETURN_IF_ERROR(ReadBytecode(sr, *exec));
        break;
      case kSectionKernelLibraries:
        TETHER_RETURN_IF_ERROR(ReadKernelLibraries(sr, *exec));
        break;
      case kSectionMetadata:
        TETHER_RETURN_IF_ERROR(ReadMetadata(sr, *exec));
        break;
    }
    if (!sr.done()) {
      return absl::InvalidArgumentError(
          absl::StrCat(SectionName(s.id), " section has ", sr.remaining(), " trailing bytes"));
    }
  }
  for (uint32_t id : {kSectionFunctions, kSectionConstants, kSectionBytecode}) {
    if (!seen[id]) {
      return absl::InvalidArgumentError(
          absl::StrCat("executable has no ", SectionName(id), " section"));
    }
  }
  TETHER_RETURN_IF_ERROR(exec->Validate());
  return exec;
}

}  // namespace

std::string RecomputeExecutableChecksum(std::string bytes) {
  if (bytes.size() < kChecksumSize) return bytes;
  const size_t body = bytes.size() - kChecksumSize;
  const uint32_t crc = Crc32c(absl::string_view(bytes).substr(0, body));
  for (size_t i = 0; i < kChecksumSize; ++i) {
    bytes[body + i] = static_cast<char>((crc >> (8 * i)) & 0xFF);
  }
  return bytes;
}

std::string Executable::SaveToBytes() const {
  // Sections are built first so the table can carry their sizes.
  std::vector<std::pair<uint32_t, std::string>> sections;
  {
    Writer w;
    w.U32(static_cast<uint32_t>(functions.size()));
    for (const FunctionInfo& f : functions) {
      w.I32(static_cast<int32_t>(f.kind));
      w.String(f.name);
      w.I64(f.start_instr);
      w.I64(f.end_instr);
      w.I64(f.num_args);
      w.I64(f.register_file_size);
      w.U32(static_cast<uint32_t>(f.param_names.size()));
      for (const std::string& p : f.param_names) w.String(p);
    }
    sections.emplace_back(kSectionFunctions, std::move(w.out()));
  }
  {
    Writer w;
    w.U32(static_cast<uint32_t>(constants.size()));
    for (const Value& c : constants) WriteConstant(w, c);
    sections.emplace_back(kSectionConstants, std::move(w.out()));
  }
  {
    Writer w;
    w.U64(instr_offset.size());
    for (int64_t o : instr_offset) w.I64(o);
    w.U64(instr_data.size());
    for (ExecWord x : instr_data) w.I64(x);
    sections.emplace_back(kSectionBytecode, std::move(w.out()));
  }
  {
    Writer w;
    w.U32(static_cast<uint32_t>(kernel_libraries.size()));
    for (const KernelLibraryBlob& lib : kernel_libraries) {
      w.String(lib.target);
      w.String(lib.format);
      w.U64(lib.data.size());
      w.Bytes(lib.data);
    }
    sections.emplace_back(kSectionKernelLibraries, std::move(w.out()));
  }
  {
    Writer w;
    w.U32(static_cast<uint32_t>(metadata.size()));
    for (const auto& [key, value] : metadata) {
      w.String(key);
      w.String(value);
    }
    sections.emplace_back(kSectionMetadata, std::move(w.out()));
  }

  std::string producer = "tether";
  if (auto it = metadata.find("producer"); it != metadata.end()) producer = it->second;
  if (producer.size() > kMaxProducerBytes) producer.resize(kMaxProducerBytes);

  Writer w;
  w.Bytes(kExecutableMagic);
  w.U16(kExecutableFormatMajor);
  w.U16(kExecutableFormatMinor);
  w.U32(static_cast<uint32_t>(sections.size()));
  w.String(producer);
  // Section payloads start 8-byte aligned, in table order.
  uint64_t offset = w.out().size() + sections.size() * kSectionEntrySize;
  for (const auto& [id, payload] : sections) {
    offset = (offset + 7) / 8 * 8;
    w.U32(id);
    w.U32(0);
    w.U64(offset);
    w.U64(payload.size());
    offset += payload.size();
  }
  for (const auto& [id, payload] : sections) {
    w.PadTo(8);
    w.Bytes(payload);
  }
  w.U32(Crc32c(w.out()));
  return std::move(w.out());
}

absl::StatusOr<Ref<Executable>> Executable::LoadFromBytes(absl::string_view bytes) {
  return Parse(bytes);
}

absl::Status Executable::SaveToFile(const std::string& path) const {
  TETHER_RETURN_IF_ERROR(Validate());
  return WriteStringToFileAtomic(path, SaveToBytes());
}

absl::StatusOr<Ref<Executable>> Executable::LoadFromFile(const std::string& path) {
  TETHER_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  absl::StatusOr<Ref<Executable>> exec = LoadFromBytes(bytes);
  if (!exec.ok()) {
    return Annotate(exec.status(), "loading ", path, ": ");
  }
  return exec;
}

void RegisterExecutableLoader() {
  static const bool registered = [] {
    ModuleLoader loader;
    loader.type_key = "vm.Executable";
    loader.magic = std::string(kExecutableMagic);
    loader.load = [](absl::string_view bytes) -> absl::StatusOr<Ref<Module>> {
      TETHER_ASSIGN_OR_RETURN(Ref<Executable> exec, Executable::LoadFromBytes(bytes));
      return Ref<Module>(std::move(exec));
    };
    // ALREADY_EXISTS means someone registered it first; either way it is there.
    absl::Status status = RegisterModuleLoader(std::move(loader));
    (void)status;
    return true;
  }();
  (void)registered;
}

}  // namespace tether::vm
