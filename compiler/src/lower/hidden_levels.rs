//! Operands with hidden levels under an addition. A format with hidden
//! levels (DIA's diagonals, CSB's blocks) sums over variables of its own,
//! which no other access shares; such a sum is placed at its access, and a
//! sum cannot sit inside an addition (`y(i) = A(i,j) * (x(j) + A(i,j))`
//! with `A` in CSB). Reading the tensor from a copy in the nearest format
//! without hidden levels removes the sum. The conversion search converts
//! one operand at a time, so a statement that then also needs another
//! operand converted (its loop order conflicts with the copy's) was
//! refused; here the copies are made first and the statement compiled
//! again with every remedy the caller has.

use super::convert::{elements, read_from_copy, with_conversion, Compile};
use super::{format_has_hidden_levels, Kernel, LowerError};
use crate::format::alternatives::alternatives;
use crate::format::TensorFormat;
use crate::notation::reduce::sums_hoist_with_private;
use crate::notation::Assignment;
use std::collections::{BTreeMap, BTreeSet};

/// `a` with every tensor with hidden levels read from a copy without, if
/// that is what keeps its sums from hoisting out of its additions, and
/// compiled by `compile`. `None` when that is not the problem or the
/// statement still does not compile.
pub(super) fn compile_without_hidden_levels(
    a: &Assignment,
    formats: &BTreeMap<String, TensorFormat>,
    dims: &BTreeMap<String, Vec<usize>>,
    refusal: &LowerError,
    compile: Compile,
) -> Option<Kernel> {
    let hidden = |t: &str| formats.get(t).is_some_and(format_has_hidden_levels);
    if sums_hoist_with_private(a, &|acc| hidden(&acc.tensor))
        || !sums_hoist_with_private(a, &|_| false)
    {
        return None;
    }
    let tensors: BTreeSet<String> = a
        .rhs
        .accesses()
        .into_iter()
        .filter(|acc| hidden(&acc.tensor))
        .map(|acc| acc.tensor.clone())
        .collect();
    let (mut f, mut d, mut rhs) = (formats.clone(), dims.clone(), a.rhs.clone());
    let mut conversions = Vec::new();
    for tensor in tensors {
        let accesses = rhs.accesses();
        let which: Vec<usize> = (0..accesses.len())
            .filter(|&n| accesses[n].tensor == tensor)
            .collect();
        let acc = accesses[*which.first()?].clone();
        let elements = elements(d.get(&tensor)?);
        let alt = alternatives(f.get(&tensor)?, acc.indices.len(), elements)
            .into_iter()
            .find(|alt| !format_has_hidden_levels(&alt.format))?;
        let (renamed, conversion) =
            read_from_copy(&rhs, &which, &acc, alt, &mut f, &mut d, refusal)?;
        rhs = renamed;
        conversions.push(conversion);
    }
    let kernel = compile(&Assignment { rhs, ..a.clone() }, &f, &d).ok()?;
    Some(
        conversions
            .into_iter()
            .rev()
            .fold(kernel, |k, c| with_conversion(a, c, k)),
    )
}
