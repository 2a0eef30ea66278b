#!/usr/bin/env bash
# `make lint-openapi`: the contract as other tools read it.
#  1. Spectral (spectral:oas) and Redocly (recommended) lint api/openapi.yaml:
#     any error fails, warnings are shown.
#  2. openapi-typescript generates a typed client from it
#     (.tmp/openapi/paymentsd.d.ts).
#  3. The contract tests of internal/api run against real Postgres and write
#     every JSON answer they validated as TypeScript typed by that client
#     (.tmp/openapi/answers.ts); `tsc --noEmit` checks them, and
#     tools/openapi/checks.ts, against the generated types.
# The tools are the versions pinned in tools/openapi, installed into
# .tmp/tools/openapi by scripts/openapi-tools.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export SCARF_ANALYTICS=false REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true NO_UPDATE_NOTIFIER=1

say() { echo "lint-openapi: $*" >&2; }
bin=$(scripts/openapi-tools.sh)
out=$root/.tmp/openapi
mkdir -p "$out"

say "Spectral (spectral:oas)"
"$bin/spectral" lint --ruleset tools/openapi/spectral.yaml --fail-severity error api/openapi.yaml

say "Redocly (recommended)"
status=0
report=$("$bin/redocly" lint --config tools/openapi/redocly.yaml --format stylish api/openapi.yaml 2>&1) || status=$?
grep -v '^ *[║╔╚]' <<<"$report" >&2 || true # less its banner about Node versions
[ "$status" = 0 ] || exit "$status"

say "openapi-typescript: the typed client"
"$bin/openapi-typescript" api/openapi.yaml -o "$out/paymentsd.d.ts" >/dev/null

say "real answers from the contract tests"
rm -f "$out/answers.ts"
PAYMENTSD_ANSWERS_TS=$out/answers.ts scripts/with-postgres.sh \
  go test -count=1 -run '^(TestContract|TestExpiredKeys)$' ./internal/api >&2

say "tsc --noEmit: the answers and tools/openapi/checks.ts against the generated types"
"$bin/tsc" -p tools/openapi/tsconfig.json
say "ok: $(grep -c '^export const answer' "$out/answers.ts") real answers fit the generated client"
