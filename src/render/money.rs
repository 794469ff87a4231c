//! Dollar amounts, printed the same way by every view (plan, apply's summary, status, park).
//!
//! Totals get cents and thousands separators (`$2,375.28`). Hourly rates get the same, except
//! below a dollar, where the rates of disks and public IPs live: four decimals (`$0.0050`), so
//! that a parked experiment does not read as free.

/// A total: `$12,345.67`.
pub fn dollars(amount: f64) -> String {
    let cents = format!("{:.2}", amount.abs());
    let (whole, frac) = cents.split_once('.').unwrap_or((&cents, "00"));
    let mut grouped = String::new();
    for (i, c) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    let sign = if amount < 0.0 && cents != "0.00" {
        "-"
    } else {
        ""
    };
    format!("{sign}${grouped}.{frac}")
}

/// A rate per hour: like [`dollars`], with four decimals below a dollar (but none is `$0.00`).
pub fn rate(amount: f64) -> String {
    if amount != 0.0 && amount.abs() < 1.0 {
        format!("${amount:.4}")
    } else {
        dollars(amount)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_have_cents_and_thousands_separators() {
        assert_eq!(dollars(0.0), "$0.00");
        assert_eq!(dollars(2226.244), "$2,226.24");
        assert_eq!(dollars(1_234_567.891), "$1,234,567.89");
        assert_eq!(dollars(999.999), "$1,000.00");
        assert_eq!(dollars(-1234.5), "-$1,234.50");
    }

    #[test]
    fn rates_below_a_dollar_keep_four_decimals() {
        assert_eq!(rate(3.0612), "$3.06");
        assert_eq!(rate(0.0263), "$0.0263");
        assert_eq!(rate(0.005), "$0.0050");
        assert_eq!(rate(0.0), "$0.00");
        assert_eq!(rate(1234.5), "$1,234.50");
    }
}
