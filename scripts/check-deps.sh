#!/usr/bin/env bash
# `make check-deps`: the paymentsd binary links no tooling. Of the packages
# `go list -deps ./cmd/paymentsd` names, none may be of the emulator/ or
# harness/ modules, the product's test helpers (internal/testutil), a
# profiler (net/http/pprof, github.com/google/pprof) or a test library
# (testify, stripe-mock). Tests may use all of them: go list -deps follows
# no _test.go file. On failure it names each package and what imports it.
set -euo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}
module=github.com/paymentsd/paymentsd

forbidden="^($module/(emulator|harness|internal/testutil)|net/http/pprof|github\.com/google/pprof|github\.com/stretchr/testify|github\.com/stripe/stripe-mock)(/|$)"
# One line a package: its path, then what it imports.
deps=$("$go" list -deps -f '{{.ImportPath}}{{range .Imports}} {{.}}{{end}}' ./cmd/paymentsd)
bad=$(cut -d' ' -f1 <<<"$deps" | grep -E "$forbidden" || true)
if [ -n "$bad" ]; then
  {
    echo "check-deps: FAILED: the paymentsd binary (./cmd/paymentsd) links tooling:"
    while read -r pkg; do
      importers=$(awk -v p="$pkg" '{ for (i = 2; i <= NF; i++) if ($i == p) { print $1; break } }' <<<"$deps" | paste -sd' ' -)
      echo "  $pkg, imported by: $importers"
    done <<<"$bad"
    echo "The product imports no emulator/ or harness/ package, no internal/testutil, no profiler and no test"
    echo "library outside its _test.go files: a tool that needs the product goes in harness/ (see docs/development.md)."
  } >&2
  exit 1
fi
echo "check-deps: ok: ./cmd/paymentsd links $(wc -l <<<"$deps") packages, no tooling among them"
