#!/usr/bin/env bash
# deploy/bundle.sh as a user runs it: the build packed (uncompressed, for
# speed), unpacked elsewhere; the bundle holds no glibc or driver library,
# its programs load every other library from inside it, and from a clean
# environment its tether compiles a model and runs it on its tetherd. Where
# the build has the GPU test programs, the bundle carries them (--tests) and
# its gpu-check runs two steps and sums them up (skipped without a GPU).
set -u
build=$1
dir=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$dir" && mkdir -p "$dir/unpacked"
daemon_pid=""
fail() { echo "FAIL: $*"; [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null; exit 1; }

tests=""
[ -x "$build/tests/tether_gpu_tests" ] && [ -x "$build/bench/cuda_bench" ] &&
  [ -x "$build/bench/model_bench" ] && [ -x "$build/tests/conformance/tether_conformance" ] &&
  tests=--tests
bash "$root/deploy/bundle.sh" --build "$build" $tests "$dir/tether.tar" > "$dir/bundle.log" 2>&1 \
  || fail "bundle.sh: $(cat "$dir/bundle.log")"
tar -C "$dir/unpacked" -xf "$dir/tether.tar" || fail "unpacking"
top=$dir/unpacked/tether
for prog in tetherd tether; do
  [ -x "$top/bin/$prog" ] && [ -x "$top/libexec/$prog" ] || fail "no $prog in the bundle"
done
for lib in "$top"/lib/*; do
  case $(basename "$lib") in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|ld-linux*|libcuda*|libnvidia*) fail "$lib is bundled" ;;
  esac
done
ls "$top/lib" | grep -q '^libgrpc' || fail "gRPC is not in the bundle"
for prog in tetherd tether; do
  LD_LIBRARY_PATH=$top/lib ldd "$top/libexec/$prog" > "$dir/ldd.$prog" 2>&1 || fail "ldd $prog"
  ! grep -q "not found" "$dir/ldd.$prog" || fail "$prog: $(grep "not found" "$dir/ldd.$prog")"
  outside=$(awk '$2 == "=>" && $3 ~ /^\// {print $3}' "$dir/ldd.$prog" | grep -v "^$top/lib/" |
            grep -vE '/(libc|libm|libpthread|libdl|librt)\.so')
  [ -z "$outside" ] || fail "$prog loads from outside the bundle: $outside"
  # Debug info stripped.
  ! readelf -S "$top/libexec/$prog" | grep -q '\.debug_info' || fail "$prog keeps its debug info"
done

# A clean environment: no LD_LIBRARY_PATH, no PATH to the build.
env -i TETHER_TOKEN_FILE="$dir/user/token" "$top/bin/tetherd" --listen 127.0.0.1:0 --port-file "$dir/port" 2> "$dir/daemon.log" &
daemon_pid=$!
for _ in $(seq 1 100); do [ -s "$dir/port" ] && break; sleep 0.1; done
[ -s "$dir/port" ] || fail "the bundle's tetherd did not start: $(cat "$dir/daemon.log")"
remote=127.0.0.1:$(cat "$dir/port")
env -i TETHER_TOKEN_FILE="$dir/user/token" "$top/bin/tether" info --remote "$remote" > "$dir/info.log" 2>&1 \
  || fail "info: $(cat "$dir/info.log")"
grep -q "^device cpu:0" "$dir/info.log" || fail "info lists no cpu:0: $(cat "$dir/info.log")"
env -i TETHER_TOKEN_FILE="$dir/user/token" "$top/bin/tether" compile "$root/examples/mlp.rx" -o "$dir/mlp.tx" > "$dir/compile.log" 2>&1 \
  || fail "compile: $(cat "$dir/compile.log")"
env -i TETHER_TOKEN_FILE="$dir/user/token" "$top/bin/tether" run "$dir/mlp.tx" --remote "$remote" --random-inputs --shape x=4x784 \
  --shape w0=784x128 --shape b0=128 --shape w1=128x10 --shape b1=10 > "$dir/run.log" 2>&1 \
  || fail "run: $(cat "$dir/run.log")"
grep -q "outputs of main" "$dir/run.log" || fail "run printed no outputs: $(cat "$dir/run.log")"
kill -TERM "$daemon_pid" && wait "$daemon_pid" || fail "tetherd did not drain"
daemon_pid=""

if [ -n "$tests" ]; then
  # What a GPU machine runs; here each step passes, or skips without a GPU.
  env -i PATH=/usr/bin:/bin "$top/bin/gpu-check" "$dir/check" cli gpu-tests > "$dir/check.log" 2>&1 \
    || fail "gpu-check: $(cat "$dir/check.log")"
  [ "$(wc -l < "$dir/check/summary.txt")" = 2 ] || fail "gpu-check summary: $(cat "$dir/check.log")"
  for step in cli gpu-tests; do
    grep -qE "^$step +(exit 0|skipped \(exit 77\)) " "$dir/check/summary.txt" \
      || fail "gpu-check $step: $(cat "$dir/check.log")"
    [ -s "$dir/check/$step.log" ] || fail "gpu-check wrote no $step.log"
  done
  "$top/bin/gpu-check" "$dir/check" no-such-step > "$dir/check.log" 2>&1
  [ $? = 2 ] && grep -q "unknown step no-such-step" "$dir/check.log" \
    || fail "gpu-check took an unknown step: $(cat "$dir/check.log")"
fi
# The bundle is a quarter of a gigabyte, unpacked as much again: kept only
# when the test fails (CI machines can be short of disk).
rm -rf "$dir/tether.tar" "$dir/unpacked"
echo "PASS"
