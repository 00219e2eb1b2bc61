//! Temporaries (taco's `where`): a sum inside an addition inside a product,
//! which multiplying out would recompute (`notation::expand`), is computed
//! first into a dense temporary over the variables it keeps, and the
//! statement reads the temporary instead:
//! `y(i) = A(i,j) * (x(j) + B(j,k)*w(k))` runs as `y_t(j) = B(j,k)*w(k)`,
//! then `y(i) = A(i,j) * (x(j) + y_t(j))`, two loop nests in one kernel.
//! The temporary is a scratch array of the kernel (`ir::splice`), allocated
//! by each call; its extents are the dimensions of the operands it spans.

use super::{Kernel, LowerError};
use crate::format::{parse_format, Registry, TensorFormat};
use crate::ir::splice::{join, Temporary};
use crate::ir::{ParamRef, ParamSlot};
use crate::notation::{Access, Assignment, BinOp, Expr, Index};
use std::collections::BTreeMap;

type Formats = BTreeMap<String, TensorFormat>;
type Dims = BTreeMap<String, Vec<usize>>;

/// The statement computed through a temporary, when it has a sum that
/// needs one and both statements compile; `None` otherwise (the caller
/// keeps its own reason).
pub(super) fn compile_with_temporary(
    a: &Assignment,
    formats: &Formats,
    dims: &Dims,
    compile: &dyn Fn(&Assignment, &Formats, &Dims) -> Result<Kernel, LowerError>,
) -> Option<Kernel> {
    let whole = uses(&a.rhs);
    let reductions = a.reduction_vars();
    let summed = find(&a.rhs, &reductions, &whole, Context::default())?;
    // The variables the sum keeps, in order of first use, each with a
    // dimension of an operand (not the result) that gives its extent.
    let inside = uses(summed);
    let inner: Vec<&String> = reductions
        .iter()
        .filter(|v| inside.get(*v) == whole.get(*v))
        .collect();
    let mut kept: Vec<(String, ParamRef, usize)> = Vec::new();
    for acc in summed.accesses() {
        for (d, index) in acc.indices.iter().enumerate() {
            let v = &index.name;
            if inner.contains(&v) || kept.iter().any(|(k, _, _)| k == v) {
                continue;
            }
            let extent = *dims.get(&acc.tensor)?.get(d)?;
            if acc.tensor == a.lhs.tensor {
                return None;
            }
            kept.push((
                v.clone(),
                ParamRef {
                    tensor: acc.tensor.as_str().into(),
                    slot: ParamSlot::Dim(d),
                },
                extent,
            ));
        }
    }
    let mut temp = format!("{}_t", a.lhs.tensor);
    while formats.contains_key(&temp) {
        temp.push('_');
    }
    let span = summed.span();
    let access = Access {
        tensor: temp.clone(),
        indices: kept
            .iter()
            .map(|(v, _, _)| Index {
                name: v.clone(),
                span,
            })
            .collect(),
        span,
    };
    let first = Assignment {
        lhs: access.clone(),
        accumulate: false,
        rhs: summed.clone(),
        span,
    };
    let second = Assignment {
        rhs: replace(&a.rhs, summed, &Expr::Access(access)),
        ..a.clone()
    };
    let mut formats = formats.clone();
    // Where no term of a sparse sum met an entry, the temporary's zeros
    // are no entries.
    let sparse = summed.accesses().iter().any(|acc| {
        formats
            .get(&acc.tensor)
            .is_none_or(|f| !f.is_all_dense() || f.zeros_are_fill)
    });
    // A sum over an empty range has no terms: none of its zeros is an entry.
    let empty = summed.accesses().iter().any(|acc| {
        acc.indices.iter().enumerate().any(|(d, index)| {
            inner.contains(&&index.name) && dims.get(&acc.tensor).and_then(|x| x.get(d)) == Some(&0)
        })
    });
    let format = parse_format("dense", kept.len(), &Registry::builtin()).ok()?;
    formats.insert(
        temp.clone(),
        TensorFormat {
            zeros_are_fill: sparse || empty,
            ..format
        },
    );
    let mut dims = dims.clone();
    dims.insert(temp.clone(), kept.iter().map(|(_, _, n)| *n).collect());
    let k1 = compile(&first, &formats, &dims).ok()?;
    let k2 = compile(&second, &formats, &dims).ok()?;
    // The temporary's kernel runs as written: no copies, no buffer. The
    // temporary is made inside the kernel, so no copy of it can be made
    // before the kernel runs.
    if k1.buffer.is_some()
        || k1.prior.is_some()
        || !k1.conversions.is_empty()
        || k2.prior.is_some()
        || k2.conversions.iter().any(|c| c.source == temp)
    {
        return None;
    }
    let extents: Vec<ParamRef> = kept.into_iter().map(|(_, p, _)| p).collect();
    let function = join(
        &k1.function,
        &k2.function,
        &Temporary {
            tensor: &temp,
            extents: &extents,
        },
    );
    // `join` numbers the second kernel's IR variables after the first's.
    let offset = k1.function.vars.len() as crate::ir::VarId;
    let mut nests = k1.nests;
    nests.extend(k2.nests.into_iter().map(|mut n| {
        n.coords.iter_mut().for_each(|(id, _)| *id += offset);
        n
    }));
    let mut temporaries = k1.temporaries;
    temporaries.push(first);
    temporaries.extend(k2.temporaries);
    Some(Kernel {
        assignment: a.clone(),
        nests,
        function,
        prior: None,
        buffer: k2.buffer,
        conversions: k2.conversions,
        temporaries,
        result_is_copy: false,
    })
}

