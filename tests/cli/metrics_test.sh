#!/usr/bin/env bash
# tetherd --metrics-listen (docs/design/metrics.md): a real daemon serves
# Prometheus metrics on 127.0.0.1 (port 0, read back from its log); a run
# and an isolated session's run move the counters a scrape shows. In a
# build without prometheus-cpp (METRICS=OFF) the flag is refused clearly.
set -u
tether=$1
tetherd=$2
metrics=$3  # ON or OFF: whether this build serves metrics
dir=$4
py=/usr/bin/python3
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$dir" && mkdir -p "$dir"
export TETHER_TOKEN_FILE="$dir/user/token"
# Kernels compiled by the CLI are cached here, not in $HOME, and fresh per run.
export TETHER_CACHE_DIR="$dir/cache"
fail() { echo "FAIL: $*"; [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; exit 1; }

if [ "$metrics" != ON ]; then
  "$tetherd" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 2> "$dir/off.log"
  [ $? -ne 0 ] || fail "a tetherd without prometheus-cpp accepted --metrics-listen"
  grep -q "built without prometheus-cpp" "$dir/off.log" || fail "$(cat "$dir/off.log")"
  echo "metrics checks passed (metrics not built)"
  exit 0
fi

"$tetherd" --listen 127.0.0.1:0 --port-file "$dir/port" --store-dir "$dir/store" \
  --metrics-listen 127.0.0.1:0 2> "$dir/tetherd.log" &
pid=$!
for _ in $(seq 1 200); do [ -s "$dir/port" ] && break; sleep 0.05; done
[ -s "$dir/port" ] || fail "tetherd wrote no port file: $(cat "$dir/tetherd.log")"
port=$(cat "$dir/port")
address=$(grep -o 'metrics=127.0.0.1:[0-9]*' "$dir/tetherd.log" | head -1 | cut -d= -f2)
[ -n "$address" ] || fail "no metrics address logged: $(cat "$dir/tetherd.log")"

scrape() {  # file
  $py -c "
import sys, urllib.request
r = urllib.request.urlopen('http://$address/metrics', timeout=10)
assert r.status == 200 and r.headers['Content-Type'].startswith('text/plain'), r.headers
sys.stdout.write(r.read().decode())" > "$1" || fail "scrape of http://$address/metrics failed"
}
scrape "$dir/before.txt"

shapes=(--random-inputs --shape x=8x784 --shape w0=784x128 --shape b0=128 --shape w1=128x10 --shape b1=10)
"$tether" run "$root/examples/mlp.rx" --remote "127.0.0.1:$port" "${shapes[@]}" > "$dir/run.log" 2>&1 \
  || fail "run: $(cat "$dir/run.log")"
"$tether" bench "$root/examples/mlp.rx" --remote "127.0.0.1:$port" "${shapes[@]}" \
  --number 2 > "$dir/bench.log" 2>&1 || fail "bench: $(cat "$dir/bench.log")"
# An isolated session starts a worker (its direct-channel calls go to the
# worker itself, which the daemon does not count).
"$tether" run "$root/examples/mlp.rx" --remote "127.0.0.1:$port" --isolate "${shapes[@]}" \
  > "$dir/isolated.log" 2>&1 || fail "run --isolate: $(cat "$dir/isolated.log")"
scrape "$dir/after.txt"

$py - "$dir/before.txt" "$dir/after.txt" <<'PY' || fail "metrics did not move as expected"
import re, sys
def parse(path):
    values = {}
    for line in open(path):
        if line.startswith('#') or not line.strip():
            continue
        name, value = line.rsplit(' ', 1)
        values[name] = float(value)
    return values
before, after = parse(sys.argv[1]), parse(sys.argv[2])
def get(values, name):
    return values.get(name, 0.0)
checks = {
    'tetherd_sessions_opened_total': 3,
    'tetherd_calls_total{code="OK",kind="invoke_stateful"}': 1,
    'tetherd_calls_total{code="OK",kind="time_evaluator"}': 1,
    'tetherd_call_duration_seconds_count{kind="create_vm"}': 2,
    'tetherd_received_bytes_total{method="direct"}': 100,
    'tetherd_session_workers_started_total{result="started"}': 1,
}
for name, at_least in checks.items():
    moved = get(after, name) - get(before, name)
    assert moved >= at_least, f'{name} moved by {moved}, expected at least {at_least}'
closed = sum(v for k, v in after.items() if k.startswith('tetherd_sessions_closed_total{'))
assert closed >= 3, f'sessions closed: {closed}'
assert get(after, 'tetherd_received_bytes_total{method="UploadModule"}') > 1000, after
assert get(after, 'tetherd_sent_bytes_total{method="Handshake"}') > 0, after
assert get(after, 'tetherd_store_used_bytes') > 0 and get(after, 'tetherd_store_quota_bytes') > 0
assert get(after, 'tetherd_device_memory_total_bytes{device="cpu:0"}') > 0, after
assert 'tetherd_sessions_open' in after
# A histogram's buckets are cumulative and end in +Inf = count.
inf = get(after, 'tetherd_call_duration_seconds_bucket{kind="invoke_stateful",le="+Inf"}')
assert inf == get(after, 'tetherd_call_duration_seconds_count{kind="invoke_stateful"}') >= 1, inf
# No farm metric without a farm.
assert not any(k.startswith('tetherd_farm_') for k in after), [k for k in after if 'farm' in k]
PY
grep -q "# TYPE tetherd_call_duration_seconds histogram" "$dir/after.txt" || fail "no histogram type"
kill -TERM "$pid"
wait "$pid"
rc=$?
pid=
[ $rc -eq 0 ] || fail "tetherd exited $rc after SIGTERM"
echo "metrics checks passed"
