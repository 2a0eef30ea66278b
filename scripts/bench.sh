#!/usr/bin/env bash
# The engine of `make bench`: throughput and latency of POST /payments (fresh
# payments and replays) read against two bare services
# (harness/cmd/paymentsd-bare, the yardsticks: the same two commits and the
# same Stripe call, nothing else), one over the service's own SQL (the
# engine's cost) and one over the least SQL that does the job, on a schema
# of its own (-sql least, harness/bench/least: the design's cost), with the
# SQL ceilings of both measured by pgbench beside them, all in one run on
# one cluster with one emulator. The bench and the bare service are built from the harness/
# module; the service and the emulator from their own.
#
# Writes its report and plot to .tmp/bench/ (BENCHMARKS.md, bench.svg, bench-report.md) with
# the results as JSON beside them; the committed BENCHMARKS.md, docs/bench-report.md and
# docs/bench.svg change only with BENCH_WRITE=1.
#
#   BENCH_DURATION=10s  the measured window of every run (2s for a quick run)
#   BENCH_CONNS=1,8,32,64
#   BENCH_WRITE=1       write BENCHMARKS.md, docs/bench-report.md and docs/bench.svg
#   BENCH_PROFILE=1     run the service's profiled build, which serves its Go
#                       profiles (bin/paymentsd-profiled -pprof: paymentsd's
#                       own command line plus net/http/pprof, which the
#                       paymentsd binary does not link), serve the bare
#                       service's (paymentsd-bare -pprof) and,
#                       in fresh and replay runs of their own at 32
#                       connections, after the judged ones and not judged,
#                       fetch a CPU profile of the window and
#                       its allocations (the service's blocking too; saved
#                       in .tmp/bench/profiles/); the report summarizes them
#                       and reads the service's CPU per request against the
#                       bare's, by where it goes
#   DATABASE_URL        the Postgres server to use; without it, a throwaway
#                       cluster of the bench's own (scripts/postgres.sh in
#                       .tmp/postgres-bench), which preloads
#                       pg_stat_statements and is sized for the machine
#                       (stopped again at exit if this script started it and
#                       no one else uses it)
#   BENCH_POOL_MAX_CONNS=N  give the service's connection pool, and the bare
#                       service's, N connections (pgx's pool_max_conns;
#                       paymentsd's default is 16)
#   BENCH_FILL=N        (make bench-fill: N defaults to 10000000) "flat as it
#                       grows": measure at 32 connections on the empty
#                       database as usual (BENCH_CONNS defaults to 32 and
#                       must include it), then stop the service and the bare
#                       service, fill the database with N finished keys and
#                       all the service leaves behind them
#                       (harness/bench/fill.go: 10 M take about 7 minutes
#                       and 23 GB on 2 cores), start both again (the service
#                       with PAYMENTSD_REAPER_INTERVAL=5s), wait for its
#                       reaper to work off the fill's backlog, and measure
#                       fresh payments and replays of filled keys again,
#                       with the reaper around them and the size of every
#                       table and index after; the report's "Ten million
#                       keys" section reads them against the empty database
#   BENCH_KEEP_DB=1     with BENCH_FILL, keep the filled database
#                       (paymentsd_bench_fill) instead of dropping it at exit
#
# The database paymentsd_bench (paymentsd_bench_fill with BENCH_FILL) is
# dropped and created afresh on that server; a filled one is dropped again
# at exit, however the run ends, unless BENCH_KEEP_DB=1.
# Exit status: 0 when the run completed, whether or not the targets were met
# (the report says which); non-zero when the harness itself failed.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
duration=${BENCH_DURATION:-10s}
fill=${BENCH_FILL:-}
# The service's reaper interval on the filled database: short enough that
# the reaper runs several times during the filled runs.
reaper_interval=5s
db=paymentsd_bench
work=$root/.tmp/bench
mkdir -p "$work" bin docs

say() { echo "bench: $*" >&2; }

if [ -n "$fill" ]; then
  if ! [[ $fill =~ ^[1-9][0-9]*$ ]]; then
    say "BENCH_FILL must be a number of keys, got '$fill'"
    exit 2
  fi
  conns=${BENCH_CONNS:-32}
  case ",${conns// /}," in
    *,32,*) ;;
    *) say "BENCH_FILL measures the filled database at 32 connections: BENCH_CONNS must include 32"; exit 2 ;;
  esac
  db=paymentsd_bench_fill
else
  conns=${BENCH_CONNS:-1,8,32,64}
fi

