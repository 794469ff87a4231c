//! Colour, applied only when the caller asked for it.

use console::Style;

/// Paint `text` with `style` when `colour` is on; plain text otherwise. Styling is forced rather
/// than left to console's global detection, because the caller already decided.
pub(super) fn paint(colour: bool, style: &Style, text: &str) -> String {
    if colour {
        style.clone().force_styling(true).apply_to(text).to_string()
    } else {
        text.to_owned()
    }
}

/// Styles of the plan's action symbols and headers.
pub(super) fn green() -> Style {
    Style::new().green()
}

pub(super) fn yellow() -> Style {
    Style::new().yellow()
}

pub(super) fn red() -> Style {
    Style::new().red()
}

pub(super) fn bold() -> Style {
    Style::new().bold()
}

pub(super) fn dim() -> Style {
    Style::new().dim()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_off_is_plain_and_on_is_ansi() {
        assert_eq!(paint(false, &red(), "x"), "x");
        let painted = paint(true, &red(), "x");
        assert!(painted.starts_with("\u{1b}[31m"), "{painted:?}");
        assert!(painted.ends_with("\u{1b}[0m"));
    }
}
