#!/usr/bin/env bash
# tether run --stream (docs/design/rpc-protocol.md, "Streaming"): a streaming
# model shaped like a voice-activity detector exported by torch.onnx (input
# [1, 512], state [2, 1, 128], sr int64; outputs output, stateN) runs chunk
# after chunk with its state carried on the daemon, through a real tetherd
# and through the embedded daemon, from the .onnx and from a compiled
# executable, and matches NumPy. The daemon's metrics show the state never
# crossed between chunks (the bytes it sends per extra chunk are a fraction
# of the state, while the naive loop's are a copy each). Bad --carry, a
# carried output that does not fit, chunks of the wrong shape: clear errors,
# non-zero exits, and the daemon keeps serving.
set -u
tether=$1
tetherd=$2
root=$3
metrics=$4  # ON or OFF: whether this build serves metrics
dir=$5
py=/usr/bin/python3
rm -rf "$dir" && mkdir -p "$dir/m20" "$dir/m60"
export TETHER_TOKEN_FILE="$dir/user/token"
export TETHER_CACHE_DIR=$dir/cache
pid=""
fail() { echo "FAIL: $*"; [ -n "$pid" ] && kill "$pid" 2>/dev/null; exit 1; }
compare() {  # got want label
  $py "$root/tests/testing/compare_npy.py" "$1" "$2" 1e-4 "$3" > /dev/null ||
    fail "$3: $($py "$root/tests/testing/compare_npy.py" "$1" "$2" 1e-4 "$3" 2>&1)"
}

$py "$root/tests/cli/make_stream_model.py" "$dir/m20" 20 || fail "make_stream_model.py failed"
$py "$root/tests/cli/make_stream_model.py" "$dir/m60" 60 || fail "make_stream_model.py failed"
m=$dir/m20

metrics_flag=()
[ "$metrics" = ON ] && metrics_flag=(--metrics-listen 127.0.0.1:0)
"$tetherd" --listen 127.0.0.1:0 --port-file "$dir/port" --store-dir "$dir/store" \
  "${metrics_flag[@]}" 2> "$dir/tetherd.log" &
pid=$!
for _ in $(seq 1 200); do [ -s "$dir/port" ] && break; sleep 0.05; done
[ -s "$dir/port" ] || fail "tetherd wrote no port file: $(cat "$dir/tetherd.log")"
remote=127.0.0.1:$(cat "$dir/port")

# The bytes the daemon has sent so far, on every path.
sent() {
  $py - "$(grep -o 'metrics=127.0.0.1:[0-9]*' "$dir/tetherd.log" | head -1 | cut -d= -f2)" <<'PY'
import sys, urllib.request
text = urllib.request.urlopen(f'http://{sys.argv[1]}/metrics', timeout=10).read().decode()
print(int(sum(float(l.rsplit(' ', 1)[1]) for l in text.splitlines()
              if l.startswith('tetherd_sent_bytes_total{'))))
PY
}

# 1. Through a real tetherd: only the inputs on the command line, the state
# starting as zeros of its declared shape; outputs and final state as NumPy's.
stream=(--stream "input=@$m/chunks.npy" --input "sr=@$m/sr.npy" --carry stateN=state)
[ "$metrics" = ON ] && before=$(sent)
"$tether" run "$m/vad.onnx" --remote "$remote" "${stream[@]}" --output-dir "$dir/out1" \
  > "$dir/run1.txt" 2>&1 || fail "streamed run failed: $(cat "$dir/run1.txt")"
[ "$metrics" = ON ] && after20=$(sent)
compare "$dir/out1/out_output.npy" "$m/expected_output.npy" "streamed outputs"
compare "$dir/out1/state_state.npy" "$m/expected_state.npy" "final state"
grep -q "over 20 chunks" "$dir/run1.txt" || fail "no chunk count: $(cat "$dir/run1.txt")"
grep -q "out output .*float32 *\[20, 1, 1\]" "$dir/run1.txt" || fail "$(cat "$dir/run1.txt")"
grep -q "state stateN->state .*\[2, 1, 128\]" "$dir/run1.txt" || fail "$(cat "$dir/run1.txt")"
grep -Eq "streamed +mean [0-9.]+ ms +median [0-9.]+ ms +p90 [0-9.]+ ms" "$dir/run1.txt" ||
  fail "no per-chunk latency: $(cat "$dir/run1.txt")"

if [ "$metrics" = ON ]; then
  # 40 more chunks of the same model: what the daemon sends per chunk is
  # the small output and a handle, far below the 1 KiB state...
  "$tether" run "$m/vad.onnx" --remote "$remote" --stream "input=@$dir/m60/chunks.npy" \
    --input "sr=@$m/sr.npy" --carry stateN=state > "$dir/run60.txt" 2>&1 ||
    fail "60-chunk run failed: $(cat "$dir/run60.txt")"
  after60=$(sent)
  per_chunk=$(( ((after60 - after20) - (after20 - before)) / 40 ))
  [ "$per_chunk" -lt 400 ] ||
    fail "the daemon sent $per_chunk bytes per extra chunk; the state (1024 bytes) crossed?"
  # ...while the naive loop (--compare-naive) sends the state with every call.
  "$tether" run "$m/vad.onnx" --remote "$remote" "${stream[@]}" --compare-naive \
    > "$dir/naive.txt" 2>&1 || fail "--compare-naive failed: $(cat "$dir/naive.txt")"
  naive=$(( $(sent) - after60 - (after20 - before) ))
  [ "$naive" -ge $((20 * 1024)) ] ||
    fail "the naive loop sent only $naive more bytes than the stream for 20 chunks"
  echo "bytes per extra streamed chunk: $per_chunk; naive loop extra: $naive for 20 chunks"
