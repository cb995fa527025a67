# Shared compile settings for Tether's own targets (not for third-party code).

# CUDA: the runtime reaches the driver only through dlopen("libcuda.so.1") and
# needs no toolkit headers, so AUTO builds the CUDA device on every Linux host.
# The toolkit (/usr/local/cuda) is only needed by the compiler's GPU backend.
if(TETHER_ENABLE_CUDA STREQUAL "AUTO")
  set(TETHER_CUDA_DEVICE ${UNIX})
elseif(TETHER_ENABLE_CUDA)
  set(TETHER_CUDA_DEVICE ON)
else()
  set(TETHER_CUDA_DEVICE OFF)
endif()
message(STATUS "tether: CUDA device support ${TETHER_CUDA_DEVICE}")
# The CUDA version the runtime is built for, TVM's api_version: CUDA_VERSION
# of the toolkit's cuda.h when one is installed (the runtime itself includes
# no toolkit header). Without a toolkit, api_version is the driver's.
set(TETHER_CUDA_TOOLKIT_ROOT /usr/local/cuda CACHE PATH "The CUDA toolkit read for its version")
set(TETHER_CUDA_API_VERSION "")
if(EXISTS ${TETHER_CUDA_TOOLKIT_ROOT}/include/cuda.h)
  file(STRINGS ${TETHER_CUDA_TOOLKIT_ROOT}/include/cuda.h tether_cuda_version_line
       REGEX "^#define CUDA_VERSION [0-9]+")
  string(REGEX MATCH "[0-9]+$" TETHER_CUDA_API_VERSION "${tether_cuda_version_line}")
endif()

# GCC 12 reports maybe-uninitialized falsely inside absl::InlinedVector.
set(TETHER_WARNINGS -Wall -Wextra -Werror -Wno-unused-parameter)
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  # Clang checks the ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED
  # annotations: a guarded member touched without its lock fails the build.
  # libstdc++ 12's std::stable_sort calls get_temporary_buffer, which clang
  # reports as deprecated in C++20 from our call sites.
  list(APPEND TETHER_WARNINGS -Wthread-safety -Wno-deprecated-declarations)
  # Debian's Abseil, gRPC and protobuf are built with GCC; clang 18+ mangles
  # templates with constrained non-type parameters differently (absl::Cord's
  # string constructor), so keep the mangling GCC and older clang use.
  add_compile_options(-fclang-abi-compat=17)
else()
  list(APPEND TETHER_WARNINGS -Wno-maybe-uninitialized)
endif()

if(TETHER_SANITIZE)
  set(TETHER_SANITIZE_FLAGS -fsanitize=${TETHER_SANITIZE} -fno-omit-frame-pointer
      -fno-sanitize-recover=all)
  add_compile_options(${TETHER_SANITIZE_FLAGS})
  add_link_options(${TETHER_SANITIZE_FLAGS})
  message(STATUS "tether: sanitizers ${TETHER_SANITIZE}")
endif()

# Debug info is most of a build's disk: every test binary carries the
# compiler's. The linker writes it zlib-compressed (gdb, addr2line and
# llvm-symbolizer read it as is); objects stay as compiled, so ccache's hits
# are unchanged. CI machines can be short of disk (tests/run.sh).
include(CheckLinkerFlag)
check_linker_flag(CXX "-Wl,--compress-debug-sections=zlib" TETHER_LINKER_COMPRESSES_DEBUG)
if(TETHER_LINKER_COMPRESSES_DEBUG)
  add_link_options(-Wl,--compress-debug-sections=zlib)
endif()

# Fuzzing (tests/fuzz/): every target of ours is built with libFuzzer's
# coverage instrumentation, so the fuzz targets are guided through it.
if(TETHER_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "TETHER_FUZZ needs clang (libFuzzer): -DCMAKE_CXX_COMPILER=clang++-19")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
  message(STATUS "tether: fuzz targets with libFuzzer")
endif()

# tether_target_defaults(TARGET): warnings as errors and the source root on
# the include path, for every target of ours.
function(tether_target_defaults target)
  target_compile_options(${target} PRIVATE ${TETHER_WARNINGS})
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
endfunction()

include(TetherSystemLib)
