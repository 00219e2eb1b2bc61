//! Snapshots of what users read: emitted C and merge lattices for the
//! paper's Figure 1 kernels and SpMV in every format, and the IR of each
//! level function. Review changes with `cargo insta review`.

use std::collections::BTreeMap;
use tensor_compiler::format::level::*;
use tensor_compiler::format::{parse_format, Registry};
use tensor_compiler::ir::{print, Emitter, Expr, Ty};
use tensor_compiler::lower::compile;
use tensor_compiler::notation::parse_assignment;

fn kernel(expr: &str, specs: &[(&str, &str, usize)]) -> tensor_compiler::lower::Kernel {
    let r = Registry::builtin();
    let a = parse_assignment(expr).unwrap();
    let formats = specs
        .iter()
        .map(|(n, f, o)| (n.to_string(), parse_format(f, *o, &r).unwrap()))
        .collect();
    let dims: BTreeMap<String, Vec<usize>> = specs
        .iter()
        .map(|(n, _, o)| (n.to_string(), vec![8; *o]))
        .collect();
    compile("kernel", &a, &formats, &dims).unwrap()
}

fn c_and_lattice(expr: &str, specs: &[(&str, &str, usize)]) -> String {
    let k = kernel(expr, specs);
    let lattices: String = k.plans().map(|p| p.to_string()).collect();
    format!(
        "{}\n{lattices}",
        tensor_compiler::ir::c::function(&k.function)
    )
}

#[test]
fn spmv_in_each_format() {
    for f in [
        "CSR", "CSC", "COO", "COO-AoS", "DCSR", "ELL", "DIA", "BCSR(4)", "CSB(4)",
    ] {
        let name = format!(
            "spmv_{}",
            f.replace(['(', ')'], "").to_lowercase().replace('-', "_")
        );
        insta::assert_snapshot!(
            name,
            c_and_lattice(
                "y(i) = A(i,j) * x(j)",
                &[("A", f, 2), ("x", "dense", 1), ("y", "dense", 1)]
            )
        );
    }
    insta::assert_snapshot!(
        "spmv_csr_hash_x",
        c_and_lattice(
            "y(i) = A(i,j) * x(j)",
            &[("A", "CSR", 2), ("x", "hash", 1), ("y", "dense", 1)]
        )
    );
    insta::assert_snapshot!(
        "spmv_csr_sparse_x",
        c_and_lattice(
            "y(i) = A(i,j) * x(j)",
            &[("A", "CSR", 2), ("x", "sparse", 1), ("y", "dense", 1)]
        )
    );
}

#[test]
fn figure1_elementwise_products() {
    for (b, c) in [("COO", "dense"), ("CSR", "dense"), ("CSR", "COO")] {
        let name = format!("mul_{}_{}", b.to_lowercase(), c.to_lowercase());
        insta::assert_snapshot!(
            name,
            c_and_lattice(
                "A(i,j) = B(i,j) * C(i,j)",
                &[("A", "dense", 2), ("B", b, 2), ("C", c, 2)]
            )
        );
    }
    insta::assert_snapshot!(
        "add_csr_csr_to_csr",
        c_and_lattice(
            "A(i,j) = B(i,j) + C(i,j)",
            &[("A", "CSR", 2), ("B", "CSR", 2), ("C", "CSR", 2)]
        )
    );
    insta::assert_snapshot!(
        "add_coo_coo_to_coo",
        c_and_lattice(
            "A(i,j) = B(i,j) + C(i,j)",
            &[("A", "COO", 2), ("B", "COO", 2), ("C", "COO", 2)]
        )
    );
}

