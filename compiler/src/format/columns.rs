//! Column capabilities: moving entries between a level's storage and flat
//! coordinate columns in native code, one linear pass per level.
//!
//! They are the fast path of packing, unpacking and run-time conversion
//! (`storage::assemble`, `storage::entries`): the level functions run in the
//! interpreter and the segment-based `LevelFormat::pack` stay the reference
//! they are tested against. A level that offers neither capability is still
//! packed and unpacked, through that reference path.

use super::level::LevelStorage;
use std::borrow::Cow;

/// Packing from entry columns: entries sorted lexicographically by level
/// coordinates and unique, each level seeing every entry once, in order.
pub trait ColumnPack {
    /// Build this level's storage. `placement` says where the parent level
    /// put each entry on entry, and must say where this level puts it on
    /// return, positions never decreasing in entry order. Positions fit
    /// `i32`, as index arrays hold them: the packer checks the sizes of the
    /// built-in levels beforehand; another level refuses what would not fit.
    fn pack_columns(
        &self,
        input: ColumnPackInput<'_>,
        placement: &mut Placement,
    ) -> Result<ColumnPackOutput, String>;

    /// For a level that stores no arrays and puts the entry of coordinate
    /// `c` under parent position `p` at position `p * extent + c` (dense):
    /// its storage under `parent_size` positions. A format of such levels
    /// is packed by adding each entry into its place, in any order, with
    /// nothing sorted (`storage::scatter`). None for any other level.
    fn offset_storage(
        &self,
        _parent_size: usize,
        _extent: usize,
    ) -> Option<Result<ColumnPackOutput, String>> {
        None
    }
}

/// A level's coordinate of every entry, in entry order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Column<'a> {
    Values(Cow<'a, [i32]>),
    /// Sorted coordinates as runs: coordinate `c` for entries
    /// `runs[c]..runs[c + 1]` (`extent + 1` bounds), as a counting sort
    /// leaves the first level. A dense or compressed level builds its
    /// storage from the runs without reading a coordinate per entry.
    Runs(Vec<i32>),
}

impl<'a> Column<'a> {
    /// The first level's coordinates (sorted) as runs over `extent`
    /// coordinates (counted from values).
    pub fn into_runs(self, extent: usize) -> Vec<i32> {
        match self {
            Column::Runs(runs) => runs,
            Column::Values(v) => {
                let mut runs = vec![0i32; extent + 1];
                for &c in v.iter() {
                    runs[c as usize + 1] += 1;
                }
                for i in 1..runs.len() {
                    runs[i] += runs[i - 1];
                }
                runs
            }
        }
    }
    /// The coordinates, one per entry (materialised from runs).
    pub fn into_values(self) -> Cow<'a, [i32]> {
        match self {
            Column::Values(v) => v,
            Column::Runs(runs) => Cow::Owned(expand_runs(&runs)),
        }
    }
}

/// Where each entry sits in a level (its position), in entry order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Entry `e` at position `e`.
    Identity,
    /// Position `p` holds entries `runs[p]..runs[p + 1]`.
    Runs(Vec<i32>),
    /// Entry `e` at position `each[e]`. Positions never decrease in entry
    /// order (entries are sorted): each position's entries are contiguous.
    Each(Vec<i32>),
}

impl Placement {
    /// One position per entry (materialised) for `n` entries.
    pub fn into_each(self, n: usize) -> Vec<i32> {
        match self {
            Placement::Identity => (0..n as i32).collect(),
            Placement::Runs(runs) => expand_runs(&runs),
            Placement::Each(v) => v,
        }
    }
}

/// `c` repeated over each run `runs[c]..runs[c + 1]`.
pub fn expand_runs(runs: &[i32]) -> Vec<i32> {
    let n = runs.last().map_or(0, |&x| x as usize);
    let mut out = vec![0; n];
    crate::line_aligned::advise_huge_pages(&mut out);
    for (c, w) in runs.windows(2).enumerate() {
        out[w[0] as usize..w[1] as usize].fill(c as i32);
    }
    out
}

/// What a level sees when it is packed from columns.
pub struct ColumnPackInput<'a> {
    pub level: usize,
    /// This level's coordinate of every entry. The level may keep it as its
    /// own array: no other level reads it.
    pub coords: Column<'a>,
    /// The coordinates of the levels below, nearest first (an AoS level
    /// interleaves its chain's).
    pub below: &'a [&'a [i32]],
    /// For each entry, the first level at which its coordinates differ from
    /// the previous entry's (0 for the first entry). Entries are unique, so
    /// it is always below the number of levels.
    pub split: &'a [u8],
    /// Extent of each level's coordinates.
    pub extents: &'a [usize],
    /// Number of positions of the parent level (1 for the root).
    pub parent_size: usize,
    /// How many levels right after this one are branchless (a non-unique
    /// level makes one position per distinct chain through them).
    pub chain_len: usize,
    /// Bytes of memory a level may allocate.
    pub memory: u128,
}

