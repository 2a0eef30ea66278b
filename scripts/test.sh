#!/usr/bin/env bash
# `make test`: the whole suite with the race detector against real Postgres
# (scripts/with-postgres.sh), in every module of MODULES (the product, ".",
# and the emulator/ and harness/ modules of its tooling), saying what it
# does at each stage, since a cold build takes minutes on two cores:
# compiling (the test binaries are built and cached, not run, with a line
# every 30 s), then Postgres, then the tests, a line per package as it
# finishes. Every module's tests run even when an earlier module's fail.
set -euo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}
read -r -a modules <<<"${MODULES:-. emulator harness}"
say() { echo "make test: $*" >&2; }

if [ "${1:-}" = --run ]; then # under scripts/with-postgres.sh, below
  status=0
  for m in "${modules[@]}"; do
    say "the tests of module $m"
    "$go" -C "$m" test -race -count=1 ./... || status=$?
  done
  exit "$status"
fi

say "compiling the packages and their tests with the race detector (a cold build takes a few minutes)"
start=$(date +%s)
(while sleep 30; do say "still compiling ($(($(date +%s) - start))s)"; done) &
ticker=$!
status=0
for m in "${modules[@]}"; do
  out=$("$go" -C "$m" test -race -count=1 -exec true ./... 2>&1) || { status=$?; break; }
done
kill "$ticker" 2>/dev/null || true
if [ "$status" != 0 ]; then
  echo "$out"
  exit "$status"
fi
say "compiled in $(($(date +%s) - start))s; now Postgres and the tests (a line per package as it finishes)"
exec scripts/with-postgres.sh scripts/test.sh --run
