//! Building IR: expression constructors with light constant folding (so
//! inlined level functions read like hand-written code) and the `Emitter`
//! that collects statements into nested blocks.

use super::*;

impl Expr {
    pub fn var(v: VarId) -> Expr {
        Expr::Var(v)
    }
    pub fn load(a: ArrayRef, i: Expr) -> Expr {
        Expr::Load(a, Box::new(i))
    }
    pub fn param(p: ParamRef) -> Expr {
        Expr::Param(p)
    }
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Expr::Int(v) => Some(*v),
            _ => None,
        }
    }
    /// `(p, k, c)` where this index is `p * k + c` for a variable `p`
    /// that `is_position` accepts and constants `k` and `c` (`p`: 1 and 0;
    /// `p + c`: 1 and `c`; `p * k`: `k` and 0): where a loop over
    /// positions reads an array in order, `k` elements a position.
    pub fn scaled_position(
        &self,
        is_position: impl Fn(VarId) -> bool,
    ) -> Option<(VarId, i64, i64)> {
        let scaled = |e: &Expr| match e {
            Expr::Var(p) if is_position(*p) => Some((*p, 1)),
            Expr::Bin(BinOp::Mul, a, k) => match (&**a, k.as_int()) {
                (Expr::Var(p), Some(k)) if is_position(*p) => Some((*p, k)),
                _ => None,
            },
            _ => None,
        };
        match self {
            Expr::Bin(BinOp::Add, a, c) if c.as_int().is_some() => {
                let (p, k) = scaled(a)?;
                Some((p, k, c.as_int()?))
            }
            e => scaled(e).map(|(p, k)| (p, k, 0)),
        }
    }
    pub fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
        use BinOp::*;
        match (op, a.as_int(), b.as_int()) {
            (_, Some(x), Some(y)) => {
                let v = match op {
                    Add => x.wrapping_add(y),
                    Sub => x.wrapping_sub(y),
                    Mul => x.wrapping_mul(y),
                    Div if y != 0 => x / y,
                    Rem if y != 0 => x % y,
                    Min => x.min(y),
                    Max => x.max(y),
                    _ => return Expr::Bin(op, Box::new(a), Box::new(b)),
                };
                Expr::Int(v)
            }
            (Add, Some(0), _) => b,
            (Add | Sub, _, Some(0)) => a,
            (Add | Sub, None, Some(d)) => {
                let d = if op == Sub { d.checked_neg() } else { Some(d) };
                let folded = a
                    .plus_constant()
                    .zip(d)
                    .and_then(|((x, c), d)| Some(Expr::plus(x.clone(), c.checked_add(d)?)));
                folded.unwrap_or_else(|| Expr::Bin(op, Box::new(a), Box::new(b)))
            }
            (Mul, Some(1), _) => b,
            (Mul | Div, _, Some(1)) => a,
            (Mul, Some(0), _) | (Mul, _, Some(0)) => Expr::Int(0),
            _ => match (op, &a, &b) {
                (And, Expr::Bool(true), _) => b,
                (And, _, Expr::Bool(true)) => a,
                (Or, Expr::Bool(false), _) => b,
                (Or, _, Expr::Bool(false)) => a,
                (Or, Expr::Bool(true), _) | (Or, _, Expr::Bool(true)) => Expr::Bool(true),
                (And, Expr::Bool(false), _) | (And, _, Expr::Bool(false)) => Expr::Bool(false),
                _ => Expr::Bin(op, Box::new(a), Box::new(b)),
            },
        }
    }
    pub fn add(a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Add, a, b)
    }
    /// `x + c` and `x - c` as `(x, ±c)`. `Expr::bin` folds a constant
    /// added to one into it: a run's last position plus one (`seg - 1 +
    /// 1`) is the run's end, one value where the backends kept two live
    /// (Cranelift at `opt_level=none` spilled for it in a COO inner
    /// product's merges).
    fn plus_constant(&self) -> Option<(&Expr, i64)> {
        match self {
            Expr::Bin(BinOp::Add, x, c) if x.as_int().is_none() => Some((x, c.as_int()?)),
            Expr::Bin(BinOp::Sub, x, c) if x.as_int().is_none() => {
                Some((x, c.as_int()?.checked_neg()?))
            }
            _ => None,
        }
    }
    /// `x + c`, written `x - |c|` for a negative `c`.
    fn plus(x: Expr, c: i64) -> Expr {
        match c.checked_neg() {
            Some(minus) if c < 0 => Expr::sub(x, Expr::Int(minus)),
            _ => Expr::add(x, Expr::Int(c)),
        }
    }
    pub fn sub(a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Sub, a, b)
    }
    pub fn mul(a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Mul, a, b)
    }
    pub fn div(a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Div, a, b)
    }
    pub fn rem(a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Rem, a, b)
    }
    pub fn min(a: Expr, b: Expr) -> Expr {
        if a == b {
            return a;
        }
        Expr::bin(BinOp::Min, a, b)
    }
    pub fn max(a: Expr, b: Expr) -> Expr {
        if a == b {
            return a;
        }
        Expr::bin(BinOp::Max, a, b)
    }
    pub fn and(a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::And, a, b)
    }
    pub fn or(a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Or, a, b)
    }
    pub fn cmp(op: CmpOp, a: Expr, b: Expr) -> Expr {
        if let (Some(x), Some(y)) = (a.as_int(), b.as_int()) {
            let v = match op {
                CmpOp::Eq => x == y,
                CmpOp::Ne => x != y,
                CmpOp::Lt => x < y,
                CmpOp::Le => x <= y,
                CmpOp::Gt => x > y,
                CmpOp::Ge => x >= y,
            };
            return Expr::Bool(v);
        }
        Expr::Cmp(op, Box::new(a), Box::new(b))
    }
    pub fn eq(a: Expr, b: Expr) -> Expr {
        Expr::cmp(CmpOp::Eq, a, b)
    }
    pub fn ne(a: Expr, b: Expr) -> Expr {
        Expr::cmp(CmpOp::Ne, a, b)
    }
    pub fn lt(a: Expr, b: Expr) -> Expr {
        Expr::cmp(CmpOp::Lt, a, b)
    }
    pub fn not(a: Expr) -> Expr {
        match a {
            Expr::Bool(b) => Expr::Bool(!b),
            Expr::Not(inner) => *inner,
            a => Expr::Not(Box::new(a)),
        }
    }
    pub fn neg(a: Expr) -> Expr {
        match a {
            Expr::Int(v) => Expr::Int(-v),
            Expr::Float(v) => Expr::Float(-v),
            a => Expr::Neg(Box::new(a)),
        }
    }
    pub fn select(c: Expr, a: Expr, b: Expr) -> Expr {
        match c {
            Expr::Bool(true) => a,
            Expr::Bool(false) => b,
            c => Expr::Select(Box::new(c), Box::new(a), Box::new(b)),
        }
    }
    /// True when evaluating the expression has no cost worth caching
    /// (constants, variables, parameters).
    pub fn is_trivial(&self) -> bool {
        matches!(
            self,
            Expr::Int(_) | Expr::Float(_) | Expr::Bool(_) | Expr::Var(_) | Expr::Param(_)
        )
    }
}

