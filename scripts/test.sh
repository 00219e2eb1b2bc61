#!/usr/bin/env bash
# The test command (README): every Rust test of the workspace, then the
# language server driven by real clients (Node LSP client, headless Neovim
# 0.7 and 0.11). scripts/install-test-deps.sh installs those clients.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-test-deps.sh
cargo build --release --locked --workspace
cargo test --release --locked --workspace
(cd tests/lsp-node && node --test)
tests/nvim/run.sh
editors/vscode/scripts/package.sh
