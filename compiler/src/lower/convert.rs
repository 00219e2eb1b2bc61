//! Operand conversions: a statement the loops cannot run over an operand
//! in its own format (operands that visit their indices in conflicting
//! orders, an unordered level that must be merged and that the kernel's
//! own sorted copy, `iterate::Reorder`, does not cover, a level that must
//! be located but cannot) runs over a copy of that operand converted to
//! another format before the kernel, by `storage::convert`, timed with the
//! kernel.
//!
//! The search is by compiling: each access in turn is read from a copy in
//! each alternative format (nearest first: another mode order of the same
//! levels, then the presets), and the first statement that compiles wins.
//! Only the statement's refusal triggers it, so kernels that compile as
//! written never pay for it.

use super::{Kernel, LowerError};
use crate::format::alternatives::{alternatives, Alternative};
use crate::format::{CoordMap, TensorFormat};
use crate::notation::{Access, Assignment, Expr, Span};
use std::collections::BTreeMap;

/// One operand access read from a converted copy.
#[derive(Clone, Debug)]
pub struct Conversion {
    /// The operand as stored.
    pub source: String,
    /// The copy the kernel reads instead.
    pub copy: String,
    pub format: TensorFormat,
    /// The copy's format as written (`CSC`, `dense,compressed:1,0`).
    pub format_text: String,
    /// Why the kernel cannot read the operand as stored: the refusal the
    /// conversion avoids, for the user.
    pub reason: String,
    /// The converted access in the statement.
    pub span: Span,
    /// Whether the kernel could not run over the operand as stored (a
    /// problem the editor reports, with a fix), rather than runs faster
    /// over the copy (a re-merged operand's dense copy, a transpose's
    /// counting sort), which hovers and hints show.
    pub needed: bool,
}

impl Conversion {
    /// What the user is told: which operand is converted, to what, and why.
    pub fn describe(&self) -> String {
        format!(
            "`{}` is converted to {} before each run, because {}",
            self.source, self.format_text, self.reason
        )
    }
}

/// How many alternatives per access the search tries: past the mode
/// orders and the common presets, a conversion is unlikely to be what
/// helps.
const PER_ACCESS: usize = 8;

/// The statement compiled with one operand (or one access of it) read
/// from a converted copy, or the original refusal when no single
/// conversion makes it compile.
pub(super) fn compile_converting(
    a: &Assignment,
    formats: &BTreeMap<String, TensorFormat>,
    dims: &BTreeMap<String, Vec<usize>>,
    refusal: LowerError,
    compile: Compile,
) -> Result<Kernel, LowerError> {
    search(a, formats, dims, refusal, compile, MAX_CONVERSIONS, &[])
}

/// Like `compile_converting`, but one conversion at most, and none of the
/// copies in `made` (an earlier step's) converted again.
pub(super) fn compile_converting_once(
    a: &Assignment,
    formats: &BTreeMap<String, TensorFormat>,
    dims: &BTreeMap<String, Vec<usize>>,
    refusal: LowerError,
    compile: Compile,
    made: &[String],
) -> Result<Kernel, LowerError> {
    search(a, formats, dims, refusal, compile, 1, made)
}

/// At most this many operands are converted for one statement (two
/// unordered operands merged with others need two).
const MAX_CONVERSIONS: usize = 2;

/// A conversion that trades the refusal for another one is followed by a
/// second conversion for at most this many of them (each costs a search;
/// SpGEMM from DCSR and CSR into CSC needs the fifth: both operands in
/// CSC).
const FOLLOWED: usize = 6;

