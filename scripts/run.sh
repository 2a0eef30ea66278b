#!/usr/bin/env bash
# `make run`: bring up what the API needs and serve it in the foreground.
#  - DATABASE_URL unset: a throwaway local Postgres (scripts/postgres.sh).
#  - STRIPE_SECRET_KEY and STRIPE_API_BASE unset: the Stripe emulator.
# Then migrate, create a demo user, print a ready-to-paste curl, and serve.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=bin/paymentsd

if [ -z "${DATABASE_URL:-}" ]; then
  DATABASE_URL=$(scripts/postgres.sh start)
  export DATABASE_URL
  echo "run: local Postgres at $DATABASE_URL (stop it with: scripts/postgres.sh stop)" >&2
fi

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

if [ -z "${STRIPE_SECRET_KEY:-}" ] && [ -z "${STRIPE_API_BASE:-}" ]; then
  emulator_addr=${PAYMENTSD_STRIPEFAKE_ADDR:-127.0.0.1:12111}
  PAYMENTSD_LOG_LEVEL=warn "$bin" stripefake --addr "$emulator_addr" &
  pids+=($!)
  export STRIPE_API_BASE="http://$emulator_addr"
  echo "run: Stripe emulator at $STRIPE_API_BASE" >&2
fi

"$bin" migrate >&2
user=$("$bin" users create --email "demo+$(date +%s)@example.com")
api_key=$(sed -E 's/.*"api_key":"([^"]+)".*/\1/' <<<"$user")
addr=${PAYMENTSD_ADDR:-127.0.0.1:8080}

cat >&2 <<CURL

Ready. Charge a card (run it twice: the second answer is a replay):

  curl -i http://$addr/payments \\
    -H 'Authorization: Bearer $api_key' \\
    -H 'Idempotency-Key: "order-$(date +%s)"' \\
    -H 'Content-Type: application/json' \\
    -d '{"amount": 2000, "currency": "usd", "payment_method": "pm_card_visa"}'

CURL

"$bin" serve &
pids+=($!)
wait "${pids[-1]}"
