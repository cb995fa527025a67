# The boards Tether builds for, in one place for deploy/bundle.sh and
# tests/board/run.sh (sourced, not run). board_arch NAME sets, for aarch64
# (also arm64) or armhf (also arm): arch (the name as the bundle and the
# build folder use it), triple (the GNU triple: cross compiler, toolchain
# file cmake/toolchains/<triple>.cmake, multiarch folder), deps (the Debian
# architecture for deploy/install-deps.sh --arch), emulator (how a board
# program runs here) and loader (the board's dynamic loader). Returns 1 for
# another name. board_tools_present says which tool is missing, if any.
board_arch() {
  case $1 in
    aarch64|arm64) arch=aarch64 triple=aarch64-linux-gnu deps=arm64
                   emulator="qemu-aarch64-static -L /" loader=/lib/ld-linux-aarch64.so.1 ;;
    armhf|arm) arch=armhf triple=arm-linux-gnueabihf deps=armhf
               emulator="qemu-arm-static -L /" loader=/lib/ld-linux-armhf.so.3 ;;
    *) return 1 ;;
  esac
}

# After board_arch: fails (with what to install) when the cross compiler or
# the emulator is missing. $1 names the caller in the message.
board_tools_present() {
  local tool
  for tool in "$triple-g++" "${emulator%% *}"; do
    command -v "$tool" > /dev/null ||
      { echo "$1: $tool is missing: bash deploy/install-deps.sh --arch $deps" >&2; return 1; }
  done
}
