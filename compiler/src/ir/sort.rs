//! Sorting an index array inside a kernel, written in the loop IR itself so
//! that both backends (and the C a user reads) run the same code with no
//! call into a runtime: a shell sort with Gonnet's gaps (n/2, then x5/11;
//! gap 1, insertion, for short arrays), in place, on the first `len`
//! elements; and, for keys that also have
//! flags in a dense array (a workspace row's touched list), a scan of the
//! flags when the keys span few coordinates for their number.

use super::{ArrayRef, CmpOp, Emitter, Expr, Stmt};

/// The most keys `sort_flagged_keys` leaves to be placed by rank: ranking
/// is quadratic but branch-free (and vectorized on the cc tier), so it beats
/// a shell sort's mispredicted comparisons well past 32 keys. Measured on a
/// power-law SpGEMM (200K rows, rows of 13 keys on average, 11K rows of
/// 33-3000): kernel minimum 84 ms with insertion/shell sort, 76 ms ranking
/// up to 64 keys, 65 ms up to 128, 64 ms up to 256 (cc tier); the Cranelift
/// tier is best at 128 (95 against 102 ms).
pub const RANKED_KEYS: i64 = 128;

impl Emitter {
    /// Order `keys[0..len)` ascending: distinct coordinates, each with
    /// `flags[key] == 1`, every other flag 0. When the keys span at most
    /// `len * min(len, 16)` coordinates (about what sorting's mispredicted
    /// comparisons cost; 16 measured best on cage8), a branch-free scan of
    /// the flags over the span writes them back in order (SpGEMM rows of
    /// FEM-like matrices: 54 entries over 600 columns). The scan overwrites
    /// only keys already passed: entry `k` is written while at most `k`
    /// flagged coordinates lie below. Otherwise up to `RANKED_KEYS` keys are
    /// left where they are and the returned flag is set: the caller places
    /// each key at its `rank_of` (most rows of a power-law SpGEMM, where
    /// insertion sort mispredicts once per key); more keys are sorted by
    /// `sort_keys`. The flag is an IR variable, false unless
    /// the keys are to be ranked.
    pub fn sort_flagged_keys(&mut self, keys: &ArrayRef, len: Expr, flags: &ArrayRef) -> Expr {
        let ranked = self.let_var("sranked", Expr::Bool(false));
        let (lo, hi, narrow) = self.key_span(keys, len.clone());
        let scan = self.block(|e| {
            let at = e.let_var("sat", Expr::Int(0));
            e.for_(
                "sc",
                lo.clone(),
                Expr::add(hi.clone(), Expr::Int(1)),
                |e, j| {
                    e.store(keys.clone(), at.clone(), j.clone());
                    e.set(&at, Expr::add(at.clone(), Expr::load(flags.clone(), j)));
                },
            );
        });
        let sort = self.block(|e| {
            let few = e.block(|e| e.set(&ranked, Expr::Bool(true)));
            let many = e.block(|e| e.sort_keys(keys, len.clone()));
            e.push(Stmt::If {
                cond: Expr::cmp(CmpOp::Le, len.clone(), Expr::Int(RANKED_KEYS)),
                then: few,
                els: many,
            });
        });
        self.push(Stmt::If {
            cond: narrow,
            then: scan,
            els: sort,
        });
        ranked
    }

    /// The least and greatest of `keys[0..len)` (0 and -1 for none), and
    /// whether they span at most `len * min(len, 16)` coordinates: narrow
    /// enough that a scan over the span costs less than sorting's
    /// mispredicted comparisons (16 measured best on cage8's SpGEMM rows).
    fn key_span(&mut self, keys: &ArrayRef, len: Expr) -> (Expr, Expr, Expr) {
        let lo = self.let_var("slo", Expr::Int(0));
        let hi = self.let_var("shi", Expr::Int(-1));
        self.if_(Expr::cmp(CmpOp::Gt, len.clone(), Expr::Int(0)), |e| {
            e.set(&lo, Expr::load(keys.clone(), Expr::Int(0)));
            e.set(&hi, lo.clone());
            e.for_("sm", Expr::Int(1), len.clone(), |e, t| {
                let k = e.let_var("sk", Expr::load(keys.clone(), t));
                e.set(&lo, Expr::min(lo.clone(), k.clone()));
                e.set(&hi, Expr::max(hi.clone(), k));
            });
        });
        let span = Expr::add(Expr::sub(hi.clone(), lo.clone()), Expr::Int(1));
        let budget = Expr::mul(len.clone(), Expr::min(len, Expr::Int(16)));
        (lo, hi, Expr::cmp(CmpOp::Le, span, budget))
    }

