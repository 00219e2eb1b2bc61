//! A loop over rows nested in another loop that revisits them (`for d {
//! for i in lo(d)..hi(d) { y[i] += .. } }`: DIA's diagonals, ELL's
//! slots) reads and writes all of `y` once per outer iteration; for a
//! result larger than the caches that is the whole cost (tridiagonal DIA
//! SpMV moves `y` through memory three times). Here the rows are taken in
//! tiles of `TILE`: every outer iteration runs over one tile before the
//! next tile starts, so the tile of `y` stays in the L1 cache across them
//! (1.3-1.6x on DIA SpMV of 1M-4M rows, gcc and Cranelift alike; ELL
//! SpMV, whose rows test for a padded slot, 5-16% on the cc tier).
//!
//! Exact, to the bit: an iteration `(d, i)` reads and writes the arrays
//! the nest stores to only at row `i`, and keeps nothing across
//! iterations, so iterations of different rows are independent, and each
//! row still sees its outer iterations in their order.

use super::passes::Backend;
use super::target::TargetConstant;
use super::{fresh_var, nested_blocks_mut, BinOp, Block, CmpOp, Expr, Function, Stmt, Ty, VarId};
use std::collections::BTreeSet;

/// Rows per tile: 8 KiB of `f64`, a quarter of an L1 data cache, which
/// leaves room for the streams the rows read.
const TILE: i64 = 1024;

/// The fewest rows a nest is tiled for on an AMD Zen 3 or later core whose
/// last-level cache is unknown: 16 MiB of `f64` in the result and as much
/// in the vector the rows read, together a 32 MiB last-level cache (see
/// `ROW_BYTES`).
const FROM_ROWS_ZEN3: i64 = 1 << 21;

/// Bytes a row keeps in the caches between the outer iterations of an
/// untiled nest: an `f64` of the result and one of the vector it reads.
/// On an AMD Zen 3 or later core (one L3 of 32 MiB for eight cores) a
/// nest is tiled from the rows whose bytes fill its last-level cache.
/// While the result and the vector stay in that cache, the passes over
/// them are cheap and the tiles cost more than they save: every tile
/// restarts each outer iteration's stream, and the prefetchers find it
/// again only after a few misses (AMD EPYC, Zen 3, 32 MiB L3, cc tier,
/// DIA SpMV, tiled -> untiled: 3-D stencil of 1.33M rows 7.2 -> 5.0 ms,
/// 2-D stencil of 1M rows 2.7 -> 2.4, block-diagonal of 270K rows with
/// 15 diagonals 3.8 -> 2.5; ELL SpMV on the 3-D stencil 14.6 -> 8.0).
/// Past it the tiles win as the module says (tridiagonal, 6M rows: 13.0
/// -> 10.1 ms).
const ROW_BYTES: u64 = 16;

/// The fewest rows a nest is tiled for on other cores: two tiles. On an
/// Intel Xeon (2 MiB L2 a core, a last-level cache shared over a mesh)
/// passes over a result its L2 does not hold cost about what passes
/// through memory do, and the tiles pay from tens of thousands of rows
/// (cc tier, DIA SpMV, untiled -> tiled, `examples/ab_kernels`, 10
/// rounds: 2-D stencil of 40K rows 0.070 -> 0.067 ms, of 1M rows 4.72 ->
/// 2.57, block-diagonal 4.98 -> 2.19, 3-D stencil 9.79 -> 8.09,
/// tridiagonal of 1M rows 2.84 -> 1.72; ELL SpMV 0.82-1.01x, but 1.10x on
/// the 3-D stencil). So on an AMD EPYC of Zen 1 (8 MiB L3 for four
/// cores), though its L3 holds what Zen 3's passes gained on: tiled from
/// 2,048 rows against 2M, DIA SpMV, `bench/ab_builds.sh`, 5 rounds, cc
/// and Cranelift tiers: 3-D stencil 15.4 -> 9.1 and 15.5 -> 8.9 ms, 2-D
/// stencil of 1M rows 8.2 -> 5.6 and 8.4 -> 5.3, tridiagonal of 1M rows
/// 5.6 -> 4.0 and 5.7 -> 3.9; block-diagonal of 270K rows (4.3 MB of
/// result and vector) 0.83-0.92x, 2-D stencil of 40K rows 0.97x
/// (`examples/ab_kernels`, cc); ELL SpMV on the 3-D stencil 0.82x (cc),
/// 0.99x (Cranelift).
const FROM_ROWS_ELSEWHERE: i64 = 2 * TILE;