/// Collects statements into nested blocks and hands out fresh variables.
#[derive(Default, Debug)]
pub struct Emitter {
    /// Every variable so far; added to only through `fresh`.
    pub vars: Vec<VarInfo>,
    blocks: Vec<Block>,
    /// The names in `vars`, and per requested name the suffix `fresh`
    /// tried last: without them naming was quadratic in the variables (a
    /// kernel of 60 lattice points spent 8 s of its 9 s here).
    taken: std::collections::HashSet<String>,
    next_suffix: std::collections::HashMap<String, usize>,
}

impl Emitter {
    pub fn new() -> Self {
        Emitter {
            vars: Vec::new(),
            blocks: vec![Vec::new()],
            taken: Default::default(),
            next_suffix: Default::default(),
        }
    }

    /// A fresh variable; the name is made unique by the smallest numeric
    /// suffix not taken. Names are only ever added, so that suffix never
    /// decreases: the search resumes where the last one for `name` ended.
    pub fn fresh(&mut self, name: &str, ty: Ty) -> VarId {
        let n = self.next_suffix.entry(name.to_string()).or_insert(0);
        let mut unique = match *n {
            0 => name.to_string(),
            k => format!("{name}{k}"),
        };
        while self.taken.contains(&unique) {
            *n += 1;
            unique = format!("{name}{n}");
        }
        self.taken.insert(unique.clone());
        self.vars.push(VarInfo { name: unique, ty });
        (self.vars.len() - 1) as VarId
    }

