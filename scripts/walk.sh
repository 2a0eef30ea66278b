#!/usr/bin/env bash
# `make walk`: runs the curl walk of docs/walk.md, in order, against
# `make run` (a fresh database in the throwaway cluster, the emulator, the
# API), and writes what each step printed into its ```console blocks that
# follow a `<!-- walk:STEP -->` marker.
#
#   scripts/walk.sh           capture, and rewrite docs/walk.md's blocks
#   scripts/walk.sh --check   capture, and fail if docs/walk.md's blocks differ
#                             from the capture, ids and times aside
#                             (request ids, dates, timestamps, lengths,
#                             payment, refund and PaymentIntent ids); CI
#                             runs this
#
# The stack runs with PAYMENTSD_STRIPE_VISIBILITY_MARGIN=1s, so the
# unknown-outcome step reaches its 201 in seconds rather than a minute;
# docs/walk.md says so. The commands are shown with the default addresses
# (127.0.0.1:8080, the emulator on 127.0.0.1:12111) while the stack listens
# on free ports of its own, so a `make run` of yours may stay up meanwhile.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mode=${1:-write}
case $mode in write | --check) ;; *) echo "usage: $0 [--check]" >&2; exit 2 ;; esac

say() { echo "walk: $*" >&2; }
fail() { say "$*"; exit 1; }
out=$root/.tmp/walk
doc=docs/walk.md
rm -rf "$out"
mkdir -p "$out/blocks"

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
  local p
  for p in $(seq "$1" $(($1 + 200))); do port_busy "$p" || { echo "$p"; return; }; done
  fail "no free port from $1"
}
api_port=$(free_port 18080)
emulator_port=$(free_port 22111)
api=http://127.0.0.1:$api_port
emulator=http://127.0.0.1:$emulator_port

