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
#include "runtime/core/byte_io.h"
#include "runtime/core/error.h"
#include "runtime/core/file.h"
#include "runtime/core/tensor.h"
#include "runtime/kernel/crc32c.h"
#include "runtime/kernel/elf_section.h"
#include "runtime/vm/executable.h"
#include "runtime/vm/executable_library.h"

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

void WriteConstant(ByteWriter& w, const Value& v) {
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
    const size_t nbytes = static_cast<size_t>(std::max<int64_t>(t->NumBytes(), 0));
    // A compact CPU tensor (what ExecBuilder stores) is written from its
    // memory; others through a copy.
    std::string staged;
    absl::string_view bytes;
    bool readable = true;
    if (t->device().type == kDLCPU && t->IsContiguous()) {
      bytes = absl::string_view(static_cast<const char*>(t->element_data()), nbytes);
    } else {
      staged.resize(nbytes);
      readable = t.CopyToBytes(staged.data(), nbytes).ok();
      bytes = staged;
    }
    if (readable) {
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

absl::Status ReadFunctions(ByteReader& r, Executable& exec) {
  uint32_t count;
  TETHER_ASSIGN_OR_RETURN(count, r.U32("function count"));
  TETHER_RETURN_IF_ERROR(r.CheckCount(count, kMinFunctionBytes, "functions"));
  exec.functions.resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    FunctionInfo& f = exec.functions[i];
    int32_t kind;
    TETHER_ASSIGN_OR_RETURN(kind, r.I32("function kind"));
    f.kind = static_cast<FunctionKind>(kind);  // Validate() rejects unknown kinds
    TETHER_ASSIGN_OR_RETURN(f.name, r.String(kMaxNameBytes, "function name"));
    TETHER_ASSIGN_OR_RETURN(f.start_instr, r.I64("function start"));
    TETHER_ASSIGN_OR_RETURN(f.end_instr, r.I64("function end"));
    TETHER_ASSIGN_OR_RETURN(f.num_args, r.I64("function argument count"));
    TETHER_ASSIGN_OR_RETURN(f.register_file_size, r.I64("function register file size"));
    uint32_t num_params;
    TETHER_ASSIGN_OR_RETURN(num_params, r.U32("parameter name count"));
    TETHER_RETURN_IF_ERROR(r.CheckCount(num_params, 4, "parameter names"));
    f.param_names.resize(num_params);
    for (std::string& name : f.param_names) {
      TETHER_ASSIGN_OR_RETURN(name, r.String(kMaxNameBytes, "parameter name"));
    }
    if (!exec.function_map.emplace(f.name, static_cast<Index>(i)).second) {
      return r.Error("duplicate function name ", f.name);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Value> ReadTensor(ByteReader& r, uint32_t index) {
  uint8_t code, bits;
  uint16_t lanes;
  TETHER_ASSIGN_OR_RETURN(code, r.U8("tensor dtype"));
  TETHER_ASSIGN_OR_RETURN(bits, r.U8("tensor dtype"));
  TETHER_ASSIGN_OR_RETURN(lanes, r.U16("tensor dtype"));
  DataType dtype(code, bits, lanes);
  if (!dtype.IsValidStorageType()) {
    return r.Error("tensor constant ", index, " has unsupported data type code ", int{code},
                   " bits ", int{bits}, " lanes ", lanes);
  }
  uint32_t ndim;
  TETHER_ASSIGN_OR_RETURN(ndim, r.U32("tensor ndim"));
  if (ndim > kMaxTensorDims) {
    return r.Error("tensor constant ", index, " has ", ndim, " dims, at most ", kMaxTensorDims,
                   " allowed");
  }
  std::vector<int64_t> shape(ndim);
  for (int64_t& d : shape) {
    TETHER_ASSIGN_OR_RETURN(d, r.I64("tensor shape"));
    if (d < 0) return r.Error("tensor constant ", index, " has negative dimension ", d);
  }
  absl::StatusOr<int64_t> expected = CheckedNumBytes(shape, dtype);
  if (!expected.ok()) {
    return r.Error("tensor constant ", index, " has invalid shape ", ShapeToString(shape), ": ",
                   expected.status().message());
  }
  uint64_t nbytes;
  TETHER_ASSIGN_OR_RETURN(nbytes, r.U64("tensor byte size"));
  if (nbytes != static_cast<uint64_t>(*expected)) {
    return r.Error("tensor constant ", index, " of ", dtype.ToString(), ShapeToString(shape),
                   " has ", nbytes, " bytes, expected ", *expected);
  }
  absl::string_view data;
  TETHER_ASSIGN_OR_RETURN(data, r.Bytes(nbytes, "tensor data"));
  TETHER_ASSIGN_OR_RETURN(Tensor t, Tensor::FromBytes(shape, dtype, data.data(), data.size()));
  return Value(t.ref());
}

absl::Status ReadConstants(ByteReader& r, Executable& exec) {
  uint32_t count;
  TETHER_ASSIGN_OR_RETURN(count, r.U32("constant count"));
  TETHER_RETURN_IF_ERROR(r.CheckCount(count, kMinConstantBytes, "constants"));
  exec.constants.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    uint8_t tag;
    TETHER_ASSIGN_OR_RETURN(tag, r.U8("constant tag"));
    switch (tag) {
      case kTagInt: {
        int64_t v;
        TETHER_ASSIGN_OR_RETURN(v, r.I64("int constant"));
        exec.constants.emplace_back(v);
        break;
      }
      case kTagFloat: {
        uint64_t bits;
        TETHER_ASSIGN_OR_RETURN(bits, r.U64("float constant"));
        double v;
        std::memcpy(&v, &bits, sizeof(v));
        exec.constants.emplace_back(v);
        break;
      }
      case kTagBool: {
        uint8_t v;
        TETHER_ASSIGN_OR_RETURN(v, r.U8("bool constant"));
        if (v > 1) return r.Error("bool constant ", i, " has value ", int{v});
        exec.constants.emplace_back(v == 1);
        break;
      }
      case kTagString: {
        std::string s;
        TETHER_ASSIGN_OR_RETURN(s, r.String(kMaxStringBytes, "string constant"));
        exec.constants.emplace_back(std::move(s));
        break;
      }
      case kTagShape: {
        uint32_t ndim;
        TETHER_ASSIGN_OR_RETURN(ndim, r.U32("shape ndim"));
        if (ndim > kMaxShapeDims) {
          return r.Error("shape constant ", i, " has ", ndim, " dims, at most ", kMaxShapeDims,
                         " allowed");
        }
        TETHER_RETURN_IF_ERROR(r.CheckCount(ndim, 8, "shape dims"));
        ShapeObj::Dims dims(ndim);
        for (int64_t& d : dims) {
          TETHER_ASSIGN_OR_RETURN(d, r.I64("shape dim"));
        }
        exec.constants.push_back(MakeShape(std::move(dims)));
        break;
      }
      case kTagDataType: {
        uint8_t code, bits;
        uint16_t lanes;
        TETHER_ASSIGN_OR_RETURN(code, r.U8("dtype constant"));
        TETHER_ASSIGN_OR_RETURN(bits, r.U8("dtype constant"));
        TETHER_ASSIGN_OR_RETURN(lanes, r.U16("dtype constant"));
        exec.constants.emplace_back(DataType(code, bits, lanes));
        break;
      }
      case kTagDevice: {
        int32_t type, id;
        TETHER_ASSIGN_OR_RETURN(type, r.I32("device constant"));
        TETHER_ASSIGN_OR_RETURN(id, r.I32("device constant"));
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

absl::Status ReadWords(ByteReader& r, std::vector<int64_t>* out, absl::string_view what) {
  uint64_t count;
  TETHER_ASSIGN_OR_RETURN(count, r.U64(what));
  TETHER_RETURN_IF_ERROR(r.CheckCount(count, 8, what));
  out->resize(count);
  for (int64_t& w : *out) {
    TETHER_ASSIGN_OR_RETURN(w, r.I64(what));
  }
  return absl::OkStatus();
}

absl::Status ReadBytecode(ByteReader& r, Executable& exec) {
  TETHER_RETURN_IF_ERROR(ReadWords(r, &exec.instr_offset, "instruction offsets"));
  return ReadWords(r, &exec.instr_data, "instruction words");
}

absl::Status ReadKernelLibraries(ByteReader& r, Executable& exec) {
  uint32_t count;
  TETHER_ASSIGN_OR_RETURN(count, r.U32("kernel library count"));
  TETHER_RETURN_IF_ERROR(r.CheckCount(count, kMinKernelLibraryBytes, "kernel libraries"));
  exec.kernel_libraries.resize(count);
  for (KernelLibraryBlob& lib : exec.kernel_libraries) {
    TETHER_ASSIGN_OR_RETURN(lib.target, r.String(kMaxNameBytes, "kernel library target"));
    TETHER_ASSIGN_OR_RETURN(lib.format, r.String(kMaxNameBytes, "kernel library format"));
    uint64_t size;
    TETHER_ASSIGN_OR_RETURN(size, r.U64("kernel library size"));
    absl::string_view data;
    TETHER_ASSIGN_OR_RETURN(data, r.Bytes(size, "kernel library data"));
    lib.data.assign(data.data(), data.size());
  }
  return absl::OkStatus();
}

absl::Status ReadMetadata(ByteReader& r, Executable& exec) {
  uint32_t count;
  TETHER_ASSIGN_OR_RETURN(count, r.U32("metadata count"));
  TETHER_RETURN_IF_ERROR(r.CheckCount(count, kMinMetadataEntryBytes, "metadata entries"));
  std::string previous;
  for (uint32_t i = 0; i < count; ++i) {
    std::string key, value;
    TETHER_ASSIGN_OR_RETURN(key, r.String(kMaxNameBytes, "metadata key"));
    TETHER_ASSIGN_OR_RETURN(value, r.String(kMaxStringBytes, "metadata value"));
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
  ByteReader header(bytes, "executable header");
  absl::string_view magic;
  TETHER_ASSIGN_OR_RETURN(magic, header.Bytes(kMagicSize, "magic"));
  uint16_t major, minor;
  TETHER_ASSIGN_OR_RETURN(major, header.U16("format version"));
  TETHER_ASSIGN_OR_RETURN(minor, header.U16("format version"));
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

  ByteReader r(body, "executable header");
  TETHER_ASSIGN_OR_RETURN(magic, r.Bytes(kMagicSize + 4, "magic and version"));
  uint32_t section_count, producer_len;
  TETHER_ASSIGN_OR_RETURN(section_count, r.U32("section count"));
  if (section_count > kMaxSections) {
    return r.Error(section_count, " sections, at most ", kMaxSections, " allowed");
  }
  TETHER_ASSIGN_OR_RETURN(producer_len, r.U32("producer length"));
  if (producer_len > kMaxProducerBytes) {
    return r.Error("producer is ", producer_len, " bytes, at most ", kMaxProducerBytes, " allowed");
  }
  absl::string_view producer;
  TETHER_ASSIGN_OR_RETURN(producer, r.Bytes(producer_len, "producer"));
  TETHER_RETURN_IF_ERROR(r.CheckCount(section_count, kSectionEntrySize, "section table entries"));

  std::vector<SectionEntry> sections;
  sections.reserve(section_count);
  for (uint32_t i = 0; i < section_count; ++i) {
    SectionEntry s;
    TETHER_ASSIGN_OR_RETURN(s.id, r.U32("section id"));
    TETHER_RETURN_IF_ERROR(r.U32("section flags").status());  // reserved: not read yet
    TETHER_ASSIGN_OR_RETURN(s.offset, r.U64("section offset"));
    TETHER_ASSIGN_OR_RETURN(s.size, r.U64("section size"));
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
    ByteReader sr(body.substr(s.offset, s.size), absl::StrCat(SectionName(s.id), " section"));
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

std::string Executable::SaveToBytes() const { return SaveToBytesWithEmptyLibrary(*this, -1); }

std::string SaveToBytesWithEmptyLibrary(const Executable& exec, int empty_library) {
  // Sections are built first so the table can carry their sizes.
  std::vector<std::pair<uint32_t, std::string>> sections;
  {
    ByteWriter w;
    w.U32(static_cast<uint32_t>(exec.functions.size()));
    for (const FunctionInfo& f : exec.functions) {
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
    ByteWriter w;
    size_t tensor_bytes = 0;
    for (const Value& c : exec.constants) {
      if (c.is_tensor()) tensor_bytes += std::max<int64_t>(c.AsRef<TensorObj>()->NumBytes(), 0);
    }
    w.out().reserve(tensor_bytes + 64 * exec.constants.size() + 4);
    w.U32(static_cast<uint32_t>(exec.constants.size()));
    for (const Value& c : exec.constants) WriteConstant(w, c);
    sections.emplace_back(kSectionConstants, std::move(w.out()));
  }
  {
    ByteWriter w;
    w.U64(exec.instr_offset.size());
    for (int64_t o : exec.instr_offset) w.I64(o);
    w.U64(exec.instr_data.size());
    for (ExecWord x : exec.instr_data) w.I64(x);
    sections.emplace_back(kSectionBytecode, std::move(w.out()));
  }
  {
    ByteWriter w;
    w.U32(static_cast<uint32_t>(exec.kernel_libraries.size()));
    for (size_t i = 0; i < exec.kernel_libraries.size(); ++i) {
      const KernelLibraryBlob& lib = exec.kernel_libraries[i];
      const absl::string_view data =
          static_cast<int>(i) == empty_library ? absl::string_view() : lib.data;
      w.String(lib.target);
      w.String(lib.format);
      w.U64(data.size());
      w.Bytes(data);
    }
    sections.emplace_back(kSectionKernelLibraries, std::move(w.out()));
  }
  {
    ByteWriter w;
    w.U32(static_cast<uint32_t>(exec.metadata.size()));
    for (const auto& [key, value] : exec.metadata) {
      w.String(key);
      w.String(value);
    }
    sections.emplace_back(kSectionMetadata, std::move(w.out()));
  }

  std::string producer = "tether";
  if (auto it = exec.metadata.find("producer"); it != exec.metadata.end()) producer = it->second;
  if (producer.size() > kMaxProducerBytes) producer.resize(kMaxProducerBytes);

  ByteWriter w;
  size_t total = 64 + producer.size() + (sections.size() + 1) * kSectionEntrySize;
  for (const auto& [id, payload] : sections) total += payload.size() + 8;
  w.out().reserve(total);
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
  if (IsElfImage(bytes)) return LoadExportedLibrary(bytes);
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
    RegisterSharedLibraryLoader();
    return true;
  }();
  (void)registered;
}

}  // namespace tether::vm
