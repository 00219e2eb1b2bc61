//! The openness proof: a level format defined outside the compiler crate
//! (a "loose compressed" level whose segments need not touch, so it is not
//! compact) implements the same interface, packs, validates, round-trips,
//! and runs end to end through the code generator and the JIT, with no
//! change to the crate beyond its public API.

mod common;
use common::*;
use std::collections::BTreeMap;
use std::sync::Arc;
use tensor_compiler::execute::prepare;
use tensor_compiler::format::level::*;
use tensor_compiler::format::registry::{LevelArgs, Registry};
use tensor_compiler::format::{parse_format, FormatError};
use tensor_compiler::ir::{Emitter, Expr};
use tensor_compiler::notation::parse_assignment;
use tensor_compiler::storage::{pack, unpack, validate};

/// Each parent's coordinates in `crd[bounds[2p] .. bounds[2p+1]]`, with one
/// unused slot after every segment.
#[derive(Debug)]
struct Loose;

impl LevelFormat for Loose {
    fn name(&self) -> &'static str {
        "loose"
    }
    fn spec(&self) -> String {
        "loose".into()
    }
    fn properties(&self) -> Properties {
        Properties {
            full: false,
            ordered: true,
            unique: true,
            branchless: false,
            compact: false,
        }
    }
    fn iteration(&self) -> Iteration<'_> {
        Iteration::CoordPosition(self)
    }
    fn arrays(&self) -> Vec<&'static str> {
        vec!["bounds", "crd"]
    }
    fn pack(&self, input: &PackInput) -> Result<PackOutput, String> {
        let mut bounds = vec![0i32; 2 * input.parent_size];
        let mut crd: Vec<i32> = Vec::new();
        let mut children = Vec::new();
        let mut it = input.parents.iter().peekable();
        for p in 0..input.parent_size {
            let begin = crd.len();
            if let Some(seg) = it.peek().filter(|s| s.pos == p).copied() {
                it.next();
                for (coord, lo, hi) in input.groups(seg, true) {
                    children.push(Segment {
                        pos: crd.len(),
                        lo,
                        hi,
                    });
                    crd.push(coord as i32);
                }
            }
            bounds[2 * p] = begin as i32;
            bounds[2 * p + 1] = crd.len() as i32;
            crd.push(-7); // the gap: an unused slot
        }
        let size = crd.len();
        Ok(PackOutput {
            children,
            size,
            arrays: vec![("bounds", bounds), ("crd", crd)],
            params: Vec::new(),
        })
    }
    fn validate(&self, input: &ValidateInput) -> Result<usize, String> {
        let b = input.own().array("bounds")?;
        let crd = input.own().array("crd")?;
        if b.len() != 2 * input.parent_size {
            return Err(format!(
                "bounds has {} entries, expected {}",
                b.len(),
                2 * input.parent_size
            ));
        }
        for w in b.chunks(2) {
            let (lo, hi) = (w[0], w[1]);
            if lo < 0 || hi < lo || hi as usize > crd.len() {
                return Err(format!("bad segment {lo}..{hi}"));
            }
            checks::coords_in_range(&crd[lo as usize..hi as usize], input.extent())?;
            checks::segment_order(crd, lo as usize, hi as usize, true, true)?;
        }
        Ok(crd.len())
    }
}

impl CoordPositionIteration for Loose {
    fn pos_bounds(&self, c: &LevelCtx, _e: &mut Emitter, parent_pos: Expr) -> (Expr, Expr) {
        let two = Expr::mul(parent_pos, Expr::Int(2));
        (
            c.load("bounds", two.clone()),
            c.load("bounds", Expr::add(two, Expr::Int(1))),
        )
    }
    fn pos_access(
        &self,
        c: &LevelCtx,
        _e: &mut Emitter,
        pos: Expr,
        _ancestors: &[Expr],
    ) -> (Expr, Expr) {
        (c.load("crd", pos), Expr::Bool(true))
    }
}

fn loose(a: &LevelArgs) -> Result<Arc<dyn LevelFormat>, FormatError> {
    a.only(&[])?;
    Ok(Arc::new(Loose))
}

fn registry() -> Registry {
    let mut r = Registry::builtin();
    r.register("loose", loose);
    r
}

#[test]
fn external_level_packs_validates_and_round_trips() {
    let r = registry();
    let mut rng = Rng(11);
    let t = random(&[9, 7], 0.3, &mut rng);
    for spec in [
        "dense,loose",
        "loose,loose",
        "loose,dense",
        "loose,compressed",
    ] {
        let f = parse_format(spec, 2, &r).unwrap();
        assert_eq!(f.level_list(), spec);
        let packed = pack("A", &t, &f).unwrap();
        validate(&packed).unwrap();
        assert_eq!(
            unpack(&packed).unwrap().canonical(),
            t.canonical(),
            "{spec}"
        );
    }
}

#[test]
fn external_level_runs_end_to_end() {
    let r = registry();
    let mut rng = Rng(5);
    let mut data = BTreeMap::new();
    data.insert("A".to_string(), random(&[12, 10], 0.25, &mut rng));
    data.insert("B".to_string(), random(&[12, 10], 0.25, &mut rng));
    data.insert("x".to_string(), random(&[10], 1.0, &mut rng));
    for (expr, out_dims, specs) in [
        (
            "y(i) = A(i,j) * x(j)",
            vec![12],
            vec![("A", "dense,loose"), ("x", "dense"), ("y", "dense")],
        ),
        (
            "C(i,j) = A(i,j) + B(i,j)",
            vec![12, 10],
            vec![("A", "dense,loose"), ("B", "CSR"), ("C", "CSR")],
        ),
        (
            "C(i,j) = A(i,j) * B(i,j)",
            vec![12, 10],
            vec![("A", "loose,loose"), ("B", "COO"), ("C", "dense")],
        ),
    ] {
        let a = parse_assignment(expr).unwrap();
        let orders: BTreeMap<&str, usize> =
            [("A", 2), ("B", 2), ("C", 2), ("x", 1), ("y", 1)].into();
        let formats = specs
            .iter()
            .map(|(n, f)| (n.to_string(), parse_format(f, orders[n], &r).unwrap()))
            .collect();
        let mut p = prepare("k", &a, &formats, &data, &out_dims, None).unwrap();
        p.run().unwrap();
        let want = tensor_compiler::oracle::evaluate(&a, &data, &out_dims, None).unwrap();
        close(&p.result().unwrap(), &want)
            .unwrap_or_else(|e| panic!("{expr}: {e}\n{}", p.kernel.function));
    }
}
