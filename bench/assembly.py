"""Sparse results the loops cannot assemble in order, against SciPy in the
same run: SpGEMM CSR x CSR -> CSR (tensorc: a workspace row, Gustavson's
algorithm) and transposition CSR -> CSR (tensorc: the operand converted into
the result's arrays, one counting sort by column visiting rows in order;
SciPy: `.T.tocsr()`). Allocation of the sparse result is
inside every timer, as a user would time it.

    bench/setup.sh && bench/.venv/bin/python bench/assembly.py [--runs N]

Inputs: the real matrices in examples/data and a generated power-law matrix
of 1M rows (the one bench/run.py uses; its SpGEMM result has 12.7M
entries). Prints one table: median ms per tier and the ratio to SciPy.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parent.parent
TENSORC = ROOT / "target" / "release" / "tensorc"
OUT = ROOT / "bench" / "out"

def sorted_product(m):
    p = m @ m
    p.sort_indices()
    return p


# SciPy's `B @ C` leaves each row's columns unsorted; tensorc's CSR result
# is sorted (its compressed level is ordered), so the SpGEMM rows also give
# SciPy's time for a sorted result (`B @ C` then `.sort_indices()`).
KERNELS = {
    "spgemm": ("A(i,j) = B(i,k) * C(k,j)", lambda m: m @ m, sorted_product),
    "transpose": ("A(i,j) = B(j,i)", lambda m: m.T.tocsr(), None),
}


def inputs():
    data = ROOT / "examples" / "data"
    for name in ["west0479", "olm1000", "cage8", "bcsstk13"]:
        yield name, data / f"{name}.mtx"
    generated = OUT / "inputs" / "powerlaw_1000000.mtx"
    if not generated.exists():
        generated.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cargo", "run", "--release", "--locked", "-q", "-p", "tensor-compiler", "--example", "gen_matrix", "--", "powerlaw", "1000000", str(generated)], cwd=ROOT, check=True)
    yield "powerlaw-1M", generated


def scipy_ms(f, m, runs):
    f(m)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        f(m)
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e3


def tensorc_ms(expr, path, backend, runs, square):
    args = [str(TENSORC), expr, "-f", "A:CSR", "-f", "B:CSR", "-i", f"B:{path}", "--time", str(runs), "--json", "--backend", backend, "--threads", "1"]
    if square:
        args += ["-f", "C:CSR", "-i", f"C:{path}"]
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        return None
    return json.loads(out.stdout)["median_ms"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=7)
    a = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    subprocess.run(["cargo", "build", "--release", "--locked", "--workspace"], cwd=ROOT, check=True)
    rows = []
    for name, path in inputs():
        m = sp.csr_matrix(scipy.io.mmread(path))
        for kernel, (expr, f, f_sorted) in KERNELS.items():
            peer = scipy_ms(f, m, a.runs)
            peer_sorted = scipy_ms(f_sorted, m, a.runs) if f_sorted else None
            tiers = {b: tensorc_ms(expr, path, b, a.runs, kernel == "spgemm") for b in ["cc", "cranelift"]}
            rows.append((kernel, name, tiers["cc"], tiers["cranelift"], peer, peer_sorted))
    print("| kernel | matrix | tensorc cc | tensorc Cranelift | SciPy | SciPy, sorted result | cc / SciPy | Cranelift / SciPy | cc / SciPy sorted |")
    print("|---|---|---|---|---|---|---|---|---|")
    fmt = lambda x: "-" if x is None else f"{x:.3f}"
    ratio = lambda x, y: "-" if x is None or y is None else f"{x / y:.2f}"
    for kernel, name, cc, cl, peer, peer_sorted in rows:
        print(f"| {kernel} | {name} | {fmt(cc)} | {fmt(cl)} | {peer:.3f} | {fmt(peer_sorted)} | {ratio(cc, peer)} | {ratio(cl, peer)} | {ratio(cc, peer_sorted)} |")


if __name__ == "__main__":
    sys.exit(main())
