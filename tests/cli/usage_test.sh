#!/usr/bin/env bash
# Usage errors exit 2 with a usage message; --help exits 0.
set -u
tether=$1
fail() { echo "FAIL: $*"; exit 1; }
"$tether" --help | grep -q "usage: tether" || fail "--help"
"$tether" > /dev/null 2>&1; [ $? -eq 2 ] || fail "no command should exit 2"
"$tether" frobnicate > /dev/null 2>&1; [ $? -eq 2 ] || fail "unknown command should exit 2"
"$tether" inspect > /dev/null 2>&1; [ $? -eq 2 ] || fail "inspect without a file should exit 2"
"$tether" demo --device > /dev/null 2>&1; [ $? -eq 2 ] || fail "--device without a value should exit 2"
"$tether" demo --bogus > /dev/null 2>&1; [ $? -eq 2 ] || fail "unknown option should exit 2"
echo "usage checks passed"
