#!/usr/bin/env bash
# Installs the ONNX Runtime anchor of bench/model_bench from the npm registry
# (benchmark tooling only: the product and its tests never need Node).
# The package's install script is not run: its bin/ already holds the CPU
# build of libonnxruntime for linux/x64.
set -euo pipefail
cd "$(dirname "$0")"
command -v npm > /dev/null || { echo "install.sh: npm is needed (apt-get install npm)" >&2; exit 1; }
npm install --ignore-scripts --no-audit --no-fund --no-save onnxruntime-node@1
ls node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime.so.1 > /dev/null
echo "install.sh: onnxruntime-node $(node -p "require('./node_modules/onnxruntime-node/package.json').version") installed"
