#!/usr/bin/env bash
# make chaos: the fault run. Builds paymentsd, the Stripe emulator
# (bin/stripefake) and the harness, then runs the harness, which starts its
# own Postgres cluster (.tmp/chaos-postgres on port 55433, so it may restart
# it without touching the developer's), the Stripe emulator and several
# `paymentsd serve` processes, drives clients through SIGKILLs, a Postgres
# restart, processor faults and lost history (a key's rows deleted, its
# client sending it again later), and checks that every payment happened
# exactly once. Exit status 0 means zero violations.
#
#   scripts/chaos.sh                      the short form (CHAOS_DURATION, 45s)
#   CHAOS_DURATION=10m scripts/chaos.sh   the long form
#   scripts/chaos.sh -seed 7 -clients 32  any harness flag (-help lists them)
#   CHAOS_FAILOVER=sync scripts/chaos.sh  fail over to a synchronous standby
#   CHAOS_FAILOVER=async scripts/chaos.sh ... to an asynchronous one
#   CHAOS_POOLER=pgbouncer scripts/chaos.sh  through PgBouncer in
#                                         transaction pooling mode
#   CHAOS_FAILOVER=patroni-sync scripts/chaos.sh   under Patroni, etcd and
#                                         HAProxy (scripts/patroni.sh): kill the
#                                         leader, kill only its Patroni, switch
#                                         over; synchronous_mode on
#   CHAOS_FAILOVER=patroni-async scripts/chaos.sh  the same, asynchronous
#
# Logs: .tmp/chaos-logs/ (events.log, serve-N.log, stripefake.log,
# report.txt; a failover run's in .tmp/chaos-failover-logs/, a Patroni
# run's in .tmp/chaos-patroni-logs/, its cluster's in .tmp/chaos-patroni/); the
# database paymentsd_chaos stays on the cluster (the promoted standby) for
# inspection (scripts/postgres.sh start with the same PAYMENTSD_PGDATA and
# PAYMENTSD_PGPORT brings it back).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
GO=${GO:-go}

$GO build -o bin/paymentsd ./cmd/paymentsd
$GO -C emulator build -o "$root/bin/stripefake" ./cmd/stripefake
$GO -C harness build -o "$root/bin/paymentsd-chaos" ./cmd/paymentsd-chaos

export CHAOS_DURATION=${CHAOS_DURATION:-45s}
pgdata=$root/.tmp/chaos-postgres
pgport=55433
standby=$root/.tmp/chaos-failover-standby
case ${CHAOS_FAILOVER:-} in
patroni-*)
  # Its own etcd, Patroni nodes and HAProxy, from port 56600 on; stopped
  # at exit whatever way the harness ends.
  pgdata=$root/.tmp/chaos-patroni
  trap 'PAYMENTSD_PATRONI_DIR=$pgdata scripts/patroni.sh stop' EXIT
  trap 'exit 130' INT TERM
  bin/paymentsd-chaos -pgdata "$pgdata" -pgport 56600 "$@"
  exit ;;
esac
if [ -n "${CHAOS_FAILOVER:-}" ]; then
  # CHAOS_FAILOVER=sync|async: a primary and a streaming standby of its
  # own, failed over mid-run; it may run beside an ordinary run.
  pgdata=$root/.tmp/chaos-failover-primary
  pgport=55443
fi
# The harness stops its clusters itself; this covers a harness that died.
trap 'PAYMENTSD_PGDATA=$pgdata PAYMENTSD_PGPORT=$pgport scripts/postgres.sh stop
  [ -z "${CHAOS_FAILOVER:-}" ] || PAYMENTSD_PGDATA=$standby PAYMENTSD_PGPORT=$((pgport + 1)) scripts/postgres.sh stop
  [ -z "${CHAOS_POOLER:-}" ] || PAYMENTSD_PGBOUNCER_DIR=$root/.tmp/chaos-pgbouncer scripts/pgbouncer.sh stop' EXIT
# CHAOS_POOLER=pgbouncer: the service reaches Postgres through PgBouncer,
# which then fails no login for long after the mid-run restart.
[ -z "${CHAOS_POOLER:-}" ] || export PAYMENTSD_PGBOUNCER_SETTINGS=${PAYMENTSD_PGBOUNCER_SETTINGS:-server_login_retry = 1}
bin/paymentsd-chaos -pgdata "$pgdata" -pgport "$pgport" "$@"
