#!/usr/bin/env bash
# Two builds of tensorc timed in alternation on one kernel: each round runs
# OLD, then NEW (`--time RUNS --json`), and the medians of the rounds'
# medians are compared. For a change outside the emitted C (the runtime,
# the allocator, the Cranelift tier); an edit of the C alone is better
# measured in one process with `examples/ab_kernels.rs`.
#
#   bench/ab_builds.sh OLD_TENSORC NEW_TENSORC [ROUNDS [RUNS]] -- TENSORC ARGS
#
# The older build, e.g. of commit C:
#   git worktree add /tmp/old C
#   (cd /tmp/old && CARGO_TARGET_DIR=/tmp/old-target cargo build --release -p tensor-compiler --bin tensorc)
#   bench/ab_builds.sh /tmp/old-target/release/tensorc target/release/tensorc 5 20 -- \
#       "C(i,j)=A(i,j)+B(i,j)" -f A:CSR -f B:CSR -f C:CSR -i A:a.mtx -i B:b.mtx \
#       --threads 1 --backend cc --fresh-result
set -euo pipefail
usage="usage: $0 OLD_TENSORC NEW_TENSORC [ROUNDS [RUNS]] -- TENSORC ARGS"
[ $# -ge 3 ] || { echo "$usage" >&2; exit 2; }
old="$1" new="$2"
shift 2
rounds=5 runs=20
[ "${1:-}" != "--" ] && { rounds="$1"; shift; }
[ "${1:-}" != "--" ] && { runs="$1"; shift; }
[ "${1:-}" = "--" ] || { echo "$usage" >&2; exit 2; }
shift
median() {
  "$1" "${@:2}" --time "$runs" --json 2>/dev/null |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["median_ms"])'
}
a=() b=()
for _ in $(seq "$rounds"); do
  a+=("$(median "$old" "$@")")
  b+=("$(median "$new" "$@")")
done
python3 - "${a[*]}" "${b[*]}" <<'EOF'
import statistics, sys
a = [float(x) for x in sys.argv[1].split()]
b = [float(x) for x in sys.argv[2].split()]
ma, mb = statistics.median(a), statistics.median(b)
won = sum(y < x for x, y in zip(a, b))
print(f"old {ma:.3f} ms  new {mb:.3f} ms  new/old {mb / ma:.3f}  (new faster in {won} of {len(a)} rounds)")
EOF
