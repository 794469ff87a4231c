//! Canonical formatting for `dsinfra fmt`: two-space indentation by nesting, one space around
//! `=`, aligned `=` in runs of attributes, no trailing whitespace, at most one blank line in a
//! row, one newline at the end. Comments, heredocs and the text of strings are kept as written.
//!
//! The formatter works on lines with a small scanner that knows strings, interpolations, comments
//! and heredocs (so braces inside them do not count), rather than re-printing the hcl-edit tree,
//! because hcl-edit keeps whitespace inside its decorations and re-indenting those safely is
//! harder than re-indenting lines. To make sure formatting never changes meaning, the result is
//! parsed again and compared with the input's structure; if they differ, the input is returned
//! unchanged.

use std::path::Path;
use std::sync::Arc;

use crate::diag::SourceMap;

use super::LoadFailed;
use super::parse::{self, Spans};

/// Format a manifest canonically (idempotent; keeps comments). Fails only on syntax errors.
pub fn format(path: &Path, text: &str) -> Result<String, LoadFailed> {
    let mut sources = SourceMap::new();
    let file = sources.add(path, text);
    let spans = Spans::new(file, Arc::from(text));
    if let Err(d) = parse::parse(&spans, text) {
        return Err(LoadFailed {
            diagnostics: vec![d],
            sources,
        });
    }
    let formatted = format_lines(text);
    let same = match (text.parse::<hcl::Body>(), formatted.parse::<hcl::Body>()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    Ok(if same { formatted } else { text.to_owned() })
}

/// Where the scanner is at the end of a line.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Mode {
    /// Plain code.
    Code,
    /// Inside a `/* */` comment.
    BlockComment,
    /// Inside a heredoc ending with this marker.
    Heredoc(String),
}

/// One scanned line: its nesting effect and whether it opens a heredoc.
struct Scan {
    /// Closing brackets at the very start of the line (they dedent the line itself).
    leading_closers: usize,
    /// Net change of the nesting depth over the line.
    delta: isize,
    /// A heredoc that starts after this line.
    heredoc: Option<String>,
    /// The line ends inside a block comment.
    in_comment: bool,
}

/// Scan a line of code for brackets outside strings and comments. Strings may contain
/// interpolations with nested strings: `"${lower("X")}"`, so a small stack tracks them.
// A single character loop is the clearest form of a scanner.
#[allow(clippy::too_many_lines)]
fn scan(line: &str, starts_in_comment: bool) -> Scan {
    #[derive(PartialEq)]
    enum S {
        Code,
        Str,
        Interp(usize),
    }
    let chars: Vec<char> = line.chars().collect();
    let mut stack: Vec<S> = vec![S::Code];
    let mut delta: isize = 0;
    let mut leading_closers = 0;
    let mut seen_other = false;
    let mut in_comment = starts_in_comment;
    let mut heredoc = None;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if in_comment {
            if c == '*' && next == Some('/') {
                in_comment = false;
                i += 2;
                continue;
            }
            i += 1;
            continue;
        }
        match stack.last() {
            Some(S::Str) => {
                match (c, next) {
                    ('\\', _) => i += 1,
                    ('"', _) => {
                        stack.pop();
                    }
                    ('$' | '%', Some('{')) => {
                        stack.push(S::Interp(0));
                        i += 1;
                    }
                    _ => {}
                }
                i += 1;
                continue;
            }
            Some(S::Interp(depth)) => {
                let depth = *depth;
                match c {
                    '"' => stack.push(S::Str),
                    '{' => {
                        stack.pop();
                        stack.push(S::Interp(depth + 1));
                    }
                    '}' if depth == 0 => {
                        stack.pop();
                    }
                    '}' => {
                        stack.pop();
                        stack.push(S::Interp(depth - 1));
                    }
                    _ => {}
                }
                i += 1;
                continue;
            }
            _ => {}
        }
        match (c, next) {
            ('#', _) | ('/', Some('/')) => break,
            ('/', Some('*')) => {
                in_comment = true;
                i += 2;
                continue;
            }
            ('"', _) => {
                stack.push(S::Str);
                seen_other = true;
            }
            ('<', Some('<')) => {
                let rest: String = chars[i + 2..].iter().collect();
                let rest = rest.trim_start_matches('-');
                let marker: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !marker.is_empty() {
                    heredoc = Some(marker);
                }
                seen_other = true;
                i += 2;
                continue;
            }
            ('{' | '[' | '(', _) => {
                delta += 1;
                seen_other = true;
            }
            ('}' | ']' | ')', _) => {
                delta -= 1;
                if !seen_other {
                    leading_closers += 1;
                }
            }
            (c, _) if c.is_whitespace() => {}
            _ => seen_other = true,
        }
        i += 1;
    }
    Scan {
        leading_closers,
        delta,
        heredoc,
        in_comment,
    }
}

/// If the line is `key = value` (not `==`), split it into key and value.
fn split_attribute(line: &str) -> Option<(&str, &str)> {
    let key_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .unwrap_or(line.len());
    if key_end == 0 || !line.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        return None;
    }
    let rest = line[key_end..].trim_start();
    let value = rest.strip_prefix('=')?;
    if value.starts_with('=') {
        return None;
    }
    Some((&line[..key_end], value.trim_start()))
}