else
  "$tether" run "$m/vad.onnx" --remote "$remote" "${stream[@]}" --compare-naive \
    > "$dir/naive.txt" 2>&1 || fail "--compare-naive failed: $(cat "$dir/naive.txt")"
fi
grep -q "final state identical" "$dir/naive.txt" || fail "$(cat "$dir/naive.txt")"
grep -Eq "streamed / naive: [0-9.]+ \(median\)" "$dir/naive.txt" || fail "$(cat "$dir/naive.txt")"

# 2. The embedded daemon (no --remote), another first state and sample rate.
"$tether" run "$m/vad.onnx" --stream "input=@$m/chunks.npy" --input "sr=@$m/sr8k.npy" \
  --input "state=@$m/state0.npy" --carry stateN=state --output-dir "$dir/out2" \
  > "$dir/run2.txt" 2>&1 || fail "embedded streamed run failed: $(cat "$dir/run2.txt")"
compare "$dir/out2/out_output.npy" "$m/expected_output_s0.npy" "embedded outputs"
compare "$dir/out2/state_state.npy" "$m/expected_state_s0.npy" "embedded final state"

# 3. A compiled executable: outputs by index, the first state from a file.
"$tether" compile "$m/vad.onnx" -o "$dir/vad.tx" > /dev/null 2>&1 || fail "compile failed"
"$tether" run "$dir/vad.tx" --remote "$remote" --stream "input=@$m/chunks.npy" \
  --input "sr=@$m/sr8k.npy" --input "state=@$m/state0.npy" --carry 1=state \
  --output-dir "$dir/out3" > "$dir/run3.txt" 2>&1 || fail "executable run: $(cat "$dir/run3.txt")"
compare "$dir/out3/out_0.npy" "$m/expected_output_s0.npy" "executable outputs"
compare "$dir/out3/state_state.npy" "$m/expected_state_s0.npy" "executable final state"

# 4. Errors: exit 1 (2 for usage), the message and the status code's name.
expect_error() {  # label, exit code, pattern, args...
  local label=$1 code=$2 pattern=$3
  shift 3
  "$tether" run "$@" > "$dir/err.txt" 2>&1
  local rc=$?
  [ "$rc" = "$code" ] || fail "$label: exit $rc, expected $code: $(cat "$dir/err.txt")"
  grep -q -- "$pattern" "$dir/err.txt" || fail "$label: no \"$pattern\" in: $(cat "$dir/err.txt")"
}
expect_error "unknown output" 1 \
  "main has no output named stateX; its outputs are output, stateN (INVALID_ARGUMENT)" \
  "$m/vad.onnx" --remote "$remote" --stream "input=@$m/chunks.npy" --input "sr=@$m/sr.npy" \
  --carry stateX=state
expect_error "unknown input" 1 "--carry stateN=stat: main has no parameter named stat" \
  "$m/vad.onnx" --remote "$remote" --stream "input=@$m/chunks.npy" --input "sr=@$m/sr.npy" \
  --carry stateN=stat
expect_error "state that does not fit" 1 \
  "chunk 0: stream of main: carried output 1 (stateN) is float32 \[2, 1, 64\], but input 1 (state) it feeds is float32 \[2, 1, 128\] (INVALID_ARGUMENT)" \
  "$m/vad_badstate.onnx" --remote "$remote" --stream "input=@$m/chunks.npy" \
  --input "sr=@$m/sr.npy" --carry stateN=state
expect_error "chunks of the wrong shape" 1 \
  "each chunk is float32 (1, 256), but input input is float32 (1, 512) (INVALID_ARGUMENT)" \
  "$m/vad.onnx" --remote "$remote" --stream "input=@$m/short_chunks.npy" \
  --input "sr=@$m/sr.npy" --carry stateN=state
expect_error "output names of an executable" 1 "outputs have no names; give the output's index" \
  "$dir/vad.tx" --remote "$remote" --stream "input=@$m/chunks.npy" --input "sr=@$m/sr.npy" \
  --input "state=@$m/state0.npy" --carry stateN=state
expect_error "no first state for an executable" 1 \
  "carried input state needs a first value: give --input state=@FILE.npy" \
  "$dir/vad.tx" --remote "$remote" --stream "input=@$m/chunks.npy" --input "sr=@$m/sr.npy" \
  --carry 1=state
expect_error "--carry without --stream" 2 "--carry and --compare-naive go with --stream" \
  "$m/vad.onnx" --input "sr=@$m/sr.npy" --carry stateN=state
"$tether" run --help | grep -q -- "--carry OUT=IN" || fail "run --help does not explain --carry"

# The daemon kept serving through the errors.
"$tether" run "$m/vad.onnx" --remote "$remote" "${stream[@]}" --output-dir "$dir/out4" \
  > "$dir/run4.txt" 2>&1 || fail "run after the errors failed: $(cat "$dir/run4.txt")"
compare "$dir/out4/state_state.npy" "$m/expected_state.npy" "final state after the errors"
kill "$pid"
echo "stream checks passed"
