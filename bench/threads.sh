#!/usr/bin/env bash
# CSR SpMV on the 3-D 7-point stencil of run.py (110^3 = 1.33M rows, 9.2M
# nonzeros, ~140 MB: memory-bound here) on 1 thread and on N (default 2),
# timing both tiers; prints each run's JSON and the speedups of the medians
# and minima. A benchmark, not a test: run it on an otherwise idle machine.
#
#   bench/threads.sh [N] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-2}"
runs="${2:-40}"
cargo build --release -q --workspace --bins --examples
m=bench/out/inputs/stencil7_110.mtx
mkdir -p "$(dirname "$m")"
[ -f "$m" ] || target/release/examples/gen_matrix stencil7 110 "$m"
out=$(mktemp)
for t in 1 "$n"; do
  target/release/tensorc "y(i) = A(i,j) * x(j)" -f A:CSR -i "A:$m" --time "$runs" --json --threads "$t" 2>/dev/null | tee -a "$out"
done
python3 - "$out" <<'PY'
import json, sys
one, many = [json.loads(l) for l in open(sys.argv[1])]
for tier in one["tiers"]:
    a, b = one["tiers"][tier], many["tiers"].get(tier)
    if b:
        print(f"{tier}: 1 thread median {a['median_ms']:.2f} ms (min {a['min_ms']:.2f}); "
              f"{many['threads']} threads median {b['median_ms']:.2f} ms (min {b['min_ms']:.2f}); "
              f"speedup {a['median_ms'] / b['median_ms']:.2f}x median, {a['min_ms'] / b['min_ms']:.2f}x min")
PY
rm -f "$out"