    pub fn ty(&self, e: &Expr) -> Ty {
        e.ty(&self.vars)
    }

    pub fn push(&mut self, s: Stmt) {
        if let Some(b) = self.blocks.last_mut() {
            b.push(s);
        }
    }

    /// Declare a variable initialised to `e` and return it as an expression.
    pub fn let_var(&mut self, name: &str, e: Expr) -> Expr {
        let ty = self.ty(&e);
        let v = self.fresh(name, ty);
        self.push(Stmt::Let(v, e));
        Expr::Var(v)
    }

    /// Like `let_var` but returns trivial expressions as they are.
    pub fn bind(&mut self, name: &str, e: Expr) -> Expr {
        if e.is_trivial() {
            e
        } else {
            self.let_var(name, e)
        }
    }

    pub fn set(&mut self, v: &Expr, e: Expr) {
        if let Expr::Var(id) = v {
            self.push(Stmt::Set(*id, e));
        }
    }

    pub fn comment(&mut self, text: impl Into<String>) {
        self.push(Stmt::Comment(text.into()));
    }

    pub fn open(&mut self) {
        self.blocks.push(Vec::new());
    }

    pub fn close(&mut self) -> Block {
        if self.blocks.len() > 1 {
            self.blocks.pop().unwrap_or_default()
        } else {
            Vec::new()
        }
    }

    /// Emit `body` inside a block and return it (for loops and branches).
    pub fn block(&mut self, body: impl FnOnce(&mut Emitter)) -> Block {
        self.open();
        body(self);
        self.close()
    }

    pub fn if_(&mut self, cond: Expr, then: impl FnOnce(&mut Emitter)) {
        match cond {
            Expr::Bool(false) => {}
            Expr::Bool(true) => then(self),
            cond => {
                let then = self.block(then);
                if !then.is_empty() {
                    self.push(Stmt::If {
                        cond,
                        then,
                        els: Vec::new(),
                    });
                }
            }
        }
    }

    pub fn for_(&mut self, name: &str, lo: Expr, hi: Expr, body: impl FnOnce(&mut Emitter, Expr)) {
        let v = self.fresh(name, Ty::I64);
        let b = self.block(|e| body(e, Expr::Var(v)));
        self.push(Stmt::For {
            var: v,
            lo,
            hi,
            body: b,
        });
    }

    pub fn while_(&mut self, cond: Expr, body: impl FnOnce(&mut Emitter)) {
        let b = self.block(body);
        self.push(Stmt::While { cond, body: b });
    }

    pub fn store(&mut self, a: ArrayRef, i: Expr, v: Expr) {
        self.push(Stmt::Store(a, i, v));
    }

    pub fn reserve(&mut self, a: ArrayRef, len: Expr) {
        self.push(Stmt::Reserve {
            array: a,
            len,
            ahead: false,
        });
    }

