#!/usr/bin/env bash
# Runs a command with TEST_DATABASE_URL and DATABASE_URL pointing at a
# Postgres server: the one the environment names, or the throwaway local
# cluster of scripts/postgres.sh. That cluster is acquired for this run and
# released after it: it is stopped again only if this run started it and no
# one else (`make run`, another test run) uses it by then. A cluster that was
# already running is left running.
set -euo pipefail
here=$(dirname "$0")

if [ -z "${TEST_DATABASE_URL:-}" ] && [ -z "${DATABASE_URL:-}" ]; then
  url=$("$here/postgres.sh" acquire $$)
  trap '"$here/postgres.sh" release $$' EXIT
  trap 'exit 130' INT TERM
  export TEST_DATABASE_URL=$url DATABASE_URL=$url
else
  export TEST_DATABASE_URL=${TEST_DATABASE_URL:-$DATABASE_URL}
  export DATABASE_URL=${DATABASE_URL:-$TEST_DATABASE_URL}
  echo "with-postgres: using the Postgres server of ${TEST_DATABASE_URL%%\?*}" | sed -E 's#(://[^:/@]*):[^@]*@#\1:xxxxx@#' >&2
fi
"$@"
