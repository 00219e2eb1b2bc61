fn main() {
    let src = std::path::Path::new("src");
    let mut c = cc::Build::new();
    c.std("c11").include(src).warnings(false);
    #[cfg(target_env = "msvc")]
    c.flag("-utf-8");
    c.file(src.join("parser.c"));
    c.compile("tree-sitter-tensor");
    println!("cargo:rerun-if-changed=src/parser.c");
}
