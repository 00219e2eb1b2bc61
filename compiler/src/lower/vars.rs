//! The index variables of a kernel as typed ids, with one table per loop
//! nest (`Problem::vars`) saying what each is: a variable the user wrote,
//! the coordinate of a level with no dimension of its own (hidden: DIA's
//! diagonal, a blocked format's block variables), or a user variable
//! computed from two hidden ones (derived). Lowering keys its state by id;
//! names are for display only (IR variables, plans, messages, the editor).

use super::ids::OperandId;
use crate::ir::Expr;

/// An index variable: its position in the kernel's `IndexVars` table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IndexVar(usize);

/// What an index variable is.
#[derive(Clone, Debug, PartialEq)]
pub enum VarKind {
    /// Written in the statement, with a dimension of its own.
    User,
    /// The coordinate of level `level` of operand `operand`, which has no
    /// dimension of its own: private to that access.
    Hidden { operand: OperandId, level: usize },
    /// Written in the statement but computed from two hidden block
    /// variables of one operand: `outer * b + inner`.
    Derived {
        outer: IndexVar,
        inner: IndexVar,
        b: i64,
    },
}

/// One index variable's entry.
#[derive(Clone, Debug)]
struct Entry {
    /// The name shown for it: the user's, or for a hidden variable the
    /// format's name for it followed by its tensor's (`dA`, `iblkB2`).
    pub name: String,
    pub kind: VarKind,
    /// Its extent as an IR expression (a tensor dimension or a level's
    /// size parameter).
    pub extent: Expr,
}

/// The index variables of one loop nest, in order of creation: the user's
/// in order of first use (the result's first), each hidden one when its
/// access is resolved.
#[derive(Clone, Debug, Default)]
pub struct IndexVars {
    vars: Vec<Entry>,
}

impl IndexVars {
    pub fn add(&mut self, name: String, kind: VarKind, extent: Expr) -> IndexVar {
        self.vars.push(Entry { name, kind, extent });
        IndexVar(self.vars.len() - 1)
    }

    pub fn name(&self, v: IndexVar) -> &str {
        &self.vars[v.0].name
    }

    pub fn kind(&self, v: IndexVar) -> &VarKind {
        &self.vars[v.0].kind
    }

    pub fn extent(&self, v: IndexVar) -> &Expr {
        &self.vars[v.0].extent
    }

    /// Mark user variable `v` as computed from two block variables.
    pub fn derive(&mut self, v: IndexVar, outer: IndexVar, inner: IndexVar, b: i64) {
        self.vars[v.0].kind = VarKind::Derived { outer, inner, b };
    }

    pub fn ids(&self) -> impl Iterator<Item = IndexVar> + '_ {
        (0..self.vars.len()).map(IndexVar)
    }

    /// The variable the user wrote as `name` (not a hidden one, whatever
    /// its name): where the notation, or the editor, names a variable.
    pub fn user(&self, name: &str) -> Option<IndexVar> {
        self.ids()
            .find(|&v| self.name(v) == name && !self.is_hidden(v))
    }

    pub fn is_hidden(&self, v: IndexVar) -> bool {
        matches!(self.kind(v), VarKind::Hidden { .. })
    }

    /// The operand and level whose coordinate hidden variable `v` is.
    pub fn hidden_level(&self, v: IndexVar) -> Option<(OperandId, usize)> {
        match *self.kind(v) {
            VarKind::Hidden { operand, level } => Some((operand, level)),
            _ => None,
        }
    }

    pub fn hidden(&self) -> impl Iterator<Item = IndexVar> + '_ {
        self.ids().filter(|&v| self.is_hidden(v))
    }

    /// `(outer, inner, b)` when `v` is computed as `outer * b + inner`.
    pub fn derivation(&self, v: IndexVar) -> Option<(IndexVar, IndexVar, i64)> {
        match *self.kind(v) {
            VarKind::Derived { outer, inner, b } => Some((outer, inner, b)),
            _ => None,
        }
    }

    /// The derived variables, in order of creation.
    pub fn derived(&self) -> impl Iterator<Item = IndexVar> + '_ {
        self.ids().filter(|&v| self.derivation(v).is_some())
    }

    /// Whether `v` is one of the block variables a derived variable is
    /// computed from.
    pub fn derives_another(&self, v: IndexVar) -> bool {
        self.derived()
            .filter_map(|d| self.derivation(d))
            .any(|(o, i, _)| o == v || i == v)
    }

    /// The names of `vs`, joined by `sep`.
    pub fn join(&self, vs: &[IndexVar], sep: &str) -> String {
        vs.iter()
            .map(|&v| self.name(v))
            .collect::<Vec<_>>()
            .join(sep)
    }

    pub fn names(&self, vs: &[IndexVar]) -> Vec<String> {
        vs.iter().map(|&v| self.name(v).to_string()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hidden_variable_is_never_taken_for_a_user_variable_of_the_same_name() {
        let mut t = IndexVars::default();
        let hidden = t.add(
            "dA".into(),
            VarKind::Hidden {
                operand: OperandId(1),
                level: 0,
            },
            Expr::Int(3),
        );
        let user = t.add("dA".into(), VarKind::User, Expr::Int(4));
        assert_ne!(hidden, user);
        assert_eq!(t.user("dA"), Some(user));
        assert_eq!(t.hidden_level(hidden), Some((OperandId(1), 0)));
        assert_eq!(t.hidden().collect::<Vec<_>>(), [hidden]);
    }

    #[test]
    fn derived_variables_name_their_blocks() {
        let mut t = IndexVars::default();
        let i = t.add("i".into(), VarKind::User, Expr::Int(8));
        let outer = t.add(
            "iblkA".into(),
            VarKind::Hidden {
                operand: OperandId(1),
                level: 0,
            },
            Expr::Int(2),
        );
        let inner = t.add(
            "iinA".into(),
            VarKind::Hidden {
                operand: OperandId(1),
                level: 2,
            },
            Expr::Int(4),
        );
        t.derive(i, outer, inner, 4);
        assert_eq!(t.derivation(i), Some((outer, inner, 4)));
        assert!(t.derives_another(outer) && t.derives_another(inner) && !t.derives_another(i));
        assert_eq!(t.join(&[outer, i], " -> "), "iblkA -> i");
        assert_eq!(t.names(&[inner]), ["iinA"]);
    }
}
