#!/usr/bin/env bash
# Fails when src/parser.c is not what grammar.js generates (needs the CLI;
# skipped without it). The Rust test `generated_parser_is_current` covers
# the common case (grammar.js edited, src/ not regenerated) without the CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v tree-sitter >/dev/null || { echo "tree-sitter CLI not installed: skipped"; exit 0; }
tmp=$(mktemp -d); cp -r grammar.js tree-sitter.json "$tmp"/
(cd "$tmp" && TREE_SITTER_DIR=$tmp/d TREE_SITTER_LIBDIR=$tmp/l tree-sitter generate --abi 14 >/dev/null)
diff -q "$tmp/src/parser.c" src/parser.c && echo "src/parser.c is current"
