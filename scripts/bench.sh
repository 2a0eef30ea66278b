#!/usr/bin/env bash
# The engine of `make bench`: throughput and latency of POST /payments (fresh
# payments and replays) read against the bare service (cmd/paymentsd-bare,
# the yardstick: the same two commits and the same Stripe call, nothing
# else), with the SQL ceiling of the same work measured by pgbench beside
# both, all in one run on one cluster with one emulator.
#
# Writes its report and plot to .tmp/bench/ (BENCHMARKS.md, bench.svg) with
# the results as JSON beside them; the committed BENCHMARKS.md and
# docs/bench.svg change only with BENCH_WRITE=1.
#
#   BENCH_DURATION=10s  the measured window of every run (2s for a quick run)
#   BENCH_CONNS=1,8,32,64
#   BENCH_WRITE=1       write BENCHMARKS.md and docs/bench.svg in the repository
#   BENCH_PROFILE=1     serve the service's Go profiles (PAYMENTSD_PPROF_ADDR)
#                       and the bare service's (paymentsd-bare -pprof) and,
#                       during their fresh and replay runs at 32
#                       connections, fetch a CPU profile of the window and
#                       its allocations (the service's blocking too; saved
#                       in .tmp/bench/profiles/); the report summarizes them
#                       and reads the service's CPU per request against the
#                       bare's, by where it goes
#   DATABASE_URL        the Postgres server to use; without it, the throwaway
#                       cluster of scripts/postgres.sh, which preloads
#                       pg_stat_statements (stopped again at exit if this
#                       script started it and no one else uses it)
#   BENCH_POOL_MAX_CONNS=N  give the service's connection pool, and the bare
#                       service's, N connections (pgx's pool_max_conns;
#                       paymentsd's default is 16)
#
# The database paymentsd_bench is dropped and created afresh on that server.
# Exit status: 0 when the run completed, whether or not the targets were met
# (the report says which); non-zero when the harness itself failed.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
duration=${BENCH_DURATION:-10s}
conns=${BENCH_CONNS:-1,8,32,64}
db=paymentsd_bench
work=$root/.tmp/bench
mkdir -p "$work" bin docs

say() { echo "bench: $*" >&2; }

# The command the report shows.
if [ -n "${MAKELEVEL:-}" ]; then command="make bench"; else command="scripts/bench.sh"; fi
[ -n "${BENCH_DURATION:-}" ] && command="BENCH_DURATION=$BENCH_DURATION $command"
[ -n "${BENCH_CONNS:-}" ] && command="BENCH_CONNS=$BENCH_CONNS $command"
[ -n "${BENCH_POOL_MAX_CONNS:-}" ] && command="BENCH_POOL_MAX_CONNS=$BENCH_POOL_MAX_CONNS $command"
[ -n "${BENCH_PROFILE:-}" ] && command="BENCH_PROFILE=$BENCH_PROFILE $command"
# (A password in DATABASE_URL is not shown.)
[ -n "${DATABASE_URL:-}" ] && command="DATABASE_URL='$(sed -E 's#(://[^:/@]*):[^@]*@#\1:xxxxx@#' <<<"$DATABASE_URL")' $command"

if ! command -v pgbench >/dev/null 2>&1; then
  say "installing Debian's postgresql-client for pgbench"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq postgresql-client >&2
fi

if [ -n "${BENCH_WRITE:-}" ]; then
  md=BENCHMARKS.md svg=docs/bench.svg
else
  md=$work/BENCHMARKS.md svg=$work/bench.svg
fi

say "building bin/paymentsd, bin/paymentsd-bare and bin/paymentsd-bench"
go build -o bin/paymentsd ./cmd/paymentsd
go build -o bin/paymentsd-bare ./cmd/paymentsd-bare
go build -o bin/paymentsd-bench ./cmd/paymentsd-bench

pids=()
release_postgres=false
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if $release_postgres; then
    scripts/postgres.sh release $$ || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -n "${DATABASE_URL:-}" ]; then
  admin_url=$DATABASE_URL
else
  # Released at exit: stopped only if this run started it and no one else
  # (make run, make test) uses it by then.
  release_postgres=true
  admin_url=$(scripts/postgres.sh acquire $$)
fi

