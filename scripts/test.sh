#!/usr/bin/env bash
# `make test`: the whole suite with the race detector against real Postgres
# (scripts/with-postgres.sh), saying what it does at each stage, since a cold
# build takes minutes on two cores: compiling (the test binaries are built
# and cached, not run, with a line every 30 s), then Postgres, then the
# tests, a line per package as it finishes.
set -euo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}
say() { echo "make test: $*" >&2; }

say "compiling the packages and their tests with the race detector (a cold build takes a few minutes)"
start=$(date +%s)
(while sleep 30; do say "still compiling ($(($(date +%s) - start))s)"; done) &
ticker=$!
status=0
out=$("$go" test -race -count=1 -exec true ./... 2>&1) || status=$?
kill "$ticker" 2>/dev/null || true
if [ "$status" != 0 ]; then
  echo "$out"
  exit "$status"
fi
say "compiled in $(($(date +%s) - start))s; now Postgres and the tests (a line per package as it finishes)"
exec scripts/with-postgres.sh "$go" test -race -count=1 ./...
