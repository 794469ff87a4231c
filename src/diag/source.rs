//! Source files and spans: byte ranges in a file, turned into line and column for humans.

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A byte range in one source file.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Span {
    /// The file as the user named it (relative paths stay relative, so messages match what they
    /// typed).
    pub file: Arc<Path>,
    /// Byte offset of the first byte.
    pub start: usize,
    /// Byte offset one past the last byte.
    pub end: usize,
}

impl Span {
    /// A span of `start..end` in `file`.
    pub fn new(file: Arc<Path>, start: usize, end: usize) -> Self {
        Self { file, start, end }
    }
}

/// A 1-based line and column (columns count characters, not bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineCol {
    /// Line number, from 1.
    pub line: usize,
    /// Column number in characters, from 1.
    pub col: usize,
}

/// The text of every source file a command read, so diagnostics can quote them.
#[derive(Debug, Default, Clone)]
pub struct SourceMap {
    files: Vec<(Arc<Path>, Arc<str>)>,
}

impl SourceMap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Remember a file's text and return the shared path to put in spans.
    pub fn add(&mut self, path: impl Into<PathBuf>, text: impl Into<Arc<str>>) -> Arc<Path> {
        let path: Arc<Path> = Arc::from(path.into());
        self.files.push((Arc::clone(&path), text.into()));
        path
    }

    /// The text of a file, if it was added.
    pub fn text(&self, path: &Path) -> Option<&str> {
        self.files
            .iter()
            .find(|(p, _)| p.as_ref() == path)
            .map(|(_, t)| t.as_ref())
    }

    /// Line and column of a byte offset in a file.
    pub fn line_col(&self, path: &Path, offset: usize) -> Option<LineCol> {
        self.text(path).map(|text| line_col(text, offset))
    }
}

/// Line and column of a byte offset in a text (offsets past the end clamp to the end).
pub fn line_col(text: &str, offset: usize) -> LineCol {
    let offset = floor_char_boundary(text, offset.min(text.len()));
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = text[line_start..offset].chars().count() + 1;
    LineCol { line, col }
}

/// The largest char boundary at or below `offset`.
pub(crate) fn floor_char_boundary(text: &str, mut offset: usize) -> usize {
    while offset > 0 && !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_are_one_based_and_count_characters() {
        let text = "a = 1\nbé = \"x\"\n";
        assert_eq!(line_col(text, 0), LineCol { line: 1, col: 1 });
        assert_eq!(line_col(text, 6), LineCol { line: 2, col: 1 });
        // `=` on line 2 sits after a two-byte character.
        let eq = text.rfind('=').expect("has =");
        assert_eq!(line_col(text, eq), LineCol { line: 2, col: 4 });
        assert_eq!(line_col(text, 10_000), LineCol { line: 3, col: 1 });
    }
}
