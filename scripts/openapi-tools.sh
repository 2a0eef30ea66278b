#!/usr/bin/env bash
# Installs the OpenAPI tools pinned in tools/openapi (package.json and its
# lock: Spectral, Redocly, openapi-typescript, TypeScript) into
# .tmp/tools/openapi with `npm ci`, once per version of the lock, and prints
# the directory of their commands. Nothing is installed globally. It installs
# Debian's nodejs and npm packages when npm is missing.
#
# Install scripts are not run (--ignore-scripts): the only package with one
# is a telemetry ping, and none of the tools needs it.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/tools/openapi
dest=$root/.tmp/tools/openapi
stamp=$dest/.installed

if ! command -v npm >/dev/null 2>&1; then
  echo "openapi-tools: installing Debian's nodejs and npm packages" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq nodejs npm >&2
fi

# Redocly 2 wants Node 20.19+ (or 22.12+); Debian's own nodejs may be older.
major_minor=$(node -p 'process.versions.node.split(".").slice(0, 2).join(" ")')
read -r major minor <<<"$major_minor"
if [ "$major" -lt 20 ] || { [ "$major" = 20 ] && [ "$minor" -lt 19 ]; } || { [ "$major" = 21 ] || { [ "$major" = 22 ] && [ "$minor" -lt 12 ]; }; }; then
  echo "openapi-tools: Node $(node --version) is too old for the pinned Redocly CLI: it needs 20.19+ or 22.12+" >&2
  exit 1
fi

want=$(sha256sum "$src/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "openapi-tools: installing the pinned tools of tools/openapi into .tmp/tools/openapi (npm ci)" >&2
  rm -rf "$dest"
  mkdir -p "$dest"
  cp "$src/package.json" "$src/package-lock.json" "$dest/"
  (cd "$dest" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) >&2
  echo "$want" >"$stamp"
fi
echo "$dest/node_modules/.bin"
