//! Facts read out of ARM's vCPU-quota error message, so dsinfra can say what to request.
//!
//! ARM reports a quota shortfall only in prose (409 `OperationNotAllowed`), e.g. "Operation
//! could not be completed as it results in exceeding approved standardNDSv2Family Cores quota.
//! Additional details - Deployment Model: Resource Manager, Location: eastus, Current Limit: 0,
//! Current Usage: 0, Additional Required: 40, (Minimum) New Limit Required: 40." Parsing it is
//! best-effort: a missing field stays `None` rather than failing the whole parse, because the
//! error itself is still shown verbatim.

/// Which quota the message is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaScope {
    /// A VM family's cores, e.g. `standardNDSv2Family`.
    Family,
    /// All cores in the region ("Total Regional Cores").
    TotalRegional,
    /// Spot / low-priority cores.
    LowPriority,
}

/// What a vCPU-quota message says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaFacts {
    /// Which quota.
    pub scope: QuotaScope,
    /// The family as ARM names it (`standardNDSv2Family`), or `Total Regional` / `LowPriority`.
    pub family: String,
    /// Region, e.g. `eastus`.
    pub location: Option<String>,
    /// The approved limit now.
    pub current_limit: Option<u64>,
    /// Cores in use now.
    pub current_usage: Option<u64>,
    /// Cores the failed request needed on top.
    pub additional_required: Option<u64>,
    /// The smallest limit that would have let the request through.
    pub new_limit_required: Option<u64>,
}

impl QuotaFacts {
    /// Reads the facts from an `OperationNotAllowed` quota message; `None` for any other text.
    pub fn from_message(message: &str) -> Option<Self> {
        const LEAD: &str = "exceeding approved ";
        let start = message.find(LEAD)? + LEAD.len();
        let rest = &message[start..];
        let quota = rest[..rest.find(" quota")?].trim();
        let (scope, family) = if quota.eq_ignore_ascii_case("Total Regional Cores") {
            (QuotaScope::TotalRegional, "Total Regional".to_string())
        } else if quota
            .replace(' ', "")
            .eq_ignore_ascii_case("LowPriorityCores")
        {
            (QuotaScope::LowPriority, "LowPriority".to_string())
        } else {
            let family = quota.strip_suffix(" Cores").unwrap_or(quota);
            (QuotaScope::Family, family.to_string())
        };
        let details = message
            .split_once("Additional details - ")
            .map_or("", |(_, d)| d);
        let field = |name: &str| -> Option<String> {
            details.split(", ").find_map(|part| {
                let (key, value) = part.split_once(": ")?;
                (key.trim() == name).then(|| value.trim().trim_end_matches('.').to_string())
            })
        };
        let number = |name: &str| field(name).and_then(|v| v.parse().ok());
        Some(Self {
            scope,
            family,
            location: field("Location"),
            current_limit: number("Current Limit"),
            current_usage: number("Current Usage"),
            additional_required: number("Additional Required"),
            new_limit_required: number("(Minimum) New Limit Required"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn family_quota_message_from_arm() {
        let facts = QuotaFacts::from_message(
            "Operation could not be completed as it results in exceeding approved standardNDSv2Family Cores quota. Additional details - Deployment Model: Resource Manager, Location: eastus, Current Limit: 0, Current Usage: 0, Additional Required: 40, (Minimum) New Limit Required: 40.",
        )
        .expect("the real message parses");
        assert_eq!(
            facts,
            QuotaFacts {
                scope: QuotaScope::Family,
                family: "standardNDSv2Family".into(),
                location: Some("eastus".into()),
                current_limit: Some(0),
                current_usage: Some(0),
                additional_required: Some(40),
                new_limit_required: Some(40),
            }
        );
    }

    #[test]
    fn regional_and_spot_variants() {
        let regional = QuotaFacts::from_message(
            "Operation could not be completed as it results in exceeding approved Total Regional Cores quota. Additional details - Deployment Model: Resource Manager, Location: westeurope, Current Limit: 10, Current Usage: 8, Additional Required: 6, (Minimum) New Limit Required: 14.",
        )
        .expect("the regional variant parses");
        assert_eq!(regional.scope, QuotaScope::TotalRegional);
        assert_eq!(regional.location.as_deref(), Some("westeurope"));
        assert_eq!(regional.new_limit_required, Some(14));
        let spot = QuotaFacts::from_message(
            "Operation could not be completed as it results in exceeding approved LowPriorityCores quota. Additional details - Deployment Model: Resource Manager, Location: eastus, Current Limit: 3, Current Usage: 0, Additional Required: 4, (Minimum) New Limit Required: 4.",
        )
        .expect("the spot variant parses");
        assert_eq!(spot.scope, QuotaScope::LowPriority);
        assert_eq!(spot.current_limit, Some(3));
    }

    #[test]
    fn other_messages_have_no_quota_facts() {
        assert_eq!(
            QuotaFacts::from_message(
                "Operation 'start' is not allowed on VM 'x' since the VM is deallocating."
            ),
            None
        );
    }

    #[test]
    fn missing_details_leave_fields_empty_instead_of_failing() {
        let facts = QuotaFacts::from_message(
            "Operation could not be completed as it results in exceeding approved standardNCSv3Family Cores quota.",
        )
        .expect("the family alone is enough");
        assert_eq!(facts.family, "standardNCSv3Family");
        assert_eq!(facts.location, None);
        assert_eq!(facts.additional_required, None);
    }
}