fn search(
    a: &Assignment,
    formats: &BTreeMap<String, TensorFormat>,
    dims: &BTreeMap<String, Vec<usize>>,
    refusal: LowerError,
    compile: Compile,
    depth: usize,
    made: &[String],
) -> Result<Kernel, LowerError> {
    let accesses: Vec<&Access> = a.rhs.accesses();
    // What may be read from one copy: every access of a tensor (a tensor
    // read twice in the same order needs both converted), or one access (a
    // tensor read in two orders, `B(i,j) * B(j,i)`).
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (n, acc) in accesses.iter().enumerate() {
        // A copy this search made is not converted again: the search
        // tries the other format from the source itself.
        if made.contains(&acc.tensor) {
            continue;
        }
        let all: Vec<usize> = (0..accesses.len())
            .filter(|&m| accesses[m].tensor == acc.tensor)
            .collect();
        if all.len() > 1 && all[0] == n {
            groups.push(all);
        }
        groups.push(vec![n]);
    }
    // (rank of the alternative, group number, group, alternative): every
    // group's nearest alternatives are tried before anyone's farther ones,
    // later accesses first (a refusal usually blames a later operand
    // against an earlier one).
    let mut tries = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        let acc = accesses[group[0]];
        let (Some(format), Some(d)) = (formats.get(&acc.tensor), dims.get(&acc.tensor)) else {
            continue;
        };
        let elements = elements(d);
        for (rank, alt) in alternatives(format, acc.indices.len(), elements)
            .into_iter()
            .take(PER_ACCESS)
            .enumerate()
        {
            tries.push((rank, groups.len() - g, group.clone(), alt));
        }
    }
    tries.sort_by_key(|t| (t.0, t.1));
    // Conversions that got past the refusal into another, worth following.
    let mut progress = Vec::new();
    for (_, _, group, alt) in tries {
        let (mut f, mut d) = (formats.clone(), dims.clone());
        let Some((rhs, conversion)) = read_from_copy(
            &a.rhs,
            &group,
            accesses[group[0]],
            alt,
            &mut f,
            &mut d,
            &refusal,
        ) else {
            continue;
        };
        let statement = Assignment { rhs, ..a.clone() };
        match compile(&statement, &f, &d) {
            // A copy converted again: this search tries the second format
            // from the source itself.
            Ok(kernel)
                if kernel
                    .conversions
                    .iter()
                    .any(|c| c.source == conversion.copy) => {}
            Ok(kernel) => return Ok(with_conversion(a, conversion, kernel)),
            Err(e) if depth > 1 && e.is_refusal() && e != refusal && progress.len() < FOLLOWED => {
                progress.push((statement, f, d, e, conversion))
            }
            Err(_) => {}
        }
    }
    for (statement, f, d, e, conversion) in progress {
        let made = [made, &[conversion.copy.clone()]].concat();
        if let Ok(kernel) = search(&statement, &f, &d, e, compile, depth - 1, &made) {
            return Ok(with_conversion(a, conversion, kernel));
        }
    }
    Err(refusal)
}

/// How many coordinates a tensor of dimensions `dims` has (saturating).
pub(super) fn elements(dims: &[usize]) -> usize {
    dims.iter()
        .try_fold(1usize, |p, &x| p.checked_mul(x))
        .unwrap_or(usize::MAX)
}

/// `rhs` with its accesses numbered `which` (all of `acc`'s tensor) read
/// from a new copy of it in format `alt`, which `formats` and `dims` now
/// hold; and the conversion that makes the copy. `None` when `formats` or
/// `dims` lacks the tensor.
pub(super) fn read_from_copy(
    rhs: &Expr,
    which: &[usize],
    acc: &Access,
    alt: Alternative,
    formats: &mut BTreeMap<String, TensorFormat>,
    dims: &mut BTreeMap<String, Vec<usize>>,
    refusal: &LowerError,
) -> Option<(Expr, Conversion)> {
    let mut copy = format!("{}_converted", acc.tensor);
    while formats.contains_key(&copy) || dims.contains_key(&copy) {
        copy.push('_');
    }
    let format = copy_format(formats.get(&acc.tensor)?, alt.format);
    let extents = dims.get(&acc.tensor)?.clone();
    formats.insert(copy.clone(), format.clone());
    dims.insert(copy.clone(), extents);
    let rhs = rename_accesses(rhs, which, &copy);
    let conversion = Conversion {
        source: acc.tensor.clone(),
        copy,
        format,
        format_text: alt.text,
        reason: refusal.to_string(),
        span: acc.span,
        needed: true,
    };
    Some((rhs, conversion))
}

/// `format` for a copy of a tensor stored as `source`: the zeros its
/// dense levels fill in are not entries unless the source's were (a dense
/// copy of a sparse operand must not make a sparse result dense).
fn copy_format(source: &TensorFormat, format: TensorFormat) -> TensorFormat {
    let zeros_are_fill = source.zeros_are_fill || !source.is_all_dense();
    TensorFormat {
        zeros_are_fill,
        ..format
    }
}

