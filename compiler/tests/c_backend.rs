//! The emitted C and the optimizing tier: every snapshot kernel and a sweep
//! of random kernels compile as printed with `cc -std=c99 -O2 -Wall -Werror`,
//! and the cc tier gives the JIT's answer (and the oracle's) on the same
//! inputs. Two backends, one answer. Without a C compiler the tests say
//! they were skipped and pass.

mod common;
use common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use tensor_compiler::backend::cc;
use tensor_compiler::coo::CooTensor;
use tensor_compiler::execute::prepare;
use tensor_compiler::jit::Tier;
use tensor_compiler::notation::parse_assignment;
use tensor_compiler::oracle;

/// A private cache and scratch directory; false (and a printed line) when
/// this machine has no C compiler.
fn setup(test: &str) -> Option<PathBuf> {
    static INIT: std::sync::Once = std::sync::Once::new();
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("c_backend");
    INIT.call_once(|| {
        // Set before any build: the cache directory is read per build.
        std::env::set_var("TENSOR_CACHE_DIR", root.join("cache"));
    });
    match cc::compiler() {
        Ok(_) => {
            let dir = root.join(test);
            std::fs::create_dir_all(&dir).unwrap();
            Some(dir)
        }
        Err(e) => {
            println!("skipped {test}: {e}");
            None
        }
    }
}

fn cc_command() -> Vec<String> {
    cc::compiler().unwrap().command.clone()
}

/// Build the program of the C files `sources` into `exe` with the
/// machine's compiler (`-std=c99 -O2`, then `flags`, linked with `-lm`);
/// a failed build fails the test with the compiler's messages.
fn build_program(exe: &Path, sources: &[PathBuf], flags: &[&str]) {
    let cc = cc_command();
    let build = Command::new(&cc[0])
        .args(&cc[1..])
        .args(["-std=c99", "-O2"])
        .args(flags)
        .arg("-o")
        .arg(exe)
        .args(sources)
        .arg("-lm")
        .output()
        .unwrap();
    assert!(
        build.status.success(),
        "{}",
        String::from_utf8_lossy(&build.stderr)
    );
}

/// Compile `text` as a user would: `cc -std=c99 -O2 -Wall -Werror -c`.
fn compiles_cleanly(dir: &Path, name: &str, text: &str) -> Result<(), String> {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, text).unwrap();
    let cc = cc_command();
    let out = Command::new(&cc[0])
        .args(&cc[1..])
        .args(["-std=c99", "-O2", "-Wall", "-Werror", "-c", "-o"])
        .arg(dir.join(format!("{name}.o")))
        .arg(&src)
        .output()
        .unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} does not compile:\n{}\n{text}",
            src.display(),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The snapshot kernels of `snapshots.rs`: (expression, formats).
fn snapshot_kernels() -> Vec<(&'static str, Vec<(&'static str, &'static str)>)> {
    let mut v = Vec::new();
    for f in [
        "CSR", "CSC", "COO", "COO-AoS", "DCSR", "ELL", "DIA", "BCSR(4)", "CSB(4)",
    ] {
        v.push((
            "y(i) = A(i,j) * x(j)",
            vec![("A", f), ("x", "dense"), ("y", "dense")],
        ));
    }
    v.push((
        "y(i) = A(i,j) * x(j)",
        vec![("A", "CSR"), ("x", "hash"), ("y", "dense")],
    ));
    v.push((
        "y(i) = A(i,j) * x(j)",
        vec![("A", "CSR"), ("x", "sparse"), ("y", "dense")],
    ));
    for (b, c) in [("COO", "dense"), ("CSR", "dense"), ("CSR", "COO")] {
        v.push((
            "A(i,j) = B(i,j) * C(i,j)",
            vec![("A", "dense"), ("B", b), ("C", c)],
        ));
    }
    v.push((
        "A(i,j) = B(i,j) + C(i,j)",
        vec![("A", "CSR"), ("B", "CSR"), ("C", "CSR")],
    ));
    v.push((
        "A(i,j) = B(i,j) + C(i,j)",
        vec![("A", "COO"), ("B", "COO"), ("C", "COO")],
    ));
    v
}

const EXTENT: [usize; 3] = [9, 7, 6];
const VARS: [&str; 3] = ["i", "j", "k"];

/// Random data for every tensor of `expr`, dimensions from the index names.
fn data_for(expr: &str, out_name: &str, seed: u64) -> (BTreeMap<String, CooTensor>, Vec<usize>) {
    let a = parse_assignment(expr).unwrap();
    let dims = |acc: &tensor_compiler::notation::Access| -> Vec<usize> {
        acc.indices
            .iter()
            .map(|i| EXTENT[VARS.iter().position(|v| *v == i.name).unwrap()])
            .collect()
    };
    let mut rng = Rng(seed);
    let mut data = BTreeMap::new();
    for acc in a.rhs.accesses() {
        data.entry(acc.tensor.clone())
            .or_insert_with(|| random(&dims(acc), 0.3, &mut rng));
    }
    assert_eq!(a.lhs.tensor, out_name);
    (data, dims(&a.lhs))
}

/// Run `expr` on the Cranelift tier and on the cc tier; both must match the
/// oracle. `Ok(false)` when the compiler refuses the kernel.
fn two_backends_one_answer(
    dir: &Path,
    tag: &str,
    expr: &str,
    specs: &[(&str, &str)],
    seed: u64,
) -> Result<bool, String> {
    let a = parse_assignment(expr).map_err(|e| e.to_string())?;
    let (data, out_dims) = data_for(expr, &a.lhs.tensor, seed);
    two_backends_on(dir, tag, expr, specs, &data, &out_dims)
}

/// `two_backends_one_answer` on the given data.
fn two_backends_on(
    dir: &Path,
    tag: &str,
    expr: &str,
    specs: &[(&str, &str)],
    data: &BTreeMap<String, CooTensor>,
    out_dims: &[usize],
) -> Result<bool, String> {
    let a = parse_assignment(expr).map_err(|e| e.to_string())?;
    let (data, out_dims) = (data.clone(), out_dims.to_vec());
    let formats = formats_rest_dense(&a, specs, &data, out_dims.len());
    let mut jit = match prepare("kernel", &a, &formats, &data, &out_dims, None) {
        Ok(p) => p,
        Err(_) => return Ok(false),
    };
    let text = tensor_compiler::ir::c::function(&jit.kernel.function);
    compiles_cleanly(dir, tag, &text).map_err(|e| format!("{expr} {specs:?}: {e}"))?;
    let mut native =
        prepare("kernel", &a, &formats, &data, &out_dims, None).map_err(|e| e.to_string())?;
    native.compiled =
        cc::compile(&native.kernel.function).map_err(|e| format!("{expr} {specs:?}: {e}"))?;
    assert_eq!(native.compiled.tier, Tier::Cc);
    jit.run().map_err(|e| e.to_string())?;
    native.run().map_err(|e| e.to_string())?;
    let want = oracle::evaluate(&a, &data, &out_dims, None)?;
    let (by_jit, by_cc) = (
        jit.result().map_err(|e| e.to_string())?,
        native.result().map_err(|e| e.to_string())?,
    );
    close(&by_jit, &want).map_err(|e| format!("{expr} {specs:?}: Cranelift tier: {e}"))?;
    close(&by_cc, &want).map_err(|e| format!("{expr} {specs:?}: cc tier: {e}\n{text}"))?;
    if by_jit.vals.iter().sum::<f64>().to_bits() != by_cc.vals.iter().sum::<f64>().to_bits()
        || by_jit.nnz() != by_cc.nnz()
    {
        return Err(format!(
            "{expr} {specs:?}: the tiers differ (nnz {} vs {})",
            by_jit.nnz(),
            by_cc.nnz()
        ));
    }
    Ok(true)
}

#[test]
fn snapshot_kernels_compile_and_agree() {
    let Some(dir) = setup("snapshots") else {
        return;
    };
    for (n, (expr, specs)) in snapshot_kernels().iter().enumerate() {
        for seed in 1..3 {
            assert!(
                two_backends_one_answer(&dir, &format!("snap{n}"), expr, specs, seed)
                    .unwrap_or_else(|e| panic!("{e}")),
                "{expr} {specs:?} refused"
            );
        }
    }
}

/// Negations of negatives, of loaded values, of variables and of sums
/// (sweep seeds 15500298 and 15505014 on the cc tier): C once read `- -x`
/// printed as `--x`, a decrement, which fails to compile on a value read
/// from an input and silently changes a variable.
#[test]
fn negated_negatives_agree() {
    let Some(dir) = setup("negations") else {
        return;
    };
    let kernels: &[(&str, &[(&str, &str)])] = &[
        ("A = -(-(B(i,j)))", &[("B", "CSR")]),
        ("A = -(-(-(B(i,j))))", &[("B", "COO")]),
        (
            "a(i) = -(-(b(i) + c(i)))",
            &[("b", "sparse"), ("c", "dense")],
        ),
        (
            "A(i,j) = -(B(i,j)) * -(B(i,j)) - -((c(i) + B(i,j)))",
            &[("B", "CSR"), ("c", "sparse"), ("A", "CSR")],
        ),
        ("a(i) = -(-(B(i,j) * c(j))) - -(-(b(i)))", &[("B", "CSR")]),
    ];
    for (n, (expr, specs)) in kernels.iter().enumerate() {
        for seed in 1..3 {
            assert!(
                two_backends_one_answer(&dir, &format!("neg{n}"), expr, specs, seed)
                    .unwrap_or_else(|e| panic!("{e}")),
                "{expr} {specs:?} refused"
            );
        }
    }
}

