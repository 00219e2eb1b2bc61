//! Clean-up passes run on a kernel's loop IR before either backend sees it,
//! so the C a user reads and the code the JIT runs stay the same program,
//! but for where loops ask for rows ahead and where rows are summed in
//! strips (`Backend`).

use super::*;

/// What a kernel's code is made for. The backends translate the same
/// program but for where a loop asks for rows ahead
/// (`prefetch::strip_for_calls`: once per strip of positions where a
/// prefetch is a call), for dense rows summed in strips of registers
/// (`ir::strips`: everywhere in the C, under Cranelift where the data is
/// large), and for the hints of the streams a loop
/// reads (`ir::streams`: before each row and inside COO's loop in the C,
/// per strip of rows by calls under Cranelift), and for the elements a
/// loop gathers at scattered coordinates (`ir::gathers`: tested at run
/// time in the C, on the data the kernel is made for under Cranelift,
/// asked by calls).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The emitted C, as the cc tier builds it and users ship it.
    C,
    /// The Cranelift JIT (and the IR interpreter that stands for it).
    Cranelift,
}

/// Whether the Cranelift tier carries prefetch hints as instructions: on
/// x86-64, where `jit::prefetch` rewrites their loads into `prefetcht0`.
/// Elsewhere it asks through calls, once per strip of rows.
const PREFETCH_INSTRUCTIONS: bool = cfg!(target_arch = "x86_64");

/// The function `backend` translates: `f` after the loop passes.
pub fn for_codegen(f: &Function, backend: Backend) -> Function {
    let mut g = f.clone();
    if backend == Backend::Cranelift {
        super::fixed_params::compile_in(&mut g);
    }
    super::runs::accumulate_runs(&mut g);
    fold_zero_starts(&mut g.body);
    super::clip::clip_loops(&mut g);
    super::min_compare::compare_operands(&mut g);
    remove_dead_vars(&mut g);
    super::early_steps::compute_steps_early(&mut g);
    super::tile::tile_rows(&mut g, backend);
    super::prefetch::prefetch_rows(&mut g);
    match backend {
        Backend::C => {
            super::strips::sum_rows_in_strips(&mut g, backend);
            super::streams::prefetch_streams(&mut g);
            super::block_streams::hint_blocks(&mut g);
            super::gathers::prefetch_gathers(&mut g);
            super::streams::hint_beside_gathers(&mut g);
        }
        Backend::Cranelift => {
            super::ran_flags::flags_from_bounds(&mut g);
            super::strips::sum_rows_in_strips(&mut g, backend);
            if PREFETCH_INSTRUCTIONS {
                super::streams::prefetch_streams(&mut g);
                super::block_streams::hint_blocks(&mut g);
                super::gathers::prefetch_gathers(&mut g);
                super::streams::hint_beside_gathers(&mut g);
                super::hints_for_data::decide_for_data(&mut g);
            } else {
                super::streams::ask_rows_by_calls(&mut g);
                super::gathers::ask_gathers_by_calls(&mut g);
            }
            super::prefetch::strip_for_calls(&mut g);
        }
    }
    super::run_strides::stride_long_runs(&mut g);
    gather_reserves(&mut g.body);
    super::fill_checks::check_fill_once(&mut g);
    if backend == Backend::Cranelift {
        super::known_values::write_in(&mut g);
    }
    g
}

/// Move each `reserve` up over the stores to other arrays before it, so an
/// append's reserves stand together (`reserve A2_crd[n]; reserve
/// A_vals[n]; A2_crd[..] = ..; A_vals[..] = ..`) and a backend can check
/// them as one group. Sound: a store changes no variable, and the reserve
/// moves only over stores to arrays its length does not read; growing an
/// array earlier changes nothing another array's store sees.
pub fn gather_reserves(b: &mut Block) {
    for k in 0..b.len() {
        let Stmt::Reserve { array, len, .. } = &b[k] else {
            continue;
        };
        let reads = |a: &ArrayRef| {
            let mut found = false;
            len.walk(&mut |x| found |= matches!(x, Expr::Load(l, _) if l == a));
            found
        };
        let mut to = k;
        while to > 0 && matches!(&b[to - 1], Stmt::Store(a, ..) if a != array && !reads(a)) {
            to -= 1;
        }
        let r = b.remove(k);
        b.insert(to, r);
    }
    for inner in b.iter_mut().flat_map(nested_blocks_mut) {
        gather_reserves(inner);
    }
}

/// `let t = 0.0; t += e` becomes `let t = e`: a sum of one term is that
/// term. (Neither backend may drop the `0.0 +` itself: it turns -0.0 into
/// 0.0, a difference this fold accepts.)
pub fn fold_zero_starts(b: &mut Block) {
    let mut k = 0;
    while k < b.len() {
        if let Stmt::Let(t, Expr::Float(z)) = &b[k] {
            let (t, zero) = (*t, *z == 0.0);
            // Skip `let`s that do not mention `t` to find its first update.
            let mut j = k + 1;
            while j < b.len() && matches!(&b[j], Stmt::Let(v, e) if *v != t && !e.uses(t)) {
                j += 1;
            }
            let term = match b.get(j) {
                Some(Stmt::Set(t2, Expr::Bin(BinOp::Add, l, r)))
                    if zero && *t2 == t && **l == Expr::Var(t) && !r.uses(t) =>
                {
                    Some((**r).clone())
                }
                _ => None,
            };
            if let Some(r) = term {
                b[j] = Stmt::Let(t, r);
                b.remove(k);
                continue;
            }
        }
        k += 1;
    }
    for inner in b.iter_mut().flat_map(nested_blocks_mut) {
        fold_zero_starts(inner);
    }
}

