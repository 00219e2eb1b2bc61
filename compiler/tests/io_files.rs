//! File readers against real files: the 47 edge-case and malformed inputs
//! (each with its expected verdict, see fixtures/edge and the data
//! MANIFEST), real matrices and tensors, and write/read round trips.

use std::path::PathBuf;
use tensor_compiler::coo::CooTensor;
use tensor_compiler::io::{read_tensor, write_tensor};

fn fixture(dir: &str, name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(dir).join(name)
}

/// (file, dims, stored entries after symmetric expansion and summing
/// duplicates)
const VALID: &[(&str, &[usize], usize)] = &[
    ("EVA_upper_in_symmetric.mtx", &[8497, 8497], 13424),
    ("USPowerGrid_upper_in_symmetric.mtx", &[4941, 4941], 13188),
    ("cholmod_3by0.mtx", &[3, 0], 0),
    ("cholmod_rza_int_skew.mtx", &[3, 3], 6),
    ("fmm_nist_ex1_more_freeformat.mtx", &[5, 5], 8),
    ("fmm_windows_lineendings_nist_ex1_more_freeformat.mtx", &[5, 5], 8),
    ("fmm_overflow_value_gt_float64.mtx", &[3, 3], 1),
    ("lagraph_empty.mtx", &[3, 4], 0),
    // Duplicate entries are summed, as scipy and taco do.
    ("lagraph_mangled14.mtx", &[3, 4], 2),
    ("lagraph_skew_fp64.mtx", &[6, 6], 20),
    ("taco_2tensor_odd_comments.mtx", &[32, 32], 3),
    ("taco_theta_tensor_array.ttx", &[25, 25], 600),
    // Comment and blank lines after the size line: accepted, as LAGraph.
    ("west0067_jumbled.mtx", &[67, 67], 294),
    // Index-only files read as FROSTT: the last column is the value.
    ("KG_JF17K_3_ids_1based.tns", &[104, 11540, 11541], 15563),
    ("KG_WikiPeople_4_ids_1based.tns", &[50, 9524, 9528, 9507], 14853),
    ("splatt_small_with_comment.tns", &[2, 3, 2], 6),
    ("taco_3tensor.tns", &[1073, 1, 7], 3),
];

/// (file, line, part of the message)
const INVALID: &[(&str, usize, &str)] = &[
    ("cholmod_cha_hermitian.mtx", 1, "complex"),
    ("cholmod_mangle1.mtx", 1, "object `junk`"),
    ("cholmod_mangle2.mtx", 1, "format `junk`"),
    ("cholmod_mangle3.mtx", 1, "field `junk`"),
    ("cholmod_mangle4.mtx", 1, "symmetry `junk`"),
    ("fmm_coordinate_hermitian_row.mtx", 1, "complex"),
    ("fmm_invalid_bad_banner.mtx", 1, "missing %%MatrixMarket banner"),
    ("fmm_invalid_bad_field.mtx", 1, "field `____`"),
    ("fmm_invalid_bad_symmetry.mtx", 1, "symmetry `___`"),
    ("fmm_invalid_bad_value.mtx", 3, "`not_a_double` is not a number"),
    ("fmm_invalid_dimensions_out_of_range_1.mtx", 3, "negative size"),
    ("fmm_invalid_indices_out_of_range_1.mtx", 5, "index 5000 out of range"),
    ("fmm_invalid_indices_out_of_range_4.mtx", 6, "index 0 out of range"),
    ("fmm_invalid_matrix_coord_too_long.mtx", 7, "more data lines"),
    ("fmm_invalid_truncated_header_2.mtx", 1, "truncated banner"),
    ("fmm_invalid_truncated_lines.mtx", 4, "2 of the 12 entries"),
    ("fmm_overflow_index_gt_int64.mtx", 6, "overflows"),
    ("klu_w156_complex.mtx", 1, "complex"),
    ("lagraph_complex_array.mtx", 1, "complex"),
    ("lagraph_mangled1.mtx", 1, "object `mangled`"),
    ("lagraph_mangled12.mtx", 5, "expected 3"),
    ("lagraph_mangled5.mtx", 1, "hermitian"),
    ("lagraph_mangled9.mtx", 4, "must be square"),
    ("lagraph_mangled_format.mtx", 1, "array pattern"),
    ("mongoose_bad_dimensions.mtx", 3, "missing size line"),
    ("mongoose_bad_header.mtx", 1, "symmetry `bogus`"),
    ("mongoose_bad_matrix_type.mtx", 1, "complex"),
    ("netscience_zero_based.mtx", 3, "index 0 out of range"),
    ("splatt_small4_zeroidx.tns", 2, "1-based"),
    ("west0067_noheader.mtx", 1, "missing %%MatrixMarket banner"),
];

