"""Cranelift tier against the cc tier on the paper's kernels, mid-size inputs.

    python3 bench/jit.py [--repeats N] [--runs N] [--filter TEXT]

Per kernel: the Cranelift compile time tensorc reports (median over the
repeats, wall time), each tier's median run time (`tensorc --time N --json
--backend auto --threads 1`; the first call of a kernel builds and caches
its cc tier, so a warm-up invocation runs before the measured ones) and the
ratio Cranelift / cc, the median of the per-invocation ratios (both tiers
timed in the same process, so machine noise hits both alike).

Inputs: generated matrices (`gen_matrix`), written once to bench/out/jit/,
and random operands from tensorc's own generator (`--density`, `-d`).
Needs `cargo build --release` and the `gen_matrix` example built;
`TENSORC=path` times another build of tensorc.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TENSORC = Path(os.environ.get("TENSORC", ROOT / "target" / "release" / "tensorc"))
GEN = ROOT / "target" / "release" / "examples" / "gen_matrix"
DATA = ROOT / "bench" / "out" / "jit"


def matrix(kind, size):
    path = DATA / f"{kind}_{size}.mtx"
    if not path.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        subprocess.run([str(GEN), kind, str(size), str(path)], check=True)
    return path


def kernels():
    stencil = matrix("stencil5", 400)  # 160K rows, 800K nonzeros
    banded = matrix("banded", 400_000)  # tridiagonal, 1.2M nonzeros
    power = matrix("powerlaw", 100_000)
    spmv = "y(i) = A(i,j) * x(j)"
    spdm = "A(i,k) = B(i,j) * C(j,k)"
    t3 = ["-d", "B:200,300,400", "--density", "0.005"]  # 120K nonzeros
    return [
        ("SpMV CSR", [spmv, "-f", "A:CSR", "-i", f"A:{stencil}"]),
        ("SpMV COO", [spmv, "-f", "A:COO", "-i", f"A:{stencil}"]),
        ("SpMV CSC", [spmv, "-f", "A:CSC", "-i", f"A:{stencil}"]),
        ("SpMV DCSR", [spmv, "-f", "A:DCSR", "-i", f"A:{stencil}"]),
        ("SpMV ELL", [spmv, "-f", "A:ELL", "-i", f"A:{stencil}"]),
        ("SpMV DIA", [spmv, "-f", "A:DIA", "-i", f"A:{banded}"]),
        ("SpMV BCSR(4)", [spmv, "-f", "A:BCSR(4)", "-i", f"A:{stencil}"]),
        ("SpMV CSB(256)", [spmv, "-f", "A:CSB(256)", "-i", f"A:{stencil}"]),
        ("CSR add", ["A(i,j) = B(i,j) + C(i,j)", "-f", "A:CSR", "-f", "B:CSR", "-f", "C:CSR", "-d", "B:20000,20000", "-d", "C:20000,20000", "--density", "0.001"]),
        ("SpDM COO", [spdm, "-f", "B:COO", "-i", f"B:{power}", "-d", "C:100000,32"]),
        ("SpDM CSR", [spdm, "-f", "B:CSR", "-i", f"B:{power}", "-d", "C:100000,32"]),
        ("TTV COO", ["A(i,j) = B(i,j,k) * c(k)", "-f", "B:COO"] + t3),
        ("MTTKRP COO", ["A(i,j) = B(i,k,l) * P(k,j) * Q(l,j)", "-f", "B:COO", "-d", "P:300,16", "-d", "Q:400,16"] + t3),
        ("MTTKRP CSF", ["A(i,j) = B(i,k,l) * P(k,j) * Q(l,j)", "-f", "B:CSF", "-d", "P:300,16", "-d", "Q:400,16"] + t3),
        ("PLUS COO", ["A(i,j,k) = B(i,j,k) + C(i,j,k)", "-f", "A:COO", "-f", "B:COO", "-f", "C:COO", "-d", "C:200,300,400"] + t3),
        ("PLUS CSF", ["A(i,j,k) = B(i,j,k) + C(i,j,k)", "-f", "A:CSF", "-f", "B:CSF", "-f", "C:CSF", "-d", "C:200,300,400"] + t3),
        ("INNERPROD COO", ["a = B(i,j,k) * C(i,j,k)", "-f", "B:COO", "-f", "C:COO", "-d", "C:200,300,400"] + t3),
    ]


def run(args, runs):
    cmd = [str(TENSORC)] + args + ["--time", str(runs), "--json", "--backend", "auto", "--threads", "1"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        errors = [l for l in r.stderr.splitlines() if l.startswith("error:")]
        raise RuntimeError(errors[-1] if errors else r.stderr.strip())
    return json.loads(r.stdout)["tiers"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=5, help="tensorc invocations per kernel")
    p.add_argument("--runs", type=int, default=20, help="timed runs per tier and invocation")
    p.add_argument("--filter", default="")
    o = p.parse_args()
    print(f"{'kernel':14} {'compile ms':>10} {'cranelift ms':>12} {'cc ms':>8} {'ratio':>6}")
    for label, args in kernels():
        if o.filter not in label:
            continue
        try:
            run(args, 1)  # builds and caches the cc tier
            tiers = [run(args, o.runs) for _ in range(o.repeats)]
        except RuntimeError as e:
            print(f"{label:14} {e}")
            continue
        med = lambda xs: statistics.median(xs)
        compile_ms = med([t["cranelift"]["compile_ms"] for t in tiers])
        cl = med([t["cranelift"]["median_ms"] for t in tiers])
        cc = med([t["cc"]["median_ms"] for t in tiers])
        ratio = med([t["cranelift"]["median_ms"] / t["cc"]["median_ms"] for t in tiers])
        print(f"{label:14} {compile_ms:10.3f} {cl:12.3f} {cc:8.3f} {ratio:6.2f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