/// SpMV's operands for matrix `m`: `A`, and an `x` of a few distinct
/// values; with `y` computed by plain loops over `m`'s entries, the
/// independent answer.
fn spmv_operands(m: CooTensor) -> (BTreeMap<String, CooTensor>, Vec<f64>) {
    let n = m.dims[1];
    let xv: Vec<f64> = (0..n).map(|j| ((j * 7 % 13) as f64 - 6.0) / 4.0).collect();
    let mut want = vec![0.0; m.dims[0]];
    for e in 0..m.nnz() {
        let c = m.coord(e);
        want[c[0] as usize] += m.vals[e] * xv[c[1] as usize];
    }
    let data = [
        ("A".to_string(), m),
        ("x".to_string(), CooTensor::from_dense(vec![n], &xv)),
    ]
    .into_iter()
    .collect();
    (data, want)
}

/// SpMV with `A` in `format` over `data` (`spmv_operands`), the other
/// operands dense, `rows` rows, ready to run on the Cranelift tier.
fn spmv_prepared(
    a: &tensor_compiler::notation::Assignment,
    format: &str,
    data: &BTreeMap<String, CooTensor>,
    rows: usize,
) -> tensor_compiler::execute::Prepared {
    let formats = formats_rest_dense(a, &[("A", format)], data, 1);
    prepare("kernel", a, &formats, data, &[rows], None).unwrap()
}

/// Run `p` on the cc tier against the independent answer `want`.
fn cc_agrees(p: &mut tensor_compiler::execute::Prepared, want: &[f64], what: &str) {
    p.compiled = cc::compile(&p.kernel.function).unwrap();
    p.run().unwrap();
    assert_close(&p.result().unwrap().to_dense(), want, what);
}

/// DIA and ELL SpMV over enough rows for `ir::tile`'s tiles on every
/// host (from 2^21 rows on AMD Zen, from two tiles elsewhere), so that
/// every diagonal or slot runs over many tiles and ends inside one, on
/// both tiers, against plain loops over the entries.
#[test]
fn diagonals_over_several_tiles_agree() {
    let Some(_dir) = setup("tiles") else { return };
    // Tiles start by 2^21 rows (`ir::tile`); a partial tile at the end.
    let rows = (1 << 21) + 3 * 1024 + 17;
    let expr = "y(i) = A(i,j) * x(j)";
    let a = parse_assignment(expr).unwrap();
    // DIA's diagonals, and ELL's slots with their test for padding.
    for (seed, bands, format) in [(1, 3, "DIA"), (2, 7, "DIA"), (3, 3, "ELL")] {
        let m = tensor_compiler::generate::banded(rows, bands, seed);
        let (data, want) = spmv_operands(m);
        let formats = formats_rest_dense(&a, &[("A", format)], &data, 1);
        let mut jit = prepare("kernel", &a, &formats, &data, &[rows], None).unwrap();
        let text = tensor_compiler::ir::c::function(&jit.kernel.function);
        assert!(
            text.contains("iA_tile"),
            "{format}, {bands} bands: no tiles\n{text}"
        );
        // ELL's rows ask ahead for the slot's values (`ir::streams`),
        // which are large enough here that the asks run.
        assert_eq!(
            format == "ELL",
            text.contains("tensor_prefetch_from(A_vals, slotA * A2_N + iA + 256,"),
            "{format}, {bands} bands\n{text}"
        );
        let mut native = prepare("kernel", &a, &formats, &data, &[rows], None).unwrap();
        native.compiled = cc::compile(&native.kernel.function).unwrap();
        jit.run().unwrap();
        native.run().unwrap();
        let (by_jit, by_cc) = (jit.result().unwrap(), native.result().unwrap());
        // Each row adds its diagonals in their order on both tiers.
        assert_eq!(
            by_jit.vals, by_cc.vals,
            "{format}, {bands} bands: the tiers differ"
        );
        assert_close(
            &by_cc.to_dense(),
            &want,
            &format!("{format}, {bands} bands"),
        );
    }
}

/// DIA and ELL SpMV on the real matrices with their rows in tiles on any
/// host: the C compiled with `TENSOR_TILE_FROM_ROWS` set to one row (the
/// macro a user may set), against plain loops over the entries. Matrices
/// with up to 32 diagonals or slots take the tiles (`ir::tile`), in one
/// partial tile below 1,024 rows and several above; the others run as
/// they were.
#[test]
fn diagonals_in_tiles_on_real_matrices() {
    let Some(_dir) = setup("real_tiles") else {
        return;
    };
    let a = parse_assignment("y(i) = A(i,j) * x(j)").unwrap();
    let mut tiled = Vec::new();
    for path in real_matrices() {
        let m = tensor_compiler::io::read_tensor(&path).unwrap();
        let rows = m.dims[0];
        let diagonals: std::collections::BTreeSet<i64> = (0..m.nnz())
            .map(|e| m.coord(e)[1] as i64 - m.coord(e)[0] as i64)
            .collect();
        let mut per_row = vec![0usize; rows];
        for e in 0..m.nnz() {
            per_row[m.coord(e)[0] as usize] += 1;
        }
        let slots = per_row.iter().copied().max().unwrap_or(0);
        let (data, want) = spmv_operands(m);
        for (format, outer) in [("DIA", diagonals.len()), ("ELL", slots)] {
            let what = format!("{}: SpMV with A in {format}, tiled", path.display());
            let mut p = spmv_prepared(&a, format, &data, rows);
            let text = tensor_compiler::ir::c::function(&p.kernel.function);
            assert!(text.contains("iA_tile"), "{what}: no tiles\n{text}");
            let from_one_row = format!("#define TENSOR_TILE_FROM_ROWS ((int64_t)1)\n{text}");
            p.compiled = cc::compile_variant(&p.kernel.function, &from_one_row).unwrap();
            p.run().unwrap();
            assert_close(&p.result().unwrap().to_dense(), &want, &what);
            if outer <= 32 {
                tiled.push((what, rows));
            }
        }
    }
    assert!(
        tiled.iter().any(|(_, rows)| *rows > 2048) && tiled.iter().any(|(_, rows)| *rows < 1024),
        "too few real matrices take the tiles: {tiled:?}"
    );
}

/// Rows of a dense operand chosen by a stored coordinate are prefetched
/// `ir::prefetch`'s distance ahead, up to the coordinates' last position
/// (across CSR's rows): loops shorter and longer than the distance, on
/// both tiers (Cranelift's asks once per strip of positions, through a
/// call), with an operand large enough that the prefetches run.
#[test]
fn rows_asked_for_ahead_agree() {
    let Some(dir) = setup("prefetch") else { return };
    let kernels = [
        ("C(i,k) = A(i,j) * D(j,k)", [("A", "COO")]),
        ("C(i,k) = A(i,j) * D(j,k)", [("A", "CSR")]),
        ("C(i,k) = A(i,j,l) * D(l,k)", [("A", "COO")]),
    ];
    for (expr, specs) in kernels {
        let a = parse_assignment(expr).unwrap();
        let order = a.rhs.accesses()[0].indices.len();
        for (seed, nnz) in [(1, 1), (2, 17), (3, 40)] {
            let mut rng = Rng(seed);
            // D: 16,000 x 33 values, over the 4 MiB below which the C
            // asks for nothing (`TENSOR_PREFETCH_MIN_BYTES`).
            let mut dims: Vec<usize> = [12, 3][..order - 1].to_vec();
            dims.push(16_000);
            let mut sparse = CooTensor::new(dims.clone());
            for _ in 0..nnz {
                let c: Vec<u32> = dims.iter().map(|&n| rng.below(n) as u32).collect();
                sparse.push(&c, rng.value());
            }
            let data: BTreeMap<String, CooTensor> = [
                ("A".to_string(), sparse),
                (
                    "D".to_string(),
                    random(&[dims[order - 1], 33], 1.0, &mut rng),
                ),
            ]
            .into_iter()
            .collect();
            let f = prepare_text(expr, &specs, &data, &[12, 33]);
            assert!(f.contains("tensor_prefetch(&D_vals["), "{f}");
            let ran = two_backends_on(&dir, "prefetch", expr, &specs, &data, &[12, 33])
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(ran, "{expr} refused");
        }
    }
}

