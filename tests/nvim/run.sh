#!/usr/bin/env bash
# Run the headless Neovim test with every Neovim given (default: Debian's
# nvim and the PyPI one installed by scripts/install-test-deps.sh), the way
# a new user starts: the plugin finds target/release/tensor-lsp and builds
# the tree-sitter parser itself into a fresh data directory.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x target/release/tensor-lsp ] || { echo "nvim test: build the server first (cargo build --release -p tensor-lsp)"; exit 1; }
nvims=("$@")
[ ${#nvims[@]} -gt 0 ] || nvims=(/usr/bin/nvim target/nvim011/bin/nvim)
for n in "${nvims[@]}"; do
  [ -x "$n" ] || { echo "nvim test: $n not installed"; exit 1; }
  log=$(mktemp)
  data=$(mktemp -d)
  if XDG_DATA_HOME=$data NVIM_TEST_LOG=$log timeout 120 "$n" --headless -u NONE -c "luafile tests/nvim/test.lua" examples/spmv_vectors.tensor; then
    echo "== $("$n" --version | head -1)"; cat "$log"
  else
    echo "== $("$n" --version | head -1) FAILED"; cat "$log"; rm -rf "$data"; exit 1
  fi
  rm -rf "$data"
done
