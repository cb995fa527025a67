// Tests of the executable: save/load round trips, version compatibility,
// corrupt-file handling, the validator's rules one by one, and the text views.
#include "runtime/vm/executable.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "runtime/kernel/crc32c.h"
#include "runtime/module/module.h"
#include "runtime/vm/exec_builder.h"
#include "tests/vm/executable_test_util.h"

namespace tether::vm {
namespace {

using testing::BuildRichExecutable;
using testing::ExpectSameExecutable;
using testing::FindSection;
using ::testing::HasSubstr;
using testing::Le;
using testing::ReadLe;
using testing::ReplaceSection;
using testing::WriteLe;

constexpr uint32_t kFunctionsSection = 1;
constexpr uint32_t kConstantsSection = 2;
constexpr uint32_t kBytecodeSection = 3;
constexpr uint32_t kKernelLibrariesSection = 4;
constexpr uint32_t kMetadataSection = 5;

#define EXPECT_STATUS(expr, expected_code, fragment)                  \
  do {                                                                \
    const absl::Status status_ = (expr);                              \
    EXPECT_EQ(status_.code(), (expected_code)) << status_;            \
    EXPECT_THAT(std::string(status_.message()), HasSubstr(fragment)); \
  } while (0)

absl::Status LoadStatus(const std::string& bytes) {
  return Executable::LoadFromBytes(bytes).status();
}

// --- Round trips ------------------------------------------------------------

TEST(ExecutableFormatTest, RoundTripPreservesEverything) {
  Ref<Executable> exec = BuildRichExecutable();
  ASSERT_TRUE(exec);
  const std::string bytes = exec->SaveToBytes();
  absl::StatusOr<Ref<Executable>> loaded = Executable::LoadFromBytes(bytes);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectSameExecutable(*exec, **loaded);
  // Saving is deterministic: the reloaded executable writes the same bytes.
  EXPECT_EQ((*loaded)->SaveToBytes(), bytes);
}

TEST(ExecutableFormatTest, RoundTripKeepsEveryConstantKind) {
  Ref<Executable> exec = BuildRichExecutable();
  ASSERT_TRUE(exec);
  absl::StatusOr<Ref<Executable>> loaded = Executable::LoadFromBytes(exec->SaveToBytes());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const std::vector<Value>& c = (*loaded)->constants;
  ASSERT_EQ(c.size(), 8u);
  EXPECT_TRUE(c[0].is_int());
  EXPECT_EQ(c[0].int_value(), int64_t{1} << 60);
  EXPECT_TRUE(c[1].is_float());
  EXPECT_EQ(c[1].float_value(), 1.5);
  EXPECT_TRUE(c[2].is_bool());
  EXPECT_TRUE(c[2].bool_value());
  ASSERT_TRUE(c[3].is_string());
  EXPECT_EQ(c[3].string_value(), "hello");
  ASSERT_TRUE(c[4].is_shape());
  EXPECT_EQ(c[4].AsRef<ShapeObj>()->dims, ShapeObj::Dims({2, 3}));
  ASSERT_TRUE(c[5].is_dtype());
  EXPECT_EQ(c[5].dtype_value(), DataType::Float(16));
  ASSERT_TRUE(c[6].is_device());
  EXPECT_EQ(c[6].device_value(), Device::Cuda(1));
  ASSERT_TRUE(c[7].is_tensor());
  Tensor t(c[7].AsRef<TensorObj>());
  EXPECT_EQ(t->device(), Device::Cpu());
  EXPECT_EQ(t->dtype(), DataType::Int(32));
  std::vector<int32_t> values(4);
  ASSERT_TRUE(t.CopyToBytes(values.data(), 16).ok());
  EXPECT_EQ(values, (std::vector<int32_t>{1, -2, 3, -4}));
}

TEST(ExecutableFormatTest, RoundTripOfEmptyExecutable) {
  auto exec = MakeRef<Executable>();
  ASSERT_TRUE(exec->Validate().ok());
  absl::StatusOr<Ref<Executable>> loaded = Executable::LoadFromBytes(exec->SaveToBytes());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectSameExecutable(*exec, **loaded);
}

TEST(ExecutableFormatTest, RoundTripOfSpecialFloatsAndEmptyTensor) {
  ExecBuilder b;
  b.EmitFunction("main", 0);
  b.EmitCall("f",
             {b.ConvertConstant(-0.0), b.ConvertConstant(std::numeric_limits<double>::infinity()),
              b.ConvertConstant(std::numeric_limits<double>::quiet_NaN()),
              b.ConvertConstant(std::numeric_limits<int64_t>::min()), b.ConvertConstant(""),
              b.ConvertConstant(MakeShape({})),
              b.ConvertConstant(
                  *Tensor::FromBytes(std::vector<int64_t>{0, 3}, DataType::Float(32), nullptr, 0))},
             0);
  b.EmitRet(0);
  b.EndFunction("main");
  absl::StatusOr<Ref<Executable>> exec = b.Get();
  ASSERT_TRUE(exec.ok()) << exec.status();
  absl::StatusOr<Ref<Executable>> loaded = Executable::LoadFromBytes((*exec)->SaveToBytes());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectSameExecutable(**exec, **loaded);
}

TEST(ExecutableFormatTest, SaveAndLoadFile) {
  Ref<Executable> exec = BuildRichExecutable();
  ASSERT_TRUE(exec);
  const std::string path = ::testing::TempDir() + "/exec_roundtrip.tx";
  ASSERT_TRUE(exec->SaveToFile(path).ok());
  absl::StatusOr<Ref<Executable>> loaded = Executable::LoadFromFile(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectSameExecutable(*exec, **loaded);
}

TEST(ExecutableFormatTest, LoadFromMissingFileIsNotFound) {
  EXPECT_EQ(Executable::LoadFromFile(::testing::TempDir() + "/no/such/file.tx").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ExecutableFormatTest, SaveToFileRejectsInvalidExecutable) {
  auto exec = MakeRef<Executable>();
  exec->instr_data = {2};  // a word without an instruction
  EXPECT_STATUS(exec->SaveToFile(::testing::TempDir() + "/bad.tx"),
                absl::StatusCode::kInvalidArgument, "after the last instruction");
}

TEST(ExecutableFormatTest, ModuleLoaderLoadsExecutables) {
  RegisterExecutableLoader();
  RegisterExecutableLoader();  // idempotent
  Ref<Executable> exec = BuildRichExecutable();
  ASSERT_TRUE(exec);
  absl::StatusOr<Ref<Module>> module = Module::LoadFromBinary(exec->SaveToBytes());
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_EQ((*module)->type_key(), "vm.Executable");
  EXPECT_EQ((*module)->SaveToBinary().value(), exec->SaveToBytes());
}

TEST(ExecutableFormatTest, FileStartsWithMagicAndVersion) {
  Ref<Executable> exec = BuildRichExecutable();
  const std::string bytes = exec->SaveToBytes();
  EXPECT_EQ(bytes.substr(0, 8), "TETHEREX");
  EXPECT_EQ(ReadLe(bytes, 8, 2), kExecutableFormatMajor);
  EXPECT_EQ(ReadLe(bytes, 10, 2), kExecutableFormatMinor);
  const uint32_t producer_len = ReadLe(bytes, 16, 4);
  EXPECT_EQ(bytes.substr(20, producer_len), "tether tests");
}

TEST(ExecutableFormatTest, ChecksumIsCrc32c) {
  // The CRC-32C check value: crc32c("123456789") == 0xE3069283.
  std::string bytes = RecomputeExecutableChecksum(std::string("123456789") + std::string(4, '\0'));
  EXPECT_EQ(ReadLe(bytes, 9, 4), 0xE3069283u);
  EXPECT_EQ(RecomputeExecutableChecksum("abc"), "abc");
}

TEST(ExecutableFormatTest, SlicedCrcMatchesBitwiseCrc) {
  auto bitwise = [](const std::string& s) {
    uint32_t crc = 0xFFFFFFFFu;
    for (unsigned char c : s) {
      crc ^= c;
      for (int k = 0; k < 8; ++k) crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
    }
    return crc ^ 0xFFFFFFFFu;
  };
  std::string s;
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(Crc32c(s), bitwise(s)) << "length " << s.size();
    EXPECT_EQ(SoftwareCrc32cForTesting(s), bitwise(s)) << "length " << s.size();
    s.push_back(static_cast<char>(i * 131 + 7));
  }
  // Starts off 8-byte alignment, and a large buffer: the CPU's instruction
  // (where Crc32c uses it) and the tables agree.
  for (size_t start = 1; start < 8; ++start) {
    absl::string_view tail = absl::string_view(s).substr(start);
    EXPECT_EQ(Crc32c(tail), bitwise(std::string(tail))) << "start " << start;
  }
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 2654435761u) >> 13);
  EXPECT_EQ(Crc32c(big), SoftwareCrc32cForTesting(big));
}

// --- Versions -----------------------------------------------------------------

TEST(ExecutableVersionTest, NewerMinorLoads) {
  std::string bytes = BuildRichExecutable()->SaveToBytes();
  WriteLe(bytes, 10, 2, kExecutableFormatMinor + 7);
  bytes = RecomputeExecutableChecksum(bytes);
  absl::StatusOr<Ref<Executable>> loaded = Executable::LoadFromBytes(bytes);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->AsText(), BuildRichExecutable()->AsText());
}

