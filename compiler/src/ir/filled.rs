//! Result arrays a kernel fills in order: arrays whose room needs no zeros.
//!
//! Why: a sparse result built from empty gets its first room at once, the
//! size of the operands' values together (`jit::call::first_room`), and
//! zeroing it costs as much as a large part of the kernel (CSR add on the
//! 4-diagonal matrix of `bench/run.py`: the `memset` of the coordinates'
//! room and the faults zeroing the values' fresh pages were a third of a
//! run). An array whose every element below the length the kernel leaves
//! is stored by the kernel, and which the kernel never reads, can take its
//! room as it comes.
//!
//! The proof is syntactic, on the loop IR the backends compile, and
//! conservative: array `A` qualifies when
//! 1. its first room is made in a loop (`Function::grown_by_appends`);
//! 2. nothing loads from it;
//! 3. every store to it is `A[v] = ...` with one counter variable `v`;
//! 4. `v` is declared `let v = 0` (once or more), is never a loop's
//!    variable, and is changed only by `v += 1`, each one after a store
//!    `A[v] = ...` in the same block with nothing between them that
//!    changes `v`;
//! 5. every reserve of `A` that sets its length (not `ahead`) reserves
//!    `v`, or `v + 1` followed by the store `A[v] = ...` in the same block
//!    with nothing between them that changes `v`.
//!
//! By 4, each run of `v` from 0 stores every element below the value `v`
//! reaches, and by 5 the length the kernel leaves is a value `v` reached,
//! or one more with that element stored, or the length the array had
//! before the call.
//! A dense level under an appended one (zeros where nothing is inserted),
//! `pos` arrays (stored at coordinates) and two-phase fills (stored at
//! prefix sums) all fail 3 and keep zeroed room.

use super::{walk_block, ArrayRef, BinOp, Expr, Function, Stmt, VarId};
use std::collections::BTreeSet;

impl Function {
    /// The result arrays this kernel fills in order (see the module
    /// comment), a subset of `grown_by_appends`.
    pub fn filled_in_order(&self) -> BTreeSet<ArrayRef> {
        let grown = self.grown_by_appends();
        if grown.is_empty() {
            return grown;
        }
        let loaded = super::loaded_arrays(&self.body);
        grown
            .into_iter()
            .filter(|a| !loaded.contains(a))
            .filter(|a| {
                counter(&self.body, a).is_some_and(|v| {
                    counted_in_order(&self.body, a, v) && reserves_only_the_count(&self.body, a, v)
                })
            })
            .collect()
    }
}

/// The one variable every store to `a` indexes with, if there is one.
fn counter(body: &[Stmt], a: &ArrayRef) -> Option<VarId> {
    let mut found: Option<Option<VarId>> = None;
    walk_block(body, &mut |s| {
        if let Stmt::Store(array, index, _) = s {
            if array == a {
                let v = match index {
                    Expr::Var(v) => Some(*v),
                    _ => None,
                };
                found = match found {
                    None => Some(v),
                    Some(prev) if prev == v => Some(prev),
                    Some(_) => Some(None),
                };
            }
        }
    });
    found.flatten()
}

/// Rule 4 of the module comment for counter `v` of array `a`.
fn counted_in_order(body: &[Stmt], a: &ArrayRef, v: VarId) -> bool {
    let mut ok = true;
    walk_block(body, &mut |s| match s {
        Stmt::Let(x, init) if *x == v => ok &= *init == Expr::Int(0),
        Stmt::For { var, .. } if *var == v => ok = false,
        _ => {}
    });
    ok && increments_follow_stores(body, a, v)
}

/// Whether, in `block` and every block inside it, each statement changing
/// `v` is `v += 1` right after a store `a[v] = ...` at the same level, and
/// each reserve of `v + 1` elements that sets `a`'s length is followed by
/// that store at the same level before `v` changes.
fn increments_follow_stores(block: &[Stmt], a: &ArrayRef, v: VarId) -> bool {
    let mut stored = false;
    let mut lengthened = false;
    for s in block {
        match s {
            Stmt::Store(array, Expr::Var(x), _) if array == a && *x == v => {
                stored = true;
                lengthened = false;
            }
            Stmt::Reserve {
                array,
                len,
                ahead: false,
            } if array == a && is_increment(len, v) => lengthened = true,
            // A new run of the counter from 0.
            Stmt::Let(x, _) if *x == v => {
                if lengthened {
                    return false;
                }
                stored = false;
            }
            Stmt::Set(x, e) if *x == v => {
                if !(stored && is_increment(e, v)) || lengthened {
                    return false;
                }
                stored = false;
            }
            Stmt::For { body, .. } | Stmt::While { body, .. } => {
                if !increments_follow_stores(body, a, v) {
                    return false;
                }
                if changes(body, v) {
                    stored = false;
                    if lengthened {
                        return false;
                    }
                }
            }
            Stmt::If { then, els, .. } => {
                if !increments_follow_stores(then, a, v) || !increments_follow_stores(els, a, v) {
                    return false;
                }
                if changes(then, v) || changes(els, v) {
                    stored = false;
                    if lengthened {
                        return false;
                    }
                }
            }
            _ => {}
        }
    }
    !lengthened
}

