//! Format pools, written as `tensorc -f` takes them (a preset or a level
//! list, optionally `:ORDER`). Weights favour the formats users reach for.

use super::rng::Rng;

type Pool = &'static [(u32, &'static str)];

pub const VECTOR_IN: Pool = &[
    (4, "dense"),
    (4, "sparse"),
    (2, "hash"),
    (2, "COO"),
    (1, "compressed(unordered)"),
    (1, "hashed(W=8)"),
];
pub const VECTOR_OUT: Pool = &[(4, "dense"), (4, "sparse"), (2, "hash"), (1, "COO")];

pub const MATRIX_IN: Pool = &[
    (4, "dense"),
    (6, "CSR"),
    (4, "CSC"),
    (3, "DCSR"),
    (4, "COO"),
    (2, "COO-AoS"),
    (1, "COO:1,0"),
    (1, "ELL"),
    (1, "DIA"),
    (2, "BCSR(2)"),
    (1, "BCSR(4)"),
    (2, "CSB(2)"),
    (1, "compressed(nonunique),singleton"),
    (1, "compressed,compressed:1,0"),
    // Packed with buckets of twice a parent's coordinates, so that rows
    // wrap around their bucket and come out of coordinate order.
    (2, "hashed,dense"),
    (1, "hashed,compressed"),
    (1, "dense,hashed"),
    (1, "dense,compressed(unordered)"),
    (1, "hashed,compressed(unordered)"),
    (1, "compressed(unordered),compressed"),
];

/// Formats whose first level can hold a coordinate more than once.
pub const MATRIX_NONUNIQUE: Pool = &[
    (4, "COO"),
    (2, "COO-AoS"),
    (2, "CSB(2)"),
    (2, "compressed(nonunique),singleton"),
    (1, "COO:1,0"),
    (1, "CSB(1)"),
];

/// The SpGEMM / transpose formats users name first.
pub const MATRIX_COMMON: Pool = &[(3, "CSR"), (2, "CSC"), (2, "DCSR"), (2, "COO")];

/// Results whose upper level inserts (dense, hashed) and whose lower level
/// appends.
pub const INSERT_THEN_APPEND: Pool = &[
    (3, "CSR"),
    (2, "CSC"),
    (1, "hashed,compressed"),
    (1, "dense,compressed(nonunique)"),
];

pub const MATRIX_OUT: Pool = &[
    (4, "dense"),
    (5, "CSR"),
    (1, "dense,compressed(unordered)"),
    (3, "CSC"),
    (3, "DCSR"),
    (3, "COO"),
    (1, "COO-AoS"),
    (1, "compressed,compressed:1,0"),
    (1, "hashed,dense"),
    (1, "dense,hashed"),
    (1, "dense,dense:1,0"),
    (1, "ELL"),
    (1, "DIA"),
    (1, "BCSR(2)"),
    (1, "CSB(2)"),
];

pub const ORDER3_IN: Pool = &[
    (3, "dense"),
    (4, "COO"),
    (4, "CSF"),
    (3, "mode-generic"),
    (1, "COO-AoS"),
    (1, "compressed,dense,compressed:2,0,1"),
    (1, "dense,compressed,compressed"),
    (1, "CSF:2,1,0"),
];
pub const ORDER3_OUT: Pool = &[
    (3, "dense"),
    (3, "COO"),
    (3, "CSF"),
    (1, "mode-generic"),
    (1, "dense,compressed,compressed"),
    (1, "CSF:1,0,2"),
];

pub fn input(order: usize, rng: &mut Rng) -> String {
    match order {
        0 => "dense".into(),
        1 => rng.weighted(VECTOR_IN).to_string(),
        2 => rng.weighted(MATRIX_IN).to_string(),
        _ => rng.weighted(ORDER3_IN).to_string(),
    }
}

pub fn output(order: usize, rng: &mut Rng) -> String {
    match order {
        0 => "dense".into(),
        1 => rng.weighted(VECTOR_OUT).to_string(),
        2 => rng.weighted(MATRIX_OUT).to_string(),
        _ => rng.weighted(ORDER3_OUT).to_string(),
    }
}

pub fn from(pool: Pool, rng: &mut Rng) -> String {
    rng.weighted(pool).to_string()
}
