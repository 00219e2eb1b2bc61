#!/usr/bin/env bash
# Peers for the benchmarks, in their own virtual environment: SciPy, MKL
# through sparse-dot-mkl, pydata sparse, and matplotlib for the plots.
set -euo pipefail
cd "$(dirname "$0")"
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q numpy scipy sparse sparse-dot-mkl mkl matplotlib
