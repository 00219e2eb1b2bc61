#!/usr/bin/env bash
# Coverage-guided fuzzing of the command-line expression parser, the .tensor
# front end, the Matrix Market and FROSTT readers, and random small kernels
# against the oracle (targets in fuzz/, properties in
# compiler/src/selfcheck.rs). Needs a nightly toolchain and cargo-fuzz
# (`cargo install cargo-fuzz --locked`).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# Corpora grow in fuzz/corpus/TARGET (seeded from examples/ and the reader
# fixtures); crashes land in fuzz/artifacts/TARGET and fail the script.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(expression language readers kernels)
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "error: cargo-fuzz on a nightly toolchain is needed (rustup toolchain install nightly; cargo install cargo-fuzz --locked)" >&2
    exit 1
fi
seed() {
    local target="$1" dir="fuzz/corpus/$1"
    mkdir -p "$dir"
    case "$target" in
        expression) printf '%s' 'y(i) = A(i,j) * x(j)' >"$dir/spmv"; printf '%s' 'a = -B(i) * 2 + C(i) - (D(i) - E(i))' >"$dir/mixed" ;;
        language) cp examples/*.tensor "$dir/" 2>/dev/null || true ;;
        readers) find compiler/tests/fixtures/io -name '*.mtx' -size -8k -exec cp {} "$dir/" \; ; find compiler/tests/fixtures/io -name '*.tns' -size -8k -exec cp {} "$dir/" \; ;;
        kernels) printf '\001\002\003\004\005\006\007\010' >"$dir/seed" ;;
    esac
}
status=0
for t in "${targets[@]}"; do
    seed "$t"
    echo "== $t: ${seconds}s"
    (cd fuzz && cargo +nightly fuzz run "$t" "corpus/$t" -- -max_total_time="$seconds" -rss_limit_mb=4096 -max_len=4096 -print_final_stats=1) || status=1
done
exit $status
