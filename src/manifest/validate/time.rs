//! Times, durations, RFC 3339 instants and time zones: park schedules and SAS expiry.

/// Parse `HH:MM` (24-hour) into Azure's `HHMM` form.
pub(in crate::manifest) fn parse_hhmm(text: &str) -> Result<String, String> {
    let bad = || format!("`{text}` is not a time of day like 19:00 (24-hour HH:MM)");
    let (h, m) = text.split_once(':').ok_or_else(bad)?;
    if h.len() != 2 || m.len() != 2 {
        return Err(bad());
    }
    let h: u8 = h.parse().map_err(|_| bad())?;
    let m: u8 = m.parse().map_err(|_| bad())?;
    if h > 23 || m > 59 {
        return Err(bad());
    }
    Ok(format!("{h:02}{m:02}"))
}

/// Parse a duration like `72h`, `3d`, `90m` or `1d12h` into seconds (see [`crate::model::duration`]).
pub(in crate::manifest) fn parse_duration(text: &str) -> Result<i64, String> {
    let duration = crate::model::duration::parse(text)?;
    i64::try_from(duration.as_secs())
        .map_err(|_| format!("`{text}` is not a duration like 72h, 3d, 90m or 1d12h"))
}

/// Windows time zone ids Azure's auto-shutdown accepts that dsinfra knows (the common ones).
pub(in crate::manifest) static WINDOWS_ZONES: &[&str] = &[
    "AUS Eastern Standard Time",
    "Alaskan Standard Time",
    "Arabian Standard Time",
    "Atlantic Standard Time",
    "Cen. Australia Standard Time",
    "Central Europe Standard Time",
    "Central European Standard Time",
    "Central Standard Time",
    "China Standard Time",
    "E. Australia Standard Time",
    "E. Europe Standard Time",
    "E. South America Standard Time",
    "Eastern Standard Time",
    "FLE Standard Time",
    "GMT Standard Time",
    "GTB Standard Time",
    "Hawaiian Standard Time",
    "India Standard Time",
    "Israel Standard Time",
    "Korea Standard Time",
    "Mountain Standard Time",
    "New Zealand Standard Time",
    "Pacific Standard Time",
    "Romance Standard Time",
    "Russian Standard Time",
    "SE Asia Standard Time",
    "Singapore Standard Time",
    "South Africa Standard Time",
    "Tokyo Standard Time",
    "Turkey Standard Time",
    "US Mountain Standard Time",
    "UTC",
    "W. Australia Standard Time",
    "W. Europe Standard Time",
];

