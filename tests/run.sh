#!/usr/bin/env bash
# Builds Tether and runs the whole test suite: the normal build with every CTest
# test (GPU tests skip themselves where no driver is found), then the runtime,
# VM, codec, daemon, client, compiler and ONNX importer suites again under
# AddressSanitizer + UndefinedBehaviorSanitizer, where the executable-loader and
# text-parser fuzzing, the importer's bad-model tests and the daemon's
# bad-input tests run too. This is the README's test command and
# what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${TETHER_JOBS:-$(nproc)}

echo "== build (RelWithDebInfo) =="
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j "$jobs"

echo "== sanitizer build (address,undefined; runtime, codec, daemon, client, compiler, onnx and their tests) =="
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTETHER_SANITIZE=address,undefined -DTETHER_BUILD_BENCHMARKS=OFF
cmake --build build-asan -j "$jobs" --target tether_runtime_tests tether_vm_tests tether_codec_tests \
  tether_server_tests tether_client_tests tether_compiler_tests tether_onnx_tests tetherd

echo "== tests under address,undefined sanitizers =="
# The out-of-memory tests ask for petabytes: let ASan return null instead of aborting.
ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan -L '^(runtime|vm|codec|server|client|compiler|onnx)$' --output-on-failure -j "$jobs" --timeout 900

echo "== tests =="
ctest --test-dir build --output-on-failure -j "$jobs" --timeout 900
