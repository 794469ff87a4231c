//! Finding the paths a source file uses that name another module of the crate.
//!
//! This is a scanner, not a Rust parser: it blanks comments, string and character literals and
//! `#[cfg(test)]` items (test code may cross layers, see docs/architecture.md), then looks for
//! `crate::` and `super::` paths, expanding `use` groups (`crate::{a, b::{c, d}}`). It keeps
//! track of inline `mod name { ... }` blocks so that a `super::` chain resolves from the module
//! it is written in. Every character keeps its line and column, so a finding names its place.

use std::ops::Range;

/// A path that names an item of the crate by its module: `crate::emulator::SshEndpoint` is
/// `["emulator", "SshEndpoint"]`, whether it was written that way, inside a `use` group or as
/// `super::super::emulator::SshEndpoint` from two levels down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// 1-based line of the path's first character.
    pub line: usize,
    /// 1-based column of the path's first character.
    pub col: usize,
    /// The path as the source spells its start (`crate::`, `super::super::`) and the rest.
    pub written: String,
    /// The path from the crate root, one segment per entry.
    pub segments: Vec<String>,
}

/// What scanning one file found.
#[derive(Debug, Default)]
pub struct Scan {
    /// Paths from the crate root, in source order, outside test code.
    pub references: Vec<Reference>,
    /// Child modules declared as `#[cfg(test)] mod name;`: their files are test code.
    pub test_children: Vec<String>,
}

/// Scans `source`, the text of the file of module `module` (`["engine", "reach"]` for
/// src/engine/reach.rs or src/engine/reach/mod.rs).
pub fn scan(source: &str, module: &[String]) -> Scan {
    let mut text: Vec<char> = blank_comments_and_literals(source);
    let test_children = blank_test_items(&mut text);
    let references = references(&text, module);
    Scan {
        references,
        test_children,
    }
}

/// Replaces comments and the contents of string and character literals with spaces, keeping
/// newlines, so that `"crate::x"` or `// see crate::x` is never taken for a path and every
/// remaining character stays at its line and column.
fn blank_comments_and_literals(source: &str) -> Vec<char> {
    let chars: Vec<char> = source.chars().collect();
    let mut out = chars.clone();
    let mut i = 0;
    while i < chars.len() {
        let end = match (chars[i], chars.get(i + 1).copied()) {
            ('/', Some('/')) => Some(line_comment_end(&chars, i)),
            ('/', Some('*')) => Some(block_comment_end(&chars, i)),
            ('"', _) => Some(string_end(&chars, i + 1)),
            ('r' | 'b', _) if !ident_before(&chars, i) => raw_string_end(&chars, i),
            ('\'', _) => char_literal_end(&chars, i),
            _ => None,
        };
        match end {
            Some(end) => {
                blank(&mut out, i..end);
                i = end;
            }
            None => i += 1,
        }
    }
    out
}

fn line_comment_end(chars: &[char], start: usize) -> usize {
    chars[start..]
        .iter()
        .position(|&c| c == '\n')
        .map_or(chars.len(), |n| start + n)
}

/// Block comments nest in Rust.
fn block_comment_end(chars: &[char], start: usize) -> usize {
    let mut depth = 0usize;
    let mut i = start;
    while i + 1 < chars.len() {
        match (chars[i], chars[i + 1]) {
            ('/', '*') => {
                depth += 1;
                i += 2;
            }
            ('*', '/') => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return i;
                }
            }
            _ => i += 1,
        }
    }
    chars.len()
}

/// The end of a string whose contents start at `from` (just after the opening quote).
fn string_end(chars: &[char], from: usize) -> usize {
    let mut i = from;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '"' => return i + 1,
            _ => i += 1,
        }
    }
    chars.len()
}

