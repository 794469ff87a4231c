//! Aligned columns of plain text, the one table layout every view uses (`status`, `sizes`).
//!
//! Columns are separated by two spaces and sized to their widest cell, measured without ANSI
//! styles so that coloured cells line up with plain ones. Trailing spaces are trimmed, so piped
//! output stays greppable and diffs stay clean.

/// How a column's cells line up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Align {
    /// Text: names, words.
    Left,
    /// Numbers and amounts, so their digits line up.
    Right,
}

/// Align rows of cells into left-aligned columns (the last column is not padded).
pub(super) fn table(rows: &[Vec<String>]) -> String {
    aligned(rows, &[])
}

/// Align rows of cells into columns; `align[c]` says how column `c` lines up (left when the
/// slice is shorter). The first row (the header) lines up the same way as its column.
pub(super) fn aligned(rows: &[Vec<String>], align: &[Align]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| console::measure_text_width(cell))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            let pad = " ".repeat(widths[c] - console::measure_text_width(cell));
            let last = c + 1 == row.len();
            match align.get(c).copied().unwrap_or(Align::Left) {
                Align::Left => {
                    line.push_str(cell);
                    if !last {
                        line.push_str(&pad);
                    }
                }
                Align::Right => {
                    line.push_str(&pad);
                    line.push_str(cell);
                }
            }
            if !last {
                line.push_str("  ");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(cells: &[&[&str]]) -> Vec<Vec<String>> {
        cells
            .iter()
            .map(|r| r.iter().map(|c| (*c).to_owned()).collect())
            .collect()
    }

    #[test]
    fn columns_are_as_wide_as_their_widest_cell_and_lines_are_trimmed() {
        let text = table(&rows(&[&["VM", "SIZE", "IP"], &["vm.gpu", "D4", ""]]));
        assert_eq!(text, "VM      SIZE  IP\nvm.gpu  D4\n");
    }

    #[test]
    fn right_aligned_columns_line_up_their_digits() {
        let text = aligned(
            &rows(&[
                &["SIZE", "$/H", "NOTE"],
                &["a", "$0.0960", "x"],
                &["bb", "$12.24", ""],
            ]),
            &[Align::Left, Align::Right],
        );
        assert_eq!(
            text,
            "SIZE      $/H  NOTE\na     $0.0960  x\nbb     $12.24\n"
        );
    }

    #[test]
    fn styled_cells_are_measured_without_their_escapes() {
        let red = "\u{1b}[31mno\u{1b}[0m";
        let text = table(&[
            vec![red.to_owned(), "x".into()],
            vec!["yes".into(), "y".into()],
        ]);
        assert_eq!(text, format!("{red}   x\nyes  y\n"));
    }
}
