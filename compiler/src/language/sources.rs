//! Data sources of tensor declarations: files (`mtx`, `tns`), seeded
//! random data and structured generators.

use super::ast::{Literal, Source};
use super::db::{load_data, DataFile, Db};
use crate::coo::{CooTensor, SplitMix};
use crate::generate;
use std::sync::Arc;

/// The path argument of a file source.
pub fn file_argument(src: &Source) -> Option<&str> {
    if !matches!(src.kind.name.as_str(), "mtx" | "tns") {
        return None;
    }
    src.args.iter().find_map(|a| match &a.value {
        Literal::Str(s) if a.name.is_none() || a.name.as_deref() == Some("path") => {
            Some(s.as_str())
        }
        _ => None,
    })
}

pub fn load_file(db: &dyn Db, f: DataFile) -> Result<Arc<CooTensor>, String> {
    load_data(db, f)
        .as_ref()
        .map(|d| d.0.clone())
        .map_err(|e| e.clone())
}

fn number(src: &Source, key: &str, default: f64) -> Result<f64, String> {
    match src.args.iter().find(|a| a.name.as_deref() == Some(key)) {
        None => Ok(default),
        Some(a) => match a.value {
            Literal::Num(v) => Ok(v),
            _ => Err(format!(
                "`{key}` of {}(...) must be a number",
                src.kind.name
            )),
        },
    }
}

/// The known generators and their arguments, for completion and errors.
pub const GENERATORS: &[(&str, &str)] = &[
    ("mtx", "mtx(\"path.mtx\")"),
    ("tns", "tns(\"path.tns\")"),
    ("random", "random(seed: 1, density: 0.1)"),
    ("banded", "banded(bands: 3, seed: 1)"),
    ("stencil", "stencil(points: 7, grid: 30)"),
    ("powerlaw", "powerlaw(degree: 4, seed: 1)"),
];

/// Generate the data of a non-file source for a tensor of `dims`.
pub fn generate_data(src: &Source, dims: &[usize]) -> Result<CooTensor, String> {
    let seed = number(src, "seed", 1.0)? as u64;
    let square = |what: &str| -> Result<usize, String> {
        match dims {
            [m, n] if m == n => Ok(*m),
            _ => Err(format!(
                "{what}(...) makes square matrices; this tensor is {dims:?}"
            )),
        }
    };
    let side = dims.first().copied().unwrap_or(0) as u128;
    let estimate = match src.kind.name.as_str() {
        "banded" => side * number(src, "bands", 3.0)? as u128,
        "powerlaw" => side * 4 * number(src, "degree", 4.0)? as u128,
        "stencil" => (number(src, "grid", 10.0)? as u128).pow(3) * 7,
        _ => 0,
    };
    crate::execute::check_generated(&src.kind.name, estimate, dims.len())
        .map_err(|e| e.to_string())?;
    let t = match src.kind.name.as_str() {
        "random" => {
            let density = number(src, "density", 1.0)?;
            if !(0.0..=1.0).contains(&density) {
                return Err(format!("density {density} must be between 0 and 1"));
            }
            crate::execute::random_operand("random", dims, density, &mut SplitMix(seed))
                .map_err(|e| e.to_string())?
        }
        "banded" => generate::banded(square("banded")?, number(src, "bands", 3.0)? as usize, seed),
        "powerlaw" => generate::power_law(
            square("powerlaw")?,
            number(src, "degree", 4.0)? as usize,
            seed,
        ),
        "stencil" => {
            let points = number(src, "points", 7.0)? as usize;
            let grid = number(src, "grid", 10.0)? as usize;
            let t = generate::stencil(points, grid, seed)?;
            if t.dims != dims {
                return Err(format!(
                    "stencil(points: {points}, grid: {grid}) is {:?}, the tensor is {dims:?}",
                    t.dims
                ));
            }
            t
        }
        other => {
            let known: Vec<&str> = GENERATORS.iter().map(|g| g.0).collect();
            return Err(format!(
                "unknown data source `{other}` (known: {})",
                known.join(", ")
            ));
        }
    };
    Ok(t)
}
