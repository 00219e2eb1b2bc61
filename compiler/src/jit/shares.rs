//! Thread shares searched by the caller instead of the compiled code.
//!
//! A kernel whose outermost loop runs in shares finds its own share's
//! bounds (`lower::parallel`): per boundary, a binary search over the
//! loop's iterations weighed by their positions, then a walk past a run of
//! equal coordinates. Compiled, that search is a loop nest with many values
//! live across it, and it was about half of Cranelift's work on most
//! kernels: CSR SpMV compiled in 0.81 ms with it and 0.38 ms without, SpDM
//! in 1.31 and 0.87, MTTKRP in 1.44 and 0.97 (CPU time,
//! `examples/compile_time.rs`).
//!
//! So the Cranelift tier compiles the kernel without it: the search
//! becomes "if it would run, take the bounds from the call parameters
//! `share_begin` and `share_end`", and each call of a shared kernel runs
//! the search itself in the IR interpreter, on the call's own arguments,
//! with the declarations it reads and the conditions under which the
//! kernel reaches it. A few dozen interpreted steps per boundary cost
//! microseconds, against calls worth sharing (`threads::used` shares only
//! inputs of at least 512K stored values). The C tier keeps the search in
//! the kernel: C a user ships computes its own shares, and gcc's time is
//! spent in the background.
//!
//! Exact by construction: the interpreter runs the very statements the
//! kernel would, on the same values. They read no array the kernel writes,
//! and no variable the kernel assigns before them, so running them before
//! the call gives what the kernel would have computed. Where the kernel's
//! shape does not allow that, it keeps its search.

use crate::ir::interp::{Interp, Memory, Value};
use crate::ir::{
    walk_block, BinOp, Block, CmpOp, Expr, Function, ParamRef, ShareBounds, Stmt, Ty, VarId,
    VarInfo, CALL_SHARE_BEGIN, CALL_SHARE_END, CALL_THREADS,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

/// The share search of a kernel compiled without it, as a program for the
/// interpreter: the declarations the search reads, under the conditions
/// the kernel reaches it by, then the search.
#[derive(Debug)]
pub(crate) struct ShareSearch {
    program: Block,
    vars: usize,
    bounds: ShareBounds,
    /// Set once the program reaches the search.
    reached: VarId,
    /// The bounds before the search: the whole loop, which a share lies in.
    whole: (VarId, VarId),
    /// Searches of earlier calls (the interpreter takes about 5 us a
    /// boundary; a timing loop calls with the same arguments again and
    /// again).
    memos: Mutex<Vec<Memo>>,
}

/// One value a search read: element `at` of the kernel's array number
/// `array` (in `CompiledKernel::arrays`), as bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Read {
    pub array: usize,
    pub at: i64,
    pub bits: u64,
}

/// A call's arguments as a search reads them: the interpreter's memory,
/// noting what it reads.
pub(crate) trait CallArguments: Memory {
    /// The call's parameters, call parameters included.
    fn params(&self) -> &[i64];
    /// What was read since the last `take_reads`.
    fn take_reads(&mut self) -> Vec<Read>;
    /// Whether the call's array still holds what `read` saw.
    fn holds(&self, read: &Read) -> bool;
}

/// What a search found, and everything it read on the way. The program
/// reads nothing else, so a call with the same parameters whose arrays
/// hold the same values at those positions takes the same steps to the
/// same bounds: a memo is exact, never a guess.
#[derive(Debug)]
struct Memo {
    params: Vec<i64>,
    reads: Vec<Read>,
    found: Option<(i64, i64)>,
}

/// Memos kept per kernel: a share each for a few thread counts.
const MEMOS: usize = 64;

/// Interpreted statements at most (a search takes a few dozen per
/// boundary): a malformed search stops with an error instead of spinning.
const FUEL: u64 = 1 << 26;