TEST(ExecutableVersionTest, NewerMinorWithUnknownSectionLoads) {
  const std::string bytes = BuildRichExecutable()->SaveToBytes();
  const uint32_t count = ReadLe(bytes, 12, 4);
  const uint32_t producer_len = ReadLe(bytes, 16, 4);
  const size_t table = 20 + producer_len;
  const size_t table_end = table + 24 * count;
  // A 1.3 file: one more table entry (id 77) whose payload is appended.
  std::string out = bytes.substr(0, table);
  WriteLe(out, 10, 2, 3);
  WriteLe(out, 12, 4, count + 1);
  for (uint32_t i = 0; i < count; ++i) {
    std::string entry = bytes.substr(table + 24 * i, 24);
    WriteLe(entry, 8, 8, ReadLe(entry, 8, 8) + 24);
    out += entry;
  }
  const std::string extra = "a section from the future";
  const size_t body_end = bytes.size() - 4 + 24;
  out += Le(4, 77) + Le(4, 0) + Le(8, body_end) + Le(8, extra.size());
  out += bytes.substr(table_end, bytes.size() - 4 - table_end);
  out += extra;
  out = RecomputeExecutableChecksum(out + std::string(4, '\0'));
  absl::StatusOr<Ref<Executable>> loaded = Executable::LoadFromBytes(out);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectSameExecutable(*BuildRichExecutable(), **loaded);
}

TEST(ExecutableVersionTest, NewerMajorIsRejectedNamingBothVersions) {
  std::string bytes = BuildRichExecutable()->SaveToBytes();
  WriteLe(bytes, 8, 2, 2);
  WriteLe(bytes, 10, 2, 0);
  // Rejected on the version alone, whatever the rest of the file holds.
  EXPECT_STATUS(LoadStatus(bytes), absl::StatusCode::kInvalidArgument,
                "executable format 2.0 is newer than this runtime's 1.0");
  EXPECT_STATUS(LoadStatus(RecomputeExecutableChecksum(bytes)), absl::StatusCode::kInvalidArgument,
                "executable format 2.0 is newer than this runtime's 1.0");
}

