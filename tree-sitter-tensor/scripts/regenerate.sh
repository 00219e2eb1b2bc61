#!/usr/bin/env bash
# Regenerate src/ from grammar.js with the pinned tree-sitter CLI (ABI 14,
# which Debian's Neovim 0.7.2 loads) and record grammar.js's hash.
#   cargo install tree-sitter-cli --version 0.25.10 --locked
set -euo pipefail
cd "$(dirname "$0")/.."
export TREE_SITTER_DIR="${TREE_SITTER_DIR:-/tmp/tree-sitter-dir}" TREE_SITTER_LIBDIR="${TREE_SITTER_LIBDIR:-/tmp/tree-sitter-lib}"
tree-sitter generate --abi 14
python3 - <<'PY'
data = open("grammar.js", "rb").read()
h = 0xcbf29ce484222325
for b in data:
    h ^= b
    h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
open("src/grammar.js.sha256", "w").write("%016x\n" % h)
PY
