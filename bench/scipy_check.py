"""Cross-check tensorc against SciPy on the real matrices in examples/data:
SpMV, unions of SpMVs, SpGEMM, addition, transposition and format
conversions, each run as a user would, `tensorc EXPR -f ... -i ... -o ...`,
and compared with SciPy's answer. Not part of the tests (scripts/scipy_check.sh runs it).

    bench/.venv/bin/python bench/scipy_check.py [--tensorc PATH] [--only NAME]

Prints one line per check (pass, refused with tensorc's error line, or
WRONG with the largest difference and the command line, whose files stay in
bench/out/scipy_check/) and a summary; exits 1 on any wrong
answer or crash, 0 otherwise (refusals are counted, not failures).
"""
import argparse
import subprocess
import sys
import shutil
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "examples" / "data"
TOL = 1e-9

SPMV = ["CSR", "CSC", "COO", "DCSR", "COO-AoS", "ELL", "DIA", "BCSR(4)", "CSB(4)"]
# Unions of products: y = A*x + S*x with S = A transposed (or another
# pattern when A is not square).
UNION = [("CSR", "CSR"), ("CSR", "CSC"), ("COO", "COO"), ("CSR", "dense")]
SPGEMM = [("CSR", "CSR", "CSR"), ("CSC", "CSC", "CSC"), ("CSR", "CSC", "CSR"), ("DCSR", "DCSR", "DCSR"),
          ("COO", "CSR", "COO"), ("CSR", "CSR", "dense"), ("CSR", "dense", "dense"), ("COO", "dense", "CSR"),
          ("CSC", "CSR", "CSR"), ("CSR", "CSC", "COO"), ("DCSR", "CSR", "CSC"), ("COO", "CSC", "DCSR"), ("COO", "COO", "CSR")]
ADD = [("CSR", "CSR", "CSR"), ("CSR", "CSC", "CSR"), ("CSC", "CSC", "CSC"), ("COO", "COO", "COO"), ("DCSR", "CSR", "DCSR"), ("CSR", "CSR", "dense")]
TRANSPOSE = [("CSR", "CSR"), ("CSR", "CSC"), ("CSC", "CSC"), ("COO", "COO"), ("CSR", "dense"), ("DCSR", "DCSR")]
CONVERT = [("CSR", "CSC"), ("CSC", "CSR"), ("COO", "CSR"), ("COO", "CSC"), ("CSR", "DCSR"), ("CSR", "COO"), ("ELL", "CSR"),
           ("DIA", "CSR"), ("BCSR(4)", "CSR"), ("CSB(4)", "CSR"), ("CSR", "hashed,dense"), ("CSR", "dense")]


def load(path):
    return sp.csr_matrix(scipy.io.mmread(str(path)), dtype=np.float64)


def write_mtx(path, m):
    scipy.io.mmwrite(str(path), sp.coo_matrix(m), field="real", symmetry="general")


def write_vector(path, v):
    with open(path, "w") as f:
        for i, x in enumerate(v):
            f.write(f"{i + 1} {float(x)!r}\n")


def read_result(path, shape):
    """tensorc's -o file as a dense or sparse SciPy matrix of `shape`."""
    if path.suffix == ".mtx":
        return sp.csr_matrix(scipy.io.mmread(str(path)), dtype=np.float64)
    out = np.zeros(shape)
    for line in path.read_text().splitlines():
        parts = line.split()
        if not parts or parts[0].startswith("#"):
            continue
        idx = tuple(int(p) - 1 for p in parts[:-1])
        out[idx] += float(parts[-1])
    return out


def difference(got, want):
    """Largest absolute difference and the scale it is judged against."""
    if sp.issparse(got) or sp.issparse(want):
        got, want = sp.csr_matrix(got), sp.csr_matrix(want)
        if got.shape != want.shape:
            return float("inf"), 1.0
        d = abs(got - want)
        scale = max(1.0, abs(want).max() if want.nnz else 0.0)
        return (d.max() if d.nnz else 0.0), scale
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return float("inf"), 1.0
    return float(np.max(np.abs(got - want), initial=0.0)), max(1.0, float(np.max(np.abs(want), initial=0.0)))