TEST(ExecutableVersionTest, OlderMajorIsRejected) {
  std::string bytes = BuildRichExecutable()->SaveToBytes();
  WriteLe(bytes, 8, 2, 0);
  WriteLe(bytes, 10, 2, 14);
  EXPECT_STATUS(LoadStatus(bytes), absl::StatusCode::kInvalidArgument,
                "executable format 0.14 is older than this runtime's 1.0");
}

// --- Corrupt files --------------------------------------------------------------

TEST(ExecutableLoaderTest, RejectsBadMagic) {
  std::string bytes = BuildRichExecutable()->SaveToBytes();
  bytes[0] = 'X';
  EXPECT_STATUS(LoadStatus(bytes), absl::StatusCode::kInvalidArgument, "not a tether executable");
  EXPECT_STATUS(LoadStatus(""), absl::StatusCode::kInvalidArgument, "not a tether executable");
  EXPECT_STATUS(LoadStatus("TETHER"), absl::StatusCode::kInvalidArgument,
                "not a tether executable");
  // An ELF image is read as an exported library (executable_library.cc),
  // and this one is none.
  EXPECT_STATUS(LoadStatus("\x7f"
                           "ELF\2\1\1\0\0\0\0\0\0\0\0\0"),
                absl::StatusCode::kInvalidArgument, "not a tether executable");
}

TEST(ExecutableLoaderTest, RejectsChecksumMismatch) {
  std::string bytes = BuildRichExecutable()->SaveToBytes();
  bytes[bytes.size() / 2] ^= 0x10;
  EXPECT_STATUS(LoadStatus(bytes), absl::StatusCode::kInvalidArgument, "checksum mismatch");
  std::string tail = BuildRichExecutable()->SaveToBytes();
  tail.back() ^= 1;
  EXPECT_STATUS(LoadStatus(tail), absl::StatusCode::kInvalidArgument, "checksum mismatch");
}

TEST(ExecutableLoaderTest, RejectsTruncatedHeader) {
  const std::string bytes = BuildRichExecutable()->SaveToBytes();
  EXPECT_STATUS(LoadStatus(bytes.substr(0, 10)), absl::StatusCode::kInvalidArgument, "truncated");
  EXPECT_STATUS(LoadStatus(bytes.substr(0, 20)), absl::StatusCode::kInvalidArgument, "truncated");
}

TEST(ExecutableLoaderTest, HugeCountsFailWithoutAllocating) {
  const std::string bytes = BuildRichExecutable()->SaveToBytes();
  // Each count claims billions of elements in a section of a few hundred bytes.
  EXPECT_STATUS(LoadStatus(ReplaceSection(bytes, kFunctionsSection, Le(4, 0xFFFFFFFF))),
                absl::StatusCode::kInvalidArgument, "cannot fit");
  EXPECT_STATUS(LoadStatus(ReplaceSection(bytes, kConstantsSection, Le(4, 0xFFFFFFFF))),
                absl::StatusCode::kInvalidArgument, "cannot fit");
  EXPECT_STATUS(LoadStatus(ReplaceSection(bytes, kBytecodeSection, Le(8, ~uint64_t{0}))),
                absl::StatusCode::kInvalidArgument, "cannot fit");
  EXPECT_STATUS(
      LoadStatus(ReplaceSection(bytes, kBytecodeSection, Le(8, 0) + Le(8, uint64_t{1} << 61))),
      absl::StatusCode::kInvalidArgument, "cannot fit");
  EXPECT_STATUS(LoadStatus(ReplaceSection(bytes, kKernelLibrariesSection, Le(4, 0xFFFFFFFF))),
                absl::StatusCode::kInvalidArgument, "cannot fit");
  EXPECT_STATUS(LoadStatus(ReplaceSection(bytes, kMetadataSection, Le(4, 0xFFFFFFFF))),
                absl::StatusCode::kInvalidArgument, "cannot fit");
  // A 1 TB kernel library and a 4 GB string.
  EXPECT_STATUS(LoadStatus(ReplaceSection(
                    bytes, kKernelLibrariesSection,
                    Le(4, 1) + Le(4, 1) + "x" + Le(4, 2) + "so" + Le(8, uint64_t{1} << 40))),
                absl::StatusCode::kInvalidArgument, "truncated");
  EXPECT_STATUS(
      LoadStatus(ReplaceSection(bytes, kConstantsSection, Le(4, 1) + Le(1, 4) + Le(4, 0xFFFFFFF0))),
      absl::StatusCode::kInvalidArgument, "at most");
}

