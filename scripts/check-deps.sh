#!/usr/bin/env bash
# `make check-deps`: the paymentsd binary links no tooling. Of the packages
# `go list -deps ./cmd/paymentsd` names, none may be of the emulator/ or
# harness/ modules, the product's test helpers (internal/testutil), a
# profiler (net/http/pprof, github.com/google/pprof) or a test library
# (testify, stripe-mock), whoever imports it: the product's own code or a
# library's package. Tests may use all of them: go list -deps follows no
# _test.go file. On failure it names each package and what imports it.
set -euo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}
module=github.com/paymentsd/paymentsd

forbidden="^($module/(emulator|harness|internal/testutil)|net/http/pprof|github\.com/google/pprof|github\.com/stretchr/testify|github\.com/stripe/stripe-mock)(/|$)"
# One line a package: its path, then what it imports.
deps=$("$go" list -deps -f '{{.ImportPath}}{{range .Imports}} {{.}}{{end}}' ./cmd/paymentsd)
bad=$(cut -d' ' -f1 <<<"$deps" | grep -E "$forbidden" || true)
# importers_of PKG [first]: the packages that import PKG (only the first).
importers_of() {
  awk -v p="$1" -v first="${2:-}" '{ for (i = 2; i <= NF; i++) if ($i == p) { print $1; if (first) exit; break } }' <<<"$deps"
}
if [ -n "$bad" ]; then
  {
    echo "check-deps: FAILED: the paymentsd binary (./cmd/paymentsd) links tooling:"
    while read -r pkg; do
      importers=$(importers_of "$pkg" | paste -sd' ' -)
      # One chain of imports from the binary down to it: each package's
      # first importer, up to ./cmd/paymentsd (which nothing imports).
      chain=$pkg up=$pkg
      while up=$(importers_of "$up" first) && [ -n "$up" ]; do chain="$up -> $chain"; done
      echo "  $pkg, imported by: $importers"
      echo "    as in: $chain"
    done <<<"$bad"
    echo "Outside its _test.go files the product imports none of these, nor anything that imports one: a tool"
    echo "that needs the product goes in harness/ (docs/development.md), and a library's package that drags"
    echo "one in is left for another of its packages, or for a few lines of our own."
  } >&2
  exit 1
fi
echo "check-deps: ok: ./cmd/paymentsd links $(wc -l <<<"$deps") packages, no tooling among them"
