#!/usr/bin/env bash
# `make build` (and so make run, make walk, make bench, make chaos): builds
# bin/paymentsd, the product, and bin/stripefake, the Stripe emulator of
# the emulator/ module, saying so first, with a line every 30 s, since a
# cold build takes a minute or more on two cores and prints nothing
# meanwhile. The commit goes in by -ldflags (COMMIT, from the Makefile):
# Go's own VCS stamping is off wherever GOFLAGS carries -buildvcs=false.
set -euo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}
say() { echo "build: $*" >&2; }

say "compiling bin/paymentsd and bin/stripefake (a cold build takes a minute or more)"
start=$(date +%s)
# The ticker's sleep is killed with it, so nothing outlives the build.
(
  trap 'kill "$s" 2>/dev/null; exit 0' TERM
  while :; do
    sleep 30 &
    s=$!
    wait "$s"
    say "still compiling ($(($(date +%s) - start))s)"
  done
) &
ticker=$!
trap 'kill "$ticker" 2>/dev/null || true' EXIT
"$go" build -ldflags "-X github.com/paymentsd/paymentsd/internal/cli.commit=${COMMIT:-}" -o bin/paymentsd ./cmd/paymentsd
"$go" -C emulator build -o "$PWD/bin/stripefake" ./cmd/stripefake
