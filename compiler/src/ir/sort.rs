//! Sorting an index array inside a kernel, written in the loop IR itself so
//! that both backends (and the C a user reads) run the same code with no
//! call into a runtime: a shell sort with Gonnet's gaps (n/2, then x5/11;
//! gap 1, insertion, for short arrays), in place, on the first `len`
//! elements; and, for keys that also have
//! flags in a dense array (a workspace row's touched list), a scan of the
//! flags when the keys span few coordinates for their number.

use super::{ArrayRef, CmpOp, Emitter, Expr, Stmt};

impl Emitter {
    /// Sort `keys[0..len)` ascending: distinct coordinates, each with
    /// `flags[key] == 1`, every other flag 0. When the keys span at most
    /// `len * min(len, 16)` coordinates (about what sorting's mispredicted
    /// comparisons cost; 16 measured best on cage8), a branch-free scan of
    /// the flags over the span writes them back in order (SpGEMM rows of
    /// FEM-like matrices: 54 entries over 600 columns); otherwise
    /// `sort_keys`. The scan overwrites only keys already passed: entry `k` is
    /// written while at most `k` flagged coordinates lie below.
    pub fn sort_flagged_keys(&mut self, keys: &ArrayRef, len: Expr, flags: &ArrayRef) {
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
        let budget = Expr::mul(len.clone(), Expr::min(len.clone(), Expr::Int(16)));
        let scan = self.block(|e| {
            let at = e.let_var("sat", Expr::Int(0));
            e.for_("sc", lo.clone(), Expr::add(hi.clone(), Expr::Int(1)), |e, j| {
                e.store(keys.clone(), at.clone(), j.clone());
                e.set(&at, Expr::add(at.clone(), Expr::load(flags.clone(), j)));
            });
        });
        let sort = self.block(|e| e.sort_keys(keys, len.clone()));
        self.push(Stmt::If { cond: Expr::cmp(CmpOp::Le, span, budget), then: scan, els: sort });
    }

    /// Sort `keys[0..len)` ascending: a shell sort, which starts at gap 1
    /// (plain insertion) for up to 32 keys, most SpGEMM rows: fewer
    /// mispredicted comparisons there than the larger gaps cost (measured
    /// with callgrind's branch simulation on a power-law SpGEMM: 12% fewer
    /// estimated cycles in the kernel on both tiers).
    pub fn sort_keys(&mut self, keys: &ArrayRef, len: Expr) {
        let short = Expr::cmp(CmpOp::Le, len.clone(), Expr::Int(32));
        let gap = Expr::select(short, Expr::Int(1), Expr::div(len.clone(), Expr::Int(2)));
        self.shell_sort_from(keys, len, gap);
    }

    /// Shell sort with Gonnet's gaps from `gap0`.
    fn shell_sort_from(&mut self, keys: &ArrayRef, len: Expr, gap0: Expr) {
        let gap = self.let_var("gap", gap0);
        let keys = keys.clone();
        self.while_(Expr::cmp(CmpOp::Gt, gap.clone(), Expr::Int(0)), |e| {
            e.for_("si", gap.clone(), len.clone(), |e, i| {
                let key = e.let_var("skey", Expr::load(keys.clone(), i.clone()));
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
                            e.set(&j, Expr::sub(j.clone(), gap.clone()));
                        });
                        let stop = e.block(|e| e.set(&more, Expr::Bool(false)));
                        e.push(Stmt::If { cond: Expr::cmp(CmpOp::Gt, prev.clone(), key.clone()), then: shift, els: stop });
                    });
                    let stop = e.block(|e| e.set(&more, Expr::Bool(false)));
                    e.push(Stmt::If { cond: Expr::cmp(CmpOp::Ge, j.clone(), gap.clone()), then, els: stop });
                });
                e.store(keys.clone(), j, key);
            });
            let next = Expr::select(Expr::eq(gap.clone(), Expr::Int(2)), Expr::Int(1), Expr::div(Expr::mul(gap.clone(), Expr::Int(5)), Expr::Int(11)));
            e.set(&gap, next);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coo::SplitMix;
    use crate::ir::interp::{Interp, Memory, Value};
    use crate::ir::{ElemTy, ParamRef, Slot};

    /// Two scratch arrays: the keys and their flags.
    struct Arrays {
        keys: Vec<i64>,
        flags: Vec<i64>,
    }

    impl Memory for Arrays {
        fn param(&self, _p: &ParamRef) -> Result<i64, String> {
            Err("no parameters".into())
        }
        fn load(&self, a: &ArrayRef, i: i64) -> Result<Value, String> {
            let v = if a.tensor == "keys" { &self.keys } else { &self.flags };
            v.get(i as usize).map(|&x| Value::I(x)).ok_or_else(|| format!("load {i} beyond {}", a.tensor))
        }
        fn store(&mut self, a: &ArrayRef, i: i64, v: Value) -> Result<(), String> {
            let arr = if a.tensor == "keys" { &mut self.keys } else { &mut self.flags };
            *arr.get_mut(i as usize).ok_or_else(|| format!("store {i} beyond {}", a.tensor))? = v.int()?;
            Ok(())
        }
        fn reserve(&mut self, _a: &ArrayRef, _len: i64) -> Result<(), String> {
            Ok(())
        }
    }

    fn array(name: &str) -> ArrayRef {
        ArrayRef { tensor: name.into(), slot: Slot::Scratch(name.into(), ElemTy::I32) }
    }

    /// Distinct keys below `extent` in random order, sorted by the emitted
    /// code.
    #[test]
    fn flagged_keys_come_out_sorted() {
        let mut rng = SplitMix(11);
        // Dense spans take the scan; up to 32 sparse keys the insertion
        // sort; more the shell sort.
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
                    e.sort_flagged_keys(&array("keys"), len, &array("flags"));
                    let f = e.finish("sort");
                    let mut padded = keys.clone();
                    padded.resize(extent, -7);
                    let mut mem = Arrays { keys: padded, flags };
                    Interp::new(f.vars.len(), &mut mem).run(&f.body).unwrap();
                    let mut expected = keys.clone();
                    expected.sort_unstable();
                    assert_eq!(mem.keys[..count], expected[..], "extent {extent}, {count} keys");
                }
            }
        }
    }
}