/// A statement that only moves entries, `A(i,j) = B(j,i)` or `A(i,j) =
/// B(i,j)` between formats, whose loops cannot write the result in the
/// order they read the operand: the operand is converted to the result's
/// own levels (in the operand's mode order), which is one counting sort
/// per level as SciPy transposes, and the kernel then copies level by
/// level. The result's storage is the copy's: `Kernel::result_is_copy`
/// lets the caller take the copy's arrays instead of running the kernel.
pub(super) fn compile_as_permutation(
    a: &Assignment,
    formats: &BTreeMap<String, TensorFormat>,
    dims: &BTreeMap<String, Vec<usize>>,
    refusal: &LowerError,
    compile: Compile,
) -> Option<Kernel> {
    let Expr::Access(source) = &a.rhs else {
        return None;
    };
    if a.accumulate || source.tensor == a.lhs.tensor || !dims.contains_key(&source.tensor) {
        return None;
    }
    let result = formats.get(&a.lhs.tensor)?;
    let format = permuted_levels(result, &a.lhs, source)?;
    let mut copy = format!("{}_converted", source.tensor);
    while formats.contains_key(&copy) || dims.contains_key(&copy) {
        copy.push('_');
    }
    let mut f = formats.clone();
    f.insert(copy.clone(), format.clone());
    let mut d = dims.clone();
    d.insert(copy.clone(), dims[&source.tensor].clone());
    let statement = Assignment {
        rhs: Expr::Access(Access {
            tensor: copy.clone(),
            ..source.clone()
        }),
        ..a.clone()
    };
    let kernel = compile(&statement, &f, &d).ok()?;
    if kernel.buffer.is_some() || !kernel.conversions.is_empty() || !kernel.temporaries.is_empty() {
        return None;
    }
    let format_text = crate::format::alternatives::written(&format, source.indices.len());
    let conversion = Conversion {
        source: source.tensor.clone(),
        copy,
        format,
        format_text,
        reason: refusal.to_string(),
        span: source.span,
        needed: false,
    };
    Some(Kernel {
        result_is_copy: true,
        ..with_conversion(a, conversion, kernel)
    })
}

/// The result's levels, each storing the operand's mode that the result's
/// level stores: the format in which the operand's storage is the result's.
/// None for a result with hidden levels or indices that are not a
/// permutation of the operand's.
fn permuted_levels(result: &TensorFormat, lhs: &Access, source: &Access) -> Option<TensorFormat> {
    let CoordMap::Modes(modes) = &result.map else {
        return None;
    };
    let names = |acc: &Access| {
        acc.indices
            .iter()
            .map(|i| i.name.clone())
            .collect::<Vec<_>>()
    };
    let (out, src) = (names(lhs), names(source));
    let mut sorted = out.clone();
    sorted.sort();
    sorted.dedup();
    let mut src_sorted = src.clone();
    src_sorted.sort();
    if sorted.len() != out.len() || sorted != src_sorted {
        return None;
    }
    let map: Vec<usize> = modes
        .iter()
        .map(|&m| src.iter().position(|v| *v == out[m]))
        .collect::<Option<_>>()?;
    TensorFormat::new(
        result.levels.clone(),
        CoordMap::Modes(map),
        out.len(),
        "converted copy",
    )
    .ok()
}

