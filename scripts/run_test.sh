#!/usr/bin/env bash
# Checks that `make run` (scripts/run.sh) stops with a clear message, and
# without printing "Ready.", when a part cannot start: the API's address
# taken, the emulator's address taken, the API failing at start. CI runs it
# after `make build`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
unset DATABASE_URL TEST_DATABASE_URL STRIPE_SECRET_KEY STRIPE_API_BASE STRIPE_WEBHOOK_SECRET
out=$root/.tmp/run-test
mkdir -p "$out"

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
  local p
  for p in $(seq "$1" $(($1 + 200))); do port_busy "$p" || { echo "$p"; return; }; done
  echo "no free port from $1" >&2; exit 1
}

blocker=
cleanup() {
  [ -z "$blocker" ] || { kill "$blocker" 2>/dev/null; wait "$blocker" 2>/dev/null || true; }
  scripts/postgres.sh release $$ >/dev/null 2>&1 || true
}
trap cleanup EXIT
DATABASE_URL=$(scripts/postgres.sh acquire $$)
export DATABASE_URL

# block PORT: something listens on PORT (an emulator of our own).
block() {
  bin/paymentsd stripefake --addr "127.0.0.1:$1" 2>/dev/null &
  blocker=$!
  for _ in $(seq 1 100); do port_busy "$1" && return; sleep 0.1; done
  echo "could not listen on $1" >&2; exit 1
}
unblock() { kill "$blocker"; wait "$blocker" 2>/dev/null || true; blocker=; }

failures=0
# expect NAME WANT: scripts/run.sh (given its environment) must exit 1,
# print WANT, and not print "Ready.".
expect() {
  local name=$1 want=$2 code=0
  timeout 120 scripts/run.sh >"$out/out" 2>&1 || code=$?
  if [ "$code" = 1 ] && grep -qF -- "$want" "$out/out" && ! grep -q '^Ready\.' "$out/out"; then
    echo "ok: $name"
  else
    echo "FAIL: $name (exit $code, want 1 and: $want)"; sed 's/^/    /' "$out/out"
    failures=$((failures + 1))
  fi
}

api=$(free_port 18380)
emulator=$(free_port 22380)
export PAYMENTSD_ADDR=127.0.0.1:$api PAYMENTSD_STRIPEFAKE_ADDR=127.0.0.1:$emulator

block "$api"
expect "the API's address taken" "run: 127.0.0.1:$api is taken"
unblock

block "$emulator"
expect "the emulator's address taken" "run: 127.0.0.1:$emulator, the Stripe emulator's address, is taken"
unblock

PAYMENTSD_LOCK_TIMEOUT=bogus expect "the API failing at start" "run: paymentsd serve exited before it was ready"
if port_busy "$emulator"; then
  echo "FAIL: the emulator it started still listens"; failures=$((failures + 1))
else
  echo "ok: what it started is stopped"
fi

echo "$(( 4 - failures )) passed, $failures failed"
[ "$failures" = 0 ]
