#!/usr/bin/env bash
# tether compile as a user runs it: a Relax text model compiled for this host,
# run with .npy inputs through the embedded daemon and a real tetherd, outputs
# checked by NumPy; run/bench/profile taking the .rx directly; --emit forms;
# an AArch64 cross build whose kernel library is an AArch64 ELF; bad input
# giving clear errors.
set -u
tether=$1
tetherd=$2
dir=$3
py=/usr/bin/python3
rm -rf "$dir" && mkdir -p "$dir"
# This user's default token (tetherd requires it, tether sends it), kept out of $HOME.
export TETHER_TOKEN_FILE="$dir/user/token"
# Kernels compiled by the CLI are cached here, not in $HOME, and fresh per run.
export TETHER_CACHE_DIR="$dir/cache"
fail() { echo "FAIL: $*"; [ -n "${daemon_pid:-}" ] && kill "$daemon_pid" 2>/dev/null; exit 1; }

cat > "$dir/mlp.rx" <<'RX'
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), w: R.Tensor((4, 3), "float32"),
             b: R.Tensor((3,), "float32")) -> R.Tensor(("n", 3), "float32"):
        with R.dataflow():
            lv0 = R.matmul(x, w)
            lv1 = R.add(lv0, b)
            gv = R.nn.relu(lv1)
            R.output(gv)
        return gv
RX
$py -c "
import numpy as np
rng = np.random.default_rng(7)
np.save('$dir/x.npy', rng.standard_normal((5, 4)).astype(np.float32))
np.save('$dir/x2.npy', rng.standard_normal((2, 4)).astype(np.float32))
np.save('$dir/w.npy', rng.standard_normal((4, 3)).astype(np.float32))
np.save('$dir/b.npy', rng.standard_normal((3,)).astype(np.float32))
np.save('$dir/bad.npy', np.zeros((5, 7), dtype=np.float32))
" || fail "numpy could not write the inputs"

check() {  # output dir, input file
  $py -c "
import numpy as np
x = np.load('$2'); w = np.load('$dir/w.npy'); b = np.load('$dir/b.npy')
want = np.maximum(x @ w + b, 0)
got = np.load('$1/out.npy')
assert got.shape == want.shape and got.dtype == np.float32, (got.shape, got.dtype)
assert np.allclose(got, want, rtol=1e-5, atol=1e-5), (got, want)
" || fail "outputs in $1 differ from numpy"
}

# compile for this host, inspect, run at two batch sizes from one executable.
"$tether" compile "$dir/mlp.rx" -o "$dir/mlp.tx" 2> "$dir/compile.log" \
  || fail "compile: $(cat "$dir/compile.log")"
"$tether" inspect "$dir/mlp.tx" > "$dir/inspect.log" || fail "inspect: $(cat "$dir/inspect.log")"
grep -q "signature.main" "$dir/inspect.log" || fail "no signature metadata: $(cat "$dir/inspect.log")"
inputs="--input w=@$dir/w.npy --input b=@$dir/b.npy"
"$tether" run "$dir/mlp.tx" --input x=@"$dir/x.npy" $inputs --output-dir "$dir/out" > "$dir/run.log" 2>&1 \
  || fail "run: $(cat "$dir/run.log")"
check "$dir/out" "$dir/x.npy"
"$tether" run "$dir/mlp.tx" --input x=@"$dir/x2.npy" $inputs --output-dir "$dir/out2" > "$dir/run.log" 2>&1 \
  || fail "run n=2: $(cat "$dir/run.log")"
check "$dir/out2" "$dir/x2.npy"

# run, bench and profile take the .rx directly (compiled for this host).
"$tether" run "$dir/mlp.rx" --input x=@"$dir/x.npy" $inputs --output-dir "$dir/out_rx" > "$dir/run.log" 2>&1 \
  || fail "run .rx: $(cat "$dir/run.log")"
check "$dir/out_rx" "$dir/x.npy"
"$tether" bench "$dir/mlp.rx" --input x=@"$dir/x.npy" $inputs --number 5 --repeat 2 --json > "$dir/bench.json" \
  || fail "bench .rx"
"$tether" profile "$dir/mlp.rx" --random-inputs --shape x=3x4 --shape w=4x3 --shape b=3 > "$dir/profile.txt" \
  || fail "profile .rx"

