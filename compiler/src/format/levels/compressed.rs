//! Compressed level: each parent's coordinates in a segment of `crd`, the
//! segment bounds in `pos`. Capabilities: coordinate position iteration,
//! append. Full, ordered and unique are configurable; `aos` makes it the
//! owner of an interleaved coordinate array shared with the singleton levels
//! below it (AoS COO).

use super::crd_layout::CrdLayout;
use crate::format::level::*;
use crate::ir::{Emitter, Expr};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compressed {
    pub full: bool,
    pub ordered: bool,
    pub unique: bool,
    pub layout: CrdLayout,
}

impl Default for Compressed {
    fn default() -> Self {
        Compressed { full: false, ordered: true, unique: true, layout: CrdLayout::Own }
    }
}

impl LevelFormat for Compressed {
    fn name(&self) -> &'static str {
        "compressed"
    }
    fn spec(&self) -> String {
        let flags: Vec<&str> = [
            (self.full, "full"),
            (!self.unique, "nonunique"),
            (!self.ordered, "unordered"),
            (self.layout.is_aos(), "aos"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, n)| *n)
        .collect();
        if flags.is_empty() {
            "compressed".into()
        } else {
            format!("compressed({})", flags.join(","))
        }
    }
    fn properties(&self) -> Properties {
        Properties { full: self.full, ordered: self.ordered, unique: self.unique, branchless: false, compact: true }
    }
    fn iteration(&self) -> Iteration<'_> {
        Iteration::CoordPosition(self)
    }
    fn assembly(&self) -> Assembly<'_> {
        if self.layout.is_aos() {
            Assembly::None
        } else {
            Assembly::Append(self)
        }
    }
    fn arrays(&self) -> Vec<&'static str> {
        vec!["pos", "crd"]
    }
    fn pack(&self, input: &PackInput) -> Result<PackOutput, String> {
        let mut pos = vec![0i32; input.parent_size + 1];
        let mut columns: Vec<Vec<i32>> = vec![Vec::new(); self.stride()];
        let mut children = Vec::new();
        for seg in input.parents {
            let groups = input.groups(seg, self.unique);
            for (_coord, lo, hi) in groups {
                children.push(Segment { pos: columns[0].len(), lo, hi });
                for (f, col) in columns.iter_mut().enumerate() {
                    col.push(input.coord(lo, input.level + f) as i32);
                }
            }
            let count = checks::fits_i32(columns[0].len(), "number of positions")?;
            pos[seg.pos + 1] = count;
        }
        // Parents without entries keep the running count.
        for p in 1..pos.len() {
            pos[p] = pos[p].max(pos[p - 1]);
        }
        let size = columns[0].len();
        let crd = if self.layout.is_aos() { CrdLayout::interleave(&columns) } else { columns.swap_remove(0) };
        Ok(PackOutput { children, size, arrays: vec![("pos", pos), ("crd", crd)], params: Vec::new() })
    }
    fn validate(&self, input: &ValidateInput) -> Result<usize, String> {
        let pos = input.own().array("pos")?;
        let positions = self.layout.positions(input.storage, input.level)?;
        let size = checks::pos_array(pos, input.parent_size, positions)?;
        let crd = input.own().array("crd")?;
        if let CrdLayout::Aos { stride, .. } = self.layout {
            if crd.len() % stride != 0 {
                return Err(format!("interleaved crd length {} is not a multiple of {stride}", crd.len()));
            }
        }
        let mine: Vec<i32> = (0..size).map(|p| self.layout.read(input.storage, input.level, p)).collect::<Result<_, _>>()?;
        checks::coords_in_range(&mine, input.extent())?;
        for w in pos.windows(2) {
            checks::segment_order(&mine, w[0] as usize, w[1] as usize, self.ordered, self.unique)?;
        }
        if self.full {
            for (p, w) in pos.windows(2).enumerate() {
                if (w[1] - w[0]) as usize != input.extent() {
                    return Err(format!("parent {p} has {} coordinates: level claims full (every coordinate)", w[1] - w[0]));
                }
            }
        }
        Ok(size)
    }
}


impl Compressed {
    fn stride(&self) -> usize {
        match self.layout {
            CrdLayout::Aos { stride, .. } => stride,
            CrdLayout::Own => 1,
        }
    }
}

impl CoordPositionIteration for Compressed {
    fn pos_bounds(&self, c: &LevelCtx, _e: &mut Emitter, parent_pos: Expr) -> (Expr, Expr) {
        let pos = c.array("pos");
        (Expr::load(pos.clone(), parent_pos.clone()), Expr::load(pos, Expr::add(parent_pos, Expr::Int(1))))
    }
    fn pos_access(&self, c: &LevelCtx, _e: &mut Emitter, pos: Expr, _ancestors: &[Expr]) -> (Expr, Expr) {
        (self.layout.load(c, pos), Expr::Bool(true))
    }
}

impl Append for Compressed {
    fn append_init(&self, c: &LevelCtx, e: &mut Emitter, parent_size: Expr, _size: Expr) {
        let n = Expr::add(parent_size, Expr::Int(1));
        e.reserve(c.array("pos"), n.clone());
        e.for_("pinit", Expr::Int(0), n, |e, p| e.store(c.array("pos"), p, Expr::Int(0)));
    }
    fn append_coord(&self, c: &LevelCtx, e: &mut Emitter, pos: Expr, coord: Expr) {
        e.reserve(c.array("crd"), Expr::add(pos.clone(), Expr::Int(1)));
        e.store(c.array("crd"), pos, coord);
    }
    fn append_edges(&self, c: &LevelCtx, e: &mut Emitter, parent_pos: Expr, pbegin: Expr, pend: Expr) {
        // Parents may themselves be appended as we go (DCSR, CSF results),
        // so `pos` grows with them.
        e.reserve(c.array("pos"), Expr::add(parent_pos.clone(), Expr::Int(2)));
        e.store(c.array("pos"), Expr::add(parent_pos, Expr::Int(1)), Expr::sub(pend, pbegin));
    }
    fn append_finalize(&self, c: &LevelCtx, e: &mut Emitter, parent_size: Expr, _size: Expr) {
        let pos = c.array("pos");
        let cumsum = e.let_var("cumsum", Expr::load(pos.clone(), Expr::Int(0)));
        e.for_("pfin", Expr::Int(1), Expr::add(parent_size, Expr::Int(1)), |e, p| {
            e.set(&cumsum, Expr::add(cumsum.clone(), Expr::load(pos.clone(), p.clone())));
            e.store(pos.clone(), p, cumsum.clone());
        });
    }
}
