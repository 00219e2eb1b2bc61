//! Text forms of the loop IR. One printer, two dialects: the IR dialect
//! (`--emit ir`, level-function snapshots) and C (`--emit c`), so the two can
//! never disagree about what a loop does.

use super::*;
use std::collections::BTreeSet;
use std::fmt::Write;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Ir,
    C,
}

pub struct Printer<'a> {
    vars: &'a [VarInfo],
    dialect: Dialect,
    out: String,
    /// C only: the kernel's name, prefix of its array-slot constants.
    kernel: String,
    /// C only: printing the copy of a loop nest that asks for what it
    /// gathers (`gathering_nest`), where the loops inside print as they are.
    in_gathering_copy: bool,
    /// C only: printing a nest that only asks, inside the test of whether
    /// it asks at all (`asking_nest`).
    in_asking_nest: bool,
    /// C only: arrays whose zero fills stream past the caches where large
    /// (`ir::c`'s `tensor_zero_f64`: value arrays the kernel never reads).
    streamed: BTreeSet<ArrayRef>,
}

fn prec(op: BinOp) -> u8 {
    match op {
        BinOp::Or => 1,
        BinOp::And => 2,
        BinOp::Add | BinOp::Sub => 5,
        BinOp::Mul | BinOp::Div | BinOp::Rem => 6,
        BinOp::Min | BinOp::Max => 9,
    }
}

fn float_text(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 {
            "INFINITY".into()
        } else {
            "-INFINITY".into()
        };
    }
    if v.is_nan() {
        return "NAN".into();
    }
    let s = format!("{v:?}");
    if s.contains('.') || s.contains('e') || s.contains("inf") {
        s
    } else {
        format!("{s}.0")
    }
}

impl<'a> Printer<'a> {
    pub fn new(vars: &'a [VarInfo], dialect: Dialect) -> Self {
        Printer {
            vars,
            dialect,
            out: String::new(),
            kernel: String::new(),
            in_gathering_copy: false,
            in_asking_nest: false,
            streamed: BTreeSet::new(),
        }
    }

    /// C only: name the kernel whose array-slot constants `reserve` uses.
    pub fn for_kernel(mut self, name: &str) -> Self {
        self.kernel = name.to_string();
        self
    }

    /// C only: the arrays whose zero fills go through `tensor_zero_f64`.
    pub fn streaming(mut self, arrays: &BTreeSet<ArrayRef>) -> Self {
        self.streamed = arrays.clone();
        self
    }

    pub fn var_name(&self, v: VarId) -> &str {
        &self.vars[v as usize].name
    }

    pub fn expr(&self, e: &Expr) -> String {
        self.expr_prec(e, 0)
    }