TEST(ExecutableLoaderTest, RejectsBadSectionTable) {
  const std::string bytes = BuildRichExecutable()->SaveToBytes();
  const testing::RawSection functions = FindSection(bytes, kFunctionsSection);
  const testing::RawSection constants = FindSection(bytes, kConstantsSection);
  {
    std::string b = bytes;  // offset past the end
    WriteLe(b, functions.entry_offset + 8, 8, bytes.size());
    EXPECT_STATUS(LoadStatus(RecomputeExecutableChecksum(b)), absl::StatusCode::kInvalidArgument,
                  "lies outside the payload");
  }
  {
    std::string b = bytes;  // size overflowing offset + size
    WriteLe(b, functions.entry_offset + 16, 8, ~uint64_t{0});
    EXPECT_STATUS(LoadStatus(RecomputeExecutableChecksum(b)), absl::StatusCode::kInvalidArgument,
                  "lies outside the payload");
  }
  {
    std::string b = bytes;  // pointing into the header
    WriteLe(b, functions.entry_offset + 8, 8, 0);
    EXPECT_STATUS(LoadStatus(RecomputeExecutableChecksum(b)), absl::StatusCode::kInvalidArgument,
                  "lies outside the payload");
  }
  {
    std::string b = bytes;  // overlapping sections
    WriteLe(b, constants.entry_offset + 8, 8, functions.offset + 1);
    EXPECT_STATUS(LoadStatus(RecomputeExecutableChecksum(b)), absl::StatusCode::kInvalidArgument,
                  "overlap");
  }
  {
    std::string b = bytes;  // two function tables
    WriteLe(b, constants.entry_offset, 4, kFunctionsSection);
    EXPECT_STATUS(LoadStatus(RecomputeExecutableChecksum(b)), absl::StatusCode::kInvalidArgument,
                  "duplicate function table section");
  }
  {
    std::string b = bytes;  // the bytecode section renamed to an unknown id
    WriteLe(b, FindSection(bytes, kBytecodeSection).entry_offset, 4, 99);
    EXPECT_STATUS(LoadStatus(RecomputeExecutableChecksum(b)), absl::StatusCode::kInvalidArgument,
                  "executable has no bytecode section");
  }
  {
    std::string b = bytes;  // too many sections
    WriteLe(b, 12, 4, 65);
    EXPECT_STATUS(LoadStatus(RecomputeExecutableChecksum(b)), absl::StatusCode::kInvalidArgument,
                  "65 sections");
  }
  {
    std::string b = bytes;  // producer longer than allowed
    WriteLe(b, 16, 4, 1000);
    EXPECT_STATUS(LoadStatus(RecomputeExecutableChecksum(b)), absl::StatusCode::kInvalidArgument,
                  "producer is 1000 bytes");
  }
}

TEST(ExecutableLoaderTest, RejectsTrailingBytesInSection) {
  const std::string bytes = BuildRichExecutable()->SaveToBytes();
  EXPECT_STATUS(LoadStatus(ReplaceSection(bytes, kMetadataSection, Le(4, 0) + "junk")),
                absl::StatusCode::kInvalidArgument, "metadata section has 4 trailing bytes");
}

TEST(ExecutableLoaderTest, OptionalSectionsMayBeAbsent) {
  const std::string bytes = BuildRichExecutable()->SaveToBytes();
  std::string b = bytes;
  WriteLe(b, FindSection(bytes, kMetadataSection).entry_offset, 4, 1234);
  WriteLe(b, FindSection(bytes, kKernelLibrariesSection).entry_offset, 4, 1235);
  absl::StatusOr<Ref<Executable>> loaded =
      Executable::LoadFromBytes(RecomputeExecutableChecksum(b));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE((*loaded)->metadata.empty());
  EXPECT_TRUE((*loaded)->kernel_libraries.empty());
}

std::string OneConstant(const std::string& encoded) { return Le(4, 1) + encoded; }

TEST(ExecutableLoaderTest, RejectsBadConstants) {
  // An executable with no code, so any constant pool is structurally usable.
  const std::string bytes = MakeRef<Executable>()->SaveToBytes();
  auto load_with = [&](const std::string& pool) {
    return LoadStatus(ReplaceSection(bytes, kConstantsSection, pool));
  };
  auto tensor = [](uint8_t code, uint8_t bits, uint16_t lanes, std::vector<int64_t> dims,
                   uint64_t nbytes, size_t data) {
    std::string s = Le(1, 8) + Le(1, code) + Le(1, bits) + Le(2, lanes) + Le(4, dims.size());
    for (int64_t d : dims) s += Le(8, d);
    return s + Le(8, nbytes) + std::string(data, '\1');
  };
  EXPECT_TRUE(load_with(OneConstant(tensor(2, 32, 1, {2, 3}, 24, 24))).ok());
  EXPECT_STATUS(load_with(OneConstant(Le(1, 0) + Le(1, 0))), absl::StatusCode::kInvalidArgument,
                "constant 0 has unknown tag 0");
  EXPECT_STATUS(load_with(OneConstant(Le(1, 3) + Le(1, 2))), absl::StatusCode::kInvalidArgument,
                "bool constant 0 has value 2");
  EXPECT_STATUS(load_with(OneConstant(Le(1, 7) + Le(4, 99) + Le(4, 0))),
                absl::StatusCode::kInvalidArgument, "unknown type 99");
  EXPECT_STATUS(load_with(OneConstant(Le(1, 7) + Le(4, 1) + Le(4, 0xFFFFFFFF))),
                absl::StatusCode::kInvalidArgument, "negative id -1");
  EXPECT_STATUS(load_with(OneConstant(Le(1, 5) + Le(4, 1000000))),
                absl::StatusCode::kInvalidArgument, "at most");
  EXPECT_STATUS(load_with(OneConstant(tensor(2, 32, 1, {2, 3}, 20, 20))),
                absl::StatusCode::kInvalidArgument, "has 20 bytes, expected 24");
  EXPECT_STATUS(load_with(OneConstant(tensor(2, 32, 1, {2, -3}, 24, 24))),
                absl::StatusCode::kInvalidArgument, "negative dimension -3");
  EXPECT_STATUS(load_with(OneConstant(tensor(2, 13, 1, {2}, 4, 4))),
                absl::StatusCode::kInvalidArgument, "unsupported data type");
  EXPECT_STATUS(load_with(OneConstant(tensor(2, 32, 0, {2}, 0, 0))),
                absl::StatusCode::kInvalidArgument, "unsupported data type");
  EXPECT_STATUS(load_with(OneConstant(tensor(2, 32, 1, std::vector<int64_t>(33, 1), 4, 4))),
                absl::StatusCode::kInvalidArgument, "33 dims");
  // Dimensions whose product overflows int64.
  EXPECT_STATUS(
      load_with(OneConstant(tensor(2, 32, 1, {int64_t{1} << 40, int64_t{1} << 40}, 0, 0))),
      absl::StatusCode::kInvalidArgument, "invalid shape");
  // Plausible shape, data missing.
  EXPECT_STATUS(load_with(OneConstant(tensor(2, 32, 1, {1 << 20}, 4 << 20, 16))),
                absl::StatusCode::kInvalidArgument, "truncated");
}

