//! `priority = "spot"` on a `vm` or `cluster` block, with `max_price` and `eviction`: checked
//! against the shipped catalog (a size and region without a spot price have no spot offer:
//! Azure's price list has none for the original B-series, promo sizes, or where it sells no spot
//! capacity) and
//! against what ARM accepts (decision 75).

use crate::catalog::{self, VmSize};
use crate::diag::Diagnostic;

use super::super::decode::{Choices, Located, OneOf};
use super::check::Check;

/// A VM's priority, as the manifest writes it.
pub(super) struct Priority;

impl Choices for Priority {
    const ALLOWED: &'static [&'static str] = &["regular", "spot"];
}

/// What Azure does with an evicted spot VM, as the manifest writes it.
pub(super) struct Eviction;

impl Choices for Eviction {
    const ALLOWED: &'static [&'static str] = &["deallocate", "delete"];
}

/// A spot VM's settings, in ARM's words.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Spot {
    /// `Deallocate` (the default: the disks stay, the VM can be started again) or `Delete`.
    pub eviction: &'static str,
    /// The price cap in USD per hour; -1 (the default) caps at the pay-as-you-go price, so the
    /// VM is never evicted for price, only for capacity.
    pub max_price: f64,
}

/// The written `priority`, `max_price` and `eviction`.
pub(super) type Written = (
    Option<OneOf<Priority>>,
    Option<Located<f64>>,
    Option<OneOf<Eviction>>,
);

/// Reads the spot settings of a block of size `info` (and fallback `sizes`) in `location`:
/// `None` for a regular block. Reports spot on a size or region without a spot offer, a price
/// cap Azure refuses, spot-only settings on a regular block, and (a warning) a cap below the
/// catalog's spot price.
pub(super) fn read(
    check: &mut Check<'_>,
    (priority, max_price, eviction): Written,
    (info, fallbacks): (Option<&VmSize>, &[String]),
    location: &str,
) -> Option<Spot> {
    let title = check.title();
    let Some(priority) = priority.filter(|p| p.value == "spot") else {
        for (name, written) in [
            ("max_price", max_price.as_ref().map(|p| p.span.clone())),
            ("eviction", eviction.as_ref().map(|e| e.span.clone())),
        ] {
            if let Some(span) = written {
                check.report(
                    Diagnostic::error(format!("`{name}` in {title} needs `priority = \"spot\"`"))
                        .with_span(span)
                        .with_label("only a spot VM has a price cap and an eviction policy")
                        .with_help("add `priority = \"spot\"`, or remove this line"),
                );
            }
        }
        return None;
    };
    if let Some(size) = info.filter(|s| !s.is_live()) {
        check_offer(check, &size.name, location, priority.span.clone());
        let sizes = check.span_of("sizes");
        for other in fallbacks.iter().skip(1) {
            check_offer(check, other, location, sizes.clone());
        }
    }
    let max_price = match max_price {
        None => -1.0,
        Some(p) if (p.value + 1.0).abs() < f64::EPSILON => -1.0,
        Some(p) if p.value <= 0.0 || !p.value.is_finite() => {
            check.report(
                Diagnostic::error(format!("invalid `max_price` in {title}"))
                    .with_span(p.span)
                    .with_label("Azure takes a price above zero, in USD per hour, or -1")
                    .with_help(
                        "leave it out (or write -1) to pay up to the pay-as-you-go price: the VM \
                         is then evicted only when Azure needs the capacity back",
                    ),
            );
            -1.0
        }
        Some(p) => {
            warn_below_spot(check, info, location, &p);
            p.value
        }
    };
    let eviction = match eviction.as_ref().map(|e| e.value.as_str()) {
        Some("delete") => "Delete",
        _ => "Deallocate",
    };
    Some(Spot {
        eviction,
        max_price,
    })
}

/// A size and region without a spot price in the shipped catalog have no spot offer.
fn check_offer(check: &mut Check<'_>, size: &str, location: &str, span: crate::diag::Span) {
    if !catalog::is_known_location(location) {
        return;
    }
    // No price at all is the size check's error (not offered in the region).
    let Some(price) = catalog::price(size, location) else {
        return;
    };
    if price.spot.is_some() {
        return;
    }
    let title = check.title();
    let elsewhere: Vec<&str> = catalog::regions_offering(size)
        .into_iter()
        .filter(|r| catalog::price(size, r).is_some_and(|p| p.spot.is_some()))
        .collect();
    let help = if elsewhere.is_empty() {
        format!(
            "Azure's price list has no spot price for {size} in any region (the original B-series \
             and promo sizes have none): remove `priority = \"spot\"`, or pick a size with a SPOT $/H in \
             `dsinfra sizes --region {location}`"
        )
    } else {
        format!(
            "regions with a spot offer of {size}: {}; or pick a size with a SPOT $/H in \
             `dsinfra sizes --region {location}`",
            super::compute::list_some(&elsewhere, 8)
        )
    };
    check.report(
        Diagnostic::error(format!(
            "{title} asks for spot {size}, which has no spot offer in {location}"
        ))
        .with_span(span)
        .with_label(format!(
            "the shipped catalog has no {location} spot price for {size}"
        ))
        .with_help(help),
    );
}

/// A cap below the current spot price: ARM refuses to create or start the VM until the spot
/// price falls under it, so it may never start. A warning: prices move, and the catalog's are
/// from the date it was generated.
fn warn_below_spot(
    check: &mut Check<'_>,
    info: Option<&VmSize>,
    location: &str,
    cap: &Located<f64>,
) {
    let Some((size, spot)) = info.and_then(|s| {
        catalog::price(&s.name, location)
            .and_then(|p| p.spot)
            .map(|spot| (&*s.name, spot))
    }) else {
        return;
    };
    if cap.value >= spot {
        return;
    }
    let title = check.title();
    let date = catalog::prices_date()
        .map(|d| d.to_string())
        .unwrap_or_default();
    check.report(
        Diagnostic::warning(format!(
            "`max_price` in {title} is below the spot price of {size} in {location}: the VM may \
             not start"
        ))
        .with_span(cap.span.clone())
        .with_label(format!(
            "${} an hour, under the catalog's spot price of ${spot:.4} (as of {date})",
            cap.value
        ))
        .with_help(
            "Azure creates or starts a spot VM only while its spot price is below the cap: raise \
             it, or write -1 to pay up to the pay-as-you-go price",
        ),
    );
}
