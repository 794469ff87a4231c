//! Diagnostics: problems in the user's input, located in their source.
//!
//! Every layer that reads user input (the manifest, `-var` values, vars files) reports problems as
//! [`Diagnostic`]s, all at once, each with a file, a byte span and advice. They are rendered in one
//! place ([`Diagnostic::render`]) in the style of rustc and just: a header line, `--> file:line:col`,
//! the source line with a caret under the span, then `= help:` lines. The exact text is part of the
//! user interface and is pinned by the malformed-manifest corpus in `tests/corpus/`.

mod render;
mod source;

pub use render::render_all;
pub use source::{LineCol, SourceMap, Span};

use std::fmt;

/// How bad a diagnostic is. Errors stop the command; warnings are printed and the command goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// The manifest cannot be used as written.
    Error,
    /// The manifest works, but probably not as the user intended (e.g. SSH open to 0.0.0.0/0).
    Warning,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Error => "error",
            Self::Warning => "warning",
        })
    }
}

/// One located problem with advice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// One line saying what is wrong, without a trailing period.
    pub summary: String,
    /// Where, when the problem has a place in a source file.
    pub span: Option<Span>,
    /// A label printed next to the caret (`expected a string`).
    pub label: Option<String>,
    /// What to do about it; each entry is printed as a `= help:` line.
    pub help: Vec<String>,
}

impl Diagnostic {
    /// An error with a summary and nothing else yet.
    pub fn error(summary: impl Into<String>) -> Self {
        Self {
            severity: Severity::Error,
            summary: summary.into(),
            span: None,
            label: None,
            help: Vec::new(),
        }
    }

    /// A warning with a summary and nothing else yet.
    pub fn warning(summary: impl Into<String>) -> Self {
        Self {
            severity: Severity::Warning,
            ..Self::error(summary)
        }
    }

    /// Locate the diagnostic.
    #[must_use]
    pub fn with_span(mut self, span: Span) -> Self {
        self.span = Some(span);
        self
    }

    /// Locate the diagnostic if a span is known.
    #[must_use]
    pub fn with_span_opt(mut self, span: Option<Span>) -> Self {
        if span.is_some() {
            self.span = span;
        }
        self
    }

    /// Add a label under the caret.
    #[must_use]
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    /// Add one piece of advice.
    #[must_use]
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help.push(help.into());
        self
    }

    /// Whether this diagnostic stops the command.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// A "did you mean" suggestion: the closest candidate by Jaro-Winkler similarity, if it is close
/// enough to be a plausible typo.
pub fn did_you_mean<'a>(
    input: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| {
            (
                strsim::jaro_winkler(&input.to_ascii_lowercase(), &c.to_ascii_lowercase()),
                c,
            )
        })
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        assert_eq!(
            did_you_mean("sise", ["size", "image", "count"]),
            Some("size")
        );
        assert_eq!(
            did_you_mean("Standard_NC6s_v4", ["Standard_NC6s_v3", "Standard_D3_v2"]),
            Some("Standard_NC6s_v3")
        );
        assert_eq!(did_you_mean("zzz", ["size", "image"]), None);
    }
}
