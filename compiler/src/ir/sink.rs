//! Declarations moved down past loops that do not read them.
//!
//! A value computed before a loop and read only after it is live through
//! the loop: it holds a register there, or Cranelift's allocator spills
//! something else. TTV from CSF into DCSR loads a fiber's coordinate `jB`
//! before the loop over the fiber's entries and appends it after (and a
//! row's `iB` around the loop over its fibers); with them live through
//! those loops, the allocator kept the base of the fibers' `pos` array in
//! a stack slot and reloaded it twice per fiber, and copied the `crd`
//! base between registers at every fiber. Computing such a value after
//! the loop, where it is first read, costs the same work once and frees
//! the register: that TTV ran in 0.89x the time (`bench/ab_builds.sh`, 6
//! of 6 rounds; the result's count still lives in a stack slot).
//!
//! Run on the Cranelift tier's kernels only (gcc's allocator needs no
//! help, and the C a user reads keeps the lowering's order), after the
//! share search is taken out (`jit::shares`): the search reads the
//! declarations before it where the kernel makes them.
//!
//! Only declarations whose value is the same anywhere between: built of
//! constants, parameters, loads of arrays the kernel never writes, and
//! variables nothing between assigns. Loads of inputs may run later or
//! not at all (an allocation that fails first ends the kernel), never
//! elsewhere: the same positions, in the same block.
//!
//! And only where the move frees a register: every variable the value is
//! computed from must be live through the loop anyway (an enclosing
//! loop's variable, or read after it). Moving a merge's next position
//! (`jB <= jC ? pB2_seg : pB2`) past the loop over the matched fibers
//! kept four values live through it instead of one: a three-level COO
//! add ran 1.16x as long.

use super::{stmt_exprs, ArrayRef, Block, Expr, Function, Stmt, VarId};

/// Move each declaration of `f` that a loop separates from its first
/// read down to just before the statement that reads it first. `arrays`:
/// those `f` touches, with whether it writes them (`Function::arrays`).
pub fn sink_past_loops(f: &mut Function, arrays: &[(ArrayRef, bool)]) {
    let written: Vec<&ArrayRef> = arrays.iter().filter(|(_, w)| *w).map(|(a, _)| a).collect();
    let vars = f.vars.len();
    let mut body = std::mem::take(&mut f.body);
    in_block(&mut body, &written, &Vars::new(vars), vars);
    f.body = body;
}

/// Sink in `b` and the blocks it holds; what `b` does, as a whole.
/// `live`: variables live through all of `b`, read by the header of a
/// loop around it (its variable, a `while`'s condition).
fn in_block(b: &mut Block, written: &[&ArrayRef], live: &Vars, vars: usize) -> Summary {
    // Each statement's summary, its nested blocks' first (one walk of
    // the kernel in all, not one per declaration asked about).
    let mut seen: Vec<Summary> = Vec::with_capacity(b.len());
    for s in b.iter_mut() {
        let mut here = Summary::new(vars);
        // A loop's header keeps its variables live through its body.
        let mut inner_live = None;
        match s {
            Stmt::Set(w, _) | Stmt::Let(w, _) => here.assigns.insert(*w),
            Stmt::For { var, .. } => {
                here.assigns.insert(*var);
                here.has_loop = true;
                inner_live.get_or_insert_with(|| live.clone()).insert(*var);
            }
            Stmt::While { cond, .. } => {
                here.has_loop = true;
                let header = inner_live.get_or_insert_with(|| live.clone());
                cond.walk(&mut |y| {
                    if let Expr::Var(w) = y {
                        header.insert(*w);
                    }
                });
            }
            _ => {}
        }
        for e in stmt_exprs(s) {
            e.walk(&mut |y| {
                if let Expr::Var(w) = y {
                    here.reads.insert(*w);
                }
            });
        }
        for inner in super::nested_blocks_mut(s) {
            here.add(&in_block(
                inner,
                written,
                inner_live.as_ref().unwrap_or(live),
                vars,
            ));
        }
        seen.push(here);
    }
    let mut whole = Summary::new(vars);
    seen.iter().for_each(|s| whole.add(s));
    // From the last declaration up: a moved one may read an earlier one,
    // whose first read then comes later.
    for i in (0..b.len()).rev() {
        let Stmt::Let(v, e) = &b[i] else { continue };
        if !recomputable(e, written) {
            continue;
        }
        // The first statement to read or assign it: a `set` before the
        // first read keeps the declaration above it.
        let Some(first) = (i + 1..b.len()).find(|&j| seen[j].touches(*v)) else {
            continue;
        };
        let between = &seen[i + 1..first];
        let inputs = e.vars();
        let live_anyway =
            |w: &VarId| live.contains(*w) || seen[first..].iter().any(|s| s.reads.contains(*w));
        if between.iter().any(|s| s.has_loop)
            && !between
                .iter()
                .any(|s| inputs.iter().any(|w| s.assigns.contains(*w)))
            && inputs.iter().all(live_anyway)
        {
            let s = b.remove(i);
            b.insert(first - 1, s);
            let summary = seen.remove(i);
            seen.insert(first - 1, summary);
        }
    }
    whole
}

/// What statements do, at any depth: the variables they read and assign
/// (`set`, `let`, a loop's variable), and whether they hold a loop.
struct Summary {
    reads: Vars,
    assigns: Vars,
    has_loop: bool,
}

impl Summary {
    fn new(vars: usize) -> Summary {
        Summary {
            reads: Vars::new(vars),
            assigns: Vars::new(vars),
            has_loop: false,
        }
    }

    fn add(&mut self, other: &Summary) {
        self.reads.add(&other.reads);
        self.assigns.add(&other.assigns);
        self.has_loop |= other.has_loop;
    }

