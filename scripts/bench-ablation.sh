#!/usr/bin/env bash
# Where the SQL ceiling's distance from the least SQL goes, layer by layer:
# fresh.sql (the service's two transactions of a fresh payment) on the
# service's schema, then on copies of it with one more layer of its work
# taken away each (harness/bench/ablation/N-*.sql, applied in order: the
# row rules, the partial indexes of background work, the value rules, the
# payments' lookup indexes), and least.sql (harness/bench/least) beside
# them, all at 32 connections on one server. A diagnostic, never a
# yardstick: each layer it removes is a rule or a lookup the service keeps
# because something needs it (each file says what). Beside the layers it
# measures one redesign that keeps every lookup (redesign.sql, run with
# redesign-fresh.sql), and it reads the WAL a payment and the share of HOT
# updates of the keys and the payments on every schema. With BEFORE set,
# it also runs an earlier commit's fresh.sql on that commit's schema:
# issue 29's before and after.
#
# The runs rotate their order every round, so that no variant always runs
# first or after the same neighbour; each variant's throughput is the mean
# of its rounds, and its share is of least.sql's mean.
#
#   ABLATION_ROUNDS=5     rounds (each runs every variant once)
#   ABLATION_SECONDS=12   seconds a pgbench run
#   ABLATION_WRITE=1      also write the table, with the date, commit and
#                         command, to docs/bench-ablation.md (the committed
#                         copy; do not edit it by hand)
#   BEFORE=REV            also measure commit REV (built in a worktree
#                         under .tmp, removed at exit) beside this one
#   DATABASE_URL          the server, as a URL (make bench-ablation runs
#                         this under scripts/with-postgres.sh, which sets it
#                         to its throwaway cluster when it is unset)
#
# Its databases, paymentsd_ablation_0 … _4, _redesign and _before, are
# dropped at exit.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
: "${DATABASE_URL:?set DATABASE_URL, or run make bench-ablation}"

rounds=${ABLATION_ROUNDS:-5}
seconds=${ABLATION_SECONDS:-12}
say() { echo "bench-ablation: $*" >&2; }
. scripts/bench-sql-lib.sh

need pgbench postgresql-client
go build -o bin/paymentsd ./cmd/paymentsd

layers=(harness/bench/ablation/[0-9]-*.sql)
dbs=()
before_tree=.tmp/ablation-before
cleanup() {
  drop_bench_dbs
  [ -z "${BEFORE:-}" ] || git worktree remove --force "$before_tree" >/dev/null 2>&1 || true
}
trap cleanup EXIT
if [ -n "${BEFORE:-}" ]; then
  before_rev=$(git rev-parse --short "$BEFORE^{commit}")
  say "building $before_rev in $before_tree"
  git worktree remove --force "$before_tree" >/dev/null 2>&1 || true
  git worktree add -q --detach "$before_tree" "$before_rev"
  go -C "$before_tree" build -o bin/paymentsd ./cmd/paymentsd
  [ -f "$before_tree/harness/bench/pgbench/fresh.sql" ] || { say "$before_rev has no harness/bench/pgbench/fresh.sql"; exit 1; }
fi

# The variants: the service's schema, then one more layer taken away each,
# then the redesign; the script each runs, and least.sql on the first.
variants=()
for i in $(seq 0 "${#layers[@]}"); do variants+=("$i"); done
variants+=(redesign)
[ -n "${BEFORE:-}" ] && variants+=(before)
declare -A script
for v in "${variants[@]}"; do
  d=paymentsd_ablation_$v
  dbs+=("$d")
  case $v in
    before)
      script[$d]=$before_tree/harness/bench/pgbench/fresh.sql
      bench_db "$d" "$before_tree/bin/paymentsd" ;;
    redesign)
      script[$d]=harness/bench/ablation/redesign-fresh.sql
      bench_db "$d" bin/paymentsd harness/bench/ablation/redesign.sql ;;
    0)
      script[$d]=harness/bench/pgbench/fresh.sql
      bench_db "$d" bin/paymentsd harness/bench/least/schema.sql ;;
    *)
      script[$d]=harness/bench/pgbench/fresh.sql
      bench_db "$d" bin/paymentsd "${layers[@]:0:$v}" ;;
  esac