    fn expr_prec(&self, e: &Expr, outer: u8) -> String {
        let c = self.dialect == Dialect::C;
        match e {
            Expr::Int(v) => v.to_string(),
            Expr::Float(v) => float_text(*v),
            Expr::Bool(b) => {
                if c {
                    (*b as i32).to_string()
                } else {
                    b.to_string()
                }
            }
            Expr::Var(v) => self.var_name(*v).to_string(),
            Expr::Param(p) => p.c_name(),
            Expr::Load(a, i) => format!("{}[{}]", a.c_name(), self.expr_prec(i, 0)),
            Expr::Bin(op @ (BinOp::Min | BinOp::Max), a, b) => {
                let is_float = e.ty(self.vars) == Ty::F64;
                let name = match (op, c, is_float) {
                    (BinOp::Min, true, true) => "fmin",
                    (BinOp::Max, true, true) => "fmax",
                    (BinOp::Min, true, false) => "TACO_MIN",
                    (BinOp::Max, true, false) => "TACO_MAX",
                    (BinOp::Min, false, _) => "min",
                    _ => "max",
                };
                format!("{name}({}, {})", self.expr_prec(a, 0), self.expr_prec(b, 0))
            }
            Expr::Bin(op, a, b) => {
                let p = prec(*op);
                let sym = match op {
                    BinOp::Add => "+",
                    BinOp::Sub => "-",
                    BinOp::Mul => "*",
                    BinOp::Div => "/",
                    BinOp::Rem => "%",
                    BinOp::And => "&&",
                    BinOp::Or => "||",
                    _ => unreachable!("min/max handled above"), // ok: matched by the arm above
                };
                // `&&` inside `||` is parenthesised although C does not need
                // it: compilers warn otherwise (-Wparentheses).
                let inner = if *op == BinOp::Or && c { 3 } else { p };
                let s = format!(
                    "{} {sym} {}",
                    self.expr_prec(a, inner),
                    self.expr_prec(b, inner.max(p + 1))
                );
                if p < outer {
                    format!("({s})")
                } else {
                    s
                }
            }
            Expr::Cmp(op, a, b) => {
                let sym = match op {
                    CmpOp::Eq => "==",
                    CmpOp::Ne => "!=",
                    CmpOp::Lt => "<",
                    CmpOp::Le => "<=",
                    CmpOp::Gt => ">",
                    CmpOp::Ge => ">=",
                };
                let s = format!("{} {sym} {}", self.expr_prec(a, 4), self.expr_prec(b, 4));
                if 3 < outer {
                    format!("({s})")
                } else {
                    s
                }
            }
            Expr::Not(a) => format!("!{}", self.expr_prec(a, 10)),
            Expr::Neg(a) => {
                // A negated negative keeps its parentheses: `--x` is C's
                // decrement (of a variable: a wrong answer, not an error).
                let s = self.expr_prec(a, 10);
                if s.starts_with('-') {
                    format!("-({s})")
                } else {
                    format!("-{s}")
                }
            }
            Expr::Select(cnd, a, b)
                if c && (a.reads_memory() || b.reads_memory()) && e.ty(self.vars) != Ty::Bool =>
            {
                // Both arms are evaluated, as the JIT does: a load in C's
                // `c ? a : b` would be a branch, mispredicted where the
                // condition is data (BCSR's padded zeros), not a blend.
                let name = if e.ty(self.vars) == Ty::F64 {
                    "tensor_select_f64"
                } else {
                    "tensor_select_i64"
                };
                format!(
                    "{name}({}, {}, {})",
                    self.expr_prec(cnd, 0),
                    self.expr_prec(a, 0),
                    self.expr_prec(b, 0)
                )
            }
            Expr::Select(cnd, a, b) => {
                let s = format!(
                    "{} ? {} : {}",
                    self.expr_prec(cnd, 1),
                    self.expr_prec(a, 1),
                    self.expr_prec(b, 1)
                );
                if outer > 0 {
                    format!("({s})")
                } else {
                    s
                }
            }
        }
    }

