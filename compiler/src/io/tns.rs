//! FROSTT `.tns`: one entry per line, 1-based coordinates then the value;
//! `#` comments and blank lines skipped. A file carries no dimensions.

use super::lines::{float, int, text, tokens, Lines};
use super::IoError;
use crate::coo::CooTensor;
use std::io::{BufRead, Write};

pub fn read_tns<R: BufRead>(reader: R, file: &str, dims: Option<&[usize]>) -> Result<CooTensor, IoError> {
    let mut lines = Lines::new(reader);
    let mut order: Option<usize> = None;
    let mut coords: Vec<u32> = Vec::new();
    let mut vals: Vec<f64> = Vec::new();
    let mut maxes: Vec<usize> = Vec::new();
    let mut toks: Vec<(usize, usize)> = Vec::with_capacity(8);
    loop {
        let n = lines.number + 1;
        if !lines.advance().map_err(|m| IoError::at(file, n, m))? {
            break;
        }
        if lines.skippable(b'#') {
            continue;
        }
        let line = lines.number;
        let l = lines.current();
        toks.clear();
        let base = l.as_ptr() as usize;
        toks.extend(tokens(l).map(|t| (t.as_ptr() as usize - base, t.len())));
        let tok = |k: usize| &l[toks[k].0..toks[k].0 + toks[k].1];
        if toks.len() < 2 {
            return Err(IoError::at(file, line, "expected coordinates and a value".to_string()));
        }
        let nd = toks.len() - 1;
        match order {
            None => {
                if let Some(d) = dims {
                    if d.len() != nd {
                        return Err(IoError::at(file, line, format!("{nd} coordinates per line but {} dimensions were given", d.len())));
                    }
                }
                order = Some(nd);
                maxes = vec![0; nd];
            }
            Some(o) if o != nd => return Err(IoError::at(file, line, format!("{} columns, but earlier lines have {}", nd + 1, o + 1))),
            Some(_) => {}
        }
        for d in 0..nd {
            let tok = tok(d);
            let i = int(tok).ok_or_else(|| IoError::at(file, line, format!("coordinate `{}` is not an integer", text(tok))))?;
            if i < 1 {
                return Err(IoError::at(file, line, format!("coordinate {i} in mode {}: .tns coordinates are 1-based", d + 1)));
            }
            if i > u32::MAX as i64 {
                return Err(IoError::at(file, line, format!("coordinate {i} is too large")));
            }
            if let Some(dd) = dims {
                if i as usize > dd[d] {
                    return Err(IoError::at(file, line, format!("coordinate {i} beyond dimension {} of mode {}", dd[d], d + 1)));
                }
            }
            maxes[d] = maxes[d].max(i as usize);
            coords.push((i - 1) as u32);
        }
        let v = float(tok(nd)).ok_or_else(|| IoError::at(file, line, format!("value `{}` is not a number", text(tok(nd)))))?;
        vals.push(v);
    }
    let order = match (order, dims) {
        (Some(o), _) => o,
        (None, Some(d)) => d.len(),
        (None, None) => return Err(IoError::file(file, "no entries, so the dimensions are unknown: give them with -d")),
    };
    let dims = dims.map(|d| d.to_vec()).unwrap_or(maxes);
    let _ = order;
    Ok(CooTensor { dims, coords, vals })
}

pub fn write_tns<W: Write>(w: &mut W, t: &CooTensor) -> std::io::Result<()> {
    if t.order() == 0 {
        return writeln!(w, "{:?}", t.vals.iter().sum::<f64>());
    }
    let mut line = String::new();
    for e in 0..t.nnz() {
        line.clear();
        for c in t.coord(e) {
            line.push_str(&(c + 1).to_string());
            line.push(' ');
        }
        line.push_str(&format!("{:?}", t.vals[e]));
        writeln!(w, "{line}")?;
    }
    Ok(())
}
