//! The level-format interface: the contract of the paper's Tables 1-3.
//!
//! A level format declares its properties and hands out its capabilities as
//! trait objects. A capability is a separate trait with the paper's level
//! functions, so a level can only claim a capability it implements: there are
//! no "undefined" defaults to forget. Level functions build loop-IR through an
//! [`Emitter`] and return IR expressions; the code generator asks only for
//! capabilities and properties and never for a concrete level type.

use super::columns::{ColumnPack, ColumnUnpack};
use crate::ir::{ArrayRef, Emitter, Expr, ParamRef};
use std::collections::BTreeMap;
use std::fmt;

/// The five level properties (section 3.3 of the paper).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Properties {
    pub full: bool,
    pub ordered: bool,
    pub unique: bool,
    pub branchless: bool,
    pub compact: bool,
}

impl fmt::Display for Properties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (self.full, "full"),
            (self.ordered, "ordered"),
            (self.unique, "unique"),
            (self.branchless, "branchless"),
            (self.compact, "compact"),
        ];
        let on: Vec<&str> = names.iter().filter(|(b, _)| *b).map(|(_, n)| *n).collect();
        f.write_str(&on.join(", "))
    }
}

/// Where a level function's code lives: which tensor, which level. Gives the
/// symbolic names of the arrays and parameters the level owns.
#[derive(Clone, Copy, Debug)]
pub struct LevelCtx<'a> {
    pub tensor: &'a str,
    pub level: usize,
}

impl<'a> LevelCtx<'a> {
    pub fn new(tensor: &'a str, level: usize) -> Self {
        LevelCtx { tensor, level }
    }
    /// An index array owned by this level.
    pub fn array(&self, name: &'static str) -> ArrayRef {
        ArrayRef::level(self.tensor, self.level, name)
    }
    /// An index array owned by another level of the same tensor (levels may
    /// share storage, as DIA's offset level reads the range level's offsets).
    pub fn array_of(&self, level: usize, name: &'static str) -> ArrayRef {
        ArrayRef::level(self.tensor, level, name)
    }
    pub fn param(&self, name: &'static str) -> Expr {
        Expr::Param(ParamRef::level(self.tensor, self.level, name))
    }
    pub fn param_of(&self, level: usize, name: &'static str) -> Expr {
        Expr::Param(ParamRef::level(self.tensor, level, name))
    }
    pub fn load(&self, name: &'static str, i: Expr) -> Expr {
        Expr::load(self.array(name), i)
    }
}

/// Coordinate value iteration: `coord_bounds` and `coord_access`.
pub trait CoordValueIteration {
    /// Bounds `[begin, end)` of the coordinates that may have the given
    /// ancestors (`i_1 .. i_{k-1}`).
    fn coord_bounds(&self, c: &LevelCtx, e: &mut Emitter, ancestors: &[Expr]) -> (Expr, Expr);
    /// Position of coordinate `coords[k-1]` under `parent_pos`, and whether
    /// it exists. `coords` is `i_1 .. i_k`.
    fn coord_access(
        &self,
        c: &LevelCtx,
        e: &mut Emitter,
        parent_pos: Expr,
        coords: &[Expr],
    ) -> (Expr, Expr);
}

/// Coordinate position iteration: `pos_bounds` and `pos_access`.
pub trait CoordPositionIteration {
    /// Bounds `[begin, end)` of the positions that may be children of
    /// `parent_pos`.
    fn pos_bounds(&self, c: &LevelCtx, e: &mut Emitter, parent_pos: Expr) -> (Expr, Expr);
    /// Coordinate stored at `pos` and whether the position holds one.
    fn pos_access(
        &self,
        c: &LevelCtx,
        e: &mut Emitter,
        pos: Expr,
        ancestors: &[Expr],
    ) -> (Expr, Expr);
}

/// Random access: `locate`.
pub trait Locate {
    /// Position of `coords[k-1]` among the children of `parent_pos`, and
    /// whether it was found. When not found, an insert-capable level returns
    /// the position where it may be inserted.
    fn locate(
        &self,
        c: &LevelCtx,
        e: &mut Emitter,
        parent_pos: Expr,
        coords: &[Expr],
    ) -> (Expr, Expr);
}