/// Dense rows summed in strips of registers across the loop that adds
/// into them (`ir::strips`): row lengths below one strip, of whole
/// strips and with a remainder, from CSR, CSF, dense and blocked operands,
/// and a second term reading the result's row elsewhere (not stripped).
/// The cc tier must give the Cranelift tier's answer to the bit, and the
/// oracle's.
#[test]
fn rows_summed_in_strips_agree() {
    let Some(dir) = setup("strips") else { return };
    type Case = (
        &'static str,
        &'static [(&'static str, &'static str)],
        &'static [(&'static str, &'static [usize])],
        // A sum of the strips the C must have, if any.
        Option<&'static str>,
    );
    let cases: &[Case] = &[
        (
            "C(i,k) = A(i,j) * D(j,k)",
            &[("A", "CSR")],
            &[("A", &[23, 19]), ("D", &[19, 37])],
            Some("strip_sum15"),
        ),
        (
            "C(i,k) = A(i,j) * D(j,k)",
            &[("A", "CSR")],
            &[("A", &[23, 19]), ("D", &[19, 32])],
            Some("strip_sum15"),
        ),
        (
            "C(i,k) = A(i,j) * D(j,k)",
            &[("A", "CSR")],
            &[("A", &[23, 19]), ("D", &[19, 5])],
            Some("strip_sum15"),
        ),
        (
            "C(i,k) = A(i,j) * D(j,k)",
            &[("A", "DCSR")],
            &[("A", &[23, 19]), ("D", &[19, 17])],
            Some("strip_sum15"),
        ),
        (
            "C(i,k) = A(i,j) * D(j,k)",
            &[],
            &[("A", &[13, 11]), ("D", &[11, 33])],
            Some("strip_sum15"),
        ),
        (
            "C(i,k) = A(i,j) * D(j,k)",
            &[("A", "BCSR(4)")],
            &[("A", &[24, 20]), ("D", &[20, 18])],
            None,
        ),
        // COO: its entries taken a run of equal rows at a time.
        (
            "C(i,k) = A(i,j) * D(j,k)",
            &[("A", "COO")],
            &[("A", &[23, 19]), ("D", &[19, 37])],
            Some("strip_sum15"),
        ),
        (
            "C(i,k) = A(i,j) * D(j,k)",
            &[("A", "COO")],
            &[("A", &[23, 19]), ("D", &[19, 16])],
            Some("strip_sum15"),
        ),
        (
            "C(i,k) = A(i,j) * D(j,k)",
            &[("A", "COO")],
            &[("A", &[23, 19]), ("D", &[19, 3])],
            Some("strip_sum15"),
        ),
        (
            "C(i,k) = A(i,j,l) * D(l,k)",
            &[("A", "COO")],
            &[("A", &[7, 5, 9]), ("D", &[9, 17])],
            Some("strip_sum15"),
        ),
        (
            "A(i,j) = B(i,k,l) * P(k,j) * Q(l,j)",
            &[("B", "COO")],
            &[("B", &[9, 8, 7]), ("P", &[8, 21]), ("Q", &[7, 21])],
            Some("strip_sum15"),
        ),
        (
            "C(i,k) = A(i,j) * D(j,k) + E(i,k)",
            &[("A", "COO")],
            &[("A", &[23, 19]), ("D", &[19, 20]), ("E", &[23, 20])],
            None,
        ),
        (
            "A(i,j) = B(i,k,l) * P(k,j) * Q(l,j)",
            &[("B", "CSF")],
            &[("B", &[9, 8, 7]), ("P", &[8, 21]), ("Q", &[7, 21])],
            Some("strip_sum15"),
        ),
        (
            "C(i,k) = A(i,j) * D(j,k) + A(i,j) * E(j,k)",
            &[("A", "CSR")],
            &[("A", &[23, 19]), ("D", &[19, 20]), ("E", &[19, 20])],
            None,
        ),
        // A BCSR block's rows summed across the block row's blocks, one
        // strip of the block size, each lane with its own loop over the
        // block's columns; the last block row and column clipped.
        (
            "y(i) = A(i,j) * x(j)",
            &[("A", "BCSR(4)")],
            &[("A", &[23, 19]), ("x", &[19])],
            Some("strip_sum3"),
        ),
        (
            "y(i) = A(i,j) * x(j)",
            &[("A", "BCSR(3)")],
            &[("A", &[20, 22]), ("x", &[22])],
            Some("strip_sum2"),
        ),
        (
            "y(i) = A(i,j) * x(j)",
            &[("A", "BCSR(2)")],
            &[("A", &[9, 24]), ("x", &[24])],
            Some("strip_sum1"),
        ),
        (
            "y(j) = A(i,j) * x(i)",
            &[("A", "BCSR(4)")],
            &[("A", &[21, 18]), ("x", &[21])],
            Some("strip_sum3"),
        ),
    ];
    for (n, &(expr, specs, dims, stripped)) in cases.iter().enumerate() {
        let a = parse_assignment(expr).unwrap();
        let out_dims: Vec<usize> = a
            .lhs
            .indices
            .iter()
            .map(|v| {
                a.rhs
                    .accesses()
                    .iter()
                    .find_map(|acc| {
                        let k = acc.indices.iter().position(|u| u.name == v.name)?;
                        let (_, d) = dims.iter().find(|(t, _)| *t == acc.tensor)?;
                        Some(d[k])
                    })
                    .unwrap()
            })
            .collect();
        for seed in 1..4 {
            let entries: Vec<(&str, Vec<usize>, f64)> = dims
                .iter()
                .map(|(t, d)| {
                    (
                        *t,
                        d.to_vec(),
                        if specs.iter().any(|(s, _)| s == t) {
                            0.3
                        } else {
                            1.0
                        },
                    )
                })
                .collect();
            let data = random_data(&entries, seed);
            let text = prepare_text(expr, specs, &data, &out_dims);
            if let Some(sum) = stripped {
                assert!(
                    text.contains(sum),
                    "{expr} {specs:?} not in strips:\n{text}"
                );
            }
            let ran = two_backends_on(&dir, &format!("strips{n}"), expr, specs, &data, &out_dims)
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(ran, "{expr} {specs:?} refused");
        }
    }
}

/// The strip sums on random shapes: SpDM from CSR, DCSR, COO and CSC
/// (whose rows move, so not stripped), and MTTKRP from CSF and COO, into
/// rows of 1 to 40 elements (below one strip, whole strips, remainders),
/// sparse operands from nearly empty to nearly full. Against the
/// Cranelift tier (to the bit) and the oracle.
#[test]
fn strip_sums_on_random_shapes_agree() {
    let Some(dir) = setup("strips_random") else {
        return;
    };
    let mut rng = Rng(20_261_128);
    for case in 0..36 {
        let k = 1 + rng.below(40);
        let (rows, inner) = (1 + rng.below(30), 1 + rng.below(30));
        let density = [0.05, 0.3, 0.9][rng.below(3)];
        let pick = rng.below(6);
        let (expr, specs, dims): (&str, Vec<(&str, &str)>, Vec<(&str, Vec<usize>)>) = match pick {
            0..=3 => (
                "C(i,k) = A(i,j) * D(j,k)",
                vec![("A", ["CSR", "DCSR", "COO", "CSC"][pick])],
                vec![("A", vec![rows, inner]), ("D", vec![inner, k])],
            ),
            _ => (
                "A(i,j) = B(i,k,l) * P(k,j) * Q(l,j)",
                vec![("B", ["CSF", "COO"][pick - 4])],
                vec![
                    ("B", vec![rows, 5, 6]),
                    ("P", vec![5, k]),
                    ("Q", vec![6, k]),
                ],
            ),
        };
        let entries: Vec<(&str, Vec<usize>, f64)> = dims
            .iter()
            .map(|(t, d)| {
                let sparse = specs.iter().any(|(s, _)| s == t);
                (*t, d.clone(), if sparse { density } else { 1.0 })
            })
            .collect();
        let data = random_data(&entries, case);
        let out_dims = [rows, k];
        let ran = two_backends_on(
            &dir,
            &format!("random{case}"),
            expr,
            &specs,
            &data,
            &out_dims,
        )
        .unwrap_or_else(|e| panic!("case {case}: {e}"));
        assert!(ran, "case {case}: {expr} {specs:?} refused");
    }
}

/// The real matrices bundled with the tests (`.mtx`), in name order.
fn real_matrices() -> Vec<PathBuf> {
    let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut paths: Vec<PathBuf> = ["io/real", "matrices"]
        .iter()
        .flat_map(|d| std::fs::read_dir(base.join(d)).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "mtx"))
        .collect();
    paths.sort();
    paths
}

/// COO SpMV on the real matrices on the cc tier, against plain loops over
/// the matrices' entries. A row's run is summed in registers from 2
/// entries a row on small matrices, from 4 on large ones
/// (`ir::runs::shortest_run`): the small matrices of 2 and 3 a row run
/// code that larger ones of the same rows would not.
#[test]
fn coo_spmv_on_real_matrices_on_the_cc_tier() {
    use tensor_compiler::ir::passes::{for_codegen, Backend};
    let Some(_dir) = setup("real_coo_spmv") else {
        return;
    };
    let expr = "y(i) = A(i,j) * x(j)";
    let a = parse_assignment(expr).unwrap();
    let mut short_runs_summed = Vec::new();
    for path in real_matrices() {
        let m = tensor_compiler::io::read_tensor(&path).unwrap();
        let rows = m.dims[0];
        let (data, want) = spmv_operands(m);
        for f in ["COO", "COO-AoS"] {
            let what = format!("{}: SpMV with A in {f}", path.display());
            let mut p = spmv_prepared(&a, f, &data, rows);
            let sums = |b| {
                for_codegen(&p.kernel.function, b)
                    .to_string()
                    .contains("run_sum")
            };
            assert_eq!(sums(Backend::C), sums(Backend::Cranelift), "{what}");
            let short = p.kernel.function.runs.iter().any(|r| r.per_coordinate < 4);
            if short && sums(Backend::C) {
                short_runs_summed.push(what.clone());
            }
            cc_agrees(&mut p, &want, &what);
        }
    }
    assert!(
        !short_runs_summed.is_empty(),
        "no real matrix has runs of 2 or 3 entries summed"
    );
}

