#!/usr/bin/env bash
# A throwaway local Postgres cluster for `make run`, `make test` and
# `make bench` when the environment names none.
#
#   scripts/postgres.sh start          start (or reuse) the cluster; print its URL
#   scripts/postgres.sh stop           stop it, whoever uses it
#   scripts/postgres.sh url            print its URL
#   scripts/postgres.sh status         say whether it runs, and who holds it
#   scripts/postgres.sh acquire PID    start or reuse it for process PID (a
#                                      script's $$); print its URL
#   scripts/postgres.sh release PID    PID is done with it: stop it only if
#                                      an acquire started it and no other
#                                      live process holds it
#   scripts/postgres.sh keep           never stop it on release (make run)
#
# acquire and release count who uses the cluster, so `make test` never stops
# a cluster it did not start, nor one that `make run` or another test run
# took up meanwhile. The holders are files in .tmp/<name>.holders/, one per
# process id; a holder whose process is gone no longer counts. A lock file
# (flock) keeps concurrent acquires and releases apart.
#
# PAYMENTSD_PG_SETTINGS adds server settings ("-c name=value ...") to those
# of a cluster this script starts (a running one keeps its own).
#
# The cluster lives in .tmp/postgres (PAYMENTSD_PGDATA overrides) and listens
# on 127.0.0.1 at PAYMENTSD_PGPORT, or else at the first free port from 55432,
# remembered in the data directory so every later call finds it again. It
# installs Debian's postgresql package when no initdb is found, and runs the
# server as the postgres user when invoked as root, since Postgres refuses to
# run as root.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
pgdata=${PAYMENTSD_PGDATA:-$root/.tmp/postgres}
portfile="$root/.tmp/$(basename "$pgdata").port"
holders="$root/.tmp/$(basename "$pgdata").holders"
autostop="$root/.tmp/$(basename "$pgdata").autostop"
lockfile="$root/.tmp/$(basename "$pgdata").lock"

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# port_taken: the port cannot be listened on. Something answers there, or a
# connection holds it as its own end, which a dial cannot see: the ports
# below lie in Linux's range of ephemeral ports, and a server started on
# such a port fails with "Address already in use". ss sees those (where it
# is installed: iproute2).
port_taken() {
  port_busy "$1" && return 0
  command -v ss >/dev/null 2>&1 && [ -n "$(ss -Htan exclude time-wait "( sport = :$1 )" 2>/dev/null)" ]
}

choose_port() {
  if [ -n "${PAYMENTSD_PGPORT:-}" ]; then echo "$PAYMENTSD_PGPORT"; return; fi
  # A running cluster says its own port (line 4 of postmaster.pid).
  if [ -s "$pgdata/postmaster.pid" ] && [ "$(id -u)" = 0 -o -r "$pgdata/postmaster.pid" ]; then
    local running
    running=$(sed -n 4p "$pgdata/postmaster.pid" 2>/dev/null || true)
    if [ -n "$running" ] && port_busy "$running"; then echo "$running"; return; fi
  fi
  # The remembered port, unless another program (another checkout's
  # cluster, say) took it while this one was stopped.
  if [ -s "$portfile" ] && ! port_taken "$(cat "$portfile")"; then cat "$portfile"; return; fi
  local p
  for p in $(seq 55432 55531); do
    port_taken "$p" || { mkdir -p "$(dirname "$portfile")"; echo "$p" >"$portfile"; echo "$p"; return; }
  done
  echo "postgres.sh: no free port in 55432-55531" >&2
  exit 1
}

port=$(choose_port)
url="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"

