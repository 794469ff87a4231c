//! Durations as manifests write them: `72h`, `3d`, `90m`, `45s`, `1d12h`.
//!
//! One parser for every place a manifest value is a duration (SAS `expires_in`, step
//! `timeout`), so the accepted forms and the error message are the same everywhere.

use std::time::Duration;

/// Parse a duration like `72h`, `3d`, `90m` or `1d12h`. The error is a sentence for a diagnostic.
pub fn parse(text: &str) -> Result<Duration, String> {
    let bad = || format!("`{text}` is not a duration like 72h, 3d, 90m or 1d12h");
    let mut total: u64 = 0;
    let mut digits = String::new();
    let mut any = false;
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return Err(bad()),
        };
        let n: u64 = digits.parse().map_err(|_| bad())?;
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(bad)?;
        digits.clear();
        any = true;
    }
    if !digits.is_empty() || !any {
        return Err(bad());
    }
    Ok(Duration::from_secs(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_combinations() {
        assert_eq!(parse("72h"), Ok(Duration::from_hours(72)));
        assert_eq!(parse("1d12h"), Ok(Duration::from_hours(36)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_mins(90)));
        assert_eq!(parse("45s"), Ok(Duration::from_secs(45)));
    }

    #[test]
    fn refuses_what_is_not_a_duration() {
        for text in ["72", "h", "", "5x", "3 weeks", "99999999999999999999d"] {
            assert_eq!(
                parse(text),
                Err(format!(
                    "`{text}` is not a duration like 72h, 3d, 90m or 1d12h"
                )),
                "{text}"
            );
        }
    }
}
