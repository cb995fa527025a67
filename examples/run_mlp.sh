#!/usr/bin/env bash
# The main job for a Relax text model (the README's main job is run_onnx.sh): compile examples/mlp.rx
# for this machine, start a real tetherd on a free port, run the model on it
# with .npy inputs, check the outputs against NumPy, then time and profile it
# on the daemon. Usage: examples/run_mlp.sh [BUILD_DIR] (default: build).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
tether=$build/client/tether
tetherd=$build/server/tetherd
py=/usr/bin/python3
work=$(mktemp -d)
daemon=""
cleanup() {
  [ -n "$daemon" ] && kill -TERM "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "== inputs and the NumPy reference"
"$py" - "$work" <<'PY'
import sys, numpy as np
d = sys.argv[1]
rng = np.random.default_rng(0)
x = rng.standard_normal((8, 784)).astype(np.float32)
w0 = (rng.standard_normal((784, 128)) / 28).astype(np.float32)
b0 = rng.standard_normal(128).astype(np.float32)
w1 = (rng.standard_normal((128, 10)) / 11).astype(np.float32)
b1 = rng.standard_normal(10).astype(np.float32)
for name, a in dict(x=x, w0=w0, b0=b0, w1=w1, b1=b1).items():
    np.save(f"{d}/{name}.npy", a)
np.save(f"{d}/expected.npy", np.maximum(x @ w0 + b0, 0) @ w1 + b1)
PY

echo "== tether compile examples/mlp.rx"
"$tether" compile "$root/examples/mlp.rx" -o "$work/mlp.tx"
"$tether" inspect "$work/mlp.tx" | head -n 5

echo "== tetherd on 127.0.0.1 (a free port)"
"$tetherd" --listen 127.0.0.1:0 --port-file "$work/port" 2> "$work/daemon.log" &
daemon=$!
for _ in $(seq 1 100); do [ -s "$work/port" ] && break; sleep 0.1; done
[ -s "$work/port" ] || { echo "tetherd did not start: $(cat "$work/daemon.log")" >&2; exit 1; }
remote=127.0.0.1:$(cat "$work/port")
echo "listening on $remote"

inputs=()
for name in x w0 b0 w1 b1; do inputs+=(--input "$name=@$work/$name.npy"); done

echo "== tether run --remote $remote"
"$tether" run "$work/mlp.tx" --remote "$remote" "${inputs[@]}" --output-dir "$work/out"
"$py" - "$work" <<'PY'
import sys, numpy as np
d = sys.argv[1]
got, want = np.load(f"{d}/out/out.npy"), np.load(f"{d}/expected.npy")
err = float(np.max(np.abs(got - want)))
print(f"outputs {got.shape} {got.dtype}, max |tether - numpy| = {err:.3g}")
if got.shape != want.shape or err > 1e-3:
    sys.exit("MISMATCH against the NumPy reference")
print("outputs match the NumPy reference")
PY

echo "== tether bench --remote $remote (timed on the daemon)"
"$tether" bench "$work/mlp.tx" --remote "$remote" "${inputs[@]}" --number 20 --repeat 5

echo "== tether profile --remote $remote"
"$tether" profile "$work/mlp.tx" --remote "$remote" "${inputs[@]}"

kill -TERM "$daemon" && wait "$daemon" && daemon=""
echo "== tetherd drained and exited 0"
