//! Rendering diagnostics as text with a source snippet and a caret.
//!
//! The output is plain text (colour is added by the caller's styling, never baked in here) so that
//! the exact text can be pinned by tests:
//!
//! ```text
//! error: unknown attribute `sise` in `vm "gpu"`
//!   --> dual.hcl:12:3
//!    |
//! 12 |   sise = "Standard_NC6s_v3"
//!    |   ^^^^ not an attribute of `vm`
//!    = help: did you mean `size`?
//! ```

use std::fmt::Write as _;

use super::source::{floor_char_boundary, line_col};
use super::{Diagnostic, SourceMap, Span};

impl Diagnostic {
    /// Render one diagnostic, quoting its source from `sources`.
    pub fn render(&self, sources: &SourceMap) -> String {
        let mut out = format!("{}: {}\n", self.severity, self.summary);
        let located = self
            .span
            .as_ref()
            .and_then(|span| sources.text(&span.file).map(|text| (span, text)));
        let gutter = if let Some((span, text)) = located {
            self.render_snippet(&mut out, span, text)
        } else {
            if let Some(span) = &self.span {
                let _ = writeln!(out, " --> {}", span.file.display());
            }
            if let Some(label) = &self.label {
                let _ = writeln!(out, "  = note: {label}");
            }
            String::new()
        };
        for help in &self.help {
            let _ = writeln!(out, "{gutter} = help: {help}");
        }
        out
    }

    /// Write the `-->` line, the quoted source line and the caret; return the gutter padding.
    fn render_snippet(&self, out: &mut String, span: &Span, text: &str) -> String {
        let start = line_col(text, span.start);
        let pad = " ".repeat(start.line.to_string().len());
        let _ = writeln!(
            out,
            "{pad}--> {}:{}:{}",
            span.file.display(),
            start.line,
            start.col
        );
        let line_text = source_line(text, span.start).trim_end();
        let _ = writeln!(out, "{pad} |");
        let _ = writeln!(out, "{} | {line_text}", start.line);
        // The caret runs to the end of the span, or to the end of the line for spans that cross
        // lines; it is always at least one character wide.
        let end = line_col(text, span.end.max(span.start));
        let caret_len = if end.line == start.line {
            end.col.saturating_sub(start.col)
        } else {
            line_text.chars().count().saturating_sub(start.col - 1)
        }
        .max(1);
        let _ = write!(
            out,
            "{pad} | {}{}",
            " ".repeat(start.col - 1),
            "^".repeat(caret_len)
        );
        match &self.label {
            Some(label) => {
                let _ = writeln!(out, " {label}");
            }
            None => out.push('\n'),
        }
        pad
    }
}

/// Render several diagnostics, errors and warnings in the order given, separated by blank lines,
/// followed by a count line when there is more than one error.
pub fn render_all(diagnostics: &[Diagnostic], sources: &SourceMap) -> String {
    let mut out = String::new();
    for (i, diagnostic) in diagnostics.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&diagnostic.render(sources));
    }
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    if errors > 1 {
        let _ = writeln!(
            out,
            "\nerror: the manifest has {errors} problems; none was applied"
        );
    }
    out
}

/// The full line of `text` containing byte `offset`, without its newline.
fn source_line(text: &str, offset: usize) -> &str {
    let offset = floor_char_boundary(text, offset.min(text.len()));
    let start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    &text[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_snippet_caret_label_and_help() {
        let mut sources = SourceMap::new();
        let text = "vm \"gpu\" {\n  sise = \"Standard_NC6s_v3\"\n}\n";
        let file = sources.add("dual.hcl", text);
        let start = text.find("sise").expect("present");
        let diagnostic = Diagnostic::error("unknown attribute `sise` in `vm \"gpu\"`")
            .with_span(Span::new(file, start, start + 4))
            .with_label("not an attribute of `vm`")
            .with_help("did you mean `size`?");
        assert_eq!(
            diagnostic.render(&sources),
            "error: unknown attribute `sise` in `vm \"gpu\"`\n \
             --> dual.hcl:2:3\n  \
             |\n\
             2 |   sise = \"Standard_NC6s_v3\"\n  \
             |   ^^^^ not an attribute of `vm`\n  \
             = help: did you mean `size`?\n"
        );
    }

    #[test]
    fn renders_without_a_span() {
        let diagnostic = Diagnostic::error("no manifest given").with_help("pass a file");
        assert_eq!(
            diagnostic.render(&SourceMap::new()),
            "error: no manifest given\n = help: pass a file\n"
        );
    }
}