/// Every level function of every level, printed as IR.
#[test]
fn level_functions() {
    let r = Registry::builtin();
    let mut out = String::new();
    for spec in [
        "dense",
        "compressed",
        "compressed(nonunique)",
        "singleton",
        "hashed",
        "dense,range,offset",
        "compressed(nonunique,aos),singleton(aos)",
    ] {
        let levels = tensor_compiler::format::tensor_format::parse_level_list(spec, &r).unwrap();
        let k = levels.len() - 1;
        let level = &levels[k];
        let c = LevelCtx::new("T", k);
        let mut e = Emitter::new();
        let parent = Expr::Var(e.fresh("p", Ty::I64));
        let anc: Vec<Expr> = (0..k)
            .map(|a| Expr::Var(e.fresh(&format!("i{a}"), Ty::I64)))
            .collect();
        let i = Expr::Var(e.fresh(&format!("i{k}"), Ty::I64));
        let mut coords = anc.clone();
        coords.push(i.clone());
        let show = |e: &mut Emitter, name: &str, results: Vec<Expr>, out: &mut String| {
            let stmts = e.take();
            let p = print::Printer::new(&e.vars, print::Dialect::Ir);
            let r: Vec<String> = results.iter().map(|x| p.expr(x)).collect();
            out.push_str(&format!(
                "{name}:\n{}  -> <{}>\n",
                print::block(&e.vars, &stmts)
                    .lines()
                    .map(|l| format!("  {l}\n"))
                    .collect::<String>(),
                r.join(", ")
            ));
        };
        out.push_str(&format!(
            "== {} (level {} of {spec}) [{}]\n",
            level.spec(),
            k + 1,
            level.properties()
        ));
        match level.iteration() {
            Iteration::CoordValue(it) => {
                let (a, b) = it.coord_bounds(&c, &mut e, &anc);
                show(&mut e, "coord_bounds", vec![a, b], &mut out);
                let (a, b) = it.coord_access(&c, &mut e, parent.clone(), &coords);
                show(&mut e, "coord_access", vec![a, b], &mut out);
            }
            Iteration::CoordPosition(it) => {
                let (a, b) = it.pos_bounds(&c, &mut e, parent.clone());
                show(&mut e, "pos_bounds", vec![a, b], &mut out);
                let (a, b) = it.pos_access(&c, &mut e, parent.clone(), &anc);
                show(&mut e, "pos_access", vec![a, b], &mut out);
            }
        }
        if let Some(l) = level.locate() {
            let (a, b) = l.locate(&c, &mut e, parent.clone(), &coords);
            show(&mut e, "locate", vec![a, b], &mut out);
        }
        match level.assembly() {
            Assembly::Insert(ins) => {
                let sz = ins.size(&c, &mut e, Expr::Var(0));
                show(&mut e, "size", vec![sz.clone()], &mut out);
                ins.insert_init(&c, &mut e, Expr::Var(0), sz.clone());
                show(&mut e, "insert_init", vec![], &mut out);
                ins.insert_coord(&c, &mut e, parent.clone(), i.clone());
                show(&mut e, "insert_coord", vec![], &mut out);
                ins.insert_finalize(&c, &mut e, Expr::Var(0), sz);
                show(&mut e, "insert_finalize", vec![], &mut out);
            }
            Assembly::Append(app) => {
                let last = e.let_var("last", Expr::Int(-1));
                show(
                    &mut e,
                    "(the caller's last parent closed)",
                    vec![],
                    &mut out,
                );
                let kinds = [
                    ("parents appended", Parents::Appended),
                    ("parents fixed", Parents::Fixed),
                    ("parents in order", Parents::InOrder { last }),
                ];
                for (kind, parents) in &kinds {
                    app.append_init(&c, &mut e, Expr::Var(0), parents);
                    show(&mut e, &format!("append_init, {kind}"), vec![], &mut out);
                }
                app.append_coord(&c, &mut e, parent.clone(), i.clone());
                show(&mut e, "append_coord", vec![], &mut out);
                let children = || (Expr::Int(3), Expr::Int(7));
                for (kind, parents) in &kinds {
                    app.append_edges(&c, &mut e, parent.clone(), children(), parents);
                    show(&mut e, &format!("append_edges, {kind}"), vec![], &mut out);
                }
                for (kind, parents) in &kinds {
                    app.append_finalize(&c, &mut e, Expr::Var(0), Expr::Int(9), parents);
                    show(
                        &mut e,
                        &format!("append_finalize, {kind}"),
                        vec![],
                        &mut out,
                    );
                }
            }
            Assembly::None => out.push_str("(no assembly capability)\n"),
        }
        out.push('\n');
    }
    insta::assert_snapshot!("level_functions", out);
}
