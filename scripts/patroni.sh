#!/usr/bin/env bash
# A throwaway Postgres cluster under a real failover manager, for the chaos
# harness's Patroni modes (CHAOS_FAILOVER=patroni-sync|patroni-async): one
# etcd, PAYMENTSD_PATRONI_NODES (3) Patroni-managed Postgres 15 nodes, and
# HAProxy routing to whichever node answers 200 on Patroni's REST /primary.
#
#   scripts/patroni.sh start         bring it all up afresh, wait until one
#                                    leader and every replica streams (one
#                                    in sync with PAYMENTSD_PATRONI_SYNC=1);
#                                    print the postgres URL through HAProxy
#   scripts/patroni.sh start-node N  start node N's Patroni again (after a
#                                    kill); its Postgres follows it
#   scripts/patroni.sh wait-healthy  wait (60s) until the cluster is healthy
#   scripts/patroni.sh stop          stop every process it started (Patroni,
#                                    each node's Postgres, HAProxy, etcd); the
#                                    data stays for inspection
#   scripts/patroni.sh list          patronictl list
#   scripts/patroni.sh ctl ARGS...   patronictl ARGS... (switchover, ...)
#
# Debian 12's packages: patroni 3.0.2, etcd-server 3.4, haproxy 2.6, which
# it installs when missing. Everything runs as the postgres user when
# invoked as root, on 127.0.0.1 only (Postgres with no Unix socket), with
# short timings: ttl 10, loop_wait 2, retry_timeout 3, synchronous_mode as
# PAYMENTSD_PATRONI_SYNC says. HAProxy checks each node's /primary every
# second, marks a node down after 2 failures (a node whose Patroni is dead
# fails it too: the REST API is gone), and then shuts its sessions down.
#
# Its files live in .tmp/chaos-patroni (PAYMENTSD_PATRONI_DIR): the
# generated configs, every log, each node's data directory, and cluster.env
# (the ports, for the harness). The ports are a block of 30 from the first
# free one at PAYMENTSD_PATRONI_PORT (56600), past PgBouncer's range:
# etcd +0 (peer +1), HAProxy +2, node i's Postgres +10+i, its REST API +20+i.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir=${PAYMENTSD_PATRONI_DIR:-$root/.tmp/chaos-patroni}
nodes=${PAYMENTSD_PATRONI_NODES:-3}
sync=${PAYMENTSD_PATRONI_SYNC:-0}
firstport=${PAYMENTSD_PATRONI_PORT:-56600}
scope=paymentsd-chaos
py=/usr/bin/python3

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# port_taken: the port cannot be listened on (see postgres.sh).
port_taken() {
  port_busy "$1" && return 0
  command -v ss >/dev/null 2>&1 && [ -n "$(ss -Htan exclude time-wait "( sport = :$1 )" 2>/dev/null)" ]
}

pg_bin() {
  local d
  for d in /usr/lib/postgresql/15/bin /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && { echo "$d"; return; }
  done
  echo "patroni.sh: no Postgres found under /usr/lib/postgresql (scripts/postgres.sh start installs it)" >&2
  exit 1
}

