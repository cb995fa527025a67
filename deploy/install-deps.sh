#!/usr/bin/env bash
# Installs every Debian 12 package Tether needs to build, test and benchmark.
# Idempotent: packages already present are left alone. Run as root or with sudo.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config git python3
  # wire: gRPC, Protocol Buffers, Abseil
  libgrpc++-dev libgrpc-dev protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libabsl-dev libssl-dev
  # tensors
  libdlpack-dev
  # compiler: LLVM 19 with lld (and the libraries its CMake package links)
  llvm-19-dev liblld-19-dev lld-19 zlib1g-dev libzstd-dev libedit-dev libxml2-dev libffi-dev libcurl4-openssl-dev
  # tests and benchmarks; clang-19 with its sanitizer and libFuzzer runtimes
  # for the sanitizer, thread-safety and fuzzing build
  libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev openssl clang-19 libclang-rt-19-dev
  # ONNX: generated classes, test data, and Python for example generation
  libonnx-dev libonnx-testdata python3-onnx python3-numpy
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-deps: installing ${#missing[@]} packages: ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
