#!/usr/bin/env bash
# One lease on a GPU machine (bench/gpu/NOTES.md): unpacks a bundle made by
# `deploy/bundle.sh --tests`, finds cuBLAS for the anchors, runs gpu-check's
# steps in the order given under one deadline, adds PyTorch's matmul as a
# second anchor, and leaves every log in OUT/check.tgz with the summary last
# on stdout (the part of the output a lease returns).
#
# usage: bench/gpu/lease.sh BUNDLE.tar.xz OUT DEADLINE_SECONDS [STEP[:SECONDS]...]
#   (a step's own limit, else $STEP_SECONDS, default 120; never past the
#   deadline, and a step with under 20 s left is not started)
#   STEP: a gpu-check step; torch-matmul (bench/gpu/torch_anchors.py); or
#         torch-compile (the example models under torch.compile, modes
#         default and reduce-overhead, by bench/torch/torch_bench.py: the
#         anchor beside model-bench's PyTorch-eager and Tether rows); or
#         sanitizer (compute-sanitizer's memcheck over the GPU tests and the
#         example models run on cuda:0 by the CLI's embedded daemon); or
#         corpus (bench/models/make_corpus.py's real-model corpus on cuda:0
#         against ONNX Runtime, bench/gpu/corpus.py; $CORPUS_MODELS, if set,
#         names the models to run)
set -u
bundle=$1 out=$2 deadline=$3
shift 3
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(nvidia-smi gpu-tests cli conformance cuda-bench model-bench torch-matmul)
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=/tmp/lease
rm -rf "$work" && mkdir -p "$work/check"
tar xJf "$bundle" -C "$work" || { echo "lease: cannot unpack $bundle"; exit 1; }
top=$work/tether
# cuBLAS for cuda_bench's anchor: the toolkit's or PyTorch's wheel.
cublas=$(find /usr/local/cuda*/lib64 /usr/local/cuda*/targets /opt /usr/lib -name 'libcublas.so.1[0-9]*' 2>/dev/null | head -n 1)
[ -n "$cublas" ] && export LD_LIBRARY_PATH=$(dirname "$cublas")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "lease: cuBLAS ${cublas:-not found}; $(nproc) cores; $(uname -r)"
status=0
for entry in "${steps[@]}"; do
  step=${entry%%:*}
  want=${STEP_SECONDS:-120}
  [ "$entry" = "$step" ] || want=${entry#*:}
  left=$((deadline - SECONDS))
  if [ "$left" -lt 20 ]; then
    echo "== $step: not run (deadline)" | tee -a "$work/check/summary.txt"
    continue
  fi
  limit=$(( want < left ? want : left ))
  case $step in
    sanitizer)
      start=$SECONDS
      timeout "$limit" bash -c '
        top=$1 work=$2 repo=$3 status=0
        export LD_LIBRARY_PATH=$top/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
        cs="compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 --print-limit 20"
        $cs "$top/libexec/tether_gpu_tests" --gtest_filter="-*Fault*:*Isolat*" || status=1
        models=$work/models; mkdir -p "$models"
        python3 "$repo/examples/onnx/make_models.py" "$models" > /dev/null || exit 1
        for m in mlp cnn transformer; do
          TETHER_CACHE_DIR=$work/cache TETHER_TOKEN_FILE=$work/token $cs --target-processes all \
            "$top/libexec/tether" run "$models/$m.onnx" --device cuda:0 --input "x=@$models/$m.x.npy" \
            --output-dir "$work/sanitized_$m" || status=1
        done
        exit $status' _ "$top" "$work" "$repo" > "$work/check/$step.log" 2>&1
      rc=$?
      grep -E "ERROR SUMMARY|PASSED|FAILED" "$work/check/$step.log" | tail -n 20
      printf '%-12s %-44s %5d s\n' "$step" "exit $rc" $((SECONDS - start)) >> "$work/check/summary.txt"
      ;;
    torch-matmul|torch-compile|corpus)
      start=$SECONDS
      if [ "$step" = corpus ]; then
        timeout "$limit" bash -c '
          python3 "$2/bench/models/make_corpus.py" "$1/corpus" ${CORPUS_MODELS:-} > /dev/null || exit 1
          CORPUS_PROFILES=$1/check python3 "$2/bench/gpu/corpus.py" "$3/bin/tether" "$1/corpus" \
            ${CORPUS_MODELS:-}' _ "$work" "$repo" "$top" \
          > "$work/check/$step.log" 2>&1
      elif [ "$step" = torch-matmul ]; then
        timeout "$limit" python3 "$here/torch_anchors.py" > "$work/check/$step.log" 2>&1
      else
        timeout "$limit" bash -c '
          models=$1/models; mkdir -p "$models"
          python3 "$2/examples/onnx/make_models.py" "$models" > /dev/null || exit 1
          for mode in default reduce-overhead; do
            for m in transformer cnn mlp; do
              echo "torch.compile $mode $m: $(python3 "$2/bench/torch/torch_bench.py" "$models/$m.onnx" \
                "$models/$m.x.npy" "$models/$m.expected.npy" 5 50 $mode 2>&1 | tail -n 1)"
            done
          done' _ "$work" "$repo" > "$work/check/$step.log" 2>&1
      fi
      rc=$?
      tail -n 20 "$work/check/$step.log"
      printf '%-12s %-44s %5d s\n' "$step" "exit $rc" $((SECONDS - start)) >> "$work/check/summary.txt"
      ;;
    *)
      GPU_CHECK_STEP_SECONDS=$limit "$top/bin/gpu-check" "$work/check/$step" "$step" > "$work/check/$step.out" 2>&1
      rc=$?
      tail -n 40 "$work/check/$step.out"
      tail -n 1 "$work/check/$step/summary.txt" >> "$work/check/summary.txt"
      ;;
  esac
  [ $rc = 0 ] || status=1
done
tar czf "$out/check.tgz" -C "$work" check
echo "== lease summary ($SECONDS s)"
cat "$work/check/summary.txt"
exit $status
