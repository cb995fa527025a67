#!/usr/bin/env bash
# A corrupt, truncated, foreign or missing executable file must give a clear
# error on stderr and exit 1 from both `tether inspect` and `tether run-demo` —
# never a crash (a signal gives an exit code above 128).
set -u
tether=$1
dir=$2
rm -rf "$dir" && mkdir -p "$dir"
fail() { echo "FAIL: $*"; exit 1; }

"$tether" demo --output "$dir/good.tx" > "$dir/demo.log" 2>&1 || fail "demo failed: $(cat "$dir/demo.log")"
"$tether" inspect "$dir/good.tx" > /dev/null || fail "inspect of a good file failed"

python3 - "$dir" <<'PY'
import sys
d = sys.argv[1]
good = open(f"{d}/good.tx", "rb").read()
flipped = bytearray(good); flipped[len(good) // 2] ^= 0x5A
open(f"{d}/flipped.tx", "wb").write(flipped)
open(f"{d}/truncated.tx", "wb").write(good[: len(good) // 3])
open(f"{d}/empty.tx", "wb").write(b"")
open(f"{d}/foreign.tx", "wb").write(b"\x7fELF" + b"\0" * 200)
newer = bytearray(good); newer[8:10] = (99).to_bytes(2, "little")  # format major 99
open(f"{d}/newer.tx", "wb").write(newer)
PY

check() {  # file, expected message fragment
  for cmd in inspect run-demo; do
    "$tether" $cmd "$dir/$1" > "$dir/out.log" 2> "$dir/err.log"
    rc=$?
    [ $rc -eq 1 ] || fail "tether $cmd $1 exited $rc, expected 1; stderr: $(cat "$dir/err.log")"
    grep -q -- "$2" "$dir/err.log" || fail "tether $cmd $1: stderr lacks \"$2\": $(cat "$dir/err.log")"
    echo "ok: tether $cmd $1 -> $(head -c 160 "$dir/err.log")"
  done
}
check flipped.tx "checksum"
check truncated.tx "tether:"
check empty.tx "tether:"
check foreign.tx "not a tether executable"
check newer.tx "newer than"
check missing.tx "cannot find file"
echo "all bad-file checks passed"
