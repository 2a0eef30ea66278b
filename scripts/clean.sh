#!/usr/bin/env bash
# `make clean`: stops every throwaway Postgres cluster under .tmp/ (those of
# make run and make test, make bench and make chaos), then removes .tmp/
# (clusters, logs, the installed OpenAPI tools) and bin/. A `make run` still
# in the foreground loses its database: stop it first.
set -euo pipefail
cd "$(dirname "$0")/.."

for version in .tmp/*/PG_VERSION; do
  [ -e "$version" ] || continue
  pgdata=$(dirname "$version")
  echo "clean: stopping the Postgres cluster in $pgdata" >&2
  PAYMENTSD_PGDATA=$PWD/$pgdata scripts/postgres.sh stop
done
rm -rf .tmp bin
echo "clean: removed .tmp/ and bin/" >&2