impl ShareSearch {
    /// The bounds `[begin, end)` of the share `args` describes (its call
    /// parameters and arrays), or `None` when the kernel would not reach
    /// the search (the call then reads no share bounds).
    pub fn bounds(&self, args: &mut dyn CallArguments) -> Result<Option<(i64, i64)>, String> {
        let remembered = |memos: &Vec<Memo>| {
            memos
                .iter()
                .find(|m| m.params == args.params() && m.reads.iter().all(|r| args.holds(r)))
                .map(|m| m.found)
        };
        if let Some(found) = self.memos.lock().ok().as_deref().and_then(remembered) {
            return Ok(found);
        }
        args.take_reads();
        let found = self.search(args)?;
        let memo = Memo {
            params: args.params().to_vec(),
            reads: args.take_reads(),
            found,
        };
        if let Ok(mut memos) = self.memos.lock() {
            memos.retain(|m| m.params != memo.params);
            if memos.len() >= MEMOS {
                memos.remove(0);
            }
            memos.push(memo);
        }
        Ok(found)
    }

    fn search(&self, mem: &mut dyn Memory) -> Result<Option<(i64, i64)>, String> {
        let mut interp = Interp::new(self.vars, mem);
        interp.fuel = FUEL;
        interp.run(&self.program)?;
        let var = |v: VarId| interp.vars[v as usize];
        if var(self.reached) != Value::B(true) {
            return Ok(None);
        }
        let int = |v: VarId| var(v).int();
        let (begin, end) = (int(self.bounds.begin)?, int(self.bounds.end)?);
        let (lo, hi) = (int(self.whole.0)?, int(self.whole.1)?);
        if !(lo <= begin && begin <= end && end <= hi) {
            return Err(format!(
                "the share [{begin}, {end}) does not lie in the loop's [{lo}, {hi})"
            ));
        }
        Ok(Some((begin, end)))
    }
}

/// `f` with its share search replaced by reads of the call parameters, and
/// the search as a program; `f` unchanged when it has no search or its
/// shape does not let the search run apart (it then keeps it). Takes `f`
/// to change it in place: a copy of the function cost a tenth of the
/// compile's own passes.
pub(crate) fn split(mut f: Function) -> Result<(Function, ShareSearch), Function> {
    let Some((search, place)) = found(&f) else {
        return Err(f);
    };
    let Some(stmt) = stmt_at_mut(&mut f.body, &place.frames, place.at + 1) else {
        return Err(f);
    };
    let param = |name| Expr::Param(ParamRef::call(name));
    *stmt = Stmt::If {
        cond: place.cond,
        then: vec![
            Stmt::Set(search.bounds.begin, param(CALL_SHARE_BEGIN)),
            Stmt::Set(search.bounds.end, param(CALL_SHARE_END)),
        ],
        els: Vec::new(),
    };
    // Declarations only the search read.
    crate::ir::passes::remove_dead_vars(&mut f);
    Ok((f, search))
}

/// Where the search of `f` sits, for `split` to replace it.
struct SearchPlace {
    /// The `if`s leading to its block.
    frames: Vec<(usize, Branch)>,
    /// Its position in that block, less one (that of `let end`).
    at: usize,
    /// Its condition, which the replacement keeps.
    cond: Expr,
}

/// The search of `f` as a program (`program`), and where it sits; `None`
/// where it has none that can run apart.
fn found(f: &Function) -> Option<(ShareSearch, SearchPlace)> {
    let bounds = f.shares?;
    let path = path_to_let(&f.body, bounds.end)?;
    let (frames, at) = path.split_at(path.len() - 1);
    let at = at[0].0;
    let search = block_at(&f.body, frames)?.get(at + 1)?;
    let Stmt::If { cond, els, .. } = search else {
        return None;
    };
    // Taken only on several threads: calls of one thread need no bounds.
    if !els.is_empty() || !several_threads_only(cond) {
        return None;
    }
    let kept = declarations_read(f, bounds, frames, at, search)?;
    let (program, vars, reached, whole) = program(f, bounds, frames, &kept, search)?;
    let search = ShareSearch {
        program,
        vars,
        bounds,
        reached,
        whole,
        memos: Mutex::new(Vec::new()),
    };
    let place = SearchPlace {
        frames: frames.to_vec(),
        at,
        cond: cond.clone(),
    };
    Some((search, place))
}