/// A sparse operand merged with another inside a loop over a variable it
/// does not have (`x` in `y(i) = A(i,j) * x(j)` with `x` sparse) is merged
/// again from its start for every coordinate of that loop: O(rows × nnz(x))
/// instead of O(nnz(A)); a hashed one is probed once per entry of A, each
/// probe several loads. Read from a copy whose re-merged levels are dense,
/// it is located there instead: `x` becomes dense, and the rows of C in a
/// DCSR SpGEMM `A(i,j) = B(i,k) * C(k,j)` (merged with each row of B)
/// become CSR's dense rows, its columns staying compressed. The kernel
/// returned reads such a copy when the statement is a product (the copy
/// cannot widen an intersection into a union), the copy's dense levels
/// hold at most `alternatives::DENSE_LIMIT` positions, and, where the
/// entries each operand stores are known (`entries`), the copy costs less
/// than what it saves (`copy_pays`). Otherwise `kernel` as it is.
pub(super) fn densify_remerged(
    a: &Assignment,
    formats: &BTreeMap<String, TensorFormat>,
    dims: &BTreeMap<String, Vec<usize>>,
    entries: Option<&BTreeMap<String, usize>>,
    kernel: Kernel,
    compile: Compile,
) -> Kernel {
    let ([nest], true) = (kernel.nests.as_slice(), only_products(&a.rhs)) else {
        return kernel;
    };
    let order = &nest.graph.order;
    // An operand already read from a copy (sorted, say) is densified from
    // its source instead.
    let source = |o: &super::operands::Operand| source_of(&kernel, o);
    let remerged = remerged_operands(&kernel, nest)
        .into_iter()
        .find_map(|(o, dense)| {
            let copy = dense_copy(o, &dense, dims.get(&source(o))?)?;
            (copy.1 <= crate::format::alternatives::DENSE_LIMIT).then_some((o, copy))
        });
    let Some((o, (copy_format, copy_size))) = remerged else {
        return kernel;
    };
    let outer = order
        .iter()
        .find(|u| !o.level_vars.contains(u))
        .map_or(String::new(), |&u| nest.problem.vars.name(u).to_string());
    let tensor = source(o);
    if let Some(entries) = entries {
        if !copy_pays_here(dims, entries, nest, o, &tensor, copy_size, &source) {
            return kernel;
        }
    }
    let accesses = a.rhs.accesses();
    let group: Vec<usize> = (0..accesses.len())
        .filter(|&n| accesses[n].tensor == tensor)
        .collect();
    let mut copy = format!("{tensor}_converted");
    while formats.contains_key(&copy) || dims.contains_key(&copy) {
        copy.push('_');
    }
    let mut f = formats.clone();
    f.insert(copy.clone(), copy_format.clone());
    let mut d = dims.clone();
    d.insert(copy.clone(), dims[&tensor].clone());
    let statement = Assignment {
        rhs: rename_accesses(&a.rhs, &group, &copy),
        ..a.clone()
    };
    let how = if o.fully_locatable() {
        "probed through its hash table"
    } else {
        "merged again from its start"
    };
    let text = crate::format::alternatives::written(&copy_format, copy_format.order());
    match compile(&statement, &f, &d) {
        // The copy must not cost the result its assembly (a buffer where
        // the loops wrote it directly).
        Ok(k) if k.buffer.is_none() <= kernel.buffer.is_none() && k.conversions.is_empty() => {
            let reason = format!("it would be {how} for every `{outer}`; the copy's dense levels are read by locate instead");
            let conversion = Conversion {
                source: tensor,
                copy,
                format: copy_format,
                format_text: text,
                reason,
                span: accesses[group[0]].span,
                needed: false,
            };
            with_conversion(a, conversion, k)
        }
        _ => kernel,
    }
}

/// Compiles a statement given formats and dimensions (the caller's
/// pipeline, with or without its own fallbacks).
pub(super) type Compile<'c> = &'c dyn Fn(
    &Assignment,
    &BTreeMap<String, TensorFormat>,
    &BTreeMap<String, Vec<usize>>,
) -> Result<Kernel, LowerError>;

/// The tensor `o` reads in `kernel`: the source of a copy.
pub(super) fn source_of(kernel: &Kernel, o: &super::operands::Operand) -> String {
    kernel
        .conversions
        .iter()
        .find(|c| c.copy == o.tensor)
        .map_or(o.tensor.clone(), |c| c.source.clone())
}

