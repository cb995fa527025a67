#!/usr/bin/env bash
# `tether demo` as a user runs it: exits 0, prints the outputs of main and a
# profile report, and writes the executable it built.
set -u
tether=$1
dir=$2
rm -rf "$dir" && mkdir -p "$dir"
fail() { echo "FAIL: $*"; exit 1; }
"$tether" demo --output "$dir/demo.tx" > "$dir/demo.log" 2>&1 || fail "tether demo exited $?: $(cat "$dir/demo.log")"
for want in "outputs of main" "Execution time summary" "Duration (us)" "Configuration"; do
  grep -qF "$want" "$dir/demo.log" || fail "no \"$want\" in: $(cat "$dir/demo.log")"
done
[ -s "$dir/demo.tx" ] || fail "no executable written at $dir/demo.tx"
"$tether" inspect "$dir/demo.tx" > "$dir/inspect.log" 2>&1 || fail "inspect of the demo executable: $(cat "$dir/inspect.log")"
echo "demo: all checks passed"
