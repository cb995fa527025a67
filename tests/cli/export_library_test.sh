#!/usr/bin/env bash
# TVM's deployment recipe from the CLI: `tether compile MODEL -o m.so` writes
# the executable as a shared library (export_library). readelf sees its
# kernels and the section carrying the executable; run and inspect take it
# locally and through a real tetherd on 127.0.0.1, with the outputs of the
# .tx build; one kernel of it is timed on the daemon; a stripped copy still
# runs; with --exec-mode compiled the Relax functions are native code in it
# too; a library built for another machine is refused with both targets
# named, and the daemon serves on.
# usage: export_library_test.sh TETHER TETHERD DIR
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
same() {
  $py "$root/tests/testing/compare_npy.py" "$1/out.npy" "$dir/tx/out.npy" 0 "$2" || fail "$2"
}

$py "$root/tests/cli/make_tir_inputs.py" "$dir" || fail "numpy could not write the inputs"
inputs="--input x=@$dir/x.npy --input w=@$dir/w.npy --input b=@$dir/b.npy"

# 1. The library, and what a tool that reads ELF sees in it.
"$tether" compile "$root/examples/tir_matmul.rx" -o "$dir/m.so" 2> "$dir/compile.log" \
  || fail "compile -o m.so: $(cat "$dir/compile.log")"
grep -q "wrote $dir/m.so (a shared library carrying the executable" "$dir/compile.log" \
  || fail "compile did not say what it wrote: $(cat "$dir/compile.log")"
"$tether" compile "$root/examples/tir_matmul.rx" -o "$dir/m.tx" 2> /dev/null || fail "compile -o m.tx"
readelf -h "$dir/m.so" | grep -q "DYN (Shared object file)" || fail "m.so is not a shared object"
readelf -S -W "$dir/m.so" | grep -q "\.tether_executable" || fail "no .tether_executable section"
readelf --dyn-syms -W "$dir/m.so" | grep -q " matmul$" || fail "kernel matmul is not exported"

# 2. Run locally and on a daemon: the outputs of the executable.
"$tether" run "$dir/m.tx" $inputs --output-dir "$dir/tx" > "$dir/run.log" 2>&1 \
  || fail "run m.tx: $(cat "$dir/run.log")"
"$tether" run "$dir/m.so" $inputs --output-dir "$dir/local" > "$dir/run.log" 2>&1 \
  || fail "run m.so: $(cat "$dir/run.log")"
same "$dir/local" "m.so run locally"
"$tether" inspect "$dir/m.so" > "$dir/inspect.log" 2>&1 || fail "inspect: $(cat "$dir/inspect.log")"
grep -q "kernel libraries (#1)" "$dir/inspect.log" || fail "inspect: $(cat "$dir/inspect.log")"

"$tetherd" --listen 127.0.0.1:0 --port-file "$dir/port" --store-dir "$dir/store" 2> "$dir/daemon.log" &
daemon_pid=$!
for _ in $(seq 1 100); do [ -s "$dir/port" ] && break; sleep 0.1; done
[ -s "$dir/port" ] || fail "tetherd did not start: $(cat "$dir/daemon.log")"
remote=127.0.0.1:$(cat "$dir/port")
"$tether" run "$dir/m.so" --remote "$remote" $inputs --output-dir "$dir/remote" > "$dir/run.log" 2>&1 \
  || fail "run m.so on tetherd: $(cat "$dir/run.log")"
same "$dir/remote" "m.so run on tetherd"

# 3. One kernel of the library timed on the daemon.
"$tether" bench "$dir/m.so" --remote "$remote" $inputs --kernel matmul --number 3 --repeat 2 \
  > "$dir/bench.log" 2>&1 || fail "bench --kernel matmul: $(cat "$dir/bench.log")"
grep -q "matmul" "$dir/bench.log" || fail "bench did not name the kernel: $(cat "$dir/bench.log")"

# 3b. The Relax functions compiled to native code too (--exec-mode compiled):
# no bytecode in it, the same outputs on the daemon.
"$tether" compile "$root/examples/tir_matmul.rx" --exec-mode compiled -o "$dir/mc.so" 2> /dev/null \
  || fail "compile --exec-mode compiled"
"$tether" inspect "$dir/mc.so" > "$dir/inspect_compiled.log" 2>&1 || fail "inspect mc.so"
grep -q "@main num_inputs=3 vm_tir_func" "$dir/inspect_compiled.log" \
  || fail "main is not compiled: $(cat "$dir/inspect_compiled.log")"
grep -q "bytecode: 0 instructions" "$dir/inspect_compiled.log" || fail "bytecode left in mc.so"
"$tether" run "$dir/mc.so" --remote "$remote" $inputs --output-dir "$dir/compiled" > "$dir/run.log" 2>&1 \
  || fail "run of the compiled library: $(cat "$dir/run.log")"
same "$dir/compiled" "the compiled library on tetherd"

# 4. strip rewrites the file; it still runs, as the whole file is the kernels.
cp "$dir/m.so" "$dir/stripped.so" && strip "$dir/stripped.so" || fail "strip"
"$tether" run "$dir/stripped.so" $inputs --output-dir "$dir/stripped" > "$dir/run.log" 2>&1 \
  || fail "run of the stripped library: $(cat "$dir/run.log")"
same "$dir/stripped" "the stripped library"

# 5. Built for another machine: refused here with both targets named, and
# on the daemon, which serves on.
case "$(uname -m)" in
  x86_64) other="aarch64-linux-gnu" other_cpu="cortex-a72" ;;
  *) other="x86_64-linux-gnu" other_cpu="znver4" ;;
esac
"$tether" compile "$root/examples/tir_matmul.rx" --target "llvm -mtriple=$other -mcpu=$other_cpu" \
  -o "$dir/board.so" 2> /dev/null || fail "compile for $other"
for where in "" "--remote $remote"; do
  if "$tether" run "$dir/board.so" $where $inputs > "$dir/refused.log" 2>&1; then
    fail "a library for $other ran here ($where)"
  fi
  grep -q "built for $other, $other_cpu cannot run on this $(uname -m)" "$dir/refused.log" \
    || fail "no clear refusal ($where): $(cat "$dir/refused.log")"
done
"$tether" run "$dir/m.so" --remote "$remote" $inputs --output-dir "$dir/after" > "$dir/run.log" 2>&1 \
  || fail "the daemon stopped serving: $(cat "$dir/run.log")"

kill -TERM "$daemon_pid" && wait "$daemon_pid" || fail "tetherd did not drain"
daemon_pid=""
echo "PASS"