# The command the report shows.
target=bench
[ -n "$fill" ] && target=bench-fill
if [ -n "${MAKELEVEL:-}" ]; then command="make $target"; else command="scripts/bench.sh"; fi
if [ -n "$fill" ] && { [ "$fill" != 10000000 ] || [ -z "${MAKELEVEL:-}" ]; }; then command="BENCH_FILL=$fill $command"; fi
[ -n "${BENCH_DURATION:-}" ] && command="BENCH_DURATION=$BENCH_DURATION $command"
[ -n "${BENCH_CONNS:-}" ] && command="BENCH_CONNS=$BENCH_CONNS $command"
[ -n "${BENCH_POOL_MAX_CONNS:-}" ] && command="BENCH_POOL_MAX_CONNS=$BENCH_POOL_MAX_CONNS $command"
[ -n "${BENCH_PROFILE:-}" ] && command="BENCH_PROFILE=$BENCH_PROFILE $command"
# The commit measured, for the report: the checkout's HEAD, and whether
# its tracked files differed from it (BENCHMARKS.md and docs/bench.svg
# aside, which this script writes).
code=
if head=$(git rev-parse HEAD 2>/dev/null); then
  code="commit $head"
  if [ -n "$(git status --porcelain --untracked-files=no -- . ':!BENCHMARKS.md' ':!docs/bench.svg' ':!docs/bench-report.md')" ]; then
    code="$code, with uncommitted changes"
  fi
fi
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

say "building bin/paymentsd, bin/stripefake, bin/paymentsd-bare and bin/paymentsd-bench"
go build -o bin/paymentsd ./cmd/paymentsd
go -C emulator build -o "$root/bin/stripefake" ./cmd/stripefake
go -C harness build -o "$root/bin/paymentsd-bare" ./cmd/paymentsd-bare
go -C harness build -o "$root/bin/paymentsd-bench" ./cmd/paymentsd-bench
if [ -n "${BENCH_PROFILE:-}" ]; then
  say "building bin/paymentsd-profiled (BENCH_PROFILE)"
  go -C harness build -o "$root/bin/paymentsd-profiled" ./cmd/paymentsd-profiled
fi

pids=()
release_postgres=false
drop_db=false
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if $drop_db; then
    say "dropping the filled database $db (BENCH_KEEP_DB=1 keeps it)"
    bin/paymentsd-bench drop -admin-url "$admin_url" -db "$db" || say "could not drop database $db: drop it by hand"
  fi
  if $release_postgres; then
    scripts/postgres.sh release $$ || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -n "${DATABASE_URL:-}" ]; then
  admin_url=$DATABASE_URL
else
  # A cluster of the bench's own (.tmp/postgres-bench), set as a production
  # server on this machine would be: a quarter of its memory for
  # shared_buffers (at most 8 GB), and checkpoints far enough apart that a
  # run does not rewrite every page it touches in full into the WAL. With
  # Postgres's defaults (256 MB here), ten million keys' indexes no longer
  # fit and the filled database measures the buffer pool, for the service
  # and the bare service alike. Released at exit: stopped only if this run
  # started it and no one else uses it by then.
  mem_mb=$(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo 2>/dev/null || echo 1024)
  buffers_mb=$(( mem_mb / 4 > 8192 ? 8192 : (mem_mb / 4 < 256 ? 256 : mem_mb / 4) ))
  export PAYMENTSD_PGDATA=$root/.tmp/postgres-bench
  export PAYMENTSD_PG_SETTINGS="-c shared_buffers=${buffers_mb}MB -c max_wal_size=8GB -c checkpoint_timeout=15min"
  release_postgres=true
  admin_url=$(scripts/postgres.sh acquire $$)
fi

say "creating database $db"
bench_url=$(bin/paymentsd-bench setup -admin-url "$admin_url" -db "$db")
if [ -n "$fill" ] && [ -z "${BENCH_KEEP_DB:-}" ]; then drop_db=true; fi
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
least_addr=127.0.0.1:$(bin/paymentsd-bench free-port)
# The service: paymentsd, or its profiled build serving pprof.
service=(bin/paymentsd)
pprof_addr= bare_pprof_addr= profile_args=()
if [ -n "${BENCH_PROFILE:-}" ]; then
  pprof_addr=127.0.0.1:$(bin/paymentsd-bench free-port)
  service=(bin/paymentsd-profiled -pprof "$pprof_addr")
  bare_pprof_addr=127.0.0.1:$(bin/paymentsd-bench free-port)
  rm -rf "$work/profiles"
  profile_args=(-pprof "http://$pprof_addr" -bare-pprof "http://$bare_pprof_addr"
    -profile-dir "$work/profiles" -go "$(command -v go)")
fi
say "starting the Stripe emulator on $emulator_addr, paymentsd on $service_addr and the bare service on $bare_addr (logs in .tmp/bench)"
bin/stripefake --addr "$emulator_addr" 2>"$work/stripefake.log" &
emulator_pid=$!
pids+=($emulator_pid)
bin/paymentsd-bench wait -url "http://$emulator_addr/_fake/stats" -timeout 30s