/// A formatted line before alignment.
struct Line {
    indent: usize,
    /// `Some((key, value))` for an attribute line, aligned with its neighbours.
    attr: Option<(String, String)>,
    text: String,
    /// Copied verbatim (heredoc body, comment body).
    verbatim: bool,
    /// This attribute's value continues on later lines (ends an alignment run).
    opens: bool,
}

fn format_lines(text: &str) -> String {
    let mut lines: Vec<Line> = Vec::new();
    let mut depth: isize = 0;
    let mut mode = Mode::Code;
    for raw in text.lines() {
        match &mode {
            Mode::Heredoc(marker) => {
                let done = raw.trim() == marker;
                lines.push(Line {
                    indent: 0,
                    attr: None,
                    // Heredoc bodies and their end marker are kept byte for byte: their
                    // whitespace is the string's content.
                    text: raw.to_owned(),
                    verbatim: true,
                    opens: false,
                });
                if done {
                    mode = Mode::Code;
                }
                continue;
            }
            Mode::BlockComment => {
                let s = scan(raw, true);
                lines.push(Line {
                    indent: 0,
                    attr: None,
                    text: raw.trim_end().to_owned(),
                    verbatim: true,
                    opens: false,
                });
                depth += s.delta;
                if !s.in_comment {
                    mode = Mode::Code;
                }
                continue;
            }
            Mode::Code => {}
        }
        let trimmed = raw.trim();
        let s = scan(trimmed, false);
        let level = (depth - isize::try_from(s.leading_closers).unwrap_or(0)).max(0);
        let indent = level.unsigned_abs();
        depth += s.delta;
        let attr = split_attribute(trimmed).map(|(k, v)| (k.to_owned(), v.to_owned()));
        lines.push(Line {
            indent,
            opens: attr.is_some() && (s.delta > 0 || s.heredoc.is_some()),
            attr,
            text: trimmed.to_owned(),
            verbatim: false,
        });
        if let Some(marker) = s.heredoc {
            mode = Mode::Heredoc(marker);
        } else if s.in_comment {
            mode = Mode::BlockComment;
        }
    }
    align(&mut lines);
    let mut out = String::new();
    let mut blank_run = 0;
    for line in &lines {
        if line.verbatim {
            out.push_str(&line.text);
            out.push('\n');
            blank_run = 0;
            continue;
        }
        if line.text.is_empty() {
            blank_run += 1;
            if blank_run > 1 || out.is_empty() {
                continue;
            }
            out.push('\n');
            continue;
        }
        blank_run = 0;
        out.push_str(&"  ".repeat(line.indent));
        out.push_str(&line.text);
        out.push('\n');
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    if out.is_empty() {
        return String::new();
    }
    out
}

/// Align `=` within runs of consecutive attribute lines at the same indentation.
fn align(lines: &mut [Line]) {
    let mut start = 0;
    while start < lines.len() {
        if lines[start].attr.is_none() || lines[start].verbatim {
            start += 1;
            continue;
        }
        let indent = lines[start].indent;
        let mut end = start;
        while end < lines.len()
            && lines[end].attr.is_some()
            && !lines[end].verbatim
            && lines[end].indent == indent
        {
            end += 1;
            if lines[end - 1].opens {
                break;
            }
        }
        let width = lines[start..end]
            .iter()
            .filter_map(|l| l.attr.as_ref().map(|(k, _)| k.chars().count()))
            .max()
            .unwrap_or(0);
        for line in &mut lines[start..end] {
            if let Some((key, value)) = &line.attr {
                let pad = " ".repeat(width - key.chars().count());
                line.text = if value.is_empty() {
                    format!("{key}{pad} =")
                } else {
                    format!("{key}{pad} = {value}")
                };
            }
        }
        start = end.max(start + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(text: &str) -> String {
        format(Path::new("t.hcl"), text).expect("valid HCL")
    }

    #[test]
    fn indents_aligns_and_keeps_comments() {
        let input = "# top\nvm \"gpu\" {\nsize=\"Standard_NC6s_v3\" # the GPU\n    admin_username   =  \"me\"\n\n\n  park {\n at = \"19:00\"\n}\n}\n\n\n";
        let expected = "# top\nvm \"gpu\" {\n  size           = \"Standard_NC6s_v3\" # the GPU\n  admin_username = \"me\"\n\n  park {\n    at = \"19:00\"\n  }\n}\n";
        assert_eq!(fmt(input), expected);
        assert_eq!(fmt(expected), expected, "idempotent");
    }

    #[test]
    fn leaves_strings_heredocs_and_interpolations_alone() {
        let input = "vm \"a\" {\nstep \"script\" {\nscript = <<EOT\n  echo { not a brace\nEOT\nname = \"${lower(\"X}\")}\"\n}\n}\n";
        let out = fmt(input);
        assert!(out.contains("\n  echo { not a brace\n"), "{out}");
        assert!(out.contains("    name = \"${lower(\"X}\")}\"\n"), "{out}");
        assert_eq!(fmt(&out), out);
    }

    #[test]
    fn multi_line_values_are_indented() {
        let input = "network \"main\" {\nssh_from = [\n\"1.2.3.4/32\",\n]\n}\n";
        assert_eq!(
            fmt(input),
            "network \"main\" {\n  ssh_from = [\n    \"1.2.3.4/32\",\n  ]\n}\n"
        );
    }

    #[test]
    fn syntax_errors_fail() {
        assert!(format(Path::new("t.hcl"), "vm \"a\" {").is_err());
    }
}
