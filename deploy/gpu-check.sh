#!/usr/bin/env bash
# Checks a Tether build on a GPU machine that has none of our toolchain, from
# a bundle made by `deploy/bundle.sh --tests` (this script is its
# bin/gpu-check): the GPU test suite, the CLI flow against a real tetherd
# (tests/cli/cuda_test.sh: info, run on cuda:0 against NumPy and the CPU,
# bench, profile), the GPU benchmarks with their anchors, and the ONNX node
# cases on cuda:0. Each step's whole output goes to OUTDIR/<step>.log, its
# tail to stdout. Needs python3 with numpy and onnx for the CLI step and the
# model benchmark ($PYTHON, default python3).
#
# Steps run in the order given, the issue's "done means" first; a step that
# runs past GPU_CHECK_STEP_SECONDS (default 240) is stopped (a hung kernel
# costs that step, not the rest) and counts as failed. Ends with a table of
# every step's exit status and seconds.
#
# usage: gpu-check OUTDIR [STEP...]
#   steps: nvidia-smi cli gpu-tests cuda-bench model-bench conformance
#          conformance-remote (the node cases through a tetherd)
#   (default: all but conformance-remote, in that order)
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { echo "usage: gpu-check OUTDIR [STEP...]" >&2; exit 2; }
out=$1
shift
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(nvidia-smi cli gpu-tests cuda-bench model-bench conformance)
mkdir -p "$out"
export PYTHON=${PYTHON:-python3}
limit=${GPU_CHECK_STEP_SECONDS:-240}

# The test programs find the examples in the source tree they were built
# from: point that path at the copy in the bundle when it is not there.
src=$(cat "$here/share/source-dir")
if [ ! -e "$src/examples" ]; then
  mkdir -p "$(dirname "$src")" && ln -sfn "$here/share" "$src"
fi

status=0
summary=()
run_step() {
  local name=$1
  shift
  echo "== $name: $*"
  local start=$SECONDS
  # timeout signals the step's whole process group: a stopped CLI step's
  # tetherd goes with it.
  timeout --kill-after=10 "$limit" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  local took=$((SECONDS - start))
  tail -n 60 "$out/$name.log"
  local what="exit $rc"
  # 124/137: stopped at the limit; 77: the step found no GPU and skipped (as
  # CTest counts it).
  case $rc in
    124|137) what="stopped after ${limit} s (GPU_CHECK_STEP_SECONDS)" ;;
    77) what="skipped (exit 77)" ;;
  esac
  echo "== $name: $what"
  summary+=("$(printf '%-12s %-44s %5d s' "$name" "$what" "$took")")
  [ $rc = 0 ] || [ $rc = 77 ] || status=1
}

for step in "${steps[@]}"; do
  case $step in
    nvidia-smi) run_step nvidia-smi nvidia-smi ;;
    gpu-tests) run_step gpu-tests "$here/bin/tether_gpu_tests" ;;
    cli)
      run_step cli bash "$here/share/tests/cli/cuda_test.sh" "$here/bin/tether" \
        "$here/bin/tetherd" "$(mktemp -d)/cli"
      ;;
    cuda-bench) run_step cuda-bench "$here/bin/cuda_bench" --benchmark_repetitions=3 ;;
    model-bench) run_step model-bench "$here/bin/model_bench" '--benchmark_filter=/cuda/' ;;
    conformance)
      # The cases that pass on the CPU (tests/conformance/expected/node.txt)
      # must pass on cuda:0 too; a regression fails the step, naming it.
      expected=$here/share/tests/conformance/expected/node.txt
      run_step conformance "$here/bin/tether_conformance" --suite "$here/share/node" \
        --cases "$expected" --expected "$expected" --device cuda:0 --jobs "$(nproc)" \
        --timeout 60 --table failures --progress
      ;;
    conformance-remote)
      # The same cases through a tetherd started here (the daemon holds the
      # one CUDA context; each case is a client session).
      expected=$here/share/tests/conformance/expected/node.txt
      run_step conformance-remote "$here/bin/tether_conformance" --suite "$here/share/node" \
        --cases "$expected" --expected "$expected" --device cuda:0 --jobs "$(nproc)" \
        --timeout 60 --table failures --progress --remote --tetherd "$here/bin/tetherd"
      ;;
    *) echo "gpu-check: unknown step $step" >&2; exit 2 ;;
  esac
done
echo "== summary (logs in $out)"
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
exit $status