/// The declarations the search (at `at + 1` of the block `frames` lead
/// into) and the conditions on the way to it read: per frame, outermost
/// first, the positions of those `let`s in the frame's block. `None` when
/// running them before the call could see other values than the kernel:
/// a variable read is assigned outside the search (or not declared on the
/// way), or an array read is one the kernel writes.
fn declarations_read(
    f: &Function,
    bounds: ShareBounds,
    frames: &[(usize, Branch)],
    at: usize,
    search: &Stmt,
) -> Option<Vec<Vec<usize>>> {
    // Assigned outside the search: what the kernel's sets count more.
    let (all, inside) = (
        assignments(&f.body),
        assignments(std::slice::from_ref(search)),
    );
    let set_outside = |v: &VarId| all.get(v) != inside.get(v);
    // Inside the search, `begin` and `end` are set, and nothing outside it.
    if [bounds.begin, bounds.end].iter().any(set_outside) {
        return None;
    }
    // Innermost frame first, each block from the way's position back.
    let mut needed = free_vars(search);
    needed.insert(bounds.begin);
    needed.insert(bounds.end);
    let mut kept: Vec<Vec<usize>> = vec![Vec::new(); frames.len() + 1];
    let mut declared = BTreeSet::new();
    for depth in (0..=frames.len()).rev() {
        let b = block_at(&f.body, &frames[..depth])?;
        let upto = frames.get(depth).map_or(at + 1, |&(k, _)| k);
        if depth < frames.len() {
            let Stmt::If { cond, .. } = &b[upto] else {
                return None;
            };
            needed.extend(cond.vars());
        }
        for k in (0..upto).rev() {
            if let Stmt::Let(v, e) = &b[k] {
                if needed.contains(v) {
                    kept[depth].push(k);
                    declared.insert(*v);
                    needed.extend(e.vars());
                }
            }
        }
        kept[depth].reverse();
    }
    let reads_outside = needed
        .iter()
        .any(|v| !declared.contains(v) || set_outside(v));
    if reads_outside {
        return None;
    }
    // Only statements write: cheaper to find than every array read.
    let written: Vec<_> = f.written_arrays().into_iter().collect();
    for (depth, ks) in kept.iter().enumerate() {
        let b = block_at(&f.body, &frames[..depth])?;
        if ks.iter().any(|&k| loads_any(&b[k], &written)) {
            return None;
        }
        // The condition of the `if` the way continues into.
        if let Some(Stmt::If { cond, .. }) = frames.get(depth).and_then(|&(k, _)| b.get(k)) {
            if loads_in(cond, &written) {
                return None;
            }
        }
    }
    (!loads_any(search, &written)).then_some(kept)
}

/// The search as a program: the `kept` declarations of each frame, inside
/// the frame's `if` (the branch the way takes), then the bounds' values
/// before the search (`whole`), the search, and `reached` set. Returns it
/// with its number of variables, `reached` and `whole`.
fn program(
    f: &Function,
    bounds: ShareBounds,
    frames: &[(usize, Branch)],
    kept: &[Vec<usize>],
    search: &Stmt,
) -> Option<(Block, usize, VarId, (VarId, VarId))> {
    let mut vars = f.vars.clone();
    let mut fresh = |name: &str, ty: Ty| {
        vars.push(VarInfo {
            name: name.to_string(),
            ty,
        });
        (vars.len() - 1) as VarId
    };
    let reached = fresh("share_reached", Ty::Bool);
    let whole = (
        fresh("share_whole_lo", Ty::I64),
        fresh("share_whole_hi", Ty::I64),
    );
    let declarations = |depth: usize| -> Option<Block> {
        let b = block_at(&f.body, &frames[..depth])?;
        Some(kept[depth].iter().map(|&k| b[k].clone()).collect())
    };
    // Innermost frame first: its declarations, the bounds, the search.
    let mut program = declarations(frames.len())?;
    program.push(Stmt::Let(whole.0, Expr::Var(bounds.begin)));
    program.push(Stmt::Let(whole.1, Expr::Var(bounds.end)));
    program.push(search.clone());
    program.push(Stmt::Set(reached, Expr::Bool(true)));
    for depth in (0..frames.len()).rev() {
        let (k, branch) = frames[depth];
        let Some(Stmt::If { cond, .. }) = block_at(&f.body, &frames[..depth])?.get(k) else {
            return None;
        };
        let inner = std::mem::take(&mut program);
        program = declarations(depth)?;
        let (then, els) = match branch {
            Branch::Then => (inner, Vec::new()),
            Branch::Else => (Vec::new(), inner),
        };
        program.push(Stmt::If {
            cond: cond.clone(),
            then,
            els,
        });
    }
    program.insert(0, Stmt::Let(reached, Expr::Bool(false)));
    Some((program, vars.len(), reached, whole))
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Branch {
    Then,
    Else,
}

/// The way to the statement `let var = ..`: the `if` statements it sits
/// in (position, branch), then its position; `None` if it is not there or
/// sits inside a loop (the kernel would declare it more than once).
fn path_to_let(b: &Block, var: VarId) -> Option<Vec<(usize, Branch)>> {
    for (k, s) in b.iter().enumerate() {
        match s {
            Stmt::Let(v, _) if *v == var => return Some(vec![(k, Branch::Then)]),
            Stmt::If { then, els, .. } => {
                for (inner, branch) in [(then, Branch::Then), (els, Branch::Else)] {
                    if let Some(mut rest) = path_to_let(inner, var) {
                        rest.insert(0, (k, branch));
                        return Some(rest);
                    }
                }
            }
            _ => {}
        }
    }
    None
}

/// The block the `if` statements of `frames` lead into.
fn block_at<'b>(mut b: &'b Block, frames: &[(usize, Branch)]) -> Option<&'b Block> {
    for &(k, branch) in frames {
        let Stmt::If { then, els, .. } = b.get(k)? else {
            return None;
        };
        b = if branch == Branch::Then { then } else { els };
    }
    Some(b)
}