/// `r"..."`, `r#"..."#`, `br"..."`, and `b"..."` (a byte string: escapes as in a string).
fn raw_string_end(chars: &[char], start: usize) -> Option<usize> {
    let mut i = start;
    if chars[i] == 'b' {
        i += 1;
        if chars.get(i) == Some(&'"') {
            return Some(string_end(chars, i + 1));
        }
    }
    if chars.get(i) != Some(&'r') {
        return None;
    }
    i += 1;
    let hashes = chars[i..].iter().take_while(|&&c| c == '#').count();
    i += hashes;
    if chars.get(i) != Some(&'"') {
        return None;
    }
    i += 1;
    while i < chars.len() {
        if chars[i] == '"'
            && chars[i + 1..]
                .iter()
                .take(hashes)
                .filter(|&&c| c == '#')
                .count()
                == hashes
        {
            return Some(i + 1 + hashes);
        }
        i += 1;
    }
    Some(chars.len())
}

/// `'x'`, `'\n'`, `'\u{1F600}'`; a lifetime (`'a`) is not a literal and is left alone.
fn char_literal_end(chars: &[char], start: usize) -> Option<usize> {
    match (chars.get(start + 1), chars.get(start + 2)) {
        // The escaped character itself may be a quote (`'\''`): search after it.
        (Some('\\'), _) => chars[start + 3..]
            .iter()
            .position(|&c| c == '\'')
            .map(|n| start + 3 + n + 1),
        (Some(_), Some('\'')) => Some(start + 3),
        _ => None,
    }
}

/// Blanks every item under `#[cfg(test)]` (an inline `mod tests { ... }`, a `use`, a `fn`) and
/// returns the names of the child modules it declares without a body (`mod tests;`), whose
/// files are test code too.
fn blank_test_items(text: &mut [char]) -> Vec<String> {
    const ATTR: &str = "#[cfg(test)]";
    let attr: Vec<char> = ATTR.chars().collect();
    let mut children = Vec::new();
    let mut i = 0;
    while i + attr.len() <= text.len() {
        if text[i..i + attr.len()] != attr[..] {
            i += 1;
            continue;
        }
        let end = item_end(text, i + attr.len());
        let item: String = text[i + attr.len()..end].iter().collect();
        let words: Vec<&str> = item
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .collect();
        let declares_file = item.trim_end().ends_with(';');
        if let Some(at) = words.iter().position(|&w| w == "mod")
            && declares_file
            && let Some(name) = words.get(at + 1)
        {
            children.push((*name).to_owned());
        }
        blank(text, i..end);
        i = end;
    }
    children
}

/// The end of the item starting at `from` (after its attribute): the `;` that ends it, or the
/// `}` closing its body. Further attributes (`#[...]`) are part of the item.
fn item_end(text: &[char], from: usize) -> usize {
    let mut depth = 0usize;
    let mut i = from;
    while i < text.len() {
        match text[i] {
            '[' | '(' => depth += 1,
            ']' | ')' => depth = depth.saturating_sub(1),
            ';' if depth == 0 => return i + 1,
            '{' if depth == 0 => return matching_brace(text, i),
            _ => {}
        }
        i += 1;
    }
    text.len()
}

