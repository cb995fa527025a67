#!/usr/bin/env bash
# tether info / run / bench / profile as a user runs them: with the embedded
# daemon and against a real tetherd started here (port 0, --port-file), .npy
# inputs made and outputs checked by NumPy, bad input giving clear errors.
set -u
tether=$1
tetherd=$2
dir=$3
py=/usr/bin/python3
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$dir" && mkdir -p "$dir"
# This user's default token (tetherd requires it, tether sends it), kept out of $HOME.
export TETHER_TOKEN_FILE="$dir/user/token"
# Kernels compiled by the CLI are cached here, not in $HOME, and fresh per run.
export TETHER_CACHE_DIR="$dir/cache"
fail() { echo "FAIL: $*"; [ -n "${daemon_pid:-}" ] && kill "$daemon_pid" 2>/dev/null; exit 1; }

"$tether" demo --output "$dir/mlp.tx" > /dev/null || fail "demo"
$py -c "import numpy as np; np.save('$dir/x.npy', np.linspace(-1, 1, 4*32, dtype=np.float32).reshape(4, 32))" \
  || fail "numpy could not write the input"

# run: outputs as .npy files NumPy can read, with the shapes of (logits, hidden).
"$tether" run "$dir/mlp.tx" --input x=@"$dir/x.npy" --output-dir "$dir/out" > "$dir/run.log" 2>&1 \
  || fail "run: $(cat "$dir/run.log")"
grep -q "out_0 .*float32 .*\[4, 10\]" "$dir/run.log" || fail "run summary: $(cat "$dir/run.log")"
$py -c "
import numpy as np
a = np.load('$dir/out/out_0.npy'); b = np.load('$dir/out/out_1.npy')
assert a.shape == (4, 10) and a.dtype == np.float32, (a.shape, a.dtype)
assert b.shape == (4, 64) and (b >= 0).all(), 'hidden is a relu output'
" || fail "outputs are not what numpy expects"

# The same run twice gives the same numbers (deterministic weights and input).
"$tether" run "$dir/mlp.tx" --input x=@"$dir/x.npy" --output-dir "$dir/out2" > /dev/null 2>&1 || fail "second run"
cmp -s "$dir/out/out_0.npy" "$dir/out2/out_0.npy" || fail "outputs differ between runs"

# bench --json: statistics from the daemon's time_evaluator.
"$tether" bench "$dir/mlp.tx" --input x=@"$dir/x.npy" --number 20 --repeat 4 --json > "$dir/bench.json" \
  || fail "bench"
$py -c "
import json
r = json.load(open('$dir/bench.json'))
assert len(r['samples']) == 4 and r['total_calls'] == 1 + 20 * 4, r
assert r['min'] <= r['median'] <= r['max'], r
assert r['exclusive'] is True and r['wait_seconds'] >= 0, r
" || fail "bench json: $(cat "$dir/bench.json")"

# random inputs filled on the device, and a profile as CSV.
"$tether" profile "$dir/mlp.tx" --random-inputs --shape x=8x32 --format csv > "$dir/profile.csv" \
  || fail "profile"
grep -q "demo.dense" "$dir/profile.csv" || fail "profile rows: $(cat "$dir/profile.csv")"
grep -q "float32\[8, 32\]" "$dir/profile.csv" || fail "profile shapes: $(cat "$dir/profile.csv")"

# Bad input: a clear message and exit 1.
expect_error() {  # message fragment, command...
  local want=$1; shift
  "$@" > "$dir/err.out" 2> "$dir/err.log"
  local rc=$?
  [ $rc -eq 1 ] || fail "$* exited $rc, expected 1: $(cat "$dir/err.log")"
  grep -q -- "$want" "$dir/err.log" || fail "$*: stderr lacks \"$want\": $(cat "$dir/err.log")"
}
expect_error "has no parameter named y" "$tether" run "$dir/mlp.tx" --input y=@"$dir/x.npy"
expect_error "no input for parameter x" "$tether" run "$dir/mlp.tx"
$py -c "import numpy as np; np.save('$dir/bad.npy', np.zeros((4, 31), dtype=np.float32))"
expect_error "param=x" "$tether" run "$dir/mlp.tx" --input x=@"$dir/bad.npy"
expect_error "not a .npy file" "$tether" run "$dir/mlp.tx" --input x=@"$dir/mlp.tx"
expect_error "not a tether executable" "$tether" run "$dir/x.npy"
"$tether" run "$dir/mlp.tx" --input x=@"$dir/x.npy" 2> "$dir/quiet.log" > /dev/null
[ ! -s "$dir/quiet.log" ] || fail "the embedded daemon should not log: $(cat "$dir/quiet.log")"