fn stmt_at_mut<'b>(
    mut b: &'b mut Block,
    frames: &[(usize, Branch)],
    at: usize,
) -> Option<&'b mut Stmt> {
    for &(k, branch) in frames {
        let Stmt::If { then, els, .. } = b.get_mut(k)? else {
            return None;
        };
        b = if branch == Branch::Then { then } else { els };
    }
    b.get_mut(at)
}

/// Whether `cond` holds only on several threads: `threads > 1 && ..`.
fn several_threads_only(cond: &Expr) -> bool {
    let threads_above_one = |e: &Expr| {
        matches!(e, Expr::Cmp(CmpOp::Gt, a, b)
            if matches!(a.as_ref(), Expr::Param(p) if p.call_name() == Some(CALL_THREADS))
                && matches!(b.as_ref(), Expr::Int(1)))
    };
    match cond {
        Expr::Bin(BinOp::And, a, _) => threads_above_one(a),
        e => threads_above_one(e),
    }
}

/// How many times the statements of `b` assign (`set`) each variable.
fn assignments(b: &[Stmt]) -> BTreeMap<VarId, usize> {
    let mut out = BTreeMap::new();
    walk_block(b, &mut |s| {
        if let Stmt::Set(v, _) = s {
            *out.entry(*v).or_insert(0) += 1;
        }
    });
    out
}

/// Whether `s` (or a statement inside it) loads one of `arrays`.
fn loads_any(s: &Stmt, arrays: &[crate::ir::ArrayRef]) -> bool {
    let mut hit = false;
    walk_block(std::slice::from_ref(s), &mut |s| {
        hit |= crate::ir::stmt_exprs(s).iter().any(|e| loads_in(e, arrays));
    });
    hit
}

/// Whether `e` loads one of `arrays`.
fn loads_in(e: &Expr, arrays: &[crate::ir::ArrayRef]) -> bool {
    let mut hit = false;
    e.walk(&mut |x| hit |= matches!(x, Expr::Load(a, _) if arrays.contains(a)));
    hit
}