/// The fewest rows a nest is tiled for on a Zen 3 or later core
/// (`zen3`) with a last-level cache of `last_level_cache` bytes (`None`:
/// unknown), or on another core.
pub fn from_rows(zen3: bool, last_level_cache: Option<u64>) -> i64 {
    match (zen3, last_level_cache) {
        (false, _) => FROM_ROWS_ELSEWHERE,
        (true, None) => FROM_ROWS_ZEN3,
        (true, Some(bytes)) => ((bytes / ROW_BYTES) as i64).max(FROM_ROWS_ELSEWHERE),
    }
}

/// The most outer iterations a nest is tiled for. Each reads its own part
/// of the arrays in every tile, a stream the hardware prefetchers must
/// find again tile after tile; past a few dozen they lose track (ELL of
/// the power-law matrix, 1,668 slots, cc tier: 1.29 s untiled, 1.59 s in
/// tiles). Past it, the nest runs as it was.
const MAX_STREAMS: i64 = 32;

/// Tile the nests that revisit their rows, where they number at least
/// the target's `from_rows` (`TargetConstant::TileFromRows`, a test at
/// run time).
pub fn tile_rows(f: &mut Function, backend: Backend) {
    tile_rows_from(f, &TargetConstant::TileFromRows.for_backend(backend));
}

/// `tile_rows`, with tiles where a nest's rows number at least `from_rows`.
fn tile_rows_from(f: &mut Function, from_rows: &Expr) {
    let shared = SharedLoop::of(f);
    let mut body = std::mem::take(&mut f.body);
    in_block(&mut body, f, from_rows, shared.as_ref());
    f.body = body;
}

/// A loop shared among threads runs from `begin` to `end`, a share of the
/// whole loop of `span` iterations (`Function::shares`: the share search
/// only narrows the bounds the variables are declared with).
struct SharedLoop {
    begin: VarId,
    end: VarId,
    span: Expr,
}

impl SharedLoop {
    fn of(f: &Function) -> Option<SharedLoop> {
        let bounds = f.shares?;
        let (mut begin, mut end) = (None, None);
        super::walk_block(&f.body, &mut |s| match s {
            Stmt::Let(v, e) if *v == bounds.begin => begin = Some(e.clone()),
            Stmt::Let(v, e) if *v == bounds.end => end = Some(e.clone()),
            _ => {}
        });
        Some(SharedLoop {
            begin: bounds.begin,
            end: bounds.end,
            span: Expr::sub(end?, begin?),
        })
    }

    /// The most iterations of a loop from `lo` to `hi` in any call: the
    /// whole loop's where it is shared.
    fn most_trips(shared: Option<&SharedLoop>, lo: &Expr, hi: &Expr) -> Expr {
        match shared {
            Some(s) if *lo == Expr::Var(s.begin) && *hi == Expr::Var(s.end) => s.span.clone(),
            _ => Expr::sub(hi.clone(), lo.clone()),
        }
    }
}

fn in_block(block: &mut Block, f: &mut Function, from_rows: &Expr, shared: Option<&SharedLoop>) {
    for mut s in std::mem::take(block) {
        if let Some(tiles) = tiled(&s, f, from_rows, shared) {
            block.extend(tiles);
            continue;
        }
        for inner in nested_blocks_mut(&mut s) {
            in_block(inner, f, from_rows, shared);
        }
        block.push(s);
    }
}