/// `m` repeated `copies` times down the diagonal: a matrix as large as
/// needed whose rows are the real matrix's rows.
fn diagonal_copies(m: &CooTensor, copies: usize) -> CooTensor {
    let (r, c) = (m.dims[0], m.dims[1]);
    let mut out = CooTensor::new(vec![r * copies, c * copies]);
    for k in 0..copies {
        for e in 0..m.nnz() {
            let at = m.coord(e);
            out.push(&[at[0] + (k * r) as u32, at[1] + (k * c) as u32], m.vals[e]);
        }
    }
    out
}

/// SpMV from CSR, CSC, DCSR and COO on the real matrices, repeated down the
/// diagonal until their coordinates pass the 4 MiB from which the C asks
/// for each row's stream ahead (`ir::streams`; COO inside its loop), so
/// the hints run (past the arrays' ends for the last rows), on the cc tier
/// against plain loops over the entries; and on the Cranelift tier, whose
/// row loops ask by calls where rows average 4 or more positions and run
/// their plain copy elsewhere (west0479).
#[test]
fn streamed_rows_of_real_matrices_on_both_tiers() {
    let Some(_dir) = setup("real_streams") else {
        return;
    };
    use tensor_compiler::ir::passes::{for_codegen, Backend};
    let a = parse_assignment("y(i) = A(i,j) * x(j)").unwrap();
    // Matrices whose rows the Cranelift kernel asks for by calls.
    let mut asked = Vec::new();
    for path in real_matrices() {
        let one = tensor_compiler::io::read_tensor(&path).unwrap();
        if one.nnz() == 0 {
            continue;
        }
        // Over 2^20 entries: 4 MiB of `i32` coordinates.
        let m = diagonal_copies(&one, (1 << 20) / one.nnz() + 1);
        let rows = m.dims[0];
        let (data, want) = spmv_operands(m);
        // COO asks inside its one loop over the entries, the others
        // before each row.
        for f in ["CSR", "CSC", "DCSR", "COO"] {
            let what = format!("{}: SpMV with A in {f}", path.display());
            let mut p = spmv_prepared(&a, f, &data, rows);
            let text = tensor_compiler::ir::c::function(&p.kernel.function);
            assert!(
                text.contains("tensor_prefetch_from(A_vals"),
                "{what}\n{text}"
            );
            let jit = for_codegen(&p.kernel.function, Backend::Cranelift).to_string();
            if jit.contains("prefetch") {
                asked.push(what.clone());
            }
            p.run().unwrap();
            assert_close(
                &p.result().unwrap().to_dense(),
                &want,
                &format!("{what}, Cranelift"),
            );
            cc_agrees(&mut p, &want, &what);
        }
    }
    assert!(!asked.is_empty(), "no Cranelift kernel asked for rows");
}

/// SpDM from COO and CSR on the real matrices on both tiers, `D` wide
/// enough to pass the 4 MiB at which the C prefetches its rows and
/// Cranelift asks for them in strips (`ir::prefetch`), unless the
/// columns sampled follow each other (the C tests that at run time),
/// against plain loops over the matrices' entries.
#[test]
fn spdm_with_prefetched_rows_on_real_matrices() {
    use tensor_compiler::ir::passes::{for_codegen, Backend};
    let Some(_dir) = setup("real_spdm") else {
        return;
    };
    let expr = "A(i,l) = B(i,j) * D(j,l)";
    let a = parse_assignment(expr).unwrap();
    // Whether some kernel asked for rows, and some did not.
    let mut asked = [false; 2];
    for path in real_matrices() {
        let b = tensor_compiler::io::read_tensor(&path).unwrap();
        let (m, n) = (b.dims[0], b.dims[1]);
        let k = (4 << 20) / 8 / n + 1;
        let (d, want) = spdm_reference(&b, k, |x| ((x * 5 % 17) as f64 - 8.0) / 3.0);
        let data: BTreeMap<String, CooTensor> = [("B".to_string(), b), ("D".to_string(), d)]
            .into_iter()
            .collect();
        for f in ["COO", "CSR"] {
            let what = format!("{}: SpDM with B in {f}", path.display());
            let formats = formats_rest_dense(&a, &[("B", f)], &data, 2);
            let mut p = prepare("kernel", &a, &formats, &data, &[m, k], None).unwrap();
            let text = tensor_compiler::ir::c::function(&p.kernel.function);
            assert!(text.contains("tensor_prefetch(&D_vals["), "{what}");
            // Cranelift asks unless B's columns, sampled, follow each other.
            let columns = tensor_compiler::ir::Coordinates::whole(
                tensor_compiler::ir::ArrayRef::level("B", 1, "crd"),
            );
            let follow = p
                .kernel
                .function
                .lines_of_their_own
                .iter()
                .any(|(a, share)| {
                    *a == columns && *share <= tensor_compiler::ir::gathers::FOLLOWING_LINES
                });
            let jit = for_codegen(&p.kernel.function, Backend::Cranelift).to_string();
            assert_eq!(
                jit.contains("strip_end"),
                !follow,
                "{what}: Cranelift's asks"
            );
            asked[usize::from(follow)] = true;
            let check = |p: &tensor_compiler::execute::Prepared, tier: &str| {
                let dense = dense_matrix(p, m, k);
                for (q, (x, y)) in dense.iter().zip(&want).enumerate() {
                    assert!(
                        (x - y).abs() <= 1e-9 * (1.0 + y.abs()),
                        "{what} ({tier}): at {q}, {x} != {y}"
                    );
                }
            };
            // `prepare` compiles with Cranelift, which asks in strips.
            p.run().unwrap();
            check(&p, "cranelift");
            p.compiled = cc::compile(&p.kernel.function).unwrap();
            p.run().unwrap();
            check(&p, "cc");
        }
    }
    assert_eq!(asked, [true, true], "asks taken and left out: {asked:?}");
}

/// A row summed across two loops, on real sparsity: each real matrix's
/// rows `j` go to slice `i = j % 7` of a third-order CSF tensor, so
/// `A(i,l) = B(i,j,k) * D(k,l)` adds a slice's fibers and their entries
/// into one row of `A`, and its strips keep their sums across both loops
/// (as MTTKRP from CSF does). Both tiers (the Cranelift kernel made as
/// if for large data, where it takes the strips) against plain loops over
/// the entries, 37 columns: two strips of 16, none of 8, 5 past them.
#[test]
fn rows_summed_across_fibers_of_real_matrices() {
    use tensor_compiler::ir::passes::{for_codegen, Backend};
    let Some(_dir) = setup("real_fibers") else {
        return;
    };
    let expr = "A(i,l) = B(i,j,k) * D(k,l)";
    let a = parse_assignment(expr).unwrap();
    let (slices, k) = (7, 37);
    for path in real_matrices() {
        let m = tensor_compiler::io::read_tensor(&path).unwrap();
        let (rows, n) = (m.dims[0], m.dims[1]);
        let mut b = CooTensor::new(vec![slices, rows, n]);
        for e in 0..m.nnz() {
            let c = m.coord(e);
            b.push(&[c[0] % slices as u32, c[0], c[1]], m.vals[e]);
        }
        b.canonicalize();
        let dv: Vec<f64> = (0..n * k)
            .map(|x| ((x * 7 % 19) as f64 - 9.0) / 4.0)
            .collect();
        let (mut want, mut scale) = (vec![0.0; slices * k], vec![0.0; slices * k]);
        for e in 0..b.nnz() {
            let c = b.coord(e);
            for col in 0..k {
                let term = b.vals[e] * dv[c[2] as usize * k + col];
                want[c[0] as usize * k + col] += term;
                scale[c[0] as usize * k + col] += term.abs();
            }
        }
        let data: BTreeMap<String, CooTensor> = [
            ("B".to_string(), b),
            ("D".to_string(), CooTensor::from_dense(vec![n, k], &dv)),
        ]
        .into_iter()
        .collect();
        let what = format!("{}: {expr}, B in CSF", path.display());
        let formats = formats_rest_dense(&a, &[("B", "CSF")], &data, 2);
        let mut p = prepare("kernel", &a, &formats, &data, &[slices, k], None).unwrap();
        let text = tensor_compiler::ir::c::function(&p.kernel.function);
        assert!(text.contains("strip_sum15"), "{what}: not stripped\n{text}");
        // The Cranelift tier sums across the fibers only on large data:
        // made as if for it, on the same operands.
        let mut large = p.kernel.function.clone();
        large.make_as_if_large();
        let jit = for_codegen(&large, Backend::Cranelift).to_string();
        assert!(
            jit.contains("strip_sum15"),
            "{what}: Cranelift not stripped\n{jit}"
        );
        for tier in ["cranelift", "cc"] {
            p.compiled = match tier {
                "cc" => cc::compile(&p.kernel.function).unwrap(),
                _ => tensor_compiler::jit::compile(&large).unwrap(),
            };
            p.run().unwrap();
            let dense = dense_matrix(&p, slices, k);
            for (q, (x, y)) in dense.iter().zip(&want).enumerate() {
                assert!(
                    (x - y).abs() <= 1e-9 * (1.0 + scale[q]),
                    "{what}, {tier}: at {q}, {x} != {y}"
                );
            }
        }
    }
}