# A real tetherd on port 0.
"$tetherd" --listen 127.0.0.1:0 --port-file "$dir/port" > "$dir/daemon.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 1 100); do [ -s "$dir/port" ] && break; sleep 0.1; done
[ -s "$dir/port" ] || fail "tetherd did not report its port: $(cat "$dir/daemon.log")"
port=$(cat "$dir/port")
"$tether" run "$dir/mlp.tx" --remote 127.0.0.1:"$port" --input x=@"$dir/x.npy" $inputs \
  --output-dir "$dir/out_remote" > "$dir/run.log" 2>&1 || fail "remote run: $(cat "$dir/run.log")"
check "$dir/out_remote" "$dir/x.npy"
kill "$daemon_pid"; wait "$daemon_pid" 2>/dev/null; daemon_pid=

# --emit forms.
"$tether" compile "$dir/mlp.rx" --emit bytecode > "$dir/bytecode.txt" || fail "emit bytecode"
grep -q "vm.builtin.match_shape" "$dir/bytecode.txt" || fail "bytecode: $(cat "$dir/bytecode.txt")"
"$tether" compile "$dir/mlp.rx" --emit ir > "$dir/ir.txt" || fail "emit ir"
grep -q "def main" "$dir/ir.txt" || fail "ir: $(cat "$dir/ir.txt")"
"$tether" compile "$dir/mlp.rx" --emit asm > "$dir/asm.txt" || fail "emit asm"
[ -s "$dir/asm.txt" ] || fail "empty assembly"
# --time-passes: a row per step in order, the codegen's parts, and a total
# that is the sum of the steps (--no-cache: mlp.rx's kernels are in the cache
# by now, and would not be optimized).
"$tether" compile "$dir/mlp.rx" -o "$dir/timed.tx" --time-passes --no-cache 2> "$dir/timed.log" \
  || fail "compile --time-passes: $(cat "$dir/timed.log")"
$py - "$dir/timed.log" <<'PY' || fail "time-passes report: $(cat "$dir/timed.log")"
import re, sys
rows = []
for line in open(sys.argv[1]):
    m = re.match(r"^(\S.*?|  \S.*?)\s+(\d+\.\d{3}) s(\s.*)?$", line.rstrip("\n"))
    if m:
        rows.append((m.group(1), float(m.group(2))))
steps = [name for name, _ in rows]
want = ["parse", "NormalizeModule", "ConstantFolding", "PackConstantWeights", "FuseOps",
        "LegalizeOps", "DeadCodeElimination", "StaticPlanBlockMemory", "VM code generation",
        "kernel code generation", "  LLVM IR", "  optimization", "  machine code", "  link",
        "write", "total"]
assert steps == want, steps
total = sum(s for name, s in rows if not name.startswith(" ") and name != "total")
assert abs(total - rows[-1][1]) <= 0.002 * len(rows), (total, rows[-1])
assert dict(rows)["  optimization"] > 0 and dict(rows)["kernel code generation"] > 0, rows
PY
# The kernel cache: a model compiled once compiles again from it, every
# module (its one kernel and the library's own) and byte for byte the same
# executable; --no-cache compiles them all; a damaged entry is compiled again.
"$tether" compile "$dir/mlp.rx" -o "$dir/cached1.tx" --time-passes 2> "$dir/cached1.log" \
  || fail "cached compile: $(cat "$dir/cached1.log")"
grep -q "kernel code generation .*, 2 modules on [0-9]* threads\?, 2 from the cache$" "$dir/cached1.log" \
  || fail "second compile of mlp.rx not from the cache: $(cat "$dir/cached1.log")"
grep -q "^  optimization *0.000 s" "$dir/cached1.log" || fail "cached kernels optimized: $(cat "$dir/cached1.log")"
cmp -s "$dir/timed.tx" "$dir/cached1.tx" || fail "the executable from the cache differs"
find "$dir/cache/kernels" -name '*.o' | head -1 | xargs -I{} truncate -s -1 {}
"$tether" compile "$dir/mlp.rx" -o "$dir/cached2.tx" --time-passes 2> "$dir/cached2.log" \
  || fail "compile with a damaged cache entry: $(cat "$dir/cached2.log")"
grep -q ", 1 from the cache$" "$dir/cached2.log" \
  || fail "damaged entry not compiled again: $(cat "$dir/cached2.log")"
cmp -s "$dir/timed.tx" "$dir/cached2.tx" || fail "the executable after a damaged entry differs"
"$tether" compile "$dir/mlp.rx" -o "$dir/uncached.tx" --time-passes --no-cache 2> "$dir/uncached.log" \
  || fail "compile --no-cache: $(cat "$dir/uncached.log")"