/// How many times each variable is used (one per index of an access).
fn uses(e: &Expr) -> BTreeMap<String, usize> {
    let mut u = BTreeMap::new();
    for acc in e.accesses() {
        for i in &acc.indices {
            *u.entry(i.name.clone()).or_insert(0) += 1;
        }
    }
    u
}

/// Where the walk is: under a product, and under an addition that is
/// itself under a product.
#[derive(Clone, Copy, Default)]
struct Context {
    in_product: bool,
    in_factor_addition: bool,
}

/// The outermost node where a sum is placed (every use of a reduction
/// variable lies in it, and in both operands of a binary node), inside an
/// addition that is a factor of a product.
fn find<'e>(
    e: &'e Expr,
    reductions: &[String],
    whole: &BTreeMap<String, usize>,
    cx: Context,
) -> Option<&'e Expr> {
    let all_uses_here = |v: &String| whole.get(v).is_some_and(|&n| uses(e).get(v) == Some(&n));
    let sum_here = match e {
        Expr::Access(_) => reductions.iter().any(all_uses_here),
        Expr::Bin(_, x, y, _) => reductions
            .iter()
            .any(|v| all_uses_here(v) && uses(x).contains_key(v) && uses(y).contains_key(v)),
        Expr::Const(..) | Expr::Neg(..) => false,
    };
    if sum_here && cx.in_factor_addition {
        return Some(e);
    }
    match e {
        Expr::Neg(x, _) => find(x, reductions, whole, cx),
        Expr::Bin(op, x, y, _) => {
            let inner = match op {
                BinOp::Mul => Context {
                    in_product: true,
                    ..cx
                },
                BinOp::Add | BinOp::Sub => Context {
                    in_factor_addition: cx.in_factor_addition || cx.in_product,
                    ..cx
                },
            };
            find(x, reductions, whole, inner).or_else(|| find(y, reductions, whole, inner))
        }
        Expr::Access(_) | Expr::Const(..) => None,
    }
}

/// `e` with the node `target` (by identity) replaced by `with`.
fn replace(e: &Expr, target: &Expr, with: &Expr) -> Expr {
    if std::ptr::eq(e, target) {
        return with.clone();
    }
    match e {
        Expr::Neg(x, s) => Expr::Neg(Box::new(replace(x, target, with)), *s),
        Expr::Bin(op, x, y, s) => Expr::Bin(
            *op,
            Box::new(replace(x, target, with)),
            Box::new(replace(y, target, with)),
            *s,
        ),
        Expr::Access(_) | Expr::Const(..) => e.clone(),
    }
}
