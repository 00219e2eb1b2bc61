#!/usr/bin/env bash
# Build the tree-sitter parser (ABI 14) as a shared library Neovim loads:
# OUT/parser/tensor.so, with the queries in OUT/queries/tensor/.
set -euo pipefail
out="${1:?usage: build-nvim-parser.sh OUTDIR}"
src="$(dirname "$0")/../tree-sitter-tensor"
mkdir -p "$out/parser" "$out/queries/tensor"
cc -O2 -shared -fPIC -I "$src/src" "$src/src/parser.c" -o "$out/parser/tensor.so"
cp "$src"/queries/*.scm "$out/queries/tensor/"
