//! A reference interpreter of the loop IR. It runs level functions on real
//! storage (the generic unpacker walks any level format with it, including
//! formats defined outside this crate) and checks every array access, so it
//! doubles as a safe oracle for the code the JIT runs.

use super::*;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    I(i64),
    F(f64),
    B(bool),
}

impl Value {
    pub fn int(self) -> Result<i64, String> {
        match self {
            Value::I(v) => Ok(v),
            Value::B(b) => Ok(b as i64),
            Value::F(_) => Err("expected an integer".into()),
        }
    }
    pub fn float(self) -> Result<f64, String> {
        match self {
            Value::F(v) => Ok(v),
            Value::I(v) => Ok(v as f64),
            Value::B(_) => Err("expected a float".into()),
        }
    }
    pub fn bool(self) -> Result<bool, String> {
        match self {
            Value::B(b) => Ok(b),
            Value::I(v) => Ok(v != 0),
            Value::F(_) => Err("expected a boolean".into()),
        }
    }
}

/// What the interpreter reads and writes: tensor storage by symbolic name.
pub trait Memory {
    fn param(&self, p: &ParamRef) -> Result<i64, String>;
    fn load(&self, a: &ArrayRef, i: i64) -> Result<Value, String>;
    fn store(&mut self, a: &ArrayRef, i: i64, v: Value) -> Result<(), String>;
    fn reserve(&mut self, a: &ArrayRef, len: i64) -> Result<(), String>;
    /// Room for `len` elements, the array's length unchanged.
    fn reserve_ahead(&mut self, a: &ArrayRef, len: i64) -> Result<(), String>;
    /// A call parameter (`ir::CALL_THREAD`, ...): by default the whole
    /// kernel, thread 0 of 1, every phase.
    fn call_param(&self, name: &str) -> i64 {
        (name == CALL_THREADS) as i64
    }
}

pub struct Interp<'m> {
    pub vars: Vec<Value>,
    pub mem: &'m mut dyn Memory,
    /// Upper bound on executed statements, so a malformed structure cannot
    /// make the interpreter spin forever.
    pub fuel: u64,
}

impl<'m> Interp<'m> {
    pub fn new(nvars: usize, mem: &'m mut dyn Memory) -> Self {
        Interp {
            vars: vec![Value::I(0); nvars],
            mem,
            fuel: u64::MAX,
        }
    }

    pub fn eval(&self, e: &Expr) -> Result<Value, String> {
        Ok(match e {
            Expr::Int(v) => Value::I(*v),
            Expr::Float(v) => Value::F(*v),
            Expr::Bool(b) => Value::B(*b),
            Expr::Var(v) => *self.vars.get(*v as usize).ok_or("unknown variable")?,
            Expr::Param(p) => Value::I(match (p.call_name(), &p.slot) {
                (Some(name), _) => self.mem.call_param(name),
                (None, ParamSlot::Target(t)) => t.host_value(),
                (None, _) => self.mem.param(p)?,
            }),
            Expr::Load(a, i) => {
                let i = self.eval(i)?.int()?;
                self.mem.load(a, i)?
            }
            // `&&` and `||` short-circuit, as in C and the JIT: the right
            // side may read an index the left side guards.
            Expr::Bin(BinOp::And, a, b) => Value::B(self.eval(a)?.bool()? && self.eval(b)?.bool()?),
            Expr::Bin(BinOp::Or, a, b) => Value::B(self.eval(a)?.bool()? || self.eval(b)?.bool()?),
            Expr::Bin(op, a, b) => {
                let (a, b) = (self.eval(a)?, self.eval(b)?);
                match (a, b) {
                    (Value::F(_), _) | (_, Value::F(_)) => {
                        let (x, y) = (a.float()?, b.float()?);
                        Value::F(match op {
                            BinOp::Add => x + y,
                            BinOp::Sub => x - y,
                            BinOp::Mul => x * y,
                            BinOp::Div => x / y,
                            BinOp::Rem => x % y,
                            BinOp::Min => x.min(y),
                            BinOp::Max => x.max(y),
                            BinOp::And | BinOp::Or => {
                                return Err("logical operator on floats".into())
                            }
                        })
                    }
                    (Value::B(x), Value::B(y)) if matches!(op, BinOp::And | BinOp::Or) => {
                        Value::B(if *op == BinOp::And { x && y } else { x || y })
                    }
                    _ => {
                        let (x, y) = (a.int()?, b.int()?);
                        Value::I(match op {
                            BinOp::Add => x.wrapping_add(y),
                            BinOp::Sub => x.wrapping_sub(y),
                            BinOp::Mul => x.wrapping_mul(y),
                            BinOp::Div => x.checked_div(y).ok_or("division by zero")?,
                            BinOp::Rem => x.checked_rem(y).ok_or("division by zero")?,
                            BinOp::Min => x.min(y),
                            BinOp::Max => x.max(y),
                            BinOp::And => ((x != 0) && (y != 0)) as i64,
                            BinOp::Or => ((x != 0) || (y != 0)) as i64,
                        })
                    }
                }
            }
            Expr::Cmp(op, a, b) => {
                let (a, b) = (self.eval(a)?, self.eval(b)?);
                let ord = match (a, b) {
                    (Value::F(_), _) | (_, Value::F(_)) => a.float()?.partial_cmp(&b.float()?),
                    _ => Some(a.int()?.cmp(&b.int()?)),
                };
                use std::cmp::Ordering::*;
                Value::B(match (op, ord) {
                    (_, None) => *op == CmpOp::Ne,
                    (CmpOp::Eq, Some(o)) => o == Equal,
                    (CmpOp::Ne, Some(o)) => o != Equal,
                    (CmpOp::Lt, Some(o)) => o == Less,
                    (CmpOp::Le, Some(o)) => o != Greater,
                    (CmpOp::Gt, Some(o)) => o == Greater,
                    (CmpOp::Ge, Some(o)) => o != Less,
                })
            }
            Expr::Not(a) => Value::B(!self.eval(a)?.bool()?),
            Expr::Neg(a) => match self.eval(a)? {
                Value::I(v) => Value::I(-v),
                Value::F(v) => Value::F(-v),
                Value::B(_) => return Err("negating a boolean".into()),
            },
            Expr::Select(c, a, b) => {
                if self.eval(c)?.bool()? {
                    self.eval(a)?
                } else {
                    self.eval(b)?
                }
            }
        })
    }