say "creating database $db"
bench_url=$(bin/paymentsd-bench setup -admin-url "$admin_url" -db "$db")
DATABASE_URL=$bench_url bin/paymentsd migrate >"$work/migrate.log"
service_url=$bench_url
if [ -n "${BENCH_POOL_MAX_CONNS:-}" ]; then
  case $service_url in
    *://*\?*) service_url="$service_url&pool_max_conns=$BENCH_POOL_MAX_CONNS" ;;
    *://*) service_url="$service_url?pool_max_conns=$BENCH_POOL_MAX_CONNS" ;;
    *) service_url="$service_url pool_max_conns=$BENCH_POOL_MAX_CONNS" ;;
  esac
fi

emulator_addr=127.0.0.1:$(bin/paymentsd-bench free-port)
service_addr=127.0.0.1:$(bin/paymentsd-bench free-port)
bare_addr=127.0.0.1:$(bin/paymentsd-bench free-port)
pprof_addr= bare_pprof_addr= profile_args=()
if [ -n "${BENCH_PROFILE:-}" ]; then
  pprof_addr=127.0.0.1:$(bin/paymentsd-bench free-port)
  bare_pprof_addr=127.0.0.1:$(bin/paymentsd-bench free-port)
  rm -rf "$work/profiles"
  profile_args=(-pprof "http://$pprof_addr" -bare-pprof "http://$bare_pprof_addr"
    -profile-dir "$work/profiles" -go "$(command -v go)")
fi
say "starting the Stripe emulator on $emulator_addr, paymentsd on $service_addr and the bare service on $bare_addr (logs in .tmp/bench)"
bin/paymentsd stripefake --addr "$emulator_addr" 2>"$work/stripefake.log" &
pids+=($!)
bin/paymentsd-bench wait -url "http://$emulator_addr/_fake/stats" -timeout 30s
DATABASE_URL=$service_url PAYMENTSD_ADDR=$service_addr STRIPE_API_BASE=http://$emulator_addr \
  PAYMENTSD_LOG_LEVEL=warn PAYMENTSD_RATE_LIMIT=0 PAYMENTSD_PPROF_ADDR=$pprof_addr \
  bin/paymentsd serve 2>"$work/serve.log" &
service_pid=$!
pids+=($service_pid)
if ! bin/paymentsd-bench wait -url "http://$service_addr/readyz" -timeout 60s; then
  say "paymentsd did not start; its log:"
  tail -n 30 "$work/serve.log" >&2
  exit 1
fi

users=$work/users.jsonl
: >"$users"
for i in 1 2 3 4 5 6 7 8; do
  DATABASE_URL=$bench_url bin/paymentsd users create --email "bench-$i@example.com" >>"$users"
done

DATABASE_URL=$service_url STRIPE_API_BASE=http://$emulator_addr \
  bin/paymentsd-bare -addr "$bare_addr" ${bare_pprof_addr:+-pprof "$bare_pprof_addr"} -users "$users" 2>"$work/bare.log" &
bare_pid=$!
pids+=($bare_pid)
if ! bin/paymentsd-bench wait -url "http://$bare_addr/healthz" -timeout 60s; then
  say "paymentsd-bare did not start; its log:"
  tail -n 30 "$work/bare.log" >&2
  exit 1
fi

say "measuring at $conns connections, $duration per run"
bin/paymentsd-bench run \
  -service "http://$service_addr" -bare "http://$bare_addr" -emulator "http://$emulator_addr" \
  -admin-url "$admin_url" -db-url "$bench_url" -db "$db" \
  -users "$users" -conns "$conns" -duration "$duration" \
  -pgbench "$(command -v pgbench)" -scripts bench/pgbench "${profile_args[@]}" \
  -json "$work/results.json" -md "$md" -svg "$svg" \
  -command "$command"

# Both services must have survived the run.
for name in paymentsd:serve:$service_pid paymentsd-bare:bare:$bare_pid; do
  IFS=: read -r prog log pid <<<"$name"
  if ! kill -0 "$pid" 2>/dev/null; then
    say "$prog exited during the run; its log:"
    tail -n 30 "$work/$log.log" >&2
    exit 1
  fi
  if [ -s "$work/$log.log" ]; then
    say "$prog logged $(wc -l <"$work/$log.log") lines: see .tmp/bench/$log.log"
  fi
done
if [ -z "${BENCH_WRITE:-}" ]; then
  say "the report is in ${md#"$root"/} (BENCH_WRITE=1 writes BENCHMARKS.md and docs/bench.svg instead)"
fi
