#!/usr/bin/env bash
# Runs a command with TEST_DATABASE_URL and DATABASE_URL pointing at a
# Postgres server: the one the environment names, or a throwaway local
# cluster that this script starts and stops again.
set -euo pipefail
here=$(dirname "$0")

if [ -z "${TEST_DATABASE_URL:-}" ] && [ -z "${DATABASE_URL:-}" ]; then
  url=$("$here/postgres.sh" start)
  trap '"$here/postgres.sh" stop' EXIT
  export TEST_DATABASE_URL=$url DATABASE_URL=$url
else
  export TEST_DATABASE_URL=${TEST_DATABASE_URL:-$DATABASE_URL}
  export DATABASE_URL=${DATABASE_URL:-$TEST_DATABASE_URL}
fi
"$@"