    /// Order distinct `keys[0..len)` ascending, moving `partner[t]` (at
    /// least 0) with each key: a reordered level's coordinates and their
    /// positions (`Reorder`). Keys spanning few coordinates for their
    /// number are scattered into `slots` (a scratch array, all zero
    /// between calls, grown to the span) as `partner + 1` and gathered back
    /// by a branch-free scan that leaves the slots zero again: a row of a
    /// hash table, or an unordered row of a FEM-like matrix, in linear
    /// time. Others go through `sort_pairs`.
    pub fn sort_distinct_pairs(
        &mut self,
        keys: &ArrayRef,
        partner: &ArrayRef,
        len: Expr,
        slots: &ArrayRef,
    ) {
        let (lo, hi, narrow) = self.key_span(keys, len.clone());
        let span = Expr::add(Expr::sub(hi, lo.clone()), Expr::Int(1));
        let scan = self.block(|e| {
            e.reserve(slots.clone(), span.clone());
            e.for_("sp", Expr::Int(0), len.clone(), |e, t| {
                let slot = Expr::sub(Expr::load(keys.clone(), t.clone()), lo.clone());
                e.store(
                    slots.clone(),
                    slot,
                    Expr::add(Expr::load(partner.clone(), t), Expr::Int(1)),
                );
            });
            // Writes at `at` only overwrite entries already scattered: at
            // most `c` of the keys lie below `lo + c`.
            let at = e.let_var("sat", Expr::Int(0));
            e.for_("sc", Expr::Int(0), span.clone(), |e, c| {
                let held = e.let_var("sheld", Expr::load(slots.clone(), c.clone()));
                e.store(keys.clone(), at.clone(), Expr::add(c.clone(), lo.clone()));
                e.store(
                    partner.clone(),
                    at.clone(),
                    Expr::sub(held.clone(), Expr::Int(1)),
                );
                e.set(
                    &at,
                    Expr::add(
                        at.clone(),
                        Expr::select(
                            Expr::cmp(CmpOp::Ne, held, Expr::Int(0)),
                            Expr::Int(1),
                            Expr::Int(0),
                        ),
                    ),
                );
                e.store(slots.clone(), c, Expr::Int(0));
            });
        });
        let sort = self.block(|e| e.sort_pairs(keys, partner, len.clone()));
        self.push(Stmt::If {
            cond: narrow,
            then: scan,
            els: sort,
        });
    }

    /// The number of `keys[0..len)` below `key`: its place among distinct
    /// keys once sorted. A loop without branches (the cc tier's compiler
    /// vectorizes it), quadratic over a row, so only for `RANKED_KEYS`.
    pub fn rank_of(&mut self, keys: &ArrayRef, len: Expr, key: Expr) -> Expr {
        let rank = self.let_var("srank", Expr::Int(0));
        self.for_("sr", Expr::Int(0), len, |e, m| {
            let below = Expr::select(
                Expr::cmp(CmpOp::Lt, Expr::load(keys.clone(), m), key.clone()),
                Expr::Int(1),
                Expr::Int(0),
            );
            e.set(&rank, Expr::add(rank.clone(), below));
        });
        rank
    }

    /// Sort `keys[0..len)` ascending: a shell sort, which starts at gap 1
    /// (plain insertion) for up to 32 keys, most SpGEMM rows: fewer
    /// mispredicted comparisons there than the larger gaps cost (measured
    /// with callgrind's branch simulation on a power-law SpGEMM: 12% fewer
    /// estimated cycles in the kernel on both tiers).
    pub fn sort_keys(&mut self, keys: &ArrayRef, len: Expr) {
        let short = Expr::cmp(CmpOp::Le, len.clone(), Expr::Int(32));
        let gap = Expr::select(short, Expr::Int(1), Expr::div(len.clone(), Expr::Int(2)));
        self.shell_sort_from(keys, None, len, gap);
    }

    /// `sort_keys` that moves `partner[t]` along with each `keys[t]`: the
    /// positions of a reordered level's coordinates (`Reorder`).
    pub fn sort_pairs(&mut self, keys: &ArrayRef, partner: &ArrayRef, len: Expr) {
        let short = Expr::cmp(CmpOp::Le, len.clone(), Expr::Int(32));
        let gap = Expr::select(short, Expr::Int(1), Expr::div(len.clone(), Expr::Int(2)));
        self.shell_sort_from(keys, Some(partner), len, gap);
    }

