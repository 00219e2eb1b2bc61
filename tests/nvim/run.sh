#!/usr/bin/env bash
# Run the headless Neovim test with every Neovim given (default: Debian's
# nvim and the PyPI one installed by scripts/install-test-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/build-nvim-parser.sh target/nvim-parser >/dev/null
export TENSOR_LSP="$PWD/target/release/tensor-lsp" TENSOR_PARSER_DIR="$PWD/target/nvim-parser"
nvims=("$@")
[ ${#nvims[@]} -gt 0 ] || nvims=(/usr/bin/nvim target/nvim011/bin/nvim)
for n in "${nvims[@]}"; do
  [ -x "$n" ] || { echo "nvim test: $n not installed"; exit 1; }
  log=$(mktemp)
  if NVIM_TEST_LOG=$log timeout 120 "$n" --headless -u NONE -c "luafile tests/nvim/test.lua" examples/spmv_vectors.tensor; then
    echo "== $("$n" --version | head -1)"; cat "$log"
  else
    echo "== $("$n" --version | head -1) FAILED"; cat "$log"; exit 1
  fi
done