# A fresh database, so the walk starts from nothing.
unset DATABASE_URL TEST_DATABASE_URL STRIPE_SECRET_KEY STRIPE_API_BASE
run_pid=
cleanup() {
  if [ -n "$run_pid" ]; then
    kill -TERM -- "-$run_pid" 2>/dev/null || true
    wait "$run_pid" 2>/dev/null || true
  fi
  scripts/postgres.sh release $$ || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
admin_url=$(scripts/postgres.sh acquire $$)
psql -q -v ON_ERROR_STOP=1 "$admin_url" -c 'SET client_min_messages = warning' \
  -c 'DROP DATABASE IF EXISTS paymentsd_walk WITH (FORCE)' -c 'CREATE DATABASE paymentsd_walk' >&2
db_url=${admin_url/\/postgres\?//paymentsd_walk?}

say "starting make run on $api (emulator on $emulator), log in .tmp/walk/run.log"
DATABASE_URL=$db_url PAYMENTSD_ADDR=127.0.0.1:$api_port PAYMENTSD_STRIPEFAKE_ADDR=127.0.0.1:$emulator_port \
  PAYMENTSD_STRIPE_VISIBILITY_MARGIN=1s setsid make run >"$out/run.log" 2>&1 &
run_pid=$!
for _ in $(seq 1 1200); do
  grep -q '^Ready\.' "$out/run.log" && break
  kill -0 "$run_pid" 2>/dev/null || { cat "$out/run.log" >&2; fail "make run stopped before it was ready"; }
  sleep 0.1
done
grep -q '^Ready\.' "$out/run.log" || fail "make run was not ready within 120 s (see .tmp/walk/run.log)"
API_KEY=$(sed -n 's/^ *export API_KEY=//p' "$out/run.log")
[ -n "$API_KEY" ] || fail "no API key in make run's banner"
export API_KEY

# As in a terminal, curl shows no progress meter (its output is not one
# here) but still its errors.
curl() { command curl -sS "$@"; }

# block STEP: the block of step STEP gets what follows on stdin.
block() { cat >>"$out/blocks/$1"; }

# run_step STEP COMMAND: shows COMMAND after a "$" prompt in block STEP, as the
# walk shows it (default addresses), runs it against the walk's stack, and
# adds what it printed, CRs removed and ending with a newline.
run_step() {
  local step=$1 shown=$2 real printed
  real=${shown//http:\/\/127.0.0.1:8080/$api}
  real=${real//http:\/\/127.0.0.1:12111/$emulator}
  printed=$(eval "$real" 2>&1 | tr -d '\r')
  printf '$ %s\n' "$shown" | block "$step"
  [ -z "$printed" ] || printf '%s\n' "$printed" | block "$step"
  printf '%s' "$printed" >"$out/last"
}

pay_visa='curl -i http://127.0.0.1:8080/payments \
    -H "Authorization: Bearer $API_KEY" \
    -H '\''Idempotency-Key: "order-1001"'\'' \
    -H '\''Content-Type: application/json'\'' \
    -d '\''{"amount": 2000, "currency": "usd", "payment_method": "pm_card_visa", "description": "Order #1001"}'\'''

say "create, replay, the same key in other forms"
run_step create "$pay_visa"
grep -q '^HTTP/1.1 201' "$out/last" || fail "create: expected 201"
paid_id=$(sed -n 's/^{"id":"\(pay_[0-9a-z]*\)",.*/\1/p' "$out/last")
[ -n "$paid_id" ] || fail "create: no payment id"
run_step replay "$pay_visa"
run_step bare-key 'curl -i http://127.0.0.1:8080/payments \
    -H "Authorization: Bearer $API_KEY" -H '\''Idempotency-Key: order-1001'\'' \
    -H '\''Content-Type: application/json'\'' \
    -d '\''{"description":"Order #1001","payment_method":"pm_card_visa","currency":"usd","amount":2000}'\'''
run_step reused "${pay_visa/\"amount\": 2000/\"amount\": 2500}"

say "a declined card"
run_step declined 'curl -i http://127.0.0.1:8080/payments \
    -H "Authorization: Bearer $API_KEY" \
    -H '\''Idempotency-Key: "order-1002"'\'' \
    -H '\''Content-Type: application/json'\'' \
    -d '\''{"amount": 1500, "currency": "eur", "payment_method": "pm_card_chargeDeclined"}'\'''
declined_id=$(sed -n 's/.*"payment_id":"\(pay_[0-9a-z]*\)".*/\1/p' "$out/last")
[ -n "$declined_id" ] || fail "declined: no payment_id"

say "two requests in flight on one key"
run_step in-flight 'curl -X POST http://127.0.0.1:12111/_fake/faults -d '\''{"inject":[{"kind":"latency","latency_ms":3000}]}'\'''
pay_1003='pay() { curl -i http://127.0.0.1:8080/payments \
    -H "Authorization: Bearer $API_KEY" -H '\''Idempotency-Key: "order-1003"'\'' \
    -H '\''Content-Type: application/json'\'' \
    -d '\''{"amount": 4200, "currency": "usd", "payment_method": "pm_card_visa"}'\''; }'
printf '\n$ %s\n$ pay > first.txt & sleep 0.5; pay; wait\n' "$pay_1003" | block in-flight
eval "${pay_1003//http:\/\/127.0.0.1:8080/$api}"
pay >"$out/first.txt" 2>&1 &
first=$!
sleep 0.5
pay 2>&1 | tr -d '\r' | block in-flight-second
wait "$first"
printf '$ cat first.txt\n' | block in-flight-first
tr -d '\r' <"$out/first.txt" | block in-flight-first

say "outcome unknown: 503, 503 until the visibility margin, then 201"
run_step unknown 'curl -X POST http://127.0.0.1:12111/_fake/faults -d '\''{"inject":[{"kind":"500"}]}'\'''
pay_1004='pay() { curl -i http://127.0.0.1:8080/payments \
    -H "Authorization: Bearer $API_KEY" -H '\''Idempotency-Key: order-1004'\'' \
    -H '\''Content-Type: application/json'\'' \
    -d '\''{"amount": 900, "currency": "usd", "payment_method": "pm_card_visa"}'\''; }'
printf '\n$ %s\n' "$pay_1004" | block unknown
eval "${pay_1004//http:\/\/127.0.0.1:8080/$api}"
for shown in 'pay' 'pay' 'sleep 1.5; pay'; do
  printf '$ %s\n' "$shown" | block unknown
  eval "$shown" 2>&1 | tr -d '\r' | block unknown
done

say "read a payment, and a validation error"
run_step read "curl -i http://127.0.0.1:8080/payments/$declined_id -H \"Authorization: Bearer \$API_KEY\""
run_step validation 'curl -i http://127.0.0.1:8080/payments \
    -H "Authorization: Bearer $API_KEY" \
    -H '\''Idempotency-Key: "order-1005"'\'' \
    -H '\''Content-Type: application/json'\'' \
    -d '\''{"amount": 0, "currency": "USD", "payment_method": "pm_card_visa", "tip": 100}'\'''

say "refund it: a part, its replay, then more than remains"
refund_part="curl -i http://127.0.0.1:8080/payments/$paid_id/refunds \\
    -H \"Authorization: Bearer \$API_KEY\" \\
    -H 'Idempotency-Key: \"refund-1001-a\"' \\
    -H 'Content-Type: application/json' \\
    -d '{\"amount\": 500, \"reason\": \"requested_by_customer\"}'"
run_step refund "$refund_part"
grep -q '^HTTP/1.1 201' "$out/last" || fail "refund: expected 201"
run_step refund-replay "$refund_part"
run_step over-refund "curl -i http://127.0.0.1:8080/payments/$paid_id/refunds \\
    -H \"Authorization: Bearer \$API_KEY\" \\
    -H 'Idempotency-Key: \"refund-1001-b\"' \\
    -H 'Content-Type: application/json' \\
    -d '{\"amount\": 1600}'"
grep -q '^HTTP/1.1 400' "$out/last" || fail "over-refund: expected 400"
run_step refunded "curl -s http://127.0.0.1:8080/payments/$paid_id -H \"Authorization: Bearer \$API_KEY\""

say "authorize now, capture later: a partial capture, its replay, a second capture, a cancel"
authorize() {
  printf '%s' "curl -i http://127.0.0.1:8080/payments \\
    -H \"Authorization: Bearer \$API_KEY\" \\
    -H 'Idempotency-Key: \"$1\"' \\
    -H 'Content-Type: application/json' \\
    -d '{\"amount\": $2, \"currency\": \"usd\", \"payment_method\": \"pm_card_visa\", \"capture_method\": \"manual\"}'"
}
run_step authorize "$(authorize order-1006 3000)"
grep -q '^HTTP/1.1 201' "$out/last" || fail "authorize: expected 201"
auth_id=$(sed -n 's/^{"id":"\(pay_[0-9a-z]*\)",.*/\1/p' "$out/last")
[ -n "$auth_id" ] || fail "authorize: no payment id"
capture="curl -i http://127.0.0.1:8080/payments/$auth_id/capture \\
    -H \"Authorization: Bearer \$API_KEY\" \\
    -H 'Idempotency-Key: \"capture-1006\"' \\
    -H 'Content-Type: application/json' \\
    -d '{\"amount_to_capture\": 2500}'"
run_step capture "$capture"
grep -q '^HTTP/1.1 200' "$out/last" || fail "capture: expected 200"
run_step capture-replay "$capture"
run_step capture-again "curl -i http://127.0.0.1:8080/payments/$auth_id/capture \\
    -H \"Authorization: Bearer \$API_KEY\" \\
    -H 'Idempotency-Key: \"capture-1006-b\"' \\
    -H 'Content-Type: application/json' \\
    -d '{}'"
grep -q '^HTTP/1.1 400' "$out/last" || fail "capture-again: expected 400"
run_step cancel "$(authorize order-1007 1200)"
cancel_id=$(sed -n 's/^{"id":"\(pay_[0-9a-z]*\)",.*/\1/p' "$out/last")
[ -n "$cancel_id" ] || fail "cancel: no payment id"
run_step cancel "curl -i http://127.0.0.1:8080/payments/$cancel_id/cancel \\
    -H \"Authorization: Bearer \$API_KEY\" \\
    -H 'Idempotency-Key: \"cancel-1007\"' \\
    -H 'Content-Type: application/json' \\
    -d '{}'"
grep -q '^HTTP/1.1 200' "$out/last" || fail "cancel: expected 200"

# splice DOC: the fenced block after each <!-- walk:STEP --> marker gets
# the captured block of STEP.
splice() {
  awk -v dir="$out/blocks" '
    function emit(step,   f, line) {
      f = dir "/" step
      while ((getline line < f) > 0) print line
      close(f)
    }
    /^<!-- walk:[a-z-]+ -->$/ { step = $0; sub(/^<!-- walk:/, "", step); sub(/ -->$/, "", step); print; want = 1; next }
    want == 1 && /^```/ { print; emit(step); want = 2; next }
    want == 2 { if (/^```$/) { print; want = 0 } ; next }
    { print }
  ' "$1"
}

