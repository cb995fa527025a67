# Cross-building for a 32-bit Arm board (Raspberry Pi OS 32-bit, older
# Cortex-A7/A9/A53 boards running armhf: ARMv7-A, VFPv3-D16, Thumb-2) with
# Debian's cross compiler and the :armhf multiarch libraries
# (deploy/install-deps.sh --arch armhf). Used as aarch64-linux-gnu.cmake.
set(TETHER_CROSS_TRIPLE arm-linux-gnueabihf)
set(CMAKE_SYSTEM_PROCESSOR armv7l)
include(${CMAKE_CURRENT_LIST_DIR}/debian-multiarch.cmake)