    fn ty_name(&self, t: Ty) -> &'static str {
        match (self.dialect, t) {
            (Dialect::C, Ty::I64) => "int64_t",
            (Dialect::C, Ty::F64) => "double",
            (Dialect::C, Ty::Bool) => "bool",
            (Dialect::Ir, Ty::I64) => "i64",
            (Dialect::Ir, Ty::F64) => "f64",
            (Dialect::Ir, Ty::Bool) => "bool",
        }
    }

    /// Loop `hinted`, whose body starts with a stream hint
    /// (`ir::streams`), behind the test of the hinted array's size, and
    /// `plain`, the loop without it, for a small array: so the loop tests
    /// nothing at each iteration. The test inside the hinted copy repeats
    /// the one around it, and the C compiler drops it. A test at each
    /// iteration of COO SpMV's loop (a branch beside the run's end) made
    /// it 27% slower on a 2-D stencil of 40K rows, whose arrays are under
    /// the size, and 8% on fem_blocks, whose arrays are over it.
    fn versioned_loop(&mut self, hinted: &Stmt, array: &ArrayRef, plain: &Stmt, depth: usize) {
        self.line(depth, &format!("if ({}_large) {{", array.c_name()));
        self.loop_stmt(hinted, depth + 1);
        self.line(depth, "} else {");
        self.stmt(plain, depth + 1);
        self.line(depth, "}");
    }

    /// Loop nest `s`, which does nothing but ask for rows (`ir::strips`'
    /// hints before the strips: values, loops and `Prefetch` hints), behind
    /// the test of whether any of its `asks` (array, coordinates) would
    /// ask. Each hint tests that inside too, yet gcc kept the loops that
    /// test it: MTTKRP from CSF walked its slices' fibers twice where its
    /// factor matrix is too small to ask for, and ran 1.10-1.17x as long
    /// as without the nest (`examples/ab_kernels.rs`, the bench's three
    /// order-3 tensors).
    fn asking_nest(&mut self, s: &Stmt, asks: &BTreeSet<(ArrayRef, ArrayRef)>, depth: usize) {
        let tests: Vec<String> = asks
            .iter()
            .map(|(a, c)| format!("{}_large && !{}_follows", a.c_name(), c.c_name()))
            .collect();
        let tests = match tests.len() {
            1 => tests.concat(),
            _ => format!("({})", tests.join(") || (")),
        };
        self.line(depth, &format!("if ({tests}) {{"));
        self.in_asking_nest = true;
        self.stmt(s, depth + 1);
        self.in_asking_nest = false;
        self.line(depth, "}");
    }

    /// `a[lo..hi]` zeroed through `tensor_zero_f64`, which streams the
    /// zeros past the caches where `a` is large (`streamed`: the kernel
    /// never reads `a` back).
    fn streamed_fill(&mut self, a: &ArrayRef, lo: &Expr, hi: &Expr, depth: usize) {
        let (n, at) = (a.c_name(), self.expr(lo));
        let count = match lo {
            Expr::Int(0) => self.expr(hi),
            _ => self.expr(&Expr::Bin(
                BinOp::Sub,
                Box::new(hi.clone()),
                Box::new(lo.clone()),
            )),
        };
        self.line(
            depth,
            &format!("tensor_zero_f64(&{n}[{at}], {count}, {n}_len);"),
        );
    }

    /// Loop nest `asking`, somewhere in which a loop asks for the elements
    /// it gathers at the coordinates in `coords` (`ir::gathers`), printed
    /// twice: as `plain`, without the asks (and versioned again for a
    /// stream hint), unless the coordinates are scattered; else as it is.
    /// The test stands outside the outermost loop: inside a loop over
    /// rows, a test and a second inner loop each row cost short rows more
    /// than the asks saved (CSR SpMV on the tridiagonal matrix 13% slower,
    /// the power-law one no faster). The loops are a function of the
    /// flag, inlined into two copies with it 0 and 1 (`ir::c_copies`), so
    /// the C compiler drops the test, the other arm, and the asks' own
    /// tests from each, and treats neither as the cold path.
    fn gathering_nest(&mut self, asking: &Stmt, coords: &Coordinates, plain: &Stmt, depth: usize) {
        self.line(depth, &format!("if (!{}) {{", coords.c_flag("scattered")));
        self.stmt(plain, depth + 1);
        self.line(depth, "} else {");
        self.in_gathering_copy = true;
        self.loop_stmt(asking, depth + 1);
        self.in_gathering_copy = false;
        self.line(depth, "}");
    }

    fn loop_stmt(&mut self, s: &Stmt, depth: usize) {
        let c = self.dialect == Dialect::C;
        let (head, body) = match s {
            Stmt::For { var, lo, hi, body } => {
                let n = self.var_name(*var).to_string();
                let (lo, hi) = (self.expr(lo), self.expr(hi));
                let head = match c {
                    true => format!("for (int64_t {n} = {lo}; {n} < {hi}; {n}++) {{"),
                    false => format!("for {n} in {lo}..{hi} {{"),
                };
                (head, body)
            }
            Stmt::While { cond, body } => {
                let cond = self.expr(cond);
                let head = match c {
                    true => format!("while ({cond}) {{"),
                    false => format!("while {cond} {{"),
                };
                (head, body)
            }
            _ => return,
        };
        self.line(depth, &head);
        self.block(body, depth + 1);
        self.line(depth, "}");
    }

    fn line(&mut self, depth: usize, text: &str) {
        for _ in 0..depth {
            self.out.push_str("  ");
        }
        self.out.push_str(text);
        self.out.push('\n');
    }

    pub fn block(&mut self, b: &Block, depth: usize) {
        for s in b {
            self.stmt(s, depth);
        }
    }

    fn stmt(&mut self, s: &Stmt, depth: usize) {
        let c = self.dialect == Dialect::C;
        if c {
            if let Some((coords, plain)) = gathering(s).filter(|_| !self.in_gathering_copy) {
                return self.gathering_nest(s, &coords, &plain, depth);
            }
            if let Some((array, plain)) = hinted_within(s) {
                return self.versioned_loop(s, &array, &plain, depth);
            }
            if let Some(asks) = only_asks(s).filter(|_| !self.in_asking_nest) {
                return self.asking_nest(s, &asks, depth);
            }
            if let Some((a, lo, hi)) =
                super::zero_fill(s).filter(|(a, ..)| self.streamed.contains(*a))
            {
                return self.streamed_fill(a, lo, hi, depth);
            }
        }
        match s {
            Stmt::Let(v, e) => {
                let ty = self.vars[*v as usize].ty;
                let text = if c {
                    format!(
                        "{} {} = {};",
                        self.ty_name(ty),
                        self.var_name(*v),
                        self.expr(e)
                    )
                } else {
                    format!(
                        "let {}: {} = {}",
                        self.var_name(*v),
                        self.ty_name(ty),
                        self.expr(e)
                    )
                };
                self.line(depth, &text);
            }
            Stmt::Set(v, e) => {
                let name = self.var_name(*v).to_string();
                let text = match e {
                    Expr::Bin(BinOp::Add, a, b) if **a == Expr::Var(*v) => {
                        format!("{name} += {}", self.expr(b))
                    }
                    _ => format!("{name} = {}", self.expr(e)),
                };
                self.line(depth, &format!("{text}{}", if c { ";" } else { "" }));
            }
            Stmt::Store(a, i, v) => {
                let target = format!("{}[{}]", a.c_name(), self.expr(i));
                let text = match v {
                    Expr::Bin(BinOp::Add, l, r) if matches!(&**l, Expr::Load(la, li) if la == a && **li == *i) =>
                    {
                        format!("{target} += {}", self.expr(r))
                    }
                    _ => format!("{target} = {}", self.expr(v)),
                };
                self.line(depth, &format!("{text}{}", if c { ";" } else { "" }));
            }
            Stmt::For { .. } | Stmt::While { .. } => self.loop_stmt(s, depth),
            Stmt::If { cond, then, els } => {
                let text = if c {
                    format!("if ({}) {{", self.expr(cond))
                } else {
                    format!("if {} {{", self.expr(cond))
                };
                self.line(depth, &text);
                self.block(then, depth + 1);
                if !els.is_empty() {
                    self.line(depth, "} else {");
                    self.block(els, depth + 1);
                }
                self.line(depth, "}");
            }
            Stmt::Reserve { array, len, ahead } => {
                if c {
                    let n = array.c_name();
                    let (call, length) = match ahead {
                        true => ("tensor_reserve_ahead", String::new()),
                        false => ("tensor_reserve", format!("&{n}_len, ")),
                    };
                    let text = format!(
                        "{n} = ({}*){call}(args, {}_{n}, {}, {n}, {length}&{n}_cap);",
                        super::c::c_elem(array.elem()),
                        self.kernel,
                        self.expr(len)
                    );
                    self.line(depth, &text);
                    self.line(depth, &format!("if (!{n}) goto out_of_memory;"));
                } else {
                    let what = if *ahead { "reserve ahead" } else { "reserve" };
                    let text = format!("{what} {}[{}]", array.c_name(), self.expr(len));
                    self.line(depth, &text);
                }
            }
            Stmt::Prefetch {
                array,
                coords,
                at,
                positions,
                stride,
                len,
            } => {
                let (a, c_, n) = (array.c_name(), coords.c_name(), self.expr(len));
                let (at, stride) = (self.expr(at), self.expr(stride));
                let text = match (c, *positions) {
                    (true, 1) => format!(
                        "if ({a}_large && !{c_}_follows && {at} < {c_}_count) tensor_prefetch(&{a}[{c_}[{at}] * {stride}], {n} * sizeof *{a});"
                    ),
                    (true, k) => format!(
                        "if ({a}_large && !{c_}_follows) for (int64_t prefetch_q = {at}; prefetch_q < {at} + {k} && prefetch_q < {c_}_count; prefetch_q++) tensor_prefetch(&{a}[{c_}[prefetch_q] * {stride}], {n} * sizeof *{a});"
                    ),
                    (false, 1) => format!("prefetch {a}[{c_}[{at}] * {stride}]; {n}"),
                    (false, k) => format!("prefetch {a}[{c_}[{at} ..+ {k}] * {stride}]; {n}"),
                };
                self.line(depth, &text);
            }
            Stmt::PrefetchStream {
                array,
                at,
                positions,
                ..
            } => {
                let (a, at) = (array.c_name(), self.expr(at));
                let text = match c {
                    true => format!(
                        "if ({a}_large) tensor_prefetch_from({a}, {at}, {positions} * sizeof *{a});"
                    ),
                    false => format!("prefetch {a}[{at} ..+ {positions}]"),
                };
                self.line(depth, &text);
            }
            Stmt::PrefetchGather { array, coords, at } => {
                let (a, c_, at) = (array.c_name(), coords.array.c_name(), self.expr(at));
                let scattered = coords.c_flag("scattered");
                let text = match c {
                    true => format!(
                        "if ({scattered} && {at} < {c_}_count) tensor_prefetch(&{a}[{c_}[{at}]], sizeof *{a});"
                    ),
                    false => format!("prefetch {a}[{c_}[{at}]] where scattered"),
                };
                self.line(depth, &text);
            }
            Stmt::Comment(t) => {
                let text = format!("// {t}");
                self.line(depth, &text);
            }
            Stmt::Unlikely => self.line(depth, "// rarely runs (a layout hint)"),
        }
    }

    pub fn finish(self) -> String {
        self.out
    }
}

