//! The checks that follow decoding: a block's decoded values against ranges, each other and the
//! catalog, reported at the attribute (or the block's header) with the block's title.

use crate::diag::{Diagnostic, Span};

use super::super::decode::Located;
use super::super::eval::EvalBlock;

/// Reports about one block.
pub(super) struct Check<'a> {
    block: &'a EvalBlock,
    diags: &'a mut Vec<Diagnostic>,
}

impl<'a> Check<'a> {
    /// Check `block`, reporting into `diags`.
    pub fn new(block: &'a EvalBlock, diags: &'a mut Vec<Diagnostic>) -> Self {
        Self { block, diags }
    }

    /// Report a diagnostic.
    pub fn report(&mut self, diagnostic: Diagnostic) {
        self.diags.push(diagnostic);
    }

    /// The diagnostics being collected (to check a nested block with its own `Check`).
    pub fn diags_mut(&mut self) -> &mut Vec<Diagnostic> {
        self.diags
    }

    /// The block being checked.
    pub fn block(&self) -> &'a EvalBlock {
        self.block
    }

    /// How messages name the block: `vm "gpu"`.
    pub fn title(&self) -> String {
        self.block.title()
    }

    /// Whether the attribute is written (even if its evaluation failed).
    pub fn has(&self, name: &str) -> bool {
        self.block.attr(name).is_some()
    }

    /// The span of an attribute's value, or the block header if it is not written.
    pub fn span_of(&self, name: &str) -> Span {
        self.block
            .attr(name)
            .map_or_else(|| self.block.header.clone(), |a| a.value_span.clone())
    }

    /// A whole number that must lie in `min..=max` (`unit` follows the bounds in the message:
    /// " GiB"); `None` when it is out of range (reported) or was not given.
    pub fn in_range(
        &mut self,
        value: Option<Located<i64>>,
        name: &str,
        (min, max): (i64, i64),
        unit: &str,
    ) -> Option<Located<i64>> {
        let n = value?;
        if n.value < min || n.value > max {
            let d = Diagnostic::error(format!(
                "`{name}` in {} must be between {min} and {max}{unit}",
                self.title()
            ))
            .with_span(n.span.clone())
            .with_label(format!("this is {}", n.value));
            self.diags.push(d);
            return None;
        }
        Some(n)
    }
}