#[test]
fn every_edge_fixture_has_a_verdict() {
    let dir = fixture("edge", "");
    let mut names: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names.len(), 47);
    for n in &names {
        let listed = VALID.iter().any(|v| v.0 == n) || INVALID.iter().any(|v| v.0 == n);
        assert!(listed, "{n} has no expected outcome");
    }
}

#[test]
fn valid_edge_files_load() {
    for (name, dims, nnz) in VALID {
        let t = read_tensor(&fixture("edge", name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(t.dims, *dims, "{name}");
        let mut c = t.clone();
        c.canonicalize();
        c.drop_zeros();
        assert_eq!(c.nnz(), *nnz, "{name}");
    }
}

#[test]
fn invalid_edge_files_give_file_line_errors() {
    for (name, line, needle) in INVALID {
        let e = read_tensor(&fixture("edge", name)).expect_err(name).to_string();
        let prefix = format!("{}:{line}: ", fixture("edge", name).display());
        assert!(e.starts_with(&prefix), "{name}: `{e}` should start with `{prefix}`");
        assert!(e.contains(needle), "{name}: `{e}` should mention `{needle}`");
        assert!(!e.contains('\n'), "{name}: one line");
    }
}

#[test]
fn skew_symmetric_mirrors_negated_and_symmetric_mirrors() {
    let t = read_tensor(&fixture("edge", "cholmod_rza_int_skew.mtx")).unwrap();
    let d = t.to_dense();
    for i in 0..3 {
        for j in 0..3 {
            assert_eq!(d[i * 3 + j], -d[j * 3 + i]);
        }
    }
    let s = read_tensor(&fixture("real", "karate.mtx")).unwrap();
    let d = s.to_dense();
    let n = 34;
    assert!((0..n).all(|i| (0..n).all(|j| d[i * n + j] == d[j * n + i])));
}

/// (file, dims, nnz after expansion) from the data MANIFEST.
const REAL: &[(&str, &[usize], usize)] = &[
    ("karate.mtx", &[34, 34], 156),
    ("west0479.mtx", &[479, 479], 1910),
    ("lp_afiro.mtx", &[27, 51], 102),
    ("LFAT5_hypersparse.mtx", &[2000, 2000], 46),
    ("cage8.mtx", &[1015, 1015], 11003),
    ("Erdos971.mtx", &[472, 472], 2628),
    ("jazz.mtx", &[198, 198], 5484),
    ("olm1000.mtx", &[1000, 1000], 3996),
    ("Ragusa16_pattern.mtx", &[24, 24], 81),
    ("impcol_a.mtx", &[207, 207], 572),
    ("bcsstk13.mtx", &[2003, 2003], 83883),
    ("G51.mtx", &[1000, 1000], 11818),
    ("hangGlider_2.mtx", &[1647, 1647], 14754),
    ("rajat19.mtx", &[1157, 1157], 5399),
    ("cryg2500.mtx", &[2500, 2500], 12349),
    ("nations_kg.tns", &[14, 55, 14], 1992),
    ("umls_kg.tns", &[135, 46, 135], 6529),
    ("il2_response_4d.tns", &[13, 4, 12, 8], 3972),
];

#[test]
fn real_files_load_with_manifest_shapes() {
    for (name, dims, nnz) in REAL {
        let t = read_tensor(&fixture("real", name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(t.dims, *dims, "{name}");
        assert_eq!(t.nnz(), *nnz, "{name}");
    }
    // A value read from the file text: west0479 line `2 1 -1.0` style check.
    let t = read_tensor(&fixture("real", "west0479.mtx")).unwrap();
    let text = std::fs::read_to_string(fixture("real", "west0479.mtx")).unwrap();
    let line = text.lines().filter(|l| !l.starts_with('%')).nth(1).unwrap();
    let toks: Vec<&str> = line.split_whitespace().collect();
    let (i, j, v): (u32, u32, f64) = (toks[0].parse().unwrap(), toks[1].parse().unwrap(), toks[2].parse().unwrap());
    let found = (0..t.nnz()).find(|&e| t.coord(e) == [i - 1, j - 1]).map(|e| t.vals[e]);
    assert_eq!(found, Some(v));
}

#[test]
fn write_read_round_trip() {
    let dir = std::env::temp_dir().join(format!("tensor-io-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["west0479.mtx", "nations_kg.tns", "il2_response_4d.tns"] {
        let t = read_tensor(&fixture("real", name)).unwrap();
        let out = dir.join(name);
        write_tensor(&out, &t).unwrap();
        let back = tensor_compiler::io::read_tns_with_dims(&out, Some(&t.dims)).unwrap();
        assert_eq!(back.canonical(), t.canonical(), "{name}");
    }
    let mut scalar = CooTensor::new(vec![]);
    scalar.push(&[], 2.5);
    let p = dir.join("scalar.tns");
    write_tensor(&p, &scalar).unwrap();
    assert_eq!(std::fs::read_to_string(&p).unwrap().trim(), "2.5");
    std::fs::remove_dir_all(&dir).ok();
}
