#!/usr/bin/env bash
# Weights on the device, as a new user tries it: `tether compile
# --separate-params` writes OUT.tx and OUT.params; `tether run OUT.tx --params
# OUT.params` against a real tetherd gives NumPy's numbers; new weights upload
# only the param file, new code only the (small) module; bench and profile
# take --params too; a corrupt or mismatched param file is a clear error.
set -u
tether=$1
tetherd=$2
dir=$3
py=/usr/bin/python3
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$dir" && mkdir -p "$dir"
export TETHER_TOKEN_FILE="$dir/user/token"
export TETHER_CACHE_DIR="$dir/cache"
fail() { echo "FAIL: $*"; [ -n "${daemon_pid:-}" ] && kill "$daemon_pid" 2>/dev/null; exit 1; }

# examples/mlp.rx takes its weights as parameters; a .rx model gets them
# from --params (an ONNX model's initializers need no file).
$py - "$dir" <<'PY' || fail "numpy could not write the inputs"
import sys, struct, numpy as np
d = sys.argv[1]
rng = np.random.default_rng(0)
def save_params(path, params):  # TVM's param dict bytes (docs/design/param-dict-format.md)
    out = [struct.pack("<QQQ", 0xF7E58D4F05049CB7, 0, len(params))]
    for name in params:
        out.append(struct.pack("<Q", len(name)) + name.encode())
    out.append(struct.pack("<Q", len(params)))
    for a in params.values():
        out.append(struct.pack("<QQiii", 0xDD5E40F096B4A13F, 0, 1, 0, a.ndim))
        out.append(struct.pack("<BBH", 2, 32, 1) + struct.pack(f"<{a.ndim}q", *a.shape))
        out.append(struct.pack("<q", a.nbytes) + a.astype("<f4").tobytes())
    open(path, "wb").write(b"".join(out))
def weights(seed):
    r = np.random.default_rng(seed)
    return dict(w0=(r.standard_normal((784, 128)) / 28).astype(np.float32),
                b0=r.standard_normal(128).astype(np.float32),
                w1=(r.standard_normal((128, 10)) / 11).astype(np.float32),
                b1=r.standard_normal(10).astype(np.float32))
x = rng.standard_normal((8, 784)).astype(np.float32)
np.save(f"{d}/x.npy", x)
for tag, seed in (("a", 1), ("b", 2)):
    p = weights(seed)
    save_params(f"{d}/weights_{tag}.params", p)
    np.save(f"{d}/expected_{tag}.npy", np.maximum(x @ p["w0"] + p["b0"], 0) @ p["w1"] + p["b1"])
save_params(f"{d}/wrong.params", dict(w0=np.zeros((784, 64), np.float32)))
open(f"{d}/corrupt.params", "wb").write(open(f"{d}/weights_a.params", "rb").read()[:-7])
PY

"$tether" compile "$root/examples/mlp.rx" --params "$dir/weights_a.params" --separate-params \
  -o "$dir/mlp.tx" 2> "$dir/compile.log" || fail "compile: $(cat "$dir/compile.log")"
grep -q "wrote $dir/mlp.params, 4 weights" "$dir/compile.log" || fail "compile: $(cat "$dir/compile.log")"
cmp -s "$dir/mlp.params" "$dir/weights_a.params" || fail "mlp.params is not the weights given"
# Without --separate-params the weights are bound into the executable.
"$tether" compile "$root/examples/mlp.rx" --params "$dir/weights_a.params" -o "$dir/bound.tx" \
  2> /dev/null || fail "compile with bound params"
[ ! -e "$dir/bound.params" ] || fail "a bound build wrote a param file"
[ "$(stat -c %s "$dir/bound.tx")" -gt 400000 ] || fail "bound.tx does not hold the weights"
[ "$(stat -c %s "$dir/mlp.tx")" -lt 200000 ] || fail "mlp.tx holds the weights"

"$tetherd" --listen 127.0.0.1:0 --port-file "$dir/port" --store-dir "$dir/store" 2> "$dir/tetherd.log" &
daemon_pid=$!
for _ in $(seq 1 200); do [ -s "$dir/port" ] && break; sleep 0.05; done
[ -s "$dir/port" ] || fail "tetherd wrote no port file: $(cat "$dir/tetherd.log")"
remote="127.0.0.1:$(cat "$dir/port")"

