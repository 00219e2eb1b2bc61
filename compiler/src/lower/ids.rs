//! Typed identities of the lowerer, so that an operand number, the
//! dimension iterator and a variable's position cannot be confused with one
//! another (or with a plain count).

use std::fmt;
use std::ops::{Index, IndexMut};

/// An operand of the kernel: its position in `Problem::operands`, the
/// result being operand 0 and the right-hand side's accesses 1, 2, ...
/// left to right.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OperandId(pub usize);

impl OperandId {
    pub const OUTPUT: OperandId = OperandId(0);
}

impl fmt::Display for OperandId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// Per-operand tables (`Problem::operands`, the lowerer's per-operand
/// state) are indexed by operand.
impl<T> Index<OperandId> for Vec<T> {
    type Output = T;
    fn index(&self, i: OperandId) -> &T {
        &self[i.0]
    }
}

impl<T> IndexMut<OperandId> for Vec<T> {
    fn index_mut(&mut self, i: OperandId) -> &mut T {
        &mut self[i.0]
    }
}

/// What iterates the variable of a loop: a level of an operand, or the
/// dimension iterator (every coordinate of the variable, for terms present
/// everywhere, operands reached by locate later, or result-only variables).
/// Operands order before the dimension, as lattice points list them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IterId {
    Operand(OperandId),
    Dimension,
    /// The coordinates a result's workspace row holds.
    Workspace,
}

impl IterId {
    pub fn operand(self) -> Option<OperandId> {
        match self {
            IterId::Operand(o) => Some(o),
            IterId::Dimension | IterId::Workspace => None,
        }
    }
}

impl From<OperandId> for IterId {
    fn from(o: OperandId) -> Self {
        IterId::Operand(o)
    }
}