/// `nest` with its rows in tiles, if it is such a nest (see the module).
/// Where its test is known when compiled (the Cranelift tier compiles
/// dimensions and sizes in), only the side it takes: the tiles, or the
/// nest as it was (`None`).
fn tiled(
    nest: &Stmt,
    f: &mut Function,
    from_rows: &Expr,
    shared: Option<&SharedLoop>,
) -> Option<Vec<Stmt>> {
    let Stmt::For {
        var: outer,
        lo: outer_lo,
        hi: outer_hi,
        body,
    } = nest
    else {
        return None;
    };
    let (
        Stmt::For {
            var: row,
            lo,
            hi,
            body: rows,
        },
        prefix,
    ) = body.split_last()?
    else {
        return None;
    };
    // What the outer loop computes for its rows: `let`s only.
    let mut varying: BTreeSet<VarId> = BTreeSet::from([*outer]);
    for s in prefix {
        let Stmt::Let(v, _) = s else { return None };
        varying.insert(*v);
    }
    let stored = rows_only(rows, *row)?;
    // The arrays the rows store to are read nowhere else in the nest.
    let elsewhere = prefix
        .iter()
        .flat_map(super::stmt_exprs)
        .chain([outer_lo, outer_hi, lo, hi]);
    if elsewhere.into_iter().any(|e| reads_any(e, &stored)) {
        return None;
    }
    // Rows every outer iteration stays within, known before the nest.
    let first = invariant_bound(lo, BinOp::Max, &varying)?;
    let end = invariant_bound(hi, BinOp::Min, &varying)?;
    let outer_trips = Expr::sub(outer_hi.clone(), outer_lo.clone());
    // A share of a loop short as a whole is short.
    let short = match SharedLoop::most_trips(shared, outer_lo, outer_hi).as_int() {
        Some(most) if most <= MAX_STREAMS => Expr::Bool(true),
        _ => Expr::cmp(CmpOp::Le, outer_trips, Expr::Int(MAX_STREAMS)),
    };
    let row_count = Expr::sub(end.clone(), first.clone());
    let cond = Expr::and(short, Expr::cmp(CmpOp::Ge, row_count, from_rows.clone()));
    if cond == Expr::Bool(false) {
        return None;
    }
    let base = f.vars[*row as usize].name.clone();
    let tile = fresh_var(&mut f.vars, &format!("{base}_tile"), Ty::I64);
    let tile_end = fresh_var(&mut f.vars, &format!("{base}_tile_end"), Ty::I64);
    let (tile_v, tile_end_v) = (Expr::Var(tile), Expr::Var(tile_end));
    let mut in_tile = prefix.to_vec();
    in_tile.push(Stmt::For {
        var: *row,
        lo: Expr::max(lo.clone(), tile_v.clone()),
        hi: Expr::min(hi.clone(), tile_end_v.clone()),
        body: rows.clone(),
    });
    let tiles = Stmt::While {
        cond: Expr::lt(tile_v.clone(), end.clone()),
        body: vec![
            Stmt::Let(
                tile_end,
                Expr::min(Expr::add(tile_v.clone(), Expr::Int(TILE)), end.clone()),
            ),
            Stmt::For {
                var: *outer,
                lo: outer_lo.clone(),
                hi: outer_hi.clone(),
                body: in_tile,
            },
            Stmt::Set(tile, tile_end_v),
        ],
    };
    let comment = Stmt::Comment(format!(
        "rows in tiles of {TILE} where the outer loop is short and the rows outgrow the caches"
    ));
    let then = vec![Stmt::Let(tile, first), tiles];
    if cond == Expr::Bool(true) {
        return Some([vec![comment], then].concat());
    }
    Some(vec![
        comment,
        Stmt::If {
            cond,
            then,
            els: vec![nest.clone()],
        },
    ])
}

/// The arrays `rows` stores to, if each row touches them only at its own
/// index (`a[row]`, read or written) and keeps nothing across rows: its
/// statements are `let`s, assignments to its own variables and stores,
/// also under `if`s (ELL's test for a padded slot).
fn rows_only(rows: &Block, row: VarId) -> Option<BTreeSet<super::ArrayRef>> {
    let mut own: BTreeSet<VarId> = BTreeSet::new();
    let mut stored = BTreeSet::new();
    own_statements(rows, row, &mut own, &mut stored)?;
    let at_row = Expr::Var(row);
    let mut elsewhere = false;
    super::walk_block(rows, &mut |s| {
        for e in super::stmt_exprs(s) {
            e.walk(&mut |x| {
                if let Expr::Load(a, i) = x {
                    elsewhere |= stored.contains(a) && **i != at_row;
                }
            });
        }
    });
    (!stored.is_empty() && !elsewhere).then_some(stored)
}