grep -q "from the cache" "$dir/uncached.log" && fail "--no-cache used the cache: $(cat "$dir/uncached.log")"
"$tether" compile "$dir/mlp.rx" --pipeline zero -o "$dir/zero.tx" 2> /dev/null || fail "zero pipeline"
"$tether" run "$dir/zero.tx" --input x=@"$dir/x.npy" $inputs --output-dir "$dir/out_zero" > /dev/null 2>&1 \
  || fail "run zero-pipeline executable"
check "$dir/out_zero" "$dir/x.npy"

# Cross build: the embedded kernel library is an AArch64 ELF (e_machine 183).
"$tether" compile "$dir/mlp.rx" -o "$dir/mlp_a64.tx" \
  --target "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72" 2> "$dir/compile.log" \
  || fail "aarch64 compile: $(cat "$dir/compile.log")"
$py -c "
import struct
data = open('$dir/mlp_a64.tx', 'rb').read()
i = data.find(b'\x7fELF')
assert i >= 0, 'no ELF inside the executable'
assert struct.unpack_from('<H', data, i + 18)[0] == 183, 'e_machine is not EM_AARCH64'
" || fail "aarch64 kernel library"

# Bad input: a clear message and exit 1 (2 for bad usage).
expect_error() {  # exit code, message fragment, command...
  local code=$1 want=$2; shift 2
  "$@" > "$dir/err.out" 2> "$dir/err.log"
  local rc=$?
  [ $rc -eq "$code" ] || fail "$* exited $rc, expected $code: $(cat "$dir/err.log")"
  grep -q -- "$want" "$dir/err.log" || fail "$*: stderr lacks \"$want\": $(cat "$dir/err.log")"
}
expect_error 1 "parameter x (annotated R.Tensor((n, 4), \"float32\")): shape\[1\]" \
  "$tether" run "$dir/mlp.tx" --input x=@"$dir/bad.npy" $inputs
expect_error 1 "NOT_FOUND" "$tether" compile "$dir/missing.rx" -o "$dir/m.tx"
expect_error 1 "cobol" "$tether" compile "$dir/mlp.rx" -o "$dir/m.tx" --target cobol
expect_error 2 "--emit takes ir, bytecode or asm" "$tether" compile "$dir/mlp.rx" --emit wat
expect_error 2 "usage: tether compile" "$tether" compile "$dir/mlp.rx"

# CUDA without a GPU (or the toolkit): PTX for two architectures is produced
# and embedded; a CPU session refuses the executable; cuda:0 is reported absent.
"$tether" compile "$dir/mlp.rx" -o "$dir/mlp_cuda.tx" --target "cuda -arch=sm_90,sm_80" \
  2> "$dir/compile.log" || fail "cuda compile: $(cat "$dir/compile.log")"
grep -q "target cuda -arch=sm_80,sm_90" "$dir/compile.log" || fail "cuda target: $(cat "$dir/compile.log")"
$py -c "
data = open('$dir/mlp_cuda.tx', 'rb').read()
assert b'TPTX' in data, 'no ptx container'
for needle in (b'.target sm_80', b'.target sm_90', b'.visible .entry', b'tether-cuda-manifest 1'):
    assert needle in data, needle
" || fail "cuda kernel library"
"$tether" compile "$dir/mlp.rx" --target "cuda -arch=sm_90" --emit asm > "$dir/ptx.s" \
  || fail "cuda --emit asm"
grep -q "%ctaid.x" "$dir/ptx.s" || fail "cuda --emit asm is not PTX"
expect_error 1 "kernels were compiled for cuda -arch=sm_80,sm_90" \
  "$tether" run "$dir/mlp_cuda.tx" --input x=@"$dir/x.npy" $inputs
if ! "$tether" info | grep -q "^device cuda:0"; then
  expect_error 1 "cuda:0 does not exist" \
    "$tether" run "$dir/mlp_cuda.tx" --device cuda:0 --input x=@"$dir/x.npy" $inputs
  expect_error 1 "the daemon has no usable cuda:0" \
    "$tether" run "$dir/mlp.rx" --device cuda:0 --input x=@"$dir/x.npy" $inputs
fi
expect_error 1 "bad cuda architecture" "$tether" compile "$dir/mlp.rx" -o "$dir/m.tx" --target "cuda -arch=sm_1"
printf 'def main(:\n' > "$dir/broken.rx"
expect_error 1 "broken.rx:1:" "$tether" compile "$dir/broken.rx" -o "$dir/m.tx"
echo "PASS"