    fn set(&mut self, v: VarId, val: Value) -> Result<(), String> {
        let slot = self.vars.get_mut(v as usize).ok_or("unknown variable")?;
        *slot = val;
        Ok(())
    }

    pub fn run(&mut self, b: &Block) -> Result<(), String> {
        for s in b {
            if self.fuel == 0 {
                return Err("interpreter ran out of fuel".into());
            }
            self.fuel -= 1;
            match s {
                Stmt::Let(v, e) | Stmt::Set(v, e) => {
                    let val = self.eval(e)?;
                    self.set(*v, val)?;
                }
                Stmt::Store(a, i, v) => {
                    let (i, v) = (self.eval(i)?.int()?, self.eval(v)?);
                    self.mem.store(a, i, v)?;
                }
                Stmt::For { var, lo, hi, body } => {
                    let (lo, hi) = (self.eval(lo)?.int()?, self.eval(hi)?.int()?);
                    let mut i = lo;
                    while i < hi {
                        self.set(*var, Value::I(i))?;
                        self.run(body)?;
                        i += 1;
                    }
                }
                Stmt::While { cond, body } => {
                    while self.eval(cond)?.bool()? {
                        self.run(body)?;
                        if self.fuel == 0 {
                            return Err("interpreter ran out of fuel".into());
                        }
                        self.fuel -= 1;
                    }
                }
                Stmt::If { cond, then, els } => {
                    if self.eval(cond)?.bool()? {
                        self.run(then)?;
                    } else {
                        self.run(els)?;
                    }
                }
                Stmt::Reserve { array, len, ahead } => {
                    let len = self.eval(len)?.int()?;
                    match ahead {
                        false => self.mem.reserve(array, len)?,
                        true => self.mem.reserve_ahead(array, len)?,
                    }
                }
                Stmt::Prefetch {
                    at, stride, len, ..
                } => {
                    // No effect: only its expressions are checked.
                    self.eval(at)?.int()?;
                    self.eval(stride)?.int()?;
                    self.eval(len)?.int()?;
                }
                Stmt::PrefetchStream { at, .. } | Stmt::PrefetchGather { at, .. } => {
                    self.eval(at)?.int()?;
                }
                Stmt::Comment(_) | Stmt::Unlikely => {}
            }
        }
        Ok(())
    }
}

/// Memory for unit tests of IR rewrites: integer scratch arrays by name,
/// every access checked.
#[cfg(test)]
pub(crate) mod test_memory {
    use super::{Memory, Value};
    use crate::ir::{ArrayRef, ElemTy, ParamRef, Slot};

    /// Integer arrays by tensor name.
    pub(crate) struct Arrays(pub std::collections::BTreeMap<String, Vec<i64>>);

    impl Memory for Arrays {
        fn param(&self, _p: &ParamRef) -> Result<i64, String> {
            Err("no parameters".into())
        }
        fn load(&self, a: &ArrayRef, i: i64) -> Result<Value, String> {
            self.0[&*a.tensor]
                .get(i as usize)
                .map(|&x| Value::I(x))
                .ok_or_else(|| format!("load {i} beyond {}", a.tensor))
        }
        fn store(&mut self, a: &ArrayRef, i: i64, v: Value) -> Result<(), String> {
            let arr = self.0.get_mut(&*a.tensor).ok_or("no such array")?;
            *arr.get_mut(i as usize)
                .ok_or_else(|| format!("store {i} beyond {}", a.tensor))? = v.int()?;
            Ok(())
        }
        fn reserve(&mut self, _a: &ArrayRef, _len: i64) -> Result<(), String> {
            Ok(())
        }
        fn reserve_ahead(&mut self, _a: &ArrayRef, _len: i64) -> Result<(), String> {
            Ok(())
        }
    }

    /// Run `f` on `arrays` (by name) with the interpreter; the array
    /// `out` afterwards.
    pub(crate) fn run(
        f: &crate::ir::Function,
        arrays: Vec<(&str, Vec<i64>)>,
        out: &str,
    ) -> Vec<i64> {
        let mut mem = Arrays(
            arrays
                .into_iter()
                .map(|(n, v)| (n.to_string(), v))
                .collect(),
        );
        let mut interp = super::Interp::new(f.vars.len(), &mut mem);
        interp.run(&f.body).expect("runs"); // ok: test code, a panic is a failed test
        mem.0.remove(out).expect("the output array") // ok: test code
    }

    /// An `i32` scratch array of tensor `name`.
    pub(crate) fn scratch(name: &str) -> ArrayRef {
        ArrayRef {
            tensor: name.into(),
            slot: Slot::Scratch(name.into(), ElemTy::I32),
        }
    }
}
