// load_static_library (static_library.h): the archive is read, never linked
// or mapped; the kernels are reached through the system library only when
// the same archive was linked into this process, which the manifest it
// registered there shows.
#include "runtime/kernel/static_library.h"

#include <elf.h>

#include <cstring>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/core/error.h"
#include "runtime/core/file.h"
#include "runtime/kernel/ar_archive.h"
#include "runtime/kernel/elf_section.h"
#include "runtime/module/system_lib.h"

namespace tether {
namespace {

constexpr absl::string_view kRegisterPrefix = "tether_system_lib_register_";

template <typename... Args>
absl::Status LibraryError(const Args&... args) {
  return ValueError("static library: ", args...);
}

// The relocatable object of `archive` that defines `symbol`.
absl::StatusOr<const ArMember*> DefiningObject(const ArArchive& archive, absl::string_view symbol) {
  const ArMember* member = nullptr;
  for (const ArSymbol& s : archive.symbols) {
    if (s.name == symbol) member = archive.MemberAt(s.member_offset);
  }
  if (member == nullptr) return LibraryError("no member defines ", symbol);
  if (!IsElfImage(member->data)) {
    return LibraryError("member ", member->name, " (defining ", symbol, ") is not an ELF object");
  }
  absl::StatusOr<uint16_t> type = ElfTypeOf(member->data);
  if (!type.ok()) return Annotate(type.status(), "static library: member ", member->name, ": ");
  if (*type != ET_REL) {
    return LibraryError("member ", member->name, " is an ELF image of type ", *type,
                        ", not a relocatable object");
  }
  return member;
}

// The manifest text the emitter stores in the object as the (local) array
// tether_kernel_manifest, NUL-terminated.
absl::StatusOr<std::string> ManifestOf(const ArMember& object) {
  absl::StatusOr<absl::string_view> bytes =
      FindElfSymbolBytes(object.data, "tether_kernel_manifest");
  if (!bytes.ok()) {
    return LibraryError("object ", object.name,
                        " has no readable kernel manifest: ", bytes.status().message());
  }
  const size_t end = bytes->find('\0');
  if (end == absl::string_view::npos) {
    return LibraryError("the kernel manifest of ", object.name, " is not NUL-terminated");
  }
  return std::string(bytes->substr(0, end));
}

std::vector<std::string> KernelNames(const std::vector<KernelInfo>& kernels) {
  std::vector<std::string> names;
  names.reserve(kernels.size());
  for (const KernelInfo& k : kernels) names.push_back(k.name);
  return names;
}

}  // namespace

StaticLibraryModule::StaticLibraryModule(std::string prefix, std::string object_name,
                                         uint16_t machine, std::string manifest,
                                         std::vector<KernelInfo> kernels,
                                         std::vector<std::string> functions)
    : prefix_(std::move(prefix)),
      object_name_(std::move(object_name)),
      machine_(machine),
      manifest_(std::move(manifest)),
      kernels_(std::move(kernels)),
      functions_(std::move(functions)) {}

std::string StaticLibraryModule::machine_name() const { return ElfMachineName(machine_); }

bool StaticLibraryModule::ImplementsOwnFunction(absl::string_view name) const {
  for (const std::string& f : functions_) {
    if (f == name) return true;
  }
  return false;
}

absl::StatusOr<Function> StaticLibraryModule::GetOwnFunction(absl::string_view name) {
  if (!ImplementsOwnFunction(name)) {
    return NotFoundError("static library \"", prefix_, "\" implements no function ",
                         std::string(name), " (it implements ", absl::StrJoin(functions_, ", "),
                         ")");
  }
  if (machine_ != HostElfMachine()) {
    return PreconditionError("static library \"", prefix_, "\" is built for ", machine_name(),
                             ", but this process runs on ", ElfMachineName(HostElfMachine()),
                             ": link it into a program for ", machine_name());
  }
  auto* linked = static_cast<SystemLibModule*>(SystemLib(prefix_).get());
  const auto* manifest = static_cast<const char*>(linked->GetSymbol("__tether_kernel_manifest"));
  if (manifest == nullptr) {
    return PreconditionError(
        "a static library is linked, not loaded: system library \"", prefix_,
        "\" is not linked into this process; link its archive whole into the program or daemon "
        "that calls ",
        std::string(name),
        " (tether_add_daemon in cmake/TetherSystemLib.cmake; docs/design/boards.md, \"Boards "
        "without dlopen\")");
  }
  if (absl::string_view(manifest, strnlen(manifest, manifest_.size() + 1)) != manifest_) {
    return PreconditionError("the kernels linked into this process as system library \"", prefix_,
                             "\" are another library's: their manifest differs from this "
                             "archive's");
  }
  TETHER_ASSIGN_OR_RETURN(Ref<Module> kernels, LoadSystemLibKernels(prefix_));
  return kernels->GetFunction(name);
}

absl::StatusOr<Ref<StaticLibraryModule>> LoadStaticLibrary(absl::string_view archive_bytes,
                                                           std::vector<std::string> func_names) {
  absl::StatusOr<ArArchive> archive = ReadArArchive(archive_bytes);
  if (!archive.ok()) return Annotate(archive.status(), "static library: ");
  TETHER_ASSIGN_OR_RETURN(std::string prefix, SystemLibPrefixOfArchive(archive_bytes));
  TETHER_ASSIGN_OR_RETURN(const ArMember* object,
                          DefiningObject(*archive, absl::StrCat(kRegisterPrefix, prefix)));
  TETHER_ASSIGN_OR_RETURN(uint16_t machine, ElfMachineOf(object->data));
  TETHER_ASSIGN_OR_RETURN(std::string manifest, ManifestOf(*object));
  absl::StatusOr<std::vector<KernelInfo>> kernels = ParseKernelManifest(manifest);
  if (!kernels.ok()) return Annotate(kernels.status(), "static library \"", prefix, "\": ");
  std::vector<std::string> all = KernelNames(*kernels);
  for (const std::string& f : func_names) {
    if (absl::c_find(all, f) == all.end()) {
      return NotFoundError("static library \"", prefix, "\" has no kernel ", f, "; it has ",
                           absl::StrJoin(all, ", "));
    }
  }
  return MakeRef<StaticLibraryModule>(std::move(prefix), object->name, machine, std::move(manifest),
                                      std::move(*kernels),
                                      func_names.empty() ? std::move(all) : std::move(func_names));
}

absl::StatusOr<Ref<StaticLibraryModule>> LoadStaticLibraryFile(
    const std::string& path, std::vector<std::string> func_names) {
  TETHER_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  absl::StatusOr<Ref<StaticLibraryModule>> library =
      LoadStaticLibrary(bytes, std::move(func_names));
  if (!library.ok()) return Annotate(library.status(), path, ": ");
  return library;
}

}  // namespace tether
