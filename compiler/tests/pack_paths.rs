//! The direct packing paths (entry columns, `ColumnPack`, `ColumnUnpack`,
//! `convert`) against the reference packer `pack_generic` and the
//! interpreter-driven `unpack`: identical storage, bit for bit, for random
//! coordinate lists with duplicates and in any order, empty ones, 0- and
//! 1-size dimensions, every 2-D and 3-D preset and mode order.

use proptest::prelude::*;
use tensor_compiler::coo::{CooTensor, SplitMix};
use tensor_compiler::format::{coordinate_buffer, parse_format, Registry, TensorFormat};
use tensor_compiler::storage::{
    convert, pack, pack_entries, pack_generic, unpack, validate, Entries, Tensor,
};

/// Every mode order of `order` dimensions.
fn mode_orders(order: usize) -> Vec<Vec<usize>> {
    if order == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for rest in mode_orders(order - 1) {
        for at in 0..=rest.len() {
            let mut o = rest.clone();
            o.insert(at, order - 1);
            out.push(o);
        }
    }
    out
}

fn with_orders(lists: &[&str], order: usize) -> Vec<String> {
    let mut out = Vec::new();
    for l in lists {
        for o in mode_orders(order) {
            out.push(format!(
                "{l}:{}",
                o.iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
    }
    out
}

fn formats(order: usize) -> Vec<String> {
    let mut specs: Vec<String> = match order {
        1 => [
            "dense",
            "sparse",
            "hash",
            "COO",
            "compressed(nonunique)",
            "compressed(unordered)",
            "hashed(W=64)",
        ]
        .map(String::from)
        .to_vec(),
        2 => [
            "dense",
            "COO",
            "COO-AoS",
            "CSR",
            "CSC",
            "DCSR",
            "ELL",
            "DIA",
            "BCSR(2)",
            "CSB(2)",
            "CSF",
            "dense,hashed",
            "hashed,compressed",
        ]
        .map(String::from)
        .to_vec(),
        _ => [
            "dense",
            "COO",
            "COO-AoS",
            "CSF",
            "mode-generic",
            "dense,hashed,compressed",
        ]
        .map(String::from)
        .to_vec(),
    };
    let lists: &[&str] = match order {
        1 => &[],
        2 => &[
            "dense,dense",
            "dense,compressed",
            "compressed,compressed",
            "compressed,dense",
            "compressed(nonunique),singleton",
            "compressed(nonunique,aos),singleton(aos)",
            "compressed(nonunique,unordered),singleton(nonunique,unordered)",
            "dense,compressed(unordered)",
            "dense,compressed(nonunique)",
        ],
        _ => &[
            "dense,dense,dense",
            "compressed,compressed,compressed",
            "dense,compressed,compressed",
            "compressed,dense,compressed",
            "compressed(nonunique),singleton(nonunique),singleton",
            "compressed(nonunique,aos),singleton(nonunique,aos),singleton(aos)",
            "compressed(nonunique),singleton,dense",
            "dense,compressed(nonunique),singleton",
        ],
    };
    specs.extend(with_orders(lists, order));
    specs
}

fn format(spec: &str, order: usize) -> TensorFormat {
    parse_format(spec, order, &Registry::builtin()).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

/// Storage, values, extents and dimensions all equal.
fn assert_same(a: &Tensor, b: &Tensor, what: &str) {
    assert_eq!(a.dims, b.dims, "{what}: dims");
    assert_eq!(a.extents, b.extents, "{what}: extents");
    assert_eq!(a.levels, b.levels, "{what}: level storage");
    assert_eq!(a.vals.len(), b.vals.len(), "{what}: number of values");
    for (p, (x, y)) in a.vals.iter().zip(&b.vals).enumerate() {
        assert!(
            x.to_bits() == y.to_bits() || (x == y),
            "{what}: value {p}: {x} vs {y}"
        );
    }
    assert_eq!(a.format, b.format, "{what}: format");
}

/// `pack` (the columns) and `pack_generic` agree on `coo` in every format,
/// including on refusing it; so do `convert` from each packed form and the
/// native `Entries::of` against the interpreter's `unpack`.
fn check(coo: &CooTensor) {
    let specs = formats(coo.order());
    let mut packed = Vec::new();
    for spec in &specs {
        let f = format(spec, coo.order());
        let fast = pack("T", coo, &f);
        let reference = pack_generic("T", coo, &f);
        match (&fast, &reference) {
            (Ok(a), Ok(b)) => {
                assert_same(a, b, spec);
                validate(a).unwrap_or_else(|e| panic!("{spec}: {e}"));
                packed.push((spec.clone(), a.clone()));
            }
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{spec}: errors differ"),
            _ => panic!("{spec}: pack gives {fast:?}, pack_generic gives {reference:?}"),
        }
    }
    for (spec, t) in &packed {
        // Native unpacking lists the entries in storage order, as the level
        // functions do.
        let native = Entries::of(t)
            .unwrap_or_else(|e| panic!("{spec}: {e}"))
            .to_coo()
            .unwrap();
        assert_eq!(native, unpack(t).unwrap(), "{spec}: Entries::of vs unpack");
    }
    // Conversions between a sample of the formats (all pairs is quadratic).
    for (i, (from, t)) in packed.iter().enumerate() {
        for (to, _) in packed.iter().skip(i % 5).step_by(5) {
            let f = format(to, coo.order());
            let converted = convert(t, "U", &f);
            let reference = pack_generic("U", &entries_of(t), &f);
            match (&converted, &reference) {
                (Ok(a), Ok(b)) => assert_same(a, b, &format!("{from} -> {to}")),
                (Err(a), Err(b)) => assert_eq!(
                    a.to_string(),
                    b.to_string(),
                    "{from} -> {to}: errors differ"
                ),
                _ => panic!(
                    "{from} -> {to}: convert gives {converted:?}, the reference {reference:?}"
                ),
            }
        }
    }
}

/// The entries `convert` reads from `t`: every stored one, but the zeros
/// of a format whose values hold fill (padding, not entries).
fn entries_of(t: &Tensor) -> CooTensor {
    let all = unpack(t).unwrap();
    if !t.format.values_may_hold_fill() {
        return all;
    }
    let mut kept = CooTensor::new(all.dims.clone());
    for e in (0..all.nnz()).filter(|&e| all.vals[e] != 0.0) {
        kept.push(all.coord(e), all.vals[e]);
    }
    kept
}

/// A coordinate buffer as a kernel leaves it: entries in the given order,
/// duplicates included.
fn buffer(coo: &CooTensor) -> Tensor {
    let f = coordinate_buffer(coo.order()).unwrap();
    let mut t = pack_generic("T_buf", &CooTensor::new(coo.dims.clone()), &f).unwrap();
    let n = coo.nnz() as i32;
    for (k, level) in t.levels.iter_mut().enumerate() {
        if k == 0 {
            level.arrays.insert("pos", vec![0, n]);
        }
        level.arrays.insert(
            "crd",
            (0..coo.nnz()).map(|e| coo.coord(e)[k] as i32).collect(),
        );
    }
    t.vals = coo.vals.clone();
    t
}

/// Packing a buffer's columns in place equals packing its entries.
fn check_buffer(coo: &CooTensor) {
    let buf = buffer(coo);
    validate(&buf).unwrap();
    let entries = Entries::of(&buf).unwrap();
    assert!(
        entries.cols.iter().all(|c| matches!(
            c,
            tensor_compiler::format::columns::Column::Values(std::borrow::Cow::Borrowed(_))
        )),
        "buffer columns are borrowed"
    );
    assert_eq!(
        entries.to_coo().unwrap(),
        *coo,
        "buffer entries in buffer order"
    );
    for spec in formats(coo.order()) {
        let f = format(&spec, coo.order());
        let fast = pack_entries("A", Entries::of(&buf).unwrap(), &f);
        let reference = pack_generic("A", coo, &f);
        match (&fast, &reference) {
            (Ok(a), Ok(b)) => assert_same(a, b, &format!("buffer -> {spec}")),
            (Err(a), Err(b)) => assert_eq!(
                a.to_string(),
                b.to_string(),
                "buffer -> {spec}: errors differ"
            ),
            _ => panic!("buffer -> {spec}: {fast:?} vs {reference:?}"),
        }
    }
}

/// Random entries, unsorted, with duplicates (about `dups` of them repeat
/// an earlier coordinate) and non-integer values so sums show their order.
fn random(dims: &[usize], n: usize, dups: f64, rng: &mut SplitMix) -> CooTensor {
    let mut t = CooTensor::new(dims.to_vec());
    if dims.contains(&0) {
        return t;
    }
    for _ in 0..n {
        let e = t.nnz();
        let coord: Vec<u32> = if e > 0 && rng.unit() < dups {
            t.coord(rng.below(e as u64) as usize).to_vec()
        } else {
            dims.iter().map(|&d| rng.below(d as u64) as u32).collect()
        };
        t.push(&coord, rng.unit() * 2.0 - 1.0);
    }
    t
}

#[test]
fn random_matrices_and_tensors() {
    let mut rng = SplitMix(7);
    for &(dims, n) in &[
        (&[13usize, 9][..], 60usize),
        (&[1, 40][..], 30),
        (&[40, 1][..], 30),
        (&[200, 150][..], 3000),
        (&[5, 6, 7][..], 120),
        (&[30, 1, 20][..], 200),
        (&[64][..], 50),
        (&[3][..], 10),
    ] {
        for dups in [0.0, 0.3] {
            let t = random(dims, n, dups, &mut rng);
            check(&t);
            check_buffer(&t);
            let mut sorted = t.clone();
            sorted.canonicalize();
            check(&sorted);
            check_buffer(&sorted);
        }
    }
}

#[test]
fn edge_shapes() {
    let empties = [
        vec![0usize, 0],
        vec![0, 5],
        vec![5, 0],
        vec![4, 3],
        vec![0, 2, 3],
        vec![2, 0, 3],
        vec![2, 3, 4],
        vec![0],
        vec![6],
    ];
    for dims in empties {
        let t = CooTensor::new(dims);
        check(&t);
        check_buffer(&t);
    }
    // Only duplicates; one entry; explicit zeros and values cancelling out.
    let mut dup = CooTensor::new(vec![3, 4]);
    for _ in 0..5 {
        dup.push(&[2, 3], 0.5);
    }
    dup.push(&[0, 0], 0.0);
    dup.push(&[1, 1], 1.0);
    dup.push(&[1, 1], -1.0);
    check(&dup);
    check_buffer(&dup);
    let mut one = CooTensor::new(vec![1, 1, 1]);
    one.push(&[0, 0, 0], 2.0);
    check(&one);
    check_buffer(&one);
}

#[test]
fn scalars_go_through_the_reference() {
    let f = format("dense", 0);
    let mut s = CooTensor::new(Vec::new());
    s.push(&[], 1.5);
    s.push(&[], 2.0);
    assert_same(
        &pack("s", &s, &f).unwrap(),
        &pack_generic("s", &s, &f).unwrap(),
        "scalar",
    );
}

#[test]
fn out_of_range_coordinates_are_refused() {
    let mut t = CooTensor::new(vec![2, 2]);
    t.push(&[0, 1], 1.0);
    t.push(&[2, 0], 1.0);
    let f = format("CSR", 2);
    assert!(pack("T", &t, &f).is_err());
    let mut buf = buffer(&t);
    assert!(pack_entries("T", Entries::of(&buf).unwrap(), &f).is_err());
    buf.levels[1].arrays.insert("crd", vec![0, -3]);
    assert!(pack_entries("T", Entries::of(&buf).unwrap(), &f).is_err());
    // A buffer whose arrays disagree in length is an error, not a panic.
    buf.levels[1].arrays.insert("crd", vec![0]);
    assert!(Entries::of(&buf).is_err());
}

#[test]
fn transposes_keep_rows_in_order_without_a_second_pass() {
    // A(i,j) = B(j,i) fills the buffer row by row of B: ordered by j.
    let mut rng = SplitMix(3);
    let b = CooTensor::random(&[300, 200], 0.05, &mut rng);
    let mut t = CooTensor::new(vec![200, 300]);
    for e in 0..b.nnz() {
        let c = b.coord(e);
        t.push(&[c[1], c[0]], b.vals[e]);
    }
    let f = format("CSR", 2);
    assert_same(
        &pack_entries("A", Entries::of(&buffer(&t)).unwrap(), &f).unwrap(),
        &pack_generic("A", &t, &f).unwrap(),
        "transpose",
    );
}

fn arb_tensor(order: usize) -> impl Strategy<Value = CooTensor> {
    prop::collection::vec(0usize..6, order).prop_flat_map(move |dims| {
        let nonempty = dims.iter().all(|&d| d > 0);
        let dims2 = dims.clone();
        let entry = dims
            .iter()
            .map(|&d| 0..(d.max(1) as u32))
            .collect::<Vec<_>>();
        let n = if nonempty { 0..30usize } else { 0..1usize };
        prop::collection::vec((entry, -40i32..40), n).prop_map(move |entries| {
            let mut t = CooTensor::new(dims2.clone());
            for (c, v) in entries {
                t.push(&c, f64::from(v) / 8.0);
            }
            t
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn matrices(t in arb_tensor(2)) {
        check(&t);
        check_buffer(&t);
    }
    #[test]
    fn tensors3(t in arb_tensor(3)) {
        check(&t);
        check_buffer(&t);
    }
    #[test]
    fn vectors(t in arb_tensor(1)) {
        check(&t);
        check_buffer(&t);
    }
}

#[test]
fn matrices_read_row_by_row_convert_through_row_runs() {
    // CSR lends its rows as runs (its `pos`), and a conversion to another
    // mode order scatters by column visiting rows in order: the result must
    // equal the reference packer's, whatever the shape (empty rows, no
    // entries, one row, more columns than entries).
    let mut rng = SplitMix(17);
    for (dims, density) in [
        ([300, 200], 0.05),
        ([1, 50], 0.3),
        ([50, 1], 0.3),
        ([0, 7], 0.5),
        ([40, 5000], 0.001),
        ([64, 64], 0.0),
    ] {
        let coo = CooTensor::random(&dims, density, &mut rng);
        let csr = pack("B", &coo, &format("CSR", 2)).unwrap();
        let entries = Entries::of(&csr).unwrap();
        // (One row has one owner for every entry: no runs needed.)
        if dims[0] > 1 {
            assert!(
                matches!(
                    entries.cols[0],
                    tensor_compiler::format::columns::Column::Runs(_)
                ),
                "{dims:?}: rows as runs"
            );
        }
        assert_eq!(
            entries.to_coo().unwrap(),
            coo,
            "{dims:?}: entries in row order"
        );
        for to in [
            "CSC",
            "DCSR",
            "COO",
            "dense,compressed:1,0",
            "compressed,compressed:1,0",
            "dense,dense:1,0",
        ] {
            let f = format(to, 2);
            let converted =
                convert(&csr, "U", &f).unwrap_or_else(|e| panic!("{dims:?} CSR -> {to}: {e}"));
            assert_same(
                &converted,
                &pack_generic("U", &coo, &f).unwrap(),
                &format!("{dims:?} CSR -> {to}"),
            );
        }
    }
}

#[test]
fn wide_scattered_sorts_in_two_passes_match_the_reference() {
    // Past 65,536 keys and 262,144 entries, with keys in no order, the
    // counting sort scatters through buckets (`storage::buckets`): by
    // column visiting CSR's rows (CSR -> CSC), and by row over a buffer
    // filled column by column with duplicates (packing into CSR). Both
    // against the reference packer, bit for bit.
    let mut rng = SplitMix(29);
    let coo = CooTensor::random(&[1500, 90_000], 0.0025, &mut rng);
    assert!(coo.nnz() > 300_000, "{} entries", coo.nnz());
    let csr = pack("B", &coo, &format("CSR", 2)).unwrap();
    let csc = format("CSC", 2);
    assert_same(
        &convert(&csr, "U", &csc).unwrap(),
        &pack_generic("U", &coo, &csc).unwrap(),
        "CSR -> CSC",
    );
    // The transpose, listed column by column, some entries twice.
    let mut by_columns: Vec<(u32, u32, f64)> = (0..coo.nnz())
        .map(|e| (coo.coord(e)[1], coo.coord(e)[0], coo.vals[e]))
        .collect();
    by_columns.sort_by_key(|&(r, c, _)| (c, r));
    let mut t = CooTensor::new(vec![90_000, 1500]);
    for (e, &(r, c, v)) in by_columns.iter().enumerate() {
        t.push(&[r, c], v);
        if e % 7 == 0 {
            t.push(&[r, c], v * 0.25);
        }
    }
    let csr = format("CSR", 2);
    assert_same(
        &pack_entries("T", Entries::of(&buffer(&t)).unwrap(), &csr).unwrap(),
        &pack_generic("T", &t, &csr).unwrap(),
        "column-ordered buffer -> CSR",
    );
}

/// A kernel's result, as the command line and the tests read it
/// (`Prepared::result`, by the levels' columns), holds the same entries in
/// the same order as the interpreter's `unpack` of the assembled storage,
/// for results in every format a kernel assembles (a grown `vals` longer
/// than the entries, a hashed level, a result read back from a buffer).
#[test]
fn kernel_results_read_by_columns_match_the_interpreter() {
    let r = Registry::builtin();
    let mut rng = SplitMix(41);
    let b = CooTensor::random(&[9, 11, 7], 0.2, &mut rng);
    let c = CooTensor::random(&[9, 11, 7], 0.2, &mut rng);
    let cases: &[(&str, &[&str])] = &[
        (
            "A(i,j) = B(i,j,k) * C(i,j,k)",
            &["dense", "CSR", "CSC", "COO", "DCSR"],
        ),
        (
            "A(i,j,k) = B(i,j,k) + C(i,j,k)",
            &["dense", "CSF", "COO", "dense,hashed,compressed"],
        ),
        (
            "A(i,k) = B(i,j,k) * C(i,j,k)",
            &["CSR", "CSC", "dense,hashed"],
        ),
    ];
    for (expr, results) in cases {
        let a = tensor_compiler::notation::parse_assignment(expr).unwrap();
        let order = a.lhs.indices.len();
        let dims: Vec<usize> = a
            .lhs
            .indices
            .iter()
            .map(|i| match i.name.as_str() {
                "i" => 9,
                "j" => 11,
                _ => 7,
            })
            .collect();
        for result in *results {
            let mut formats = std::collections::BTreeMap::new();
            formats.insert("A".to_string(), parse_format(result, order, &r).unwrap());
            formats.insert("B".to_string(), parse_format("CSF", 3, &r).unwrap());
            formats.insert("C".to_string(), parse_format("COO", 3, &r).unwrap());
            let data = [("B".to_string(), b.clone()), ("C".to_string(), c.clone())].into();
            let mut p =
                tensor_compiler::execute::prepare("kernel", &a, &formats, &data, &dims, None)
                    .unwrap_or_else(|e| panic!("{expr} into {result}: {e}"));
            p.run().unwrap();
            let by_columns = p.result().unwrap();
            assert_eq!(
                by_columns,
                unpack(&p.output).unwrap(),
                "{expr} into {result}"
            );
            assert!(
                by_columns.nnz() > 0,
                "{expr} into {result}: an empty result proves little"
            );
        }
    }
}
