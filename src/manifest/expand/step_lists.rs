//! List-valued step parameters: the sweep axes of the benchmark steps (`threads = [1, 4, 16]`,
//! `block_sizes = ["256K", "4M"]`) and the directories `storage_bench` compares. A scalar still
//! works where a list does (`threads = 8` is the one-point list `[8]`); the value keeps the shape
//! it was written in, so a manifest that did not change keeps its step's hash.

use serde_json::{Value as Json, json};

use crate::diag::Diagnostic;

use super::check::Check;

/// Whether `text` is a size as elbencho and fio read it: digits and an optional binary unit
/// (`512`, `4K`, `64M`, `1G`, `2T`), not zero.
pub(super) fn is_size(text: &str) -> bool {
    let digits = text.trim_end_matches(['K', 'M', 'G', 'T', 'k', 'm', 'g', 't']);
    text.len() - digits.len() <= 1
        && !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit())
        && digits.chars().any(|c| c != '0')
}

/// The written value of `name` as a list (a scalar is a list of one), or `None` when it is not
/// written or failed to evaluate (already reported).
fn items(check: &Check<'_>, name: &str) -> Option<(Vec<Json>, bool)> {
    let value = check.block().attr(name)?.value.as_ref()?;
    Some(match value {
        Json::Array(items) => (items.clone(), true),
        other => (vec![other.clone()], false),
    })
}

/// Reports a bad list value at the attribute's value. Always `None`.
fn bad(check: &mut Check<'_>, name: &str, title: &str, why: String, example: &str) -> Option<Json> {
    let span = check.span_of(name);
    check.report(
        Diagnostic::error(format!("invalid `{name}` in {title}"))
            .with_span(span)
            .with_label(why)
            .with_help(format!(
                "write one value or a list, e.g. `{name} = {example}`"
            )),
    );
    None
}

/// A whole number >= 1, or a non-empty list of them (`threads`, `files`).
pub(super) fn read_counts(check: &mut Check<'_>, name: &str, title: &str) -> Option<Json> {
    let (values, is_list) = items(check, name)?;
    let example = "[1, 4, 16]";
    if values.is_empty() {
        return bad(check, name, title, "the list is empty".into(), example);
    }
    let mut counts = Vec::new();
    for value in &values {
        match value.as_u64() {
            Some(n) if n >= 1 => counts.push(n),
            _ => {
                let why = format!("{value} is not a whole number of at least 1");
                return bad(check, name, title, why, example);
            }
        }
    }
    Some(if is_list {
        json!(counts)
    } else {
        json!(counts[0])
    })
}

/// A size (`"4M"`), or a non-empty list of sizes (`block_sizes`, `file_sizes`).
pub(super) fn read_sizes(check: &mut Check<'_>, name: &str, title: &str) -> Option<Json> {
    let (values, is_list) = items(check, name)?;
    let example = "[\"256K\", \"4M\"]";
    if values.is_empty() {
        return bad(check, name, title, "the list is empty".into(), example);
    }
    let mut sizes = Vec::new();
    for value in &values {
        match value.as_str() {
            Some(text) if is_size(text) => sizes.push(text.to_owned()),
            _ => {
                let why = format!("{value} is not a size like \"4K\", \"64M\" or \"1G\"");
                return bad(check, name, title, why, example);
            }
        }
    }
    Some(if is_list {
        json!(sizes)
    } else {
        json!(sizes[0])
    })
}

/// One size (`"16M"`): a list is refused, the step measures one point.
pub(super) fn read_size(check: &mut Check<'_>, name: &str, title: &str) -> Option<Json> {
    let value = check.block().attr(name)?.value.as_ref()?;
    match value.as_str() {
        Some(text) if is_size(text) => Some(json!(text)),
        _ => {
            let span = check.span_of(name);
            check.report(
                Diagnostic::error(format!("invalid `{name}` in {title}"))
                    .with_span(span)
                    .with_label(format!(
                        "{value} is not a size like \"4K\", \"64M\" or \"1G\""
                    ))
                    .with_help(format!("write one size, e.g. `{name} = \"16M\"`")),
            );
            None
        }
    }
}

/// A non-empty list of distinct absolute directories on the node (`storage_bench`'s `paths`).
pub(super) fn read_dirs(check: &mut Check<'_>, name: &str, title: &str) -> Option<Json> {
    let (values, _) = items(check, name)?;
    let example = "[\"/mnt/resource\", \"/mnt/blob\"]";
    if values.is_empty() {
        return bad(check, name, title, "the list is empty".into(), example);
    }
    let mut dirs: Vec<String> = Vec::new();
    for value in &values {
        let why = match value.as_str() {
            None => Some(format!("{value} is not a path")),
            Some(dir) if !dir.starts_with('/') || dir.split('/').any(|c| c == "..") => {
                Some(format!("{dir:?} is not an absolute path without `..`"))
            }
            Some(dir)
                if dir
                    .chars()
                    .any(|c| c.is_whitespace() || matches!(c, '"' | '\'' | '\\' | '$' | '`')) =>
            {
                Some(format!(
                    "{dir:?} has whitespace, quotes, `\\`, `$` or backquotes"
                ))
            }
            Some(dir) if dirs.iter().any(|d| d == dir) => Some(format!("{dir:?} is listed twice")),
            Some(dir) => {
                dirs.push(dir.to_owned());
                None
            }
        };
        if let Some(why) = why {
            return bad(check, name, title, why, example);
        }
    }
    Some(json!(dirs))
}

#[cfg(test)]
mod tests {
    use super::is_size;

    #[test]
    fn sizes() {
        for ok in ["4K", "64M", "1G", "512", "2t"] {
            assert!(is_size(ok), "{ok}");
        }
        for bad in ["", "K", "4KB", "0", "0M", "-4K", "4.5M", "4 M"] {
            assert!(!is_size(bad), "{bad}");
        }
    }
}
