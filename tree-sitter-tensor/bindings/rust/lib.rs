//! The `.tensor` language for tree-sitter: the grammar the compiler lowers
//! to its AST and the editors highlight with.

use tree_sitter_language::LanguageFn;

extern "C" {
    fn tree_sitter_tensor() -> *const ();
}

/// The tree-sitter language of `.tensor` files.
pub const LANGUAGE: LanguageFn = unsafe { LanguageFn::from_raw(tree_sitter_tensor) };

/// The content of the node-types.json file for this grammar.
pub const NODE_TYPES: &str = include_str!("../../src/node-types.json");
pub const HIGHLIGHTS_QUERY: &str = include_str!("../../queries/highlights.scm");
pub const LOCALS_QUERY: &str = include_str!("../../queries/locals.scm");
pub const FOLDS_QUERY: &str = include_str!("../../queries/folds.scm");
/// Hash of the grammar.js that `src/` was generated from (see README).
pub const GENERATED_FROM: &str = include_str!("../../src/grammar.js.sha256");

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> tree_sitter::Tree {
        let mut p = tree_sitter::Parser::new();
        p.set_language(&LANGUAGE.into())
            .expect("load tensor grammar");
        p.parse(text, None).expect("parse")
    }

    const EXAMPLE: &str = include_str!("../../test/example.tensor");

    #[test]
    fn example_parses_without_errors() {
        let t = parse(EXAMPLE);
        assert!(!t.root_node().has_error(), "{}", t.root_node().to_sexp());
    }

    #[test]
    fn half_typed_kernel_keeps_the_others() {
        let t = parse("kernel a { y(i) = A(i,j) * \n}\nkernel b { z(i) = x(i) }\ntensor q : f64[3] @ sparse\n");
        let root = t.root_node();
        assert!(root.has_error());
        let kinds: Vec<&str> = (0..root.named_child_count())
            .filter_map(|i| root.named_child(i))
            .map(|n| n.kind())
            .collect();
        assert!(kinds.contains(&"tensor_declaration"), "{kinds:?}");
        assert_eq!(
            kinds.iter().filter(|k| **k == "kernel_declaration").count(),
            2,
            "{kinds:?}"
        );
    }

    #[test]
    fn queries_compile() {
        let lang: tree_sitter::Language = LANGUAGE.into();
        for q in [HIGHLIGHTS_QUERY, LOCALS_QUERY, FOLDS_QUERY] {
            tree_sitter::Query::new(&lang, q).expect("query compiles");
        }
    }

    /// `src/` must be regenerated whenever grammar.js changes
    /// (scripts/regenerate.sh writes the hash).
    #[test]
    fn generated_parser_is_current() {
        let grammar = include_bytes!("../../grammar.js");
        assert_eq!(
            GENERATED_FROM.trim(),
            format!("{:016x}", fnv1a(grammar)),
            "src/ is stale: run tree-sitter-tensor/scripts/regenerate.sh"
        );
    }

    fn fnv1a(bytes: &[u8]) -> u64 {
        let mut h: u64 = 0xcbf29ce484222325;
        for b in bytes {
            h ^= *b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
        h
    }
}
