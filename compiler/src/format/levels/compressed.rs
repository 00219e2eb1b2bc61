//! Compressed level: each parent's coordinates in a segment of `crd`, the
//! segment bounds in `pos`. Capabilities: coordinate position iteration,
//! append. Full, ordered and unique are configurable; `aos` makes it the
//! owner of an interleaved coordinate array shared with the singleton levels
//! below it (AoS COO).

use super::crd_layout::CrdLayout;
use crate::format::columns::*;
use crate::format::level::*;
use crate::ir::{Emitter, Expr};
use std::borrow::Cow;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compressed {
    pub full: bool,
    pub ordered: bool,
    pub unique: bool,
    pub layout: CrdLayout,
}

impl Default for Compressed {
    fn default() -> Self {
        Compressed {
            full: false,
            ordered: true,
            unique: true,
            layout: CrdLayout::Own,
        }
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
        Properties {
            full: self.full,
            ordered: self.ordered,
            unique: self.unique,
            branchless: false,
            compact: true,
        }
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
    fn aos_role(&self) -> Option<AosRole> {
        Some(AosRole::Owner)
    }
    fn arrays(&self) -> Vec<&'static str> {
        vec!["pos", "crd"]
    }
    /// `pos` records where each parent's children end among the level's
    /// positions, one `crd` entry each, in 32 bits.
    fn array_limit(&self, array: &str) -> Option<u64> {
        (array == "crd").then_some(i32::MAX as u64)
    }
    fn coordinate_array(&self) -> Option<&'static str> {
        // Interleaved with another level's, an AoS array is no run of one
        // level's coordinates.
        (!self.layout.is_aos()).then_some("crd")
    }
    fn stored_coordinates(&self, level: usize) -> Option<StoredCoordinates> {
        Some(self.layout.stored(level))
    }
    fn pack(&self, input: &PackInput) -> Result<PackOutput, String> {
        let mut pos = vec![0i32; input.parent_size + 1];
        let mut columns: Vec<Vec<i32>> = vec![Vec::new(); self.stride()];
        let mut children = Vec::new();
        for seg in input.parents {
            let groups = input.groups(seg, self.unique);
            for (_coord, lo, hi) in groups {
                children.push(Segment {
                    pos: columns[0].len(),
                    lo,
                    hi,
                });
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
        let crd = if self.layout.is_aos() {
            CrdLayout::interleave(&columns)
        } else {
            columns.swap_remove(0)
        };
        Ok(PackOutput {
            children,
            size,
            arrays: vec![("pos", pos), ("crd", crd)],
            params: Vec::new(),
        })
    }
    fn column_pack(&self) -> Option<&dyn ColumnPack> {
        Some(self)
    }
    fn column_unpack(&self) -> Option<&dyn ColumnUnpack> {
        Some(self)
    }
    fn validate(&self, input: &ValidateInput) -> Result<usize, String> {
        let pos = input.own().array("pos")?;
        let positions = self.layout.positions(input.storage, input.level)?;
        let size = checks::pos_array(pos, input.parent_size, positions)?;
        let crd = input.own().array("crd")?;
        if let CrdLayout::Aos { stride, .. } = self.layout {
            if crd.len() % stride != 0 {
                return Err(format!(
                    "interleaved crd length {} is not a multiple of {stride}",
                    crd.len()
                ));
            }
        }
        let mine = self.layout.column(input.storage, input.level, size)?;
        checks::coords_in_range(&mine, input.extent())?;
        for w in pos.windows(2) {
            checks::segment_order(
                &mine,
                w[0] as usize,
                w[1] as usize,
                self.ordered,
                self.unique,
            )?;
        }
        if self.full {
            for (p, w) in pos.windows(2).enumerate() {
                if (w[1] - w[0]) as usize != input.extent() {
                    return Err(format!(
                        "parent {p} has {} coordinates: level claims full (every coordinate)",
                        w[1] - w[0]
                    ));
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

impl ColumnPack for Compressed {
    /// When every entry is a position of its own (the last level of CSR or
    /// CSF), the parent's runs are `pos` and the coordinate column is `crd`
    /// as they are. Otherwise a first pass numbers the positions (an entry
    /// starts one when its parent or its coordinate changes) and counts each
    /// parent's, `pos` being their running sum, and a second copies the
    /// coordinates (the records of the chain below, when AoS) of the
    /// entries that start positions.
    fn pack_columns(
        &self,
        input: ColumnPackInput<'_>,
        placement: &mut Placement,
    ) -> Result<ColumnPackOutput, String> {
        let reach = input.reach(self.unique);
        let n = input.len();
        let stride = self.stride();
        if let Placement::Runs(runs) = placement {
            if runs.len() == input.parent_size + 1 && input.each_entry_distinct(reach) {
                let pos = std::mem::take(runs);
                *placement = Placement::Identity;
                let crd = self.records(input.coords.into_values(), input.below, stride, None);
                return Ok(ColumnPackOutput {
                    size: n,
                    arrays: vec![("pos", pos), ("crd", crd)],
                    params: Vec::new(),
                });
            }
        }
        if let (1, true, Column::Runs(runs)) =
            (input.parent_size, self.unique && stride == 1, &input.coords)
        {
            // One parent, coordinates as runs (the root of DCSR or CSF after
            // a counting sort): the positions are the coordinates that
            // occur, each holding its run.
            let mut crd = Vec::new();
            let mut bounds = vec![0];
            for (c, w) in runs.windows(2).enumerate() {
                if w[0] < w[1] {
                    crd.push(c as i32);
                    bounds.push(w[1]);
                }
            }
            let size = crd.len();
            *placement = Placement::Runs(bounds);
            return Ok(ColumnPackOutput {
                size,
                arrays: vec![("pos", vec![0, size as i32]), ("crd", crd)],
                params: Vec::new(),
            });
        }
        let mut each = std::mem::replace(placement, Placement::Identity).into_each(n);
        // Counts per parent, at `pos[parent + 1]`, summed below.
        let mut pos = vec![0i32; input.parent_size + 1];
        let mut size = 0i32;
        let mut prev_parent = -1;
        for (p, &s) in each.iter_mut().zip(input.split) {
            let parent = *p;
            // The first entry always starts a position: no parent is -1.
            let starts = parent != prev_parent || usize::from(s) <= reach;
            pos[parent as usize + 1] += i32::from(starts);
            size += i32::from(starts);
            *p = size - 1;
            prev_parent = parent;
        }
        for i in 1..pos.len() {
            pos[i] += pos[i - 1];
        }
        let size = size as usize;
        let crd = self.records(
            input.coords.into_values(),
            input.below,
            stride,
            (size < n).then_some(&each[..]),
        );
        *placement = if size == n {
            Placement::Identity
        } else {
            Placement::Each(each)
        };
        Ok(ColumnPackOutput {
            size,
            arrays: vec![("pos", pos), ("crd", crd)],
            params: Vec::new(),
        })
    }
}

impl Compressed {
    /// The `crd` array: the coordinate of each entry that starts a position
    /// (every entry when `each` is None), interleaved with the chain below
    /// when AoS.
    fn records(
        &self,
        own: Cow<'_, [i32]>,
        below: &[&[i32]],
        stride: usize,
        each: Option<&[i32]>,
    ) -> Vec<i32> {
        let starts = |e: usize| each.is_none_or(|p| e == 0 || p[e] != p[e - 1]);
        if stride == 1 && each.is_none() {
            return own.into_owned();
        }
        let fields: Vec<&[i32]> = std::iter::once(&*own)
            .chain(below.iter().copied())
            .take(stride)
            .collect();
        let mut crd = Vec::with_capacity(own.len() * stride);
        for e in (0..own.len()).filter(|&e| starts(e)) {
            crd.extend(fields.iter().map(|col| col[e]));
        }
        crd
    }
}

impl ColumnUnpack for Compressed {
    fn children<'s>(&self, input: &ColumnUnpackInput<'s, '_>) -> Result<Children<'s>, String> {
        let pos = input.storage[input.level].array("pos")?;
        let at = |p: usize| -> Result<usize, String> {
            let v = *pos.get(p).ok_or_else(|| format!("pos has no entry {p}"))?;
            usize::try_from(v).map_err(|_| format!("pos[{p}] = {v} is negative"))
        };
        let segment = |p: usize| -> Result<(usize, usize), String> {
            let (lo, hi) = (at(p)?, at(p + 1)?);
            if hi < lo {
                return Err(format!("pos decreases at position {}", p + 1));
            }
            Ok((lo, hi))
        };
        let parents = input.parents;
        let (positions, owners) = match parents {
            Positions::Range(lo, hi) if lo == hi => (Positions::Range(0, 0), Owners::First),
            // Consecutive parents own one run of positions: their bounds are
            // a slice of `pos`, checked in one pass.
            Positions::Range(lo, hi) => {
                let (bounds, a, b) = run_of_children(pos, *lo, *hi)?;
                let counts = bounds.windows(2).map(|w| (w[1] - w[0]) as usize);
                (
                    Positions::Range(a, b),
                    owners_from_counts(counts, parents.len(), b - a)?,
                )
            }
            Positions::List(v) => {
                let (mut out, mut counts) = (Vec::new(), Vec::with_capacity(v.len()));
                for &p in v {
                    let (a, b) = segment(p)?;
                    counts.push(b - a);
                    out.extend(a..b);
                }
                let total = out.len();
                (
                    Positions::List(out),
                    owners_from_counts(counts.into_iter(), v.len(), total)?,
                )
            }
        };
        let total = positions.len();
        let coords = match (&self.layout, &positions) {
            (CrdLayout::Own, Positions::Range(a, b)) => {
                let crd = input.storage[input.level].array("crd")?;
                Cow::Borrowed(crd.get(*a..*b).ok_or_else(|| {
                    format!("positions {a}..{b} beyond crd (length {})", crd.len())
                })?)
            }
            _ => {
                let crd = self.layout.reader(input.storage, input.level)?;
                Cow::Owned(
                    (0..total)
                        .map(|i| crd.at(positions.at(i)))
                        .collect::<Result<Vec<i32>, String>>()?,
                )
            }
        };
        Ok(Children {
            positions,
            coords,
            owners,
        })
    }

    fn child_positions(&self, input: &ColumnUnpackInput<'_, '_>) -> Result<Positions, String> {
        match input.parents {
            Positions::Range(lo, hi) if lo == hi => Ok(Positions::Range(0, 0)),
            Positions::Range(lo, hi) => {
                let pos = input.storage[input.level].array("pos")?;
                let (_, a, b) = run_of_children(pos, *lo, *hi)?;
                Ok(Positions::Range(a, b))
            }
            Positions::List(_) => Ok(self.children(input)?.positions),
        }
    }
}

/// The children of the consecutive parents `lo..hi` (`lo < hi`): their
/// bounds `pos[lo..=hi]`, checked never to decrease, and the run of
/// positions `pos[lo]..pos[hi]` they span.
fn run_of_children(pos: &[i32], lo: usize, hi: usize) -> Result<(&[i32], usize, usize), String> {
    let bounds = pos
        .get(lo..=hi)
        .ok_or_else(|| format!("pos has no entries {lo}..={hi} (length {})", pos.len()))?;
    if bounds[0] < 0 || bounds.windows(2).any(|w| w[1] < w[0]) {
        return Err(format!(
            "pos is negative or decreases between positions {lo} and {hi}"
        ));
    }
    Ok((
        bounds,
        bounds[0] as usize,
        bounds[bounds.len() - 1] as usize,
    ))
}

/// A share's `pos` counts its own parents' children from 0 and stays 0
/// before them and at its total after them: the shares' `pos` arrays add
/// up, element by element, to the whole result's, and their `crd`
/// segments follow one another. Arrays may be longer than what they hold:
/// only `pos[..=parents]` and `crd[..pos[parents]]` are read.
impl StitchShares for Compressed {
    fn stitch(
        &self,
        first: LevelStorage,
        rest: &[&LevelStorage],
        parents: usize,
    ) -> Result<(LevelStorage, Vec<usize>), String> {
        stitch_compressed(first, rest, parents)
    }
}

fn stitch_compressed(
    mut whole: LevelStorage,
    rest: &[&LevelStorage],
    parents: usize,
) -> Result<(LevelStorage, Vec<usize>), String> {
    // Read in place, not copied: a share's `pos` has a bound for every
    // parent of the whole result, and a copy of it held beside the
    // original doubles the memory a large result's stitching needs.
    let short = || format!("a share's pos holds fewer than {} bounds", parents + 1);
    fn bounds(s: &LevelStorage, parents: usize) -> Option<&[i32]> {
        s.array("pos").ok()?.get(..=parents)
    }
    let first = whole.arrays.get_mut("pos").ok_or("missing array `pos`")?;
    if first.len() <= parents {
        return Err(short());
    }
    first.truncate(parents + 1);
    let mut sizes = vec![first.last().map_or(0, |&n| n as usize)];
    let crd = whole.arrays.get_mut("crd").ok_or("missing array `crd`")?;
    if crd.len() < sizes[0] {
        return Err("a share's crd is shorter than its pos says".into());
    }
    crd.truncate(sizes[0]);
    for part in rest {
        let pos = bounds(part, parents).ok_or_else(short)?;
        let n = pos.last().map_or(0, |&n| n as usize);
        let crd = part
            .array("crd")?
            .get(..n)
            .ok_or("a share's crd is shorter than its pos says")?;
        for (a, b) in whole
            .arrays
            .get_mut("pos")
            .ok_or("missing array `pos`")?
            .iter_mut()
            .zip(pos)
        {
            *a = a
                .checked_add(*b)
                .ok_or("the stitched result holds more entries than 32-bit positions reach")?;
        }
        whole
            .arrays
            .get_mut("crd")
            .ok_or("missing array `crd`")?
            .extend_from_slice(crd);
        sizes.push(n);
    }
    Ok((whole, sizes))
}

impl CoordPositionIteration for Compressed {
    fn pos_bounds(&self, c: &LevelCtx, _e: &mut Emitter, parent_pos: Expr) -> (Expr, Expr) {
        let pos = c.array("pos");
        (
            Expr::load(pos.clone(), parent_pos.clone()),
            Expr::load(pos, Expr::add(parent_pos, Expr::Int(1))),
        )
    }
    fn pos_access(
        &self,
        c: &LevelCtx,
        _e: &mut Emitter,
        pos: Expr,
        _ancestors: &[Expr],
    ) -> (Expr, Expr) {
        (self.layout.load(c, pos), Expr::Bool(true))
    }
}

impl Append for Compressed {
    fn append_init(&self, c: &LevelCtx, e: &mut Emitter, parent_size: Expr, parents: &Parents) {
        let n = Expr::add(parent_size, Expr::Int(1));
        e.reserve(c.array("pos"), n.clone());
        // Parents closed in order get `pos` as running ends, each entry
        // written once (`append_edges`); others get counts, summed at the
        // end, and a parent never closed counts 0.
        if let Parents::InOrder { .. } | Parents::Appended = parents {
            e.store(c.array("pos"), Expr::Int(0), Expr::Int(0));
            return;
        }
        e.for_("pinit", Expr::Int(0), n, |e, p| {
            e.store(c.array("pos"), p, Expr::Int(0))
        });
    }
    fn append_coord(&self, c: &LevelCtx, e: &mut Emitter, pos: Expr, coord: Expr) {
        e.reserve(c.array("crd"), Expr::add(pos.clone(), Expr::Int(1)));
        e.store(c.array("crd"), pos, coord);
    }
    fn append_edges(
        &self,
        c: &LevelCtx,
        e: &mut Emitter,
        parent_pos: Expr,
        (pbegin, pend): (Expr, Expr),
        parents: &Parents,
    ) {
        let pos = c.array("pos");
        let at = Expr::add(parent_pos.clone(), Expr::Int(1));
        match parents {
            // Parents appended as we go (DCSR, CSF results) grow `pos`
            // with them, which takes their running ends (none is skipped);
            // fixed ones had all of it reserved by `append_init` (a reserve
            // a row cost CSR results of short rows 13% of their time).
            Parents::Appended => {
                e.reserve(pos.clone(), Expr::add(parent_pos, Expr::Int(2)));
                e.store(pos, at, pend);
            }
            Parents::Fixed => e.store(pos, at, Expr::sub(pend, pbegin)),
            // The parents skipped since the last end where this one's
            // children begin, then its end: no zeroing of `pos` ahead and
            // no sum after (CSR add 0.93x the time, a CSR copy of
            // 20M short rows 0.90x).
            Parents::InOrder { last } => {
                let from = Expr::add(last.clone(), Expr::Int(2));
                e.for_("pskip", from, at.clone(), |e, q| {
                    e.store(pos.clone(), q, pbegin)
                });
                e.store(pos, at, pend);
            }
        }
    }
    fn stitch_shares(&self) -> Option<&dyn StitchShares> {
        // Interleaved records would need the levels below stitched too.
        (self.layout == CrdLayout::Own).then_some(self as &dyn StitchShares)
    }
    fn append_finalize(
        &self,
        c: &LevelCtx,
        e: &mut Emitter,
        parent_size: Expr,
        size: Expr,
        parents: &Parents,
    ) {
        let pos = c.array("pos");
        match parents {
            // Every parent appended was closed, its end written.
            Parents::Appended => return,
            // The parents after the last one closed end where it does.
            Parents::InOrder { last } => {
                let from = Expr::add(last.clone(), Expr::Int(2));
                let to = Expr::add(parent_size, Expr::Int(1));
                e.for_("ptail", from, to, |e, q| e.store(pos.clone(), q, size));
                return;
            }
            Parents::Fixed => {}
        }
        let cumsum = e.let_var("cumsum", Expr::load(pos.clone(), Expr::Int(0)));
        e.for_(
            "pfin",
            Expr::Int(1),
            Expr::add(parent_size, Expr::Int(1)),
            |e, p| {
                e.set(
                    &cumsum,
                    Expr::add(cumsum.clone(), Expr::load(pos.clone(), p.clone())),
                );
                e.store(pos.clone(), p, cumsum.clone());
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(pos: &[i32], crd: &[i32]) -> LevelStorage {
        let mut s = LevelStorage::default();
        s.arrays.insert("pos", pos.to_vec());
        s.arrays.insert("crd", crd.to_vec());
        s
    }

    /// Three rows in two shares, each share's arrays longer than what it
    /// holds (room kept from an earlier run): the shares' `pos` add up and
    /// their `crd` follow one another, cut to what they hold.
    #[test]
    fn shares_stitch_into_one_level() {
        // share 0: row 0 holds columns 1 and 4; share 1: row 2 holds 0.
        let first = level(&[0, 2, 2, 2, 99], &[1, 4, 77]);
        let second = level(&[0, 0, 0, 1, 99], &[0, 55, 66]);
        let (whole, sizes) = stitch_compressed(first, &[&second], 3).expect("stitches"); // ok: test
        assert_eq!(whole.arrays["pos"], vec![0, 2, 2, 3]);
        assert_eq!(whole.arrays["crd"], vec![1, 4, 0]);
        assert_eq!(sizes, vec![2, 1]);
    }

    #[test]
    fn a_share_without_a_bound_for_every_row_is_an_error() {
        let first = level(&[0, 1, 1, 1], &[0]);
        let short = level(&[0, 0, 1], &[2]);
        let err = stitch_compressed(first, &[&short], 3).expect_err("short pos"); // ok: test
        assert!(err.contains("fewer than 4 bounds"), "{err}");
        let err = stitch_compressed(level(&[0, 1], &[0]), &[], 3).expect_err("short"); // ok: test
        assert!(err.contains("fewer than 4 bounds"), "{err}");
    }
}