/// The insert capability (requires locate).
pub trait Insert {
    fn size(&self, c: &LevelCtx, e: &mut Emitter, parent_size: Expr) -> Expr;
    fn insert_init(&self, c: &LevelCtx, e: &mut Emitter, parent_size: Expr, size: Expr);
    fn insert_coord(&self, c: &LevelCtx, e: &mut Emitter, pos: Expr, coord: Expr);
    fn insert_finalize(&self, c: &LevelCtx, e: &mut Emitter, parent_size: Expr, size: Expr);
}

/// How the parents of an appending level's children come, as its
/// `Append` functions are told.
#[derive(Clone, Debug)]
pub enum Parents {
    /// Appended as they come (the rows of a DCSR or CSF result), each
    /// closed right after it is appended: as many as there are when the
    /// level is finalised, closed in order, none skipped.
    Appended,
    /// As many as `append_init` was told (the root, a hashed level above),
    /// each closed at most once, in any order.
    Fixed,
    /// As many as `append_init` was told and closed in increasing order,
    /// each at most once (below dense levels): `last` is a variable the
    /// caller keeps, the position of the parent last closed (-1 before
    /// the first).
    InOrder { last: Expr },
}

/// The append capability: coordinates arrive in order, each parent's
/// children contiguously.
pub trait Append {
    fn append_init(&self, c: &LevelCtx, e: &mut Emitter, parent_size: Expr, parents: &Parents);
    fn append_coord(&self, c: &LevelCtx, e: &mut Emitter, pos: Expr, coord: Expr);
    /// Close parent `parent_pos`'s `children` (positions `begin..end`).
    fn append_edges(
        &self,
        c: &LevelCtx,
        e: &mut Emitter,
        parent_pos: Expr,
        children: (Expr, Expr),
        parents: &Parents,
    );
    /// `size`: the level's positions in all.
    fn append_finalize(
        &self,
        c: &LevelCtx,
        e: &mut Emitter,
        parent_size: Expr,
        size: Expr,
        parents: &Parents,
    );
    /// Whether results with this level can be computed by threads over
    /// shares of the parent positions and stitched (`ir::Parallel::Stitch`).
    fn stitch_shares(&self) -> Option<&dyn StitchShares> {
        None
    }
}

/// Combining an appended level of results that threads computed over
/// disjoint shares of the parent positions, each share's positions after
/// the previous share's, each thread starting from an empty result.
pub trait StitchShares {
    /// The first share's storage (reused for the whole) and the other
    /// shares', in share order, each finalised, over `parents` parent
    /// positions. Returns the combined storage and, per share, how many
    /// positions it holds (its values are concatenated in that order).
    fn stitch(
        &self,
        first: LevelStorage,
        rest: &[&LevelStorage],
        parents: usize,
    ) -> Result<(LevelStorage, Vec<usize>), String>;
}

/// Which iteration capability a level offers (every level offers one).
pub enum Iteration<'a> {
    CoordValue(&'a dyn CoordValueIteration),
    CoordPosition(&'a dyn CoordPositionIteration),
}

/// Which assembly capability a level offers, if any.
pub enum Assembly<'a> {
    None,
    Insert(&'a dyn Insert),
    Append(&'a dyn Append),
}

/// Where a level stands in a run of levels sharing one interleaved
/// coordinate array (AoS COO): the run's first level owns the array, the
/// levels after it are fields of its records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AosRole {
    Owner,
    Field,
}

/// Where a level keeps the coordinate of each position `p`: in `array` of
/// level `owner`, at `p * stride + field`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoredCoordinates {
    pub owner: usize,
    pub array: &'static str,
    pub stride: usize,
    pub field: usize,
}

/// A run of entries `[lo, hi)` (indices into the sorted entry list) that
/// hang under position `pos` of a level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub pos: usize,
    pub lo: usize,
    pub hi: usize,
}