class Checker:
    def __init__(self, tensorc, tmp):
        self.tensorc, self.tmp = tensorc, tmp
        self.counts = {"pass": 0, "refused": 0, "WRONG": 0, "crash": 0}
        self.refusals = {}

    def run(self, label, expr, formats, inputs, result, shape, want):
        out = self.tmp / (result + (".tns" if len(shape) == 1 else ".mtx"))
        out.unlink(missing_ok=True)
        cmd = [str(self.tensorc), expr]
        for name, fmt in formats.items():
            cmd += ["-f", f"{name}:{fmt}"]
        for name, path in inputs.items():
            cmd += ["-i", f"{name}:{path}"]
        cmd += ["-o", f"{result}:{out}"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        shown = " ".join(f"'{c}'" if any(ch in c for ch in " ()") else c for c in cmd[1:])
        if p.returncode != 0:
            err = (p.stderr.strip().splitlines() or ["(no message)"])[-1]
            kind = "crash" if ("internal" in err or "panic" in err or p.returncode < 0 or not err.startswith("error:")) else "refused"
            self.counts[kind] += 1
            if kind == "refused":
                self.refusals[err] = self.refusals.get(err, 0) + 1
            print(f"{kind:8} {label}: {err}" + (f"\n         tensorc {shown}" if kind == "crash" else ""))
            return
        got = read_result(out, shape)
        diff, scale = difference(got, want)
        if diff <= TOL * scale:
            self.counts["pass"] += 1
            print(f"pass     {label}")
        else:
            self.counts["WRONG"] += 1
            print(f"WRONG    {label}: largest difference {diff:.3g} (scale {scale:.3g})\n         tensorc {shown}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tensorc", default=str(ROOT / "target" / "release" / "tensorc"))
    ap.add_argument("--only", help="one matrix, e.g. west0479")
    args = ap.parse_args()
    rng = np.random.default_rng(7)
    # Files stay after the run so that the printed command lines work.
    tmp = ROOT / "bench" / "out" / "scipy_check"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    c = Checker(args.tensorc, tmp)
    for path in sorted(DATA.glob("*.mtx")):
        name = path.stem
        if args.only and name != args.only:
            continue
        A = load(path)
        m, n = A.shape
        # A general copy (symmetric files are expanded the same way by both readers).
        a_path = tmp / f"{name}.mtx"
        write_mtx(a_path, A)
        At = sp.csr_matrix(A.T)
        at_path = tmp / f"{name}_T.mtx"
        write_mtx(at_path, At)
        # A second operand of A's shape with a different pattern.
        R = sp.random(m, n, density=min(1.0, 4.0 / max(n, 1)), format="csr", random_state=11)
        R.data = np.round(R.data * 8) / 4 + 0.25
        r_path = tmp / f"{name}_R.mtx"
        write_mtx(r_path, R)
        x = rng.integers(-4, 5, n) / 4.0
        x_path = tmp / f"{name}_x.tns"
        write_vector(x_path, x)
        print(f"== {name} {m}x{n}, {A.nnz} stored entries")
        for f in SPMV:
            c.run(f"{name} SpMV A:{f}", "y(i) = A(i,j) * x(j)", {"A": f}, {"A": a_path, "x": x_path}, "y", (m,), A @ x)
        S, s_path = (At, at_path) if m == n else (R, r_path)
        for fa, fb in UNION:
            c.run(f"{name} A*x+S*x {fa},{fb}", "y(i) = A(i,j) * x(j) + B(i,j) * x(j)", {"A": fa, "B": fb},
                  {"A": a_path, "B": s_path, "x": x_path}, "y", (m,), A @ x + S @ x)
        B, b_path = (A, a_path) if m == n else (At, at_path)
        for fa, fb, fc in SPGEMM:
            c.run(f"{name} SpGEMM {fa}*{fb}->{fc}", "C(i,j) = A(i,k) * B(k,j)", {"A": fa, "B": fb, "C": fc},
                  {"A": a_path, "B": b_path}, "C", (m, B.shape[1]), A @ B)
        for fa, fb, fc in ADD:
            c.run(f"{name} add {fa}+{fb}->{fc}", "C(i,j) = A(i,j) + B(i,j)", {"A": fa, "B": fb, "C": fc},
                  {"A": a_path, "B": s_path}, "C", (m, n), A + S)
        for fa, fc in TRANSPOSE:
            c.run(f"{name} transpose {fa}->{fc}", "C(i,j) = A(j,i)", {"A": fa, "C": fc}, {"A": a_path}, "C", (n, m), At)
        for fa, fc in CONVERT:
            c.run(f"{name} convert {fa}->{fc}", "C(i,j) = A(i,j)", {"A": fa, "C": fc}, {"A": a_path}, "C", (m, n), A)
    total = sum(c.counts.values())
    print("\n" + ", ".join(f"{k} {v}" for k, v in c.counts.items()) + f" of {total} checks")
    if c.refusals:
        print("refusals by message:")
        for msg, k in sorted(c.refusals.items(), key=lambda kv: -kv[1]):
            print(f"  {k:4}  {msg}")
    return 1 if c.counts["WRONG"] or c.counts["crash"] else 0


if __name__ == "__main__":
    sys.exit(main())