install_missing() {
  local want=()
  command -v patroni >/dev/null 2>&1 || want+=(patroni)
  [ -x /usr/bin/etcd ] || want+=(etcd-server)
  [ -x /usr/sbin/haproxy ] || want+=(haproxy)
  [ ${#want[@]} -eq 0 ] && return
  echo "patroni.sh: installing Debian's ${want[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "${want[@]}" >&2
}

# as_pg runs "$@" as the postgres user (exec'd in place: $! of a
# background as_pg is the program's own pid).
as_pg() {
  if [ "$(id -u)" = 0 ]; then
    HOME=/var/lib/postgresql exec setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"
  else
    exec "$@"
  fi
}

# alive PIDFILE PATTERN: the pid in PIDFILE runs, is no zombie, and its
# command line holds PATTERN (a stale pid file names no stranger).
alive() {
  local pid
  [ -s "$1" ] || return 1
  pid=$(head -n 1 "$1")
  [ -r "/proc/$pid/cmdline" ] || return 1
  [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$2"
}

choose_ports() {
  local base p ok
  for base in $(seq "$firstport" 30 $((firstport + 270))); do
    ok=1
    for p in $base $((base + 1)) $((base + 2)) $(seq $((base + 11)) $((base + 10 + nodes))) $(seq $((base + 21)) $((base + 20 + nodes))); do
      if port_taken "$p"; then ok=; break; fi
    done
    [ -n "$ok" ] && { echo "$base"; return; }
  done
  echo "patroni.sh: no free block of 30 ports in $firstport-$((firstport + 299))" >&2
  exit 1
}

load_env() {
  [ -s "$dir/cluster.env" ] || { echo "patroni.sh: no cluster in $dir (start it first)" >&2; exit 1; }
  # shellcheck disable=SC1091
  . "$dir/cluster.env"
}

write_node_config() {
  local i=$1 n=n$1 bin=$2
  local pg=$((BASE + 10 + i)) rest=$((BASE + 20 + i))
  mkdir -p "$dir/$n"
  cat >"$dir/$n/patroni.yml" <<EOF
scope: $scope
namespace: /paymentsd/
name: $n
log:
  level: INFO
restapi:
  listen: 127.0.0.1:$rest
  connect_address: 127.0.0.1:$rest
etcd3:
  hosts: 127.0.0.1:$ETCD_PORT
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 2
    retry_timeout: 3
    maximum_lag_on_failover: 1048576
    synchronous_mode: $([ "$sync" = 1 ] && echo true || echo false)
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        max_connections: 300
        wal_level: replica
        wal_log_hints: 'on'
        max_wal_senders: 10
        max_replication_slots: 10
        wal_keep_size: 256MB
        hot_standby: 'on'
  initdb:
    - encoding: UTF8
    - locale: C.UTF-8
    - auth: trust
postgresql:
  listen: 127.0.0.1:$pg
  connect_address: 127.0.0.1:$pg
  data_dir: $dir/$n/data
  bin_dir: $bin
  pgpass: $dir/$n/pgpass
  use_unix_socket: false
  remove_data_directory_on_rewind_failure: true
  remove_data_directory_on_diverged_timelines: true
  authentication:
    superuser:
      username: postgres
      password: postgres
    replication:
      username: replicator
      password: replicator
    rewind:
      username: postgres
      password: postgres
  parameters:
    unix_socket_directories: ''
    shared_buffers: 64MB
    log_min_messages: warning
  pg_hba:
    - host replication replicator 127.0.0.1/32 trust
    - host all all 127.0.0.1/32 trust
tags:
  nofailover: false
  noloadbalance: false
  clonefrom: false
  nosync: false
EOF
}

write_haproxy_config() {
  local i
  {
    cat <<EOF
global
    maxconn 2000
    log stdout format raw local0 notice

defaults
    mode tcp
    log global
    option tcplog
    retries 1
    timeout connect 2s
    timeout client 30m
    timeout server 30m
    timeout check 1s

listen primary
    bind 127.0.0.1:$HAPROXY_PORT
    option httpchk GET /primary
    http-check expect status 200
    default-server inter 1s fastinter 500ms downinter 1s fall 2 rise 1 on-marked-down shutdown-sessions
EOF
    for i in $(seq 1 "$nodes"); do
      echo "    server n$i 127.0.0.1:$((BASE + 10 + i)) maxconn 300 check port $((BASE + 20 + i))"
    done
  } >"$dir/haproxy.cfg"
}

# start_bg NAME LOG PIDFILE CMD...: start CMD in the background as the
# postgres user, its output to LOG, its pid in PIDFILE, in a session of its
# own: a Ctrl-C meant for the harness reaches none of them (stop does, in
# order, from the harness or chaos.sh's trap).
start_bg() {
  local log=$2 pidfile=$3
  shift 3
  (as_pg setsid "$@") </dev/null >>"$log" 2>&1 9>&- &
  echo $! >"$pidfile"
}

start_patroni() {
  local n=$1
  if alive "$dir/$n/patroni.pid" "$dir/$n/patroni.yml"; then
    echo "patroni.sh: $n's Patroni runs already" >&2
    return
  fi
  start_bg "$n" "$dir/$n/patroni.log" "$dir/$n/patroni.pid" patroni "$dir/$n/patroni.yml"
}

# health prints "ok" when the cluster is healthy, else what it lacks: one
# leader running, every other node a running replica with a known lag (one
# of them sync_standby when synchronous) on the leader's timeline, as a
# live node's REST /cluster says.
health() {
  local i out
  for i in $(seq 1 "$nodes"); do
    out=$(curl -fsS --max-time 1 "http://127.0.0.1:$((BASE + 20 + i))/cluster" 2>/dev/null) || continue
    printf '%s' "$out" | NODES=$nodes SYNC=$sync "$py" -c '
import json, os, sys
c = json.load(sys.stdin)
ms = c.get("members", [])
leaders = [m for m in ms if m.get("role") in ("leader", "master", "primary") and m.get("state") == "running"]
tl = leaders[0].get("timeline") if len(leaders) == 1 else None
replicas = [m for m in ms if m.get("role") in ("replica", "sync_standby")
            and m.get("state") in ("running", "streaming") and isinstance(m.get("lag"), int)
            and m.get("timeline") == tl]
sync = [m for m in replicas if m.get("role") == "sync_standby"]
want = int(os.environ["NODES"])
if len(leaders) == 1 and len(replicas) == want - 1 and (os.environ["SYNC"] != "1" or sync):
    print("ok")
else:
    print("members: " + ", ".join("%s %s %s tl %s lag %s" % (m["name"], m.get("role"), m.get("state"), m.get("timeline"), m.get("lag")) for m in ms))
'
    return
  done
  echo "no Patroni REST API answers"
}

wait_healthy() {
  local deadline=$((SECONDS + ${1:-60})) h
  while :; do
    h=$(health)
    if [ "$h" = ok ]; then
      # and HAProxy routes to the leader
      "$(pg_bin)/psql" -qAtX -h 127.0.0.1 -p "$HAPROXY_PORT" -U postgres -d postgres \
        -c "SELECT 1 WHERE NOT pg_is_in_recovery()" 2>/dev/null | grep -q 1 && return 0
      h="HAProxy does not route to a primary yet"
    fi
    if [ $SECONDS -ge $deadline ]; then
      echo "patroni.sh: the cluster is not healthy after ${1:-60}s: $h (logs in $dir)" >&2
      return 1
    fi
    sleep 0.3
  done
}

start() {
  install_missing
  local bin i
  bin=$(pg_bin)
  stop_all
  rm -rf "$dir"
  mkdir -p "$dir"
  BASE=$(choose_ports)
  ETCD_PORT=$BASE
  HAPROXY_PORT=$((BASE + 2))
  {
    echo "BASE=$BASE"
    echo "NODES=$nodes"
    echo "SYNC=$sync"
    echo "ETCD_PORT=$ETCD_PORT"
    echo "HAPROXY_PORT=$HAPROXY_PORT"
    for i in $(seq 1 "$nodes"); do
      echo "PG_PORT_n$i=$((BASE + 10 + i))"
      echo "REST_PORT_n$i=$((BASE + 20 + i))"
    done
  } >"$dir/cluster.env"
  for i in $(seq 1 "$nodes"); do write_node_config "$i" "$bin"; done
  write_haproxy_config
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql postgres
    chown -R postgres "$dir"
  fi
  chmod 700 "$dir"

  start_bg etcd "$dir/etcd.log" "$dir/etcd.pid" etcd --name etcd1 --data-dir "$dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$((BASE + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((BASE + 1))" \
    --initial-cluster "etcd1=http://127.0.0.1:$((BASE + 1))" --initial-cluster-state new
  for _ in $(seq 1 100); do
    curl -fsS --max-time 1 "http://127.0.0.1:$ETCD_PORT/health" 2>/dev/null | grep -q true && break
    sleep 0.1
  done
  curl -fsS --max-time 1 "http://127.0.0.1:$ETCD_PORT/health" 2>/dev/null | grep -q true ||
    { echo "patroni.sh: etcd did not come up; see $dir/etcd.log" >&2; exit 1; }

  # The first node bootstraps alone; the others then clone it.
  start_patroni n1
  for _ in $(seq 1 300); do
    curl -fsS --max-time 1 "http://127.0.0.1:$((BASE + 21))/primary" >/dev/null 2>&1 && break
    sleep 0.2
  done
  for i in $(seq 2 "$nodes"); do start_patroni "n$i"; done
  start_bg haproxy "$dir/haproxy.log" "$dir/haproxy.pid" haproxy -db -f "$dir/haproxy.cfg"
  wait_healthy 120
  echo "postgres://postgres@127.0.0.1:$HAPROXY_PORT/postgres?sslmode=disable"
}

# stop_pid PIDFILE PATTERN SIGNAL: signal it and wait up to 30s; SIGKILL then.
stop_pid() {
  local pidfile=$1 pattern=$2 sig=$3 pid
  alive "$pidfile" "$pattern" || { rm -f "$pidfile"; return 0; }
  pid=$(head -n 1 "$pidfile")
  kill "-$sig" "$pid" 2>/dev/null || true
  for _ in $(seq 1 300); do
    alive "$pidfile" "$pattern" || { rm -f "$pidfile"; return 0; }
    sleep 0.1
  done
  echo "patroni.sh: $pattern ($pid) still runs after 30s; SIGKILL" >&2
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$pidfile"
}

stop_all() {
  [ -d "$dir" ] || return 0
  local n pg
  # Patroni first, all at once (SIGTERM: each stops its Postgres), so no
  # replica takes over from a leader stopping.
  for n in "$dir"/n*/; do
    n=$(basename "$n")
    alive "$dir/$n/patroni.pid" "$dir/$n/patroni.yml" && kill -TERM "$(head -n 1 "$dir/$n/patroni.pid")" 2>/dev/null || true
  done
  for n in "$dir"/n*/; do
    n=$(basename "$n")
    stop_pid "$dir/$n/patroni.pid" "$dir/$n/patroni.yml" TERM
    # A Postgres left by a killed Patroni.
    if alive "$dir/$n/data/postmaster.pid" "$dir/$n/data"; then
      pg=$(pg_bin)
      (as_pg "$pg/pg_ctl" -D "$dir/$n/data" -m immediate -w stop) >/dev/null 2>&1 || true
    fi
  done
  # A PgBouncer the harness put in front of HAProxy (chaos -pgbouncer).
  if [ -d "$dir/pgbouncer" ]; then
    PAYMENTSD_PGBOUNCER_DIR=$dir/pgbouncer "$root/scripts/pgbouncer.sh" stop
  fi
  stop_pid "$dir/haproxy.pid" "$dir/haproxy.cfg" TERM
  stop_pid "$dir/etcd.pid" "$dir/etcd" TERM
}

ctl() {
  load_env
  (as_pg patronictl -c "$dir/n1/patroni.yml" "$@")
}

case "${1:-}" in
  start) start ;;
  start-node)
    load_env
    [ -s "$dir/${2:-}/patroni.yml" ] || { echo "usage: $0 start-node n1|n2|..." >&2; exit 2; }
    start_patroni "$2" ;;
  wait-healthy) load_env; nodes=$NODES; sync=$SYNC; wait_healthy "${2:-60}" ;;
  stop) stop_all ;;
  list) ctl list ;;
  ctl) shift; ctl "$@" ;;
  *) echo "usage: $0 start|start-node NODE|wait-healthy [SECONDS]|stop|list|ctl ARGS..." >&2; exit 2 ;;
esac
