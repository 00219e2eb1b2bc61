"""How a kernel's Cranelift compile time spreads over separate tensorc
processes, as the bench's `jit compile ms` column meets it: each process
compiles once, after reading and packing its data.

    python3 bench/compile_spread.py [--runs N] [--no-thp] -- TENSORC ARGS

Prints the compile times (wall and the compiling thread's CPU time) in
order, their median, and how many took more than twice the median.
`--no-thp` also runs every process with transparent huge pages turned off
for it (`prctl(PR_SET_THP_DISABLE)`, inherited through `exec`), in
alternation with the default, so that both meet the same host.

Why: on the bench's virtual machine, about one process in ten compiles
its kernel 2-10x slower (3-17 ms for a 1.5 ms compile), with CPU time
equal to wall time, the same page faults, and the time spread evenly over
the compiler's code; the same compile repeated inside one process never
does (0 in 2,000). Without huge pages for the process there were none in
100 runs; see the closing note of 2026-11-30 (thirtieth session).
"""

import argparse
import ctypes
import json
import pathlib
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
TENSORC = ROOT / "target" / "release" / "tensorc"
PR_SET_THP_DISABLE = 41


def without_thp():
    """In the child before `exec`: no transparent huge pages for it."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0)


def compile_ms(args, no_thp):
    """(wall, CPU) ms of the Cranelift compile of one tensorc process."""
    cmd = [str(TENSORC)] + args + ["--time", "1", "--json", "--backend", "cranelift"]
    r = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=without_thp if no_thp else None)
    if r.returncode != 0:
        sys.exit(f"tensorc failed: {r.stderr.strip()}")
    d = json.loads(r.stdout)
    return d["compile_ms"], d.get("compile_cpu_ms")


def summary(name, times):
    walls = sorted(t[0] for t in times)
    med = statistics.median(walls)
    slow = [t for t in times if t[0] > 2 * med]
    print(f"{name}: median {med:.2f} ms, {len(slow)} of {len(times)} above twice the median")
    for w, c in sorted(slow):
        print(f"    {w:.2f} ms wall, {c:.2f} ms CPU" if c is not None else f"    {w:.2f} ms wall")


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        sys.exit(__doc__)
    cut = argv.index("--")
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--no-thp", action="store_true", help="also run each process without huge pages, in alternation")
    o = ap.parse_args(argv[:cut])
    args = argv[cut + 1:]
    modes = [False, True] if o.no_thp else [False]
    times = {m: [] for m in modes}
    for _ in range(o.runs):
        for m in modes:
            times[m].append(compile_ms(args, m))
    for m in modes:
        summary("without huge pages" if m else "default", times[m])


if __name__ == "__main__":
    main()
