//! Fault injection: rules that make the next N matching requests fail, slow down, or fail inside
//! their long-running operation, so tests can script what real Azure does on a bad day.
//!
//! Rules come from three places with the same shape: [`super::EmulatorConfig::faults`] or a
//! JSON file at start, the in-process handle, and `POST /_emulator/faults`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::error::ArmError;

/// What a matching request suffers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FaultAction {
    /// Answer at once with this error (500s, 429 storms, SkuNotAvailable, ...).
    Respond {
        /// HTTP status.
        status: u16,
        /// ARM error code.
        code: String,
        /// Error message.
        message: String,
        /// `Retry-After` seconds to send (sensible for 429 and 503).
        #[serde(default)]
        retry_after: Option<u64>,
    },
    /// Accept the request, then fail its long-running operation (e.g. AllocationFailed): the
    /// operation status turns Failed and the resource's provisioningState Failed. Requests that
    /// start no operation do not consume the rule.
    FailOperation {
        /// Status a Location poll answers with once the operation failed.
        #[serde(default = "default_fail_status")]
        status: u16,
        /// ARM error code.
        code: String,
        /// Error message.
        message: String,
    },
    /// Answer normally, after a delay of `millis` plus up to `jitter_millis` at random.
    Delay {
        /// Fixed delay.
        millis: u64,
        /// Random extra delay bound.
        #[serde(default)]
        jitter_millis: u64,
    },
    /// Answer 401 ExpiredAuthenticationToken, as ARM does when the bearer token expired.
    ExpireToken,
}

fn default_fail_status() -> u16 {
    409
}

// serde's `default` needs a function returning the field's type, an Option here.
#[allow(clippy::unnecessary_wraps)]
fn default_count() -> Option<u32> {
    Some(1)
}

/// A fault rule: which requests it matches, how often, and what they suffer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultRule {
    /// HTTP method to match (any when absent).
    #[serde(default)]
    pub method: Option<String>,
    /// Path pattern, case-insensitive, where `*` matches any run of characters (any when
    /// absent). Matched against the path without the query string.
    #[serde(default)]
    pub path: Option<String>,
    /// Resource type to match, e.g. `Microsoft.Compute/virtualMachines` (any when absent).
    #[serde(default)]
    pub resource_type: Option<String>,
    /// How many matching requests suffer; `null` means every one until cleared.
    #[serde(default = "default_count")]
    pub count: Option<u32>,
    /// What happens to them.
    pub action: FaultAction,
}

impl FaultRule {
    /// A rule that fails the next `count` requests matching `method` and `resource_type` with
    /// an error answered at once.
    pub fn respond(method: &str, resource_type: &str, count: u32, error: &ArmError) -> Self {
        Self {
            method: Some(method.to_owned()),
            path: None,
            resource_type: Some(resource_type.to_owned()),
            count: Some(count),
            action: FaultAction::Respond {
                status: error.status,
                code: error.code.clone(),
                message: error.message.clone(),
                retry_after: None,
            },
        }
    }

    /// Whether the rule applies to a request.
    pub fn matches(&self, method: &str, path: &str, resource_type: Option<&str>) -> bool {
        self.method
            .as_deref()
            .is_none_or(|m| m.eq_ignore_ascii_case(method))
            && self.path.as_deref().is_none_or(|p| glob_match(p, path))
            && self
                .resource_type
                .as_deref()
                .is_none_or(|t| resource_type.is_some_and(|r| r.eq_ignore_ascii_case(t)))
    }
}

/// An active rule and its identity, so a consumed async fault can be found again.
#[derive(Debug, Clone, Serialize)]
pub struct ActiveFault {
    /// Identity, unique within one emulator run.
    pub id: u64,
    /// The rule, with `count` counting down.
    #[serde(flatten)]
    pub rule: FaultRule,
}

/// What the fault table decided for one request.
#[derive(Debug, Default)]
pub(crate) struct Decision {
    /// Errors to answer with at once.
    pub respond: Option<(ArmError, Option<u64>)>,
    /// Answer 401 expired.
    pub expire_token: bool,
    /// Delay before answering.
    pub delay: Duration,
    /// A failure to plant in the request's operation, with the rule id to consume on use.
    pub fail_operation: Option<(u64, ArmError)>,
}

/// The live set of rules.
#[derive(Debug, Default)]
pub(crate) struct FaultTable {
    rules: Vec<ActiveFault>,
    next_id: u64,
}

impl FaultTable {
    pub fn add(&mut self, rule: FaultRule) -> u64 {
        self.next_id += 1;
        self.rules.push(ActiveFault {
            id: self.next_id,
            rule,
        });
        self.next_id
    }

    pub fn clear(&mut self) {
        self.rules.clear();
    }

