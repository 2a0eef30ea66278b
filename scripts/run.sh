#!/usr/bin/env bash
# `make run`: bring up what the API needs and serve it in the foreground.
#  - DATABASE_URL unset: the throwaway local Postgres (scripts/postgres.sh),
#    left running afterwards (`make clean` or `scripts/postgres.sh stop`).
#  - STRIPE_SECRET_KEY and STRIPE_API_BASE unset: the Stripe emulator
#    (bin/stripefake, built from emulator/ by make build) on
#    PAYMENTSD_STRIPEFAKE_ADDR (127.0.0.1:12111), stopped with the API, which
#    sends its webhook events to the API's POST /webhooks/stripe, signed with
#    STRIPE_WEBHOOK_SECRET (one made for the run, unless set).
# Then migrate, create a demo user, start the API on PAYMENTSD_ADDR
# (127.0.0.1:8080), and print "Ready." with a ready-to-paste curl once
# /readyz answers, and the exports the operator commands (paymentsd keys
# list, keys resolve) need to reach this run from another shell. Whatever
# fails to start stops the whole run with a message that says what and why.
# Ctrl-C (SIGINT), or SIGTERM, stops the API and the emulator and ends with
# "run: stopped ..." and exit status 0.
set -euo pipefail
cd "$(dirname "$0")/.."

# foreground: this script is in its terminal's foreground process group.
foreground() {
  local f
  read -r -a f <"/proc/$$/stat" 2>/dev/null || return 1
  [ "${f[4]}" = "${f[7]}" ] # pgrp, tpgid (-1 without a terminal)
}

# Ctrl-C in a terminal sends SIGINT to the whole foreground process group:
# make as well as this script. However its recipe ends, GNU make then kills
# itself with that SIGINT, so `make run` would end with status 130 whatever
# this script did. So, in a terminal's foreground, the script runs again as
# a job of its own process group that holds the terminal (bash's job
# control): Ctrl-C reaches that job alone, which stops what it started and
# exits 0, and so this script and make exit 0. Ctrl-Z stops the job and, as
# before, make with it; fg resumes both.
if [ -z "${PAYMENTSD_RUN_PARENT:-}" ] && [ -t 0 ] && foreground; then
  set -m
  PAYMENTSD_RUN_PARENT=$$ scripts/run.sh "$@" && status=0 || status=$?
  while [ -n "$(jobs -ps)" ]; do
    kill -TSTP 0
    fg >/dev/null && status=0 || status=$?
  done
  exit "$status"
fi

bin=bin/paymentsd
addr=${PAYMENTSD_ADDR:-127.0.0.1:8080}

fail() { echo "run: $*" >&2; exit 1; }

command -v curl >/dev/null 2>&1 || fail "curl is needed to see when the API is ready (apt-get install curl)"

# port_taken HOST:PORT: something accepts connections there. An unspecified
# host (0.0.0.0, [::]) is probed on loopback.
port_taken() {
  local host=${1%:*} port=${1##*:}
  case $host in '' | 0.0.0.0 | '[::]' | '::') host=127.0.0.1 ;; esac
  host=${host#[}
  host=${host%]}
  (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null
}

port_taken "$addr" && fail "$addr is taken: another make run, or another program, listens there. Stop it, or set PAYMENTSD_ADDR to a free address."

pids=()
stopped=
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "${pg_acquired:-}" ]; then scripts/postgres.sh release $$ 2>/dev/null || true; fi
  [ -z "$stopped" ] || echo "run: stopped${pg_acquired:+ (the local Postgres keeps running: make clean stops it)}" >&2
}
trap cleanup EXIT
# Asked to stop: what was started stops (cleanup), and the run ends well.
trap 'trap "" INT TERM HUP; stopped=1; exit 0' INT TERM HUP
# Run as the job above: stop too if the script that started it is killed
# (make killed with SIGTERM passes it on to that script alone).
if [ -n "${PAYMENTSD_RUN_PARENT:-}" ]; then
  (tail --pid="$PAYMENTSD_RUN_PARENT" -f /dev/null 2>/dev/null && kill -TERM $$ 2>/dev/null) &
  pids+=($!)
fi

if [ -z "${DATABASE_URL:-}" ]; then
  DATABASE_URL=$(scripts/postgres.sh acquire $$) || fail "the local Postgres did not start (see the lines above, and .tmp/postgres/server.log)"
  pg_acquired=1
  scripts/postgres.sh keep # make run leaves it running for the next run
  export DATABASE_URL
  echo "run: local Postgres at $DATABASE_URL (left running after make run; stop it with: make clean)" >&2
fi

# wait_for NAME PID URL: poll URL until it answers 200, failing if process
# PID exits first or 60 s pass.
wait_for() {
  local name=$1 pid=$2 url=$3 i
  for i in $(seq 1 600); do
    kill -0 "$pid" 2>/dev/null || fail "$name exited before it was ready: see its log lines above"
    curl -fsS -o /dev/null --max-time 2 "$url" 2>/dev/null && return 0
    sleep 0.1
  done
  fail "$name did not answer $url within 60 s"
}

