#!/usr/bin/env bash
# Runs every fuzz target of BUILD_DIR (a -DTETHER_FUZZ=ON build) for SECONDS
# each, starting from its seed corpus in tests/fuzz/corpus/<name> (read only:
# new inputs go to a scratch directory). A crash, a leak or a sanitizer
# report fails the run and leaves the input in $TETHER_FUZZ_ARTIFACTS (default
# BUILD_DIR/fuzz-artifacts) for a regression test.
# The mutation seed is fixed (TETHER_FUZZ_SEED, default 1) so a CI run
# replays the same inputs as the run before it; long runs want 0 (random).
#   bash tests/fuzz/run.sh build-asan 8                       # what tests/run.sh does
#   TETHER_FUZZ_SEED=0 bash tests/fuzz/run.sh build-asan 3600 # an hour each
set -euo pipefail
build=${1:?usage: tests/fuzz/run.sh BUILD_DIR SECONDS}
seconds=${2:-8}
here=$(cd "$(dirname "$0")" && pwd)
artifacts=${TETHER_FUZZ_ARTIFACTS:-$build/fuzz-artifacts}
mkdir -p "$artifacts"
failed=0
ran=0
for corpus in "$here"/corpus/*/; do
  name=$(basename "$corpus")
  target="$build/tests/fuzz/${name}_fuzz"
  if [ ! -x "$target" ]; then
    echo "fuzz: $name: no target at $target (built with -DTETHER_FUZZ=ON?)"
    failed=$((failed + 1))
    continue
  fi
  scratch=$(mktemp -d)
  log="$artifacts/$name.log"
  # Sanitizer options as the suite's: petabyte requests return null.
  if ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 \
     "$target" -seed="${TETHER_FUZZ_SEED:-1}" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=4096 -max_len=65536 \
       -artifact_prefix="$artifacts/$name-" -print_final_stats=1 "$scratch" "$corpus" > "$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
    echo "fuzz: $name: ok, $runs runs, $cov coverage points in ${seconds}s"
    ran=$((ran + 1))
  else
    echo "fuzz: $name: FAILED (input in $artifacts/$name-*); the end of $log:"
    tail -40 "$log"
    failed=$((failed + 1))
  fi
  rm -rf "$scratch"
done
echo "fuzz: $ran passed, $failed failed"
[ "$failed" -eq 0 ]
