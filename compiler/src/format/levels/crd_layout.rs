//! Where a coordinate-storing level keeps its `crd` array: its own (SoA), or
//! interleaved with the levels below it in one array (AoS COO), where field
//! `field` of entry `p` sits at `crd[p * stride + field]` of level `owner`.

use crate::format::level::LevelCtx;
use crate::ir::{ArrayRef, Expr};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrdLayout {
    Own,
    /// Interleaved: `owner` is the level holding the array, `stride` the
    /// number of interleaved levels, `field` this level's slot in a record.
    Aos { owner: usize, stride: usize, field: usize },
}

impl CrdLayout {
    pub fn is_aos(&self) -> bool {
        matches!(self, CrdLayout::Aos { .. })
    }
    pub fn array(&self, c: &LevelCtx) -> ArrayRef {
        match self {
            CrdLayout::Own => c.array("crd"),
            CrdLayout::Aos { owner, .. } => c.array_of(*owner, "crd"),
        }
    }
    pub fn index(&self, pos: Expr) -> Expr {
        match self {
            CrdLayout::Own => pos,
            CrdLayout::Aos { stride, field, .. } => Expr::add(Expr::mul(pos, Expr::Int(*stride as i64)), Expr::Int(*field as i64)),
        }
    }
    pub fn load(&self, c: &LevelCtx, pos: Expr) -> Expr {
        Expr::load(self.array(c), self.index(pos))
    }
    /// Whether this level owns a `crd` array (AoS levels other than the
    /// owner read the owner's).
    pub fn owns_crd(&self, level: usize) -> bool {
        match self {
            CrdLayout::Own => true,
            CrdLayout::Aos { owner, .. } => *owner == level,
        }
    }
    /// Read coordinate of position `p` from the storage of all levels.
    pub fn read(&self, storage: &[crate::format::level::LevelStorage], level: usize, p: usize) -> Result<i32, String> {
        let (owner, idx) = match self {
            CrdLayout::Own => (level, p),
            CrdLayout::Aos { owner, stride, field } => (*owner, p * stride + field),
        };
        let crd = storage[owner].array("crd")?;
        crd.get(idx).copied().ok_or_else(|| format!("crd index {idx} beyond its length {}", crd.len()))
    }
    /// Length of the crd array in positions of this level.
    pub fn positions(&self, storage: &[crate::format::level::LevelStorage], level: usize) -> Result<usize, String> {
        match self {
            CrdLayout::Own => Ok(storage[level].array("crd")?.len()),
            CrdLayout::Aos { owner, stride, .. } => Ok(storage[*owner].array("crd")?.len() / stride),
        }
    }
    /// Build the interleaved crd array for an AoS owner: `stride` coordinates
    /// per position taken from consecutive levels.
    pub fn interleave(columns: &[Vec<i32>]) -> Vec<i32> {
        let n = columns.first().map_or(0, |c| c.len());
        let mut out = Vec::with_capacity(n * columns.len());
        for p in 0..n {
            for col in columns {
                out.push(col[p]);
            }
        }
        out
    }
    pub fn spec_flag(&self) -> Option<&'static str> {
        self.is_aos().then_some("aos")
    }
}
