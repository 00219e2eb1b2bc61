//! Where a coordinate-storing level keeps its `crd` array: its own (SoA), or
//! interleaved with the levels below it in one array (AoS COO), where field
//! `field` of entry `p` sits at `crd[p * stride + field]` of level `owner`.

use crate::format::level::{LevelCtx, StoredCoordinates};
use crate::ir::{ArrayRef, Expr};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrdLayout {
    Own,
    /// Interleaved: `owner` is the level holding the array, `stride` the
    /// number of interleaved levels, `field` this level's slot in a record.
    Aos {
        owner: usize,
        stride: usize,
        field: usize,
    },
}

/// A level's coordinates as stored (`CrdLayout::reader`).
pub struct CrdReader<'s> {
    crd: &'s [i32],
    stride: usize,
    field: usize,
}

impl CrdReader<'_> {
    /// The coordinate of position `p`.
    pub fn at(&self, p: usize) -> Result<i32, String> {
        let idx = p * self.stride + self.field;
        self.crd
            .get(idx)
            .copied()
            .ok_or_else(|| format!("crd index {idx} beyond its length {}", self.crd.len()))
    }
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
            CrdLayout::Aos { stride, field, .. } => Expr::add(
                Expr::mul(pos, Expr::Int(*stride as i64)),
                Expr::Int(*field as i64),
            ),
        }
    }
    pub fn load(&self, c: &LevelCtx, pos: Expr) -> Expr {
        Expr::load(self.array(c), self.index(pos))
    }
    /// Where level `level` of this layout keeps its coordinates.
    pub fn stored(&self, level: usize) -> StoredCoordinates {
        let (owner, stride, field) = match *self {
            CrdLayout::Own => (level, 1, 0),
            CrdLayout::Aos {
                owner,
                stride,
                field,
            } => (owner, stride, field),
        };
        StoredCoordinates {
            owner,
            array: "crd",
            stride,
            field,
        }
    }
    /// Whether this level owns a `crd` array (AoS levels other than the
    /// owner read the owner's).
    pub fn owns_crd(&self, level: usize) -> bool {
        match self {
            CrdLayout::Own => true,
            CrdLayout::Aos { owner, .. } => *owner == level,
        }
    }
    /// The coordinates of positions `0..n`: borrowed from the level's own
    /// array, gathered once from an interleaved one (the array is looked
    /// up once, not per position).
    pub fn column<'s>(
        &self,
        storage: &'s [crate::format::level::LevelStorage],
        level: usize,
        n: usize,
    ) -> Result<std::borrow::Cow<'s, [i32]>, String> {
        let reader = self.reader(storage, level)?;
        match self {
            CrdLayout::Own => reader
                .crd
                .get(..n)
                .map(std::borrow::Cow::Borrowed)
                .ok_or_else(|| format!("crd holds {} coordinates, {n} needed", reader.crd.len())),
            CrdLayout::Aos { .. } => (0..n)
                .map(|p| reader.at(p))
                .collect::<Result<Vec<i32>, String>>()
                .map(std::borrow::Cow::Owned),
        }
    }
    /// Reads the coordinate of any position, the array looked up once.
    pub fn reader<'s>(
        &self,
        storage: &'s [crate::format::level::LevelStorage],
        level: usize,
    ) -> Result<CrdReader<'s>, String> {
        let (owner, stride, field) = match self {
            CrdLayout::Own => (level, 1, 0),
            CrdLayout::Aos {
                owner,
                stride,
                field,
            } => (*owner, *stride, *field),
        };
        Ok(CrdReader {
            crd: storage[owner].array("crd")?,
            stride,
            field,
        })
    }
    /// Length of the crd array in positions of this level.
    pub fn positions(
        &self,
        storage: &[crate::format::level::LevelStorage],
        level: usize,
    ) -> Result<usize, String> {
        match self {
            CrdLayout::Own => Ok(storage[level].array("crd")?.len()),
            CrdLayout::Aos { owner, stride, .. } => {
                Ok(storage[*owner].array("crd")?.len() / stride)
            }
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