/// BCSR SpMV on the real matrices on the cc tier, against plain loops
/// over the matrices' entries: a block row's rows summed in one strip of
/// the block size, each lane with its own loop over the block's columns
/// (`ir::strips`), the last block row and column clipped where the
/// dimensions are no multiple of the block; and on copies of them large
/// enough that the loops ask for blocks ahead.
#[test]
fn block_rows_of_real_matrices_on_the_cc_tier() {
    let Some(_dir) = setup("real_bcsr") else {
        return;
    };
    let a = parse_assignment("y(i) = A(i,j) * x(j)").unwrap();
    for path in real_matrices() {
        let m = tensor_compiler::io::read_tensor(&path).unwrap();
        let rows = m.dims[0];
        let (data, want) = spmv_operands(m);
        for (f, sum) in [("BCSR(4)", "strip_sum3"), ("BCSR(3)", "strip_sum2")] {
            let what = format!("{}: SpMV with A in {f}", path.display());
            let mut p = spmv_prepared(&a, f, &data, rows);
            let text = tensor_compiler::ir::c::function(&p.kernel.function);
            assert!(text.contains(sum), "{what}: not stripped\n{text}");
            cc_agrees(&mut p, &want, &what);
        }
    }
    // Copied down the diagonal until the blocks' values pass the 4 MiB
    // from which the C asks for blocks ahead (`ir::block_streams`), so the
    // asking copy of the loops runs.
    for path in real_matrices() {
        let m = tensor_compiler::io::read_tensor(&path).unwrap();
        let copies = (8 << 20) / (m.nnz() * 8) + 1;
        let m = diagonal_copies(&m, copies);
        let rows = m.dims[0];
        let (data, want) = spmv_operands(m);
        for f in ["BCSR(4)", "BCSR(3)"] {
            let what = format!("{} x {copies}: SpMV with A in {f}", path.display());
            let mut p = spmv_prepared(&a, f, &data, rows);
            let text = tensor_compiler::ir::c::function(&p.kernel.function);
            assert!(
                text.contains("tensor_prefetch_from(A_vals, pA2 * "),
                "{what}\n{text}"
            );
            cc_agrees(&mut p, &want, &what);
        }
    }
}

/// DIA and CSB SpMV on the real matrices on the cc tier, against plain
/// loops over the matrices' entries: DIA's stored zeros left out by the
/// C's select (a mask on the bits, `tensor_select_f64`), CSB's entries
/// used with no test of the matrix's edge (their coordinates come with
/// the entries), on matrices whose last blocks the edge cuts.
#[test]
fn diagonals_and_stored_blocks_of_real_matrices_on_the_cc_tier() {
    let Some(_dir) = setup("real_dia_csb") else {
        return;
    };
    let a = parse_assignment("y(i) = A(i,j) * x(j)").unwrap();
    let (mut cut, mut diagonals) = (false, 0);
    for path in real_matrices() {
        let m = tensor_compiler::io::read_tensor(&path).unwrap();
        let rows = m.dims[0];
        cut |= m.dims.iter().any(|d| d % 8 != 0);
        let dia = padding_ok(&m, "DIA");
        diagonals += usize::from(dia);
        let (data, want) = spmv_operands(m);
        for f in ["DIA", "CSB(8)"].into_iter().filter(|f| *f != "DIA" || dia) {
            let what = format!("{}: SpMV with A in {f}", path.display());
            let mut p = spmv_prepared(&a, f, &data, rows);
            let text = tensor_compiler::ir::c::function(&p.kernel.function);
            match f {
                "DIA" => assert!(text.contains("tensor_select_f64(fill"), "{what}\n{text}"),
                _ => assert!(!text.contains("_dimension"), "{what}: an edge test\n{text}"),
            }
            cc_agrees(&mut p, &want, &what);
        }
    }
    assert!(cut, "no real matrix has a last block the edge cuts");
    assert!(diagonals >= 3, "DIA ran on {diagonals} real matrices");
}

/// A run's `m x k` matrix result, row-major, its stored entries added in.
fn dense_matrix(p: &tensor_compiler::execute::Prepared, m: usize, k: usize) -> Vec<f64> {
    let got = p.result().unwrap();
    let mut dense = vec![0.0; m * k];
    for e in 0..got.nnz() {
        let c = got.coord(e);
        dense[c[0] as usize * k + c[1] as usize] += got.vals[e];
    }
    dense
}

/// The emitted C of `expr` over `data`.
fn prepare_text(
    expr: &str,
    specs: &[(&str, &str)],
    data: &BTreeMap<String, CooTensor>,
    out_dims: &[usize],
) -> String {
    let a = parse_assignment(expr).unwrap();
    let formats = formats_rest_dense(&a, specs, data, out_dims.len());
    let p = prepare("kernel", &a, &formats, data, out_dims, None).unwrap();
    tensor_compiler::ir::c::function(&p.kernel.function)
}