impl ColumnPackInput<'_> {
    pub fn extent(&self) -> usize {
        self.extents[self.level]
    }
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.split.len()
    }
    pub fn is_empty(&self) -> bool {
        self.split.is_empty()
    }
    /// The deepest level whose coordinate, when it changes between two
    /// entries under the same parent, starts a new position of this level:
    /// the level itself, or the end of the branchless chain below it when
    /// the level is not unique (one position per distinct chain).
    pub fn reach(&self, unique: bool) -> usize {
        if unique {
            self.level
        } else {
            self.level + self.chain_len
        }
    }
    /// Whether every entry starts a position of its own under its parent:
    /// no two consecutive entries agree down to `reach`. Always so when
    /// `reach` is the last level (the entries are unique).
    pub fn each_entry_distinct(&self, reach: usize) -> bool {
        reach + 1 >= self.level + 1 + self.below.len()
            || self.split.iter().skip(1).all(|&s| usize::from(s) <= reach)
    }
    /// Refuse an array that cannot fit in memory, before allocating it.
    pub fn fits(&self, what: &str, elements: u128, elem_bytes: u128) -> Result<(), String> {
        fits(self.memory, what, elements, elem_bytes)
    }
}

fn fits(memory: u128, what: &str, elements: u128, elem_bytes: u128) -> Result<(), String> {
    let bytes = elements.saturating_mul(elem_bytes);
    if bytes > memory {
        return Err(format!(
            "{what} needs {bytes} bytes, more than the {memory} bytes of memory available"
        ));
    }
    Ok(())
}

/// What packing a level from columns produces.
#[derive(Debug, Default)]
pub struct ColumnPackOutput {
    /// Number of positions of this level.
    pub size: usize,
    pub arrays: Vec<(&'static str, Vec<i32>)>,
    pub params: Vec<(&'static str, i64)>,
}

/// Unpacking into columns: the children of a list of parent positions.
pub trait ColumnUnpack {
    /// Every stored child of `input.parents`, in storage order (padding and
    /// empty slots left out).
    fn children<'s>(&self, input: &ColumnUnpackInput<'s, '_>) -> Result<Children<'s>, String>;

    /// The positions of `children` alone, for reading values: a level
    /// whose coordinates or owners cost memory in proportion to its
    /// parents (a dense level's, a compressed level's runs) gives them
    /// without listing those.
    fn child_positions(&self, input: &ColumnUnpackInput<'_, '_>) -> Result<Positions, String> {
        Ok(self.children(input)?.positions)
    }
}

/// What a level sees when it is unpacked into columns.
pub struct ColumnUnpackInput<'s, 'p> {
    pub level: usize,
    /// Storage of every level of the tensor (levels may share arrays).
    pub storage: &'s [LevelStorage],
    pub extents: &'p [usize],
    /// Positions of the parent level that hold entries, in storage order.
    pub parents: &'p Positions,
    /// Bytes of memory a level may allocate.
    pub memory: u128,
}

impl ColumnUnpackInput<'_, '_> {
    pub fn extent(&self) -> usize {
        self.extents[self.level]
    }
    /// Refuse a listing that cannot fit in memory, before allocating it.
    pub fn fits(&self, what: &str, elements: u128, elem_bytes: u128) -> Result<(), String> {
        fits(self.memory, what, elements, elem_bytes)
    }
}

/// A list of positions, kept as a range while it is one (a root, the rows
/// of a dense level, the entries of a coordinate list).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Positions {
    Range(usize, usize),
    List(Vec<usize>),
}

impl Positions {
    pub fn len(&self) -> usize {
        match self {
            Positions::Range(lo, hi) => hi.saturating_sub(*lo),
            Positions::List(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The `i`-th position.
    #[inline]
    pub fn at(&self, i: usize) -> usize {
        match self {
            Positions::Range(lo, _) => lo + i,
            Positions::List(v) => v[i],
        }
    }
}

/// Which parent (an index into `ColumnUnpackInput::parents`) each child
/// belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owners {
    /// Child `i` belongs to parent `i` (branchless levels).
    Same,
    /// Every child belongs to parent 0 (there is one parent).
    First,
    Each(Vec<u32>),
    /// Children `runs[p]..runs[p + 1]` belong to parent `p` (a level that
    /// keeps each parent's children together): one bound per parent, not
    /// one owner per child.
    Runs(Vec<i32>),
}

/// The children of some parent positions: their positions, coordinates and
/// owners, one each per child, in storage order.
#[derive(Clone, Debug)]
pub struct Children<'s> {
    pub positions: Positions,
    /// Borrowed from the level's storage where it already is one column.
    pub coords: Cow<'s, [i32]>,
    pub owners: Owners,
}

/// `Owners::Runs` from per-parent child counts, or `First` for one parent.
/// Fails when the parents outnumber what a `u32` index can name.
pub fn owners_from_counts(
    counts: impl Iterator<Item = usize>,
    parents: usize,
    children: usize,
) -> Result<Owners, String> {
    if parents <= 1 {
        return Ok(Owners::First);
    }
    if parents > u32::MAX as usize || children >= i32::MAX as usize {
        return Err(format!(
            "{parents} parents of {children} children do not fit 32-bit indices"
        ));
    }
    let mut runs = Vec::with_capacity(parents + 1);
    runs.push(0i32);
    let mut at = 0usize;
    for n in counts {
        at += n;
        if at > children {
            return Err("more children than counted".into());
        }
        runs.push(at as i32);
    }
    if runs.len() != parents + 1 || at != children {
        return Err(format!(
            "counts for {} parents and {at} children, not {parents} and {children}",
            runs.len() - 1
        ));
    }
    Ok(Owners::Runs(runs))
}
