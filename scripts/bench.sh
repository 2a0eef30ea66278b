#!/usr/bin/env bash
# The engine of `make bench`: throughput and latency of POST /payments (fresh
# payments and replays) against the SQL ceiling of the same work, measured
# with pgbench in the same run on the same cluster. Writes BENCHMARKS.md and
# docs/bench.svg.
#
#   BENCH_DURATION=10s  the measured window of every run (2s for a quick run)
#   BENCH_CONNS=1,8,32,64
#   DATABASE_URL        the Postgres server to use; without it, the throwaway
#                       cluster of scripts/postgres.sh (stopped again at exit
#                       if this script started it and no one else uses it)
#   BENCH_CPUPROFILE=F  run the service under a CPU profiler and write the
#                       profile to F (read it with `go tool pprof -top bin/paymentsd-profiled F`)
#   BENCH_POOL_MAX_CONNS=N  give the service's connection pool N connections
#                       (pgx's pool_max_conns; its default is max(4, CPUs))
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
# (A password in DATABASE_URL is not shown.)
[ -n "${DATABASE_URL:-}" ] && command="DATABASE_URL='$(sed -E 's#(://[^:/@]*):[^@]*@#\1:xxxxx@#' <<<"$DATABASE_URL")' $command"

if ! command -v pgbench >/dev/null 2>&1; then
  say "installing Debian's postgresql-client for pgbench"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq postgresql-client >&2
fi

say "building bin/paymentsd and bin/paymentsd-bench"
go build -o bin/paymentsd ./cmd/paymentsd
go build -o bin/paymentsd-bench ./cmd/paymentsd-bench
serve=(bin/paymentsd serve)
if [ -n "${BENCH_CPUPROFILE:-}" ]; then
  go build -o bin/paymentsd-profiled ./cmd/paymentsd-bench/profiled
  serve=(bin/paymentsd-profiled serve)
fi

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
say "starting the Stripe emulator on $emulator_addr and paymentsd on $service_addr (logs in .tmp/bench)"
bin/paymentsd stripefake --addr "$emulator_addr" 2>"$work/stripefake.log" &
pids+=($!)
bin/paymentsd-bench wait -url "http://$emulator_addr/_fake/stats" -timeout 30s
DATABASE_URL=$service_url PAYMENTSD_ADDR=$service_addr STRIPE_API_BASE=http://$emulator_addr \
  PAYMENTSD_LOG_LEVEL=warn PAYMENTSD_RATE_LIMIT=0 BENCH_CPUPROFILE=${BENCH_CPUPROFILE:-} \
  "${serve[@]}" 2>"$work/serve.log" &
pids+=($!)
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

say "measuring at $conns connections, $duration per run"
bin/paymentsd-bench run \
  -service "http://$service_addr" -emulator "http://$emulator_addr" \
  -admin-url "$admin_url" -db-url "$bench_url" -db "$db" \
  -users "$users" -conns "$conns" -duration "$duration" \
  -pgbench "$(command -v pgbench)" -scripts bench/pgbench \
  -json "$work/results.json" -md BENCHMARKS.md -svg docs/bench.svg \
  -command "$command"

# The service must have survived the run.
if ! kill -0 "${pids[1]}" 2>/dev/null; then
  say "paymentsd exited during the run; its log:"
  tail -n 30 "$work/serve.log" >&2
  exit 1
fi
if [ -s "$work/serve.log" ]; then
  say "paymentsd logged $(wc -l <"$work/serve.log") warning or error lines: see .tmp/bench/serve.log"
fi
