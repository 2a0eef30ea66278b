#!/usr/bin/env bash
# What a fresh payment's SQL costs the server's CPU, phase by phase:
# pgbench runs fresh.sql (the service's two transactions, on its schema)
# and least.sql (harness/bench/least) in turn at 32 connections, and the
# ablation's redesign (harness/bench/ablation/redesign.sql, run with
# redesign-fresh.sql) beside them, each run under `perf record -a -g`;
# paymentsd-bench sql-profile folds the
# Postgres processes' call stacks into the executor's phases (CHECKs,
# foreign keys, index entries, ...) and divides them by the payments each
# side made (harness/bench/sqlprofile.go). Where the ablation
# (scripts/bench-ablation.sh) reads throughput, which drifts by a fifth on
# two shared cores, this reads where the CPU went, which does not. A
# diagnostic, never a yardstick.
#
#   SQLPROFILE_ROUNDS=3    rounds (each profiles the three, in rotating order)
#   SQLPROFILE_SECONDS=12  seconds a pgbench run
#   SQLPROFILE_WRITE=1     also write the table, with the date, commit and
#                          command, to docs/bench-sql-profile.md (the
#                          committed copy; do not edit it by hand)
#   DATABASE_URL           the server, on this machine (make
#                          bench-sql-profile runs this under
#                          scripts/with-postgres.sh, which sets it to its
#                          throwaway cluster when it is unset)
#
# It needs perf, allowed to sample every CPU (root, or
# kernel.perf_event_paranoid <= 0). Its databases, paymentsd_sqlprofile
# and paymentsd_sqlprofile_redesign, and its profiles under .tmp/sqlprofile
# are removed at exit.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
: "${DATABASE_URL:?set DATABASE_URL, or run make bench-sql-profile}"

rounds=${SQLPROFILE_ROUNDS:-3}
seconds=${SQLPROFILE_SECONDS:-12}
hz=499
say() { echo "bench-sql-profile: $*" >&2; }
. scripts/bench-sql-lib.sh

need pgbench postgresql-client
need perf linux-perf
if ! perf record -q -a -o /dev/null -- true >/dev/null 2>&1; then
  say "perf cannot sample every CPU here: run it as root, or set kernel.perf_event_paranoid to 0 or less"
  exit 1
fi
go build -o bin/paymentsd ./cmd/paymentsd
go -C harness build -o "$root/bin/paymentsd-bench" ./cmd/paymentsd-bench

dir=.tmp/sqlprofile
cleanup() {
  drop_bench_dbs
  rm -rf "$dir"
}
trap cleanup EXIT
rm -rf "$dir" && mkdir -p "$dir"
# The service's schema with the least schema beside it, and the redesign.
bench_db paymentsd_sqlprofile bin/paymentsd harness/bench/least/schema.sql
bench_db paymentsd_sqlprofile_redesign bin/paymentsd harness/bench/ablation/redesign.sql
declare -A db script
db[fresh.sql]=paymentsd_sqlprofile; script[fresh.sql]=harness/bench/pgbench/fresh.sql
db[least.sql]=paymentsd_sqlprofile; script[least.sql]=harness/bench/pgbench/least.sql
db[redesign]=paymentsd_sqlprofile_redesign; script[redesign]=harness/bench/ablation/redesign-fresh.sql
say "fresh.sql, least.sql and the redesign, $rounds rounds of ${seconds}s at 32 connections, sampled at $hz Hz"

runs=()
sides=(fresh.sql least.sql redesign)
for r in $(seq 1 "$rounds"); do
  line="round $r:"
  for k in 0 1 2; do
    side=${sides[$(((k + r) % 3))]}
    out=$dir/$side-$r
    if ! bench_pgbench "${db[$side]}" "${script[$side]}" perf record -q -F "$hz" -a -g -o "$out.data" -- >"$out.log"; then
      say "pgbench or perf failed on $side:"
      cat "$out.log" >&2
      exit 1
    fi
    n=$(awk '/actually processed/ { print $NF }' "$out.log")
    perf script -i "$out.data" -F comm,ip,sym >"$out.txt" 2>/dev/null
    rm -f "$out.data"
    runs+=("$side=$out.txt:$n")
    line="$line $side $(awk '/^tps/ { printf "%.0f/s", $3 }' "$out.log")"
  done
  say "$line"
done
table=$(bin/paymentsd-bench sql-profile -hz "$hz" -a fresh.sql -b least.sql "${runs[@]}")
redesign=$(bin/paymentsd-bench sql-profile -hz "$hz" -a redesign -b fresh.sql "${runs[@]}")

if [ "${SQLPROFILE_WRITE:-}" != 1 ]; then
  echo "$table"
  echo
  echo "$redesign"
  exit 0
fi
{
  echo "# Where a fresh payment's SQL spends the server's CPU, against the least SQL"
  echo
  echo "Written by \`SQLPROFILE_WRITE=1 make bench-sql-profile\` (scripts/bench-sql-profile.sh); do not edit by"
  echo "hand. A diagnostic, not a yardstick: the Postgres processes' CPU a payment, from their call"
  echo "stacks sampled by perf while pgbench ran each script, folded into the executor's phases"
  echo "(harness/bench/sqlprofile.go: a sample is in the first phase one of whose functions is on its"
  echo "stack). Every process named postgres on the machine is sampled: run it where no other cluster"
  echo "is busy. The phases are sorted by how much more fresh.sql spends in them."
  echo
  echo "- **Date:** $(date -u '+%Y-%m-%d %H:%M') (UTC)"
  echo "- **Code:** commit $(git rev-parse HEAD)"
  echo "- **Runs:** pgbench \`-M prepared -n -T $seconds -c 32 -j 2\`, $rounds rounds, each profiling fresh.sql"
  echo "  and least.sql, and fresh.sql on the ablation's redesign, in rotating order under"
  echo "  \`perf record -F $hz -a -g\`, on one server"
  echo
  echo "$table"
  echo
  echo "## The redesign against the service's schema"
  echo
  echo "The ablation's redesign (harness/bench/ablation/redesign.sql, run with redesign-fresh.sql) keeps"
  echo "every rule and lookup and makes both of a payment's updates HOT. Its difference is what it would"
  echo "save (negative) or cost."
  echo
  echo "$redesign"
} | tee docs/bench-sql-profile.md
