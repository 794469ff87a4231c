//! Provider registration: a subscription can use a resource provider's namespace only once it is
//! registered for it, and Azure registers only the common ones by itself. First-time users meet
//! this with the auto-shutdown schedules (`Microsoft.DevTestLab`): ARM refuses the write with
//! 409 `MissingSubscriptionRegistration`.
//!
//! Before anything is written, [`preflight`] reads the provider of every namespace the plan
//! writes to (one GET each, in parallel) and reports each unregistered one once, located on the
//! first block that needs it, with the command that registers it. When apply meets the error
//! anyway (a saved plan, a registration undone meanwhile), `advice.rs` gives the same help from
//! [`help`]. Why a preflight and not only advice: docs/decisions.md, "Provider registration".

use std::collections::BTreeMap;

use crate::addr::Address;
use crate::azure::{ArmClient, ArmError};
use crate::diag::{Diagnostic, Span};
use crate::model::{Desired, ResourceKind};
use crate::plan::{Action, Plan};

/// The namespace of an ARM resource type (`Microsoft.DevTestLab/schedules` ->
/// `Microsoft.DevTestLab`), for the kinds a subscription must be registered for. Resource groups
/// (Microsoft.Resources, always registered) and dsinfra's own SAS records have none.
pub fn namespace_of(kind: ResourceKind) -> Option<&'static str> {
    match kind {
        // Microsoft.Authorization (role definitions and assignments) is registered in every
        // subscription and cannot be unregistered: nothing to check.
        ResourceKind::ResourceGroup
        | ResourceKind::Sas
        | ResourceKind::RoleDefinition
        | ResourceKind::RoleAssignment => None,
        other => other.arm_type().split('/').next(),
    }
}

/// What to do about an unregistered namespace, in one sentence.
pub fn help(namespace: &str) -> String {
    format!(
        "register the subscription for {namespace} once: `az provider register --namespace \
         {namespace}`; registering takes a minute or two (`az provider show --namespace \
         {namespace} --query registrationState` says Registered when it is done), then run this \
         command again"
    )
}

/// The first block of the plan that writes to each namespace, with its span.
struct Need {
    block: Address,
    kind: ResourceKind,
    span: Option<Span>,
}

/// The namespaces a plan writes to (creates, replaces, updates), each with the first resource
/// that needs it. Deletes need no registration check: what exists was made while registered.
fn needs(desired: &Desired, plan: &Plan) -> BTreeMap<&'static str, Need> {
    let mut out = BTreeMap::new();
    for change in &plan.changes {
        if !matches!(
            change.action,
            Action::Create | Action::Update | Action::Replace { .. }
        ) {
            continue;
        }
        let Some(namespace) = namespace_of(change.kind) else {
            continue;
        };
        out.entry(namespace).or_insert_with(|| Need {
            block: change.address.block_address(),
            kind: change.kind,
            span: desired
                .resource(&change.address)
                .and_then(|r| r.span.clone()),
        });
    }
    out
}

/// The diagnostic for a namespace that is not registered (`state` as ARM reports it).
fn problem(namespace: &str, state: &str, need: &Need) -> Diagnostic {
    let summary = if state.eq_ignore_ascii_case("Registering") {
        format!(
            "the subscription is still registering for {namespace}, which {} needs",
            need.block
        )
    } else {
        format!(
            "the subscription is not registered for {namespace} ({state}), which {} needs: ARM \
             would refuse it with MissingSubscriptionRegistration",
            need.block
        )
    };
    let help = if state.eq_ignore_ascii_case("Registering") {
        format!(
            "registering takes a minute or two: wait until `az provider show --namespace \
             {namespace} --query registrationState` says Registered, then run this command again"
        )
    } else {
        help(namespace)
    };
    Diagnostic::error(summary)
        .with_span_opt(need.span.clone())
        .with_label(format!("{} creates {}", need.block, need.kind.arm_type()))
        .with_help(help)
}

/// Reads the registration of every namespace the plan writes to and reports the unregistered
/// ones, once each. A provider that cannot be read (no permission to read providers, a network
/// error) is not a reason to stop: the write itself would tell, with the same advice.
pub async fn preflight(
    client: &ArmClient,
    subscription: &str,
    desired: &Desired,
    plan: &Plan,
) -> Vec<Diagnostic> {
    let needs = needs(desired, plan);
    let reads = needs
        .keys()
        .map(|namespace| client.provider(subscription, namespace));
    let answers: Vec<Result<_, ArmError>> = futures::future::join_all(reads).await;
    let mut problems = Vec::new();
    for ((namespace, need), answer) in needs.iter().zip(answers) {
        match answer {
            Ok(Some(provider)) if !provider.is_registered() => {
                let state = provider
                    .registration_state
                    .unwrap_or_else(|| "NotRegistered".to_owned());
                problems.push(problem(namespace, &state, need));
            }
            Ok(_) => {}
            Err(err) => {
                tracing::debug!(%namespace, %err, "could not read the provider's registration");
            }
        }
    }
    problems
}

/// The namespace an ARM `MissingSubscriptionRegistration` message names
/// (`... to use namespace 'Microsoft.DevTestLab'. ...`).
pub fn namespace_in(message: &str) -> Option<&str> {
    let (_, rest) = message.split_once("namespace '")?;
    rest.split_once('\'').map(|(namespace, _)| namespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_namespace_is_read_from_arm_message() {
        assert_eq!(
            namespace_in(
                "The subscription is not registered to use namespace 'Microsoft.DevTestLab'. See \
                 https://aka.ms/rps-not-found for how to register subscriptions."
            ),
            Some("Microsoft.DevTestLab")
        );
        assert_eq!(namespace_in("something else"), None);
    }

    #[test]
    fn kinds_map_to_their_namespace_and_groups_need_none() {
        assert_eq!(
            namespace_of(ResourceKind::AutoShutdownSchedule),
            Some("Microsoft.DevTestLab")
        );
        assert_eq!(
            namespace_of(ResourceKind::VirtualMachine),
            Some("Microsoft.Compute")
        );
        assert_eq!(namespace_of(ResourceKind::ResourceGroup), None);
        assert_eq!(namespace_of(ResourceKind::Sas), None);
    }

    #[test]
    fn a_namespace_still_registering_is_told_to_wait_not_to_register_again() {
        let need = Need {
            block: "vm.gpu".parse().expect("valid"),
            kind: ResourceKind::AutoShutdownSchedule,
            span: None,
        };
        let waiting = problem("Microsoft.DevTestLab", "Registering", &need);
        assert_eq!(
            waiting.summary,
            "the subscription is still registering for Microsoft.DevTestLab, which vm.gpu needs"
        );
        assert_eq!(
            waiting.help,
            [
                "registering takes a minute or two: wait until `az provider show --namespace \
              Microsoft.DevTestLab --query registrationState` says Registered, then run this \
              command again"
            ]
        );
        let missing = problem("Microsoft.DevTestLab", "NotRegistered", &need);
        assert_eq!(missing.help, [help("Microsoft.DevTestLab")]);
    }

    #[test]
    fn the_help_names_the_namespace_and_the_command() {
        assert_eq!(
            help("Microsoft.DevTestLab"),
            "register the subscription for Microsoft.DevTestLab once: `az provider register \
             --namespace Microsoft.DevTestLab`; registering takes a minute or two (`az provider \
             show --namespace Microsoft.DevTestLab --query registrationState` says Registered \
             when it is done), then run this command again"
        );
    }
}