    /// The top-level block (everything emitted outside nested blocks).
    pub fn finish(mut self, name: &str) -> Function {
        let body = self.blocks.drain(..).next().unwrap_or_default();
        Function {
            name: name.to_string(),
            vars: self.vars,
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

    /// Number of statements in the current block (a position to refer back to).
    pub fn mark(&self) -> usize {
        self.blocks.last().map_or(0, |b| b.len())
    }

    /// Remove, from the current block after `from`, the loop that fills
    /// `vals` with zeros (when every position turns out to be stored).
    pub fn remove_zero_fill(&mut self, from: usize, vals: &ArrayRef) {
        if let Some(b) = self.blocks.last_mut() {
            if let Some(k) = b.iter().skip(from).position(|s| is_zero_fill(s, vals)) {
                b.remove(from + k);
            }
        }
    }

    /// Take the statements emitted so far at the current level, leaving the
    /// emitter ready for more (used by level-function snapshot tests).
    pub fn take(&mut self) -> Block {
        self.blocks
            .last_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }
}

/// Whether `s` is the loop that fills `vals` with zeros (`for q in lo..hi
/// { vals[q] = 0.0 }`).
pub fn is_zero_fill(s: &Stmt, vals: &ArrayRef) -> bool {
    zero_filled(s) == Some(vals)
}

/// The array `s` fills with zeros, if it is such a loop (`is_zero_fill`).
fn zero_filled(s: &Stmt) -> Option<&ArrayRef> {
    let Stmt::For { var, body, .. } = s else {
        return None;
    };
    match body.as_slice() {
        [Stmt::Store(a, Expr::Var(i), Expr::Float(z))] if i == var && *z == 0.0 => Some(a),
        _ => None,
    }
}

/// Whether `s` is a dense result's fill of the rows of `vals` as a loop
/// reaches them (`row_fill`).
pub fn is_row_fill(s: &Stmt, vals: &ArrayRef) -> bool {
    row_fill(s) == Some(vals)
}

/// The array `s` fills when it is a dense result's fill of its rows as a
/// loop reaches them (`lower::parallel::fill`): `if row >= next { <lets>;
/// for q in lo..hi { vals[q] = 0.0 }; next = ... }`. It zeroes only rows
/// no iteration has written yet, at or past `next`: the rows of the
/// iterations before it are below `next`. Once a row, it is no loop of
/// the loop it sits in for the passes that look for innermost loops.
pub fn row_fill(s: &Stmt) -> Option<&ArrayRef> {
    let Stmt::If { cond, then, els } = s else {
        return None;
    };
    let Expr::Cmp(CmpOp::Ge, _, next) = cond else {
        return None;
    };
    let Expr::Var(next) = next.as_ref() else {
        return None;
    };
    let lets = then
        .iter()
        .take_while(|s| matches!(s, Stmt::Let(..)))
        .count();
    match &then[lets..] {
        [fill, Stmt::Set(v, _)] if v == next && els.is_empty() => zero_filled(fill),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_names_take_the_smallest_free_suffix() {
        let mut e = Emitter::new();
        let names: Vec<String> = ["t", "t", "t1", "t", "t", "u"]
            .iter()
            .map(|n| {
                let v = e.fresh(n, Ty::I64);
                e.vars[v as usize].name.clone()
            })
            .collect();
        // The third "t" finds "t2" free after "t1" was taken by name.
        assert_eq!(names, ["t", "t1", "t11", "t2", "t3", "u"]);
    }

    /// Constants added to a sum with a constant fold into it, whatever the
    /// signs; one that would overflow stays apart.
    #[test]
    fn constants_added_one_after_another_fold() {
        let x = || Expr::var(0);
        let one = || Expr::Int(1);
        assert_eq!(Expr::add(Expr::sub(x(), one()), one()), x());
        assert_eq!(Expr::sub(Expr::add(x(), one()), one()), x());
        assert_eq!(
            Expr::sub(Expr::add(x(), Expr::Int(3)), Expr::Int(5)),
            Expr::Bin(BinOp::Sub, Box::new(x()), Box::new(Expr::Int(2)))
        );
        assert_eq!(
            Expr::add(Expr::add(x(), Expr::Int(3)), Expr::Int(5)),
            Expr::Bin(BinOp::Add, Box::new(x()), Box::new(Expr::Int(8)))
        );
        let big = Expr::add(x(), Expr::Int(i64::MAX));
        assert_eq!(
            Expr::add(big.clone(), one()),
            Expr::Bin(BinOp::Add, Box::new(big), Box::new(one()))
        );
        // Not a sum with a constant: left as written.
        let product = Expr::mul(x(), Expr::Int(2));
        assert_eq!(
            Expr::add(product.clone(), one()),
            Expr::Bin(BinOp::Add, Box::new(product), Box::new(one()))
        );
    }
}
