#!/usr/bin/env bash
# Checks that `make run` (scripts/run.sh) stops with a clear message, and
# without printing "Ready.", when a part cannot start: the API's address
# taken, the emulator's address taken, the API failing at start. Then, with
# DATABASE_URL unset (the local Postgres), that its banner carries exports
# with which the operator commands, run in a clean environment, reach the
# running stack; that Ctrl-C in a terminal (a ^C typed into a pseudo-terminal,
# by script(1)) ends `make run` with status 0 and "run: stopped", and SIGINT
# to scripts/run.sh's process group without a terminal too; and that both
# leave nothing listening. CI runs it after `make build`.
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
had_autostop=
cleanup() {
  [ -z "$blocker" ] || { kill "$blocker" 2>/dev/null; wait "$blocker" 2>/dev/null || true; }
  # make run keeps the local Postgres running (postgres.sh keep): the mark
  # that has this test stop the cluster if it started it is put back.
  [ -z "$had_autostop" ] || touch "$root/.tmp/postgres.autostop"
  scripts/postgres.sh release $$ >/dev/null 2>&1 || true
}
trap cleanup EXIT
DATABASE_URL=$(scripts/postgres.sh acquire $$)
export DATABASE_URL
[ ! -e .tmp/postgres.autostop ] || had_autostop=1

# block PORT: something listens on PORT (an emulator of our own).
block() {
  bin/stripefake --addr "127.0.0.1:$1" 2>/dev/null &
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

# check NAME CONDITION...: one more check, passed when the command succeeds.
checks=4
check() {
  local name=$1
  shift
  checks=$((checks + 1))
  if "$@"; then
    echo "ok: $name"
  else
    echo "FAIL: $name"; sed 's/^/    /' "$out/out"
    [ ! -s "$out/op" ] || { echo "  the operator command printed:"; sed 's/^/    /' "$out/op"; }
    failures=$((failures + 1))
  fi
}
ready() { grep -q '^Ready\.' "$out/out"; }
# wait_ready PID: the run's banner is out, or it stopped first, or 120 s.
wait_ready() {
  for _ in $(seq 1 1200); do
    ready && return 0
    kill -0 "$1" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
stopped_clean() {
  grep -q '^run: stopped' "$out/out" && ! grep -q 'Error 130' "$out/out" && ! port_busy "$api" && ! port_busy "$emulator"
}

# From here, the local Postgres of make run: DATABASE_URL unset.
unset DATABASE_URL

# make run in a terminal: script(1) gives it one and passes on what is
# written to its input, where a ^C (\003) is Ctrl-C.
# set -m: not started with SIGINT ignored, as a background job would be.
command -v script >/dev/null 2>&1 || { echo "FAIL: script(1) is needed (Debian's bsdutils)"; exit 1; }
rm -f "$out/tty" "$out/op"
mkfifo "$out/tty"
set -m
script -qefc "make --no-print-directory run" /dev/null <"$out/tty" >"$out/out" 2>&1 &
run=$!
set +m
exec 8>"$out/tty"
# stop_tty: Ctrl-C, then up to 60 s for make run to end.
stop_tty() {
  printf '\003' >&8
  for _ in $(seq 1 600); do kill -0 "$run" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$run" 2>/dev/null && kill "$run" # not stopped: fails below
  exec 8>&-
}
if ! wait_ready "$run"; then
  echo "FAIL: make run in a terminal was not ready"; sed 's/^/    /' "$out/out"
  stop_tty
  wait "$run" 2>/dev/null || true
  exit 1
fi

# The exports, pasted into a shell that has none of the run's environment.
operator() {
  env -i PATH="$PATH" HOME="${HOME:-/}" bash -c "$(sed -n 's/^  export /export /p' "$out/out" | tr -d '\r'); bin/paymentsd $*" \
    >"$out/op" 2>&1
}
check "the banner exports the local Postgres" grep -q "^  export DATABASE_URL='postgres://.*127.0.0.1" "$out/out"
check "the banner exports the emulator" grep -q "^  export STRIPE_API_BASE=http://127.0.0.1:$emulator STRIPE_SECRET_KEY=sk_test_" "$out/out"
check "keys list reaches the run with the banner's exports" operator keys list --state needs-attention
# A key that does not exist: refused as one, after reading the settings and
# reaching the database.
resolve_refused() { ! operator keys resolve 2147483647 --as not-charged && grep -q 'does not await an operator' "$out/op"; }
check "keys resolve reaches the run with the banner's exports" resolve_refused

rm -f "$out/op"
stop_tty
code=0
wait "$run" || code=$?
check "Ctrl-C ends make run with status 0 (got $code), run: stopped, nothing left listening" \
  eval '[ "$code" = 0 ] && stopped_clean'

# SIGINT to the process group of scripts/run.sh, without a terminal (as
# make walk runs it); set -m: a group of its own, SIGINT not ignored.
set -m
scripts/run.sh </dev/null >"$out/out" 2>&1 &
run=$!
set +m
if wait_ready "$run"; then
  kill -INT -- "-$run"
  code=0
  wait "$run" || code=$?
  check "SIGINT to its group ends scripts/run.sh with status 0 (got $code), run: stopped, nothing left listening" \
    eval '[ "$code" = 0 ] && stopped_clean'
else
  check "scripts/run.sh without a terminal was ready" false
  kill -TERM -- "-$run" 2>/dev/null || true
  wait "$run" 2>/dev/null || true
fi

echo "$(( checks - failures )) passed, $failures failed"
[ "$failures" = 0 ]
