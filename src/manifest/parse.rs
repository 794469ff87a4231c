//! Parsing: HCL text to a tree of blocks and attributes that keeps byte spans.
//!
//! hcl-edit parses with spans; this module copies what the later passes need into [`RawBlock`]s
//! so that every later diagnostic can point at a block header, an attribute key or a value. The
//! expressions stay unevaluated hcl-edit expressions: evaluation happens later, in dependency
//! order, because blocks may refer to each other.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use hcl_edit::Span as _;
use hcl_edit::expr::Expression;
use hcl_edit::structure::{Block, Body};

use crate::diag::{Diagnostic, Span};

/// One attribute as written: key, value expression and where they are.
#[derive(Debug, Clone)]
pub(super) struct RawAttr {
    /// Attribute key.
    pub name: String,
    /// Span of the key.
    pub key_span: Span,
    /// Span of the value expression.
    pub value_span: Span,
    /// The value, unevaluated.
    pub expr: Expression,
}

/// One block as written, with its nested attributes and blocks in source order.
#[derive(Debug, Clone)]
pub(super) struct RawBlock {
    /// Block type (`vm`, `step`, ...).
    pub ident: String,
    /// Labels with their spans.
    pub labels: Vec<(String, Span)>,
    /// The header: from the block type to the last label (what diagnostics about the block
    /// point at).
    pub header: Span,
    /// Attributes in source order.
    pub attrs: Vec<RawAttr>,
    /// Nested blocks in source order.
    pub blocks: Vec<RawBlock>,
}

impl RawBlock {
    /// The first label, or an empty string for unlabelled blocks.
    pub fn label(&self) -> &str {
        self.labels.first().map_or("", |(l, _)| l.as_str())
    }

    /// Span of the first label, or of the header.
    pub fn label_span(&self) -> Span {
        self.labels
            .first()
            .map_or_else(|| self.header.clone(), |(_, s)| s.clone())
    }

    /// The attribute called `name`.
    pub fn attr(&self, name: &str) -> Option<&RawAttr> {
        self.attrs.iter().find(|a| a.name == name)
    }

    /// Nested blocks of one type.
    pub fn blocks_of<'a>(&'a self, ident: &'a str) -> impl Iterator<Item = &'a RawBlock> + 'a {
        self.blocks.iter().filter(move |b| b.ident == ident)
    }

    /// How the block reads in messages: `vm "gpu"`.
    pub fn title(&self) -> String {
        let mut out = self.ident.clone();
        for (label, _) in &self.labels {
            out.push_str(" \"");
            out.push_str(label);
            out.push('"');
        }
        out
    }
}

/// Turns hcl-edit ranges into diagnostic spans for one file.
#[derive(Debug, Clone)]
pub(super) struct Spans {
    file: Arc<Path>,
    text: Arc<str>,
}

impl Spans {
    /// Spans into `file`, whose text is `text`.
    pub fn new(file: Arc<Path>, text: Arc<str>) -> Self {
        Self { file, text }
    }

    /// The 1-based line of a byte offset (for "first declared at line N" labels).
    pub fn line_of(&self, offset: usize) -> usize {
        let end = offset.min(self.text.len());
        self.text[..end].matches('\n').count() + 1
    }

    /// A span from a byte range.
    pub fn at(&self, range: Range<usize>) -> Span {
        Span::new(Arc::clone(&self.file), range.start, range.end)
    }

    /// A span from an optional range (hcl-edit returns `None` only for nodes it did not parse,
    /// which never happens for parsed input; fall back to the file start).
    pub fn of(&self, range: Option<Range<usize>>) -> Span {
        self.at(range.unwrap_or(0..0))
    }

    /// The whole file's first byte (for problems about the file as a whole).
    pub fn file_start(&self) -> Span {
        self.at(0..usize::from(!self.text.is_empty()))
    }
}

/// Parse a file's text into its top-level attributes and blocks, or the syntax error.
pub(super) fn parse(spans: &Spans, text: &str) -> Result<RawBlock, Diagnostic> {
    let body = hcl_edit::parser::parse_body(text).map_err(|err| syntax_error(spans, text, &err))?;
    let mut root = RawBlock {
        ident: String::new(),
        labels: Vec::new(),
        header: spans.file_start(),
        attrs: Vec::new(),
        blocks: Vec::new(),
    };
    fill(spans, &body, &mut root);
    Ok(root)
}