    pub fn list(&self) -> Vec<ActiveFault> {
        self.rules.clone()
    }

    /// Decides what happens to a request and counts down the rules that fired (except async
    /// ones, consumed by [`FaultTable::consume`] once an operation really took the failure).
    pub fn decide(&mut self, method: &str, path: &str, resource_type: Option<&str>) -> Decision {
        let mut decision = Decision::default();
        for active in &mut self.rules {
            if !active.rule.matches(method, path, resource_type) {
                continue;
            }
            let fired = match &active.rule.action {
                FaultAction::Respond {
                    status,
                    code,
                    message,
                    retry_after,
                } if decision.respond.is_none() && !decision.expire_token => {
                    decision.respond =
                        Some((ArmError::new(*status, code, message.clone()), *retry_after));
                    true
                }
                FaultAction::ExpireToken
                    if decision.respond.is_none() && !decision.expire_token =>
                {
                    decision.expire_token = true;
                    true
                }
                FaultAction::Delay {
                    millis,
                    jitter_millis,
                } => {
                    let jitter = if *jitter_millis > 0 {
                        rand::random_range(0..=*jitter_millis)
                    } else {
                        0
                    };
                    decision.delay += Duration::from_millis(millis + jitter);
                    true
                }
                FaultAction::FailOperation {
                    status,
                    code,
                    message,
                } if decision.fail_operation.is_none() => {
                    decision.fail_operation =
                        Some((active.id, ArmError::new(*status, code, message.clone())));
                    false
                }
                _ => false,
            };
            if fired && let Some(count) = &mut active.rule.count {
                *count = count.saturating_sub(1);
            }
        }
        self.rules.retain(|a| a.rule.count != Some(0));
        decision
    }

    /// Counts down an async rule whose failure an operation took.
    pub fn consume(&mut self, id: u64) {
        if let Some(active) = self.rules.iter_mut().find(|a| a.id == id)
            && let Some(count) = &mut active.rule.count
        {
            *count = count.saturating_sub(1);
        }
        self.rules.retain(|a| a.rule.count != Some(0));
    }
}

/// Case-insensitive glob where `*` matches any run of characters, including `/`.
pub(crate) fn glob_match(pattern: &str, text: &str) -> bool {
    let pattern = pattern.to_ascii_lowercase();
    let text = text.to_ascii_lowercase();
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    if !text.ends_with(last) {
        return false;
    }
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_matches_stars_anywhere() {
        assert!(glob_match(
            "/subscriptions/*/virtualMachines/*",
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualmachines/vm1"
        ));
        assert!(glob_match("*/start", "/x/vm/start"));
        assert!(!glob_match("*/start", "/x/vm/stop"));
        assert!(glob_match("/exact", "/EXACT"));
        assert!(!glob_match("/a*b*c", "/acb"));
    }

    #[test]
    fn respond_rules_count_down_and_disappear() {
        let mut table = FaultTable::default();
        let err = ArmError::new(500, "InternalServerError", "boom");
        table.add(FaultRule::respond(
            "PUT",
            "Microsoft.Network/virtualNetworks",
            2,
            &err,
        ));
        let vnet = Some("Microsoft.Network/virtualNetworks");
        assert!(table.decide("GET", "/x", vnet).respond.is_none());
        assert_eq!(
            table.decide("PUT", "/x", vnet).respond.map(|r| r.0),
            Some(err.clone())
        );
        assert!(table.decide("PUT", "/x", vnet).respond.is_some());
        assert!(table.decide("PUT", "/x", vnet).respond.is_none());
        assert!(table.list().is_empty());
    }

    #[test]
    fn async_rules_count_down_only_when_consumed() {
        let mut table = FaultTable::default();
        table.add(FaultRule {
            method: Some("PUT".into()),
            path: None,
            resource_type: None,
            count: Some(1),
            action: FaultAction::FailOperation {
                status: 409,
                code: "AllocationFailed".into(),
                message: "no capacity".into(),
            },
        });
        let (id, _) = table
            .decide("PUT", "/x", None)
            .fail_operation
            .expect("rule matches");
        assert!(table.decide("PUT", "/x", None).fail_operation.is_some());
        table.consume(id);
        assert!(table.decide("PUT", "/x", None).fail_operation.is_none());
    }

    #[test]
    fn rules_parse_from_json() {
        let rule: FaultRule = serde_json::from_str(
            r#"{"method":"PUT","resource_type":"Microsoft.Compute/virtualMachines",
                "action":{"kind":"fail_operation","code":"AllocationFailed","message":"m"}}"#,
        )
        .expect("valid rule");
        assert_eq!(rule.count, Some(1));
        assert!(matches!(
            rule.action,
            FaultAction::FailOperation { status: 409, .. }
        ));
    }
}
