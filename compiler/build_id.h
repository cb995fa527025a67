// Which build of the compiler is running, for caches of its output: the
// version string (kCompilerVersion) stays the same from commit to commit,
// but the code it names does not, and a cache keyed by the version alone
// hands a rebuilt or upgraded compiler the executables of the old one
// (slower kernels, or ones since fixed). CompilerBuildId() names the build.
//
// Thread contract: thread-safe (computed once).
#ifndef TETHER_COMPILER_BUILD_ID_H_
#define TETHER_COMPILER_BUILD_ID_H_

#include <string>

namespace tether::compiler {

// The GNU build ID (the linker's `.note.gnu.build-id`, as `readelf -n`
// prints it, lower-case hex) of the ELF object the compiler is linked into:
// the `tether` executable, a test binary, the Python module. It changes
// whenever that object's code does. Where the object has no build ID (linked
// with --build-id=none), "path:size:mtime" of it instead.
const std::string& CompilerBuildId();

}  // namespace tether::compiler

#endif  // TETHER_COMPILER_BUILD_ID_H_
