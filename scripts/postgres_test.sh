#!/usr/bin/env bash
# Checks the promises of scripts/postgres.sh and scripts/with-postgres.sh on a
# cluster of their own (.tmp/pg-selftest): a test run stops only the cluster
# it started, never one that was running before it, nor one that another
# process (make run, another test run) took up meanwhile. CI runs it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PAYMENTSD_PGDATA=$root/.tmp/pg-selftest
unset DATABASE_URL TEST_DATABASE_URL

pg=scripts/postgres.sh
failures=0
check() { # check WHAT WANT: WANT is running or stopped
  local got=stopped
  $pg status >/dev/null && got=running
  if [ "$got" = "$2" ]; then echo "ok: $1: $got"; else echo "FAIL: $1: $got, want $2"; failures=$((failures + 1)); fi
}
# A data directory whose path is longer than a Unix socket's may be (107
# bytes), for the last check.
long=$root/.tmp/pg-selftest-$(printf 'long%.0s' $(seq 1 28))
trap '$pg stop; PAYMENTSD_PGDATA=$long $pg stop; rm -rf "$PAYMENTSD_PGDATA" "$PAYMENTSD_PGDATA".* "$long" "$long".*' EXIT

$pg stop
scripts/with-postgres.sh bash -c 'psql -q "$DATABASE_URL" -c "select 1" >/dev/null'
check "a test run stops the cluster it started" stopped

$pg start >/dev/null
scripts/with-postgres.sh true
check "a test run leaves a running cluster running" running
$pg stop

sleep 30 &
holder=$!
scripts/with-postgres.sh bash -c "$pg acquire $holder >/dev/null; $pg keep"
check "a test run leaves running a cluster that make run took up meanwhile" running
kill "$holder"; wait "$holder" 2>/dev/null || true
$pg stop

sleep 30 &
other=$!
scripts/with-postgres.sh bash -c "$pg acquire $other >/dev/null"
check "the first of two test runs leaves the cluster to the second" running
kill "$other"; wait "$other" 2>/dev/null || true
$pg release "$other"
check "the last test run out stops it" stopped

# The server listens on TCP only, so a long data directory's path does not
# matter.
PAYMENTSD_PGDATA=$long $pg start >/dev/null
PAYMENTSD_PGDATA=$long check "a cluster starts in a data directory of ${#long} bytes" running
PAYMENTSD_PGDATA=$long $pg stop
rm -rf "$long" "$long".*

echo "$(( 6 - failures )) passed, $failures failed"
[ "$failures" = 0 ]
