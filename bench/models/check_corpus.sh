#!/usr/bin/env bash
# Checks the corpus of make_corpus.py end to end: each model's output from
# `tether run` against ONNX Runtime's (bench/ort/install.sh) on the same
# input, within float32 tolerance (largest difference <= 1e-3 of the
# output's largest magnitude).
#
# usage: bench/models/check_corpus.sh DIR [NAME...]
#   DIR holds NAME.onnx and NAME.x.npy (`make_corpus.py DIR` writes them);
#   $TETHER is the CLI (default build/client/tether). Exits 1 if any model
#   fails to compile or run, or differs.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:?usage: check_corpus.sh DIR [NAME...]}"
shift
tether="${TETHER:-$here/../../build/client/tether}"
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for f in "$dir"/*.x.npy; do names+=("$(basename "$f" .x.npy)"); done
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
status=0
for m in "${names[@]}"; do
  if ! node "$here/ort_outputs.js" "$dir/$m.onnx" "$dir/$m.x.npy" "$out/$m.ort.npy"; then
    echo "$m: FAIL (ONNX Runtime)"; status=1; continue
  fi
  if ! "$tether" run "$dir/$m.onnx" --input "x=@$dir/$m.x.npy" --output-dir "$out/$m" \
      > "$out/$m.log" 2>&1; then
    echo "$m: FAIL (tether run)"; sed 's/^/  /' "$out/$m.log"; status=1; continue
  fi
  /usr/bin/python3 - "$m" "$out/$m.ort.npy" "$out/$m" <<'PY' || status=1
import glob, sys
import numpy as np
name, ref_file, tether_dir = sys.argv[1:]
ref = np.load(ref_file)
got = np.load(sorted(glob.glob(f"{tether_dir}/*.npy"))[0])
if got.shape != ref.shape:
    sys.exit(print(f"{name}: FAIL shape {got.shape}, ONNX Runtime {ref.shape}"))
scale = max(float(np.abs(ref).max()), 1e-6)
err = float(np.abs(got.astype(np.float64) - ref).max())
ok = err <= 1e-3 * scale and np.isfinite(got).all()
print(f"{name}: {'ok' if ok else 'FAIL'} max|diff| {err:.3g} (max|out| {scale:.3g},"
      f" relative {err / scale:.3g})")
sys.exit(0 if ok else 1)
PY
done
exit $status