#[test]
fn paper_kernels_compile_and_agree() {
    let Some(dir) = setup("paper") else { return };
    let cases: Vec<(&str, Vec<(&str, &str)>)> = vec![
        (
            "A(i,j) = B(i,j) + C(i,j)",
            vec![("A", "DCSR"), ("B", "DCSR"), ("C", "CSR")],
        ),
        (
            "A(i,j) = B(i,j) + C(i,j)",
            vec![("A", "dense"), ("B", "DIA"), ("C", "CSR")],
        ),
        (
            "A(i,j) = B(i,j) - 2 * C(i,j)",
            vec![("A", "CSR"), ("B", "CSR"), ("C", "dense")],
        ),
        (
            "A(i,j) = B(i,j) * C(i,j)",
            vec![("A", "COO"), ("B", "hashed,hashed"), ("C", "CSR")],
        ),
        ("A(i,k) = B(i,j) * C(j,k)", vec![("B", "COO")]),
        ("A(i,k) = B(i,j) * C(j,k)", vec![("B", "CSC")]),
        ("A(i,j) = B(i,j,k) * c(k)", vec![("B", "CSF")]),
        ("A(i,j) = B(i,j,k) * c(k)", vec![("A", "COO"), ("B", "COO")]),
        ("A(i,j) = B(i,k,j) * M(k,j)", vec![("B", "mode-generic")]),
        ("a = B(i,j,k) * C(i,j,k)", vec![("B", "COO"), ("C", "COO")]),
        (
            "A(i,j,k) = B(i,j,k) + C(i,j,k)",
            vec![("A", "CSF"), ("B", "CSF"), ("C", "COO-AoS")],
        ),
        (
            "a(i) = b(i) + c(i)",
            vec![("a", "hash"), ("b", "sparse"), ("c", "sparse")],
        ),
        ("a(i) = A(i,j) * c(j)", vec![("a", "sparse"), ("A", "CSR")]),
        (
            "A(i,j) = B(i,j) * C(j,i)",
            vec![("B", "CSR"), ("C", "dense")],
        ),
        // (unordered levels merged through sorted scratch copies)
        (
            "A(i,j) = B(i,j) + C(i,j)",
            vec![
                ("A", "CSR"),
                ("B", "hashed,compressed(unordered)"),
                ("C", "DCSR"),
            ],
        ),
        (
            "a(i) = b(i) + c(i)",
            vec![
                ("a", "sparse"),
                ("b", "hash"),
                ("c", "compressed(unordered)"),
            ],
        ),
    ];
    for (n, (expr, specs)) in cases.iter().enumerate() {
        two_backends_one_answer(&dir, &format!("paper{n}"), expr, specs, 3)
            .unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Random expressions over random formats (the lists of `kernel_props.rs`).
#[test]
fn random_kernels_compile_and_agree() {
    let Some(dir) = setup("random") else { return };
    fn formats_for(order: usize) -> Vec<&'static str> {
        match order {
            0 => vec!["dense"],
            1 => vec!["dense", "sparse", "hash", "COO"],
            2 => vec![
                "dense",
                "CSR",
                "CSC",
                "COO",
                "DCSR",
                "DIA",
                "ELL",
                "BCSR(2)",
                "CSB(2)",
                "COO-AoS",
                "hashed,dense",
            ],
            _ => vec![
                "dense",
                "COO",
                "CSF",
                "mode-generic",
                "compressed,dense,compressed:2,0,1",
            ],
        }
    }
    let shapes: [&[usize]; 6] = [&[0, 1], &[1, 0], &[0], &[1], &[0, 1, 2], &[1, 2]];
    let mut rng = Rng(0x5eed);
    let (mut ran, mut tried) = (0, 0);
    while tried < 70 {
        tried += 1;
        let names = ["B", "C", "D"];
        let n = 1 + rng.below(3);
        let mut accesses = Vec::new();
        let mut specs: Vec<(String, String)> = Vec::new();
        for name in names.iter().take(n) {
            let vars = shapes[rng.below(shapes.len())];
            let fs = formats_for(vars.len());
            specs.push((name.to_string(), fs[rng.below(fs.len())].to_string()));
            accesses.push(format!(
                "{name}({})",
                vars.iter().map(|&v| VARS[v]).collect::<Vec<_>>().join(",")
            ));
        }
        let mut rhs = accesses[0].clone();
        for acc in &accesses[1..] {
            let op = ["+", "-", "*"][rng.below(3)];
            rhs = if rng.below(2) == 0 {
                format!("{rhs} {op} {acc}")
            } else {
                format!("({rhs}) {op} 2 * {acc}")
            };
        }
        let used: Vec<&str> = VARS
            .iter()
            .copied()
            .filter(|v| {
                rhs.contains(&format!("{v},"))
                    || rhs.contains(&format!("{v})"))
                    || rhs.contains(&format!(",{v}"))
            })
            .collect();
        let keep = rng.below(used.len() + 1);
        let out: Vec<&str> = used.iter().copied().take(keep).collect();
        let out_fmt = match out.len() {
            0 => "dense",
            1 => ["dense", "sparse", "hash"][rng.below(3)],
            2 => ["dense", "CSR", "COO", "DCSR"][rng.below(4)],
            _ => ["dense", "CSF", "COO"][rng.below(3)],
        };
        let lhs = if out.is_empty() {
            "A".to_string()
        } else {
            format!("A({})", out.join(","))
        };
        specs.push(("A".into(), out_fmt.into()));
        let expr = format!("{lhs} = {rhs}");
        let spec_refs: Vec<(&str, &str)> = specs
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        if two_backends_one_answer(
            &dir,
            &format!("rand{tried}"),
            &expr,
            &spec_refs,
            tried as u64,
        )
        .unwrap_or_else(|e| panic!("{e}"))
        {
            ran += 1;
        }
    }
    assert!(ran >= 30, "only {ran} of {tried} random kernels compiled");
}

/// `tensorc EXPR ARGS --write-source DIR/gen` for test `test`: the
/// directory, or `None` where the machine has no C compiler.
fn written_source(test: &str, args: &[&str]) -> Option<PathBuf> {
    let dir = setup(test)?;
    let out = Command::new(env!("CARGO_BIN_EXE_tensorc"))
        .args(args)
        .arg("--write-source")
        .arg(dir.join("gen"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(dir)
}

/// Build the user's program `main` with the written pair in `dir` (every
/// warning an error) and run it: its exit code and output.
fn run_user_program(dir: &Path, main: &str) -> (Option<i32>, String) {
    std::fs::write(dir.join("gen/main.c"), main).unwrap();
    let exe = dir.join("gen/program");
    build_program(
        &exe,
        &[dir.join("gen/main.c"), dir.join("gen/kernel.c")],
        &["-Wall", "-Werror"],
    );
    let run = Command::new(&exe).output().unwrap();
    (
        run.status.code(),
        String::from_utf8_lossy(&run.stdout).trim().to_string(),
    )
}

/// `--write-source` gives a pair a C program builds with: a user's `main`
/// fills the argument block by the header's names, with malloc'd arrays
/// grown through the generated realloc reserve.
#[test]
fn written_source_pair_works_in_a_user_program() {
    let args = ["y(i) = A(i,j) * x(j)", "-f", "A:CSR", "-d", "A:3,4"];
    let Some(dir) = written_source("write_source", &args) else {
        return;
    };
    let header = std::fs::read_to_string(dir.join("gen/kernel.h")).unwrap();
    assert!(
        header.contains("int64_t kernel(tensor_args_t *args);") && header.contains("kernel_A2_pos"),
        "{header}"
    );
    let main = r#"#include "kernel.h"
#include <stdio.h>
int main(void) {
  /* A = [[1 0 2 0] [0 0 0 0] [0 3 0 4]], x = [1 2 3 4] */
  int32_t pos[] = {0, 2, 2, 4}, crd[] = {0, 2, 1, 3};
  double vals[] = {1, 2, 3, 4}, x[] = {1, 2, 3, 4};
  tensor_array_t arrays[kernel_array_count] = {{0}};
  int64_t params[kernel_param_count] = {0};
  arrays[kernel_A2_pos] = (tensor_array_t){pos, 4, 4};
  arrays[kernel_A2_crd] = (tensor_array_t){crd, 4, 4};
  arrays[kernel_A_vals] = (tensor_array_t){vals, 4, 4};
  arrays[kernel_x_vals] = (tensor_array_t){x, 4, 4};
  params[kernel_A1_N] = 3;
  params[kernel_y1_N] = 3;
  tensor_args_t args = {arrays, params, NULL, kernel_realloc_reserve};
  args.runtime = &args;
  if (kernel(&args) != 0) return 2;
  double *y = arrays[kernel_y_vals].data;
  printf("%g %g %g %ld\n", y[0], y[1], y[2], (long)arrays[kernel_y_vals].len);
  free(y);
  return 0;
}
"#;
    assert_eq!(run_user_program(&dir, main), (Some(0), "7 0 22 3".into()));
}

/// The written source's realloc reserve keeps a compressed result level's
/// bound (`Function::index_limits`): room for more `crd` entries than a
/// 32-bit `pos` can count is refused without allocating, as the JIT's
/// runtime refuses it; room below the bound is given, and the copy kernel
/// runs through it.
#[test]
fn written_source_refuses_positions_past_32_bits() {
    let args = [
        "B(i,j) = A(i,j)",
        "-f",
        "A:CSR",
        "-f",
        "B:CSR",
        "-d",
        "A:2,3",
    ];
    let Some(dir) = written_source("write_source_limits", &args) else {
        return;
    };
    let main = r#"#include "kernel.h"
#include <stdio.h>
int main(void) {
  /* A = [[1 0 2] [0 3 0]] */
  int32_t pos[] = {0, 2, 3}, crd[] = {0, 2, 1};
  double vals[] = {1, 2, 3};
  tensor_array_t arrays[kernel_array_count] = {{0}};
  int64_t params[kernel_param_count] = {0};
  arrays[kernel_A2_pos] = (tensor_array_t){pos, 3, 3};
  arrays[kernel_A2_crd] = (tensor_array_t){crd, 3, 3};
  arrays[kernel_A_vals] = (tensor_array_t){vals, 3, 3};
  params[kernel_A1_N] = 2;
  params[kernel_B1_N] = 2;
  tensor_args_t args = {arrays, params, NULL, kernel_realloc_reserve};
  args.runtime = &args;
  if (kernel_realloc_reserve(&args, kernel_B2_crd, (int64_t)INT32_MAX + 1) != NULL) return 2;
  if (arrays[kernel_B2_crd].data != NULL || arrays[kernel_B2_crd].cap != 0) return 3;
  if (kernel(&args) != 0) return 4;
  int32_t *bp = arrays[kernel_B2_pos].data, *bc = arrays[kernel_B2_crd].data;
  double *bv = arrays[kernel_B_vals].data;
  printf("%d %d %d | %d %d %d | %g %g %g\n", bp[0], bp[1], bp[2], bc[0], bc[1], bc[2], bv[0], bv[1], bv[2]);
  free(bp); free(bc); free(bv);
  return 0;
}
"#;
    assert_eq!(
        run_user_program(&dir, main),
        (Some(0), "0 2 3 | 0 2 1 | 1 2 3".into())
    );
}

/// The documented protocol of a kernel whose rows run in shares, followed
/// by a user's program: a set-up call (phase 1), then each share (phase 2)
/// with its own copy of the array table, here one after the other.
#[test]
fn written_source_runs_in_shares() {
    let args = ["y(i) = A(i,j) * x(j)", "-f", "A:CSR", "-d", "A:3,4"];
    let Some(dir) = written_source("write_source_shares", &args) else {
        return;
    };
    let header = std::fs::read_to_string(dir.join("gen/kernel.h")).unwrap();
    assert!(
        header.contains("kernel_tensor_phase") && header.contains("kernel_tensor_threads"),
        "{header}"
    );
    let main = r#"#include "kernel.h"
#include <stdio.h>
int main(void) {
  int32_t pos[] = {0, 2, 2, 4}, crd[] = {0, 2, 1, 3};
  double vals[] = {1, 2, 3, 4}, x[] = {1, 2, 3, 4};
  tensor_array_t arrays[kernel_array_count] = {{0}};
  int64_t params[kernel_param_count] = {0};
  arrays[kernel_A2_pos] = (tensor_array_t){pos, 4, 4};
  arrays[kernel_A2_crd] = (tensor_array_t){crd, 4, 4};
  arrays[kernel_A_vals] = (tensor_array_t){vals, 4, 4};
  arrays[kernel_x_vals] = (tensor_array_t){x, 4, 4};
  params[kernel_A1_N] = 3;
  params[kernel_y1_N] = 3;
  tensor_args_t args = {arrays, params, NULL, kernel_realloc_reserve};
  args.runtime = &args;
  params[kernel_tensor_phase] = 1;
  if (kernel(&args) != 0) return 2;
  for (int t = 0; t < 2; t++) {
    tensor_array_t mine[kernel_array_count];
    int64_t p[kernel_param_count];
    for (int k = 0; k < kernel_array_count; k++) mine[k] = arrays[k];
    for (int k = 0; k < kernel_param_count; k++) p[k] = params[k];
    p[kernel_tensor_phase] = 2;
    p[kernel_tensor_thread] = t;
    p[kernel_tensor_threads] = 2;
    tensor_args_t share = {mine, p, NULL, kernel_realloc_reserve};
    share.runtime = &share;
    if (kernel(&share) != 0) return 3;
  }
  double *y = arrays[kernel_y_vals].data;
  printf("%g %g %g %ld\n", y[0], y[1], y[2], (long)arrays[kernel_y_vals].len);
  free(y);
  return 0;
}
"#;
    assert_eq!(run_user_program(&dir, main), (Some(0), "7 0 22 3".into()));
}

/// SpMV from CSR, DCSR, COO and COO-AoS where `x` passes the 4 MiB from
/// which the C asks ahead for the elements its loops gather
/// (`ir::gathers`; COO-AoS at its columns, field 1 of its records): on
/// scattered coordinates (a power-law graph, a uniform random matrix, the
/// collaboration graph ca-GrQc copied down the diagonal) the kernel runs
/// its asking copy, on a banded matrix its plain one, each on the cc tier
/// against plain loops over the entries. The C's own test of the
/// coordinates (`tensor_scattered`), compiled into a program of its own,
/// tells the two kinds apart.
#[test]
fn gathers_at_scattered_coordinates_agree() {
    let Some(dir) = setup("gathers") else {
        return;
    };
    use tensor_compiler::generate;
    let a = parse_assignment("y(i) = A(i,j) * x(j)").unwrap();
    let graph = tensor_compiler::io::read_tensor(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/graphs/ca-GrQc.mtx"),
    )
    .unwrap();
    // 600K columns: 4.8 MB of `x`.
    let n = 600_000;
    let matrices = [
        ("power-law", generate::power_law(n, 3, 7), true),
        ("uniform", generate::uniform(n, 4, 7), true),
        (
            "ca-GrQc",
            diagonal_copies(&graph, n / graph.dims[1] + 1),
            true,
        ),
        ("banded", generate::banded(n, 3, 7), false),
    ];
    let mut probe_text = None;
    for (name, m, scattered) in matrices {
        // The coordinates in row order, as CSR and COO store them.
        let mut at: Vec<(u32, u32)> = (0..m.nnz())
            .map(|e| (m.coord(e)[0], m.coord(e)[1]))
            .collect();
        at.sort_unstable();
        let crd: Vec<u8> = at
            .iter()
            .flat_map(|&(_, j)| (j as i32).to_le_bytes())
            .collect();
        let crd_path = dir.join(format!("{name}.crd"));
        std::fs::write(&crd_path, crd).unwrap();
        let rows = m.dims[0];
        let (data, want) = spmv_operands(m);
        for f in ["CSR", "DCSR", "COO", "COO-AoS"] {
            let what = format!("{name}: SpMV with A in {f}");
            let mut p = spmv_prepared(&a, f, &data, rows);
            let text = tensor_compiler::ir::c::function(&p.kernel.function);
            // COO's loop asks for its coordinates beside the gathers, and
            // COO-AoS's for its pairs (`ir::streams`), in every copy of
            // the loop that has them.
            let asks = match f {
                "COO" => "tensor_prefetch_from(A1_crd, pA1 + 256,",
                "COO-AoS" => "tensor_prefetch_from(A1_crd, pA1 * 2 + 512,",
                _ => "tensor_prefetch(&x_vals[A2_crd[",
            };
            assert!(text.contains(asks), "{what}\n{text}");
            let gathers = match f {
                "COO-AoS" => "tensor_prefetch(&x_vals[A1_crd[(pA1 + 64) * 2 + 1]]",
                "COO" => "tensor_prefetch(&x_vals[A2_crd[pA1 + 64]]",
                _ => "tensor_prefetch(&x_vals[A2_crd[pA2 + 64]]",
            };
            assert!(text.contains(gathers), "{what}\n{text}");
            if f != "COO-AoS" {
                probe_text.get_or_insert(text);
            }
            cc_agrees(&mut p, &want, &what);
        }
        let probe = scattered_probe(&dir, probe_text.as_deref().unwrap());
        let out = Command::new(&probe).arg(&crd_path).output().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            if scattered { "1" } else { "0" },
            "{name}: tensor_scattered"
        );
    }
}

/// A program around the emitted C `text` that prints `tensor_scattered` of
/// the `int32_t` coordinates in the file it is given.
fn scattered_probe(dir: &Path, text: &str) -> PathBuf {
    let exe = dir.join("scattered_probe");
    if exe.exists() {
        return exe;
    }
    let src = dir.join("scattered_probe.c");
    let main = r#"
#include <stdio.h>
int main(int argc, char **argv) {
  FILE *f = fopen(argv[1], "rb");
  if (!f || argc < 2) return 2;
  fseek(f, 0, SEEK_END);
  long bytes = ftell(f);
  fseek(f, 0, SEEK_SET);
  int32_t *crd = malloc(bytes);
  if (!crd || fread(crd, 1, bytes, f) != (size_t)bytes) return 2;
  printf("%d\n", tensor_scattered(crd, bytes / 4, 1, 0));
  return 0;
}
"#;
    std::fs::write(&src, format!("{text}\n{main}")).unwrap();
    build_program(&exe, &[src], &[]);
    exe
}

/// An edited copy of a kernel's C builds and runs as the kernel
/// (`cc::compile_variant`, what `examples/ab_kernels.rs` times): here one
/// that doubles every value of `y` at the end gives twice the answer; a
/// copy whose slots differ from the kernel's is refused before it runs.
#[test]
fn edited_copies_of_the_c_run_as_the_kernel() {
    let Some(_dir) = setup("variants") else {
        return;
    };
    let a = parse_assignment("y(i) = A(i,j) * x(j)").unwrap();
    let m = tensor_compiler::generate::banded(1000, 3, 5);
    let (data, want) = spmv_operands(m);
    let mut p = spmv_prepared(&a, "CSR", &data, 1000);
    let text = tensor_compiler::ir::c::function(&p.kernel.function);
    let end = "  args->arrays[kernel_y_vals].len = y_vals_len;\n  return 0;";
    assert!(text.contains(end), "{text}");
    let doubled = text.replace(
        end,
        &format!("  for (int64_t d = 0; d < y1_N; d++) y_vals[d] *= 2.0;\n{end}"),
    );
    p.compiled = cc::compile_variant(&p.kernel.function, &doubled).unwrap();
    p.run().unwrap();
    let twice: Vec<f64> = want.iter().map(|v| 2.0 * v).collect();
    assert_close(&p.result().unwrap().to_dense(), &twice, "the doubled copy");
    let renumbered = text.replacen("  kernel_A2_crd,", "  kernel_extra,\n  kernel_A2_crd,", 1);
    assert_ne!(renumbered, text);
    let err = cc::compile_variant(&p.kernel.function, &renumbered).unwrap_err();
    assert!(err.contains("enum kernel_array"), "{err}");
}

/// A sum whose terms guard against fill (a factor stored where the tensor
/// has no entry: `x`'s dense copy, BCSR's blocks, DIA's diagonals, dense
/// rows under a compressed level) runs unguarded and is checked once,
/// again guarded where it came out infinite or NaN (`ir::fill_checks`).
/// With infinities and NaNs stored in `A` and in a sparse `x`, the cc
/// tier, the Cranelift tier and the interpreter of both programs give the
/// sparse answer (a term only where both store an entry): NaN and
/// infinity in the same rows, the same finite sums elsewhere.
#[test]
fn fill_checked_once_per_sum_keeps_non_finite_sums_exact() {
    use tensor_compiler::ir::passes::Backend;
    // Without a C compiler, the cc tier is left out (`setup` says so).
    let with_cc = setup("fill_checks").is_some();
    let a = parse_assignment("y(i) = A(i,j) * x(j)").unwrap();
    let mut rng = tensor_compiler::coo::SplitMix(5);
    let mut non_finite_rows = 0;
    for round in 0..3 {
        let mut m = CooTensor::random(&[40, 37], 0.3, &mut rng);
        for (e, v) in m.vals.iter_mut().enumerate() {
            match e % 17 {
                k if k == round => *v = f64::INFINITY,
                k if k == round + 5 => *v = f64::NAN,
                k if k == round + 9 => *v = f64::NEG_INFINITY,
                _ => {}
            }
        }
        let mut x = CooTensor::random(&[37], 0.5, &mut rng);
        for (e, v) in x.vals.iter_mut().enumerate() {
            // No stored zero: fill and a stored 0 look alike in a copy.
            *v = match e % 11 {
                3 => f64::INFINITY,
                7 if round > 0 => f64::NAN,
                _ if *v == 0.0 => 0.5,
                _ => *v,
            };
        }
        let at: BTreeMap<u32, f64> = (0..x.nnz()).map(|e| (x.coord(e)[0], x.vals[e])).collect();
        let mut want = vec![0.0; 40];
        for e in 0..m.nnz() {
            let c = m.coord(e);
            if let Some(xv) = at.get(&c[1]) {
                want[c[0] as usize] += m.vals[e] * xv;
            }
        }
        non_finite_rows += want.iter().filter(|v| !v.is_finite()).count();
        let data: BTreeMap<String, CooTensor> = [("A".to_string(), m), ("x".to_string(), x)]
            .into_iter()
            .collect();
        let same = |got: &CooTensor, what: &str| {
            let got = got.to_dense();
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let agree = if w.is_nan() {
                    g.is_nan()
                } else if w.is_infinite() {
                    g == w
                } else {
                    (g - w).abs() <= 1e-12 * (1.0 + w.abs())
                };
                assert!(agree, "{what}: row {i}: {g} against {w}");
            }
        };
        for (fa, fx) in [
            ("CSR", "sparse"),
            ("CSR", "hash"),
            ("DCSR", "sparse"),
            ("COO", "hash"),
            ("BCSR(2)", "sparse"),
            ("BCSR(4)", "hash"),
            ("DIA", "sparse"),
            ("compressed,dense", "sparse"),
            ("CSB(3)", "sparse"),
            ("ELL", "sparse"),
        ] {
            let what = format!("round {round}, A {fa}, x {fx}");
            let formats = formats_rest_dense(&a, &[("A", fa), ("x", fx)], &data, 1);
            let run = |how: &str| {
                let mut p = prepare("kernel", &a, &formats, &data, &[40], None).unwrap();
                match how {
                    "cranelift" => {
                        p.run().unwrap();
                    }
                    "cc" => {
                        p.compiled = cc::compile(&p.kernel.function).unwrap();
                        p.run().unwrap();
                    }
                    "interpreter" => p.run_interpreted().unwrap(),
                    _ => p.run_interpreted_as(Backend::C).unwrap(),
                }
                p.result().unwrap()
            };
            for how in ["cranelift", "cc", "interpreter", "interpreter, the C's IR"] {
                if how != "cc" || with_cc {
                    same(&run(how), &format!("{what}, {how}"));
                }
            }
        }
    }
    assert!(
        non_finite_rows > 10,
        "{non_finite_rows} rows infinite or NaN"
    );
}

/// A dense result the kernel never reads back, larger than
/// `TENSOR_STREAM_MIN_BYTES` (64 MB): TTM from CSF into 9.8M positions, of
/// which the few stored fibres are computed. The C zeroes the rest with
/// streaming stores (`tensor_zero_f64`) and stores each computed value
/// once (the Cranelift tier through `jit::call::zero_f64`); both tiers
/// must give the oracle's answer, and the same bits. From COO, the same
/// data: its entries go a run of equal (i, j) at a time, so there too
/// each value is stored once.
#[test]
fn a_large_result_never_read_back_streams_its_zeros() {
    let Some(dir) = setup("streamed") else { return };
    let expr = "A(i,j,k) = B(i,j,l) * M(k,l)";
    let specs = [("B", "CSF")];
    let mut rng = Rng(7);
    // Rows of 81 doubles: odd, so that rows start off the 16-byte line
    // the streaming stores need, and the odd element goes the plain way.
    // A short third mode: the oracle runs over every (i, j, k, l).
    let (dims, k) = (vec![300, 405, 4], 81);
    let mut b = CooTensor::new(dims.clone());
    for _ in 0..3000 {
        let c: Vec<u32> = dims.iter().map(|&n| rng.below(n) as u32).collect();
        b.push(&c, rng.value());
    }
    let data: BTreeMap<String, CooTensor> = [
        ("B".to_string(), b),
        ("M".to_string(), random(&[k, dims[2]], 1.0, &mut rng)),
    ]
    .into_iter()
    .collect();
    let out = [dims[0], dims[1], k];
    let text = prepare_text(expr, &specs, &data, &out);
    assert!(text.contains("tensor_zero_f64(&A_vals["), "{text}");
    assert!(
        !text.contains("A_vals[pA3] +="),
        "stored, not added: {text}"
    );
    let ran = two_backends_on(&dir, "streamed", expr, &specs, &data, &out)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(ran, "{expr} refused");
    // From COO, whose entries repeat a row's (i, j) at other l: over runs
    // of equal (i, j), each value summed and stored once.
    let coo = [("B", "COO")];
    let text = prepare_text(expr, &coo, &data, &out);
    assert!(text.contains("pB2_seg"), "runs of equal (i, j): {text}");
    assert!(!text.contains("A_vals[pA3] +="), "{text}");
    assert!(text.contains("tensor_zero_f64(&A_vals["), "{text}");
    let ran = two_backends_on(&dir, "streamed_coo", expr, &coo, &data, &out)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(ran, "{expr} from COO refused");
}

/// `tensor_zero_f64` itself, where it streams (an array over 64 MB): every
/// element of the range zero, every other one as it was, for ranges at
/// each alignment and of odd and even lengths, the short ones (under 64
/// elements, the plain way) included.
#[test]
fn streamed_zeros_cover_their_range_and_nothing_else() {
    let Some(dir) = setup("zero_f64") else { return };
    // Any kernel's C carries the helper.
    let expr = "y(i) = A(i,j) * x(j)";
    let (data, out) = data_for(expr, "y", 1);
    let f = prepare_text(expr, &[("A", "CSR")], &data, &out);
    let main = r#"
#include <stdio.h>
int main(void) {
  const int64_t len = ((int64_t)64 << 20) / 8 + 1000;
  double *a = malloc(sizeof *a * len);
  if (!a) return 2;
  const int64_t starts[] = {0, 1, 2, 3, 7, 1001};
  const int64_t counts[] = {0, 1, 63, 64, 65, 128, 1001, 4096};
  for (int s = 0; s < 6; s++) {
    for (int c = 0; c < 8; c++) {
      for (int64_t q = 0; q < 8192; q++) a[q] = 1.5;
      tensor_zero_f64(&a[starts[s]], counts[c], len);
      for (int64_t q = 0; q < 8192; q++) {
        int inside = q >= starts[s] && q < starts[s] + counts[c];
        if (a[q] != (inside ? 0.0 : 1.5)) {
          printf("start %lld count %lld: element %lld is %g\n", (long long)starts[s], (long long)counts[c], (long long)q, a[q]);
          return 1;
        }
      }
    }
  }
  free(a);
  return 0;
}
"#;
    let src = dir.join("zero_f64.c");
    std::fs::write(&src, format!("{f}\n{main}")).unwrap();
    let exe = dir.join("zero_f64");
    build_program(&exe, &[src], &[]);
    let run = Command::new(&exe).output().unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stdout)
    );
}

