//! Pack then unpack equals the canonical input, for every preset and level
//! list, on random coordinate sets (property tests) and edge shapes.

use proptest::prelude::*;
use tensor_compiler::coo::CooTensor;
use tensor_compiler::format::{parse_format, Registry};
use tensor_compiler::storage::{pack, unpack, validate, Entries};

const MATRIX_FORMATS: &[&str] = &[
    "dense",
    "COO",
    "COO-AoS",
    "CSR",
    "CSC",
    "DCSR",
    "ELL",
    "DIA",
    "BCSR(1)",
    "BCSR(2)",
    "BCSR(3)",
    "CSB(2)",
    "CSB(4)",
    "CSF",
    "compressed,compressed:1,0",
    "dense,hashed",
    "hashed,compressed",
    "hashed(W=64),dense",
    "compressed(nonunique),singleton:1,0",
    "compressed(nonunique,unordered),singleton(unordered)",
    "dense,compressed(unordered)",
];
const TENSOR3_FORMATS: &[&str] = &[
    "dense",
    "COO",
    "COO-AoS",
    "CSF",
    "mode-generic",
    "compressed,dense,compressed:2,0,1",
    "dense,hashed,compressed",
];
const VECTOR_FORMATS: &[&str] = &[
    "dense",
    "sparse",
    "hash",
    "COO",
    "hashed(W=128)",
    "compressed(nonunique)",
];

fn round_trip(t: &CooTensor, spec: &str) {
    let r = Registry::builtin();
    let f = parse_format(spec, t.order(), &r).unwrap_or_else(|e| panic!("{spec}: {e}"));
    let packed = pack("T", t, &f).unwrap_or_else(|e| panic!("{spec}: {e}"));
    validate(&packed).unwrap_or_else(|e| panic!("{spec}: {e}"));
    let back = unpack(&packed).unwrap_or_else(|e| panic!("{spec}: {e}"));
    assert_eq!(back.canonical(), t.canonical(), "format {spec}");
    // The values alone, read without coordinates, are those of the entries.
    let entries = Entries::of(&packed).unwrap_or_else(|e| panic!("{spec}: {e}"));
    let values = Entries::stored_values(&packed).unwrap_or_else(|e| panic!("{spec}: {e}"));
    assert_eq!(values, entries.vals, "values of {spec}");
    // The format's text form parses back to the same format.
    let again =
        parse_format(&f.spec(), t.order(), &r).unwrap_or_else(|e| panic!("{}: {e}", f.spec()));
    assert_eq!(again, f, "spec round trip of {spec} via {}", f.spec());
}

fn formats_for(order: usize) -> &'static [&'static str] {
    match order {
        1 => VECTOR_FORMATS,
        2 => MATRIX_FORMATS,
        _ => TENSOR3_FORMATS,
    }
}

fn arb_tensor(order: usize) -> impl Strategy<Value = CooTensor> {
    prop::collection::vec(0usize..7, order).prop_flat_map(move |dims| {
        let nonempty = dims.iter().all(|&d| d > 0);
        let dims2 = dims.clone();
        let entry = dims
            .iter()
            .map(|&d| 0..(d.max(1) as u32))
            .collect::<Vec<_>>();
        let n = if nonempty { 0..40usize } else { 0..1usize };
        prop::collection::vec((entry, -4i32..5), n).prop_map(move |entries| {
            let mut t = CooTensor::new(dims2.clone());
            for (c, v) in entries {
                t.push(&c, v as f64);
            }
            t
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn vectors_round_trip(t in arb_tensor(1)) {
        for f in formats_for(1) { round_trip(&t, f); }
    }
    #[test]
    fn matrices_round_trip(t in arb_tensor(2)) {
        for f in formats_for(2) { round_trip(&t, f); }
    }
    #[test]
    fn tensors3_round_trip(t in arb_tensor(3)) {
        for f in formats_for(3) { round_trip(&t, f); }
    }
}

#[test]
fn edge_shapes() {
    let mut one = CooTensor::new(vec![1, 1]);
    one.push(&[0, 0], 3.0);
    let mut dup = CooTensor::new(vec![4, 5]);
    for _ in 0..10 {
        dup.push(&[3, 4], 1.0);
        dup.push(&[0, 2], -2.0);
    }
    let mut empty_rows = CooTensor::new(vec![9, 3]);
    empty_rows.push(&[8, 0], 1.0);
    empty_rows.push(&[0, 2], 2.0);
    for t in [
        one,
        dup,
        empty_rows,
        CooTensor::new(vec![0, 5]),
        CooTensor::new(vec![3, 3]),
    ] {
        for f in MATRIX_FORMATS {
            round_trip(&t, f);
        }
    }
}

#[test]
fn bad_formats_are_typed_errors() {
    let r = Registry::builtin();
    for (spec, order, needle) in [
        ("dense,bogus", 2, "unknown level format `bogus`"),
        ("dense(unordered)", 1, "always ordered"),
        ("hashed(ordered)", 1, "cannot be ordered"),
        (
            "dense,compressed",
            3,
            "has 2 levels but the tensor has order 3",
        ),
        ("BCSR(0)", 2, "block size must be at least 1"),
        ("CSB(0)", 2, "block size must be at least 1"),
        ("CSR", 3, "order-2"),
        ("sparse", 2, "vector format"),
        ("hashed(W=0)", 1, "positive integer"),
        ("dense,compressed:0,0", 2, "not a permutation"),
        ("DIA:1,0", 2, "does not take a mode order"),
        ("dense,,compressed", 2, "expected a level name"),
        ("compressed(nonunique", 1, "missing `)`"),
        ("singleton(aos)", 1, "aos"),
        ("dense,offset", 2, "offset level must follow"),
    ] {
        let e = parse_format(spec, order, &r).expect_err(spec).to_string();
        assert!(e.contains(needle), "{spec}: {e}");
    }
}