/// Check `block` for `rows_only`, collecting the variables it declares
/// into `own` and the arrays it stores to into `stored`.
fn own_statements(
    block: &Block,
    row: VarId,
    own: &mut BTreeSet<VarId>,
    stored: &mut BTreeSet<super::ArrayRef>,
) -> Option<()> {
    for s in block {
        match s {
            Stmt::Let(v, _) => {
                own.insert(*v);
            }
            Stmt::Set(v, _) if own.contains(v) => {}
            Stmt::Store(a, Expr::Var(i), _) if *i == row => {
                stored.insert(a.clone());
            }
            Stmt::If { then, els, .. } => {
                own_statements(then, row, own, stored)?;
                own_statements(els, row, own, stored)?;
            }
            Stmt::Comment(_) | Stmt::Unlikely => {}
            _ => return None,
        }
    }
    Some(())
}

fn reads_any(e: &Expr, arrays: &BTreeSet<super::ArrayRef>) -> bool {
    let mut found = false;
    e.walk(&mut |x| found |= matches!(x, Expr::Load(a, _) if arrays.contains(a)));
    found
}

/// A bound that holds for every outer iteration and reads none of
/// `varying`: `e` itself, or for `max(a, b)` (a lower bound; `min` for an
/// upper one) an argument that is such a bound.
fn invariant_bound(e: &Expr, op: BinOp, varying: &BTreeSet<VarId>) -> Option<Expr> {
    let mut fixed = true;
    e.walk(&mut |x| fixed &= !matches!(x, Expr::Var(v) if varying.contains(v)));
    if fixed {
        return Some(e.clone());
    }
    match e {
        Expr::Bin(o, a, b) if *o == op => {
            invariant_bound(a, op, varying).or_else(|| invariant_bound(b, op, varying))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::interp::test_memory::{self, scratch as array};
    use crate::ir::Emitter;

    /// A Zen 3 core tiles from the rows that fill its last-level cache at
    /// `ROW_BYTES` each; another core from two tiles, whatever its cache.
    #[test]
    fn the_rows_tiled_from_follow_the_cache_on_zen3() {
        assert_eq!(from_rows(true, Some(32 << 20)), FROM_ROWS_ZEN3);
        assert_eq!(from_rows(true, Some(96 << 20)), 6 << 20);
        assert_eq!(from_rows(true, None), FROM_ROWS_ZEN3);
        assert_eq!(from_rows(true, Some(1 << 10)), FROM_ROWS_ELSEWHERE);
        assert_eq!(from_rows(false, Some(32 << 20)), FROM_ROWS_ELSEWHERE);
        // What this host reads of its cache is whole lines, and more than
        // an L1 data cache.
        if let Some(bytes) = crate::ir::target::host_last_level_cache() {
            assert!(bytes % 64 == 0 && bytes >= 32 << 10, "{bytes}");
        }
    }

    /// Diagonals as DIA SpMV runs them over `rows` rows: diagonal `d` has
    /// offset `off[d]` and covers rows `max(0, -off)..min(rows, rows -
    /// off)`, adding `v[d * rows + i] * x[i + off]` into `y[i]`. `bad`
    /// changes one thing that makes tiling unsound.
    fn diagonals(rows: i64, bad: Option<&str>) -> Function {
        diagonals_of(rows, 3, bad)
    }

    /// `diagonals` with `count` diagonals (offsets -1, 0, 2 repeating).
    fn diagonals_of(rows: i64, count: i64, bad: Option<&str>) -> Function {
        let (off, v, x, y) = (array("off"), array("v"), array("x"), array("y"));
        let mut e = Emitter::new();
        let n = Expr::Int(rows);
        e.for_("d", Expr::Int(0), Expr::Int(count), |e, d| {
            let o = e.let_var("o", Expr::load(off.clone(), d.clone()));
            let lo = Expr::max(Expr::Int(0), Expr::neg(o.clone()));
            let hi = Expr::min(n.clone(), Expr::sub(n.clone(), o.clone()));
            if bad == Some("reads y above") {
                e.let_var("y0", Expr::load(y.clone(), Expr::Int(0)));
            }
            e.for_("i", lo, hi, |e, i| {
                let at = Expr::add(Expr::mul(d.clone(), n.clone()), i.clone());
                let term = Expr::mul(
                    Expr::load(v.clone(), at),
                    Expr::load(x.clone(), Expr::add(i.clone(), o.clone())),
                );
                let row = match bad {
                    Some("stores a neighbour") => Expr::add(i.clone(), Expr::Int(1)),
                    _ => i.clone(),
                };
                let old = match bad {
                    Some(b) if b.ends_with("reads a neighbour") => {
                        Expr::load(y.clone(), Expr::Int(0))
                    }
                    _ => Expr::load(y.clone(), row.clone()),
                };
                let store = e.block(|e| e.store(y.clone(), row, Expr::add(old, term)));
                // ELL's rows add only where a slot holds an entry.
                match bad {
                    Some(b) if b.starts_with("guarded") => e.push(Stmt::If {
                        cond: Expr::ne(Expr::rem(i.clone(), Expr::Int(3)), Expr::Int(1)),
                        then: store,
                        els: vec![],
                    }),
                    _ => store.into_iter().for_each(|s| e.push(s)),
                }
            });
        });
        e.finish("dia")
    }

    fn run(f: &Function, rows: i64) -> Vec<i64> {
        run_of(f, rows, 3)
    }

    /// `run` where the fewest rows tiled is read from the array `from`.
    fn run_from(f: &Function, rows: i64, from_rows: i64) -> Vec<i64> {
        run_arrays(f, rows, 3, vec![("from", vec![from_rows])])
    }

    fn run_of(f: &Function, rows: i64, count: i64) -> Vec<i64> {
        run_arrays(f, rows, count, Vec::new())
    }

    fn run_arrays(f: &Function, rows: i64, count: i64, more: Vec<(&str, Vec<i64>)>) -> Vec<i64> {
        let mut arrays = vec![
            (
                "off",
                (0..count).map(|d| [-1, 0, 2][d as usize % 3]).collect(),
            ),
            ("v", (0..count * rows).map(|k| k % 7 - 3).collect()),
            ("x", (0..rows).map(|k| k % 5 + 1).collect()),
            ("y", vec![0; rows as usize + 1]),
        ];
        arrays.extend(more);
        test_memory::run(f, arrays, "y")
    }

    /// Whether `f` has a loop over tiles (the tiled nest, run or not).
    fn has_tiles(f: &Function) -> bool {
        let mut tiles = false;
        crate::ir::walk_block(&f.body, &mut |s| {
            if let Stmt::Let(v, _) = s {
                tiles |= f.vars[*v as usize].name.ends_with("_tile");
            }
        });
        tiles
    }

    /// Rows in tiles give every row the same sum, for row counts below,
    /// at and across tile boundaries.
    #[test]
    fn tiled_diagonals_sum_alike() {
        for variant in [None, Some("guarded")] {
            for rows in [5, TILE - 1, TILE, TILE + 3, 2 * TILE + 1] {
                let f = diagonals(rows, variant);
                // Tiles from one row, so that the interpreter takes them.
                let mut g = f.clone();
                tile_rows_from(&mut g, &Expr::Int(1));
                assert!(has_tiles(&g), "{}", crate::ir::print::function(&g));
                assert_eq!(run(&f, rows), run(&g, rows), "{rows} rows, {variant:?}");
            }
        }
    }

    /// Past `MAX_STREAMS` outer iterations the nest runs untiled, with the
    /// same sums.
    #[test]
    fn many_diagonals_run_untiled_alike() {
        for count in [MAX_STREAMS, MAX_STREAMS + 1] {
            let rows = 2 * TILE + 1;
            let f = diagonals_of(rows, count, None);
            let mut g = f.clone();
            tile_rows_from(&mut g, &Expr::Int(1));
            assert_eq!(has_tiles(&g), count <= MAX_STREAMS, "{count} diagonals");
            assert_eq!(
                run_of(&f, rows, count),
                run_of(&g, rows, count),
                "{count} diagonals"
            );
        }
    }

    /// A loop shared among threads (`Function::shares`) is short in every
    /// share where it is short as a whole; where it is not, each share
    /// tests its own length.
    #[test]
    fn shares_of_a_short_loop_are_short() {
        let rows = 2 * TILE + 1;
        for count in [3, MAX_STREAMS + 1] {
            let mut f = diagonals_of(rows, count, None);
            let begin = fresh_var(&mut f.vars, "share_begin", Ty::I64);
            let end = fresh_var(&mut f.vars, "share_end", Ty::I64);
            let Some(Stmt::For { lo, hi, .. }) = f.body.first_mut() else {
                panic!("the diagonals' loop comes first");
            };
            (*lo, *hi) = (Expr::Var(begin), Expr::Var(end));
            f.body.splice(
                0..0,
                [
                    Stmt::Let(begin, Expr::Int(0)),
                    Stmt::Let(end, Expr::Int(count)),
                ],
            );
            f.shares = Some(crate::ir::ShareBounds { begin, end });
            let mut g = f.clone();
            tile_rows_from(&mut g, &Expr::Int(1));
            let tested = g.body.iter().any(|s| matches!(s, Stmt::If { .. }));
            assert!(has_tiles(&g), "{count} diagonals");
            assert_eq!(tested, count > MAX_STREAMS, "{count} diagonals");
            assert_eq!(
                run_of(&f, rows, count),
                run_of(&g, rows, count),
                "{count} diagonals"
            );
        }
    }

    /// The runtime test takes the tiles from `from_rows` rows on, and the
    /// nest as it was below: with the tiled arm marked (it also stores 99
    /// at `y[rows]`, a slot no row writes), the mark shows which arm ran.
    /// Both arms give the same sums.
    #[test]
    fn tiles_start_at_their_row_count() {
        let rows = TILE + 3;
        // Known when compiled (the Cranelift tier's fixed sizes): one side
        // of the test is kept, without it.
        for (from_rows, tiled) in [(rows + 1, false), (rows, true), (1, true)] {
            let f = diagonals(rows, None);
            let mut g = f.clone();
            tile_rows_from(&mut g, &Expr::Int(from_rows));
            assert_eq!(has_tiles(&g), tiled, "{rows} rows from {from_rows}");
            assert!(!g.body.iter().any(|s| matches!(s, Stmt::If { .. })));
            assert_eq!(run(&f, rows), run(&g, rows), "{rows} rows from {from_rows}");
        }
        // Known only when run (the C's target constant): both sides, and
        // the test picks.
        for (from_rows, tiled) in [(rows + 1, false), (rows, true), (1, true)] {
            let f = diagonals(rows, None);
            let mut g = f.clone();
            tile_rows_from(&mut g, &Expr::load(array("from"), Expr::Int(0)));
            let mut marked = g.clone();
            for s in &mut marked.body {
                if let Stmt::If { then, .. } = s {
                    then.push(Stmt::Store(array("y"), Expr::Int(rows), Expr::Int(99)));
                }
            }
            let ran = run_from(&marked, rows, from_rows);
            assert_eq!(
                ran[rows as usize] == 99,
                tiled,
                "{rows} rows from {from_rows}"
            );
            assert_eq!(
                run(&f, rows),
                run_from(&g, rows, from_rows),
                "{rows} rows from {from_rows}"
            );
        }
        let mut g = diagonals(8, None);
        tile_rows(&mut g, Backend::C);
        assert!(
            has_tiles(&g),
            "the C keeps the tiled nest for the target to pick"
        );
        let mut g = diagonals(8, None);
        tile_rows(&mut g, Backend::Cranelift);
        assert!(!has_tiles(&g), "8 rows are never tiled on this host");
    }

    /// A row that touches another row's entry, or a read of the result
    /// outside the rows, leaves the nest as it is.
    #[test]
    fn rows_that_depend_on_each_other_stay() {
        for bad in [
            "stores a neighbour",
            "reads a neighbour",
            "reads y above",
            "guarded, reads a neighbour",
        ] {
            let mut f = diagonals(8, Some(bad));
            let before = f.body.clone();
            tile_rows(&mut f, Backend::C);
            assert_eq!(f.body, before, "{bad}");
        }
    }
}
