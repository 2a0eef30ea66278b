# Sourced by scripts/bench-ablation.sh and scripts/bench-sql-profile.sh,
# the two diagnostics that run pgbench scripts (harness/bench/pgbench) on
# databases of their own: a missing tool installed, those databases made
# and dropped, and one pgbench run at 32 connections. The sourcing script
# defines say, and sets DATABASE_URL (the server) and seconds (a run's).

# need CMD PACKAGE installs Debian's PACKAGE when CMD is missing.
need() {
  command -v "$1" >/dev/null 2>&1 && return
  say "installing Debian's $2 for $1"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq "$2" >&2
}

# url_of DB is DATABASE_URL with its database replaced.
url_of() { sed -E "s#^([a-z]+://[^/]*/)[^?]*#\1$1#" <<<"$DATABASE_URL"; }

# bench_db DB MIGRATE [FILE...] makes database DB afresh on the server,
# migrated by the paymentsd binary MIGRATE, with 100 users, then runs each
# FILE in it. drop_bench_dbs drops every database it made.
bench_dbs=()
bench_db() {
  local db=$1 migrate=$2 f
  shift 2
  bench_dbs+=("$db")
  PGOPTIONS='-c client_min_messages=warning' psql -q "$DATABASE_URL" -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
  DATABASE_URL=$(url_of "$db") "$migrate" migrate >/dev/null
  local args=(-q -v ON_ERROR_STOP=1 -c "INSERT INTO users (email, api_key_hash)
    SELECT 'bench-' || g || '@example.com', sha256(('bench-' || g)::bytea) FROM generate_series(1, 100) AS g")
  for f in "$@"; do args+=(-f "$f"); done
  psql "${args[@]}" "$(url_of "$db")" >/dev/null
}
drop_bench_dbs() {
  local db
  for db in "${bench_dbs[@]}"; do psql -q "$DATABASE_URL" -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true; done
}

# bench_pgbench DB SCRIPT [COMMAND...] runs SCRIPT on DB for $seconds at 32
# connections, its users' id range given as umin and umax, under COMMAND
# when one is given (perf record ... --), and prints pgbench's output.
bench_pgbench() {
  local db=$1 script=$2 umin umax
  shift 2
  read -r umin umax < <(psql -At -F ' ' "$(url_of "$db")" -c "SELECT min(id), max(id) FROM users")
  "$@" pgbench -M prepared -n -T "$seconds" -c 32 -j 2 -D umin="$umin" -D umax="$umax" -f "$script" "$(url_of "$db")" 2>&1
}