/// What a level sees when it is packed: the sorted, deduplicated entries
/// with their level coordinates, and the positions of its parent level.
pub struct PackInput<'a> {
    pub level: usize,
    /// Level coordinates, `nlevels` per entry, sorted lexicographically.
    pub coords: &'a [i64],
    pub nlevels: usize,
    /// Extent of each level's coordinates.
    pub extents: &'a [usize],
    /// Parent positions that own entries, in position order.
    pub parents: &'a [Segment],
    /// Number of positions of the parent level (1 for the root).
    pub parent_size: usize,
    /// How many levels right after this one are branchless: a non-unique
    /// level makes one position per distinct coordinate chain through them.
    pub chain_len: usize,
    /// Bytes of memory a level may allocate (what the machine has free).
    pub memory: u128,
}

impl<'a> PackInput<'a> {
    /// Refuse an array of `elements` items of `elem_bytes` each that cannot
    /// fit in memory, before allocating it (a size the user chose, such as
    /// a hashed level's `W`, must be an error, not an abort).
    pub fn fits(&self, what: &str, elements: u128, elem_bytes: u128) -> Result<(), String> {
        let bytes = elements.saturating_mul(elem_bytes);
        if bytes > self.memory {
            return Err(format!(
                "{what} needs {bytes} bytes, more than the {} bytes of memory available",
                self.memory
            ));
        }
        Ok(())
    }
    pub fn coord(&self, entry: usize, level: usize) -> i64 {
        self.coords[entry * self.nlevels + level]
    }
    pub fn extent(&self) -> usize {
        self.extents[self.level]
    }
    /// Split a parent's entries into child groups: by this level's coordinate
    /// when `unique`, else by the coordinate chain through the following
    /// branchless levels. Returns `(coord, lo, hi)` per group.
    pub fn groups(&self, seg: &Segment, unique: bool) -> Vec<(i64, usize, usize)> {
        let key = if unique { 1 } else { 1 + self.chain_len };
        let k = self.level;
        let same = |a: usize, b: usize| {
            (k..(k + key).min(self.nlevels)).all(|l| self.coord(a, l) == self.coord(b, l))
        };
        let mut out = Vec::new();
        let mut lo = seg.lo;
        while lo < seg.hi {
            let mut hi = lo + 1;
            while hi < seg.hi && same(lo, hi) {
                hi += 1;
            }
            out.push((self.coord(lo, k), lo, hi));
            lo = hi;
        }
        out
    }
}

/// What packing a level produces.
#[derive(Debug, Default)]
pub struct PackOutput {
    /// Positions of this level that own entries, in position order.
    pub children: Vec<Segment>,
    /// Number of positions of this level.
    pub size: usize,
    pub arrays: Vec<(&'static str, Vec<i32>)>,
    pub params: Vec<(&'static str, i64)>,
}

/// The runtime storage of one level: its index arrays and size parameters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LevelStorage {
    pub arrays: BTreeMap<&'static str, Vec<i32>>,
    pub params: BTreeMap<&'static str, i64>,
}

impl LevelStorage {
    pub fn array(&self, name: &str) -> Result<&[i32], String> {
        self.arrays
            .get(name)
            .map(|v| v.as_slice())
            .ok_or_else(|| format!("missing array `{name}`"))
    }
    pub fn param(&self, name: &str) -> Result<i64, String> {
        self.params
            .get(name)
            .copied()
            .ok_or_else(|| format!("missing parameter `{name}`"))
    }
}

/// What a level sees when it is validated.
pub struct ValidateInput<'a> {
    pub level: usize,
    /// Storage of every level of the tensor (levels may share arrays).
    pub storage: &'a [LevelStorage],
    pub extents: &'a [usize],
    pub parent_size: usize,
}

impl<'a> ValidateInput<'a> {
    pub fn own(&self) -> &LevelStorage {
        &self.storage[self.level]
    }
    pub fn extent(&self) -> usize {
        self.extents[self.level]
    }
}

