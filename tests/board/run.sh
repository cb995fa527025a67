#!/usr/bin/env bash
# The board leg of the test suite (docs/design/boards.md): everything a board
# runs, run here under qemu's user-mode emulation, for one architecture.
#   1. tetherd, a compiler-less tether and the runtime and VM unit tests,
#      cross-built in build-<arch> with Debian's cross compiler;
#   2. those unit tests under the emulator (CTest label `board` in that
#      build: ctest --test-dir build-aarch64 -L board runs them alone);
#   3. the board bundle (deploy/bundle.sh --arch), its tetherd started under
#      the emulator through the bundle's own launcher, and this machine's
#      tether against it: e2e_test.sh;
#   4. a daemon with a model's kernels linked in (boards without dlopen)
#      running that model: tests/cli/system_lib_test.sh under the emulator.
# Needs the host build (build/, for the tether CLI and the conformance
# runner) and deploy/install-deps.sh --arch arm64 (or armhf).
# usage: tests/board/run.sh aarch64|armhf [HOST_BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
arch=${1:?usage: tests/board/run.sh aarch64|armhf [HOST_BUILD_DIR]}
host_build=$(cd "${2:-$root/build}" && pwd)
jobs=${TETHER_JOBS:-$(nproc)}
source "$root/deploy/board-arch.sh"
board_arch "$arch" ||
  { echo "tests/board/run.sh: no board architecture '$arch' (aarch64, armhf)" >&2; exit 2; }
board_tools_present tests/board/run.sh || exit 1
build=$root/build-$arch

echo "== $arch: cross build (tetherd, tether-kernels with the MLP linked in, tether, runtime and VM tests) =="
# Boards without dlopen: examples/mlp.rx compiled here for the board as
# system library "mlp", linked into a second daemon (TETHER_DAEMON_KERNELS).
mkdir -p "$build/system_lib"
"$host_build/client/tether" compile "$root/examples/mlp.rx" --system-lib mlp \
  --target "llvm -mtriple=$triple" -o "$build/system_lib/mlp.tx"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchains/$triple.cmake" \
  -DTETHER_BUILD_COMPILER=OFF -DTETHER_ENABLE_CUDA=OFF -DTETHER_BUILD_TESTS=ON \
  -DTETHER_BUILD_BENCHMARKS=OFF -DTETHER_DAEMON_KERNELS="$build/system_lib/mlp.a" > /dev/null
cmake --build "$build" -j "$jobs" --target tetherd tetherd-kernels tether tether_runtime_tests \
  tether_vm_tests

echo "== $arch: runtime and VM tests under $emulator =="
ctest --test-dir "$build" -L '^(runtime|vm)$' --output-on-failure -j "$jobs" --timeout 300

echo "== $arch: the board bundle's tetherd under $emulator, this machine's tether against it =="
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bash "$root/deploy/bundle.sh" --arch "$arch" --build "$build" "$work/tether-$arch.tar"
tar -C "$work" -xf "$work/tether-$arch.tar"
bash "$root/tests/board/e2e_test.sh" "$work/tether" "$emulator" "$triple" "$host_build" "$root" \
  "$work/e2e"

echo "== $arch: the daemon with the MLP's kernels linked in, under $emulator =="
for daemon in tetherd tetherd-kernels; do
  printf '#!/bin/sh\nexec %s "%s" "$@"\n' "$emulator" "$build/server/$daemon" > "$work/$daemon"
  chmod +x "$work/$daemon"
done
bash "$root/tests/cli/system_lib_test.sh" "$host_build/client/tether" "$work/tetherd" \
  "$work/tetherd-kernels" "$build/system_lib/mlp.tx" "$root" "$work/system_lib"
