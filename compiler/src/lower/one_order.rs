//! Operands that visit their indices in orders no single loop order
//! satisfies, each pair agreeing with some order but no order with all
//! (`D(j,k,i) * C(i,j,k) + B(k,i,j)`): the paper's reordering conversion
//! applied to as few operands as one loop order needs. For each order of
//! the statement's variables, the operands whose levels visit them
//! against it are read from copies of the same levels in the order's mode
//! order; the orders needing the fewest copies are compiled first.
//!
//! `convert::compile_converting` searches one conversion at a time and
//! finds such a statement only when its first conversion happens to be
//! one a loop order can use; this one starts from the loop order. A plan
//! refused for another reason (an unordered level that must be merged)
//! may take one more conversion from that search.

use super::convert::{
    compile_converting_once, read_from_copy, rename_accesses, with_conversion, Compile, Conversion,
};
use super::{Kernel, LowerError};
use crate::format::alternatives::{in_mode_order, permutations, Alternative};
use crate::format::{CoordMap, TensorFormat};
use crate::notation::Assignment;
use std::collections::{BTreeMap, BTreeSet};

/// At most this many copies for one statement (each costs a sort of the
/// operand's entries before every run).
const MAX_COPIES: usize = 3;

/// At most this many loop orders are compiled: the fewest copies first.
const MAX_ORDERS: usize = 8;

/// The statement compiled with operands read from copies in one loop
/// order, or `None` when no order of at most `MAX_COPIES` copies compiles.
pub(super) fn compile_in_one_order(
    a: &Assignment,
    formats: &BTreeMap<String, TensorFormat>,
    dims: &BTreeMap<String, Vec<usize>>,
    refusal: &LowerError,
    compile: Compile,
) -> Option<Kernel> {
    let accesses = a.rhs.accesses();
    let mut vars: Vec<&str> = Vec::new();
    for i in a
        .lhs
        .indices
        .iter()
        .chain(accesses.iter().flat_map(|x| &x.indices))
    {
        if !vars.contains(&i.name.as_str()) {
            vars.push(&i.name);
        }
    }
    // Plans: per access to copy, the copy's format; fewest copies first.
    // Orders that need the same copies are compiled once.
    let mut plans: Vec<Vec<(usize, Alternative)>> = Vec::new();
    let mut seen: BTreeSet<Vec<(usize, String)>> = BTreeSet::new();
    // Copies a plan makes: accesses of one tensor wanting the same format
    // read one copy (`D` read three times in one order is one sort).
    let copies = |plan: &[(usize, Alternative)]| -> usize {
        plan.iter()
            .map(|(n, alt)| (accesses[*n].tensor.as_str(), alt.text.as_str()))
            .collect::<BTreeSet<_>>()
            .len()
    };
    for order in permutations(vars.len()) {
        let rank = |name: &str| order.iter().position(|&v| vars[v] == name);
        let Some(plan) = copies_for(&accesses, formats, &rank) else {
            continue;
        };
        let key = plan.iter().map(|(n, alt)| (*n, alt.text.clone())).collect();
        if (1..=MAX_COPIES).contains(&copies(&plan)) && seen.insert(key) {
            plans.push(plan);
        }
    }
    plans.sort_by_key(|p| copies(p));
    for plan in plans.into_iter().take(MAX_ORDERS) {
        let mut f = formats.clone();
        let mut d = dims.clone();
        let mut rhs = a.rhs.clone();
        let mut conversions: Vec<Conversion> = Vec::new();
        for (n, alt) in plan {
            let acc = accesses[n];
            // Accesses of one tensor wanting the same copy read one copy.
            let made = conversions
                .iter()
                .find(|c| c.source == acc.tensor && c.format_text == alt.text);
            if let Some(c) = made {
                rhs = rename_accesses(&rhs, &[n], &c.copy);
                continue;
            }
            let (r, conversion) = read_from_copy(&rhs, &[n], acc, alt, &mut f, &mut d, refusal)?;
            rhs = r;
            conversions.push(conversion);
        }
        let statement = Assignment { rhs, ..a.clone() };
        // Another refusal past the order (an unordered level that must be
        // merged) may take one conversion more.
        let made: Vec<String> = conversions.iter().map(|c| c.copy.clone()).collect();
        let compiled = compile(&statement, &f, &d).or_else(|e| match e {
            e if e.is_refusal() => compile_converting_once(&statement, &f, &d, e, compile, &made),
            e => Err(e),
        });
        let Ok(kernel) = compiled else {
            continue;
        };
        // A copy converted again would be a second sort: not this plan.
        if kernel
            .conversions
            .iter()
            .any(|c| conversions.iter().any(|m| m.copy == c.source))
        {
            continue;
        }
        let kernel = conversions
            .into_iter()
            .rev()
            .fold(kernel, |k, c| with_conversion(a, c, k));
        return Some(kernel);
    }
    None
}

/// The copies a loop order needs: each access whose levels visit its
/// variables against the order (`rank` gives a variable's place in it),
/// with its levels in the order's mode order; `None` when such an access
/// has no mode order to change.
fn copies_for(
    accesses: &[&crate::notation::Access],
    formats: &BTreeMap<String, TensorFormat>,
    rank: &dyn Fn(&str) -> Option<usize>,
) -> Option<Vec<(usize, Alternative)>> {
    let mut plan = Vec::new();
    for (n, acc) in accesses.iter().enumerate() {
        let format = formats.get(&acc.tensor)?;
        let CoordMap::Modes(modes) = &format.map else {
            continue;
        };
        // Levels that all locate are read in any order.
        if format.levels.iter().all(|l| l.locate().is_some()) {
            continue;
        }
        let mut want: Vec<usize> = (0..acc.indices.len()).collect();
        want.sort_by_key(|&dim| rank(&acc.indices[dim].name));
        // Levels that visit the same variables in the same order already
        // agree (a repeated index keeps its dimensions' order).
        let visits = |m: &[usize]| -> Vec<&str> {
            m.iter()
                .map(|&dim| acc.indices[dim].name.as_str())
                .collect()
        };
        if visits(&want) == visits(modes) {
            continue;
        }
        plan.push((n, in_mode_order(format, &want)?));
    }
    Some(plan)
}