TEST(ExecutableLoaderTest, RejectsBadFunctionTable) {
  const std::string bytes = BuildRichExecutable()->SaveToBytes();
  auto fn = [](const std::string& name) {
    return Le(4, 0) + Le(4, name.size()) + name + Le(8, 0) + Le(8, 0) + Le(8, -1) + Le(8, 0) +
           Le(4, 0);
  };
  // Duplicate names.
  const std::string dup = Le(4, 2) + fn("a") + fn("a");
  EXPECT_STATUS(
      LoadStatus(ReplaceSection(MakeRef<Executable>()->SaveToBytes(), kFunctionsSection, dup)),
      absl::StatusCode::kInvalidArgument, "duplicate function name a");
  // A name over the cap.
  const std::string long_name = Le(4, 1) + Le(4, 0) + Le(4, 1 << 20) + std::string(64, 'x');
  EXPECT_STATUS(LoadStatus(ReplaceSection(bytes, kFunctionsSection, long_name)),
                absl::StatusCode::kInvalidArgument, "function name is 1048576 bytes");
  // Functions loaded from the file go through Validate(): main's code is gone.
  EXPECT_STATUS(LoadStatus(ReplaceSection(bytes, kBytecodeSection, Le(8, 0) + Le(8, 0))),
                absl::StatusCode::kInvalidArgument, "function helper has invalid code range");
}

TEST(ExecutableLoaderTest, RejectsUnsortedMetadata) {
  const std::string bytes = BuildRichExecutable()->SaveToBytes();
  const std::string md = Le(4, 2) + Le(4, 1) + "b" + Le(4, 0) + Le(4, 1) + "a" + Le(4, 0);
  EXPECT_STATUS(LoadStatus(ReplaceSection(bytes, kMetadataSection, md)),
                absl::StatusCode::kInvalidArgument, "metadata key \"a\" is out of order");
  const std::string dup = Le(4, 2) + Le(4, 1) + "a" + Le(4, 0) + Le(4, 1) + "a" + Le(4, 0);
  EXPECT_STATUS(LoadStatus(ReplaceSection(bytes, kMetadataSection, dup)),
                absl::StatusCode::kInvalidArgument, "duplicated");
}

// --- Validate, rule by rule --------------------------------------------------------

using Words = std::vector<ExecWord>;

Words Call(RegName dst, Index func, std::vector<Arg> args) {
  Words w = {static_cast<ExecWord>(Opcode::kCall), dst, func, static_cast<ExecWord>(args.size())};
  for (Arg a : args) w.push_back(a.word());
  return w;
}
Words Ret(RegName r) { return {static_cast<ExecWord>(Opcode::kRet), r}; }
Words Goto(int64_t off) { return {static_cast<ExecWord>(Opcode::kGoto), off}; }
Words If(RegName c, int64_t off) { return {static_cast<ExecWord>(Opcode::kIf), c, off}; }

// main(x) with a 3-register file, calling packed "f" (index 1); 4 constants.
Ref<Executable> MakeExec(std::vector<Words> code) {
  auto exec = MakeRef<Executable>();
  for (const Words& instr : code) {
    exec->instr_offset.push_back(static_cast<int64_t>(exec->instr_data.size()));
    exec->instr_data.insert(exec->instr_data.end(), instr.begin(), instr.end());
  }
  FunctionInfo main;
  main.kind = FunctionKind::kVMFunc;
  main.name = "main";
  main.start_instr = 0;
  main.end_instr = static_cast<int64_t>(code.size());
  main.num_args = 1;
  main.register_file_size = 3;
  main.param_names = {"x"};
  FunctionInfo f;
  f.name = "f";
  f.num_args = -1;
  exec->functions = {main, f};
  exec->function_map = {{"main", 0}, {"f", 1}};
  exec->constants = {Value(int64_t{1} << 60), Value("s"), Value(2.5), MakeShape({1})};
  return exec;
}

absl::Status ValidateCode(std::vector<Words> code) { return MakeExec(std::move(code))->Validate(); }

TEST(ExecutableValidateTest, AcceptsWellFormedCode) {
  EXPECT_TRUE(
      ValidateCode({Call(1, 1,
                         {Arg::Register(0), Arg::ConstIdx(3), Arg::Immediate(-5), Arg::FuncIdx(0),
                          Arg::Register(kVMRegister), Arg::Register(kVoidRegister)}),
                    If(1, 3), Call(kVoidRegister, 1, {}), Goto(2), Call(2, 1, {}), Ret(2)})
          .ok());
}

TEST(ExecutableValidateTest, RejectsConstantIndexOutOfRange) {
  EXPECT_STATUS(ValidateCode({Call(1, 1, {Arg::Immediate(1)}), Call(1, 1, {}), Call(1, 1, {}),
                              Call(1, 1, {Arg::ConstIdx(7)}), Ret(1)}),
                absl::StatusCode::kInvalidArgument,
                "function main, pc 3: constant index 7 out of range (4 constants)");
  EXPECT_STATUS(ValidateCode({Call(1, 1, {Arg::ConstIdx(-1)}), Ret(1)}),
                absl::StatusCode::kInvalidArgument, "constant index -1 out of range");
}

