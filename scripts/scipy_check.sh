#!/usr/bin/env bash
# Cross-check tensorc against SciPy on the real matrices in examples/data
# (SpMV, SpGEMM, addition, transposition, conversions), through the command
# line with -i/-o files. Not part of scripts/test.sh. Uses bench/.venv
# (made by bench/setup.sh when missing). Exits 1 on a wrong answer or crash.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x bench/.venv/bin/python ] && bench/.venv/bin/python -c 'import numpy, scipy' 2>/dev/null || bench/setup.sh
# The build scripts/test.sh makes first, so an earlier test run is reused.
cargo build --release --locked --workspace
exec bench/.venv/bin/python bench/scipy_check.py "$@"
