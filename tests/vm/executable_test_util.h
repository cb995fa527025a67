// Helpers shared by the executable, builder and fuzz tests: a rich executable
// that uses every constant kind, several functions, If/Goto, a kernel library
// and metadata; structural equality; and a reader for the section table of a
// saved file, so tests can corrupt one section precisely.
#ifndef TETHER_TESTS_VM_EXECUTABLE_TEST_UTIL_H_
#define TETHER_TESTS_VM_EXECUTABLE_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/core/tensor.h"
#include "runtime/core/value.h"
#include "runtime/vm/exec_builder.h"
#include "runtime/vm/executable.h"

namespace tether::vm::testing {

inline Tensor MakeInt32Tensor(std::vector<int64_t> shape, std::vector<int32_t> values) {
  absl::StatusOr<Tensor> t =
      Tensor::FromBytes(shape, DataType::Int(32), values.data(), values.size() * sizeof(int32_t));
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

// main(x, y): every constant kind, a call to helper, If and Goto; helper(a);
// a vm_tir function; a kernel library and metadata.
inline Ref<Executable> BuildRichExecutable() {
  ExecBuilder b;
  b.DeclareFunction("helper", FunctionKind::kVMFunc);
  b.EmitFunction("main", 2, {"x", "y"});
  b.EmitCall("test.vm.add", {Arg::Register(0), Arg::Register(1)}, 2);       // pc 0
  b.EmitCall("vm.builtin.copy", {b.ConvertConstant(int64_t{1} << 60)}, 3);  // pc 1
  b.EmitCall("vm.builtin.copy", {b.ConvertConstant(1.5)}, 4);               // pc 2
  b.EmitCall(
      "test.vm.sink",  // pc 3
      {b.ConvertConstant(true), b.ConvertConstant("hello"), b.ConvertConstant(MakeShape({2, 3})),
       b.ConvertConstant(DataType::Float(16)), b.ConvertConstant(Device::Cuda(1)),
       b.ConvertConstant(MakeInt32Tensor({2, 2}, {1, -2, 3, -4})), Arg::Immediate(-7),
       b.FunctionArg("helper"), Arg::Register(kVMRegister), Arg::Register(kVoidRegister)},
      5);
  b.EmitIf(2, 3);                                        // pc 4
  b.EmitCall("helper", {Arg::Register(2)}, 6);           // pc 5
  b.EmitGoto(2);                                         // pc 6
  b.EmitCall("vm.builtin.copy", {Arg::Register(3)}, 6);  // pc 7
  b.EmitRet(6);                                          // pc 8
  b.EndFunction("main");
  b.EmitFunction("helper", 1, {"a"});
  b.EmitCall("vm.builtin.copy", {Arg::Register(0)}, 1);
  b.EmitRet(1);
  b.EndFunction("helper");
  b.DeclareVMTIRFunction("fused_kernel", 2);
  b.AddKernelLibrary({"llvm -mtriple=x86_64-linux-gnu", "so",
                      std::string("\x7f"
                                  "ELF\0\1\2",
                                  7)});
  b.AddKernelLibrary({"cuda -arch=sm_90", "ptx", ".version 8.0\n.target sm_90\n"});
  b.SetMetadata("producer", "tether tests");
  b.SetMetadata("target", "llvm");
  b.SetMetadata("signature.main", "(Tensor, Tensor) -> Tensor");
  absl::StatusOr<Ref<Executable>> exec = b.Get();
  EXPECT_TRUE(exec.ok()) << exec.status();
  return exec.ok() ? *exec : Ref<Executable>();
}

// Structural equality of two constants (tensors by dtype, shape and bytes).
inline bool SameConstant(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kInt:
      return a.int_value() == b.int_value();
    case Value::Kind::kFloat: {
      double x = a.float_value(), y = b.float_value();
      return std::memcmp(&x, &y, sizeof(x)) == 0;
    }
    case Value::Kind::kBool:
      return a.bool_value() == b.bool_value();
    case Value::Kind::kDataType:
      return a.dtype_value() == b.dtype_value();
    case Value::Kind::kDevice:
      return a.device_value() == b.device_value();
    case Value::Kind::kObject:
      break;
    default:
      return false;
  }
  if (a.object_type() != b.object_type()) return false;
  if (a.is_string()) return a.string_value() == b.string_value();
  if (a.is_shape()) return a.AsRef<ShapeObj>()->dims == b.AsRef<ShapeObj>()->dims;
  if (a.is_tensor()) {
    Tensor x(a.AsRef<TensorObj>()), y(b.AsRef<TensorObj>());
    if (x->dtype() != y->dtype() ||
        !std::equal(x->shape().begin(), x->shape().end(), y->shape().begin(), y->shape().end())) {
      return false;
    }
    std::string bx(x->NumBytes(), '\0'), by(y->NumBytes(), '\0');
    return x.CopyToBytes(bx.data(), bx.size()).ok() && y.CopyToBytes(by.data(), by.size()).ok() &&
           bx == by;
  }
  return false;
}

inline void ExpectSameExecutable(const Executable& a, const Executable& b) {
  ASSERT_EQ(a.functions.size(), b.functions.size());
  for (size_t i = 0; i < a.functions.size(); ++i) {
    const FunctionInfo& x = a.functions[i];
    const FunctionInfo& y = b.functions[i];
    EXPECT_EQ(x.kind, y.kind) << x.name;
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.start_instr, y.start_instr) << x.name;
    EXPECT_EQ(x.end_instr, y.end_instr) << x.name;
    EXPECT_EQ(x.num_args, y.num_args) << x.name;
    EXPECT_EQ(x.register_file_size, y.register_file_size) << x.name;
    EXPECT_EQ(x.param_names, y.param_names) << x.name;
  }
  EXPECT_EQ(a.function_map, b.function_map);
  ASSERT_EQ(a.constants.size(), b.constants.size());
  for (size_t i = 0; i < a.constants.size(); ++i) {
    EXPECT_TRUE(SameConstant(a.constants[i], b.constants[i]))
        << "constant " << i << ": " << a.constants[i].ToString() << " vs "
        << b.constants[i].ToString();
  }
  EXPECT_EQ(a.instr_offset, b.instr_offset);
  EXPECT_EQ(a.instr_data, b.instr_data);
  ASSERT_EQ(a.kernel_libraries.size(), b.kernel_libraries.size());
  for (size_t i = 0; i < a.kernel_libraries.size(); ++i) {
    EXPECT_EQ(a.kernel_libraries[i].target, b.kernel_libraries[i].target);
    EXPECT_EQ(a.kernel_libraries[i].format, b.kernel_libraries[i].format);
    EXPECT_EQ(a.kernel_libraries[i].data, b.kernel_libraries[i].data);
  }
  EXPECT_EQ(a.metadata, b.metadata);
  EXPECT_EQ(a.AsText(), b.AsText());
  EXPECT_EQ(a.Stats(), b.Stats());
}

