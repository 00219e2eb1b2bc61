//! The result's prior contents as an operand of its own.
//!
//! A kernel that reads its result on the right-hand side (`A(i,j) = 2 *
//! A(i,j)`, `A = A + B`) must read the values from before the kernel, not
//! the zero-filled or half-assembled result. And `+=` into a result that is
//! not dense cannot update in place: appended levels would have to merge
//! the old entries with the new ones, and hashed levels packed from the old
//! entries are sized for those alone. Both are the same rewrite: the right-hand side
//! reads a read-only operand `A_prior` bound to the old contents (the
//! caller binds it), and `A += e` becomes `A = A_prior + e`.

use crate::format::level::Assembly;
use crate::format::TensorFormat;
use crate::notation::{Access, Assignment, BinOp, Expr};
use std::collections::BTreeMap;

/// The rewritten assignment and the name of the operand holding the
/// result's old contents.
pub(super) struct Prior {
    pub assignment: Assignment,
    pub name: String,
    pub formats: BTreeMap<String, TensorFormat>,
    pub dims: BTreeMap<String, Vec<usize>>,
}

fn rename(e: &Expr, from: &str, to: &str) -> Expr {
    match e {
        Expr::Access(a) if a.tensor == from => Expr::Access(Access {
            tensor: to.to_string(),
            ..a.clone()
        }),
        Expr::Access(_) | Expr::Const(..) => e.clone(),
        Expr::Neg(x, s) => Expr::Neg(Box::new(rename(x, from, to)), *s),
        Expr::Bin(op, x, y, s) => Expr::Bin(
            *op,
            Box::new(rename(x, from, to)),
            Box::new(rename(y, from, to)),
            *s,
        ),
    }
}

/// `Some` when `a` must read its result's prior contents as an operand.
pub(super) fn read_prior(
    a: &Assignment,
    formats: &BTreeMap<String, TensorFormat>,
    dims: &BTreeMap<String, Vec<usize>>,
) -> Option<Prior> {
    let out = &a.lhs.tensor;
    let format = formats.get(out)?;
    let reads_self = a.rhs.accesses().iter().any(|x| &x.tensor == out);
    // Only a dense result can be updated in place: an appended level cannot
    // merge old entries with new ones, and a hashed level packed from the
    // old entries is sized for them, not for what the kernel adds.
    let dense = format
        .levels
        .iter()
        .all(|l| l.properties().full && matches!(l.assembly(), Assembly::Insert(_)));
    if !reads_self && !(a.accumulate && !dense) {
        return None;
    }
    let mut name = format!("{out}_prior");
    while formats.contains_key(&name) {
        name.push('_');
    }
    let mut rhs = rename(&a.rhs, out, &name);
    if a.accumulate {
        let old = Expr::Access(Access {
            tensor: name.clone(),
            ..a.lhs.clone()
        });
        let span = a.rhs.span();
        rhs = Expr::Bin(BinOp::Add, Box::new(old), Box::new(rhs), span);
    }
    let mut formats = formats.clone();
    formats.insert(name.clone(), format.clone());
    let mut dims = dims.clone();
    if let Some(d) = dims.get(out).cloned() {
        dims.insert(name.clone(), d);
    }
    Some(Prior {
        assignment: Assignment {
            accumulate: false,
            rhs,
            ..a.clone()
        },
        name,
        formats,
        dims,
    })
}
