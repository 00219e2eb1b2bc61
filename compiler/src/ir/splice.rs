//! Joining two kernels into one that runs them in turn, the first writing a
//! temporary the second reads (`lower::temporary`): the second's variables
//! are renumbered after the first's, and the temporary's values become a
//! scratch array of the joined kernel (allocated by each call, as a
//! workspace is), its dimensions read from the tensors that give them.

use super::{
    ArrayRef, Block, Coordinates, ElemTy, Expr, Function, ParamRef, ParamSlot, Slot, Stmt, VarId,
};

/// How the temporary `tensor` appears in the joined kernel.
pub struct Temporary<'a> {
    pub tensor: &'a str,
    /// Per dimension of the temporary, a parameter with the same extent.
    pub extents: &'a [ParamRef],
}

impl Temporary<'_> {
    fn array(&self, a: &ArrayRef) -> ArrayRef {
        match &a.slot {
            Slot::Vals if *a.tensor == *self.tensor => ArrayRef {
                tensor: self.tensor.into(),
                slot: Slot::Scratch("vals".into(), ElemTy::F64),
            },
            _ => a.clone(),
        }
    }

    /// A dense level's extent (`N` of level `k`) or a dimension of the
    /// temporary, as the parameter that gives it.
    fn param(&self, p: &ParamRef) -> Expr {
        if *p.tensor != *self.tensor {
            return Expr::Param(p.clone());
        }
        let d = match p.slot {
            ParamSlot::Level(k, _) | ParamSlot::Dim(k) => k,
            ParamSlot::Target(_) => return Expr::Param(p.clone()),
        };
        self.extents
            .get(d)
            .cloned()
            .map_or(Expr::Int(0), Expr::Param)
    }
}

/// `first` then `second`, as one function named like `first`.
pub fn join(first: &Function, second: &Function, temp: &Temporary<'_>) -> Function {
    let offset = first.vars.len();
    let mut vars = first.vars.clone();
    vars.extend(second.vars.iter().cloned());
    let mut body = block(&first.body, 0, temp);
    body.extend(block(&second.body, offset, temp));
    Function {
        name: first.name.clone(),
        vars,
        body,
        parallel: None,
        shares: None,
        runs: Vec::new(),
        lengths: Vec::new(),
        lines_of_their_own: Vec::new(),
        fixed_params: Vec::new(),
        index_limits: Vec::new(),
    }
}

fn block(b: &Block, offset: usize, t: &Temporary<'_>) -> Block {
    b.iter().map(|s| stmt(s, offset, t)).collect()
}

fn var(v: VarId, offset: usize) -> VarId {
    v + offset as VarId
}

fn stmt(s: &Stmt, o: usize, t: &Temporary<'_>) -> Stmt {
    let e = |x: &Expr| expr(x, o, t);
    match s {
        Stmt::Let(v, x) => Stmt::Let(var(*v, o), e(x)),
        Stmt::Set(v, x) => Stmt::Set(var(*v, o), e(x)),
        Stmt::Store(a, i, x) => Stmt::Store(t.array(a), e(i), e(x)),
        Stmt::For {
            var: v,
            lo,
            hi,
            body,
        } => Stmt::For {
            var: var(*v, o),
            lo: e(lo),
            hi: e(hi),
            body: block(body, o, t),
        },
        Stmt::While { cond, body } => Stmt::While {
            cond: e(cond),
            body: block(body, o, t),
        },
        Stmt::If { cond, then, els } => Stmt::If {
            cond: e(cond),
            then: block(then, o, t),
            els: block(els, o, t),
        },
        Stmt::Reserve { array, len, ahead } => Stmt::Reserve {
            array: t.array(array),
            len: e(len),
            ahead: *ahead,
        },
        Stmt::Prefetch {
            array,
            coords,
            at,
            positions,
            stride,
            len,
        } => Stmt::Prefetch {
            array: t.array(array),
            coords: t.array(coords),
            at: e(at),
            positions: *positions,
            stride: e(stride),
            len: e(len),
        },
        Stmt::PrefetchStream {
            array,
            at,
            positions,
            beside_gathers,
        } => Stmt::PrefetchStream {
            array: t.array(array),
            at: e(at),
            positions: *positions,
            beside_gathers: *beside_gathers,
        },
        Stmt::PrefetchGather { array, coords, at } => Stmt::PrefetchGather {
            array: t.array(array),
            coords: Coordinates {
                array: t.array(&coords.array),
                ..coords.clone()
            },
            at: e(at),
        },
        Stmt::Comment(c) => Stmt::Comment(c.clone()),
        Stmt::Unlikely => Stmt::Unlikely,
    }
}

fn expr(x: &Expr, o: usize, t: &Temporary<'_>) -> Expr {
    let b = |y: &Expr| Box::new(expr(y, o, t));
    match x {
        Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) => x.clone(),
        Expr::Var(v) => Expr::Var(var(*v, o)),
        Expr::Param(p) => t.param(p),
        Expr::Load(a, i) => Expr::Load(t.array(a), b(i)),
        Expr::Bin(op, l, r) => Expr::Bin(*op, b(l), b(r)),
        Expr::Cmp(op, l, r) => Expr::Cmp(*op, b(l), b(r)),
        Expr::Not(y) => Expr::Not(b(y)),
        Expr::Neg(y) => Expr::Neg(b(y)),
        Expr::Select(c, l, r) => Expr::Select(b(c), b(l), b(r)),
    }
}