if [ -z "${STRIPE_SECRET_KEY:-}" ] && [ -z "${STRIPE_API_BASE:-}" ]; then
  emulator_addr=${PAYMENTSD_STRIPEFAKE_ADDR:-127.0.0.1:12111}
  emulator_key=sk_test_paymentsd_emulator # the API's own with the emulator (config.EmulatorSecretKey)
  port_taken "$emulator_addr" && fail "$emulator_addr, the Stripe emulator's address, is taken: another make run, or another program, listens there. Stop it, or set PAYMENTSD_STRIPEFAKE_ADDR to a free address."
  # The emulator sends its webhook events to the API, signed with a secret
  # made for this run (or STRIPE_WEBHOOK_SECRET's, if set).
  api_host=${addr%:*}
  case $api_host in '' | 0.0.0.0 | '[::]' | '::') api_host=127.0.0.1 ;; esac
  export STRIPE_WEBHOOK_SECRET=${STRIPE_WEBHOOK_SECRET:-whsec_$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')}
  webhook_url="http://$api_host:${addr##*:}/webhooks/stripe"
  PAYMENTSD_LOG_LEVEL=warn bin/stripefake --addr "$emulator_addr" \
    --webhook-url "$webhook_url" --webhook-secret "$STRIPE_WEBHOOK_SECRET" &
  pids+=($!)
  wait_for "the Stripe emulator" "${pids[-1]}" "http://$emulator_addr/_fake/stats"
  export STRIPE_API_BASE="http://$emulator_addr"
  echo "run: Stripe emulator at $STRIPE_API_BASE (stopped with the API), sending its webhook events to $webhook_url" >&2
fi

"$bin" migrate >&2 || fail "the migrations failed: see above"
user=$("$bin" users create --email "demo+$(date +%s%N)@example.com") || fail "could not create the demo user: see above"
api_key=$(sed -E 's/.*"api_key":"([^"]+)".*/\1/' <<<"$user")

"$bin" serve &
pids+=($!)
serve_pid=${pids[-1]}
wait_for "paymentsd serve" "$serve_pid" "http://$addr/readyz"

# shell_word S: S as one word of a shell command, quoted when it needs to be.
shell_word() {
  if [[ $1 =~ ^[A-Za-z0-9_./:@%+,=-]+$ ]]; then printf '%s' "$1"; else printf "'%s'" "${1//\'/\'\\\'\'}"; fi
}

# What the operator commands need to reach this run from another shell:
# keys list the database, keys resolve the same Stripe too, and the same
# timing rules as the API if any were set. What make run made is shown in
# full; what the caller set is only named, being theirs (and maybe secret).
exports="  export DATABASE_URL=$(shell_word "$DATABASE_URL")"
[ -n "${pg_acquired:-}" ] || exports="  # DATABASE_URL: the one you gave make run"
if [ -n "${emulator_addr:-}" ]; then
  # STRIPE_API_BASE alone would do; the emulator's key also keeps a real
  # STRIPE_SECRET_KEY of that shell from going to the emulator.
  exports+=$'\n'"  export STRIPE_API_BASE=$STRIPE_API_BASE STRIPE_SECRET_KEY=$emulator_key"
else
  given=
  for v in STRIPE_SECRET_KEY STRIPE_API_BASE; do [ -z "${!v:-}" ] || given+="${given:+, }$v"; done
  exports+=$'\n'"  # $given: as you gave make run"
fi
timing=
for v in PAYMENTSD_STRIPE_VISIBILITY_MARGIN PAYMENTSD_STRIPE_TIMEOUT PAYMENTSD_LOCK_TIMEOUT; do
  [ -z "${!v:-}" ] || timing+=" $v=$(shell_word "${!v}")"
done
[ -z "$timing" ] || exports+=$'\n'"  export$timing"

# The banner's curl is the first step of the walk in docs/walk.md (key
# "order-1001"), so pasting it and then following the walk goes as it shows.
cat >&2 <<CURL

Ready. Charge a card (run it twice: the second answer is a replay):

  export API_KEY=$api_key
  curl -i http://$addr/payments \\
    -H "Authorization: Bearer \$API_KEY" \\
    -H 'Idempotency-Key: "order-1001"' \\
    -H 'Content-Type: application/json' \\
    -d '{"amount": 2000, "currency": "usd", "payment_method": "pm_card_visa", "description": "Order #1001"}'

The operator commands (paymentsd keys list, keys resolve), in another shell in this directory:

$exports
  bin/paymentsd keys list --state needs-attention

Left running after Ctrl-C: the local Postgres cluster, if make run started one (make clean stops it).

CURL

set +e
wait "$serve_pid"
code=$?
set -e
[ "$code" = 0 ] || [ "$code" = 130 ] || [ "$code" = 143 ] || fail "paymentsd serve stopped with exit code $code: see its log above"
stopped=1 # serve was stopped by a signal this script did not get
