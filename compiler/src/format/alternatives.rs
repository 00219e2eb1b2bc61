//! Other formats for a tensor, nearest first: the same levels in another
//! mode order, then the presets. The compiler tries them when it converts
//! an operand a kernel cannot read in its own format, and the editor when
//! it suggests a format that avoids the conversion.

use super::{parse_format, CoordMap, Registry, TensorFormat};

/// Dense candidates above this many elements are not offered: storing a
/// big sparse tensor densely is no fix.
pub const DENSE_LIMIT: usize = 1 << 24;

/// A candidate format and its text (`CSC`, `dense,compressed:1,0`), which
/// parses back to it.
#[derive(Clone, Debug)]
pub struct Alternative {
    pub text: String,
    pub format: TensorFormat,
}

/// Formats other than `current` for a tensor of `order` with `elements`
/// coordinates in all, nearest first, each offered once and named by its
/// preset where one exists (`CSC`, not `dense,compressed:1,0`).
pub fn alternatives(current: &TensorFormat, order: usize, elements: usize) -> Vec<Alternative> {
    let mut texts: Vec<String> = Vec::new();
    if let CoordMap::Modes(modes) = &current.map {
        for perm in permutations(order) {
            if perm != *modes {
                texts.push(mode_order_text(current, &perm));
            }
        }
    }
    for p in presets(order) {
        if *p == "dense" && elements > DENSE_LIMIT {
            continue;
        }
        texts.push(p.to_string());
    }
    let registry = Registry::builtin();
    let parsed: Vec<Option<TensorFormat>> = texts
        .iter()
        .map(|c| parse_format(c, order, &registry).ok())
        .collect();
    let mut out: Vec<Alternative> = Vec::new();
    for (text, format) in texts.iter().zip(&parsed) {
        let Some(format) = format else { continue };
        if *format == *current || out.iter().any(|a| a.format == *format) {
            continue;
        }
        let preset = texts
            .iter()
            .zip(&parsed)
            .find(|(p, f)| !p.contains(',') && f.as_ref() == Some(format))
            .map(|(p, _)| p.clone());
        out.push(Alternative {
            text: preset.unwrap_or_else(|| text.clone()),
            format: format.clone(),
        });
    }
    out
}

/// `current`'s levels over the dimensions in `modes` (level k stores
/// dimension `modes[k]`), named by its preset where one is that, or
/// `None` when `current` has no mode order to change (DIA, BCSR).
pub fn in_mode_order(current: &TensorFormat, modes: &[usize]) -> Option<Alternative> {
    if !matches!(current.map, CoordMap::Modes(_)) {
        return None;
    }
    let format = parse_format(
        &mode_order_text(current, modes),
        modes.len(),
        &Registry::builtin(),
    )
    .ok()?;
    Some(Alternative {
        text: written(&format, modes.len()),
        format,
    })
}

fn mode_order_text(current: &TensorFormat, modes: &[usize]) -> String {
    let modes: Vec<String> = modes.iter().map(|d| d.to_string()).collect();
    format!("{}:{}", current.level_list(), modes.join(","))
}

/// How `format` (for a tensor of `order`) is written: its preset's name
/// where one equals it (`CSC`), else its levels and mode order.
pub fn written(format: &TensorFormat, order: usize) -> String {
    let registry = Registry::builtin();
    presets(order)
        .iter()
        .find(|p| parse_format(p, order, &registry).ok().as_ref() == Some(format))
        .map_or_else(|| format.spec(), |p| p.to_string())
}

fn presets(order: usize) -> &'static [&'static str] {
    match order {
        1 => &["sparse", "dense", "hash"],
        2 => &["CSR", "CSC", "DCSR", "COO", "dense"],
        _ => &["CSF", "COO", "dense"],
    }
}

/// Every permutation of `0..n` (only the identity past order 4).
pub fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 || n > 4 {
        return vec![(0..n).collect()];
    }
    let mut out = Vec::new();
    let mut p: Vec<usize> = (0..n).collect();
    fn go(k: usize, p: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if k == p.len() {
            out.push(p.clone());
            return;
        }
        for i in k..p.len() {
            p.swap(k, i);
            go(k + 1, p, out);
            p.swap(k, i);
        }
    }
    go(0, &mut p, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alternatives_skip_the_current_format_and_big_dense() {
        let csr = parse_format("CSR", 2, &Registry::builtin()).unwrap(); // ok: test code, a panic is a failed test
        let c: Vec<String> = alternatives(&csr, 2, 1 << 30)
            .into_iter()
            .map(|a| a.text)
            .collect();
        assert_eq!(c[0], "CSC");
        assert!(
            !c.contains(&"CSR".to_string()) && !c.contains(&"dense".to_string()),
            "{c:?}"
        );
        assert_eq!(permutations(3).len(), 6);
    }

    #[test]
    fn an_unordered_vector_has_a_sorted_alternative() {
        let u = parse_format("compressed(unordered)", 1, &Registry::builtin()).unwrap(); // ok: test code, a panic is a failed test
        let c: Vec<String> = alternatives(&u, 1, 100)
            .into_iter()
            .map(|a| a.text)
            .collect();
        assert_eq!(c[0], "sparse", "{c:?}");
    }
}