// --- Raw file access, following docs/design/executable-format.md ---------------

inline uint64_t ReadLe(const std::string& bytes, size_t offset, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i)
    v |= uint64_t{static_cast<unsigned char>(bytes[offset + i])} << (8 * i);
  return v;
}
inline void WriteLe(std::string& bytes, size_t offset, int n, uint64_t v) {
  for (int i = 0; i < n; ++i) bytes[offset + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}
inline std::string Le(int n, uint64_t v) {
  std::string s(n, '\0');
  WriteLe(s, 0, n, v);
  return s;
}

struct RawSection {
  uint32_t id;
  size_t entry_offset;  // where its table entry is
  uint64_t offset;
  uint64_t size;
};

// The section table of a well-formed file.
inline std::vector<RawSection> ReadSectionTable(const std::string& bytes) {
  const uint32_t count = static_cast<uint32_t>(ReadLe(bytes, 12, 4));
  const uint32_t producer_len = static_cast<uint32_t>(ReadLe(bytes, 16, 4));
  std::vector<RawSection> sections;
  size_t entry = 20 + producer_len;
  for (uint32_t i = 0; i < count; ++i, entry += 24) {
    sections.push_back({static_cast<uint32_t>(ReadLe(bytes, entry, 4)), entry,
                        ReadLe(bytes, entry + 8, 8), ReadLe(bytes, entry + 16, 8)});
  }
  return sections;
}

inline RawSection FindSection(const std::string& bytes, uint32_t id) {
  for (const RawSection& s : ReadSectionTable(bytes)) {
    if (s.id == id) return s;
  }
  ADD_FAILURE() << "no section " << id;
  return {};
}

// Replaces the payload of section `id` (its table entry is patched and every
// later section moved); the checksum is recomputed.
inline std::string ReplaceSection(const std::string& bytes, uint32_t id,
                                  const std::string& payload) {
  std::vector<RawSection> sections = ReadSectionTable(bytes);
  RawSection target = FindSection(bytes, id);
  std::string out = bytes.substr(0, bytes.size() - 4);
  out.replace(target.offset, target.size, payload);
  const int64_t delta = static_cast<int64_t>(payload.size()) - static_cast<int64_t>(target.size);
  for (const RawSection& s : sections) {
    if (s.id == id) {
      WriteLe(out, s.entry_offset + 16, 8, payload.size());
    } else if (s.offset > target.offset) {
      WriteLe(out, s.entry_offset + 8, 8, s.offset + delta);
    }
  }
  return RecomputeExecutableChecksum(out + std::string(4, '\0'));
}

}  // namespace tether::vm::testing

#endif  // TETHER_TESTS_VM_EXECUTABLE_TEST_UTIL_H_