/// A level format: properties, capabilities, storage.
pub trait LevelFormat: fmt::Debug + Send + Sync {
    /// The level type's name as written in level lists (`compressed`).
    fn name(&self) -> &'static str;
    /// The level as written in a level list, with its configuration
    /// (`compressed(nonunique)`); parses back to an equal level.
    fn spec(&self) -> String;
    fn properties(&self) -> Properties;
    fn iteration(&self) -> Iteration<'_>;
    fn locate(&self) -> Option<&dyn Locate> {
        None
    }
    fn assembly(&self) -> Assembly<'_> {
        Assembly::None
    }
    /// Whether this level has a position for every coordinate in its span,
    /// whether the tensor has an entry there or not (dense, range). Under a
    /// level that is not full, the values stored for coordinates without
    /// an entry are fill (a BCSR block's zeros, a DIA diagonal's rows with
    /// no entry), which must not take part in a product: `0 * inf` would
    /// make a NaN the tensor does not hold.
    fn stores_fill(&self) -> bool {
        false
    }
    /// Whether this level alone is a dense level: full, with a position for
    /// every coordinate of its span and no index arrays to build (a tensor
    /// of such levels holds every coordinate, so generated data for it has
    /// density 1).
    fn is_dense(&self) -> bool {
        self.properties().full && self.stores_fill() && self.arrays().is_empty()
    }
    /// Where this level may stand in a format: `Err(reason)` when level `k`
    /// of `levels` breaks a rule of its own (a level that reads another
    /// level's arrays needs that level where it looks).
    fn structure_rule(
        &self,
        k: usize,
        levels: &[std::sync::Arc<dyn LevelFormat>],
    ) -> Result<(), String> {
        let _ = (k, levels);
        Ok(())
    }
    /// A cheap upper estimate of this level's positions under `parent_size`
    /// parent positions, for a level of `extent` coordinates holding `nnz`
    /// entries: used to refuse absurd expansions before packing allocates.
    /// A level that stores every coordinate of its span has `extent`
    /// positions per parent; any other has at most one per entry (and
    /// per parent, for levels that keep an empty slot per parent).
    fn positions_bound(&self, parent_size: u128, extent: usize, nnz: usize) -> u128 {
        if self.stores_fill() {
            parent_size.saturating_mul(extent as u128)
        } else {
            parent_size.saturating_add(1).max(nnz as u128)
        }
    }
    /// The role this level can take in an interleaved (AoS) coordinate
    /// array, when its level-list entry carries the `aos` flag.
    fn aos_role(&self) -> Option<AosRole> {
        None
    }
    /// Names of the index arrays this level owns.
    fn arrays(&self) -> Vec<&'static str>;
    /// The most elements `array` (one of `arrays`) may hold in a result,
    /// where the level's own storage bounds it more tightly than memory:
    /// a level that records its positions in 32-bit index arrays has at
    /// most `i32::MAX` of them. The runtime refuses to grow the array past
    /// it, as it refuses memory the machine lacks, where the positions
    /// would otherwise wrap. `None`: no bound of the level's own.
    fn array_limit(&self, array: &str) -> Option<u64> {
        let _ = array;
        None
    }
    /// The array of `arrays` holding one stored coordinate per position,
    /// in position order, if the level has one (sampled on the data a
    /// kernel is made for: `Function::lines_of_their_own`).
    fn coordinate_array(&self) -> Option<&'static str> {
        None
    }
    /// Where this level keeps the coordinate of each position, if it
    /// stores one: its `coordinate_array`, or a field of the records of an
    /// interleaved (AoS) array another level owns (sampled on the data a
    /// kernel is made for, as the loops gathering at them read them).
    fn stored_coordinates(&self, level: usize) -> Option<StoredCoordinates> {
        self.coordinate_array().map(|array| StoredCoordinates {
            owner: level,
            array,
            stride: 1,
            field: 0,
        })
    }
    /// Whether every coordinate iterating this level yields is one an
    /// entry was stored with, never one enumerated over the level's extent:
    /// under a blocked dimension (`i = ib * b + ii`) such a level never
    /// yields a coordinate in the padding past the tensor's edge, so the
    /// code generator needs no test of the combined coordinate there.
    fn stores_coordinates(&self) -> bool {
        self.coordinate_array().is_some()
    }
    /// Parameters an output level of this format needs before assembly,
    /// given its coordinate extent and an estimate of its size.
    fn output_params(&self, extent: usize, size_hint: usize) -> Vec<(&'static str, i64)> {
        let _ = (extent, size_hint);
        Vec::new()
    }
    /// Positions per parent of an output level set up with
    /// `output_params(extent, size_hint)`, for levels assembled by insert:
    /// what a result made only of insert levels allocates.
    fn output_width(&self, extent: usize, size_hint: usize) -> u128 {
        let _ = size_hint;
        extent as u128
    }
    /// Build this level's storage from its parent's positions.
    fn pack(&self, input: &PackInput) -> Result<PackOutput, String>;
    /// Packing from sorted entry columns in one linear pass
    /// (`format::columns`); a level without it is packed through `pack`.
    fn column_pack(&self) -> Option<&dyn ColumnPack> {
        None
    }
    /// Listing the children of parent positions in native code; a level
    /// without it is unpacked by running its level functions.
    fn column_unpack(&self) -> Option<&dyn ColumnUnpack> {
        None
    }
    /// Check every invariant the level's properties and capabilities promise;
    /// return the level's size (number of positions).
    fn validate(&self, input: &ValidateInput) -> Result<usize, String>;
}

