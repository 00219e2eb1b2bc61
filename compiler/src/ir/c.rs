//! C emission: the kernel as a self-contained C function a user can read and
//! compile. The loops are printed by the shared printer; this file adds the
//! signature, the unpacking of tensor structs and the runtime helpers.

use super::print::{Dialect, Printer};
use super::*;
use std::collections::BTreeSet;
use std::fmt::Write;

fn c_elem(t: ElemTy) -> &'static str {
    match t {
        ElemTy::I32 => "int32_t",
        ElemTy::F64 => "double",
    }
}

/// Emit `f` as a C function. Each tensor becomes a struct pointer argument
/// holding its dimensions, level parameters and arrays (as in taco's
/// `taco_tensor_t`), unpacked into locals at the top.
pub fn function(f: &Function) -> String {
    let arrays = f.arrays();
    let params = f.params();
    let tensors: BTreeSet<&str> = arrays
        .iter()
        .map(|(a, _)| a.tensor.as_str())
        .chain(params.iter().map(|p| p.tensor.as_str()))
        .collect();
    let mut out = String::new();
    let args: Vec<String> = tensors.iter().map(|t| format!("tensor_t *{t}")).collect();
    let _ = writeln!(out, "int {}({}) {{", f.name, args.join(", "));
    for p in &params {
        let field = match &p.slot {
            ParamSlot::Level(k, name) => format!("levels[{k}].{name}"),
            ParamSlot::Dim(d) => format!("dims[{d}]"),
        };
        let _ = writeln!(out, "  int64_t {} = {}->{};", p.c_name(), p.tensor, field);
    }
    for (a, writes) in &arrays {
        let field = match &a.slot {
            Slot::Level(k, name) => format!("levels[{k}].{name}"),
            Slot::Vals => "vals".to_string(),
            Slot::Scratch(name, _) => format!("scratch.{name}"),
        };
        let constness = if *writes { "" } else { "const " };
        let _ = writeln!(out, "  {constness}{}* restrict {} = ({constness}{}*){}->{};", c_elem(a.elem()), a.c_name(), c_elem(a.elem()), a.tensor, field);
        if *writes && body_reserves(f, a) {
            let _ = writeln!(out, "  int64_t {}_capacity = {}->{}_capacity;", a.c_name(), a.tensor, field.replace('.', "_"));
        }
    }
    let mut p = Printer::new(&f.vars, Dialect::C);
    p.block(&f.body, 1);
    out.push_str(&p.finish());
    for (a, writes) in &arrays {
        if *writes && !matches!(a.slot, Slot::Scratch(..)) {
            let field = match &a.slot {
                Slot::Level(k, name) => format!("levels[{k}].{name}"),
                _ => "vals".to_string(),
            };
            if body_reserves(f, a) {
                let _ = writeln!(out, "  {}->{} = ({}*){};", a.tensor, field, c_elem(a.elem()), a.c_name());
            }
        }
    }
    out.push_str("  return 0;\n}\n");
    out
}

fn body_reserves(f: &Function, a: &ArrayRef) -> bool {
    let mut found = false;
    walk_block(&f.body, &mut |s| {
        if let Stmt::Reserve { array, .. } = s {
            if array == a {
                found = true;
            }
        }
    });
    found
}
