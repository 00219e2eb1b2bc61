//! The dimension iterator: every coordinate `0..extent` of the loop's
//! variable. It drives loops over terms present everywhere and over
//! result-only variables, and stands for operands reached out of order
//! (located later), which keep every coordinate alive in a union.

use super::{select_guarded, Cursor, Cx, Head, Kind, LoopIterator, Props, Step};
use crate::format::level::Properties;
use crate::ir::Expr;
use crate::lower::ids::IterId;

pub(crate) struct DimensionIter {
    head: Head,
}

impl DimensionIter {
    /// The iterator over the whole dimension of the variable named `var`,
    /// standing for operand `id` (or for none: `IterId::Dimension`).
    pub fn new(id: IterId, var: &str, tensor: Option<&str>) -> Self {
        let who = tensor.map_or(String::new(), |t| format!(" for {t}"));
        // Every coordinate once, in order; any coordinate can be read.
        let level = Properties {
            full: true,
            ordered: true,
            unique: true,
            branchless: false,
            compact: true,
        };
        let props = Props {
            level,
            locatable: true,
        };
        DimensionIter {
            head: Head {
                id,
                props,
                level: None,
                name: format!("dimension({var}){who}"),
            },
        }
    }
}

impl<'p> LoopIterator<'p> for DimensionIter {
    fn head(&self) -> &Head {
        &self.head
    }
    fn kind(&self) -> Kind<'p> {
        Kind::Dimension
    }
    fn cursor_name(&self, cx: &Cx) -> String {
        cx.var_name().to_string()
    }
    fn begin(&self, cx: &mut Cx) -> Cursor {
        Cursor {
            at: Expr::Int(0),
            end: cx.extent(),
        }
    }
    fn coordinate(&self, _cx: &mut Cx, cur: &Cursor) -> Step {
        Step {
            coord: cur.at.clone(),
            pos: Expr::Int(0),
            found: Expr::Bool(true),
            run_end: None,
        }
    }
    fn coordinate_guarded(&self, cx: &mut Cx, cur: &Cursor, exhausted: i64) -> Step {
        select_guarded(self, cx, cur, exhausted)
    }
}