    fn touches(&self, v: VarId) -> bool {
        self.reads.contains(v) || self.assigns.contains(v)
    }
}

/// A set of the function's variables, a bit each.
#[derive(Clone)]
struct Vars(Vec<u64>);

impl Vars {
    fn new(vars: usize) -> Vars {
        Vars(vec![0; vars.div_ceil(64)])
    }

    fn insert(&mut self, v: VarId) {
        let v = v as usize;
        if v / 64 >= self.0.len() {
            self.0.resize(v / 64 + 1, 0);
        }
        self.0[v / 64] |= 1 << (v % 64);
    }

    fn contains(&self, v: VarId) -> bool {
        let v = v as usize;
        self.0.get(v / 64).is_some_and(|w| w & (1 << (v % 64)) != 0)
    }

    fn add(&mut self, other: &Vars) {
        if other.0.len() > self.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        for (w, o) in self.0.iter_mut().zip(&other.0) {
            *w |= o;
        }
    }
}

/// Whether `e` is made only of constants, parameters, variables and
/// loads of arrays the kernel does not write.
fn recomputable(e: &Expr, written: &[&ArrayRef]) -> bool {
    let mut ok = true;
    e.walk(&mut |x| {
        ok &= match x {
            Expr::Load(a, _) => !written.contains(&a),
            _ => true,
        }
    });
    ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{BinOp, Emitter, ParamRef};

    /// `for r in 0..n { <before the loop>; for p in 0..n { y[p] = 1 };
    /// <after it> }`, sunk; the outer loop's body as printed lines.
    fn sunk(
        before: impl FnOnce(&mut Emitter, &Expr) -> Expr,
        inner: impl Fn(&mut Emitter, &Expr),
        after: impl FnOnce(&mut Emitter, &Expr),
    ) -> Vec<String> {
        let y = ArrayRef::vals("y");
        let n = Expr::Param(ParamRef::dim("y", 0));
        let mut e = Emitter::new();
        e.for_("r", Expr::Int(0), n.clone(), |e, r| {
            let c = before(e, &r);
            e.for_("p", Expr::Int(0), n.clone(), |e, p| {
                e.store(y.clone(), p, Expr::Float(1.0));
                inner(e, &c);
            });
            after(e, &c);
        });
        let mut f = e.finish("k");
        let arrays = f.arrays();
        sink_past_loops(&mut f, &arrays);
        let text = crate::ir::print::function(&f);
        text.lines().map(|l| l.trim().to_string()).collect()
    }

    /// Whether the line declaring `decl` comes after the inner loop.
    fn after_the_loop(lines: &[String], decl: &str) -> bool {
        let at = |start: &str| {
            lines
                .iter()
                .position(|l| l.starts_with(start))
                .unwrap_or_else(|| panic!("no {start}: {lines:#?}")) // ok: test code
        };
        at(decl) > at("for p")
    }

    fn crd() -> ArrayRef {
        ArrayRef::level("X", 0, "crd")
    }

    #[test]
    fn a_coordinate_read_after_the_loop_is_loaded_there() {
        let lines = sunk(
            |e, r| e.let_var("c", Expr::load(crd(), r.clone())),
            |_, _| {},
            |e, c| e.store(ArrayRef::vals("z"), c.clone(), Expr::Float(2.0)),
        );
        assert!(after_the_loop(&lines, "let c"), "{lines:#?}");
    }

    #[test]
    fn a_flag_the_loop_sets_stays_declared_before_it() {
        let lines = sunk(
            |e, _| e.let_var("touched", Expr::Int(0)),
            |e, t| e.set(t, Expr::Int(1)),
            |e, t| {
                e.if_(Expr::ne(t.clone(), Expr::Int(0)), |e| {
                    e.store(ArrayRef::vals("z"), Expr::Int(0), Expr::Float(2.0))
                })
            },
        );
        assert!(!after_the_loop(&lines, "let touched"), "{lines:#?}");
    }

    /// `a <= b ? a : b` read after the loop would keep `a` and `b` live
    /// through it, where only the choice was.
    #[test]
    fn a_value_whose_inputs_die_before_the_loop_stays() {
        let lines = sunk(
            |e, r| {
                let a = e.let_var("a", Expr::load(crd(), r.clone()));
                let b = e.let_var("b", Expr::add(r.clone(), Expr::Int(1)));
                let le = Expr::cmp(crate::ir::CmpOp::Le, a.clone(), b.clone());
                e.let_var("next", Expr::select(le, a, b))
            },
            |_, _| {},
            |e, next| e.store(ArrayRef::vals("z"), next.clone(), Expr::Float(2.0)),
        );
        assert!(!after_the_loop(&lines, "let next"), "{lines:#?}");
    }

    #[test]
    fn a_load_of_an_array_the_kernel_writes_stays() {
        let lines = sunk(
            |e, r| e.let_var("c", Expr::load(ArrayRef::vals("y"), r.clone())),
            |_, _| {},
            |e, c| e.store(ArrayRef::vals("z"), Expr::Int(0), c.clone()),
        );
        assert!(!after_the_loop(&lines, "let c"), "{lines:#?}");
    }

    #[test]
    fn a_value_whose_input_the_loop_assigns_stays() {
        let lines = sunk(
            |e, r| {
                let q = e.let_var("q", r.clone());
                let c = e.let_var("c", Expr::load(crd(), q.clone()));
                Expr::bin(BinOp::Add, c, q)
            },
            |e, cq| {
                if let Expr::Bin(_, _, q) = cq {
                    e.set(q, Expr::add((**q).clone(), Expr::Int(1)));
                }
            },
            |e, cq| e.store(ArrayRef::vals("z"), cq.clone(), Expr::Float(2.0)),
        );
        assert!(!after_the_loop(&lines, "let c"), "{lines:#?}");
    }
}
