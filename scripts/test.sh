#!/usr/bin/env bash
# The test command (README): every Rust test of the workspace, in release
# mode for the kernels' sake, with the editor end-to-end tests when their
# clients are installed (scripts/install-test-deps.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x scripts/install-test-deps.sh ]; then
  scripts/install-test-deps.sh
fi
cargo test --workspace --release --locked
