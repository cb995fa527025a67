# What both Debian cross toolchains share: given TETHER_CROSS_TRIPLE (the
# GNU triple, e.g. aarch64-linux-gnu) and CMAKE_SYSTEM_PROCESSOR, compile
# with ${TETHER_CROSS_TRIPLE}-gcc/g++ and find libraries and CMake packages
# of that multiarch triple (/usr/lib/<triple>, /usr/lib/<triple>/cmake),
# headers in /usr/include (Debian's multiarch -dev packages share it), and
# programs (protoc, grpc_cpp_plugin) on the build machine.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_C_COMPILER ${TETHER_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${TETHER_CROSS_TRIPLE}-g++)
set(CMAKE_LIBRARY_ARCHITECTURE ${TETHER_CROSS_TRIPLE})
# A header-only package that is not multiarch (libdlpack-dev) is the build
# machine's: /usr/include is searched in the root "/".
set(CMAKE_FIND_ROOT_PATH /usr/${TETHER_CROSS_TRIPLE} /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/${TETHER_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")
# Programs built for the board run here only under user-mode emulation
# (these machines have no binfmt_misc): CTest starts them through it.
if(CMAKE_SYSTEM_PROCESSOR STREQUAL "aarch64")
  set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static -L /)
else()
  set(CMAKE_CROSSCOMPILING_EMULATOR qemu-arm-static -L /)
endif()
