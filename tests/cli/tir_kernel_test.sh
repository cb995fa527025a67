#!/usr/bin/env bash
# Hand-written kernels as a user runs them: examples/tir_matmul.rx (a
# T.prim_func matmul through R.call_tir and an in-place bias through
# R.call_tir_inplace with tir_vars) compiled, run through a real tetherd on
# 127.0.0.1 and through the embedded daemon, outputs checked by NumPy; a
# kernel with a mistake gives the positioned error.
set -u
tether=$1
tetherd=$2
dir=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
py=/usr/bin/python3
rm -rf "$dir" && mkdir -p "$dir"
export TETHER_TOKEN_FILE="$dir/user/token"
# Kernels compiled by the CLI are cached here, not in $HOME, and fresh per run.
export TETHER_CACHE_DIR="$dir/cache"
daemon_pid=""
fail() { echo "FAIL: $*"; [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null; exit 1; }

$py "$root/tests/cli/make_tir_inputs.py" "$dir" || fail "numpy could not write the inputs"
check() {
  $py -c "
import numpy as np
got, want = np.load('$1/out.npy'), np.load('$dir/want.npy')
assert got.shape == want.shape, (got.shape, want.shape)
assert np.allclose(got, want, rtol=1e-4, atol=1e-4), abs(got - want).max()
" || fail "outputs in $1 differ from numpy"
}
inputs="--input x=@$dir/x.npy --input w=@$dir/w.npy --input b=@$dir/b.npy"

"$tether" compile "$root/examples/tir_matmul.rx" -o "$dir/m.tx" 2> "$dir/compile.log" \
  || fail "compile: $(cat "$dir/compile.log")"
"$tether" run "$dir/m.tx" $inputs --output-dir "$dir/out_local" > "$dir/run.log" 2>&1 \
  || fail "run (embedded daemon): $(cat "$dir/run.log")"
check "$dir/out_local"

"$tetherd" --listen 127.0.0.1:0 --port-file "$dir/port" 2> "$dir/daemon.log" &
daemon_pid=$!
for _ in $(seq 1 100); do [ -s "$dir/port" ] && break; sleep 0.1; done
[ -s "$dir/port" ] || fail "tetherd did not start: $(cat "$dir/daemon.log")"
remote=127.0.0.1:$(cat "$dir/port")
"$tether" run "$root/examples/tir_matmul.rx" --remote "$remote" $inputs --output-dir "$dir/out_remote" \
  > "$dir/run.log" 2>&1 || fail "run on tetherd: $(cat "$dir/run.log")"
check "$dir/out_remote"

# A store with one index too many: the file, line and column, and what is wrong.
sed 's/C\[vi, vj\] = T.float32(0)/C[vi, vj, 0] = T.float32(0)/' "$root/examples/tir_matmul.rx" > "$dir/bad.rx"
if "$tether" compile "$dir/bad.rx" -o "$dir/bad.tx" > "$dir/bad.log" 2>&1; then
  fail "a kernel with a wrong index count compiled"
fi
grep -q "bad.rx:[0-9]*:[0-9]*: expected 2 indices into 'C' (2-d), got 3" "$dir/bad.log" \
  || fail "unexpected error: $(cat "$dir/bad.log")"

kill -TERM "$daemon_pid" && wait "$daemon_pid" || fail "tetherd did not drain"
daemon_pid=""
echo "PASS"
