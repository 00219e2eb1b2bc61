//! Random expressions up to order 3 with random format assignments: each
//! either matches the dense reference evaluator or is refused with a clean
//! error, never a wrong answer or a crash.

mod common;
use common::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

const VARS: [&str; 3] = ["i", "j", "k"];
const EXTENT: [usize; 3] = [5, 4, 6];

fn formats_for(order: usize) -> Vec<&'static str> {
    match order {
        0 => vec!["dense"],
        1 => vec!["dense", "sparse", "hash", "COO"],
        2 => vec![
            "dense",
            "CSR",
            "CSC",
            "COO",
            "DCSR",
            "DIA",
            "ELL",
            "BCSR(2)",
            "CSB(2)",
            "COO-AoS",
            "hashed,dense",
        ],
        _ => vec![
            "dense",
            "COO",
            "CSF",
            "mode-generic",
            "compressed,dense,compressed:2,0,1",
        ],
    }
}

#[derive(Clone, Debug)]
enum E {
    T(usize),
    C(i32),
    Neg(Box<E>),
    Add(Box<E>, Box<E>),
    Sub(Box<E>, Box<E>),
    Mul(Box<E>, Box<E>),
}

fn arb_expr(ntensors: usize) -> impl Strategy<Value = E> {
    let leaf = prop_oneof![4 => (0..ntensors).prop_map(E::T), 1 => (-2i32..3).prop_map(E::C)];
    leaf.prop_recursive(3, 8, 2, |inner| {
        prop_oneof![
            inner.clone().prop_map(|e| E::Neg(Box::new(e))),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| E::Add(Box::new(a), Box::new(b))),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| E::Sub(Box::new(a), Box::new(b))),
            (inner.clone(), inner).prop_map(|(a, b)| E::Mul(Box::new(a), Box::new(b))),
        ]
    })
}

fn text(e: &E, accesses: &[String]) -> String {
    match e {
        E::T(n) => accesses[*n].clone(),
        E::C(c) => format!("{c}"),
        E::Neg(x) => format!("-({})", text(x, accesses)),
        E::Add(a, b) => format!("({} + {})", text(a, accesses), text(b, accesses)),
        E::Sub(a, b) => format!("({} - {})", text(a, accesses), text(b, accesses)),
        E::Mul(a, b) => format!("{} * {}", text(a, accesses), text(b, accesses)),
    }
}

/// A clean refusal names a capability, a loop order or an unsupported form.
fn clean_refusal(e: &str) -> bool {
    [
        "no loop order",
        "cannot",
        "unsupported",
        "not implemented",
        "needs",
        "must be",
    ]
    .iter()
    .any(|w| e.contains(w))
        && !e.contains("internal")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]
    #[test]
    fn random_kernels_match_the_oracle(
        tensors in prop::collection::vec((prop::sample::subsequence(vec![0usize, 1, 2], 0..=3).prop_shuffle(), 0usize..100), 1..=3),
        expr in arb_expr(3),
        out in prop::sample::subsequence(vec![0usize, 1, 2], 0..=2),
        out_fmt in 0usize..100,
        seed in 1u64..1000,
    ) {
        let names = ["B", "C", "D"];
        let mut rng = Rng(seed);
        let mut data = BTreeMap::new();
        let mut specs: Vec<(String, String)> = Vec::new();
        let mut accesses = Vec::new();
        for (n, (vars, f)) in tensors.iter().enumerate() {
            let dims: Vec<usize> = vars.iter().map(|&v| EXTENT[v]).collect();
            data.insert(names[n].to_string(), random(&dims, 0.35, &mut rng));
            let fs = formats_for(vars.len());
            specs.push((names[n].to_string(), fs[f % fs.len()].to_string()));
            let idx: Vec<&str> = vars.iter().map(|&v| VARS[v]).collect();
            accesses.push(if idx.is_empty() { names[n].to_string() } else { format!("{}({})", names[n], idx.join(",")) });
        }
        let expr = match &expr {
            E::T(n) if *n >= tensors.len() => E::T(0),
            e => e.clone(),
        };
        // Only accesses of existing tensors.
        fn clamp(e: &E, n: usize) -> E {
            match e {
                E::T(k) => E::T(k % n),
                E::C(c) => E::C(*c),
                E::Neg(x) => E::Neg(Box::new(clamp(x, n))),
                E::Add(a, b) => E::Add(Box::new(clamp(a, n)), Box::new(clamp(b, n))),
                E::Sub(a, b) => E::Sub(Box::new(clamp(a, n)), Box::new(clamp(b, n))),
                E::Mul(a, b) => E::Mul(Box::new(clamp(a, n)), Box::new(clamp(b, n))),
            }
        }
        let expr = clamp(&expr, tensors.len());
        let rhs = text(&expr, &accesses);
        let used: Vec<usize> = out.iter().copied().filter(|v| rhs.contains(VARS[*v])).collect();
        let out_dims: Vec<usize> = used.iter().map(|&v| EXTENT[v]).collect();
        let lhs = if used.is_empty() { "A".to_string() } else { format!("A({})", used.iter().map(|&v| VARS[v]).collect::<Vec<_>>().join(",")) };
        let ofs = formats_for(used.len());
        let out_spec = match used.len() { 2 => ["dense", "CSR", "COO", "DCSR"][out_fmt % 4], 1 => ["dense", "sparse", "hash"][out_fmt % 3], 0 => "dense", _ => ofs[out_fmt % ofs.len()] };
        specs.push(("A".into(), out_spec.into()));
        let spec_refs: Vec<(&str, &str)> = specs.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        let expr_text = format!("{lhs} = {rhs}");
        match check(&expr_text, &spec_refs, &data, &out_dims) {
            Ok(()) => {}
            Err(e) if e.contains("wrong result") => prop_assert!(false, "{}", e),
            Err(e) => prop_assert!(clean_refusal(&e), "unclean refusal for {expr_text} {spec_refs:?}: {e}"),
        }
    }
}
