//! Tensor formats: a stack of level formats plus the map from the tensor's
//! dimensions to its levels. Presets name the common ones; level lists
//! compose any others. Text forms parse and print back the same.

use super::coord_map::{BlockCoord, CoordMap};
use super::error::FormatError;
use super::level::{AosRole, LevelFormat};
use super::levels::CrdLayout;
use super::registry::{LevelArgs, Registry};
use std::fmt;
use std::sync::Arc;

#[derive(Clone)]
pub struct TensorFormat {
    pub levels: Vec<Arc<dyn LevelFormat>>,
    pub map: CoordMap,
    /// The preset this format came from, for display (`CSR`, `BCSR(4)`);
    /// formats with hidden levels print as their preset.
    pub preset: Option<String>,
    /// Whether the values' zeros are positions the tensor does not hold:
    /// a dense copy the compiler makes of a sparse operand, whose zeros
    /// must not become entries of a sparse result.
    pub zeros_are_fill: bool,
}

impl fmt::Debug for TensorFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.spec())
    }
}

impl PartialEq for TensorFormat {
    fn eq(&self, other: &Self) -> bool {
        self.map == other.map
            && self.levels.len() == other.levels.len()
            && self
                .levels
                .iter()
                .zip(&other.levels)
                .all(|(a, b)| a.spec() == b.spec())
    }
}

impl TensorFormat {
    /// Compose levels with a coordinate map, checking that they fit a tensor
    /// of `order`.
    pub fn new(
        levels: Vec<Arc<dyn LevelFormat>>,
        map: CoordMap,
        order: usize,
        name: &str,
    ) -> Result<Self, FormatError> {
        let need = map.levels_for(order);
        if let Some(fixed) = map.fixed_order() {
            if fixed != order {
                return Err(FormatError::LevelCount {
                    format: name.to_string(),
                    levels: levels.len(),
                    order,
                    hint: format!(" (it is a format for order-{fixed} tensors)"),
                });
            }
        }
        if levels.len() != need {
            return Err(FormatError::LevelCount {
                format: name.to_string(),
                levels: levels.len(),
                order,
                hint: String::new(),
            });
        }
        for (k, l) in levels.iter().enumerate() {
            l.structure_rule(k, &levels)
                .map_err(|reason| FormatError::BadProperty {
                    level: l.spec(),
                    reason,
                })?;
        }
        Ok(TensorFormat {
            levels,
            map,
            preset: None,
            zeros_are_fill: false,
        })
    }

    pub fn order(&self) -> usize {
        match &self.map {
            CoordMap::Modes(o) => o.len(),
            _ => 2,
        }
    }

    /// First level of the append chain that level `k` belongs to: an
    /// appended level followed by branchless appended levels (COO's
    /// singletons) appends them together, one position for all.
    pub fn append_chain_head(&self, k: usize) -> usize {
        let appends =
            |l: &Arc<dyn LevelFormat>| matches!(l.assembly(), super::level::Assembly::Append(_));
        let mut h = k;
        while h > 0 && self.levels[h].properties().branchless && appends(&self.levels[h - 1]) {
            h -= 1;
        }
        h
    }

    /// Whether the values may hold fill: a level that stores every
    /// coordinate of its span (`LevelFormat::stores_fill`) at or below a
    /// level that is not full, or anywhere in a copy whose zeros are fill.
    /// A dense tensor's zeros are entries; a BCSR block's or a DIA
    /// diagonal's are not.
    pub fn values_may_hold_fill(&self) -> bool {
        // A copy's values hold positions it did not store only below a
        // last level that stores every coordinate (a dense copy), or as a
        // scalar's one value; a CSR copy's values are its entries.
        if self.zeros_are_fill && self.levels.last().is_none_or(|l| l.stores_fill()) {
            return true;
        }
        let mut sparse_above = false;
        for l in &self.levels {
            sparse_above |= !l.properties().full;
            if sparse_above && l.stores_fill() {
                return true;
            }
        }
        false
    }

    /// Whether every level is dense (no index arrays at all).
    pub fn is_all_dense(&self) -> bool {
        self.levels.iter().all(|l| l.is_dense())
    }

