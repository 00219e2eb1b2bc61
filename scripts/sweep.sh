#!/usr/bin/env bash
# The long differential sweep (not part of scripts/test.sh): N seeded cases
# (default 20,000) from the templates in compiler/tests/differential/, each
# compiled, run through the JIT and compared with the dense oracle, and run
# by the bounds-checked IR interpreter (an access past an array's end is a
# crash even where the answer came out right). Prints
# pass / refused / wrong / crash counts, refusals grouped by normalised
# message, and every wrong answer and crash with a `tensorc` reproducer.
#
#   scripts/sweep.sh [N] [FIRST_SEED]
#
# DIFFERENTIAL_WORKERS sets the number of child processes (default 2);
# DIFFERENTIAL_FAMILIES=spgemm,transpose draws only those templates (see
# compiler/tests/differential/templates.rs); DIFFERENTIAL_TIER=cc runs the
# kernels on the cc tier (the emitted C under the system C compiler, objects
# cached in target/sweep-cc-cache) instead of Cranelift;
# DIFFERENTIAL_AS_IF_LARGE=1 compiles every kernel as if made for large
# data (Function::make_as_if_large: 16M entries in each operand, its
# coordinates scattered, an ordered first level's rows long), so what
# Cranelift does only there (rows summed in strips, asks by calls for rows
# and gathered elements, scans for a row's end in strides) runs on every
# case.
# DIFFERENTIAL_NON_FINITE=1 stores infinities and NaNs among the operands'
# values and judges by the oracle that reads an entry an operand does not
# store as no term (`inf` times fill adds nothing).
# The report is also
# written to target/sweep-report.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-20000}"
first="${2:-0}"
# Builds target/release/tensorc too (the tests run it), with the same
# features as the test suite, so nothing is built twice.
cargo test --release --locked -p tensor-compiler --test differential_testing --no-run
mkdir -p target
if [ "${DIFFERENTIAL_TIER:-}" = cc ]; then
  export TENSOR_CACHE_DIR="$PWD/target/sweep-cc-cache"
fi
DIFFERENTIAL_CASES="$n" DIFFERENTIAL_FIRST_SEED="$first" \
  cargo test --release --locked -p tensor-compiler --test differential_testing differential_sweep \
  -- --exact --ignored --nocapture 2>&1 | tee target/sweep-report.txt
echo "report: target/sweep-report.txt (reproducers run with target/release/tensorc on PATH)"
