//! Write a generated matrix as Matrix Market, for benchmarks:
//! `cargo run --release -p tensor-compiler --example gen_matrix -- stencil7 126 out.mtx`

use tensor_compiler::generate;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: gen_matrix stencil5|stencil7|banded|powerlaw|blocks|uniform SIZE OUT.mtx";
    let (kind, size, out) = match args.as_slice() {
        [k, s, o] => (k.as_str(), s.parse::<usize>().unwrap_or(0), o),
        _ => {
            eprintln!("error: {usage}");
            std::process::exit(2);
        }
    };
    let t = match kind {
        "stencil5" => generate::stencil(5, size, 1),
        "stencil7" => generate::stencil(7, size, 1),
        "banded" => Ok(generate::banded(size, 3, 1)),
        "powerlaw" => Ok(generate::power_law(size, 4, 1)),
        "blocks" => generate::blocks(size, 3, 1),
        // 20 entries a row at uniform random columns
        "uniform" => Ok(generate::uniform(size, 20, 1)),
        _ => Err(usage.to_string()),
    };
    match t.and_then(|t| {
        tensor_compiler::io::write_tensor(std::path::Path::new(out), &t).map_err(|e| e.to_string())
    }) {
        Ok(()) => {}
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