/// A dense result stored once a position (`State::once`) from a matrix's
/// stored rows, zeroed elsewhere with streaming stores where it passes
/// 64 MB: `A(i,j) = B(i,l) * M(j,l)` with `B` in DCSR on the real matrices,
/// `A` 8M positions and more, on both tiers against plain loops over
/// `B`'s entries. A computed row the fill zeroed, or a row it missed,
/// is a wrong answer here.
#[test]
fn rows_stored_once_from_real_matrices_on_both_tiers() {
    let Some(_dir) = setup("real_once") else {
        return;
    };
    let expr = "A(i,j) = B(i,l) * M(j,l)";
    let a = parse_assignment(expr).unwrap();
    let mut ran = 0;
    for path in real_matrices() {
        let b = tensor_compiler::io::read_tensor(&path).unwrap();
        let (m, n) = (b.dims[0], b.dims[1]);
        // Over 64 MB of doubles in `A`.
        let cols = (8 << 20) / m + 1;
        if b.nnz() * cols > 400_000_000 || cols * n > 20_000_000 {
            continue;
        }
        let mv: Vec<f64> = (0..cols * n)
            .map(|q| ((q * 5 % 17) as f64 - 8.0) / 3.0)
            .collect();
        // The sums, and the sums of their terms' sizes: terms of 1e9 that
        // cancel round differently in another order (the kernel sums in
        // two accumulators, `ir::unroll`).
        let what = format!("{}: {expr}, B in DCSR", path.display());
        // `M` by its columns, so that the loop below reads it in order.
        let mt: Vec<f64> = (0..n * cols)
            .map(|q| mv[(q % cols) * n + q / cols])
            .collect();
        let (mut want, mut size) = (vec![0.0; m * cols], vec![0.0f64; m * cols]);
        for e in 0..b.nnz() {
            let c = b.coord(e);
            let (i, l) = (c[0] as usize, c[1] as usize);
            let (row, col) = (i * cols..(i + 1) * cols, l * cols..(l + 1) * cols);
            for ((w, s), x) in want[row.clone()]
                .iter_mut()
                .zip(&mut size[row])
                .zip(&mt[col])
            {
                *w += b.vals[e] * x;
                *s += (b.vals[e] * x).abs();
            }
        }
        let agree = |got: &[f64], tier: &str| {
            assert_eq!(got.len(), want.len(), "{what} ({tier})");
            for (q, (x, y)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (x - y).abs() <= 1e-12 * (1.0 + size[q]),
                    "{what} ({tier}): element {q} = {x}, expected {y}"
                );
            }
        };
        let data: BTreeMap<String, CooTensor> = [
            ("B".to_string(), b),
            ("M".to_string(), CooTensor::from_dense(vec![cols, n], &mv)),
        ]
        .into_iter()
        .collect();
        let formats = formats_rest_dense(&a, &[("B", "DCSR")], &data, 2);
        let mut p = prepare("kernel", &a, &formats, &data, &[m, cols], None).unwrap();
        let text = tensor_compiler::ir::c::function(&p.kernel.function);
        assert!(text.contains("tensor_zero_f64(&A_vals["), "{what}\n{text}");
        assert!(!text.contains("A_vals[pA2] +="), "{what}\n{text}");
        p.run().unwrap();
        agree(&p.result().unwrap().to_dense(), "Cranelift");
        p.compiled = cc::compile(&p.kernel.function).unwrap();
        p.run().unwrap();
        agree(&p.result().unwrap().to_dense(), "cc");
        ran += 1;
    }
    assert!(ran >= 3, "only {ran} real matrices small enough");
}
