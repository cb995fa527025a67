#!/usr/bin/env bash
# Packs a relocatable Tether for a machine that lacks our Debian packages (a
# board, a device-farm node, a GPU server with another distribution): tetherd
# and the tether CLI from an existing build, stripped, with every shared
# library they load except the C library and the NVIDIA driver (libcuda is
# always the machine's own), in one .tar.xz. With --tests it adds the GPU
# test suite, the benchmarks, the conformance runner, deploy/gpu-check.sh and
# the ONNX node cases, which is how a GPU machine without our toolchain checks
# a build (docs/design/deploy.md). With --arch aarch64|armhf it first
# cross-builds tetherd and a compiler-less tether for that board in
# build-<arch> (deploy/install-deps.sh --arch arm64|armhf installs what that
# needs; docs/design/boards.md).
#
# Unpacked anywhere on Linux with glibc 2.36 or newer (Debian 12, Raspberry
# Pi OS 12, Ubuntu 22.10+) of the bundle's architecture:
#   tar xJf tether.tar.xz -C /opt &&
#   /opt/tether/bin/tetherd --listen 0.0.0.0:9190 --auth-token-file token
# (a network address needs client authentication: docs/design/security.md)
# Each bin/ launcher runs its program under $TETHER_EMULATOR when that is
# set, so a board bundle can be tried on the build machine as it will run:
#   TETHER_EMULATOR="qemu-aarch64-static -L /" tether/bin/tetherd ...
#
# usage: deploy/bundle.sh [--build DIR] [--arch aarch64|armhf] [--tests] OUT.tar.xz
#        (OUT.tar: uncompressed)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=""
arch=""
tests=0
out=""
usage="usage: deploy/bundle.sh [--build DIR] [--arch aarch64|armhf] [--tests] OUT.tar.xz"
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --arch) arch=$2; shift 2 ;;
    --tests) tests=1; shift ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "bundle.sh: unknown flag $1" >&2; exit 2 ;;
    *) out=$1; shift ;;
  esac
done
[ -n "$out" ] || { echo "$usage" >&2; exit 2; }
case $out in /*) ;; *) out=$PWD/$out ;; esac

# The board's toolchain file, emulator and dynamic loader.
source "$root/deploy/board-arch.sh"
if [ -n "$arch" ]; then
  board_arch "$arch" || { echo "bundle.sh: --arch takes aarch64 or armhf, not '$arch'" >&2; exit 2; }
  [ "$tests" = 0 ] || { echo "bundle.sh: --tests is for GPU machines, not with --arch" >&2; exit 2; }
  board_tools_present bundle.sh || exit 1
  build=${build:-$root/build-$arch}
  # A build folder of this board that exists (tests/board/run.sh's, with its
  # tests) is built as it is configured.
  if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchains/$triple.cmake" \
      -DTETHER_BUILD_COMPILER=OFF -DTETHER_ENABLE_CUDA=OFF \
      -DTETHER_BUILD_TESTS=OFF -DTETHER_BUILD_BENCHMARKS=OFF > /dev/null
  fi
  grep -q "^CMAKE_CXX_COMPILER_AR:.*/$triple-" "$build/CMakeCache.txt" ||
    { echo "bundle.sh: $build is not a $triple build" >&2; exit 1; }
  cmake --build "$build" --target tetherd tether
fi
build=$(cd "${build:-$root/build}" && pwd)

# The shared libraries `$1` loads (absolute paths), as its own loader says
# (under the emulator for a board).
libraries_of() {
  if [ -n "$arch" ]; then
    $emulator "$loader" --list "$1"
  else
    ldd "$1"
  fi | awk '$2 == "=>" && $3 ~ /^\// {print $3}'
}

# name=path in the build tree; each becomes bin/<name> (a launcher) and
# libexec/<name> (the stripped program).
programs=(tetherd=server/tetherd tether=client/tether)
if [ "$tests" = 1 ]; then
  programs+=(tether_gpu_tests=tests/tether_gpu_tests cuda_bench=bench/cuda_bench
             model_bench=bench/model_bench tether_conformance=tests/conformance/tether_conformance)
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
top=$stage/tether
mkdir -p "$top/bin" "$top/libexec" "$top/lib"
for entry in "${programs[@]}"; do
  name=${entry%%=*}
  path=$build/${entry#*=}
  [ -x "$path" ] || { echo "bundle.sh: $path is missing: build it first (cmake --build $build)" >&2; exit 1; }
  ${arch:+$triple-}objcopy --strip-debug "$path" "$top/libexec/$name"
  # The launcher finds the bundle's libraries first, then the machine's
  # (the driver's libcuda.so.1 among them), under $TETHER_EMULATOR if set.
  cat > "$top/bin/$name" <<EOF
#!/bin/sh
here=\$(cd "\$(dirname "\$0")/.." && pwd)
LD_LIBRARY_PATH="\$here/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec \${TETHER_EMULATOR:-} "\$here/libexec/$name" "\$@"
EOF
  chmod +x "$top/bin/$name"
  # Every library the program loads, except glibc's own and the driver's.
  libraries_of "$path" | while read -r lib; do
    base=$(basename "$lib")
    case $base in
      libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libcuda.so*|libnvidia*) ;;
      *) [ -e "$top/lib/$base" ] || ${arch:+$triple-}objcopy --strip-debug "$lib" "$top/lib/$base" ;;
    esac
  done
done

if [ "$tests" = 1 ]; then
  mkdir -p "$top/share"
  cp "$root/deploy/gpu-check.sh" "$top/bin/gpu-check"
  # The test and benchmark programs look for the examples and CLI scripts in
  # the source tree they were built from; gpu-check links it to the copy
  # carried here.
  echo "$root" > "$top/share/source-dir"
  tar -C "$root" -cf - examples tests/cli tests/conformance/expected bench/torch bench/gpu | tar -C "$top/share" -xf -
  suite=/usr/share/libonnx-testdata/data/node
  [ -d "$suite" ] && cp -r "$suite" "$top/share/node"
fi

mkdir -p "$(dirname "$out")"
# A --tests bundle travels to a GPU machine whose upload is capped (64 MiB
# with the source tree, bench/gpu/NOTES.md): xz's strongest setting takes
# about 2 minutes more and makes it about 10% smaller (59 -> 55 MB).
level=-6
[ "$tests" = 0 ] || level=-9e
case $out in
  *.tar) tar -C "$stage" -cf "$out" tether ;;  # uncompressed (quick, for tests)
  *) tar -C "$stage" -cf - tether | xz -T0 "$level" > "$out"
     # Two bundle.sh writing the same file make a corrupt one; say so here,
     # not on the machine it is carried to.
     xz -t "$out" || { echo "bundle.sh: $out is corrupt (written twice at once?)" >&2; exit 1; } ;;
esac
echo "bundle.sh: $out ($(du -h "$out" | cut -f1); $(ls "$top/lib" | wc -l) libraries)"