/// The variables `s` reads that it does not declare itself.
fn free_vars(s: &Stmt) -> BTreeSet<VarId> {
    let (mut read, mut declared) = (BTreeSet::new(), BTreeSet::new());
    walk_block(std::slice::from_ref(s), &mut |s| {
        match s {
            Stmt::Let(v, _) => {
                declared.insert(*v);
            }
            Stmt::For { var, .. } => {
                declared.insert(*var);
            }
            _ => {}
        }
        for e in crate::ir::stmt_exprs(s) {
            read.extend(e.vars());
        }
    });
    read.difference(&declared).copied().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{ArrayRef, Parallel};

    /// `expr` over `formats` (name, format, order), lowered and prepared
    /// for code generation as `jit::compile` prepares it.
    fn kernel(expr: &str, formats: &[(&str, &str, usize)]) -> Function {
        crate::ir::passes::lowered_for(expr, formats, crate::ir::passes::Backend::Cranelift)
    }

    fn reads_share_params(f: &Function) -> bool {
        let p = f.params();
        [CALL_SHARE_BEGIN, CALL_SHARE_END]
            .iter()
            .all(|name| p.contains(&ParamRef::call(name)))
    }

    #[test]
    fn the_search_leaves_kernels_of_every_mode() {
        let cases: &[(&str, &[(&str, &str, usize)], Parallel)] = &[
            (
                "y(i) = A(i,j) * x(j)",
                &[("A", "CSR", 2), ("x", "dense", 1), ("y", "dense", 1)],
                Parallel::Rows,
            ),
            (
                "y(i) = A(i,j) * x(j)",
                &[("A", "COO", 2), ("x", "dense", 1), ("y", "dense", 1)],
                Parallel::Rows,
            ),
            (
                "y(i) = A(i,j) * x(j)",
                &[("A", "CSC", 2), ("x", "dense", 1), ("y", "dense", 1)],
                Parallel::Partials,
            ),
            (
                "A(i,j) = B(i,j) + C(i,j)",
                &[("A", "CSR", 2), ("B", "CSR", 2), ("C", "CSR", 2)],
                Parallel::Stitch,
            ),
            (
                "A(i,j) = B(i,k,l) * P(k,j) * Q(l,j)",
                &[
                    ("A", "dense", 2),
                    ("B", "COO", 3),
                    ("P", "dense", 2),
                    ("Q", "dense", 2),
                ],
                Parallel::Rows,
            ),
        ];
        for (expr, formats, mode) in cases {
            let f = kernel(expr, formats);
            assert_eq!(f.parallel, Some(*mode), "{expr} {formats:?}");
            let Ok((k, _)) = split(f.clone()) else {
                panic!("{expr} {formats:?}:\n{f}")
            };
            assert!(!reads_share_params(&f) && reads_share_params(&k), "{k}");
            // The search's loops are gone: what is left is the kernel's.
            let loops = |f: &Function| {
                let mut n = 0;
                walk_block(&f.body, &mut |s| {
                    n += usize::from(matches!(s, Stmt::For { .. } | Stmt::While { .. }))
                });
                n
            };
            assert!(
                loops(&k) + 2 <= loops(&f),
                "{expr}: {} -> {} loops",
                loops(&f),
                loops(&k)
            );
        }
    }

    #[test]
    fn a_search_reading_what_the_kernel_writes_stays_in_it() {
        let formats = [("A", "CSR", 2), ("x", "dense", 1), ("y", "dense", 1)];
        let mut f = kernel("y(i) = A(i,j) * x(j)", &formats);
        f.body.push(Stmt::Store(
            ArrayRef::level("A", 1, "pos"),
            Expr::Int(0),
            Expr::Int(0),
        ));
        assert!(split(f).is_err());
    }

    #[test]
    fn a_search_reading_a_variable_set_elsewhere_stays_in_it() {
        // COO's search reads the declarations of the loop's bounds.
        let formats = [("A", "COO", 2), ("x", "dense", 1), ("y", "dense", 1)];
        let f = kernel("y(i) = A(i,j) * x(j)", &formats);
        assert!(split(f.clone()).is_ok());
        // A declaration the search reads (not its own bounds), assigned
        // again after it.
        let b = f.shares.unwrap(); // ok: test code
        let path = path_to_let(&f.body, b.end).unwrap(); // ok: test code
        let (frames, at) = path.split_at(path.len() - 1);
        let search = &block_at(&f.body, frames).unwrap()[at[0].0 + 1]; // ok: test code
        let read = free_vars(search)
            .into_iter()
            .find(|v| ![b.begin, b.end].contains(v))
            .unwrap(); // ok: test code
        let mut g = f.clone();
        g.body.push(Stmt::Set(read, Expr::Int(0)));
        assert!(split(g).is_err());
    }

    /// A call of thread `thread` of 2 over CSR rows at `pos`, noting its
    /// loads (in cells: the interpreter's `load` takes `&self`).
    struct Noted {
        pos: Vec<i64>,
        /// The call's parameters: the thread is the only one that varies.
        params: Vec<i64>,
        reads: std::cell::RefCell<Vec<Read>>,
        loads: std::cell::Cell<usize>,
    }

    impl Memory for Noted {
        fn param(&self, p: &ParamRef) -> Result<i64, String> {
            match p.c_name().as_str() {
                "A1_N" => Ok(self.pos.len() as i64 - 1),
                other => Err(format!("no parameter {other}")),
            }
        }
        fn call_param(&self, name: &str) -> i64 {
            match name {
                crate::ir::CALL_THREAD => self.params[0],
                _ => 2,
            }
        }
        fn load(&self, a: &ArrayRef, at: i64) -> Result<Value, String> {
            assert_eq!(a, &ArrayRef::level("A", 1, "pos"));
            let v = self.pos[at as usize];
            self.loads.set(self.loads.get() + 1);
            self.reads.borrow_mut().push(Read {
                array: 0,
                at,
                bits: v as u64,
            });
            Ok(Value::I(v))
        }
        fn store(&mut self, _: &ArrayRef, _: i64, _: Value) -> Result<(), String> {
            Err("no stores".into())
        }
        fn reserve(&mut self, _: &ArrayRef, _: i64) -> Result<(), String> {
            Err("no reserves".into())
        }
        fn reserve_ahead(&mut self, _: &ArrayRef, _: i64) -> Result<(), String> {
            Err("no reserves".into())
        }
    }

    impl CallArguments for Noted {
        fn params(&self) -> &[i64] {
            &self.params
        }
        fn take_reads(&mut self) -> Vec<Read> {
            std::mem::take(self.reads.get_mut())
        }
        fn holds(&self, r: &Read) -> bool {
            self.pos.get(r.at as usize).map(|&v| v as u64) == Some(r.bits)
        }
    }

    fn noted(pos: Vec<i64>, thread: i64) -> Noted {
        Noted {
            pos,
            params: vec![thread],
            reads: Default::default(),
            loads: Default::default(),
        }
    }

    #[test]
    fn a_remembered_share_is_used_only_on_the_values_it_read() {
        let formats = [("A", "CSR", 2), ("x", "dense", 1), ("y", "dense", 1)];
        let (_, search) = split(kernel("y(i) = A(i,j) * x(j)", &formats)).unwrap(); // ok: test code
        let args = noted;
        // 8 rows, the nonzeros in the last four: thread 0 takes more rows.
        let late = vec![0, 0, 0, 0, 0, 10, 20, 30, 40];
        let mut first = args(late.clone(), 0);
        let share = search.bounds(&mut first).unwrap(); // ok: test code
        assert_eq!(share, Some((0, 6)));
        assert!(first.loads.get() > 0);
        // The same arguments again: remembered, nothing read but the checks.
        let mut again = args(late.clone(), 0);
        assert_eq!(search.bounds(&mut again).unwrap(), share); // ok: test code
        assert_eq!(again.loads.get(), 0);
        // The nonzeros moved to the first rows: searched afresh.
        let early = vec![0, 10, 20, 30, 40, 40, 40, 40, 40];
        let mut moved = args(early, 0);
        assert_eq!(search.bounds(&mut moved).unwrap(), Some((0, 3))); // ok: test code
        assert!(moved.loads.get() > 0);
        // The other thread's share is its own.
        let mut other = args(late, 1);
        assert_eq!(search.bounds(&mut other).unwrap(), Some((6, 8))); // ok: test code
    }

    #[test]
    fn a_share_outside_the_loop_is_an_error() {
        // A search whose bounds leave the whole loop: `begin` set past `end`.
        let formats = [("A", "CSR", 2), ("x", "dense", 1), ("y", "dense", 1)];
        let (_, mut search) = split(kernel("y(i) = A(i,j) * x(j)", &formats)).unwrap(); // ok: test code
        let b = search.bounds;
        search.program.push(Stmt::Set(
            b.begin,
            Expr::add(Expr::Var(b.end), Expr::Int(1)),
        ));
        let err = search.bounds(&mut noted(vec![0, 1, 2], 0)).unwrap_err(); // ok: test code
        assert!(err.contains("does not lie in"), "{err}");
    }
}
