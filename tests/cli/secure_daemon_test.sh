#!/usr/bin/env bash
# tetherd's security flags as a user meets them: the loopback rule refuses a
# public address without TLS or a token, and a token-protected daemon serves
# `tether info --token-file` while refusing a client without the token.
set -u
tether=$1
tetherd=$2
dir=$3
rm -rf "$dir" && mkdir -p "$dir"
daemon_pid=""
fail() { echo "FAIL: $*"; [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null; exit 1; }

# A public address with neither TLS nor a token: exit 2 with the rule.
"$tetherd" --listen 0.0.0.0:0 > "$dir/refuse.log" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "0.0.0.0 without TLS or token exited $rc: $(cat "$dir/refuse.log")"
grep -q "refusing to serve 0.0.0.0:0 without TLS or a token; pass --tls-cert/--tls-key, --auth-token-file, or --insecure" \
  "$dir/refuse.log" || fail "refusal message: $(cat "$dir/refuse.log")"

# Half a TLS pair and an empty token file are usage errors.
"$tetherd" --listen 127.0.0.1:0 --tls-cert "$dir/none.pem" > "$dir/half.log" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "--tls-cert without --tls-key exited $rc: $(cat "$dir/half.log")"
: > "$dir/empty-token"
"$tetherd" --listen 127.0.0.1:0 --auth-token-file "$dir/empty-token" > "$dir/empty.log" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "an empty token file exited $rc: $(cat "$dir/empty.log")"

# A token-protected daemon on loopback.
printf '  tok-%s-secret\n' "$$" > "$dir/token"
"$tetherd" --listen 127.0.0.1:0 --port-file "$dir/port" --auth-token-file "$dir/token" \
  --store-dir "$dir/store" 2> "$dir/daemon.log" &
daemon_pid=$!
for _ in $(seq 1 200); do [ -s "$dir/port" ] && break; sleep 0.05; done
[ -s "$dir/port" ] || fail "tetherd wrote no port: $(cat "$dir/daemon.log")"
port=$(cat "$dir/port")

"$tether" info --remote "127.0.0.1:$port" --token-file "$dir/token" > "$dir/info.log" 2>&1 \
  || fail "info with the token: $(cat "$dir/info.log")"
grep -q "protocol" "$dir/info.log" || fail "info output: $(cat "$dir/info.log")"

"$tether" info --remote "127.0.0.1:$port" > "$dir/noauth.log" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "info without the token exited $rc: $(cat "$dir/noauth.log")"
grep -q "UNAUTHENTICATED" "$dir/noauth.log" || fail "no UNAUTHENTICATED: $(cat "$dir/noauth.log")"

kill -TERM "$daemon_pid"
wait "$daemon_pid" || fail "tetherd did not exit cleanly"
daemon_pid=""
echo "PASS"
