#!/usr/bin/env bash
# One kernel of a model as a new user times it: `tether profile --top N`
# names the slowest kernels with their argument shapes, and `tether bench
# MODEL --kernel NAME` times that kernel alone on the daemon with the shapes
# the profile recorded — with the embedded daemon and through a real tetherd.
set -u
tether=$1
tetherd=$2
dir=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
model="$root/examples/mlp.rx"
# Its weights are parameters too: random, of their declared shapes.
shapes=(--random-inputs --shape x=6x784 --shape w0=784x128 --shape b0=128 --shape w1=128x10 --shape b1=10)
rm -rf "$dir" && mkdir -p "$dir"
export TETHER_TOKEN_FILE="$dir/user/token"
# Kernels compiled by the CLI are cached here, not in $HOME, and fresh per run.
export TETHER_CACHE_DIR="$dir/cache"
fail() { echo "FAIL: $*"; [ -n "${daemon_pid:-}" ] && kill "$daemon_pid" 2>/dev/null; exit 1; }

check() {  # remote flags...
  "$tether" profile "$model" "${shapes[@]}" --top 2 "$@" > "$dir/top.log" 2>&1 \
    || fail "profile --top: $(cat "$dir/top.log")"
  grep -q "^Rank  Kernel" "$dir/top.log" || fail "profile --top header: $(cat "$dir/top.log")"
  [ "$(grep -c '^[12]  ' "$dir/top.log")" -eq 2 ] || fail "profile --top 2 rows: $(cat "$dir/top.log")"
  # The slowest kernel is a matmul of x (6 rows, as --shape said).
  local kernel
  kernel=$(awk '$1 == "1" {print $2}' "$dir/top.log")
  [ -n "$kernel" ] || fail "no slowest kernel in: $(cat "$dir/top.log")"
  grep "^1 " "$dir/top.log" | grep -q "float32\[6, 784\]" || fail "top kernel shapes: $(cat "$dir/top.log")"
  grep -q "tether bench .* --kernel $kernel" "$dir/top.log" || fail "profile --top hint"

  "$tether" bench "$model" "${shapes[@]}" --kernel "$kernel" --number 5 --repeat 3 \
    "$@" > "$dir/kbench.log" 2>&1 || fail "bench --kernel: $(cat "$dir/kbench.log")"
  grep -q "^kernel $kernel (float32\[6, 784\].*) of main on cpu:0, 3 repeats of 5 calls (16 calls in all" \
    "$dir/kbench.log" || fail "bench --kernel summary: $(cat "$dir/kbench.log")"
  grep -q "Execution time summary" "$dir/kbench.log" || fail "bench --kernel table"
  grep -q "^timing exclusive" "$dir/kbench.log" || fail "bench --kernel timing line"

  # An unknown kernel: a clear error naming the model's kernels, exit 1.
  "$tether" bench "$model" "${shapes[@]}" --kernel no_such_kernel "$@" \
    > /dev/null 2> "$dir/err.log"
  [ $? -eq 1 ] || fail "bench --kernel no_such_kernel did not exit 1"
  grep -q "has no kernel named no_such_kernel (its kernels: .*$kernel" "$dir/err.log" \
    || fail "unknown kernel message: $(cat "$dir/err.log")"
}

check  # the embedded daemon

"$tetherd" --listen 127.0.0.1:0 --port-file "$dir/port" --store-dir "$dir/store" 2> "$dir/tetherd.log" &
daemon_pid=$!
for _ in $(seq 1 200); do [ -s "$dir/port" ] && break; sleep 0.05; done
[ -s "$dir/port" ] || fail "tetherd wrote no port file: $(cat "$dir/tetherd.log")"
check --remote "127.0.0.1:$(cat "$dir/port")"
# The daemon kept serving through the refused call.
"$tether" info --remote "127.0.0.1:$(cat "$dir/port")" > /dev/null || fail "daemon stopped serving"
kill -TERM "$daemon_pid"
wait "$daemon_pid" || fail "tetherd exited non-zero"
daemon_pid=
echo "PASS"