/// The operands of `nest` reached again for each coordinate of an outer
/// loop over a variable they lack, each with the levels that cost so: a
/// level merged with another operand's (restarting from its first entry
/// each time), or a hashed one probed where a dense copy is one load.
pub(super) fn remerged_operands<'n>(
    kernel: &Kernel,
    nest: &'n super::Nest,
) -> Vec<(&'n super::operands::Operand, Vec<bool>)> {
    let order = &nest.graph.order;
    let level_at = |o: &super::operands::Operand, v: &super::vars::IndexVar| {
        let k = o.level_vars.iter().position(|x| x == v)?;
        Some(o.format.levels[k].clone())
    };
    let costly = |o, v, p| match (level_at(o, v), level_at(p, v)) {
        (Some(mine), Some(theirs)) => {
            !mine.is_dense() && (mine.locate().is_some() || theirs.locate().is_none())
        }
        _ => false,
    };
    let inputs = nest.problem.inputs();
    let mut out = Vec::new();
    for o in inputs {
        let Some(first) = o
            .level_vars
            .first()
            .and_then(|v| order.iter().position(|x| x == v))
        else {
            continue;
        };
        let outer_without = order[..first].iter().any(|u| !o.level_vars.contains(u));
        let levels: Vec<bool> = o
            .level_vars
            .iter()
            .map(|v| {
                inputs
                    .iter()
                    .any(|p| source_of(kernel, p) != source_of(kernel, o) && costly(o, v, p))
            })
            .collect();
        if outer_without && levels.contains(&true) {
            out.push((o, levels));
        }
    }
    out
}

/// Whether `nest` runs a loop over a summed variable that iterates sparse
/// levels inside two nested loops over whole dimensions of the result (an
/// inner product for every (i, j) of a dense copy: rows x columns passes
/// over the rows of B, however sparse the result).
fn sums_under_full_pairs(nest: &super::Nest) -> bool {
    let p = &nest.problem;
    let full = |v: &super::vars::IndexVar| {
        p.inputs().iter().all(|o| {
            let k = o.level_vars.iter().position(|x| x == v);
            k.is_none_or(|k| o.format.levels[k].is_dense())
        })
    };
    let result = &p.output().level_vars;
    let mut full_result_loops = 0;
    for v in &nest.graph.order {
        if result.contains(v) {
            full_result_loops += usize::from(full(v));
        } else if full_result_loops >= 2 && !full(v) {
            return true;
        }
    }
    false
}

/// A product with a sum whose loops merge an operand again from its start
/// for each coordinate of an outer loop (`A(i,j) = B(i,k) * C(k,j)` with C
/// in CSC: an inner product of B's row and C's column for every (i, j),
/// rows x columns merges), where no dense copy (`densify_remerged`) fits:
/// read from a copy in another format (C in CSR: Gustavson's rows, one
/// pass over the entries) that lets the loops run without re-merging,
/// when one exists. Otherwise `kernel` as it is.
pub(super) fn reorder_remerged(
    a: &Assignment,
    formats: &BTreeMap<String, TensorFormat>,
    dims: &BTreeMap<String, Vec<usize>>,
    kernel: Kernel,
    compile: Compile,
) -> Kernel {
    let sums = !a.reduction_vars().is_empty();
    let ([nest], true, true) = (kernel.nests.as_slice(), only_products(&a.rhs), sums) else {
        return kernel;
    };
    // Operands a dense copy fits are `densify_remerged`'s to weigh.
    let fits = |o: &super::operands::Operand, dense: &[bool]| {
        let copy = dims
            .get(&source_of(&kernel, o))
            .and_then(|d| dense_copy(o, dense, d));
        copy.is_some_and(|(_, size)| size <= crate::format::alternatives::DENSE_LIMIT)
    };
    let remerged = remerged_operands(&kernel, nest)
        .into_iter()
        .find(|(o, dense)| !fits(o, dense));
    let Some((o, _)) = remerged else {
        return kernel;
    };
    let outer = nest.graph.order.iter().find(|u| !o.level_vars.contains(u));
    let outer = outer.map_or(String::new(), |&u| nest.problem.vars.name(u).to_string());
    let tensor = source_of(&kernel, o);
    let reason =
        format!("the loops would merge `{tensor}` again from its start for every `{outer}`");
    let refusal = LowerError::Unsupported {
        reason: reason.clone(),
        span: a.span,
    };
    // Even at the cost of the result's direct assembly: sorting the
    // result's entries (SpGEMM into COO: 20 ms on a 40K-row stencil) costs
    // far less than rows x columns merges (9 s).
    let filtered = without_remerging(compile, &refusal, true);
    match search(a, formats, dims, refusal.clone(), &filtered, 1, &[]) {
        Ok(mut k) => {
            if let Some(c) = k.conversions.first_mut() {
                c.reason = reason;
                c.needed = false;
            }
            k
        }
        _ => kernel,
    }
}

