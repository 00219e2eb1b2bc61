//! Unpacking any format back to coordinates by running its own level
//! functions in the IR interpreter: the same functions the code generator
//! inlines, so a level defined outside this crate unpacks with no extra code,
//! and unpacking checks the level functions against the packer.

use super::{StorageError, Tensor};
use crate::coo::CooTensor;
use crate::format::level::{Iteration, LevelCtx};
use crate::ir::interp::{Interp, Memory, Value};
use crate::ir::{ArrayRef, Block, Emitter, Expr, ParamRef, ParamSlot, Slot, Ty, VarId};

/// Memory view of a tensor for the interpreter (read-only).
pub struct TensorMemory<'a>(pub &'a Tensor);

impl Memory for TensorMemory<'_> {
    fn param(&self, p: &ParamRef) -> Result<i64, String> {
        let t = self.0;
        match &p.slot {
            ParamSlot::Dim(d) => t
                .dims
                .get(*d)
                .map(|&n| n as i64)
                .ok_or_else(|| format!("no dimension {d}")),
            ParamSlot::Level(k, name) => t.levels.get(*k).ok_or("no such level")?.param(name),
            ParamSlot::Target(t) => Err(format!("{} is the target's, not a tensor's", t.c_name())),
        }
    }
    fn load(&self, a: &ArrayRef, i: i64) -> Result<Value, String> {
        let t = self.0;
        let idx =
            usize::try_from(i).map_err(|_| format!("negative index {i} into {}", a.c_name()))?;
        match &a.slot {
            Slot::Vals => t.vals.get(idx).map(|&v| Value::F(v)),
            Slot::Level(k, name) => t
                .levels
                .get(*k)
                .and_then(|l| l.arrays.get(name))
                .and_then(|v| v.get(idx))
                .map(|&v| Value::I(v as i64)),
            Slot::Scratch(..) => None,
        }
        .ok_or_else(|| format!("index {i} out of bounds of {}", a.c_name()))
    }
    fn store(&mut self, a: &ArrayRef, _i: i64, _v: Value) -> Result<(), String> {
        Err(format!("unpacking does not write ({})", a.c_name()))
    }
    fn reserve(&mut self, _a: &ArrayRef, _len: i64) -> Result<(), String> {
        Ok(())
    }
    fn reserve_ahead(&mut self, _a: &ArrayRef, _len: i64) -> Result<(), String> {
        Ok(())
    }
}

/// One level's iteration code, built once with symbolic inputs and run for
/// every parent.
struct LevelCode {
    parent: VarId,
    ancestors: Vec<VarId>,
    cursor: VarId,
    value_iteration: bool,
    bounds: (Block, Expr, Expr),
    access: (Block, Expr, Expr),
}

fn level_code(t: &Tensor, k: usize, e: &mut Emitter) -> LevelCode {
    let c = LevelCtx::new(&t.name, k);
    let parent = e.fresh(&format!("p{k}"), Ty::I64);
    let ancestors: Vec<VarId> = (0..k).map(|a| e.fresh(&format!("i{a}"), Ty::I64)).collect();
    let cursor = e.fresh(&format!("c{k}"), Ty::I64);
    let anc: Vec<Expr> = ancestors.iter().map(|&v| Expr::Var(v)).collect();
    let level = &t.format.levels[k];
    match level.iteration() {
        Iteration::CoordValue(it) => {
            let (lo, hi) = it.coord_bounds(&c, e, &anc);
            let bounds = (e.take(), lo, hi);
            let mut coords = anc.clone();
            coords.push(Expr::Var(cursor));
            let (p, found) = it.coord_access(&c, e, Expr::Var(parent), &coords);
            LevelCode {
                parent,
                ancestors,
                cursor,
                value_iteration: true,
                bounds,
                access: (e.take(), p, found),
            }
        }
        Iteration::CoordPosition(it) => {
            let (lo, hi) = it.pos_bounds(&c, e, Expr::Var(parent));
            let bounds = (e.take(), lo, hi);
            let (i, found) = it.pos_access(&c, e, Expr::Var(cursor), &anc);
            LevelCode {
                parent,
                ancestors,
                cursor,
                value_iteration: false,
                bounds,
                access: (e.take(), i, found),
            }
        }
    }
}

/// Every stored (coordinate, value), in storage order, padding excluded.
pub fn unpack(t: &Tensor) -> Result<CooTensor, StorageError> {
    let mut e = Emitter::new();
    let codes: Vec<LevelCode> = (0..t.format.levels.len())
        .map(|k| level_code(t, k, &mut e))
        .collect();
    let mut mem = TensorMemory(t);
    let mut interp = Interp::new(e.vars.len(), &mut mem);
    let mut out = CooTensor::new(t.dims.clone());
    let mut coords = Vec::with_capacity(codes.len());
    walk(t, &codes, 0, 0, &mut coords, &mut interp, &mut out).map_err(|reason| {
        StorageError::Pack {
            tensor: t.name.clone(),
            reason,
        }
    })?;
    Ok(out)
}

fn walk(
    t: &Tensor,
    codes: &[LevelCode],
    k: usize,
    parent: i64,
    coords: &mut Vec<i64>,
    it: &mut Interp,
    out: &mut CooTensor,
) -> Result<(), String> {
    if k == codes.len() {
        let v = t
            .vals
            .get(parent as usize)
            .copied()
            .ok_or("value position out of bounds")?;
        if let Some(c) = t.format.map.to_logical(coords, &t.dims) {
            out.push(&c, v);
        }
        return Ok(());
    }
    let code = &codes[k];
    let set_inputs = |it: &mut Interp, coords: &[i64]| {
        it.vars[code.parent as usize] = Value::I(parent);
        for (a, &v) in code.ancestors.iter().zip(coords) {
            it.vars[*a as usize] = Value::I(v);
        }
    };
    set_inputs(it, coords);
    it.run(&code.bounds.0)?;
    let (lo, hi) = (
        it.eval(&code.bounds.1)?.int()?,
        it.eval(&code.bounds.2)?.int()?,
    );
    for cursor in lo..hi {
        set_inputs(it, coords);
        it.vars[code.cursor as usize] = Value::I(cursor);
        it.run(&code.access.0)?;
        let (x, found) = (
            it.eval(&code.access.1)?.int()?,
            it.eval(&code.access.2)?.bool()?,
        );
        if !found {
            continue;
        }
        let (pos, coord) = if code.value_iteration {
            (x, cursor)
        } else {
            (cursor, x)
        };
        coords.push(coord);
        walk(t, codes, k + 1, pos, coords, it, out)?;
        coords.pop();
    }
    Ok(())
}