TEST(ExecutableValidateTest, RejectsRegistersOutOfRange) {
  EXPECT_STATUS(ValidateCode({Call(1, 1, {Arg::Register(3)}), Ret(1)}),
                absl::StatusCode::kInvalidArgument,
                "function main, pc 0: argument 0 register 3 out of range (register file size 3)");
  EXPECT_STATUS(ValidateCode({Call(1, 1, {Arg::Register(-1)}), Ret(1)}),
                absl::StatusCode::kInvalidArgument, "register -1 out of range");
  EXPECT_STATUS(ValidateCode({Call(1, 1, {Arg::Register(kVMRegister + 1)}), Ret(1)}),
                absl::StatusCode::kInvalidArgument, "out of range");
  EXPECT_STATUS(ValidateCode({Call(3, 1, {}), Ret(1)}), absl::StatusCode::kInvalidArgument,
                "function main, pc 0: destination register 3 out of range");
  EXPECT_STATUS(ValidateCode({Call(-2, 1, {}), Ret(1)}), absl::StatusCode::kInvalidArgument,
                "destination register -2 out of range");
  EXPECT_STATUS(ValidateCode({Call(kVMRegister, 1, {}), Ret(1)}),
                absl::StatusCode::kInvalidArgument, "destination register");
  EXPECT_STATUS(ValidateCode({Ret(5)}), absl::StatusCode::kInvalidArgument,
                "function main, pc 0: result register 5 out of range");
  EXPECT_STATUS(ValidateCode({If(9, 2), Ret(0), Ret(0)}), absl::StatusCode::kInvalidArgument,
                "condition register 9 out of range");
}

TEST(ExecutableValidateTest, RejectsFunctionIndicesOutOfRange) {
  EXPECT_STATUS(ValidateCode({Call(1, 2, {}), Ret(1)}), absl::StatusCode::kInvalidArgument,
                "function main, pc 0: function index 2 out of range (2 functions)");
  EXPECT_STATUS(ValidateCode({Call(1, -1, {}), Ret(1)}), absl::StatusCode::kInvalidArgument,
                "function index -1 out of range");
  EXPECT_STATUS(ValidateCode({Call(1, 1, {Arg::FuncIdx(5)}), Ret(1)}),
                absl::StatusCode::kInvalidArgument, "function index 5 out of range");
}

TEST(ExecutableValidateTest, RejectsInvalidArgumentKind) {
  EXPECT_STATUS(ValidateCode({Call(1, 1, {Arg::Make(static_cast<ArgKind>(4), 0)}), Ret(1)}),
                absl::StatusCode::kInvalidArgument, "argument 0 has invalid kind 4");
  EXPECT_STATUS(ValidateCode({Call(1, 1, {Arg(static_cast<ExecWord>(~uint64_t{0}))}), Ret(1)}),
                absl::StatusCode::kInvalidArgument, "invalid kind 255");
}

TEST(ExecutableValidateTest, RejectsArityMismatchWithBytecodeCallee) {
  EXPECT_STATUS(ValidateCode({Call(1, 0, {Arg::Register(0), Arg::Register(0)}), Ret(1)}),
                absl::StatusCode::kInvalidArgument, "call to main with 2 arguments, expected 1");
  EXPECT_TRUE(ValidateCode({Call(1, 0, {Arg::Register(0)}), Ret(1)}).ok());
}

TEST(ExecutableValidateTest, RejectsBadJumps) {
  EXPECT_STATUS(ValidateCode({Goto(0), Ret(0)}), absl::StatusCode::kInvalidArgument,
                "function main, pc 0: goto offset is 0");
  EXPECT_STATUS(ValidateCode({Goto(2), Ret(0)}), absl::StatusCode::kInvalidArgument,
                "goto offset 2 jumps outside the function");
  EXPECT_STATUS(ValidateCode({Ret(0), Goto(-2)}), absl::StatusCode::kInvalidArgument,
                "function main, pc 1: goto offset -2 jumps outside");
  EXPECT_STATUS(ValidateCode({Goto(std::numeric_limits<int64_t>::max()), Ret(0)}),
                absl::StatusCode::kInvalidArgument, "jumps outside");
  EXPECT_STATUS(ValidateCode({Ret(0), Goto(std::numeric_limits<int64_t>::min())}),
                absl::StatusCode::kInvalidArgument, "jumps outside");
  EXPECT_STATUS(ValidateCode({If(0, 1), Ret(0)}), absl::StatusCode::kInvalidArgument,
                "function main, pc 0: if false offset 1 must be greater than 1");
  EXPECT_STATUS(ValidateCode({If(0, -3), Ret(0)}), absl::StatusCode::kInvalidArgument,
                "if false offset -3 must be greater than 1");
  EXPECT_STATUS(ValidateCode({If(0, 3), Ret(0), Ret(0)}), absl::StatusCode::kInvalidArgument,
                "if false offset 3 jumps outside the function");
}

TEST(ExecutableValidateTest, RejectsFallingOffTheEnd) {
  EXPECT_STATUS(ValidateCode({Call(1, 1, {})}), absl::StatusCode::kInvalidArgument,
                "function main, pc 0: call is the last instruction");
  EXPECT_STATUS(ValidateCode({Ret(0), If(0, 2)}), absl::StatusCode::kInvalidArgument,
                "jumps outside");
}

