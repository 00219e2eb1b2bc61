//! Properties every input must satisfy, as functions that panic when one
//! does not. They are the bodies of the coverage-guided fuzz targets
//! (`fuzz/`, run by `scripts/fuzz.sh`) and of the short seeded property
//! tests (`tests/selfcheck.rs`): a panic here, or one escaping the code
//! under test, is a bug found.

use crate::coo::{CooTensor, SplitMix};
use crate::execute::prepare;
use crate::format::{parse_format, Registry};
use crate::ide::{Analysis, View};
use crate::io::{mtx, tns};
use crate::notation::parse_assignment;
use crate::notation::reduce::{place_reductions, sums_hoist_to_root};
use std::collections::BTreeMap;
use std::path::Path;

/// The command-line expression parser: never panics; what it accepts
/// prints as text that parses back to the same print.
pub fn expression(text: &str) {
    let Ok(a) = parse_assignment(text) else {
        return;
    };
    let printed = a.to_string();
    let again = parse_assignment(&printed)
        .unwrap_or_else(|e| panic!("`{text}` printed as `{printed}`, which does not parse: {e}"));
    assert_eq!(again.to_string(), printed, "`{text}` does not print stably");
    let _ = sums_hoist_to_root(&place_reductions(&a));
}

/// The `.tensor` front end (parse, resolve, compile, views): never panics,
/// and every diagnostic lies inside the text.
pub fn language(text: &str) {
    let mut analysis = Analysis::new();
    // A directory that does not exist: relative data paths read nothing.
    let file = analysis.set_file(
        Path::new("/nonexistent-selfcheck/input.tensor"),
        text.to_string(),
    );
    for d in analysis.diagnostics(file) {
        assert!(
            d.span.start <= d.span.end && d.span.end <= text.len(),
            "diagnostic {d:?} outside the text ({} bytes)",
            text.len()
        );
        assert!(
            !d.message.contains('\n'),
            "diagnostic on several lines: {d:?}"
        );
    }
    let _ = analysis.inlay_hints(file);
    for kernel in crate::language::db::kernel_names(&analysis.db, file).clone() {
        for view in [View::C, View::Lattice] {
            let _ = analysis.view(file, &kernel, view);
        }
    }
}

fn same_entries(a: &CooTensor, b: &CooTensor) -> bool {
    a.dims == b.dims
        && a.coords == b.coords
        && a.vals.len() == b.vals.len()
        && a.vals
            .iter()
            .zip(&b.vals)
            .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

fn well_formed(t: &CooTensor, what: &str) {
    assert_eq!(
        t.coords.len(),
        t.nnz() * t.order(),
        "{what}: coordinate count"
    );
    for e in 0..t.nnz() {
        for (c, d) in t.coord(e).iter().zip(&t.dims) {
            assert!(
                (*c as usize) < *d,
                "{what}: coordinate {c} outside dimension {d}"
            );
        }
    }
}

/// The Matrix Market and FROSTT readers on arbitrary bytes: never panic,
/// errors are one line, and what they accept is in range and survives a
/// write and a read back unchanged.
pub fn readers(bytes: &[u8]) {
    match mtx::read_mtx(bytes, "input.mtx") {
        Ok(t) => {
            well_formed(&t, "mtx");
            let mut out = Vec::new();
            mtx::write_mtx(&mut out, &t).expect("write mtx"); // ok: writing into a Vec cannot fail
            let back = mtx::read_mtx(&out[..], "written.mtx")
                .unwrap_or_else(|e| panic!("written mtx does not read back: {e}"));
            assert!(same_entries(&t, &back), "mtx round trip changed the tensor");
        }
        Err(e) => assert!(!e.to_string().contains('\n'), "error on several lines: {e}"),
    }
    match tns::read_tns(bytes, "input.tns", None) {
        Ok(t) => {
            well_formed(&t, "tns");
            let mut out = Vec::new();
            tns::write_tns(&mut out, &t).expect("write tns"); // ok: writing into a Vec cannot fail
            let back = tns::read_tns(&out[..], "written.tns", Some(&t.dims))
                .unwrap_or_else(|e| panic!("written tns does not read back: {e}"));
            if t.order() > 0 {
                assert!(same_entries(&t, &back), "tns round trip changed the tensor");
            }
        }
        Err(e) => assert!(!e.to_string().contains('\n'), "error on several lines: {e}"),
    }
}

/// Reads choices from fuzz input; zeros once the input runs out, so every
/// input decodes to some kernel.
struct Choices<'a>(&'a [u8]);

impl Choices<'_> {
    fn pick(&mut self, n: usize) -> usize {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b as usize % n.max(1)
            }
            None => 0,
        }
    }
}

const VARS: [&str; 3] = ["i", "j", "k"];
const EXTENT: [usize; 3] = [5, 4, 6];

fn formats_for(order: usize) -> &'static [&'static str] {
    match order {
        0 => &["dense"],
        1 => &[
            "dense",
            "sparse",
            "hash",
            "COO",
            "compressed(nonunique)",
            "hashed(W=8)",
        ],
        2 => &[
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
            "dense,hashed",
            "dense,compressed:1,0",
            "compressed,singleton",
        ],
        _ => &[
            "dense",
            "COO",
            "CSF",
            "mode-generic",
            "compressed,dense,compressed:2,0,1",
        ],
    }
}