/// The position just after the `}` that closes the `{` at `open`.
fn matching_brace(text: &[char], open: usize) -> usize {
    let mut depth = 0usize;
    for (i, &c) in text.iter().enumerate().skip(open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    text.len()
}

/// Every `crate::` path, and every `super::` path that climbs to the crate root, with the
/// module path of inline `mod name { ... }` blocks taken into account.
fn references(text: &[char], module: &[String]) -> Vec<Reference> {
    let mut found = Vec::new();
    // Inline modules open at the brace depth recorded here.
    let mut inline: Vec<(usize, String)> = Vec::new();
    let mut pending_mod: Option<String> = None;
    let mut depth = 0usize;
    let mut i = 0;
    while i < text.len() {
        let c = text[i];
        if c == '{' {
            depth += 1;
            if let Some(name) = pending_mod.take() {
                inline.push((depth, name));
            }
        } else if c == '}' {
            if inline.last().is_some_and(|(d, _)| *d == depth) {
                inline.pop();
            }
            depth = depth.saturating_sub(1);
        } else if c == ';' {
            pending_mod = None;
        }
        if !is_ident_start(c) || ident_before(text, i) {
            i += 1;
            continue;
        }
        let word = ident_at(text, i);
        let after = i + word.chars().count();
        match word.as_str() {
            "mod" => pending_mod = Some(ident_at(text, skip_space(text, after))),
            "crate" if starts_with(text, after, "::") => {
                push_paths(&mut found, text, ("crate::", 0), i, after + 2, &[]);
            }
            "super" if starts_with(text, after, "::") => {
                let mut here: Vec<String> = module.to_vec();
                here.extend(inline.iter().map(|(_, name)| name.clone()));
                let mut at = i;
                while ident_at(text, at) == "super" && starts_with(text, at + 5, "::") {
                    here.pop();
                    at += 7;
                }
                // From the crate root: a chain that stays inside the top-level module names one
                // of its own modules (the emulator's layering reads those).
                let root: String = text[i..at].iter().collect();
                push_paths(&mut found, text, (&root, here.len()), i, at, &here);
                i = at;
                continue;
            }
            _ => {}
        }
        i = after;
    }
    found
}

/// Adds the paths of the use tree at `at` (a path, or a `{...}` group), each after `prefix`.
/// `root` is how the source starts the path (`crate::`, `super::super::`) and how many leading
/// segments of `prefix` that start stands for (a `super::` chain stops inside a module); `pos`
/// is where the path is reported (the `crate` of a path, the start of a group's item).
fn push_paths(
    found: &mut Vec<Reference>,
    text: &[char],
    root: (&str, usize),
    pos: usize,
    at: usize,
    prefix: &[String],
) {
    let mut segments = prefix.to_vec();
    let mut i = skip_space(text, at);
    loop {
        if text.get(i) == Some(&'{') {
            let close = matching_brace(text, i) - 1;
            for start in group_items(text, i + 1, close) {
                let item = skip_space(text, start);
                push_paths(found, text, root, item, item, &segments);
            }
            return;
        }
        let word = ident_at(text, i);
        if word.is_empty() {
            break;
        }
        // `crate::engine::{self, reach}` names `engine` itself.
        if word != "self" {
            segments.push(word.clone());
        }
        i += word.chars().count();
        let next = skip_space(text, i);
        if !starts_with(text, next, "::") {
            break;
        }
        i = skip_space(text, next + 2);
    }
    if segments.is_empty() {
        return;
    }
    let (line, col) = line_col(text, pos);
    found.push(Reference {
        line,
        col,
        written: format!(
            "{}{}",
            root.0,
            segments[root.1.min(segments.len())..].join("::")
        ),
        segments,
    });
}

/// The start of each comma-separated item of the group between `open` and `close`.
fn group_items(text: &[char], open: usize, close: usize) -> Vec<usize> {
    let mut starts = vec![open];
    let mut depth = 0usize;
    for (i, &c) in text.iter().enumerate().take(close).skip(open) {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => starts.push(i + 1),
            _ => {}
        }
    }
    starts
}

fn blank(text: &mut [char], range: Range<usize>) {
    for c in &mut text[range] {
        if *c != '\n' {
            *c = ' ';
        }
    }
}

fn is_ident_start(c: char) -> bool {
    c.is_alphabetic() || c == '_'
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether the character before `i` continues an identifier (so `i` is not a word's start).
fn ident_before(text: &[char], i: usize) -> bool {
    i > 0 && is_ident_char(text[i - 1])
}

fn ident_at(text: &[char], i: usize) -> String {
    text.iter()
        .skip(i)
        .take_while(|&&c| is_ident_char(c))
        .collect()
}

fn skip_space(text: &[char], mut i: usize) -> usize {
    while text.get(i).is_some_and(|c| c.is_whitespace()) {
        i += 1;
    }
    i
}

fn starts_with(text: &[char], i: usize, what: &str) -> bool {
    what.chars()
        .enumerate()
        .all(|(n, c)| text.get(i + n) == Some(&c))
}

fn line_col(text: &[char], at: usize) -> (usize, usize) {
    let before = &text[..at];
    let line = before.iter().filter(|&&c| c == '\n').count() + 1;
    let col = at - before.iter().rposition(|&c| c == '\n').map_or(0, |n| n + 1) + 1;
    (line, col)
}
