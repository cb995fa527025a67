// Executable: what the compiler produces and the VM runs — a function table,
// a deduplicated constant pool, bytecode, embedded kernel libraries and
// metadata — with a versioned, checksummed file format. Loading validates every
// register, constant, function index and jump target before anything runs, so
// a corrupt or hostile file is an error, never a crash. The format is specified
// in docs/design/executable-format.md.
#ifndef TETHER_RUNTIME_VM_EXECUTABLE_H_
#define TETHER_RUNTIME_VM_EXECUTABLE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/value.h"
#include "runtime/kernel/loader_registry.h"
#include "runtime/module/module.h"
#include "runtime/vm/bytecode.h"

namespace tether::vm {

// Format version written by this build. A reader accepts any minor of its major.
inline constexpr uint16_t kExecutableFormatMajor = 1;
inline constexpr uint16_t kExecutableFormatMinor = 0;
// The first 8 bytes of every executable file.
inline constexpr absl::string_view kExecutableMagic = "TETHEREX";
// Validate() rejects bytecode functions with more registers than this.
inline constexpr int64_t kMaxRegisterFileSize = int64_t{1} << 20;

enum class FunctionKind : int32_t {
  kPackedFunc = 0,  // resolved in the kernel libraries, then the global registry
  kVMFunc = 1,      // bytecode in this executable
  kVMTIRFunc = 2,   // compiled: "__vmtir__<name>" in a kernel library (compiled_function.h)
};

// A Relax function, callable by name through the VM API: bytecode or compiled.
inline bool IsVMFunction(FunctionKind kind) {
  return kind == FunctionKind::kVMFunc || kind == FunctionKind::kVMTIRFunc;
}

struct FunctionInfo {
  FunctionKind kind = FunctionKind::kPackedFunc;
  std::string name;
  int64_t start_instr = 0;  // [start_instr, end_instr): bytecode functions only
  int64_t end_instr = 0;
  int64_t num_args = 0;
  int64_t register_file_size = 0;
  std::vector<std::string> param_names;  // size num_args, or empty when unnamed
};

// A kernel library embedded in the executable: one per target
// (runtime/kernel/loader_registry.h).
using KernelLibraryBlob = ::tether::KernelLibraryBlob;

// A decoded view of one instruction.
struct Instruction {
  Opcode op;
  // Call
  RegName dst = 0;
  Index func_idx = 0;
  int64_t num_args = 0;
  const ExecWord* args = nullptr;  // num_args encoded Arg words
  // Ret
  RegName result = 0;
  // Goto
  int64_t pc_offset = 0;
  // If
  RegName cond = 0;
  int64_t false_offset = 0;

  Arg arg(int64_t i) const { return Arg(args[i]); }
};

// Thread contract: immutable once built or loaded; thread-safe to read.
class Executable final : public Module {
 public:
  absl::string_view type_key() const override { return "vm.Executable"; }

  std::vector<FunctionInfo> functions;
  absl::flat_hash_map<std::string, Index> function_map;  // name -> index in functions
  std::vector<Value>
      constants;  // Tensor (on CPU), Shape, String, int, float, bool, DataType, Device
  std::vector<int64_t> instr_offset;  // instruction index -> word offset in instr_data
  std::vector<ExecWord> instr_data;
  std::vector<KernelLibraryBlob> kernel_libraries;
  std::map<std::string, std::string> metadata;  // target, producer, source hash, signatures...

  // Decodes instruction `i` (which must be valid: Validate() guarantees it).
  Instruction GetInstruction(Index i) const;
  int64_t num_instructions() const { return static_cast<int64_t>(instr_offset.size()); }

  // Checks every function, instruction, register, constant index, function index
  // and jump target. INVALID_ARGUMENT naming the function and pc on failure.
  absl::Status Validate() const;

  // Serializes to the file format / parses and validates one.
  std::string SaveToBytes() const;
  static absl::StatusOr<Ref<Executable>> LoadFromBytes(absl::string_view bytes);
  absl::Status SaveToFile(const std::string& path) const;
  static absl::StatusOr<Ref<Executable>> LoadFromFile(const std::string& path);
  // LoadFromBytes/LoadFromFile also take a library written by ExportLibrary
  // (ELF magic) and return the executable as it was exported.

  // The executable as a shared library (TVM's export_library): its CPU
  // kernel library (format "so") carrying the executable in a section
  // (executable_library.cc; docs/design/executable-format.md, "Exported
  // libraries"). Any program can dlopen it for the kernels; LoadFromFile
  // reads the executable back. FAILED_PRECONDITION when the executable has
  // no such library (no CPU kernels, or a system library).
  absl::StatusOr<std::string> ExportLibraryBytes() const;
  absl::Status ExportLibrary(const std::string& path) const;

  // Readable listing: "@main:" then "  call  vm.builtin.copy in: %0 dst: %1" ...
  std::string AsText() const;
  // Summary of constants, functions and kernel libraries.
  std::string Stats() const;

  // Module: functions of an executable are only callable through a VM.
  absl::StatusOr<Function> GetOwnFunction(absl::string_view name) override;
  bool ImplementsOwnFunction(absl::string_view name) const override;
  absl::StatusOr<std::string> SaveToBinary() const override { return SaveToBytes(); }
};

// Registers the "vm.Executable" ModuleLoader (magic kExecutableMagic) and the
// "library.so" loader (ELF magic) so that Module::LoadFromBinary/LoadFromFile
// load executables and exported libraries: an exported library loads as its
// executable, refused with both targets named when its kernels cannot run
// on this machine; a kernel library without an executable loads as a module
// of its kernels. Idempotent and thread-safe; callers register explicitly
// (no static initializers in a static library).
void RegisterExecutableLoader();

// For tests (fuzzing behind the checksum): `bytes` with its trailing CRC-32C
// recomputed over everything before it. Returned unchanged when shorter than
// the checksum.
std::string RecomputeExecutableChecksum(std::string bytes);

}  // namespace tether::vm

#endif  // TETHER_RUNTIME_VM_EXECUTABLE_H_
