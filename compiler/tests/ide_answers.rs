//! The editor answers of `ide`: hovers on every variable the user wrote
//! (with the hidden variables of blocked and diagonal formats and the loops
//! read from the loop IR), escaped markdown, the sparsity picture, inlay
//! hints that fit VS Code, one diagnostic per root cause, and quick fixes
//! that were compiled before they are offered.

use std::path::{Path, PathBuf};
use tensor_compiler::ide::{Analysis, Diagnostic};
use tensor_compiler::language::db::SourceFile;

fn example(name: &str) -> (Analysis, SourceFile, String) {
    let p: PathBuf = std::fs::canonicalize(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../examples")
            .join(name),
    )
    .unwrap();
    let text = std::fs::read_to_string(&p).unwrap();
    let mut a = Analysis::new();
    let f = a.set_file(&p, text.clone());
    (a, f, text)
}

fn hover_at(a: &Analysis, f: SourceFile, text: &str, needle: &str, skip: usize) -> String {
    let at = text
        .find(needle)
        .unwrap_or_else(|| panic!("{needle} not in the file"))
        + skip;
    a.hover(f, at).map(|h| h.markdown).unwrap_or_default()
}

/// The lines of the hover's C block (the loops of the variable).
fn loops(md: &str) -> Vec<String> {
    md.split("```c\n")
        .nth(1)
        .map(|c| {
            c.split("```")
                .next()
                .unwrap()
                .lines()
                .map(|l| l.trim().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn csr_spmv_loops_of_each_variable_come_from_the_loop_ir() {
    let (a, f, text) = example("spmv_vectors.tensor");
    // `j` of the dense-x kernel: the loop over A's row, not the row loop.
    let j = hover_at(&a, f, &text, "xd(j)", 3);
    let lj = loops(&j);
    assert!(
        !lj.is_empty() && lj.iter().all(|l| l.contains("pA2")),
        "{j}"
    );
    // `i`: only the row loop.
    let i = hover_at(&a, f, &text, "y(i) = A(i,j) * xd", 2);
    // (its bounds are this thread's share of the rows: `lower::parallel`)
    assert_eq!(
        loops(&i),
        vec!["for (int64_t iA = share_begin; iA < share_end; iA++)"],
        "{i}"
    );
    assert!(
        i.contains("the loop over `i` runs on several threads") && !j.contains("several threads"),
        "{i}"
    );
    // `j` of the sparse-x kernel: merging `xs` with every row would start
    // over each time, so a dense copy is located instead, and said so.
    let j = hover_at(&a, f, &text, "xs(j)", 3);
    assert!(
        j.contains("reads `xs` from a copy converted to dense"),
        "{j}"
    );
    assert!(j.contains("locate:     xs_converted1:dense"), "{j}");
    assert!(
        !loops(&j).is_empty() && loops(&j).iter().all(|l| !l.contains("pxs1")),
        "{j}"
    );
}

#[test]
fn blocked_and_diagonal_formats_show_the_hidden_variables() {
    for (file, needle, hidden) in [
        ("spmv_bcsr4.tensor", "y(i)", &["iblkA", "iinA"][..]),
        ("spmv_bcsr4.tensor", "x(j)", &["jblkA", "jinA"][..]),
        ("spmv_csb8.tensor", "y(i)", &["iblkA", "iinA"][..]),
        ("spmv_dia.tensor", "y(i)", &["diagA"][..]),
        ("spmv_ell.tensor", "x(j)", &["slotA"][..]),
    ] {
        let (a, f, text) = example(file);
        let md = hover_at(&a, f, &text, needle, 2);
        for h in hidden {
            assert!(
                md.contains(&format!("index {h}:")),
                "{file} {needle}: no lattice of {h}\n{md}"
            );
            assert!(
                md.contains(&format!("- `{h}`")),
                "{file} {needle}: {h} not explained\n{md}"
            );
        }
        assert!(md.contains("co-iterate:"), "{md}");
        assert!(!loops(&md).is_empty(), "{file} {needle}: no loops\n{md}");
    }
}

/// The hover of the variable at the `skip`-th character after `needle` in
/// a file of the given text.
fn hover_in(text: &str, needle: &str, skip: usize) -> String {
    let mut a = Analysis::new();
    let f = a.set_file(Path::new("/tmp/hover_in.tensor"), text.to_string());
    hover_at(&a, f, text, needle, skip)
}

#[test]
fn the_loops_of_a_variable_are_those_that_bind_its_coordinates_whatever_their_names() {
    // The second use of `A` has hidden variable `slotA2`: a loop of `j` and
    // `k` (A(j,k)), not of `i`, although it is spelled like `slotA` + 2.
    let ell = "tensor A : f64[6, 6] @ ELL = random(seed: 1, density: 0.4)\ntensor C : f64[6, 6] @ dense\nkernel k { C(i,k) = A(i,j) * A(j,k) }\n";
    let i = loops(&hover_in(ell, "C(i,k)", 2));
    assert!(
        i.iter().any(|l| l.contains("slotA =")) && !i.iter().any(|l| l.contains("slotA2")),
        "{i:?}"
    );
    let k = loops(&hover_in(ell, "C(i,k)", 4));
    assert!(k.iter().any(|l| l.contains("slotA2 =")), "{k:?}");
    // A variable named `p`: CSR's positions `pA2` are no coordinates of it.
    let csr = "tensor A : f64[6, 6] @ CSR = random(seed: 1, density: 0.4)\ntensor x : f64[6] @ dense = random(seed: 2)\ntensor y : f64[6] @ dense\nkernel k { y(p) = A(p,q) * x(q) }\n";
    let p = loops(&hover_in(csr, "y(p)", 2));
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(!p[0].contains("pA2"), "{p:?}");
    assert!(loops(&hover_in(csr, "x(q)", 2))
        .iter()
        .any(|l| l.contains("pA2")));
}

#[test]
fn the_workspace_row_and_sorted_copies_are_shown() {
    // SpGEMM into CSR: the hover of `j` (the workspace's level) says how
    // the result is assembled; `i`'s does not.
    let spgemm = "tensor B : f64[6, 6] @ CSR = random(seed: 1, density: 0.4)\ntensor C : f64[6, 6] @ CSR = random(seed: 2, density: 0.4)\ntensor A : f64[6, 6] @ CSR\nkernel k { A(i,j) = B(i,k) * C(k,j) }\n";
    let j = hover_in(spgemm, "A(i,j)", 4);
    assert!(
        j.contains("through a dense workspace row")
            && j.contains("after each `i` its coordinates are sorted and appended"),
        "{j}"
    );
    assert!(!hover_in(spgemm, "A(i,j)", 2).contains("workspace"));
    // A hash table merged with CSR: read through a sorted copy.
    let hashed = "tensor B : f64[6, 6] @ (hashed, hashed) = random(seed: 1, density: 0.4)\ntensor C : f64[6, 6] @ CSR = random(seed: 2, density: 0.4)\ntensor A : f64[6, 6] @ CSR\nkernel k { A(i,j) = B(i,j) + C(i,j) }\n";
    let j = hover_in(hashed, "A(i,j)", 4);
    assert!(j.contains("reorder<B2:hashed"), "{j}");
}

#[test]
fn tensor_hover_keeps_brackets_and_draws_the_matrix() {
    let (a, f, text) = example("spmv_vectors.tensor");
    let md = hover_at(&a, f, &text, "tensor A", 7);
    assert!(md.contains("`f64[M, N]`"), "{md}");
    assert!(md.contains("479 × 479, 1910 stored entries"), "{md}");
    let img = md
        .lines()
        .find(|l| l.starts_with("![sparsity of A"))
        .expect("a sparsity picture");
    assert!(img.contains("](data:image/png;base64,iVBORw0KGgo"), "{img}");
    // The picture is a paragraph of its own, before the level table.
    assert!(
        md.contains(&format!("\n\n{img}\n\n")) && md.find(img) < md.find("| level"),
        "{md}"
    );
    // A vector has no picture.
    let md = hover_at(&a, f, &text, "tensor xs", 7);
    assert!(!md.contains("data:image"), "{md}");
}

#[test]
fn markdown_from_messages_is_escaped() {
    let mut a = Analysis::new();
    let text = "tensor A : f64[4, 4] @ CSR = mtx(\"missing[1].mtx\")\ntensor x : f64[4] @ dense\ntensor y : f64[4] @ dense\nkernel k { y(i) = A(i,j) * x(j) }\n";
    let f = a.set_file(Path::new("/virtual/esc.tensor"), text.into());
    let md = a
        .hover(f, text.find("tensor A").unwrap() + 7)
        .unwrap()
        .markdown;
    assert!(md.contains("missing\\[1\\].mtx"), "{md}");
}

#[test]
fn inlay_hints_fit_vs_code_and_keep_the_strategy() {
    for name in [
        "spmv_vectors.tensor",
        "spmv_bcsr4.tensor",
        "spmv_dia.tensor",
        "add.tensor",
        "tensor3.tensor",
        "spmv_coo.tensor",
    ] {
        let (a, f, _) = example(name);
        let hints = a.inlay_hints(f);
        assert!(!hints.is_empty(), "{name}");
        for h in hints {
            assert!(
                h.label.chars().count() <= 43,
                "{name}: {} ({} chars)",
                h.label,
                h.label.chars().count()
            );
            let full = h.tooltip.expect("a tooltip");
            // (a kernel that converts an operand says so first)
            assert!(
                (full.starts_with('∀') || full.starts_with("converts "))
                    && full.chars().count() >= h.label.chars().count(),
                "{full}"
            );
        }
    }
    let (a, f, _) = example("spmv_vectors.tensor");
    let labels: Vec<String> = a.inlay_hints(f).into_iter().map(|h| h.label).collect();
    assert_eq!(
        labels,
        [
            "∀i→j · j: A2→loc xd1",
            "∀i→j · xs→dense · j: A2→loc xs_converted1",
            "∀i→j · xh→dense · j: A2→loc xh_converted1"
        ]
    );
}

fn diagnostics(text: &str) -> (Analysis, SourceFile, Vec<Diagnostic>) {
    let mut a = Analysis::new();
    let f = a.set_file(
        &std::env::temp_dir().join("tensor-ide-answers.tensor"),
        text.into(),
    );
    let d = a.diagnostics(f);
    (a, f, d)
}

#[test]
fn an_unknown_size_is_reported_once() {
    let (_, _, d) = diagnostics("tensor A : f64[N, N] @ CSR\ntensor x : f64[N] @ dense\ntensor y : f64[N] @ dense\nkernel k { y(i) = A(i,j) * x(j) }\nkernel k2 { y(i) = x(i) }\n");
    assert_eq!(d.len(), 1, "{d:#?}");
    assert!(d[0].message.contains("the size `N` is not known"));
}

#[test]
fn a_bad_data_file_is_one_diagnostic() {
    let (_, _, d) = diagnostics(
        "tensor A : f64[M, N] @ CSR = mtx(\"nope.mtx\")\ntensor B : f64[M, N] @ CSC = mtx(\"nope.mtx\")\ntensor x : f64[N] @ dense = random(seed: 1)\ntensor y : f64[M] @ dense\nkernel k { y(i) = A(i,j) * x(j) }\nkernel k2 { y(i) = B(i,j) * x(j) }\n",
    );
    assert_eq!(d.len(), 1, "{d:#?}");
    assert!(d[0].message.contains("nope.mtx"), "{d:#?}");
}

const SHARED: &str = "tensor A : f64[8, 8] @ CSR = random(seed: 1, density: 0.3)\ntensor B : f64[8, 8] @ CSR = random(seed: 2, density: 0.3)\ntensor C : f64[8, 8] @ CSR = random(seed: 3, density: 0.3)\ntensor D : f64[8, 8] @ dense\ntensor Y : f64[8, 8] @ DIA\ntensor ys : f64[8] @ sparse\ntensor xd : f64[8] @ dense = random(seed: 4)\ntensor E : f64[8, 8] @ BCSR(2) = random(seed: 5, density: 0.3)\ntensor F : f64[8, 8] @ BCSR(2) = random(seed: 6, density: 0.3)\n";

fn apply(text: &str, d: &Diagnostic) -> String {
    let fix = d
        .fix
        .as_ref()
        .unwrap_or_else(|| panic!("no fix for {}", d.message));
    let mut t = text.to_string();
    t.replace_range(fix.span.start..fix.span.end, &fix.replacement);
    t
}

#[test]
fn conversions_suggest_a_format_that_compiles_as_stored() {
    // Kernels the compiler runs only by converting an operand first (a
    // product of operands in opposite orders; two blocked operands sharing
    // an index): a warning at the access, with the format that avoids it.
    for (kernel, expect) in [
        ("kernel t { D(i,j) = B(i,j) * C(j,i) }", "stored as `CSC`"),
        ("kernel t { D(i,j) = E(i,j) * F(i,j) }", "stored as"),
    ] {
        let text = format!("{SHARED}{kernel}\n");
        let (a, f, d) = diagnostics(&text);
        assert_eq!(d.len(), 1, "{d:#?}");
        assert!(
            !d[0].is_error
                && d[0].message.contains("is converted to")
                && d[0].message.contains(expect),
            "{}",
            d[0].message
        );
        // The fix is what the code action offers, and the file compiles after it.
        assert_eq!(
            a.quick_fixes(f, d[0].span.start, &d[0].message),
            vec![d[0].fix.clone().unwrap()]
        );
        let (_, _, after) = diagnostics(&apply(&text, &d[0]));
        assert!(after.is_empty(), "{kernel}: {after:#?}");
    }
}

#[test]
fn a_shared_tensor_gets_a_copy_instead_of_breaking_the_other_kernel() {
    // Storing B or C as CSC fixes `t` but breaks `u` (each product there
    // needs both operands in one order).
    let text = format!("{SHARED}kernel t {{ D(i,j) = B(i,j) * C(j,i) }}\nkernel u {{ D(i,j) = C(i,j) * A(i,j) + B(i,j) * A(i,j) }}\n");
    let (_, _, d) = diagnostics(&text);
    assert_eq!(d.len(), 1, "{d:#?}");
    assert!(
        d[0].message.contains("copy `B_csc`") || d[0].message.contains("copy `C_csc`"),
        "{}",
        d[0].message
    );
    let fixed = apply(&text, &d[0]);
    assert!(
        fixed.contains("_csc : f64[8, 8] @ CSC = random(seed: "),
        "{fixed}"
    );
    assert!(
        fixed.contains("kernel u { D(i,j) = C(i,j) * A(i,j) + B(i,j) * A(i,j) }"),
        "{fixed}"
    );
    let (_, _, after) = diagnostics(&fixed);
    assert!(after.is_empty(), "{fixed}\n{after:#?}");
}

#[test]
fn definition_of_a_name_shared_by_a_format_and_a_tensor_follows_the_cursor() {
    let text = "tensor T : f64[4, 4] @ CSR = banded(bands: 1, seed: 1)\nformat T = (dense, compressed)\ntensor B : f64[4, 4] @ T = banded(bands: 1, seed: 2)\ntensor A : f64[4, 4] @ CSR\nkernel k { A(i,j) = B(i,j) * T(i,j) }\n";
    let mut a = Analysis::new();
    let f = a.set_file(Path::new("/virtual/names.tensor"), text.to_string());
    let format_decl = text.find("format T").unwrap() + "format ".len();
    let tensor_decl = text.find("tensor T").unwrap() + "tensor ".len();
    // On `@ T`: the format.
    let on_format = text.find("@ T").unwrap() + 2;
    assert_eq!(
        a.definition(f, on_format).map(|s| s.start),
        Some(format_decl)
    );
    // On `T(i,j)` in the kernel: the tensor, though the format is declared too.
    let on_tensor = text.find("T(i,j)").unwrap();
    assert_eq!(
        a.definition(f, on_tensor).map(|s| s.start),
        Some(tensor_decl)
    );
}