# A real tetherd: info shows its devices; its registry has no demo kernels, so
# the demo executable is refused naming the missing function; SIGTERM exits 0.
"$tetherd" --listen 127.0.0.1:0 --port-file "$dir/port" --store-dir "$dir/store" 2> "$dir/tetherd.log" &
daemon_pid=$!
for _ in $(seq 1 200); do [ -s "$dir/port" ] && break; sleep 0.05; done
[ -s "$dir/port" ] || fail "tetherd wrote no port file: $(cat "$dir/tetherd.log")"
port=$(cat "$dir/port")
"$tether" info --remote "127.0.0.1:$port" > "$dir/info.log" || fail "info: $(cat "$dir/info.log")"
grep -q "device cpu:0" "$dir/info.log" || fail "info lacks cpu:0: $(cat "$dir/info.log")"
grep -q "multi_processor_count" "$dir/info.log" || fail "info lacks attributes"
grep -q "^target      x86_64-linux-gnu (x86-64" "$dir/info.log" || fail "info lacks the target: $(cat "$dir/info.log")"
expect_error "demo.dense" "$tether" run "$dir/mlp.tx" --remote "127.0.0.1:$port" --input x=@"$dir/x.npy"
# --isolate: the session runs in a worker process of the daemon and gives the
# same outputs as one in the daemon itself.
mlp_shapes=(--shape x=8x784 --shape w0=784x128 --shape b0=128 --shape w1=128x10 --shape b1=10)
for mode in plain isolate; do
  flag=(); [ $mode = isolate ] && flag=(--isolate)
  "$tether" run "$root/examples/mlp.rx" --remote "127.0.0.1:$port" "${flag[@]}" --random-inputs \
    "${mlp_shapes[@]}" --output-dir "$dir/$mode" > "$dir/$mode.log" 2>&1 || fail "run $mode: $(cat "$dir/$mode.log")"
done
cmp -s "$dir/plain/out.npy" "$dir/isolate/out.npy" || fail "an isolated session computed other outputs"
grep -q "event=worker pid=" "$dir/tetherd.log" || fail "no session worker: $(cat "$dir/tetherd.log")"
expect_error "needs --remote" "$tether" run "$root/examples/mlp.rx" --isolate --random-inputs "${mlp_shapes[@]}"
# Exclusive timing: a measurement (here in an isolated session) says whether
# other sessions' calls could run beside it.
grep -q "timing=exclusive" "$dir/tetherd.log" || fail "timing mode not logged: $(cat "$dir/tetherd.log")"
"$tether" bench "$root/examples/mlp.rx" --remote "127.0.0.1:$port" --isolate --random-inputs \
  "${mlp_shapes[@]}" --number 2 > "$dir/bench-exclusive.log" 2>&1 \
  || fail "bench --isolate: $(cat "$dir/bench-exclusive.log")"
grep -q "^timing exclusive" "$dir/bench-exclusive.log" || fail "$(cat "$dir/bench-exclusive.log")"
"$tether" bench "$root/examples/mlp.rx" --remote "127.0.0.1:$port" --concurrent-timing \
  --random-inputs "${mlp_shapes[@]}" --number 2 --json > "$dir/bench-concurrent.json" \
  || fail "bench --concurrent-timing"
$py -c "
import json
assert json.load(open('$dir/bench-concurrent.json'))['exclusive'] is False
" || fail "concurrent bench json: $(cat "$dir/bench-concurrent.json")"
kill -TERM "$daemon_pid"
wait "$daemon_pid"
rc=$?
daemon_pid=
[ $rc -eq 0 ] || fail "tetherd exited $rc after SIGTERM"
grep -q "event=open" "$dir/tetherd.log" || fail "tetherd logged no session events: $(cat "$dir/tetherd.log")"
echo "remote command checks passed"
