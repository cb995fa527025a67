#!/usr/bin/env bash
# tetherd's access rules as a user meets them (docs/design/security.md):
# a network address needs client authentication (TLS alone is refused), token
# files must be private, a loopback daemon without flags requires its user's
# default token (which `tether` of the same user sends, and another user does
# not have), --insecure opts out, and a store directory others may write is
# refused.
set -u
tether=$1
tetherd=$2
dir=$3
rm -rf "$dir" && mkdir -p "$dir"
daemon_pid=""
fail() { echo "FAIL: $*"; [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null; exit 1; }
# This user's default token lives here for the whole test, never in $HOME.
export TETHER_TOKEN_FILE="$dir/user/token"

# expect_refusal RC PATTERN ARGS...: tetherd exits RC and says PATTERN.
expect_refusal() {
  local want=$1 pattern=$2
  shift 2
  "$tetherd" "$@" > "$dir/refuse.log" 2>&1
  local rc=$?
  [ $rc -eq "$want" ] || fail "tetherd $* exited $rc, expected $want: $(cat "$dir/refuse.log")"
  grep -qF -- "$pattern" "$dir/refuse.log" || fail "tetherd $*: no \"$pattern\" in: $(cat "$dir/refuse.log")"
}

# start_daemon ARGS...: a daemon on 127.0.0.1:0; sets port.
start_daemon() {
  rm -f "$dir/port"
  "$tetherd" --listen 127.0.0.1:0 --port-file "$dir/port" "$@" 2> "$dir/daemon.log" &
  daemon_pid=$!
  for _ in $(seq 1 200); do [ -s "$dir/port" ] && break; sleep 0.05; done
  [ -s "$dir/port" ] || fail "tetherd $* wrote no port: $(cat "$dir/daemon.log")"
  port=$(cat "$dir/port")
}
stop_daemon() {
  kill -TERM "$daemon_pid"
  wait "$daemon_pid" || fail "tetherd did not exit cleanly: $(cat "$dir/daemon.log")"
  daemon_pid=""
}

# A self-signed server certificate (its own CA).
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$dir/srv.key" -out "$dir/srv.pem" -days 1 \
  -subj "/CN=localhost" -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" > "$dir/openssl.log" 2>&1 \
  || fail "openssl: $(cat "$dir/openssl.log")"

# The network rule: plaintext without credentials, and TLS without client
# authentication, are both refused before anything is bound.
expect_refusal 2 "refusing to serve 0.0.0.0:0 without client authentication; pass --auth-token-file or --tls-client-ca" \
  --listen 0.0.0.0:0
expect_refusal 2 "TLS alone protects the transport" \
  --listen 0.0.0.0:0 --tls-cert "$dir/srv.pem" --tls-key "$dir/srv.key"
# A host name that only looks like loopback is not.
expect_refusal 2 "refusing to serve 127.example.com:0" --listen 127.example.com:0

# Half a TLS pair, an empty token file, a token file others may read.
expect_refusal 2 "--tls-cert and --tls-key must be given together" \
  --listen 127.0.0.1:0 --tls-cert "$dir/none.pem"
( umask 077; : > "$dir/empty-token" )
expect_refusal 2 "is empty" --listen 127.0.0.1:0 --auth-token-file "$dir/empty-token"
printf '  tok-%s-secret\n' "$$" > "$dir/token"
chmod 644 "$dir/token"
expect_refusal 2 "other users may read or write it; chmod 600" \
  --listen 127.0.0.1:0 --auth-token-file "$dir/token"
chmod 600 "$dir/token"

# A store directory other users may write (they could plant modules).
mkdir -p "$dir/open-store" && chmod 777 "$dir/open-store"
expect_refusal 1 "other users may write it and plant modules" \
  --listen 127.0.0.1:0 --store-dir "$dir/open-store" --insecure

# A token-protected daemon on loopback: the token opens it, nothing else does.
start_daemon --auth-token-file "$dir/token" --store-dir "$dir/store"
"$tether" info --remote "127.0.0.1:$port" --token-file "$dir/token" > "$dir/info.log" 2>&1 \
  || fail "info with the token: $(cat "$dir/info.log")"
grep -q "protocol" "$dir/info.log" || fail "info output: $(cat "$dir/info.log")"
"$tether" info --remote "127.0.0.1:$port" > "$dir/noauth.log" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "info without the token exited $rc: $(cat "$dir/noauth.log")"
grep -q "UNAUTHENTICATED" "$dir/noauth.log" || fail "no UNAUTHENTICATED: $(cat "$dir/noauth.log")"
stop_daemon

# No flags: the daemon creates this user's default token (0600) and requires
# it; this user's tether sends it by default; another user's does not have it.
start_daemon --store-dir "$dir/store"
[ -f "$TETHER_TOKEN_FILE" ] || fail "no default token at $TETHER_TOKEN_FILE: $(cat "$dir/daemon.log")"
[ "$(stat -c %a "$TETHER_TOKEN_FILE")" = 600 ] || fail "default token mode $(stat -c %a "$TETHER_TOKEN_FILE")"
[ "$(stat -c %a "$dir/user")" = 700 ] || fail "default token directory mode $(stat -c %a "$dir/user")"
grep -q "token-file=$TETHER_TOKEN_FILE" "$dir/daemon.log" || fail "daemon log: $(cat "$dir/daemon.log")"
"$tether" info --remote "127.0.0.1:$port" > "$dir/own.log" 2>&1 \
  || fail "the same user's info: $(cat "$dir/own.log")"
TETHER_TOKEN_FILE="$dir/other-user/token" "$tether" info --remote "127.0.0.1:$port" > "$dir/other.log" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "another user's info exited $rc: $(cat "$dir/other.log")"
grep -q "UNAUTHENTICATED" "$dir/other.log" || fail "another user: $(cat "$dir/other.log")"
stop_daemon

# --insecure: no token at all, by the operator's explicit choice.
start_daemon --store-dir "$dir/store" --insecure
TETHER_TOKEN_FILE="$dir/other-user/token" "$tether" info --remote "127.0.0.1:$port" > "$dir/insecure.log" 2>&1 \
  || fail "info on an --insecure daemon: $(cat "$dir/insecure.log")"
stop_daemon
echo "secure_daemon: all checks passed"
