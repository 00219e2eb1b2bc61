#!/usr/bin/env bash
# Build and package the extension as tensor.vsix (offline-capable after npm ci).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d node_modules ] || npm ci --no-audit --no-fund --silent
npx tsc --noEmit
npm run --silent package >/dev/null
ls -la tensor.vsix