/// Drop `let`s and assignments of variables nothing reads. Expressions have
/// no side effects (loads read validated positions), so removing them is
/// always safe; a C compiler would otherwise warn about them.
pub fn remove_dead_vars(f: &mut Function) {
    loop {
        let read = read_vars(&f.body, f.vars.len());
        if !prune(&mut f.body, &read) {
            break;
        }
    }
}

/// Which variables some expression reads, indexed by `VarId` (a table,
/// not a set: this runs once per pruning round of every compile).
fn read_vars(b: &Block, vars: usize) -> Vec<bool> {
    let mut read = vec![false; vars];
    walk_block(b, &mut |s| {
        for e in stmt_exprs(s) {
            e.walk(&mut |x| {
                if let Expr::Var(v) = x {
                    let v = *v as usize;
                    if v >= read.len() {
                        read.resize(v + 1, false);
                    }
                    read[v] = true;
                }
            });
        }
    });
    read
}

/// Drop the assignments of variables nothing reads; whether any went.
fn prune(b: &mut Block, read: &[bool]) -> bool {
    let before = b.len();
    let is_read = |v: &VarId| read.get(*v as usize).copied().unwrap_or(false);
    b.retain(|s| !matches!(s, Stmt::Let(v, _) | Stmt::Set(v, _) if !is_read(v)));
    let mut removed = b.len() != before;
    for inner in b.iter_mut().flat_map(nested_blocks_mut) {
        removed |= prune(inner, read);
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserves_gather_above_the_stores_of_other_arrays() {
        let (crd, vals, pos) = (
            ArrayRef::level("A", 0, "crd"),
            ArrayRef::vals("A"),
            ArrayRef::level("A", 0, "pos"),
        );
        let mut e = Emitter::new();
        let n = e.let_var("n", Expr::Int(0));
        let at = Expr::add(n.clone(), Expr::Int(1));
        e.reserve(crd.clone(), at.clone());
        e.store(crd.clone(), n.clone(), Expr::Int(3));
        e.reserve(vals.clone(), at.clone());
        e.store(vals.clone(), n.clone(), Expr::Float(1.0));
        // A length that reads `crd` stays below the store to `crd`.
        e.reserve(pos.clone(), Expr::load(crd.clone(), Expr::Int(0)));
        let mut f = e.finish("k");
        gather_reserves(&mut f.body);
        let kinds: Vec<&str> = f.body[1..]
            .iter()
            .map(|s| match s {
                Stmt::Reserve { array, .. } if *array == crd => "Rc",
                Stmt::Reserve { array, .. } if *array == pos => "Rp",
                Stmt::Reserve { .. } => "Rv",
                Stmt::Store(a, ..) if *a == crd => "Sc",
                _ => "Sv",
            })
            .collect();
        assert_eq!(kinds, ["Rc", "Rv", "Sc", "Rp", "Sv"]);
    }

    #[test]
    fn a_sum_of_one_term_starts_at_the_term() {
        let mut e = Emitter::new();
        let t = e.let_var("t", Expr::Float(0.0));
        e.set(
            &t,
            Expr::add(t.clone(), Expr::load(ArrayRef::vals("B"), Expr::Int(0))),
        );
        e.store(ArrayRef::vals("y"), Expr::Int(0), t);
        let mut f = e.finish("k");
        fold_zero_starts(&mut f.body);
        let text = f.to_string();
        assert!(
            text.contains("let t: f64 = B_vals[0]") && !text.contains("0.0"),
            "{text}"
        );
    }

    #[test]
    fn dead_chains_go_and_live_ones_stay() {
        let mut e = Emitter::new();
        let a = e.let_var("a", Expr::Int(1));
        let _b = e.let_var("b", Expr::add(a.clone(), Expr::Int(2)));
        let c = e.let_var("c", Expr::Int(3));
        e.store(ArrayRef::vals("y"), Expr::Int(0), c);
        let mut f = e.finish("k");
        remove_dead_vars(&mut f);
        let text = f.to_string();
        assert!(!text.contains("let a") && !text.contains("let b"), "{text}");
        assert!(text.contains("let c"), "{text}");
    }
}

/// `expr` over `formats` (name, format, order; every dimension 40),
/// lowered and prepared for `backend`: the kernels the passes' tests read.
#[cfg(test)]
pub(crate) fn lowered_for(
    expr: &str,
    formats: &[(&str, &str, usize)],
    backend: Backend,
) -> Function {
    for_codegen(&lowered(expr, formats), backend)
}

/// `lowered_for` before the passes, its data's lengths unknown.
#[cfg(test)]
pub(crate) fn lowered(expr: &str, formats: &[(&str, &str, usize)]) -> Function {
    use crate::format::{parse_format, Registry};
    let r = Registry::builtin();
    let a = crate::notation::parse_assignment(expr).unwrap(); // ok: test code
    let fs = formats
        .iter()
        .map(|(n, f, o)| (n.to_string(), parse_format(f, *o, &r).unwrap())) // ok: test code
        .collect();
    let dims: std::collections::BTreeMap<String, Vec<usize>> = formats
        .iter()
        .map(|(n, _, o)| (n.to_string(), vec![40; *o]))
        .collect();
    let k = crate::lower::compile("k", &a, &fs, &dims).unwrap(); // ok: test code
    k.function
}