    /// Order distinct `keys[0..len)` with their partners for the caller to
    /// place: up to `RANKED_KEYS` keys stay where they are and the
    /// returned flag (an IR variable) is set, for each to be placed at its
    /// `rank_of`; more are sorted with `sort_pairs`. A hashed workspace
    /// row, whose keys span too much for a scan.
    pub fn sort_pairs_unless_ranked(
        &mut self,
        keys: &ArrayRef,
        partner: &ArrayRef,
        len: Expr,
    ) -> Expr {
        let ranked = self.let_var(
            "sranked",
            Expr::cmp(CmpOp::Le, len.clone(), Expr::Int(RANKED_KEYS)),
        );
        let sort = self.block(|e| e.sort_pairs(keys, partner, len));
        self.push(Stmt::If {
            cond: ranked.clone(),
            then: Vec::new(),
            els: sort,
        });
        ranked
    }

    /// Shell sort with Gonnet's gaps from `gap0`, carrying `partner`.
    fn shell_sort_from(
        &mut self,
        keys: &ArrayRef,
        partner: Option<&ArrayRef>,
        len: Expr,
        gap0: Expr,
    ) {
        let gap = self.let_var("gap", gap0);
        let keys = keys.clone();
        self.while_(Expr::cmp(CmpOp::Gt, gap.clone(), Expr::Int(0)), |e| {
            e.for_("si", gap.clone(), len.clone(), |e, i| {
                let key = e.let_var("skey", Expr::load(keys.clone(), i.clone()));
                let carried = partner.map(|a| e.let_var("smate", Expr::load(a.clone(), i.clone())));
                let j = e.let_var("sj", i);
                let more = e.let_var("smore", Expr::Bool(true));
                // Shift larger keys up by `gap`; the load below `gap` is
                // never made (no short-circuit `&&` in the IR).
                e.while_(more.clone(), |e| {
                    let then = e.block(|e| {
                        let prev = Expr::load(keys.clone(), Expr::sub(j.clone(), gap.clone()));
                        let prev = e.let_var("sprev", prev);
                        let shift = e.block(|e| {
                            e.store(keys.clone(), j.clone(), prev.clone());
                            if let Some(a) = partner {
                                e.store(
                                    a.clone(),
                                    j.clone(),
                                    Expr::load(a.clone(), Expr::sub(j.clone(), gap.clone())),
                                );
                            }
                            e.set(&j, Expr::sub(j.clone(), gap.clone()));
                        });
                        let stop = e.block(|e| e.set(&more, Expr::Bool(false)));
                        e.push(Stmt::If {
                            cond: Expr::cmp(CmpOp::Gt, prev.clone(), key.clone()),
                            then: shift,
                            els: stop,
                        });
                    });
                    let stop = e.block(|e| e.set(&more, Expr::Bool(false)));
                    e.push(Stmt::If {
                        cond: Expr::cmp(CmpOp::Ge, j.clone(), gap.clone()),
                        then,
                        els: stop,
                    });
                });
                e.store(keys.clone(), j.clone(), key);
                if let (Some(a), Some(mate)) = (partner, carried) {
                    e.store(a.clone(), j, mate);
                }
            });
            let next = Expr::select(
                Expr::eq(gap.clone(), Expr::Int(2)),
                Expr::Int(1),
                Expr::div(Expr::mul(gap.clone(), Expr::Int(5)), Expr::Int(11)),
            );
            e.set(&gap, next);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coo::SplitMix;
    use crate::ir::interp::test_memory::{scratch as array, Arrays};
    use crate::ir::interp::Interp;

    /// Pairs sorted by key, each partner moved with its key: every length
    /// around the insertion-sort limit and past it, repeated keys too.
    #[test]
    fn pairs_sort_by_key_carrying_their_partners() {
        let mut rng = SplitMix(5);
        for count in [0usize, 1, 2, 5, 31, 32, 33, 64, 100, 1000] {
            for spread in [3u64, 1 << 20] {
                let keys: Vec<i64> = (0..count).map(|_| rng.below(spread) as i64).collect();
                let mut e = Emitter::new();
                e.sort_pairs(&array("keys"), &array("mates"), Expr::Int(count as i64));
                let f = e.finish("sort");
                let arrays = vec![
                    ("keys".to_string(), keys.clone()),
                    ("mates".to_string(), (0..count as i64).collect()),
                ];
                sorted_with_partners(&f, arrays, &keys);
                // Distinct keys, narrow or wide: scanned through zeroed
                // slots (left zero), or sorted.
                let mut distinct = keys.clone();
                distinct.sort_unstable();
                distinct.dedup();
                for t in (1..distinct.len()).rev() {
                    distinct.swap(t, rng.below(t as u64 + 1) as usize);
                }
                let mut e = Emitter::new();
                e.sort_distinct_pairs(
                    &array("keys"),
                    &array("mates"),
                    Expr::Int(distinct.len() as i64),
                    &array("slots"),
                );
                let f = e.finish("sort");
                let arrays = vec![
                    ("keys".to_string(), distinct.clone()),
                    ("mates".to_string(), (0..distinct.len() as i64).collect()),
                    ("slots".to_string(), vec![0; 1 << 21]),
                ];
                let slots = sorted_with_partners(&f, arrays, &distinct);
                assert!(slots.iter().all(|&s| s == 0), "slots left set");
            }
        }
    }

    /// Run `f` on `arrays`; check that `keys` came out in order, each with
    /// its partner (its index in `original`). Returns the slots.
    fn sorted_with_partners(
        f: &crate::ir::Function,
        arrays: Vec<(String, Vec<i64>)>,
        original: &[i64],
    ) -> Vec<i64> {
        let count = original.len();
        let mut mem = Arrays(arrays.into_iter().collect());
        Interp::new(f.vars.len(), &mut mem).run(&f.body).unwrap(); // ok: test code, a panic is a failed test
        let (sorted, mates) = (&mem.0["keys"], &mem.0["mates"]);
        assert!(
            sorted.windows(2).all(|w| w[0] <= w[1]),
            "{count} keys not in order"
        );
        let mut seen = vec![false; count];
        for (k, &m) in sorted.iter().zip(mates) {
            assert_eq!(
                *k, original[m as usize],
                "{count} keys: a partner left its key"
            );
            seen[m as usize] = true;
        }
        assert!(seen.iter().all(|&s| s), "{count} keys: a partner lost");
        mem.0.remove("slots").unwrap_or_default()
    }

    /// Distinct keys below `extent` in random order, put in order by the
    /// emitted code: sorted in place, or each placed at its rank.
    #[test]
    fn flagged_keys_come_out_sorted() {
        let mut rng = SplitMix(11);
        // Dense spans take the scan; up to 32 sparse keys are ranked; more
        // take the shell sort.
        for extent in [1usize, 2, 7, 64, 1000, 100_000] {
            for count in [0usize, 1, 2, 3, 10, 32, 33, 60, 300] {
                let count = count.min(extent);
                for _ in 0..4 {
                    let mut pool: Vec<i64> = (0..extent as i64).collect();
                    for i in (1..pool.len()).rev() {
                        pool.swap(i, rng.below(i as u64 + 1) as usize);
                    }
                    let keys: Vec<i64> = pool[..count].to_vec();
                    let mut flags = vec![0; extent];
                    for &k in &keys {
                        flags[k as usize] = 1;
                    }
                    let mut e = Emitter::new();
                    let len = e.let_var("len", Expr::Int(count as i64));
                    let ranked = e.sort_flagged_keys(&array("keys"), len.clone(), &array("flags"));
                    // Place every key in `out`: at its rank, or where it is.
                    e.for_("t", Expr::Int(0), len.clone(), |e, t| {
                        let key = e.let_var("key", Expr::load(array("keys"), t.clone()));
                        let place = e.let_var("place", t);
                        e.if_(ranked.clone(), |e| {
                            let r = e.rank_of(&array("keys"), len.clone(), key.clone());
                            e.set(&place, r);
                        });
                        e.store(array("out"), place, key);
                    });
                    let f = e.finish("sort");
                    let mut padded = keys.clone();
                    padded.resize(extent, -7);
                    let arrays = vec![("keys", padded), ("flags", flags), ("out", vec![-1; count])];
                    let out = crate::ir::interp::test_memory::run(&f, arrays, "out");
                    let mut expected = keys.clone();
                    expected.sort_unstable();
                    assert_eq!(out, expected, "extent {extent}, {count} keys");
                }
            }
        }
    }
}
