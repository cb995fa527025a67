#!/usr/bin/env bash
# A board's daemon as a user meets it, under emulation: the bundle's tetherd
# started through its own launcher with TETHER_EMULATOR, and this machine's
# tether CLI against it with no --target:
#   - `tether info` shows the board's target, read on the board;
#   - the ONNX examples, compiled for the board from its handshake, run
#     there and match NumPy, and bench and profile run there; the .rx MLP
#     matches this machine's own run;
#   - a model compiled for this machine is refused by the board's daemon,
#     naming both targets, and the daemon keeps serving;
#   - the bundle's own (compiler-less) tether runs on the board too;
#   - every ONNX node case that passes here passes on the board.
# usage: e2e_test.sh BUNDLE_DIR EMULATOR TRIPLE HOST_BUILD ROOT WORK_DIR
set -u
bundle=$1
emulator=$2
triple=$3
host_build=$4
root=$5
dir=$6
tether=$host_build/client/tether
py=/usr/bin/python3
rm -rf "$dir" && mkdir -p "$dir"
export TETHER_TOKEN_FILE="$dir/user/token"
export TETHER_CACHE_DIR=$dir/cache
daemon_pid=""
stop() { [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null; }
fail() { echo "FAIL: $*"; stop; exit 1; }

$py "$root/examples/onnx/make_models.py" "$dir" > /dev/null || fail "make_models.py failed"

TETHER_EMULATOR="$emulator" "$bundle/bin/tetherd" --listen 127.0.0.1:0 --port-file "$dir/port" \
  --store-dir "$dir/store" 2> "$dir/daemon.log" &
daemon_pid=$!
for _ in $(seq 1 300); do [ -s "$dir/port" ] && break; sleep 0.1; done
[ -s "$dir/port" ] || fail "the board's tetherd did not start: $(cat "$dir/daemon.log")"
remote=127.0.0.1:$(cat "$dir/port")

# 1. The board's target, read on the board.
"$tether" info --remote "$remote" > "$dir/info.txt" 2>&1 || fail "info: $(cat "$dir/info.txt")"
grep -q "^target      $triple " "$dir/info.txt" || fail "info does not show $triple: $(cat "$dir/info.txt")"
grep -q -- "--target \"llvm -mtriple=$triple" "$dir/info.txt" || fail "info shows no compile target"
echo "board: $(grep '^target' "$dir/info.txt")"

# 2. The ONNX examples, compiled for the board (no --target), against NumPy.
compare() {  # got.npy want.npy tolerance label
  $py "$root/tests/testing/compare_npy.py" "$@" || fail "$4: the outputs differ"
}
for m in mlp cnn transformer; do
  "$tether" run "$dir/$m.onnx" --remote "$remote" --input "x=@$dir/$m.x.npy" \
    --output-dir "$dir/out_$m" > "$dir/run_$m.txt" 2>&1 || fail "$m: run failed: $(cat "$dir/run_$m.txt")"
  compare "$dir/out_$m/out.npy" "$dir/$m.expected.npy" 1e-3 "$m against NumPy"
done

# bench and profile run on the board too (timings under emulation mean
# nothing; that they are measured there does).
"$tether" bench "$dir/cnn.onnx" --remote "$remote" --input "x=@$dir/cnn.x.npy" --number 2 \
  --repeat 2 --json > "$dir/bench.json" 2> "$dir/bench.err" || fail "bench: $(cat "$dir/bench.err")"
$py -c "
import json, sys
r = json.load(open(sys.argv[1]))
assert len(r['samples']) == 2 and r['total_calls'] == 1 + 2 * 2 and r['min'] > 0, r
" "$dir/bench.json" || fail "bench on the board: $(cat "$dir/bench.json")"
"$tether" profile "$dir/cnn.onnx" --remote "$remote" --input "x=@$dir/cnn.x.npy" --format csv \
  > "$dir/profile.csv" 2>&1 || fail "profile: $(cat "$dir/profile.csv")"
grep -q ",\"fused_conv2d" "$dir/profile.csv" || fail "profile on the board has no conv kernel: $(cat "$dir/profile.csv")"

# 3. The .rx MLP on the board and here, from the same random inputs.
shapes=(--shape x=8x784 --shape w0=784x128 --shape b0=128 --shape w1=128x10 --shape b1=10)
"$tether" run "$root/examples/mlp.rx" --remote "$remote" --random-inputs "${shapes[@]}" \
  --output-dir "$dir/rx_board" > "$dir/rx_board.txt" 2>&1 || fail "mlp.rx on the board: $(cat "$dir/rx_board.txt")"
"$tether" run "$root/examples/mlp.rx" --random-inputs "${shapes[@]}" \
  --output-dir "$dir/rx_here" > "$dir/rx_here.txt" 2>&1 || fail "mlp.rx here: $(cat "$dir/rx_here.txt")"
compare "$dir/rx_board/out.npy" "$dir/rx_here/out.npy" 1e-4 "mlp.rx, the board against this machine"

# 4. Kernels built for this machine are refused by the board, naming both.
"$tether" run "$dir/mlp.onnx" --remote "$remote" --target llvm --input "x=@$dir/mlp.x.npy" \
  > "$dir/wrong.txt" 2>&1 && fail "a model built for this machine ran on the board"
grep -q "cannot run on this $triple machine" "$dir/wrong.txt" ||
  fail "no clear refusal: $(cat "$dir/wrong.txt")"
grep -q "x86_64" "$dir/wrong.txt" || fail "the refusal does not name the model's target"

# 5. The bundle's own tether, compiler-less, on the board.
TETHER_EMULATOR="$emulator" "$bundle/bin/tether" info --remote "$remote" > "$dir/board_info.txt" 2>&1 ||
  fail "the bundle's tether: $(cat "$dir/board_info.txt")"
grep -q "^target      $triple " "$dir/board_info.txt" || fail "the bundle's tether: no target"

# 6. The ONNX node suite on the board: every case that passes on this
# machine (tests/conformance/expected/node.txt) passes there (the daemon's
# launcher is the conformance runner's tetherd; it builds for its target).
expected=$root/tests/conformance/expected/node.txt
TETHER_EMULATOR="$emulator" "$host_build/tests/conformance/tether_conformance" \
  --suite /usr/share/libonnx-testdata/data/node --remote --tetherd "$bundle/bin/tetherd" \
  --expected "$expected" --table none --report "$dir/node.tsv" --jobs "$(nproc)" \
  > "$dir/node.txt" 2>&1 || fail "node suite on the board: $(tail -20 "$dir/node.txt")"
grep -q "built for llvm -mtriple=$triple" "$dir/node.txt" || fail "the node suite was not built for the board"
echo "$(grep '^node:' "$dir/node.txt")"

stop
echo "PASS: the $triple board bundle"
