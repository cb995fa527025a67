# Cross-building for a 64-bit Arm board (Raspberry Pi 4/5 with a 64-bit OS,
# Jetson, RK3588, Graviton) with Debian's cross compiler and the :arm64
# multiarch libraries (deploy/install-deps.sh --arch arm64):
#   cmake -S . -B build-aarch64 -G Ninja \
#     -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake \
#     -DTETHER_BUILD_COMPILER=OFF -DTETHER_ENABLE_CUDA=OFF
# docs/design/boards.md has the whole recipe (deploy/bundle.sh --arch does it).
set(TETHER_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
include(${CMAKE_CURRENT_LIST_DIR}/debian-multiarch.cmake)