done
say "fresh.sql on ${#dbs[@]} schemas and least.sql, $rounds rounds of ${seconds}s at 32 connections"
script[least]=harness/bench/pgbench/least.sql

# The server's CPU time, in clock ticks, when it runs on this machine: the
# postmaster's own, its exited children's (a run's backends, once pgbench
# has disconnected and the postmaster has reaped them) and its live
# children's (checkpointer, WAL writer, autovacuum). Throughput on two
# shared cores drifts from run to run; what a payment costs the server
# drifts much less. Found through the checkpointer, whose parent is the
# postmaster; empty when the server is elsewhere.
pm=$(psql -At "$DATABASE_URL" -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'")
pm=$(awk '{ print $4 }' "/proc/$pm/stat" 2>/dev/null || true)
[ -n "$pm" ] && [ "$(cat "/proc/$pm/comm" 2>/dev/null)" = postgres ] || pm=
hz=$(getconf CLK_TCK)
server_ticks() {
  local t c
  t=$(awk '{ print $14 + $15 + $16 + $17 }' "/proc/$pm/stat")
  for c in $(pgrep -P "$pm"); do
    t=$((t + $(awk '{ print $14 + $15 }' "/proc/$c/stat" 2>/dev/null || echo 0)))
  done
  echo "$t"
}

# run DB SCRIPT prints pgbench's payments/s, the payments, the server's
# CPU ticks over the run (0 when it is elsewhere) and the WAL it wrote, in
# bytes (the whole server's: the runs take turns).
run() {
  local out before=0 after=0 lsn wal
  lsn=$(psql -At "$DATABASE_URL" -c "SELECT pg_current_wal_lsn()")
  [ -n "$pm" ] && before=$(server_ticks)
  if ! out=$(bench_pgbench "$1" "$2"); then
    say "pgbench failed running $2 on $1:"
    echo "$out" >&2
    return 1
  fi
  if [ -n "$pm" ]; then
    # Until the postmaster has reaped the run's 32 backends (within 5 s:
    # an autovacuum worker may come and go meanwhile).
    local i
    for i in $(seq 50); do [ "$(pgrep -P "$pm" | wc -l)" -gt "$children" ] || break; sleep 0.1; done
    after=$(server_ticks)
  fi
  wal=$(psql -At "$DATABASE_URL" -c "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '$lsn')")
  awk -v ticks=$((after - before)) -v wal="$wal" '/^tps/ { tps = $3 } /actually processed/ { n = $NF }
    END { printf "%.0f %d %d %.0f\n", tps, n, ticks, wal }' <<<"$out"
}
[ -n "$pm" ] && children=$(pgrep -P "$pm" | wc -l)
names=("${dbs[@]}" least)
declare -A sum runs payments ticks walbytes
n=${#names[@]}
for r in $(seq 1 "$rounds"); do
  line="round $r:"
  for k in $(seq 0 $((n - 1))); do
    name=${names[$(((k + r) % n))]}
    if [ "$name" = least ]; then res=$(run "${dbs[0]}" "${script[least]}"); else res=$(run "$name" "${script[$name]}"); fi
    read -r tps paid used wal <<<"$res"
    walbytes[$name]=$(( ${walbytes[$name]:-0} + wal ))
    sum[$name]=$(( ${sum[$name]:-0} + tps ))
    payments[$name]=$(( ${payments[$name]:-0} + paid ))
    ticks[$name]=$(( ${ticks[$name]:-0} + used ))
    runs[$name]="${runs[$name]:+${runs[$name]}, }$tps"
    line="$line $name $tps"
  done
  say "$line"
done

# cpu NAME prints the server's CPU µs a payment over NAME's runs, or – .
cpu() {
  if [ -z "$pm" ] || [ "${payments[$1]}" = 0 ]; then echo "–"; return; fi
  awk -v t="${ticks[$1]}" -v n="${payments[$1]}" -v hz="$hz" 'BEGIN { printf "%.0f", 1e6 * t / hz / n }'
}

least=$(( sum[least] / rounds ))
# ratio A B prints A/B as a percentage, or – .
ratio() {
  if [ "$1" = – ] || [ "$2" = – ]; then echo "–"; return; fi
  awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f%%", 100 * a / b }'
}
# hot DB SCHEMA prints the share of HOT updates of the keys and of the
# payments in DB's SCHEMA over all its runs, as "keys / payments".
hot() {
  psql -At "$(url_of "$1")" -c "SELECT string_agg(coalesce(round(100.0 * n_tup_hot_upd / nullif(n_tup_upd, 0)) || '%', '–'), ' / ' ORDER BY relname)
    FROM pg_stat_user_tables WHERE schemaname = '$2' AND relname IN ('idempotency_keys', 'payments')"
}
# row WHAT DB NAME GAIN prints one table row for NAME's runs on DB.
row() {
  local mean=$(( sum[$3] / rounds )) schema=public
  [ "$3" = least ] && schema=leastsql
  echo "| $1 | $mean | ${runs[$3]} | $(ratio "$mean" "$least") | ${4:-–} | $(cpu "$3") | $(ratio "$(cpu "$3")" "$(cpu least)") | $(walkib "$3") | $(hot "$2" "$schema") |"
}
# walkib NAME prints the WAL a payment of NAME's runs, in KiB.
walkib() { awk -v b="${walbytes[$1]}" -v n="${payments[$1]}" 'BEGIN { printf "%.2f KiB", b / n / 1024 }'; }
# gain A B prints A over B as a signed percentage.
gain() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.0f%%", 100 * (a / b - 1) }'; }
# table prints the result as Markdown.
table() {
  local head="| schema | payments/s (mean of $rounds) | runs | share of least.sql | gain | server CPU µs a payment | against least.sql's | WAL a payment | HOT updates, keys / payments |"
  local rule="|---|--:|---|--:|--:|--:|--:|--:|--:|"
  echo "Each row takes one more layer of the service's schema away (harness/bench/ablation/); its gain"
  echo "is over the row above."
  echo
  echo "$head"
  echo "$rule"
  local i d what prev=
  for i in $(seq 0 "${#layers[@]}"); do
    d=${dbs[$i]}
    what="the service's"
    if [ "$i" -gt 0 ]; then
      what=$(basename "${layers[$((i - 1))]}" .sql)
      what="− the ${what#*-}"
      what=${what//-/ }
    fi
    row "$what" "$d" "$d" "${prev:+$(gain $(( sum[$d] / rounds )) "$prev")}"
    prev=$(( sum[$d] / rounds ))
  done
  row least.sql "${dbs[0]}" least ""
  echo
  echo "The redesign (harness/bench/ablation/redesign.sql and redesign-fresh.sql) keeps every layer and"
  echo "every lookup, and moves the indexes that keep a fresh payment's two updates from being HOT; its"
  echo "gain is over the service's schema."
  echo
  echo "$head"
  echo "$rule"
  d=${dbs[${#layers[@]}+1]}
  row "the service's, redesigned" "$d" "$d" "$(gain $(( sum[$d] / rounds )) $(( sum[${dbs[0]}] / rounds )))"
  [ -n "${BEFORE:-}" ] || return 0
  echo
  echo "Before and after: commit $before_rev's fresh.sql on its own schema (migrated by its own"
  echo "binary), beside this commit's; the gain is this commit's over it."
  echo
  echo "$head"
  echo "$rule"
  d=paymentsd_ablation_before
  row "commit $before_rev's" "$d" "$d" ""
  row "this commit's" "${dbs[0]}" "${dbs[0]}" "$(gain $(( sum[${dbs[0]}] / rounds )) $(( sum[$d] / rounds )))"
}

if [ "${ABLATION_WRITE:-}" != 1 ]; then
  table
  exit 0
fi
{
  echo "# Where the SQL ceiling's distance from the least SQL goes"
  echo
  echo "Written by \`ABLATION_WRITE=1 make bench-ablation\` (scripts/bench-ablation.sh); do not edit by hand."
  echo "A diagnostic, not a yardstick: every layer it takes away is a rule or a lookup the service keeps"
  echo "because something needs it, and each file in \`harness/bench/ablation/\` says what."
  echo
  echo "- **Date:** $(date -u '+%Y-%m-%d %H:%M') (UTC)"
  echo "- **Code:** commit $(git rev-parse HEAD)"
  echo "- **Runs:** pgbench \`-M prepared -n -T $seconds -c 32 -j 2\`, $rounds rounds, each running every schema once in"
  echo "  rotating order, on one server; fresh.sql on each schema, least.sql on the least schema"
  echo
  table
} | tee docs/bench-ablation.md
