//! Property tests of the readers: random tensors survive write then read,
//! and no byte string or truncation makes a reader panic.

use proptest::prelude::*;
use std::io::Cursor;
use tensor_compiler::coo::CooTensor;
use tensor_compiler::io::{mtx, tns};

fn arb_tensor() -> impl Strategy<Value = CooTensor> {
    (2usize..=4).prop_flat_map(|order| {
        prop::collection::vec(1usize..6, order).prop_flat_map(|dims| {
            let d2 = dims.clone();
            let entry = dims.iter().map(|&d| 0..d as u32).collect::<Vec<_>>();
            prop::collection::vec((entry, -100i32..100), 0..30).prop_map(move |es| {
                let mut t = CooTensor::new(d2.clone());
                for (c, v) in es {
                    t.push(&c, v as f64 / 8.0);
                }
                t
            })
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn mtx_round_trip(t in arb_tensor()) {
        let mut buf = Vec::new();
        mtx::write_mtx(&mut buf, &t).unwrap();
        let back = mtx::read_mtx(Cursor::new(buf), "t.mtx").unwrap();
        prop_assert_eq!(back.canonical(), t.canonical());
    }

    #[test]
    fn tns_round_trip(t in arb_tensor()) {
        let mut buf = Vec::new();
        tns::write_tns(&mut buf, &t).unwrap();
        let back = tns::read_tns(Cursor::new(buf), "t.tns", Some(&t.dims)).unwrap();
        prop_assert_eq!(back.canonical(), t.canonical());
    }

    #[test]
    fn garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = mtx::read_mtx(Cursor::new(bytes.clone()), "g.mtx");
        let _ = tns::read_tns(Cursor::new(bytes), "g.tns", None);
    }

    #[test]
    fn truncations_never_panic(cut in 0usize..200, noise in any::<u8>()) {
        let text = b"%%MatrixMarket matrix coordinate real symmetric\n% c\n4 4 3\n1 1 1.5\n3 2 -2\n4 4 7e3\n".to_vec();
        let mut t = text[..cut.min(text.len())].to_vec();
        t.push(noise);
        let _ = mtx::read_mtx(Cursor::new(t), "t.mtx");
    }
}