TEST(ExecutableValidateTest, RejectsInvalidOpcodeAndLayout) {
  EXPECT_STATUS(ValidateCode({Ret(0), {9, 0}}), absl::StatusCode::kInvalidArgument,
                "function main, pc 1: invalid opcode 9");
  EXPECT_STATUS(ValidateCode({{0}}), absl::StatusCode::kInvalidArgument, "invalid opcode 0");
  {
    Ref<Executable> e = MakeExec({Ret(0)});
    e->instr_offset[0] = 1;
    EXPECT_STATUS(e->Validate(), absl::StatusCode::kInvalidArgument,
                  "function main, pc 0: instruction offset 1, expected 0");
  }
  {
    Ref<Executable> e = MakeExec({Call(1, 1, {}), Ret(1)});
    e->instr_offset[1] = 2;  // points inside the call
    EXPECT_STATUS(e->Validate(), absl::StatusCode::kInvalidArgument,
                  "pc 1: instruction offset 2, expected 4");
  }
  {
    Ref<Executable> e = MakeExec({Ret(0)});
    e->instr_data.push_back(7);
    EXPECT_STATUS(e->Validate(), absl::StatusCode::kInvalidArgument,
                  "bytecode has 1 words after the last instruction");
  }
  {
    Ref<Executable> e = MakeExec({Ret(0), Ret(0)});
    e->instr_data.pop_back();  // the last ret lost its operand
    EXPECT_STATUS(e->Validate(), absl::StatusCode::kInvalidArgument,
                  "pc 1: instruction with opcode 2 needs 2 words");
  }
  {
    Ref<Executable> e = MakeExec({Call(1, 1, {Arg::Register(0)}), Ret(1)});
    e->instr_data[3] = 1000;  // num_args past the end of the data
    EXPECT_STATUS(e->Validate(), absl::StatusCode::kInvalidArgument,
                  "call with 1000 arguments runs past the end");
  }
  {
    Ref<Executable> e = MakeExec({Call(1, 1, {Arg::Register(0)}), Ret(1)});
    e->instr_data[3] = -1;
    EXPECT_STATUS(e->Validate(), absl::StatusCode::kInvalidArgument,
                  "call has negative argument count -1");
  }
  {
    Ref<Executable> e = MakeExec({Ret(0)});
    e->instr_data = {static_cast<ExecWord>(Opcode::kCall), 1};
    EXPECT_STATUS(e->Validate(), absl::StatusCode::kInvalidArgument, "call needs 4 words");
  }
}

TEST(ExecutableValidateTest, RejectsBadFunctionTable) {
  {
    Ref<Executable> e = MakeExec({Ret(0)});
    e->functions[0].kind = static_cast<FunctionKind>(7);
    EXPECT_STATUS(e->Validate(), absl::StatusCode::kInvalidArgument,
                  "function main has invalid kind 7");
  }
  {
    Ref<Executable> e = MakeExec({Ret(0)});
    e->functions[1].name = "main";
    EXPECT_STATUS(e->Validate(), absl::StatusCode::kInvalidArgument, "duplicate name");
  }
  {
    Ref<Executable> e = MakeExec({Ret(0)});
    e->function_map.erase("f");
    EXPECT_STATUS(e->Validate(), absl::StatusCode::kInvalidArgument,
                  "function map has 1 entries for 2 functions");
  }
  {
    Ref<Executable> e = MakeExec({Ret(0)});
    e->function_map["f"] = 0;
    EXPECT_STATUS(e->Validate(), absl::StatusCode::kInvalidArgument,
                  "function f is at index 1 but the function map says 0");
  }
  {
    Ref<Executable> e = MakeExec({Ret(0)});
    e->functions[1].name = "";
    e->function_map.erase("f");
    e->function_map[""] = 1;
    EXPECT_STATUS(e->Validate(), absl::StatusCode::kInvalidArgument,
                  "function 1 has an empty name");
  }
  {
    Ref<Executable> e = MakeExec({Ret(0)});
    e->functions[0].end_instr = 2;
    EXPECT_STATUS(e->Validate(), absl::StatusCode::kInvalidArgument,
                  "function main has invalid code range [0, 2) (1 instructions)");
  }
  {
    Ref<Executable> e = MakeExec({Ret(0)});
    e->functions[0].end_instr = 0;
    EXPECT_STATUS(e->Validate(), absl::StatusCode::kInvalidArgument, "invalid code range [0, 0)");
  }
  {
    Ref<Executable> e = MakeExec({Ret(0)});
    e->functions[0].start_instr = -1;
    EXPECT_STATUS(e->Validate(), absl::StatusCode::kInvalidArgument, "invalid code range [-1, 1)");
  }
  {
    Ref<Executable> e = MakeExec({Ret(0)});
    e->functions[0].num_args = -1;
    e->functions[0].param_names.clear();
    EXPECT_STATUS(e->Validate(), absl::StatusCode::kInvalidArgument,
                  "function main has invalid argument count -1");
  }
  {
    Ref<Executable> e = MakeExec({Ret(0)});
    e->functions[0].num_args = 4;
    e->functions[0].param_names.clear();
    EXPECT_STATUS(e->Validate(), absl::StatusCode::kInvalidArgument,
                  "function main has register file size 3, expected between 4 and");
  }
  {
    Ref<Executable> e = MakeExec({Ret(0)});
    e->functions[0].register_file_size = kMaxRegisterFileSize + 1;
    EXPECT_STATUS(e->Validate(), absl::StatusCode::kInvalidArgument, "register file size 1048577");
  }
  {
    Ref<Executable> e = MakeExec({Ret(0)});
    e->functions[0].param_names = {"x", "y"};
    EXPECT_STATUS(e->Validate(), absl::StatusCode::kInvalidArgument,
                  "function main has 2 parameter names for 1 arguments");
  }
  {
    Ref<Executable> e = MakeExec({Ret(0)});
    e->functions[1].end_instr = 1;
    EXPECT_STATUS(e->Validate(), absl::StatusCode::kInvalidArgument,
                  "packed function f has a code range [0, 1)");
  }
  {
    Ref<Executable> e = MakeExec({Ret(0)});
    e->functions[1].register_file_size = 2;
    EXPECT_STATUS(e->Validate(), absl::StatusCode::kInvalidArgument,
                  "packed function f has registers");
  }
  {
    Ref<Executable> e = MakeExec({Ret(0)});
    e->functions[1].kind = FunctionKind::kVMTIRFunc;
    e->functions[1].num_args = 2;
    e->functions[1].register_file_size = 2;
    EXPECT_STATUS(e->Validate(), absl::StatusCode::kInvalidArgument,
                  "function f has register file size 2, expected between 3");
    e->functions[1].register_file_size = 3;
    EXPECT_TRUE(e->Validate().ok());
  }
}