find_bin() {
  local dir
  for dir in /usr/lib/postgresql/*/bin; do
    [ -x "$dir/initdb" ] && { echo "$dir"; return; }
  done
  if command -v initdb >/dev/null 2>&1; then dirname "$(command -v initdb)"; return; fi
  return 1
}

install_postgres() {
  echo "postgres.sh: installing Debian's postgresql package" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq postgresql postgresql-contrib >&2
  # The package starts a cluster of its own on 5432 on some systems; ours
  # does not need it, and it is left as the package set it up.
}

as_pg() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

start() {
  local bin
  bin=$(find_bin) || { install_postgres; bin=$(find_bin); }
  mkdir -p "$pgdata"
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql postgres
    chown postgres "$pgdata"
    chmod 700 "$pgdata"
  fi
  if [ ! -s "$pgdata/PG_VERSION" ]; then
    as_pg "$bin/initdb" -D "$pgdata" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
  fi
  if ! as_pg "$bin/pg_ctl" -D "$pgdata" status >/dev/null 2>&1; then
    # TCP only: no Unix socket. Its path (directory, then .s.PGSQL.<port>)
    # may not exceed 107 bytes, and a checkout's path can be long enough
    # that a socket in the data directory would stop the server starting.
    local opts="-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories='' -c max_connections=300 -c shared_buffers=256MB"
    # pg_stat_statements, where available, shows where database time goes.
    if [ -e "$("$bin/pg_config" --pkglibdir 2>/dev/null)/pg_stat_statements.so" ]; then
      opts="$opts -c shared_preload_libraries=pg_stat_statements"
    fi
    opts="$opts ${PAYMENTSD_PG_SETTINGS:-}"
    # 9>&-: the server must not inherit the lock (see locked).
    if ! as_pg "$bin/pg_ctl" -D "$pgdata" -l "$pgdata/server.log" -w -t 60 start -o "$opts" >/dev/null 9>&-; then
      echo "postgres.sh: the server did not start; the end of $pgdata/server.log:" >&2
      tail -n 8 "$pgdata/server.log" >&2 || true
      exit 1
    fi
  fi
  for _ in $(seq 1 50); do
    "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres && { echo "$url"; return; }
    sleep 0.2
  done
  echo "postgres.sh: the cluster did not become ready; see $pgdata/server.log" >&2
  exit 1
}

stop() {
  local bin
  bin=$(find_bin) || return 0
  [ -s "$pgdata/PG_VERSION" ] || return 0
  as_pg "$bin/pg_ctl" -D "$pgdata" -m fast -w stop >/dev/null 2>&1 || true
}

running() {
  local bin
  bin=$(find_bin) || return 1
  [ -s "$pgdata/PG_VERSION" ] && as_pg "$bin/pg_ctl" -D "$pgdata" status >/dev/null 2>&1
}

# live_holders prints the holders whose process still runs, and forgets the
# others.
live_holders() {
  local f pid
  [ -d "$holders" ] || return 0
  for f in "$holders"/*; do
    [ -e "$f" ] || continue
    pid=$(basename "$f")
    if kill -0 "$pid" 2>/dev/null; then echo "$pid"; else rm -f "$f"; fi
  done
}

# locked runs "$@" holding the cluster's lock, on fd 9; the server started
# meanwhile does not inherit it.
locked() {
  mkdir -p "$(dirname "$lockfile")"
  exec 9>"$lockfile"
  if ! flock -w 600 9; then
    echo "postgres.sh: waited 10 minutes for ${lockfile#"$root"/}; a server started by an older postgres.sh may hold it: stop it with pg_ctl -D ${pgdata#"$root"/} stop" >&2
    exit 1
  fi
  "$@"
}

need_pid() {
  case "${1:-}" in
    '' | *[!0-9]*) echo "postgres.sh: $2 needs the process id of its holder" >&2; exit 2 ;;
  esac
}

acquire() {
  if running; then
    echo "postgres.sh: reusing the running cluster in ${pgdata#"$root"/} on port $port" >&2
  else
    echo "postgres.sh: starting a throwaway cluster in ${pgdata#"$root"/} on port $port" >&2
    touch "$autostop"
  fi
  start
  mkdir -p "$holders"
  : >"$holders/$1"
}

release() {
  rm -f "$holders/$1"
  local others
  others=$(live_holders | tr '\n' ' ')
  if [ -n "$others" ]; then
    echo "postgres.sh: leaving the cluster running: still used by process ${others% }" >&2
  elif [ -e "$autostop" ]; then
    echo "postgres.sh: stopping the cluster it started" >&2
    stop
    rm -f "$autostop"
  elif running; then
    echo "postgres.sh: leaving the cluster running, as it was (stop it with: scripts/postgres.sh stop)" >&2
  fi
}

status() {
  if running; then
    echo "running in ${pgdata#"$root"/} on port $port: $url"
    local h
    h=$(live_holders | tr '\n' ' ')
    [ -n "$h" ] && echo "used by process ${h% }"
    [ -e "$autostop" ] && echo "stopped when its last user is done"
    return 0
  fi
  echo "not running (${pgdata#"$root"/})"
  return 3
}

case "${1:-}" in
  start) locked start; rm -f "$autostop" ;;
  stop) locked stop; rm -f "$autostop" ;;
  url) echo "$url" ;;
  status) status ;;
  acquire) need_pid "${2:-}" acquire; locked acquire "$2" ;;
  release) need_pid "${2:-}" release; locked release "$2" ;;
  keep) rm -f "$autostop" ;;
  *) echo "usage: $0 start|stop|url|status|acquire PID|release PID|keep" >&2; exit 2 ;;
esac