# start_service [VAR=value…] starts paymentsd serve (its log appended to
# .tmp/bench/serve.log) with any extra settings, and waits until it is ready.
start_service() {
  env DATABASE_URL="$service_url" PAYMENTSD_ADDR="$service_addr" STRIPE_API_BASE="http://$emulator_addr" \
    PAYMENTSD_LOG_LEVEL=warn PAYMENTSD_RATE_LIMIT=0 "$@" \
    "${service[@]}" serve 2>>"$work/serve.log" &
  service_pid=$!
  pids+=($service_pid)
  if ! bin/paymentsd-bench wait -url "http://$service_addr/readyz" -timeout 60s; then
    say "paymentsd did not start; its log:"
    tail -n 30 "$work/serve.log" >&2
    exit 1
  fi
}

# start_bare starts the bare service (its log appended to
# .tmp/bench/bare.log) and waits until it answers.
start_bare() {
  DATABASE_URL=$service_url STRIPE_API_BASE=http://$emulator_addr \
    bin/paymentsd-bare -addr "$bare_addr" ${bare_pprof_addr:+-pprof "$bare_pprof_addr"} -users "$users" 2>>"$work/bare.log" &
  bare_pid=$!
  pids+=($bare_pid)
  if ! bin/paymentsd-bench wait -url "http://$bare_addr/healthz" -timeout 60s; then
    say "paymentsd-bare did not start; its log:"
    tail -n 30 "$work/bare.log" >&2
    exit 1
  fi
}

# start_least starts the bare service over the least SQL (its log appended
# to .tmp/bench/least.log), with the same pool as the bare service's, and
# waits until it answers; it creates its schema, leastsql, on its first
# start.
start_least() {
  DATABASE_URL=$service_url STRIPE_API_BASE=http://$emulator_addr \
    bin/paymentsd-bare -sql least -addr "$least_addr" -users "$users" 2>>"$work/least.log" &
  least_pid=$!
  pids+=($least_pid)
  if ! bin/paymentsd-bench wait -url "http://$least_addr/healthz" -timeout 60s; then
    say "paymentsd-bare -sql least did not start; its log:"
    tail -n 30 "$work/least.log" >&2
    exit 1
  fi
}

# stop PID stops a process this script started, waits for it, and forgets it.
stop() {
  local pid keep=()
  kill -TERM "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
  for pid in "${pids[@]}"; do [ "$pid" = "$1" ] || keep+=("$pid"); done
  pids=("${keep[@]}")
}

: >"$work/serve.log"
: >"$work/bare.log"
: >"$work/least.log"
start_service

users=$work/users.jsonl
: >"$users"
for i in 1 2 3 4 5 6 7 8; do
  DATABASE_URL=$bench_url bin/paymentsd users create --email "bench-$i@example.com" >>"$users"
done

start_bare
start_least

say "measuring at $conns connections, $duration per run"
bin/paymentsd-bench run \
  -service "http://$service_addr" -bare "http://$bare_addr" -least "http://$least_addr" -emulator "http://$emulator_addr" \
  -admin-url "$admin_url" -db-url "$bench_url" -db "$db" \
  -users "$users" -conns "$conns" -duration "$duration" \
  -pgbench "$(command -v pgbench)" -scripts harness/bench/pgbench "${profile_args[@]}" \
  -json "$work/results.json" -md "$md" -svg "$svg" \
  -pids "service=$service_pid,bare=$bare_pid,least=$least_pid,emulator=$emulator_pid" -command "$command" -code "$code"

if [ -n "$fill" ]; then
  # Fill drops the indexes and builds them again: nothing may use the
  # database meanwhile.
  say "stopping paymentsd and the bare service to fill the database with $fill keys"
  stop "$service_pid"
  stop "$bare_pid"
  # The filled point reads the service against its own empty-database
  # figures and the same-SQL bare: the least-SQL bare is not needed again.
  stop "$least_pid"
  least_pid=
  bin/paymentsd-bench fill -json "$work/results.json" -db-url "$bench_url" -users "$users" -keys "$fill"
  say "starting paymentsd (PAYMENTSD_REAPER_INTERVAL=$reaper_interval) and the bare service on the filled database"
  start_service PAYMENTSD_REAPER_INTERVAL=$reaper_interval
  start_bare
  bin/paymentsd-bench run-filled -json "$work/results.json" \
    -service "http://$service_addr" -bare "http://$bare_addr" -db-url "$bench_url" -admin-url "$admin_url" \
    -users "$users" -duration "$duration" -reaper-interval "$reaper_interval" \
    -pgbench "$(command -v pgbench)" -scripts harness/bench/pgbench -md "$md" -svg "$svg" \
    -pids "service=$service_pid,bare=$bare_pid,emulator=$emulator_pid"
fi

# Both services must have survived the run.
for name in paymentsd:serve:$service_pid paymentsd-bare:bare:$bare_pid paymentsd-bare-least:least:$least_pid; do
  IFS=: read -r prog log pid <<<"$name"
  [ -n "$pid" ] || continue
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
  say "the report is in ${md#"$root"/} (BENCH_WRITE=1 writes BENCHMARKS.md, docs/bench-report.md and docs/bench.svg instead)"
fi