TEST(ExecutableValidateTest, RejectsConstantsOfOtherKinds) {
  {
    Ref<Executable> e = MakeExec({Ret(0)});
    e->constants.push_back(Value());
    EXPECT_STATUS(e->Validate(), absl::StatusCode::kInvalidArgument,
                  "constant 4: constant of type None is not allowed");
  }
  {
    Ref<Executable> e = MakeExec({Ret(0)});
    e->constants.push_back(MakeTuple({Value(1)}));
    EXPECT_STATUS(e->Validate(), absl::StatusCode::kInvalidArgument,
                  "constant of type Tuple is not allowed");
  }
  {
    Ref<Executable> e = MakeExec({Ret(0)});
    e->constants.push_back(Value::OpaquePtr(nullptr));
    EXPECT_STATUS(e->Validate(), absl::StatusCode::kInvalidArgument, "is not allowed");
  }
}

TEST(ExecutableValidateTest, InstructionsOutsideFunctionsMustStillBeWellFormed) {
  Ref<Executable> e = MakeExec({Ret(0), {42}});
  e->functions[0].end_instr = 1;
  EXPECT_STATUS(e->Validate(), absl::StatusCode::kInvalidArgument,
                "pc 1 (outside any function): invalid opcode 42");
}

// --- Views ----------------------------------------------------------------------------

TEST(ExecutableTextTest, AsTextMatchesTheReferenceLayout) {
  ExecBuilder b;
  b.EmitFunction("main", 1);
  b.EmitCall("vm.builtin.copy",
             {Arg::Register(0), Arg::Immediate(3), b.ConvertConstant("s"), b.FunctionArg("main")},
             1);
  b.EmitIf(1, 3);
  b.EmitCall("vm.builtin.copy", {Arg::Register(kVMRegister)}, kVoidRegister);
  b.EmitGoto(2);
  b.EmitCall("vm.builtin.copy", {Arg::Register(kVoidRegister)}, 1);
  b.EmitRet(1);
  b.EndFunction("main");
  b.DeclareVMTIRFunction("tir", 2);
  absl::StatusOr<Ref<Executable>> exec = b.Get();
  ASSERT_TRUE(exec.ok()) << exec.status();
  EXPECT_EQ((*exec)->AsText(),
            "@main:\n"
            "  call  vm.builtin.copy  in: %0, i3, c[0], f[main] dst: %1\n"
            "  If    %1, 3\n"
            "  call  vm.builtin.copy  in: %vm          dst: %void\n"
            "  goto  2\n"
            "  call  vm.builtin.copy  in: %void        dst: %1\n"
            "  ret   %1\n"
            "\n"
            "@vm.builtin.copy packed_func;\n"
            "@tir num_inputs=2 vm_tir_func;\n");
}

TEST(ExecutableTextTest, AsTextToleratesInvalidCode) {
  Ref<Executable> e = MakeExec({Ret(0)});
  e->instr_data = {77};
  EXPECT_THAT(e->AsText(), HasSubstr("<invalid instruction 0>"));
  e->functions[0].end_instr = 10;
  EXPECT_THAT(e->AsText(), HasSubstr("<invalid instruction 0>"));
}

TEST(ExecutableTextTest, StatsListsConstantsGlobalsAndLibraries) {
  const std::string stats = BuildRichExecutable()->Stats();
  EXPECT_THAT(stats, HasSubstr("constant pool (#8): [1152921504606846976, 1.5, True, \"hello\", "
                               "shape[2, 3], float16, cuda:1, tensor<int32[2, 2]>]"));
  EXPECT_THAT(stats,
              HasSubstr("globals (#6): [helper(1 args, 2 registers, 2 instructions), main("));
  EXPECT_THAT(stats, HasSubstr("fused_kernel(vm_tir)"));
  EXPECT_THAT(stats, HasSubstr("bytecode: 11 instructions"));
  EXPECT_THAT(stats, HasSubstr("kernel libraries (#2): [llvm -mtriple=x86_64-linux-gnu (so, 7 "
                               "bytes), cuda -arch=sm_90 (ptx, 27 bytes)]"));
  EXPECT_THAT(stats, HasSubstr("metadata (#3): [producer, signature.main, target]"));
}

TEST(ExecutableModuleTest, FunctionsRunOnlyThroughAVM) {
  Ref<Executable> exec = BuildRichExecutable();
  EXPECT_TRUE(exec->ImplementsFunction("main"));
  EXPECT_TRUE(exec->ImplementsFunction("fused_kernel"));
  EXPECT_FALSE(exec->ImplementsFunction("vm.builtin.copy"));
  EXPECT_FALSE(exec->ImplementsFunction("nope"));
  EXPECT_STATUS(exec->GetFunction("main").status(), absl::StatusCode::kFailedPrecondition,
                "runs only through a vm");
  EXPECT_EQ(exec->GetFunction("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(exec->GetFunction("vm.builtin.copy").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tether::vm