/// `compile`, refusing (with `refusal`) a kernel that still merges an
/// operand again for each outer coordinate or sums under two loops over
/// whole dimensions of the result, or (unless `buffer_ok`) that
/// assembles its result through a coordinate buffer.
pub(super) fn without_remerging<'c>(
    compile: Compile<'c>,
    refusal: &'c LowerError,
    buffer_ok: bool,
) -> impl Fn(
    &Assignment,
    &BTreeMap<String, TensorFormat>,
    &BTreeMap<String, Vec<usize>>,
) -> Result<Kernel, LowerError>
       + 'c {
    move |s, f, d| {
        let k = compile(s, f, d)?;
        let remerges = k
            .nests
            .iter()
            .any(|n| !remerged_operands(&k, n).is_empty() || sums_under_full_pairs(n));
        if remerges || (k.buffer.is_some() && !buffer_ok) {
            return Err(refusal.clone());
        }
        Ok(k)
    }
}

/// `o`'s format with the levels marked `dense` made dense (a copy whose
/// re-merged levels are located), and the positions its dense levels hold
/// (the product of the extents down to the last of them), given the
/// tensor's dimensions; `None` when no level is marked, the format has
/// hidden levels, or the copy would be the format itself.
fn dense_copy(
    o: &super::operands::Operand,
    dense: &[bool],
    dims: &[usize],
) -> Option<(TensorFormat, usize)> {
    dense.iter().rposition(|&d| d)?;
    // Levels kept as stored must still describe the copy's entries: a
    // singleton (one coordinate per parent position) or a non-unique level
    // does not below a dense one, so such a copy is dense throughout.
    let keeps_fit = o
        .format
        .levels
        .iter()
        .zip(dense)
        .all(|(l, &d)| d || (l.properties().unique && !l.properties().branchless));
    let dense: Vec<bool> = dense.iter().map(|&d| d || !keeps_fit).collect();
    let last = dense.iter().rposition(|&d| d)?;
    let CoordMap::Modes(modes) = &o.format.map else {
        return None;
    };
    let size = modes[..=last]
        .iter()
        .try_fold(1usize, |n, &m| n.checked_mul(*dims.get(m)?))?;
    let levels: Vec<String> = o
        .format
        .levels
        .iter()
        .zip(&dense)
        .map(|(l, &d)| if d { "dense".to_string() } else { l.spec() })
        .collect();
    let text = match o.format.map.mode_order_text() {
        Some(m) => format!("{}:{m}", levels.join(",")),
        None => levels.join(","),
    };
    let format =
        crate::format::parse_format(&text, o.format.order(), &crate::format::Registry::builtin())
            .ok()?;
    let format = copy_format(&o.format, format);
    (format != o.format).then_some((format, size))
}

/// `copy_pays` for the copy of `o` (stored as `tensor`) in `nest` whose
/// dense levels hold `elements` positions, with what the entries and
/// dimensions tell; true where they tell nothing.
fn copy_pays_here(
    dims: &BTreeMap<String, Vec<usize>>,
    entries: &BTreeMap<String, usize>,
    nest: &super::Nest,
    o: &super::operands::Operand,
    tensor: &str,
    elements: usize,
    source: &dyn Fn(&super::operands::Operand) -> String,
) -> bool {
    let order = &nest.graph.order;
    let first = o
        .level_vars
        .first()
        .and_then(|v| order.iter().position(|x| x == v))
        .unwrap_or(0);
    let outer: Vec<_> = order[..first]
        .iter()
        .filter(|u| !o.level_vars.contains(u))
        .collect();
    let others: Vec<_> = nest
        .problem
        .inputs()
        .iter()
        .filter(|p| source(p) != tensor)
        .collect();
    let fewest = |ps: &mut dyn Iterator<Item = &&super::operands::Operand>| {
        ps.filter_map(|p| entries.get(&source(p)).copied()).min()
    };
    // A product visits an outer coordinate only where every factor with
    // its variable has an entry there, and no more often than it has
    // coordinates; it probes a hashed `o` once per entry of the others.
    // An extent is a constant or a tensor's dimension (`Problem::vars`).
    let extent = |u: &&super::vars::IndexVar| match nest.problem.vars.extent(**u) {
        crate::ir::Expr::Int(n) => usize::try_from(*n).ok(),
        crate::ir::Expr::Param(crate::ir::ParamRef {
            tensor,
            slot: crate::ir::ParamSlot::Dim(d),
        }) => dims.get(&**tensor)?.get(*d).copied(),
        _ => None,
    };
    let coordinates = outer
        .iter()
        .map(extent)
        .try_fold(1usize, |n, x| x.map(|x| n.saturating_mul(x)));
    let with_outer = fewest(
        &mut others
            .iter()
            .filter(|p| p.level_vars.iter().any(|v| outer.contains(&v))),
    );
    let visits = match o.fully_locatable() {
        true => fewest(&mut others.iter()),
        false => [with_outer, coordinates].into_iter().flatten().min(),
    };
    match (visits, entries.get(tensor)) {
        (Some(visits), Some(&stored)) => copy_pays(elements, stored, visits, o.fully_locatable()),
        _ => true,
    }
}

