//! One generated case: an expression, the format and dimensions of every
//! tensor, and the input data; printable as a `tensorc` command line.

use super::data;
use super::rng::Rng;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use tensor_compiler::coo::CooTensor;
use tensor_compiler::notation::parse_assignment;

#[derive(Clone, Debug)]
pub struct Operand {
    pub name: String,
    /// As `tensorc -f` takes it: `CSR`, `BCSR(2)`, `dense,compressed:1,0`.
    pub format: String,
    pub dims: Vec<usize>,
    /// Inputs always; the result only when it is read (on the right-hand
    /// side or through `+=`).
    pub data: Option<CooTensor>,
}

#[derive(Clone, Debug)]
pub struct Case {
    pub seed: u64,
    /// The template this case came from.
    pub family: &'static str,
    pub expr: String,
    pub result: Operand,
    pub inputs: Vec<Operand>,
}

impl Case {
    /// A case for `expr`: formats from `formats` (dense when absent), index
    /// extents from `extents`, random data for every tensor read.
    pub fn new(
        seed: u64,
        family: &'static str,
        expr: &str,
        formats: &[(&str, String)],
        extents: &[(&str, usize)],
        rng: &mut Rng,
    ) -> Case {
        let a = parse_assignment(expr).unwrap_or_else(|e| {
            panic!("template wrote an expression that does not parse: {expr}: {e}")
        });
        let extent = |v: &str| {
            extents
                .iter()
                .find(|(n, _)| *n == v)
                .map(|(_, e)| *e)
                .unwrap_or_else(|| panic!("no extent for `{v}` in {expr}"))
        };
        let format_of = |t: &str| {
            formats
                .iter()
                .find(|(n, _)| *n == t)
                .map(|(_, f)| f.clone())
                .unwrap_or_else(|| "dense".into())
        };
        let mut inputs: Vec<Operand> = Vec::new();
        for acc in a.rhs.accesses() {
            if acc.tensor == a.lhs.tensor || inputs.iter().any(|o| o.name == acc.tensor) {
                continue;
            }
            let dims: Vec<usize> = acc.vars().iter().map(|v| extent(v)).collect();
            let t = data::random(&dims, rng);
            inputs.push(Operand {
                name: acc.tensor.clone(),
                format: format_of(&acc.tensor),
                dims,
                data: Some(t),
            });
        }
        let dims: Vec<usize> = a.lhs.vars().iter().map(|v| extent(v)).collect();
        let read = a.accumulate
            || a.rhs
                .accesses()
                .iter()
                .any(|acc| acc.tensor == a.lhs.tensor);
        let data = read.then(|| data::random(&dims, rng));
        let result = Operand {
            name: a.lhs.tensor.clone(),
            format: format_of(&a.lhs.tensor),
            dims,
            data,
        };
        Case {
            seed,
            family,
            expr: expr.to_string(),
            result,
            inputs,
        }
    }

    pub fn operand_mut(&mut self, name: &str) -> &mut Operand {
        if self.result.name == name {
            return &mut self.result;
        }
        self.inputs
            .iter_mut()
            .find(|o| o.name == name)
            .unwrap_or_else(|| panic!("no operand {name}"))
    }

    /// Every operand with data: the inputs, then the result when it is read.
    pub fn data(&self) -> BTreeMap<String, CooTensor> {
        self.inputs
            .iter()
            .chain(std::iter::once(&self.result))
            .filter_map(|o| o.data.clone().map(|d| (o.name.clone(), d)))
            .collect()
    }

    /// `expr | B:COO[2,3] x:dense[3] -> y:dense[2]`.
    pub fn describe(&self) -> String {
        let op = |o: &Operand| {
            let nnz = o
                .data
                .as_ref()
                .map(|d| format!(" nnz {}", d.nnz()))
                .unwrap_or_default();
            format!("{}:{}{:?}{nnz}", o.name, o.format, o.dims)
        };
        let ins: Vec<String> = self.inputs.iter().map(op).collect();
        format!(
            "{}   [{} -> {}]",
            self.expr,
            ins.join(" "),
            op(&self.result)
        )
    }

    /// Shell lines that reproduce the case with `tensorc`: the input files,
    /// then the command, which writes the result to `NAME.out.tns`.
    pub fn command_line(&self) -> String {
        let mut s = String::new();
        let mut args = String::new();
        for o in self.inputs.iter().chain(std::iter::once(&self.result)) {
            let _ = write!(args, " -f '{}:{}'", o.name, o.format);
        }
        for o in self.inputs.iter().chain(std::iter::once(&self.result)) {
            if let Some(d) = &o.data {
                let _ = writeln!(
                    s,
                    "printf -- '{}' > {}.tns",
                    tns_lines(d).replace('\n', "\\n"),
                    o.name
                );
                let _ = write!(args, " -i {}:{}.tns", o.name, o.name);
            }
            if !o.dims.is_empty() {
                let dims: Vec<String> = o.dims.iter().map(|d| d.to_string()).collect();
                let _ = write!(args, " -d {}:{}", o.name, dims.join(","));
            }
        }
        if super::run::on_cc_tier() {
            args.push_str(" --backend cc");
        }
        let r = &self.result.name;
        let _ = write!(
            s,
            "tensorc '{}'{args} -o {r}:{r}.out.tns && cat {r}.out.tns",
            self.expr
        );
        s
    }
}

/// FROSTT lines (1-based), as `tensorc -i` reads them; a scalar is its value.
pub fn tns_lines(t: &CooTensor) -> String {
    if t.order() == 0 {
        return format!("{}\n", t.vals.iter().sum::<f64>());
    }
    let mut s = String::new();
    for e in 0..t.nnz() {
        for c in t.coord(e) {
            let _ = write!(s, "{} ", c + 1);
        }
        let _ = writeln!(s, "{}", t.vals[e]);
    }
    s
}