/// `v + 1` (or `1 + v`).
fn is_increment(e: &Expr, v: VarId) -> bool {
    match e {
        Expr::Bin(BinOp::Add, x, y) => matches!(
            (&**x, &**y),
            (Expr::Var(w), Expr::Int(1)) | (Expr::Int(1), Expr::Var(w)) if *w == v
        ),
        _ => false,
    }
}

/// Whether anything in `block` assigns `v`.
fn changes(block: &[Stmt], v: VarId) -> bool {
    let mut found = false;
    walk_block(block, &mut |s| {
        found |= matches!(s, Stmt::Set(x, _) | Stmt::Let(x, _) if *x == v)
            || matches!(s, Stmt::For { var, .. } if *var == v);
    });
    found
}

/// Rule 5 of the module comment.
fn reserves_only_the_count(body: &[Stmt], a: &ArrayRef, v: VarId) -> bool {
    let mut ok = true;
    walk_block(body, &mut |s| {
        if let Stmt::Reserve {
            array,
            len,
            ahead: false,
        } = s
        {
            // `v + 1` is followed by its store (`increments_follow_stores`).
            ok &= array != a || *len == Expr::Var(v) || is_increment(len, v);
        }
    });
    ok
}

#[cfg(test)]
mod tests {
    use crate::ir::passes::{lowered_for, Backend};

    /// The C names of the arrays `expr`'s kernel fills in order, for both
    /// backends (which must agree).
    fn filled(expr: &str, formats: &[(&str, &str, usize)]) -> Vec<String> {
        let names = |b| {
            lowered_for(expr, formats, b)
                .filled_in_order()
                .iter()
                .map(|a| a.c_name())
                .collect::<Vec<_>>()
        };
        let c = names(Backend::C);
        assert_eq!(c, names(Backend::Cranelift), "{expr}");
        c
    }

    #[test]
    fn appended_coordinates_and_values_are_filled_in_order() {
        let add = "C(i,j) = A(i,j) + B(i,j)";
        let csr = [("A", "CSR", 2), ("B", "CSR", 2), ("C", "CSR", 2)];
        assert_eq!(filled(add, &csr), ["C2_crd", "C_vals"]);
        let coo = [("A", "COO", 2), ("B", "COO", 2), ("C", "COO", 2)];
        assert_eq!(filled(add, &coo), ["C1_crd", "C2_crd", "C_vals"]);
        let dcsr = [("A", "DCSR", 2), ("B", "DCSR", 2), ("C", "DCSR", 2)];
        assert_eq!(filled(add, &dcsr), ["C1_crd", "C2_crd", "C_vals"]);
        let ttv = [("B", "COO", 3), ("c", "dense", 1), ("A", "CSR", 2)];
        assert_eq!(
            filled("A(i,j) = B(i,j,k) * c(k)", &ttv),
            ["A2_crd", "A_vals"]
        );
    }

    #[test]
    fn positions_dense_results_and_zeros_below_appends_are_not() {
        // `pos` is stored at coordinates; a dense result is not appended.
        let add = "C(i,j) = A(i,j) + B(i,j)";
        assert!(
            !filled(add, &[("A", "CSR", 2), ("B", "CSR", 2), ("C", "CSR", 2)])
                .contains(&"C2_pos".to_string())
        );
        assert!(filled(add, &[("A", "CSR", 2), ("B", "CSR", 2), ("C", "dense", 2)]).is_empty());
        // A dense level under an appended one relies on the zeros of the
        // positions nothing is inserted at.
        let rows = [
            ("A", "DCSR", 2),
            ("B", "DCSR", 2),
            ("C", "compressed,dense", 2),
        ];
        assert!(!filled(add, &rows).contains(&"C_vals".to_string()));
        // SpGEMM accumulates its values in a workspace it reads.
        let spgemm = [("A", "CSR", 2), ("B", "CSR", 2), ("C", "CSR", 2)];
        for a in filled("C(i,j) = A(i,k) * B(k,j)", &spgemm) {
            assert!(!a.contains("w"), "{a}");
        }
    }
}
