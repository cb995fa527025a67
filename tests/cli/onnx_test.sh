#!/usr/bin/env bash
# ONNX models through the CLI as a user runs them: the example models run from
# their .onnx files on a real tetherd (--remote) and match NumPy; the compile
# cache is used on the second run; `tether compile model.onnx`; --shape fixes a
# dynamic batch; --random-inputs takes the model's own shapes; --threads;
# and bad models (truncated, not ONNX, an unknown operator, a wrong input name
# or shape) give a clear error and a non-zero exit.
set -u
tether=$1
tetherd=$2
root=$3
dir=$4
py=/usr/bin/python3
rm -rf "$dir" && mkdir -p "$dir"
# This user's default token (tetherd requires it, tether sends it), kept out of $HOME.
export TETHER_TOKEN_FILE="$dir/user/token"
export TETHER_CACHE_DIR=$dir/cache
daemon_pid=""
fail() { echo "FAIL: $*"; [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null; exit 1; }

$py "$root/examples/onnx/make_models.py" "$dir" > /dev/null || fail "make_models.py failed"

"$tetherd" --listen 127.0.0.1:0 --port-file "$dir/port" 2> "$dir/daemon.log" &
daemon_pid=$!
for _ in $(seq 1 100); do [ -s "$dir/port" ] && break; sleep 0.1; done
[ -s "$dir/port" ] || fail "tetherd did not start: $(cat "$dir/daemon.log")"
remote=127.0.0.1:$(cat "$dir/port")

check() {  # model, output dir
  $py "$root/tests/testing/compare_npy.py" "$2/out.npy" "$dir/$1.expected.npy" 1e-3 "$1" > /dev/null ||
    fail "$1: outputs differ from the NumPy reference"
}

# 1. Each example through a real tetherd, outputs against NumPy.
for m in mlp cnn transformer; do
  "$tether" run "$dir/$m.onnx" --remote "$remote" --input "x=@$dir/$m.x.npy" \
    --output-dir "$dir/out_$m" > "$dir/run_$m.txt" 2>&1 || fail "$m: run failed: $(cat "$dir/run_$m.txt")"
  check "$m" "$dir/out_$m"
done
n=$(ls "$dir/cache/compiled" | grep -c '\.tx$')
[ "$n" = 3 ] || fail "expected 3 cached builds, found $n"

# 2. The second run of a model uses the cache: no new entry, same answer.
"$tether" run "$dir/mlp.onnx" --remote "$remote" --input "x=@$dir/mlp.x.npy" \
  --output-dir "$dir/out_mlp2" --threads 1 > /dev/null 2>&1 || fail "cached run failed"
check mlp "$dir/out_mlp2"
[ "$(ls "$dir/cache/compiled" | grep -c '\.tx$')" = 3 ] || fail "a cached model was compiled again"
# A damaged cache entry is rebuilt, not trusted.
for f in "$dir"/cache/compiled/*.tx; do printf 'junk' > "$f"; done
"$tether" run "$dir/mlp.onnx" --input "x=@$dir/mlp.x.npy" --output-dir "$dir/out_mlp3" \
  > /dev/null 2>&1 || fail "run with a damaged cache entry failed"
check mlp "$dir/out_mlp3"

# 2b. Shapes from the inputs: a model whose image size is free compiles
# without it into one executable that runs at any size (its symbolic dims
# are kernel parameters), checked at two sizes against NumPy; run on the
# model itself with no --shape binds the free dims from the inputs given, at
# two sizes, each its own cache entry; --random-inputs names the free dims.
$py "$root/tests/cli/make_dynamic_model.py" "$dir" || fail "make_dynamic_model.py failed"
"$tether" compile "$dir/dyn_conv.onnx" -o "$dir/dyn.tx" > "$dir/dyn_compile.txt" 2>&1 ||
  fail "a free image size did not compile without its shape: $(cat "$dir/dyn_compile.txt")"
for i in 0 1; do
  "$tether" run "$dir/dyn.tx" --remote "$remote" --input "x=@$dir/dyn_x$i.npy" \
    --output-dir "$dir/out_dyntx$i" > "$dir/run_dyntx$i.txt" 2>&1 ||
    fail "dyn.tx $i: $(cat "$dir/run_dyntx$i.txt")"
  $py "$root/tests/testing/compare_npy.py" "$dir/out_dyntx$i/out.npy" "$dir/dyn_out$i.npy" 1e-3 \
    "dyn.tx at input $i" > /dev/null || fail "dyn.tx $i: outputs differ from the NumPy reference"
done
before=$(ls "$dir/cache/compiled" | grep -c '\.tx$')
for i in 0 1; do
  "$tether" run "$dir/dyn_conv.onnx" --remote "$remote" --input "x=@$dir/dyn_x$i.npy" \
    --output-dir "$dir/out_dyn$i" > "$dir/run_dyn$i.txt" 2>&1 || fail "dyn $i: $(cat "$dir/run_dyn$i.txt")"
  $py "$root/tests/testing/compare_npy.py" "$dir/out_dyn$i/out.npy" "$dir/dyn_out$i.npy" 1e-3 \
    "dyn_conv at input $i" > /dev/null || fail "dyn $i: outputs differ from the NumPy reference"
done
[ "$(ls "$dir/cache/compiled" | grep -c '\.tx$')" = $((before + 2)) ] ||
  fail "two input sizes did not make two cache entries"
"$tether" run "$dir/dyn_conv.onnx" --remote "$remote" --random-inputs > "$dir/dyn_random.txt" 2>&1 &&
  fail "--random-inputs ran with free dims"
grep -q "dims (N, 3, H, W) are not all fixed: give --shape x=<N>x3x<H>x<W>" "$dir/dyn_random.txt" ||
  fail "--random-inputs does not name the free dims: $(cat "$dir/dyn_random.txt")"

# 3. tether compile model.onnx, then run the executable; --shape fixes the batch.
"$tether" compile "$dir/mlp.onnx" -o "$dir/mlp.tx" > /dev/null 2>&1 || fail "compile mlp.onnx failed"
"$tether" run "$dir/mlp.tx" --input "x=@$dir/mlp.x.npy" --output-dir "$dir/out_tx" > /dev/null 2>&1 ||
  fail "run of the compiled mlp.tx failed"
check mlp "$dir/out_tx"
"$tether" compile "$dir/mlp.onnx" --shape x=8x784 --emit ir > "$dir/fixed.txt" 2>&1 ||
  fail "compile --shape failed: $(cat "$dir/fixed.txt")"
grep -q '(8, 784)' "$dir/fixed.txt" || fail "--shape x=8x784 did not fix the batch"
"$tether" compile "$dir/mlp.onnx" --shape x=8x785 -o "$dir/bad.tx" > "$dir/badshape.txt" 2>&1 &&
  fail "a --shape that contradicts the model was accepted"
grep -q "dim 1 = 785.*784" "$dir/badshape.txt" || fail "no clear message for a contradicting --shape"

# 4. --random-inputs takes a static model's own input shape.
"$tether" run "$dir/cnn.onnx" --remote "$remote" --random-inputs > "$dir/random.txt" 2>&1 ||
  fail "--random-inputs on cnn.onnx failed: $(cat "$dir/random.txt")"
grep -q '\[1, 10\]' "$dir/random.txt" || fail "--random-inputs run printed no [1, 10] output"
"$tether" run "$dir/mlp.onnx" --random-inputs > "$dir/random_dyn.txt" 2>&1 &&
  fail "--random-inputs on a dynamic batch without --shape was accepted"
grep -q -- "--shape x=" "$dir/random_dyn.txt" || fail "no hint to give --shape: $(cat "$dir/random_dyn.txt")"

# 5. Bad models and inputs: a clear error, non-zero exit, the daemon keeps serving.
head -c 100 "$dir/cnn.onnx" > "$dir/truncated.onnx"
printf 'this is not a model' > "$dir/text.onnx"
$py - "$dir" <<'PY' || fail "could not write unknown_op.onnx"
import sys, onnx
from onnx import helper, TensorProto
g = helper.make_graph([helper.make_node("FancyNewOp", ["x"], ["y"], name="fancy_1")], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
          sys.argv[1] + "/unknown_op.onnx")
PY
expect_error() {  # pattern, args...
  local pattern=$1
  shift
  "$tether" "$@" > "$dir/err.txt" 2>&1 && fail "accepted: $*"
  grep -qiE "$pattern" "$dir/err.txt" || fail "for '$*' expected /$pattern/, got: $(cat "$dir/err.txt")"
}
expect_error "truncated.onnx: .*not a serialized ModelProto|not an ONNX model" run "$dir/truncated.onnx" \
  --remote "$remote" --random-inputs
expect_error "text.onnx: .*not a serialized ModelProto|not an ONNX model" run "$dir/text.onnx" \
  --remote "$remote" --random-inputs
expect_error "FancyNewOp.*opset 13.*fancy_1|fancy_1.*FancyNewOp" run "$dir/unknown_op.onnx" \
  --remote "$remote" --random-inputs
expect_error "no parameter named nope" run "$dir/mlp.onnx" --remote "$remote" --input "nope=@$dir/mlp.x.npy"
$py -c "import numpy as np; np.save('$dir/wrong.npy', np.zeros((8, 5), np.float32))"
expect_error "784" run "$dir/mlp.onnx" --remote "$remote" --input "x=@$dir/wrong.npy"
expect_error "cannot find file.*missing.onnx" run "$dir/missing.onnx" --remote "$remote"
"$tether" run "$dir/cnn.onnx" --remote "$remote" --input "x=@$dir/cnn.x.npy" --output-dir "$dir/out_after" \
  > /dev/null 2>&1 || fail "the daemon stopped serving after the bad requests"
check cnn "$dir/out_after"

kill -TERM "$daemon_pid" && wait "$daemon_pid" || fail "tetherd did not exit 0 on SIGTERM"
echo "PASS"
