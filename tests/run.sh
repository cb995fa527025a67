#!/usr/bin/env bash
# Builds Tether and runs the whole test suite: the normal build (GCC) with
# every CTest test (GPU tests skip themselves where no driver is found), then
# a clang-19 build with AddressSanitizer + UndefinedBehaviorSanitizer,
# -Wthread-safety (the ABSL_GUARDED_BY annotations are checked; a violation
# fails the build) and libFuzzer coverage, where the runtime, VM, codec,
# daemon, client, compiler, ONNX importer and farm suites run again, and then each
# fuzz target of tests/fuzz runs for a few seconds from its seed corpus, and
# last the board leg: tetherd and the runtime cross-built for aarch64 and run
# under qemu, with this machine's client against it (tests/board/run.sh).
# This is the README's test command and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${TETHER_JOBS:-$(nproc)}

# The three builds and the tests' files take about 6 GiB from a clean clone
# (less where ccache already holds the objects); a full disk fails a compile
# far from its cause, so each leg says what is left.
disk() { df -Ph . | awk -v leg="$1" 'NR == 2 {print "disk before " leg ": " $4 " free of " $2}'; }
disk "the build"

echo "== build (RelWithDebInfo) =="
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j "$jobs"

disk "the sanitizer build"
echo "== sanitizer build (clang-19: address,undefined, -Wthread-safety, fuzz targets) =="
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
  -DTETHER_SANITIZE=address,undefined -DTETHER_FUZZ=ON -DTETHER_BUILD_BENCHMARKS=OFF
cmake --build build-asan -j "$jobs" --target tether_runtime_tests tether_vm_tests tether_codec_tests \
  tether_server_tests tether_client_tests tether_compiler_tests tether_onnx_tests tetherd \
  tether_gpu_tests tether_fake_libcuda tether_fuzz_targets tether_farm_tests

echo "== tests under address,undefined sanitizers =="
# The out-of-memory tests ask for petabytes: let ASan return null instead of aborting.
ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan -L '^(runtime|vm|codec|server|client|compiler|onnx|farm)$' --output-on-failure -j "$jobs" --timeout 900

echo "== fuzz targets (${TETHER_FUZZ_SECONDS:-8} s each from tests/fuzz/corpus; docs/design/security.md runs them long) =="
bash tests/fuzz/run.sh build-asan "${TETHER_FUZZ_SECONDS:-8}"

disk "the tests"
echo "== tests =="
ctest --test-dir build --output-on-failure -j "$jobs" --timeout 900

disk "the board leg"
echo "== board: aarch64 under user-mode emulation (tests/board/run.sh) =="
bash tests/board/run.sh aarch64 build