# mask hides what differs from run to run.
mask() {
  sed -E -e 's/req_[0-9a-f]{24}/req_…/g' -e 's/^Date: .*/Date: …/' -e 's/^Content-Length: [0-9]+/Content-Length: …/' \
    -e 's/"created_at":"[^"]*"/"created_at":"…"/g' -e 's/pi_[A-Za-z0-9]+/pi_…/g' -e 's/re_[A-Za-z0-9]+/re_…/g' -e 's/pay_[0-9a-z]{26}/pay_…/g' "$1"
}

for step in create replay bare-key reused declined in-flight in-flight-second in-flight-first unknown read validation \
  refund refund-replay over-refund refunded authorize capture capture-replay capture-again cancel; do
  [ -s "$out/blocks/$step" ] || fail "step $step printed nothing"
  grep -q "^<!-- walk:$step -->\$" "$doc" || fail "$doc has no <!-- walk:$step --> marker"
done
splice "$doc" >"$out/walk.md"
if [ "$mode" = --check ]; then
  if ! diff -u <(mask "$doc") <(mask "$out/walk.md") >"$out/walk.diff"; then
    cat "$out/walk.diff" >&2
    fail "$doc differs from what the walk prints now (ids and times aside): run make walk and commit $doc"
  fi
  say "$doc matches a fresh run (ids and times aside)"
else
  cp "$out/walk.md" "$doc"
  say "$doc rewritten from a fresh run"
fi
