#!/usr/bin/env bash
# `make clean`: stops every throwaway Postgres cluster under .tmp/ (those of
# make run and make test, make bench and make chaos, and make
# chaos-patroni's Patroni cluster), then removes .tmp/
# (clusters, logs, the installed OpenAPI tools) and bin/. A `make run` still
# in the foreground loses its database: stop it first.
set -euo pipefail
cd "$(dirname "$0")/.."

# A Patroni cluster (scripts/patroni.sh): its Patroni, Postgres, HAProxy
# and etcd.
if [ -d .tmp/chaos-patroni ]; then
  echo "clean: stopping the Patroni cluster in .tmp/chaos-patroni" >&2
  PAYMENTSD_PATRONI_DIR=$PWD/.tmp/chaos-patroni scripts/patroni.sh stop
fi
for version in .tmp/*/PG_VERSION; do
  [ -e "$version" ] || continue
  pgdata=$(dirname "$version")
  echo "clean: stopping the Postgres cluster in $pgdata" >&2
  PAYMENTSD_PGDATA=$PWD/$pgdata scripts/postgres.sh stop
done
rm -rf .tmp bin
echo "clean: removed .tmp/ and bin/" >&2