/// Common IANA names and the Windows id Azure needs for them.
static IANA: &[(&str, &str)] = &[
    ("Africa/Johannesburg", "South Africa Standard Time"),
    ("America/Anchorage", "Alaskan Standard Time"),
    ("America/Chicago", "Central Standard Time"),
    ("America/Denver", "Mountain Standard Time"),
    ("America/Halifax", "Atlantic Standard Time"),
    ("America/Los_Angeles", "Pacific Standard Time"),
    ("America/New_York", "Eastern Standard Time"),
    ("America/Phoenix", "US Mountain Standard Time"),
    ("America/Sao_Paulo", "E. South America Standard Time"),
    ("America/Toronto", "Eastern Standard Time"),
    ("America/Vancouver", "Pacific Standard Time"),
    ("Asia/Bangkok", "SE Asia Standard Time"),
    ("Asia/Dubai", "Arabian Standard Time"),
    ("Asia/Jerusalem", "Israel Standard Time"),
    ("Asia/Kolkata", "India Standard Time"),
    ("Asia/Seoul", "Korea Standard Time"),
    ("Asia/Shanghai", "China Standard Time"),
    ("Asia/Singapore", "Singapore Standard Time"),
    ("Asia/Tokyo", "Tokyo Standard Time"),
    ("Australia/Adelaide", "Cen. Australia Standard Time"),
    ("Australia/Brisbane", "E. Australia Standard Time"),
    ("Australia/Melbourne", "AUS Eastern Standard Time"),
    ("Australia/Perth", "W. Australia Standard Time"),
    ("Australia/Sydney", "AUS Eastern Standard Time"),
    ("Etc/UTC", "UTC"),
    ("Europe/Amsterdam", "W. Europe Standard Time"),
    ("Europe/Athens", "GTB Standard Time"),
    ("Europe/Berlin", "W. Europe Standard Time"),
    ("Europe/Brussels", "Romance Standard Time"),
    ("Europe/Bucharest", "GTB Standard Time"),
    ("Europe/Budapest", "Central Europe Standard Time"),
    ("Europe/Copenhagen", "Romance Standard Time"),
    ("Europe/Dublin", "GMT Standard Time"),
    ("Europe/Helsinki", "FLE Standard Time"),
    ("Europe/Istanbul", "Turkey Standard Time"),
    ("Europe/Kyiv", "FLE Standard Time"),
    ("Europe/Lisbon", "GMT Standard Time"),
    ("Europe/London", "GMT Standard Time"),
    ("Europe/Madrid", "Romance Standard Time"),
    ("Europe/Moscow", "Russian Standard Time"),
    ("Europe/Oslo", "W. Europe Standard Time"),
    ("Europe/Paris", "Romance Standard Time"),
    ("Europe/Prague", "Central Europe Standard Time"),
    ("Europe/Rome", "W. Europe Standard Time"),
    ("Europe/Stockholm", "W. Europe Standard Time"),
    ("Europe/Vienna", "W. Europe Standard Time"),
    ("Europe/Warsaw", "Central European Standard Time"),
    ("Europe/Zurich", "W. Europe Standard Time"),
    ("Pacific/Auckland", "New Zealand Standard Time"),
    ("Pacific/Honolulu", "Hawaiian Standard Time"),
    ("UTC", "UTC"),
];

/// The Windows time zone id for a Windows id or a common IANA name (case-insensitive).
pub(in crate::manifest) fn windows_zone(text: &str) -> Option<&'static str> {
    WINDOWS_ZONES
        .iter()
        .copied()
        .find(|z| z.eq_ignore_ascii_case(text))
        .or_else(|| {
            IANA.iter()
                .find(|(iana, _)| iana.eq_ignore_ascii_case(text))
                .map(|(_, w)| *w)
        })
}

/// Every name `windows_zone` accepts, for "did you mean".
pub(in crate::manifest) fn zone_names() -> impl Iterator<Item = &'static str> {
    WINDOWS_ZONES
        .iter()
        .copied()
        .chain(IANA.iter().map(|(i, _)| *i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn park_times_are_24_hour() {
        assert_eq!(parse_hhmm("19:00"), Ok("1900".into()));
        assert_eq!(parse_hhmm("07:05"), Ok("0705".into()));
        assert!(parse_hhmm("7pm").is_err());
        assert!(parse_hhmm("24:00").is_err());
        assert!(parse_hhmm("19:60").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("72h"), Ok(72 * 3600));
        assert_eq!(parse_duration("1d12h"), Ok(36 * 3600));
        assert_eq!(parse_duration("90m"), Ok(5400));
        assert!(parse_duration("72").is_err());
        assert!(parse_duration("h").is_err());
        assert!(parse_duration("3 weeks").is_err());
        assert!(parse_duration("99999999999999999999d").is_err());
    }

    #[test]
    fn zones_map_iana_names_to_windows_ids() {
        assert_eq!(
            windows_zone("Europe/Berlin"),
            Some("W. Europe Standard Time")
        );
        assert_eq!(
            windows_zone("w. europe standard time"),
            Some("W. Europe Standard Time")
        );
        assert_eq!(windows_zone("Mars/Olympus"), None);
        assert!(WINDOWS_ZONES.windows(2).all(|w| w[0] < w[1]));
    }
}