pub fn elem_suffix(t: ElemTy) -> &'static str {
    match t {
        ElemTy::I32 => "i32",
        ElemTy::F64 => "f64",
    }
}

/// Print a block in the IR dialect.
pub fn block(vars: &[VarInfo], b: &Block) -> String {
    let mut p = Printer::new(vars, Dialect::Ir);
    p.block(b, 0);
    p.finish()
}

/// Print a whole function in the IR dialect, with its arrays and parameters.
pub fn function(f: &Function) -> String {
    let mut head = format!("fn {}(", f.name);
    let params: Vec<String> = f.params().iter().map(|p| p.c_name()).collect();
    let arrays: Vec<String> = f
        .arrays()
        .iter()
        .map(|(a, w)| {
            format!(
                "{}{}: [{}]",
                if *w { "mut " } else { "" },
                a.c_name(),
                elem_suffix(a.elem())
            )
        })
        .collect();
    let _ = write!(
        head,
        "{}",
        params
            .into_iter()
            .chain(arrays)
            .collect::<Vec<_>>()
            .join(", ")
    );
    head.push_str(") {\n");
    let mut p = Printer::new(&f.vars, Dialect::Ir);
    p.block(&f.body, 1);
    head + &p.finish() + "}\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--` is C's decrement: a negated negative keeps its parentheses, in
    /// both dialects (they share the printer).
    #[test]
    fn negated_negatives_never_print_as_a_decrement() {
        let vars = [VarInfo {
            name: "x".into(),
            ty: Ty::F64,
        }];
        let x = || Expr::Var(0);
        let neg = |e: Expr| Expr::Neg(Box::new(e));
        for dialect in [Dialect::C, Dialect::Ir] {
            let p = Printer::new(&vars, dialect);
            assert_eq!(p.expr(&neg(neg(x()))), "-(-x)");
            assert_eq!(p.expr(&neg(neg(neg(x())))), "-(-(-x))");
            assert_eq!(p.expr(&neg(Expr::Float(-1.5))), "-(-1.5)");
            assert_eq!(p.expr(&neg(Expr::Int(-2))), "-(-2)");
            assert_eq!(p.expr(&neg(x())), "-x");
            assert_eq!(p.expr(&neg(Expr::add(x(), x()))), "-(x + x)");
        }
    }

    /// MTTKRP from CSF: the loop nest that only asks for `Q`'s rows, before
    /// the strips, runs behind its test, and the strips' nest does not.
    #[test]
    fn a_nest_that_only_asks_runs_behind_its_test() {
        use crate::ir::passes::{lowered_for, Backend};
        let f = lowered_for(
            "A(i,j) = B(i,k,l) * P(k,j) * Q(l,j)",
            &[
                ("A", "dense", 2),
                ("B", "CSF", 3),
                ("P", "dense", 2),
                ("Q", "dense", 2),
            ],
            Backend::C,
        );
        let text = crate::ir::c::function(&f);
        let lines: Vec<&str> = text.lines().collect();
        let test = "if (Q_vals_large && !B3_crd_follows) {";
        let tests: Vec<usize> = (0..lines.len())
            .filter(|&n| lines[n].trim() == test)
            .collect();
        assert!(!tests.is_empty(), "{text}");
        for at in tests {
            // The test's block: to the `}` at its indentation.
            let indent = &lines[at][..lines[at].len() - test.len()];
            let end = (at..lines.len())
                .find(|&n| lines[n] == format!("{indent}}}"))
                .expect(&text); // ok: test code
            assert!(
                lines[at + 1].trim().starts_with("for (int64_t pB2 "),
                "{text}"
            );
            let block = &lines[at..end];
            assert!(!block.iter().any(|l| l.contains("strip")), "{text}");
            assert!(lines[end + 2].trim().starts_with("while (strip"), "{text}");
        }
    }
}