fn output_formats(order: usize) -> &'static [&'static str] {
    match order {
        0 => &["dense"],
        1 => &["dense", "sparse", "hash"],
        2 => &["dense", "CSR", "COO", "DCSR", "CSC"],
        _ => &["dense", "CSF", "COO"],
    }
}

/// A random expression over `n` tensor accesses, at most `depth` deep.
fn expr_text(c: &mut Choices, accesses: &[String], depth: usize) -> String {
    let leaf = depth == 0 || c.pick(3) == 0;
    if leaf {
        return match c.pick(6) {
            0 => format!("{}", c.pick(5) as i64 - 2),
            _ => accesses[c.pick(accesses.len())].clone(),
        };
    }
    match c.pick(4) {
        0 => format!("-({})", expr_text(c, accesses, depth - 1)),
        1 => format!(
            "({} + {})",
            expr_text(c, accesses, depth - 1),
            expr_text(c, accesses, depth - 1)
        ),
        2 => format!(
            "({} - {})",
            expr_text(c, accesses, depth - 1),
            expr_text(c, accesses, depth - 1)
        ),
        _ => format!(
            "{} * {}",
            expr_text(c, accesses, depth - 1),
            expr_text(c, accesses, depth - 1)
        ),
    }
}

/// A small random kernel decoded from `bytes` (tensors of order up to 3
/// over `i`, `j`, `k`, formats from every preset, seeded data): compiled
/// and run with the JIT, it either is refused with an error or matches the
/// dense reference evaluator. Returns the kernel's text (for messages).
pub fn kernel(bytes: &[u8]) -> String {
    let mut c = Choices(bytes);
    let names = ["B", "C", "D"];
    let ntensors = 1 + c.pick(3);
    let seed = c.pick(256) as u64 + 1;
    let mut rng = SplitMix(seed);
    let mut data = BTreeMap::new();
    let mut specs: Vec<(String, String)> = Vec::new();
    let mut accesses = Vec::new();
    for name in &names[..ntensors] {
        let order = c.pick(4);
        let mut free = vec![0usize, 1, 2];
        let vars: Vec<usize> = (0..order)
            .map(|_| free.remove(c.pick(free.len())))
            .collect();
        let dims: Vec<usize> = vars.iter().map(|&v| EXTENT[v]).collect();
        data.insert(name.to_string(), CooTensor::random(&dims, 0.35, &mut rng));
        let fs = formats_for(order);
        specs.push((name.to_string(), fs[c.pick(fs.len())].to_string()));
        let idx: Vec<&str> = vars.iter().map(|&v| VARS[v]).collect();
        accesses.push(if idx.is_empty() {
            name.to_string()
        } else {
            format!("{name}({})", idx.join(","))
        });
    }
    let rhs = expr_text(&mut c, &accesses, 3);
    let used: Vec<usize> = (0..3)
        .filter(|&v| {
            c.pick(2) == 1
                && accesses
                    .iter()
                    .any(|a| rhs.contains(a.as_str()) && a.contains(VARS[v]))
        })
        .collect();
    let out_dims: Vec<usize> = used.iter().map(|&v| EXTENT[v]).collect();
    let lhs = if used.is_empty() {
        "A".to_string()
    } else {
        format!(
            "A({})",
            used.iter().map(|&v| VARS[v]).collect::<Vec<_>>().join(",")
        )
    };
    let ofs = output_formats(used.len());
    specs.push(("A".into(), ofs[c.pick(ofs.len())].into()));
    let text = format!("{lhs} = {rhs}");
    let Ok(a) = parse_assignment(&text) else {
        panic!("generated kernel `{text}` does not parse")
    };
    // Only tensors the expression reads are operands.
    let read: Vec<String> = a.rhs.accesses().iter().map(|x| x.tensor.clone()).collect();
    data.retain(|k, _| read.contains(k));
    let registry = Registry::builtin();
    let mut formats = BTreeMap::new();
    for (name, spec) in &specs {
        let order = if name == "A" {
            out_dims.len()
        } else {
            match data.get(name) {
                Some(t) => t.order(),
                None => continue,
            }
        };
        let f =
            parse_format(spec, order, &registry).unwrap_or_else(|e| panic!("{name}:{spec}: {e}"));
        formats.insert(name.clone(), f);
    }
    let Ok(mut prepared) = prepare("kernel", &a, &formats, &data, &out_dims, None) else {
        return text;
    };
    if prepared.run().is_err() {
        return text;
    }
    let got = prepared
        .result()
        .unwrap_or_else(|e| panic!("{text} with {specs:?}: result does not unpack: {e}"));
    let want = crate::oracle::evaluate(&a, &data, &out_dims, None)
        .unwrap_or_else(|e| panic!("{text}: oracle: {e}"));
    if let Err(e) = crate::oracle::close(&got, &want) {
        panic!(
            "{text} with {specs:?}: wrong result: {e}\n{}",
            prepared.kernel.function
        );
    }
    text
}
