#!/usr/bin/env bash
# Packs a relocatable Tether for a machine that lacks our Debian packages (a
# board, a device-farm node, a GPU server with another distribution): tetherd
# and the tether CLI from an existing build, stripped, with every shared
# library they load except the C library and the NVIDIA driver (libcuda is
# always the machine's own), in one .tar.xz. With --tests it adds the GPU
# test suite, the benchmarks, the conformance runner, deploy/gpu-check.sh and
# the ONNX node cases, which is how a GPU machine without our toolchain checks
# a build (docs/design/deploy.md).
#
# Unpacked anywhere on x86-64 Linux with glibc 2.36 or newer:
#   tar xJf tether.tar.xz -C /opt &&
#   /opt/tether/bin/tetherd --listen 0.0.0.0:9190 --auth-token-file token
# (a network address needs client authentication: docs/design/security.md)
#
# usage: deploy/bundle.sh [--build DIR] [--tests] OUT.tar.xz   (OUT.tar: uncompressed)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
tests=0
out=""
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --tests) tests=1; shift ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "bundle.sh: unknown flag $1" >&2; exit 2 ;;
    *) out=$1; shift ;;
  esac
done
[ -n "$out" ] || { echo "usage: deploy/bundle.sh [--build DIR] [--tests] OUT.tar.xz" >&2; exit 2; }
case $out in /*) ;; *) out=$PWD/$out ;; esac

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
  objcopy --strip-debug "$path" "$top/libexec/$name"
  # The launcher finds the bundle's libraries first, then the machine's
  # (the driver's libcuda.so.1 among them).
  cat > "$top/bin/$name" <<EOF
#!/bin/sh
here=\$(cd "\$(dirname "\$0")/.." && pwd)
LD_LIBRARY_PATH="\$here/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$here/libexec/$name" "\$@"
EOF
  chmod +x "$top/bin/$name"
  # Every library the program loads, except glibc's own and the driver's.
  ldd "$path" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | while read -r lib; do
    base=$(basename "$lib")
    case $base in
      libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libcuda.so*|libnvidia*) ;;
      *) [ -e "$top/lib/$base" ] || objcopy --strip-debug "$lib" "$top/lib/$base" ;;
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
  tar -C "$root" -cf - examples tests/cli bench/torch | tar -C "$top/share" -xf -
  suite=/usr/share/libonnx-testdata/data/node
  [ -d "$suite" ] && cp -r "$suite" "$top/share/node"
fi

mkdir -p "$(dirname "$out")"
case $out in
  *.tar) tar -C "$stage" -cf "$out" tether ;;  # uncompressed (quick, for tests)
  *) tar -C "$stage" -cf - tether | xz -T0 -6 > "$out" ;;
esac
echo "bundle.sh: $out ($(du -h "$out" | cut -f1); $(ls "$top/lib" | wc -l) libraries)"