/// The body of loop `s`, or nothing.
fn loop_body(s: &Stmt) -> &[Stmt] {
    match s {
        Stmt::For { body, .. } | Stmt::While { body, .. } => body,
        _ => &[],
    }
}

/// The (array, coordinates) of the `Prefetch` hints of loop nest `s`,
/// where it does nothing else: declares values, loops, asks.
fn only_asks(s: &Stmt) -> Option<BTreeSet<(ArrayRef, ArrayRef)>> {
    if !matches!(s, Stmt::For { .. } | Stmt::While { .. }) {
        return None;
    }
    let (mut asks, mut only) = (BTreeSet::new(), true);
    super::walk_block(std::slice::from_ref(s), &mut |t| match t {
        Stmt::Prefetch { array, coords, .. } => {
            asks.insert((array.clone(), coords.clone()));
        }
        Stmt::Let(..) | Stmt::For { .. } | Stmt::While { .. } => {}
        _ => only = false,
    });
    (only && !asks.is_empty()).then_some(asks)
}

/// The first array loop `s` asks for at the start of its body
/// (`ir::streams`), and the loop without those hints, if it has any. The
/// hints there are of the loop's widest streams, which span as many bytes
/// (COO-AoS's values and pairs of coordinates), so the first one's size
/// stands for all.
fn hinted_within(s: &Stmt) -> Option<(ArrayRef, Stmt)> {
    let leading = |t: &Stmt| {
        matches!(
            t,
            Stmt::PrefetchStream {
                beside_gathers: false,
                ..
            }
        )
    };
    let Some(Stmt::PrefetchStream { array, .. }) = loop_body(s).first().filter(|t| leading(t))
    else {
        return None;
    };
    let array = array.clone();
    let mut plain = s.clone();
    if let Stmt::For { body, .. } | Stmt::While { body, .. } = &mut plain {
        let n = body.iter().take_while(|t| leading(t)).count();
        body.drain(..n);
    }
    Some((array, plain))
}

/// The coordinates a loop of nest `s` gathers at and asks ahead for
/// (`ir::gathers`), and the nest without those asks, if it has any.
fn gathering(s: &Stmt) -> Option<(Coordinates, Stmt)> {
    if !matches!(s, Stmt::For { .. } | Stmt::While { .. }) {
        return None;
    }
    let mut coords = None;
    super::walk_block(std::slice::from_ref(s), &mut |t| {
        if let (None, Stmt::PrefetchGather { coords: c, .. }) = (&coords, t) {
            coords = Some(c.clone());
        }
    });
    let mut plain = s.clone();
    without_gathers(std::slice::from_mut(&mut plain));
    Some((coords?, plain))
}

fn without_gathers(b: &mut [Stmt]) {
    for s in b {
        for inner in super::nested_blocks_mut(s) {
            inner.retain(|t| {
                !matches!(
                    t,
                    Stmt::PrefetchGather { .. }
                        | Stmt::PrefetchStream {
                            beside_gathers: true,
                            ..
                        }
                )
            });
            without_gathers(inner);
        }
    }
}
