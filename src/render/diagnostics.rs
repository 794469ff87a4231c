//! Diagnostics for the terminal: `diag::render_all`'s text with the `error:`/`warning:` headers
//! and `help:` labels coloured when colour is on. The text itself is exactly what the
//! malformed-manifest corpus pins, so colour is the only difference.

use crate::diag::{Diagnostic, SourceMap, render_all};

use super::paint::{bold, paint};
use console::Style;

/// Render diagnostics, errors and warnings in the order given, with their source snippets.
pub fn diagnostics(diagnostics: &[Diagnostic], sources: &SourceMap, colour: bool) -> String {
    let text = render_all(diagnostics, sources);
    if !colour {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.split_inclusive('\n') {
        if let Some(rest) = line.strip_prefix("error:") {
            out.push_str(&paint(true, &Style::new().red().bold(), "error"));
            out.push(':');
            out.push_str(&paint_summary(rest));
        } else if let Some(rest) = line.strip_prefix("warning:") {
            out.push_str(&paint(true, &Style::new().yellow().bold(), "warning"));
            out.push(':');
            out.push_str(&paint_summary(rest));
        } else if let Some((gutter, rest)) = line.split_once("= help:") {
            out.push_str(gutter);
            out.push_str(&paint(true, &Style::new().cyan().bold(), "= help:"));
            out.push_str(rest);
        } else {
            out.push_str(line);
        }
    }
    out
}

/// The summary after a header, in bold, keeping its line ending outside the style.
fn paint_summary(rest: &str) -> String {
    let body = rest.trim_end_matches('\n');
    let newline = &rest[body.len()..];
    format!("{}{newline}", paint(true, &bold(), body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_changes_headers_and_help() {
        let diags = [
            Diagnostic::error("bad thing").with_help("do this"),
            Diagnostic::warning("odd thing"),
        ];
        let sources = SourceMap::new();
        let plain = diagnostics(&diags, &sources, false);
        assert_eq!(plain, render_all(&diags, &sources));
        let coloured = diagnostics(&diags, &sources, true);
        assert!(
            coloured.contains("\u{1b}[31m\u{1b}[1merror\u{1b}[0m:"),
            "{coloured:?}"
        );
        assert!(
            coloured.contains("\u{1b}[33m\u{1b}[1mwarning\u{1b}[0m:"),
            "{coloured:?}"
        );
        let stripped = console::strip_ansi_codes(&coloured);
        assert_eq!(stripped, plain);
    }
}
