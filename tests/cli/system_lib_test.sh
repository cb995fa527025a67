#!/usr/bin/env bash
# Boards without dlopen (docs/design/boards.md): an executable whose kernels
# are a system library ("static") runs on a daemon with that archive linked
# in (tetherd_mlp_kernels, from cmake/TetherSystemLib.cmake) and gives the
# outputs of the same model compiled as usual; a daemon without it refuses
# the executable, saying what to link, and keeps serving. `tether inspect`
# of the archive (load_static_library) names its prefix, the daemon's
# machine and the kernels the executable calls.
# usage: system_lib_test.sh TETHER TETHERD TETHERD_WITH_KERNELS MLP_SYSTEM_LIB.tx ROOT DIR
set -u
tether=$1
tetherd=$2
tetherd_kernels=$3
mlp_tx=$4
root=$5
dir=$6
py=/usr/bin/python3
rm -rf "$dir" && mkdir -p "$dir"
export TETHER_TOKEN_FILE="$dir/user/token"
export TETHER_CACHE_DIR=$dir/cache
pids=()
fail() { echo "FAIL: $*"; kill "${pids[@]}" 2>/dev/null; exit 1; }
start() {  # daemon binary, name: sets $address
  "$1" --listen 127.0.0.1:0 --port-file "$dir/$2.port" --store-dir "$dir/$2.store" \
    > /dev/null 2> "$dir/$2.log" &
  pids+=($!)
  for _ in $(seq 1 100); do [ -s "$dir/$2.port" ] && break; sleep 0.1; done
  [ -s "$dir/$2.port" ] || fail "$2 did not start: $(cat "$dir/$2.log")"
  address=127.0.0.1:$(cat "$dir/$2.port")
}
shapes=(--shape x=8x784 --shape w0=784x128 --shape b0=128 --shape w1=128x10 --shape b1=10)

# 1. The system-library executable on the daemon with its kernels linked in.
start "$tetherd_kernels" with
with=$address
"$tether" inspect "$mlp_tx" > "$dir/inspect.txt" 2>&1 || fail "inspect: $(cat "$dir/inspect.txt")"
"$tether" run "$mlp_tx" --remote "$with" --random-inputs "${shapes[@]}" --output-dir "$dir/static" \
  > "$dir/static.txt" 2>&1 || fail "run on the daemon with the kernels: $(cat "$dir/static.txt")"
"$tether" run "$root/examples/mlp.rx" --random-inputs "${shapes[@]}" --output-dir "$dir/so" \
  > "$dir/so.txt" 2>&1 || fail "run of mlp.rx: $(cat "$dir/so.txt")"
$py "$root/tests/testing/compare_npy.py" "$dir/static/out.npy" "$dir/so/out.npy" 1e-5 \
  "system library against shared object" || fail "the system library computed other outputs"

# 2. A daemon without them refuses it before any kernel runs, and serves on.
start "$tetherd" without
without=$address
"$tether" run "$mlp_tx" --remote "$without" --random-inputs "${shapes[@]}" > "$dir/refused.txt" 2>&1 &&
  fail "a daemon without the system library ran it"
grep -q 'system library ("mlp") that is not linked into this process' "$dir/refused.txt" ||
  fail "no clear refusal: $(cat "$dir/refused.txt")"
"$tether" run "$root/examples/mlp.rx" --remote "$without" --random-inputs "${shapes[@]}" \
  > "$dir/after.txt" 2>&1 || fail "the daemon stopped serving: $(cat "$dir/after.txt")"

# 3. The archive itself, read without linking it: prefix, machine (the
# daemon's that links it), and the kernels the executable calls.
archive=${mlp_tx%.tx}.a
"$tether" inspect "$archive" > "$dir/inspect_a.txt" 2>&1 || fail "inspect of the archive: $(cat "$dir/inspect_a.txt")"
machine=$("$tether" info --remote "$with" | awk '$1 == "target" { print $2 }' | cut -d- -f1)
case $machine in arm*) machine=arm ;; esac
grep -qx "  prefix: mlp (tether_system_lib_register_mlp)" "$dir/inspect_a.txt" &&
  grep -qx "  machine: $machine" "$dir/inspect_a.txt" &&
  grep -q "^a static library is linked, not loaded" "$dir/inspect_a.txt" ||
  fail "inspect does not name prefix mlp and machine $machine: $(cat "$dir/inspect_a.txt")"
grep -qx "    fused_matmul_add_relu(tensor(float32, ndim=2), tensor(float32, ndim=2), tensor(float32, ndim=1), tensor(float32, ndim=2))" \
  "$dir/inspect_a.txt" || fail "inspect lists no fused_matmul_add_relu with its parameters: $(cat "$dir/inspect_a.txt")"
kernels=$(sed -n 's/^    \([A-Za-z0-9_]*\)(.*/\1/p' "$dir/inspect_a.txt")
[ "$(echo "$kernels" | wc -w)" -ge 2 ] || fail "inspect lists kernels: $kernels"
for k in $kernels; do
  grep -q "call  $k " "$dir/inspect.txt" || fail "the archive lists $k, which the executable never calls"
done
head -c 100 "$archive" > "$dir/cut.a"
"$tether" inspect "$dir/cut.a" > "$dir/cut.txt" 2>&1 && fail "inspect accepted a truncated archive"
grep -q "static library: truncated ar archive.*(INVALID_ARGUMENT)" "$dir/cut.txt" ||
  fail "no clear error for a truncated archive: $(cat "$dir/cut.txt")"

kill "${pids[@]}" 2>/dev/null
echo "PASS"
