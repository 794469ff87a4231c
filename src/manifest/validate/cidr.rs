//! IPv4 CIDR ranges for VNets, subnets and SSH sources.

use ipnet::Ipv4Net;

/// Parse a CIDR range; a range with host bits set is refused with the range it probably meant.
pub(in crate::manifest) fn parse(text: &str) -> Result<Ipv4Net, String> {
    let net: Ipv4Net = text
        .parse()
        .map_err(|_| format!("`{text}` is not an IPv4 CIDR range like 10.0.0.0/16"))?;
    if net.trunc() != net {
        return Err(format!(
            "`{text}` has host bits set; the range starts at {}",
            net.trunc()
        ));
    }
    Ok(net)
}

/// Whether `inner` lies entirely inside `outer`.
pub(in crate::manifest) fn contains(outer: Ipv4Net, inner: Ipv4Net) -> bool {
    outer.contains(&inner)
}

/// Whether two ranges share any address.
pub(in crate::manifest) fn overlaps(a: Ipv4Net, b: Ipv4Net) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// What an SSH source allows: a range, the whole internet (which must be explicit and is
/// warned about), or something that is not a source at all.
#[derive(Debug, PartialEq, Eq)]
pub(in crate::manifest) enum Source {
    /// A specific address or range.
    Range,
    /// `0.0.0.0/0`, `*`, `Internet`, `Any`.
    Anywhere,
}

/// Classify an `ssh_from` entry.
pub(in crate::manifest) fn ssh_source(text: &str) -> Result<Source, String> {
    if matches!(text, "*" | "0.0.0.0/0" | "Internet" | "Any") {
        return Ok(Source::Anywhere);
    }
    if text.parse::<std::net::Ipv4Addr>().is_ok() {
        return Ok(Source::Range);
    }
    let net = parse(text)?;
    if net.prefix_len() == 0 {
        return Ok(Source::Anywhere);
    }
    Ok(Source::Range)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_relates_ranges() {
        let vnet = parse("10.0.0.0/16").expect("valid");
        let a = parse("10.0.1.0/24").expect("valid");
        let b = parse("10.0.1.128/25").expect("valid");
        let outside = parse("10.1.0.0/24").expect("valid");
        assert!(contains(vnet, a) && !contains(vnet, outside));
        assert!(overlaps(a, b) && overlaps(b, a) && !overlaps(a, outside));
        assert_eq!(
            parse("10.0.1.5/24"),
            Err("`10.0.1.5/24` has host bits set; the range starts at 10.0.1.0/24".into())
        );
        assert!(parse("10.0.0.0/33").is_err());
        assert!(parse("fd00::/8").is_err());
    }

    #[test]
    fn classifies_ssh_sources() {
        assert_eq!(ssh_source("203.0.113.7"), Ok(Source::Range));
        assert_eq!(ssh_source("203.0.113.0/24"), Ok(Source::Range));
        assert_eq!(ssh_source("*"), Ok(Source::Anywhere));
        assert_eq!(ssh_source("0.0.0.0/0"), Ok(Source::Anywhere));
        assert!(ssh_source("my-laptop").is_err());
    }
}
