#!/usr/bin/env bash
# Installs every Debian 12 package Tether needs to build, test and benchmark.
# Idempotent: packages already present are left alone. Run as root or with sudo.
#
# --arch arm64|armhf (repeatable) adds what cross-building tetherd for a
# board needs (docs/design/boards.md): Debian's cross compiler, qemu's
# user-mode emulators, and the board architecture's gRPC, Protocol Buffers,
# Abseil, OpenSSL and GoogleTest as multiarch packages.
set -euo pipefail

arches=()
while [ $# -gt 0 ]; do
  case $1 in
    --arch)
      case ${2:-} in
        arm64|armhf) arches+=("$2") ;;
        *) echo "install-deps: --arch takes arm64 or armhf, not '${2:-}'" >&2; exit 2 ;;
      esac
      shift 2 ;;
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install-deps: unknown argument $1" >&2; exit 2 ;;
  esac
done

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
  libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev libblis-dev libdnnl-dev openssl clang-19 libclang-rt-19-dev
  # ONNX: generated classes, test data, and Python for example generation
  libonnx-dev libonnx-testdata python3-onnx python3-numpy
  # the Python package (python/) and its tests
  pybind11-dev python3-dev python3-pytest
  # tetherd --metrics-listen (Prometheus)
  prometheus-cpp-dev
  # the deployment files' checks: systemd-analyze, YAML
  systemd python3-yaml
  # the device farm (farm/): etcd's .proto files for the generated client,
  # and etcd itself with etcdctl for the farm tests and the farm
  etcd-server etcd-client golang-etcd-server-dev
)

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

# The packages of "$@" that are not installed.
missing_of() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"
  done
}

# apt-get install of "$@" after an index update, both retried: a mirror that
# is syncing serves indexes that fail their checksums for a while.
install() {
  local try
  for try in 1 2 3 4; do
    if $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
        $sudo apt-get install -y -qq --no-install-recommends "$@"; then
      return 0
    fi
    [ "$try" = 4 ] && break
    echo "install-deps: apt-get failed (try $try of 4); trying again in $((try * 20)) s" >&2
    sleep $((try * 20))
  done
  return 1
}

mapfile -t missing < <(missing_of "${packages[@]}")
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  echo "install-deps: installing ${#missing[@]} packages: ${missing[*]}"
  install "${missing[@]}"
fi

for arch in "${arches[@]}"; do
  case $arch in
    arm64) triple=aarch64-linux-gnu ;;
    armhf) triple=arm-linux-gnueabihf ;;
  esac
  # The cross compiler and the emulator first, then the board's libraries:
  # asked for in one apt-get call they conflict.
  mapfile -t missing < <(missing_of "g++-$triple" qemu-user-static)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "install-deps: installing the $arch cross toolchain: ${missing[*]}"
    install "${missing[@]}"
  fi
  board=(libgrpc++-dev libprotobuf-dev libabsl-dev libssl-dev libgtest-dev libgmock-dev)
  mapfile -t missing < <(missing_of "${board[@]/%/:$arch}")
  [ ${#missing[@]} -gt 0 ] || continue
  dpkg --print-foreign-architectures | grep -qx "$arch" || $sudo dpkg --add-architecture "$arch"
  echo "install-deps: installing the $arch libraries: ${missing[*]}"
  if ! install "${missing[@]}"; then
    # An architecture with nothing installed is taken out again: its failing
    # index would keep apt from reading the other architectures' indexes of
    # the same mirror.
    dpkg-query -W -f='${Architecture}\n' 2>/dev/null | grep -qx "$arch" ||
      $sudo dpkg --remove-architecture "$arch"
    cat >&2 <<EOF
install-deps: cannot install the $arch libraries. Multiarch packages must
have the same version on every architecture, so a mirror whose $arch index
lags its amd64 one (a security update not yet built for $arch, or an index
that fails its checksum while the mirror syncs) refuses them with "held broken
packages" or "unmet dependencies". Try again later (docs/design/boards.md).
EOF
    exit 1
  fi
done
