// TVM's `load_static_library` for Tether's static form: a system library
// archive (what `tether compile MODEL --system-lib PREFIX -o OUT.tx` writes as
// OUT.a; docs/design/kernel-abi.md, "System libraries") read as a Module
// without loading it. A static library is linked, not loaded: the module says
// what the archive holds (its prefix, the machine its object is for, its
// kernels from the manifest inside the object) and gives a kernel as a
// Function only when the archive is linked into this process, where its
// constructor has registered the kernels in the system library
// (docs/design/boards.md, "Boards without dlopen").
#ifndef TETHER_RUNTIME_KERNEL_STATIC_LIBRARY_H_
#define TETHER_RUNTIME_KERNEL_STATIC_LIBRARY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/core/object.h"
#include "runtime/kernel/kernel_library.h"
#include "runtime/module/module.h"

namespace tether {

// A system library archive read without linking it. Immutable once made;
// thread-safe.
class StaticLibraryModule final : public Module {
 public:
  StaticLibraryModule(std::string prefix, std::string object_name, uint16_t machine,
                      std::string manifest, std::vector<KernelInfo> kernels,
                      std::vector<std::string> functions);

  absl::string_view type_key() const override { return "static_library"; }
  // The file form: "a", an ar archive (TVM's static library is an ".o").
  absl::string_view format() const { return "a"; }
  // The system library prefix: the archive registers its kernels as
  // tether_system_lib_register_<prefix>.
  const std::string& prefix() const { return prefix_; }
  // The archive member holding the kernels ("kernels.o").
  const std::string& object_name() const { return object_name_; }
  // The ELF machine of that object and its name ("x86_64", "aarch64", "arm").
  uint16_t machine() const { return machine_; }
  std::string machine_name() const;
  // Every kernel of the manifest, in manifest order.
  const std::vector<KernelInfo>& kernels() const { return kernels_; }
  // The functions this module implements: the func_names it was loaded with,
  // or every kernel when none were given.
  const std::vector<std::string>& functions() const { return functions_; }

 protected:
  // A kernel of functions() as a Function, as the "static" kernel loader
  // gives it, when the archive is linked into this process. NOT_FOUND for
  // a name that is not among functions(); FAILED_PRECONDITION when the
  // object is for another machine (naming both), when no library of this
  // prefix is linked in (saying how to link it), or when the kernels linked
  // under this prefix are another library's (their manifest differs).
  absl::StatusOr<Function> GetOwnFunction(absl::string_view name) override;
  // Whether `name` is among functions(), linked into this process or not.
  bool ImplementsOwnFunction(absl::string_view name) const override;

 private:
  std::string prefix_;
  std::string object_name_;
  uint16_t machine_;
  std::string manifest_;  // the text, to compare with what is linked in
  std::vector<KernelInfo> kernels_;
  std::vector<std::string> functions_;
};

// Reads a system library archive as TVM's load_static_library reads a
// static library: `archive_bytes` are untrusted, and every offset and size is
// checked. `func_names`, when given, are the functions the module implements;
// each must be a kernel of the library. INVALID_ARGUMENT, naming what is
// wrong, for bytes that are not such an archive: a malformed ar archive or
// symbol table, no or several tether_system_lib_register_<prefix> symbols,
// a defining member that is not a relocatable ELF object, or a missing or
// malformed manifest (the object's tether_kernel_manifest symbol).
// NOT_FOUND naming a func_name the library lacks and listing its kernels.
absl::StatusOr<Ref<StaticLibraryModule>> LoadStaticLibrary(
    absl::string_view archive_bytes, std::vector<std::string> func_names = {});

// LoadStaticLibrary of the file at `path`; errors name the path (NOT_FOUND
// for a missing file).
absl::StatusOr<Ref<StaticLibraryModule>> LoadStaticLibraryFile(
    const std::string& path, std::vector<std::string> func_names = {});

}  // namespace tether

#endif  // TETHER_RUNTIME_KERNEL_STATIC_LIBRARY_H_