/// Whether a dense copy of an operand (`elements` filled on every run)
/// costs less than reading it as stored (`stored` entries), once for each
/// of at most `visits` outer coordinates: merged again from its start each
/// time, or (`probed`) probed through its hash table once per visit (an
/// entry of the operands iterated). A
/// filled element costs about a quarter of a merge step and an eighth of a
/// probe; for a hypersparse operand driving the loops (a few rows of a
/// huge matrix) reading it as stored wins.
fn copy_pays(elements: usize, stored: usize, visits: usize, probed: bool) -> bool {
    let as_stored = match probed {
        true => 8u128 * visits as u128,
        false => 4u128 * visits as u128 * stored as u128,
    };
    elements as u128 + stored as u128 <= as_stored
}

/// Whether `e` multiplies accesses and constants only (no addition).
fn only_products(e: &Expr) -> bool {
    match e {
        Expr::Access(_) | Expr::Const(..) => true,
        Expr::Neg(x, _) => only_products(x),
        Expr::Bin(crate::notation::BinOp::Mul, x, y, _) => only_products(x) && only_products(y),
        Expr::Bin(..) => false,
    }
}

/// `kernel` (compiled from `a` with `conversion` applied) as the kernel of
/// `a`: its conversions run first.
pub(super) fn with_conversion(a: &Assignment, conversion: Conversion, kernel: Kernel) -> Kernel {
    let mut conversions = vec![conversion];
    conversions.extend(kernel.conversions.iter().cloned());
    Kernel {
        assignment: a.clone(),
        conversions,
        ..kernel
    }
}

/// `e` with its accesses numbered `which` (in `Expr::accesses` order)
/// reading `to`.
pub(super) fn rename_accesses(e: &Expr, which: &[usize], to: &str) -> Expr {
    fn go(e: &Expr, n: &[usize], seen: &mut usize, to: &str) -> Expr {
        match e {
            Expr::Access(a) => {
                let here = n.contains(seen);
                *seen += 1;
                if here {
                    Expr::Access(Access {
                        tensor: to.to_string(),
                        ..a.clone()
                    })
                } else {
                    e.clone()
                }
            }
            Expr::Const(..) => e.clone(),
            Expr::Neg(x, s) => Expr::Neg(Box::new(go(x, n, seen, to)), *s),
            Expr::Bin(op, x, y, s) => {
                let x = go(x, n, seen, to);
                Expr::Bin(*op, Box::new(x), Box::new(go(y, n, seen, to)), *s)
            }
        }
    }
    go(e, which, &mut 0, to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notation::parse_assignment;

    #[test]
    fn renames_only_the_chosen_accesses() {
        let a = parse_assignment("A(i,j) = B(i,j) * B(j,i) + B(i,j)").unwrap(); // ok: test code, a panic is a failed test
        let r = rename_accesses(&a.rhs, &[1], "T");
        let names: Vec<&str> = r.accesses().iter().map(|x| x.tensor.as_str()).collect();
        assert_eq!(names, ["B", "T", "B"]);
        let r = rename_accesses(&a.rhs, &[0, 2], "T");
        let names: Vec<&str> = r.accesses().iter().map(|x| x.tensor.as_str()).collect();
        assert_eq!(names, ["T", "B", "T"]);
    }
}