run() {  # tag (output dir), params file, executable
  "$tether" run "$3" --remote "$remote" --params "$2" --input x=@"$dir/x.npy" \
    --output-dir "$dir/out_$1" > "$dir/run_$1.log" 2>&1 || fail "run $1: $(cat "$dir/run_$1.log")"
}
check() {  # tag, expected
  $py -c "
import numpy as np
got, want = np.load('$dir/out_$1/out.npy'), np.load('$dir/$2')
assert np.allclose(got, want, rtol=1e-4, atol=1e-4), abs(got - want).max()
" || fail "run $1: outputs differ from numpy"
}
run first "$dir/mlp.params" "$dir/mlp.tx"
check first expected_a.npy
grep -q "module .*: uploaded" "$dir/run_first.log" || fail "first run: $(cat "$dir/run_first.log")"
grep -q "param file .*: uploaded" "$dir/run_first.log" || fail "first run: $(cat "$dir/run_first.log")"

# New weights: only the param file travels.
run weights "$dir/weights_b.params" "$dir/mlp.tx"
check weights expected_b.npy
grep -q "module .*: already on the daemon" "$dir/run_weights.log" || fail "$(cat "$dir/run_weights.log")"
grep -q "param file .*weights_b.params.*: uploaded" "$dir/run_weights.log" \
  || fail "$(cat "$dir/run_weights.log")"

# New code (another pipeline), same weights: only the module travels, kilobytes.
"$tether" compile "$root/examples/mlp.rx" --params "$dir/weights_a.params" --separate-params \
  --pipeline zero -o "$dir/mlp_zero.tx" 2> /dev/null || fail "compile --pipeline zero"
run code "$dir/mlp.params" "$dir/mlp_zero.tx"
check code expected_a.npy
grep -q "param file .*: already on the daemon" "$dir/run_code.log" || fail "$(cat "$dir/run_code.log")"
line=$(grep "module .*: uploaded" "$dir/run_code.log") || fail "$(cat "$dir/run_code.log")"
bytes=$(echo "$line" | sed -E 's/.*, ([0-9]+) bytes\).*/\1/')
[ "$bytes" -lt 200000 ] || fail "the new code uploaded $bytes bytes"

# bench and profile run the same VM.
"$tether" bench "$dir/mlp.tx" --remote "$remote" --params "$dir/mlp.params" --input x=@"$dir/x.npy" \
  --number 2 --repeat 2 --quiet > "$dir/bench.log" 2>&1 || fail "bench: $(cat "$dir/bench.log")"
"$tether" profile "$dir/mlp.tx" --remote "$remote" --params "$dir/mlp.params" --random-inputs \
  --shape x=4x784 --quiet > "$dir/profile.log" 2>&1 || fail "profile: $(cat "$dir/profile.log")"
grep -q "matmul" "$dir/profile.log" || fail "profile rows: $(cat "$dir/profile.log")"

expect_error() {  # message fragment, command...
  local want=$1; shift
  "$@" > "$dir/err.out" 2> "$dir/err.log"
  local rc=$?
  [ $rc -eq 1 ] || fail "$* exited $rc, expected 1: $(cat "$dir/err.log")"
  grep -q -- "$want" "$dir/err.log" || fail "$*: stderr lacks \"$want\": $(cat "$dir/err.log")"
}
expect_error "is not a valid param dict" "$tether" run "$dir/mlp.tx" --remote "$remote" \
  --params "$dir/corrupt.params" --input x=@"$dir/x.npy"
expect_error "has w0 as float32\[784, 64\], but parameter w0 of main in module" \
  "$tether" run "$dir/mlp.tx" --remote "$remote" --params "$dir/wrong.params" --input x=@"$dir/x.npy"
expect_error "no input for parameter w0" "$tether" run "$dir/mlp.tx" --remote "$remote" \
  --input x=@"$dir/x.npy"
# The daemon serves on after the refusals.
run after "$dir/mlp.params" "$dir/mlp.tx"
check after expected_a.npy

kill -TERM "$daemon_pid"
wait "$daemon_pid" || fail "tetherd exited $? after SIGTERM"
echo "PASS"
