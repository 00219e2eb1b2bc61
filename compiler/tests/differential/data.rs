//! Random operand data: empty, sparse or full, with duplicate coordinates,
//! unsorted entries and the odd explicit zero, as a `.tns` file may hold.

use super::rng::Rng;
use tensor_compiler::coo::CooTensor;

/// An index extent: mostly 2..=6, sometimes 0 or 1.
pub fn extent(rng: &mut Rng) -> usize {
    match rng.below(100) {
        0..=3 => 0,
        4..=11 => 1,
        _ => rng.range(2, 6),
    }
}

/// Random entries for a tensor of `dims`.
pub fn random(dims: &[usize], rng: &mut Rng) -> CooTensor {
    let mut t = CooTensor::new(dims.to_vec());
    let total: usize = dims.iter().product();
    if dims.is_empty() {
        // A scalar: one value (or none, which reads as zero).
        if !rng.chance(0.1) {
            t.push(&[], rng.value());
        }
        return t;
    }
    if total == 0 {
        return t;
    }
    let density = *rng.weighted(&[(1, 0.0), (3, 0.15), (4, 0.35), (3, 0.6), (2, 1.0)]);
    let mut coord = vec![0u32; dims.len()];
    if density >= 1.0 {
        for lin in 0..total {
            let mut rest = lin;
            for d in (0..dims.len()).rev() {
                coord[d] = (rest % dims[d]) as u32;
                rest /= dims[d];
            }
            t.push(&coord, rng.value());
        }
    } else {
        let n = ((total as f64) * density).ceil() as usize;
        for _ in 0..n {
            for (d, &m) in dims.iter().enumerate() {
                coord[d] = rng.below(m) as u32;
            }
            t.push(&coord, rng.value());
        }
    }
    // Duplicates: a few entries again, with other values.
    if t.nnz() > 0 && rng.chance(0.3) {
        for _ in 0..rng.range(1, 3) {
            let e = rng.below(t.nnz());
            let c = t.coord(e).to_vec();
            t.push(&c, rng.value());
        }
    }
    // An explicit zero now and then.
    if t.nnz() > 0 && rng.chance(0.1) {
        let e = rng.below(t.nnz());
        t.vals[e] = 0.0;
    }
    if super::run::non_finite() {
        make_some_non_finite(&mut t, rng);
    }
    if rng.chance(0.5) {
        t.canonicalize();
    } else {
        shuffle_entries(&mut t, rng);
    }
    t
}

/// About one value in eight made infinite or NaN, and the finite ones
/// positive (`DIFFERENTIAL_NON_FINITE=1`), so that no stored value, nor
/// any sum of duplicates, is zero: a copy's fill and a stored zero look
/// alike, and a stored zero times an infinity has no one answer the
/// kernels are held to.
fn make_some_non_finite(t: &mut CooTensor, rng: &mut Rng) {
    for v in t.vals.iter_mut() {
        *v = if *v == 0.0 { 0.5 } else { v.abs() };
        if rng.chance(0.125) {
            *v = *rng.weighted(&[(2, f64::INFINITY), (2, f64::NEG_INFINITY), (1, f64::NAN)]);
        }
    }
}

/// The transpose of a matrix (entries in the order of `t`).
pub fn transpose(t: &CooTensor) -> CooTensor {
    let mut out = CooTensor::new(vec![t.dims[1], t.dims[0]]);
    for e in 0..t.nnz() {
        let c = t.coord(e);
        out.push(&[c[1], c[0]], t.vals[e]);
    }
    out
}

fn shuffle_entries(t: &mut CooTensor, rng: &mut Rng) {
    let mut perm: Vec<usize> = (0..t.nnz()).collect();
    rng.shuffle(&mut perm);
    let mut out = CooTensor::new(t.dims.clone());
    for e in perm {
        out.push(t.coord(e), t.vals[e]);
    }
    *t = out;
}
