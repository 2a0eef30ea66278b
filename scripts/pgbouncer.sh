#!/usr/bin/env bash
# A throwaway PgBouncer in transaction pooling mode in front of a Postgres
# server, as many deployments and managed services run paymentsd: for
# running the service, or the tests, through it.
#
#   scripts/pgbouncer.sh start URL   start one in front of the server of
#                                    Postgres URL URL; print the pooled URL
#   scripts/pgbouncer.sh stop        stop it and remove its directory
#   scripts/pgbouncer.sh run URL CMD...
#                                    start one, run CMD with TEST_POOLER_URL
#                                    set to the pooled URL, then stop it,
#                                    whatever way CMD ends
#
# The pooled URL names the database of URL and carries pgx's
# default_query_exec_mode=exec: PgBouncer 1.18, Debian 12's, keeps no
# prepared statement past a transaction. Every database of the server is
# reachable through it (a wildcard entry), under the user of URL; it does
# not create or drop databases (a pooler cannot, for a database with
# clients): use URL itself for that, as the tests' admin connection does
# (TEST_DATABASE_URL direct, TEST_POOLER_URL through this).
#
# PAYMENTSD_PGBOUNCER_SETTINGS adds lines to its [pgbouncer] section
# ("server_login_retry = 1", say).
#
# It listens on 127.0.0.1 only, at PAYMENTSD_PGBOUNCER_PORT or else the
# first free port from 56432, with no Unix socket; its files (config, pid,
# log) live in .tmp/pgbouncer (PAYMENTSD_PGBOUNCER_DIR overrides), which
# stop removes. It installs Debian's pgbouncer package when none is found,
# and runs it as the postgres user when invoked as root (PgBouncer refuses
# to run as root).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir=${PAYMENTSD_PGBOUNCER_DIR:-$root/.tmp/pgbouncer}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# port_taken: the port cannot be listened on (see postgres.sh).
port_taken() {
  port_busy "$1" && return 0
  command -v ss >/dev/null 2>&1 && [ -n "$(ss -Htan exclude time-wait "( sport = :$1 )" 2>/dev/null)" ]
}

choose_port() {
  if [ -n "${PAYMENTSD_PGBOUNCER_PORT:-}" ]; then echo "$PAYMENTSD_PGBOUNCER_PORT"; return; fi
  local p
  for p in $(seq 56432 56531); do
    port_taken "$p" || { echo "$p"; return; }
  done
  echo "pgbouncer.sh: no free port in 56432-56531" >&2
  exit 1
}

find_bin() {
  local b
  for b in /usr/sbin/pgbouncer /usr/bin/pgbouncer; do
    [ -x "$b" ] && { echo "$b"; return; }
  done
  command -v pgbouncer 2>/dev/null || return 1
}

install_pgbouncer() {
  echo "pgbouncer.sh: installing Debian's pgbouncer package" >&2
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -qq pgbouncer >&2; then
    apt-get update -qq >&2
    apt-get install -y -qq pgbouncer >&2
  fi
}

as_pg() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# parse_url URL sets user, host, port and database from a Postgres URL
# (postgres://user[:password]@host[:port]/database[?...]).
parse_url() {
  local rest=${1#*://}
  rest=${rest%%\?*}
  local auth=postgres hostport=$rest
  if [[ $rest == *@* ]]; then
    auth=${rest%%@*}
    hostport=${rest#*@}
  fi
  user=${auth%%:*}
  database=postgres
  if [[ $hostport == */* ]]; then
    database=${hostport#*/}
    hostport=${hostport%%/*}
  fi
  [ -n "$database" ] || database=postgres
  host=${hostport%%:*}
  server_port=5432
  [[ $hostport == *:* ]] && server_port=${hostport##*:}
  [ -n "$host" ] || host=127.0.0.1
}

pid_of() { [ -s "$dir/pgbouncer.pid" ] && cat "$dir/pgbouncer.pid"; }

start() {
  local url=${1:?usage: pgbouncer.sh start URL}
  local bin
  bin=$(find_bin) || { install_pgbouncer; bin=$(find_bin); }
  if pid=$(pid_of) && kill -0 "$pid" 2>/dev/null; then
    echo "pgbouncer.sh: one runs already (process $pid, $dir); stop it first" >&2
    exit 1
  fi
  parse_url "$url"
  local port
  port=$(choose_port)
  rm -rf "$dir"
  mkdir -p "$dir"
  # trust, as the throwaway clusters here use; PgBouncer still wants the
  # user listed.
  printf '"%s" ""\n' "$user" >"$dir/userlist.txt"
  cat >"$dir/pgbouncer.ini" <<EOF
[databases]
* = host=$host port=$server_port user=$user

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
admin_users = $user
pool_mode = transaction
max_client_conn = 2000
; every test database gets a pool of its own: keep each small, and give
; a dropped database's idle server connections back soon, so that many
; databases stay within the server's max_connections
default_pool_size = 10
server_idle_timeout = 5
ignore_startup_parameters = extra_float_digits
pidfile = $dir/pgbouncer.pid
logfile = $dir/pgbouncer.log
${PAYMENTSD_PGBOUNCER_SETTINGS:-}
EOF
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql postgres
    chown -R postgres "$dir"
  fi
  if ! as_pg "$bin" -d -q "$dir/pgbouncer.ini" </dev/null >/dev/null 2>&1; then
    echo "pgbouncer.sh: pgbouncer did not start; the end of $dir/pgbouncer.log:" >&2
    tail -n 8 "$dir/pgbouncer.log" >&2 || true
    exit 1
  fi
  for _ in $(seq 1 50); do
    if port_busy "$port"; then
      echo "postgres://$user@127.0.0.1:$port/$database?sslmode=disable&default_query_exec_mode=exec"
      return
    fi
    sleep 0.1
  done
  echo "pgbouncer.sh: pgbouncer does not answer on 127.0.0.1:$port; see $dir/pgbouncer.log" >&2
  stop
  exit 1
}

stop() {
  local pid
  if pid=$(pid_of) && kill -0 "$pid" 2>/dev/null; then
    kill -INT "$pid" 2>/dev/null || true # SIGINT: shut down at once
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -rf "$dir"
}

run() {
  local url=${1:?usage: pgbouncer.sh run URL CMD...}
  shift
  [ $# -gt 0 ] || { echo "usage: pgbouncer.sh run URL CMD..." >&2; exit 2; }
  local pooled
  trap stop EXIT
  trap 'exit 130' INT TERM
  pooled=$(start "$url")
  echo "pgbouncer.sh: PgBouncer in transaction pooling mode at ${pooled%%\?*}" >&2
  TEST_POOLER_URL=$pooled "$@"
}

case "${1:-}" in
  start) start "${2:-}" ;;
  stop) stop ;;
  run) shift; run "$@" ;;
  *) echo "usage: $0 start URL|stop|run URL CMD..." >&2; exit 2 ;;
esac
