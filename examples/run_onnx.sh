#!/usr/bin/env bash
# The main job, end to end as a user would run it: build three example ONNX
# models (an MLP, a small CNN, a transformer encoder block) with NumPy
# reference outputs, start a real tetherd on a free port, run each model on it
# straight from its .onnx file (compiled on the fly, through the compile
# cache), check the outputs against NumPy, then time and profile the
# transformer block on the daemon.
# Usage: examples/run_onnx.sh [BUILD_DIR] (default: build).
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
# A private compile cache, so every run of this script compiles once.
export TETHER_CACHE_DIR=$work/cache

echo "== the example models and their NumPy reference (examples/onnx/make_models.py)"
"$py" "$root/examples/onnx/make_models.py" "$work"

echo "== tetherd on 127.0.0.1 (a free port)"
"$tetherd" --listen 127.0.0.1:0 --port-file "$work/port" 2> "$work/daemon.log" &
daemon=$!
for _ in $(seq 1 100); do [ -s "$work/port" ] && break; sleep 0.1; done
[ -s "$work/port" ] || { echo "tetherd did not start: $(cat "$work/daemon.log")" >&2; exit 1; }
remote=127.0.0.1:$(cat "$work/port")
echo "listening on $remote"

for model in mlp cnn transformer; do
  echo "== tether run $model.onnx --remote $remote"
  "$tether" run "$work/$model.onnx" --remote "$remote" --input "x=@$work/$model.x.npy" \
    --output-dir "$work/out_$model"
  "$py" - "$work" "$model" <<'PY'
import sys, numpy as np
d, model = sys.argv[1], sys.argv[2]
got, want = np.load(f"{d}/out_{model}/out.npy"), np.load(f"{d}/{model}.expected.npy")
err = float(np.max(np.abs(got - want)))
print(f"{model}: outputs {got.shape} {got.dtype}, max |tether - numpy| = {err:.3g}")
if got.shape != want.shape or err > 1e-3 * max(1.0, float(np.max(np.abs(want)))):
    sys.exit(f"{model}: MISMATCH against the NumPy reference")
print(f"{model}: outputs match the NumPy reference")
PY
done

echo "== tether bench transformer.onnx --remote $remote (timed on the daemon)"
"$tether" bench "$work/transformer.onnx" --remote "$remote" --input "x=@$work/transformer.x.npy" \
  --number 20 --repeat 5

echo "== tether profile transformer.onnx --remote $remote"
"$tether" profile "$work/transformer.onnx" --remote "$remote" --input "x=@$work/transformer.x.npy"

kill -TERM "$daemon" && wait "$daemon" && daemon=""
echo "== tetherd drained and exited 0"