/// Shared checks used by several levels' `validate`.
pub mod checks {
    /// `pos` must have `parent_size + 1` entries, start at 0, never decrease
    /// and end within `crd_len`.
    pub fn pos_array(pos: &[i32], parent_size: usize, crd_len: usize) -> Result<usize, String> {
        if pos.len() != parent_size + 1 {
            return Err(format!(
                "pos has {} entries, expected {}",
                pos.len(),
                parent_size + 1
            ));
        }
        if pos[0] != 0 {
            return Err(format!("pos[0] is {}, expected 0", pos[0]));
        }
        for p in 1..pos.len() {
            if pos[p] < pos[p - 1] {
                return Err(format!(
                    "pos decreases at position {p} ({} after {})",
                    pos[p],
                    pos[p - 1]
                ));
            }
        }
        let end = pos[parent_size] as usize;
        if end > crd_len {
            return Err(format!(
                "pos[{parent_size}] = {end} exceeds crd length {crd_len}"
            ));
        }
        Ok(end)
    }

    /// Every coordinate of `crd[lo..hi]` in `[0, extent)`.
    pub fn coords_in_range(crd: &[i32], extent: usize) -> Result<(), String> {
        for (p, &c) in crd.iter().enumerate() {
            if c < 0 || c as usize >= extent {
                return Err(format!("crd[{p}] = {c} out of range 0..{extent}"));
            }
        }
        Ok(())
    }

    /// Coordinates within one segment increase (ordered) or do not repeat
    /// (unique), as claimed.
    pub fn segment_order(
        crd: &[i32],
        lo: usize,
        hi: usize,
        ordered: bool,
        unique: bool,
    ) -> Result<(), String> {
        for p in lo + 1..hi {
            let (a, b) = (crd[p - 1], crd[p]);
            if ordered && unique && a >= b {
                return Err(format!(
                    "crd[{p}] = {b} after {a}: level claims ordered and unique"
                ));
            }
            if ordered && a > b {
                return Err(format!("crd[{p}] = {b} after {a}: level claims ordered"));
            }
        }
        if unique && !ordered && hi - lo > 1 {
            let mut seen: Vec<i32> = crd[lo..hi].to_vec();
            seen.sort_unstable();
            if let Some(w) = seen.windows(2).find(|w| w[0] == w[1]) {
                return Err(format!(
                    "coordinate {} repeats between positions {lo} and {hi}: level claims unique",
                    w[0]
                ));
            }
        }
        Ok(())
    }

    pub fn fits_i32(n: usize, what: &str) -> Result<i32, String> {
        i32::try_from(n).map_err(|_| format!("{what} {n} does not fit 32-bit index arrays"))
    }
}
