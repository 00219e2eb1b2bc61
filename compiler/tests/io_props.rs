//! Property tests for the readers and writers: random tensors of order 0
//! to 4 survive a write and read in every format, and no input (random
//! bytes, random token soup after a valid banner, truncated or corrupted
//! real files) makes a reader panic.

use proptest::prelude::*;
use tensor_compiler::coo::CooTensor;
use tensor_compiler::io::{mtx, tns};

fn fixture_text(dir: &str, name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/io")
        .join(dir)
        .join(name);
    std::fs::read(path).unwrap()
}

/// Values including the awkward ones: signed zeros, infinities,
/// subnormals, very large and very small magnitudes (NaN excluded: it is
/// not equal to itself).
fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => -1e3..1e3f64,
        1 => Just(0.0),
        1 => Just(-0.0),
        1 => Just(f64::INFINITY),
        1 => Just(f64::MIN_POSITIVE / 3.0),
        2 => any::<f64>().prop_filter("not NaN", |v| !v.is_nan()),
    ]
}

/// Small dimensions (so that coordinates collide into duplicates), zero
/// (no entries possible), and the largest supported.
fn dim() -> impl Strategy<Value = usize> {
    prop_oneof![6 => 1usize..=4, 1 => Just(0usize), 1 => Just(1_000_000usize), 1 => Just(u32::MAX as usize)]
}

/// A random tensor of order 0..=4: possibly empty, with duplicates.
fn tensor() -> impl Strategy<Value = CooTensor> {
    prop::collection::vec(dim(), 0..=4).prop_flat_map(|dims| {
        let holds_entries = dims.iter().all(|&d| d > 0);
        let coord: Vec<std::ops::Range<u32>> = dims.iter().map(|&d| 0..d as u32).collect();
        let count = if holds_entries { 0..=12usize } else { 0..=0 };
        prop::collection::vec((coord, value()), count).prop_map(move |entries| {
            let mut t = CooTensor::new(dims.clone());
            for (c, v) in entries {
                t.push(&c, v);
            }
            t
        })
    })
}

fn written(t: &CooTensor, tns_format: bool) -> Vec<u8> {
    let mut out = Vec::new();
    if tns_format {
        tns::write_tns(&mut out, t)
    } else {
        mtx::write_mtx(&mut out, t)
    }
    .unwrap();
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn mtx_round_trip(t in tensor()) {
        let back = mtx::read_mtx(&written(&t, false)[..], "t.mtx").unwrap();
        // Entry for entry, duplicates and explicit zeros included.
        prop_assert_eq!(&back, &t);
        let (mut a, mut b) = (back, t);
        a.canonicalize();
        b.canonicalize();
        prop_assert_eq!(a, b);
    }

    #[test]
    fn tns_round_trip(t in tensor()) {
        let text = written(&t, true);
        let back = tns::read_tns(&text[..], "t.tns", Some(&t.dims)).unwrap();
        if t.order() == 0 {
            // A scalar is written as its one value, the sum of the entries.
            prop_assert_eq!(back.vals, vec![t.vals.iter().sum::<f64>()]);
        } else {
            prop_assert_eq!(&back, &t);
            let (mut a, mut b) = (back, t.clone());
            a.canonicalize();
            b.canonicalize();
            prop_assert_eq!(a, b);
            // Without dimensions, each mode's extent is its largest index.
            if t.nnz() > 0 {
                let guessed = tns::read_tns(&text[..], "t.tns", None).unwrap();
                for (k, &d) in guessed.dims.iter().enumerate() {
                    let largest = (0..t.nnz()).map(|e| t.coord(e)[k] as usize + 1).max();
                    prop_assert_eq!(Some(d), largest);
                }
            }
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = mtx::read_mtx(&bytes[..], "g.mtx");
        let _ = tns::read_tns(&bytes[..], "g.tns", None);
        let _ = tns::read_tns(&bytes[..], "g.tns", Some(&[3, 3]));
    }

    /// Plausible tokens after a valid banner reach the size line and data
    /// parsers far more often than random bytes do.
    #[test]
    fn token_soup_never_panics(
        banner in prop::sample::select(vec![
            "%%MatrixMarket matrix coordinate real general",
            "%%MatrixMarket matrix coordinate pattern symmetric",
            "%%MatrixMarket matrix coordinate integer skew-symmetric",
            "%%MatrixMarket matrix array real general",
            "%%MatrixMarket matrix array real symmetric",
            "%%MatrixMarket matrix array integer skew-symmetric",
            "%%MatrixMarket tensor coordinate real general",
            "%%MatrixMarket tensor array real general",
            "",
        ]),
        soup in prop::collection::vec(prop::sample::select(vec![
            "0", "1", "2", "3", "-1", "4294967295", "4294967296", "99999999999999999999", "1e310",
            "nan", "-inf", "1.5", "x", " ", "  ", "\t", "\n", "\r\n", "%", "% c\n", "#", "\u{0}", "\u{ff}",
        ]), 0..60),
    ) {
        let text = format!("{banner}\n{}", soup.concat());
        if let Err(e) = mtx::read_mtx(text.as_bytes(), "s.mtx") {
            prop_assert!(!e.to_string().contains('\n'));
        }
        let _ = tns::read_tns(soup.concat().as_bytes(), "s.tns", None);
    }

    /// Every prefix and single-byte corruption of real files.
    #[test]
    fn truncated_or_corrupted_files_never_panic(
        which in 0usize..4,
        cut in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let (name, text) = match which {
            0 => ("karate.mtx", fixture_text("real", "karate.mtx")),
            1 => ("theta.ttx", fixture_text("edge", "taco_theta_tensor_array.ttx")),
            2 => ("skew.mtx", fixture_text("edge", "lagraph_skew_fp64.mtx")),
            _ => ("small.tns", fixture_text("edge", "splatt_small_with_comment.tns")),
        };
        let read = |input: &[u8]| if name.ends_with(".tns") { tns::read_tns(input, name, None) } else { mtx::read_mtx(input, name) };
        let full = read(&text).unwrap();
        let prefix = &text[..cut.index(text.len() + 1)];
        let mut corrupted = text.clone();
        corrupted[at.index(text.len())] = byte;
        match read(prefix) {
            // A prefix never holds more entries than the whole file.
            Ok(t) => prop_assert!(t.nnz() <= full.nnz()),
            Err(e) => prop_assert!(!e.to_string().contains('\n')),
        }
        if let Err(e) = read(&corrupted) {
            prop_assert!(!e.to_string().contains('\n'));
        }
    }
}

/// Every prefix of every small edge fixture: an error or a tensor, never a
/// panic, and errors stay on one line.
#[test]
fn every_prefix_of_small_fixtures() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/io/edge");
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read(&path).unwrap();
        if text.len() > 4096 {
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        for cut in 0..=text.len() {
            let got = if name.ends_with(".tns") {
                tns::read_tns(&text[..cut], &name, None)
            } else {
                mtx::read_mtx(&text[..cut], &name)
            };
            if let Err(e) = got {
                assert!(!e.to_string().contains('\n'), "{e}");
            }
        }
    }
}
