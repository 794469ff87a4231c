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
fn scan(line: &str, starts_in_comment: bool) -> Scan {
    let mut scanner = Scanner {
        chars: line.chars().collect(),
        at: 0,
        stack: Vec::new(),
        seen_other: false,
        scan: Scan {
            leading_closers: 0,
            delta: 0,
            heredoc: None,
            in_comment: starts_in_comment,
        },
    };
    while scanner.at < scanner.chars.len() {
        let c = scanner.chars[scanner.at];
        let next = scanner.chars.get(scanner.at + 1).copied();
        let step = if scanner.scan.in_comment {
            scanner.in_comment(c, next)
        } else {
            match scanner.stack.last() {
                Some(Nest::Str) => scanner.in_string(c, next),
                Some(&Nest::Interp(depth)) => scanner.in_interpolation(c, depth),
                None => scanner.in_code(c, next),
            }
        };
        match step {
            Step::Skip(width) => scanner.at += width,
            Step::Stop => break,
        }
    }
    scanner.scan
}

/// What the scanner is inside of, besides plain code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Nest {
    /// A quoted string.
    Str,
    /// A `${...}` or `%{...}` interpolation, with this many unclosed `{` inside it.
    Interp(usize),
}

/// What to do after a character.
enum Step {
    /// Move on by this many characters (two for `*/`, `${`, an escape...).
    Skip(usize),
    /// The rest of the line is a comment: nothing after it counts.
    Stop,
}

/// A character loop over one line, one method per context, each returning the next [`Step`].
struct Scanner {
    chars: Vec<char>,
    /// Index of the current character.
    at: usize,
    /// Strings and interpolations entered and not yet left; empty in plain code.
    stack: Vec<Nest>,
    /// Something other than a closing bracket has been seen on the line.
    seen_other: bool,
    /// The result so far.
    scan: Scan,
}

impl Scanner {
    /// Inside a `/* */` comment: only its end matters.
    fn in_comment(&mut self, c: char, next: Option<char>) -> Step {
        if c == '*' && next == Some('/') {
            self.scan.in_comment = false;
            return Step::Skip(2);
        }
        Step::Skip(1)
    }

    /// Inside a string: escapes, its end, and interpolations.
    fn in_string(&mut self, c: char, next: Option<char>) -> Step {
        match (c, next) {
            ('\\', _) => Step::Skip(2),
            ('"', _) => {
                self.stack.pop();
                Step::Skip(1)
            }
            ('$' | '%', Some('{')) => {
                self.stack.push(Nest::Interp(0));
                Step::Skip(2)
            }
            _ => Step::Skip(1),
        }
    }

    /// Inside an interpolation: nested strings and braces, and its end.
    fn in_interpolation(&mut self, c: char, depth: usize) -> Step {
        match c {
            '"' => self.stack.push(Nest::Str),
            '{' => {
                self.stack.pop();
                self.stack.push(Nest::Interp(depth + 1));
            }
            '}' if depth == 0 => {
                self.stack.pop();
            }
            '}' => {
                self.stack.pop();
                self.stack.push(Nest::Interp(depth - 1));
            }
            _ => {}
        }
        Step::Skip(1)
    }

    /// In plain code: comments, strings, heredocs and brackets.
    fn in_code(&mut self, c: char, next: Option<char>) -> Step {
        match (c, next) {
            ('#', _) | ('/', Some('/')) => return Step::Stop,
            ('/', Some('*')) => {
                self.scan.in_comment = true;
                return Step::Skip(2);
            }
            ('"', _) => {
                self.stack.push(Nest::Str);
                self.seen_other = true;
            }
            ('<', Some('<')) => {
                let rest: String = self.chars[self.at + 2..].iter().collect();
                let rest = rest.trim_start_matches('-');
                let marker: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !marker.is_empty() {
                    self.scan.heredoc = Some(marker);
                }
                self.seen_other = true;
                return Step::Skip(2);
            }
            ('{' | '[' | '(', _) => {
                self.scan.delta += 1;
                self.seen_other = true;
            }
            ('}' | ']' | ')', _) => {
                self.scan.delta -= 1;
                if !self.seen_other {
                    self.scan.leading_closers += 1;
                }
            }
            (c, _) if c.is_whitespace() => {}
            _ => self.seen_other = true,
        }
        Step::Skip(1)
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

/// Re-indent, align and print the text's lines.
fn format_lines(text: &str) -> String {
    let mut lines = classify(text);
    align(&mut lines);
    render(&lines)
}

/// Each line with its nesting level, and whether it is an attribute or verbatim text.
fn classify(text: &str) -> Vec<Line> {
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
    lines
}

/// Print the lines indented, with at most one blank line in a row and none at the ends.
fn render(lines: &[Line]) -> String {
    let mut out = String::new();
    let mut blank_run = 0;
    for line in lines {
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

    // Guards the scanner's contexts (issue 16 split it into one method per context): brackets
    // in line and block comments, escaped quotes, `%{` directives and braces nested inside an
    // interpolation must not move the indentation.
    #[test]
    fn comments_escapes_directives_and_nested_interpolations_are_not_brackets() {
        let input = r#"vm "a" { # {
/* {
{ */
x = "\"{" // {
step "s" {
y = "%{ if true }{%{ endif }"
z = "${ {a = "}"}["a"] }"
}
}
"#;
        let expected = r#"vm "a" { # {
  /* {
{ */
  x = "\"{" // {
  step "s" {
    y = "%{ if true }{%{ endif }"
    z = "${ {a = "}"}["a"] }"
  }
}
"#;
        assert_eq!(fmt(input), expected);
        assert_eq!(fmt(expected), expected, "idempotent");
    }
}