/// Parse a single expression (used for `-var` values of non-string type).
pub(super) fn parse_expr(text: &str) -> Option<Expression> {
    hcl_edit::parser::parse_expr(text).ok()
}

fn fill(spans: &Spans, body: &Body, into: &mut RawBlock) {
    for structure in body {
        if let Some(attr) = structure.as_attribute() {
            into.attrs.push(RawAttr {
                name: attr.key.as_str().to_owned(),
                key_span: spans.of(attr.key.span()),
                value_span: spans.of(attr.value.span()),
                expr: attr.value.clone(),
            });
        } else if let Some(block) = structure.as_block() {
            into.blocks.push(raw_block(spans, block));
        }
    }
}

fn raw_block(spans: &Spans, block: &Block) -> RawBlock {
    let ident_range = block.ident.span().unwrap_or(0..0);
    let labels: Vec<(String, Span)> = block
        .labels
        .iter()
        .map(|l| (l.as_str().to_owned(), spans.of(l.span())))
        .collect();
    let header_end = labels.last().map_or(ident_range.end, |(_, s)| s.end);
    let mut out = RawBlock {
        ident: block.ident.as_str().to_owned(),
        labels,
        header: spans.at(ident_range.start..header_end),
        attrs: Vec::new(),
        blocks: Vec::new(),
    };
    fill(spans, &block.body, &mut out);
    out
}

/// A located syntax error. hcl-edit reports the first problem only: a parser cannot know what
/// the rest of a file means once its structure is broken.
fn syntax_error(spans: &Spans, text: &str, err: &hcl_edit::parser::Error) -> Diagnostic {
    let mut start = err.location().offset().min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let end = text[start..]
        .chars()
        .next()
        .map_or(start, |c| start + c.len_utf8());
    let message = err.message();
    let mut diagnostic = Diagnostic::error("invalid HCL syntax")
        .with_span(spans.at(start..end))
        .with_label(message.to_owned());
    if message.contains("redefined attribute") {
        diagnostic = diagnostic.with_help("each attribute may be set only once in a block");
    } else if has_open_string(text, start) {
        diagnostic = diagnostic.with_help("a string on this line is not closed: add the closing `\"`, or use a heredoc (<<EOT ... EOT) for several lines");
    } else {
        diagnostic = diagnostic
            .with_help("check for a missing `}`, `]`, `\"` or `=` near here; see docs/manifest.md for the syntax");
    }
    diagnostic
}

/// Whether the line holding `offset` has an odd number of unescaped quotes.
fn has_open_string(text: &str, offset: usize) -> bool {
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let mut quotes = 0;
    let mut escaped = false;
    for c in text[line_start..line_end].chars() {
        match c {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => quotes += 1,
            _ => escaped = false,
        }
        if c != '\\' {
            escaped = false;
        }
    }
    quotes % 2 == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(text: &str) -> Spans {
        Spans::new(Arc::from(Path::new("t.hcl")), Arc::from(text))
    }

    #[test]
    fn keeps_spans_of_headers_keys_and_values() {
        let text = "vm \"gpu\" {\n  size = \"x\"\n  step \"mofed\" {}\n}\n";
        let root = parse(&spans(text), text).expect("parses");
        let vm = &root.blocks[0];
        assert_eq!(vm.title(), "vm \"gpu\"");
        assert_eq!(&text[vm.header.start..vm.header.end], "vm \"gpu\"");
        let size = vm.attr("size").expect("size");
        assert_eq!(&text[size.key_span.start..size.key_span.end], "size");
        assert_eq!(&text[size.value_span.start..size.value_span.end], "\"x\"");
        assert_eq!(vm.blocks_of("step").count(), 1);
    }

    #[test]
    fn syntax_errors_are_located() {
        let text = "vm \"x\" {\n  size = \n}\n";
        let err = parse(&spans(text), text).expect_err("broken");
        assert_eq!(err.summary, "invalid HCL syntax");
        let span = err.span.expect("located");
        assert!(
            span.start > 9,
            "points into the attribute, not the file start"
        );
    }
}