    /// Level list text (`compressed(nonunique),singleton`), without order.
    pub fn level_list(&self) -> String {
        self.levels
            .iter()
            .map(|l| l.spec())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The format as written after `-f NAME:`; parses back to an equal format.
    pub fn spec(&self) -> String {
        match (&self.map, &self.preset) {
            (CoordMap::Modes(_), _) => match self.map.mode_order_text() {
                Some(o) => format!("{}:{o}", self.level_list()),
                None => self.level_list(),
            },
            (_, Some(p)) => p.clone(),
            (_, None) => self.level_list(),
        }
    }

    /// Display name: the preset if any, else the level list.
    pub fn display_name(&self) -> String {
        self.preset.clone().unwrap_or_else(|| self.spec())
    }
}

/// Parse `FORMAT[:ORDER]` for a tensor of `order`: a preset (case-insensitive,
/// `BCSR(4)`) or a level list, then an optional mode order `1,0`.
pub fn parse_format(
    text: &str,
    order: usize,
    registry: &Registry,
) -> Result<TensorFormat, FormatError> {
    let (body, mode_order) = split_mode_order(text);
    let mode_order = match mode_order {
        Some(o) => Some(parse_mode_order(o, order)?),
        None => None,
    };
    let mut fmt = match preset(body.trim(), order, registry)? {
        Some(f) => f,
        None => {
            let levels = parse_level_list(body, registry)?;
            TensorFormat::new(levels, CoordMap::identity(order), order, body.trim())?
        }
    };
    if let Some(o) = mode_order {
        match &mut fmt.map {
            CoordMap::Modes(m) => *m = o,
            _ => {
                return Err(FormatError::NoModeOrder {
                    format: body.trim().to_string(),
                })
            }
        }
        if fmt
            .preset
            .as_deref()
            .is_some_and(|p| !p.eq_ignore_ascii_case("dense"))
        {
            fmt.preset = None;
        }
    }
    Ok(fmt)
}

/// Split off a trailing `:1,0` (digits and commas only).
fn split_mode_order(text: &str) -> (&str, Option<&str>) {
    if let Some((head, tail)) = text.rsplit_once(':') {
        if !tail.trim().is_empty()
            && tail
                .trim()
                .chars()
                .all(|c| c.is_ascii_digit() || c == ',' || c == ' ')
        {
            return (head, Some(tail.trim()));
        }
    }
    (text, None)
}

fn parse_mode_order(text: &str, order: usize) -> Result<Vec<usize>, FormatError> {
    let bad = || FormatError::BadModeOrder {
        order: text.to_string(),
        n: order,
    };
    let o: Vec<usize> = text
        .split(',')
        .map(|s| s.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .map_err(|_| bad())?;
    let mut sorted = o.clone();
    sorted.sort_unstable();
    if sorted != (0..order).collect::<Vec<_>>() {
        return Err(bad());
    }
    Ok(o)
}

/// Parse a level list: `compressed(nonunique,aos),singleton(aos)`.
pub fn parse_level_list(
    text: &str,
    registry: &Registry,
) -> Result<Vec<Arc<dyn LevelFormat>>, FormatError> {
    let mut args = Vec::new();
    let syntax = |col: usize, reason: &str| FormatError::Syntax {
        text: text.to_string(),
        col: col + 1,
        reason: reason.to_string(),
    };
    let bytes = text.as_bytes();
    let mut i = 0;
    let skip_ws = |i: &mut usize| {
        while *i < bytes.len() && bytes[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    loop {
        skip_ws(&mut i);
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
            i += 1;
        }
        if start == i {
            return Err(syntax(i, "expected a level name"));
        }
        let mut level = LevelArgs {
            name: text[start..i].to_string(),
            ..Default::default()
        };
        skip_ws(&mut i);
        if i < bytes.len() && bytes[i] == b'(' {
            let close = text[i..]
                .find(')')
                .map(|c| c + i)
                .ok_or_else(|| syntax(i, "missing `)`"))?;
            for item in text[i + 1..close]
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
            {
                match item.split_once('=') {
                    Some((k, v)) => level
                        .settings
                        .push((k.trim().to_string(), v.trim().to_string())),
                    None => level.flags.push(item.to_string()),
                }
            }
            i = close + 1;
            skip_ws(&mut i);
        }
        args.push(level);
        if i >= bytes.len() {
            break;
        }
        if bytes[i] != b',' {
            return Err(syntax(i, "expected `,` between levels"));
        }
        i += 1;
    }
    assign_aos_layouts(&mut args, registry)?;
    args.iter().map(|a| registry.build(a)).collect()
}

/// The AoS role of a level-list entry flagged `aos`: what its level type
/// offers (`LevelFormat::aos_role`), asked of the type built bare (the
/// entry's own layout is what is being decided, and its other flags are
/// checked when it is built for real).
fn aos_role(a: &LevelArgs, registry: &Registry) -> Option<AosRole> {
    registry
        .build(&LevelArgs {
            name: a.name.clone(),
            ..Default::default()
        })
        .ok()?
        .aos_role()
}

/// A run of an AoS owner (`compressed(aos)`) and its fields
/// (`singleton(aos)...`) shares one interleaved array owned by its first
/// level.
fn assign_aos_layouts(args: &mut [LevelArgs], registry: &Registry) -> Result<(), FormatError> {
    let mut k = 0;
    while k < args.len() {
        if !args[k].has("aos") {
            k += 1;
            continue;
        }
        let mut end = k + 1;
        while end < args.len()
            && args[end].has("aos")
            && aos_role(&args[end], registry) == Some(AosRole::Field)
        {
            end += 1;
        }
        if aos_role(&args[k], registry) != Some(AosRole::Owner) || end - k < 2 {
            return Err(FormatError::BadProperty {
                level: args[k].name.clone(),
                reason:
                    "`aos` levels come as compressed(aos) followed by one or more singleton(aos)"
                        .into(),
            });
        }
        for (field, a) in args[k..end].iter_mut().enumerate() {
            a.aos = Some(CrdLayout::Aos {
                owner: k,
                stride: end - k,
                field,
            });
        }
        k = end;
    }
    Ok(())
}

fn levels(list: &str, registry: &Registry) -> Result<Vec<Arc<dyn LevelFormat>>, FormatError> {
    parse_level_list(list, registry)
}

fn coo_levels(order: usize, aos: bool) -> String {
    let a = if aos { ",aos" } else { "" };
    let mut parts = Vec::new();
    if order >= 1 {
        parts.push(format!("compressed(nonunique{a})"));
    }
    for k in 1..order {
        if k + 1 == order {
            parts.push(if aos {
                "singleton(aos)".to_string()
            } else {
                "singleton".to_string()
            });
        } else {
            parts.push(format!("singleton(nonunique{a})"));
        }
    }
    parts.join(",")
}

/// Build a preset, or `None` when `name` is not one.
pub fn preset(
    name: &str,
    order: usize,
    registry: &Registry,
) -> Result<Option<TensorFormat>, FormatError> {
    let lower = name.to_ascii_lowercase();
    let (base, arg) = match lower.split_once('(') {
        Some((b, rest)) => (
            b.trim().to_string(),
            Some(rest.trim_end_matches(')').trim().to_string()),
        ),
        None => (lower.clone(), None),
    };
    let block = |fmt: &str| -> Result<usize, FormatError> {
        let b: usize = arg
            .as_deref()
            .unwrap_or("4")
            .parse()
            .map_err(|_| FormatError::Syntax {
                text: name.to_string(),
                col: fmt.len() + 2,
                reason: "block size must be a positive integer".into(),
            })?;
        if b == 0 {
            return Err(FormatError::ZeroBlock {
                format: name.to_string(),
            });
        }
        if b > i32::MAX as usize {
            return Err(FormatError::Syntax {
                text: name.to_string(),
                col: fmt.len() + 2,
                reason: format!("block size {b} is above {} (32-bit coordinates)", i32::MAX),
            });
        }
        Ok(b)
    };
    let vector_only = |fmt: &str| -> Result<(), FormatError> {
        if order != 1 {
            return Err(FormatError::LevelCount {
                format: fmt.into(),
                levels: 1,
                order,
                hint: " (it is a vector format)".into(),
            });
        }
        Ok(())
    };
    let r = registry;
    let ident = CoordMap::identity(order);
    let (lv, map, display) = match base.as_str() {
        "dense" => (vec!["dense"; order].join(","), ident, "dense".to_string()),
        "sparse" => {
            vector_only("sparse")?;
            ("compressed".into(), ident, "sparse".into())
        }
        "hash" => {
            vector_only("hash")?;
            ("hashed".into(), ident, "hash".into())
        }
        "coo" => (coo_levels(order, false), ident, "COO".into()),
        "coo-aos" => {
            if order < 2 {
                return Err(FormatError::LevelCount {
                    format: "COO-AoS".into(),
                    levels: 2,
                    order,
                    hint: " (AoS needs order 2 or more)".into(),
                });
            }
            (coo_levels(order, true), ident, "COO-AoS".into())
        }
        "csr" => (
            "dense,compressed".into(),
            CoordMap::Modes(vec![0, 1]),
            "CSR".into(),
        ),
        "csc" => (
            "dense,compressed".into(),
            CoordMap::Modes(vec![1, 0]),
            "CSC".into(),
        ),
        "dcsr" => (
            "compressed,compressed".into(),
            CoordMap::Modes(vec![0, 1]),
            "DCSR".into(),
        ),
        "ell" => (
            "dense,dense,singleton(padded)".into(),
            CoordMap::Slots,
            "ELL".into(),
        ),
        "dia" => (
            "dense,range,offset".into(),
            CoordMap::Diagonals,
            "DIA".into(),
        ),
        "bcsr" => {
            let b = block("BCSR")?;
            let levels = block_rows_then_columns();
            (
                "dense,compressed,dense,dense".into(),
                CoordMap::Blocked { b, levels },
                format!("BCSR({b})"),
            )
        }
        "csb" => {
            let b = block("CSB")?;
            let levels = block_rows_then_columns();
            (
                "dense,dense,compressed(nonunique),singleton".into(),
                CoordMap::Blocked { b, levels },
                format!("CSB({b})"),
            )
        }
        "csf" => (vec!["compressed"; order].join(","), ident, "CSF".into()),
        "mode-generic" => (
            "compressed(nonunique),singleton,dense".into(),
            CoordMap::identity(3),
            "mode-generic".into(),
        ),
        _ => return Ok(None),
    };
    if arg.is_some() && !matches!(base.as_str(), "bcsr" | "csb") {
        // `dense(...)` and friends are level lists, not preset calls.
        return Ok(None);
    }
    let levels = if lv.is_empty() {
        Vec::new()
    } else {
        levels(&lv, r)?
    };
    let mut f = TensorFormat::new(levels, map, order, &display)?;
    f.preset = Some(display);
    Ok(Some(f))
}

/// Preset names for completion and help.
pub const PRESETS: &[&str] = &[
    "dense",
    "sparse",
    "hash",
    "COO",
    "COO-AoS",
    "CSR",
    "CSC",
    "DCSR",
    "ELL",
    "DIA",
    "BCSR(4)",
    "CSB(4)",
    "CSF",
    "mode-generic",
];

/// A format that takes coordinates appended in any order, duplicates
/// included (COO with unordered, non-unique levels): the buffer a result
/// goes through when it cannot be assembled in the order the loops produce
/// its entries. Packing it into the result sorts and sums duplicates.
pub fn coordinate_buffer(order: usize) -> Result<TensorFormat, FormatError> {
    let mut levels = vec!["compressed(nonunique,unordered)"];
    levels.extend(std::iter::repeat_n(
        "singleton(nonunique,unordered)",
        order.saturating_sub(1),
    ));
    parse_format(&levels.join(","), order, &Registry::builtin())
}

/// The levels of a 2-D blocked format (BCSR, CSB): block row, block
/// column, then the row and the column inside the block.
fn block_rows_then_columns() -> Vec<BlockCoord> {
    [(0, false), (1, false), (0, true), (1, true)]
        .into_iter()
        .map(|(dim, inner)| BlockCoord { dim, inner })
        .collect()
}
