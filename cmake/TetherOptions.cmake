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

# GCC 12 reports maybe-uninitialized falsely inside absl::InlinedVector.
set(TETHER_WARNINGS -Wall -Wextra -Werror -Wno-unused-parameter -Wno-maybe-uninitialized)

if(TETHER_SANITIZE)
  set(TETHER_SANITIZE_FLAGS -fsanitize=${TETHER_SANITIZE} -fno-omit-frame-pointer
      -fno-sanitize-recover=all)
  add_compile_options(${TETHER_SANITIZE_FLAGS})
  add_link_options(${TETHER_SANITIZE_FLAGS})
  message(STATUS "tether: sanitizers ${TETHER_SANITIZE}")
endif()

# tether_add_library(NAME SOURCES...): a library of ours with warnings as errors
# and the alias tether::<part>.
function(tether_target_defaults target)
  target_compile_options(${target} PRIVATE ${TETHER_WARNINGS})
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
endfunction()
