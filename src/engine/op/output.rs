//! `output`: the manifest's outputs, as apply stored them, with what only ARM knows read live
//! and, with `--show-secrets`, each SAS re-signed as apply signed it.
//!
//! Apply stores the non-sensitive outputs resolved (`engine::outputs`); ARM is asked only for
//! what is shown and still unknown: a sensitive output (never stored) with `--show-secrets`, or
//! an output the state does not have resolved (an older state, a new output). A SAS is never
//! stored, so showing one needs a connection. [`needs_connection`] says beforehand whether a
//! connection is of any use, so a command that needs none does not make one.

use serde_json::Value;

use super::{Arm, Cancel, Error};
use crate::addr::Address;
use crate::engine::refresh::{self, has_unknown, resolve_known};
use crate::engine::sas;
use crate::model::{Attrs, Desired};
use crate::state::State;

/// One output value: hidden when sensitive and not asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputValue {
    /// Name.
    pub name: String,
    /// Value, `None` when hidden.
    pub value: Option<Value>,
    /// Whether it is sensitive.
    pub sensitive: bool,
}

/// What `output` shows.
pub struct OutputRequest<'a> {
    /// The manifest's outputs (and the SAS resources they refer to).
    pub desired: &'a Desired,
    /// The state (a new, empty one when nothing was applied).
    pub state: State,
    /// The connection, when there is one.
    pub arm: Option<&'a Arm>,
    /// Only this output.
    pub name: Option<&'a str>,
    /// Show sensitive outputs too.
    pub show_secrets: bool,
}

/// The outputs shown: every output, or the one asked for.
#[derive(Debug)]
pub struct OutputOutcome {
    /// The values, in the manifest's order.
    pub values: Vec<OutputValue>,
}

impl OutputOutcome {
    /// How many shown values hold parts only Azure knows (no connection, or not applied).
    pub fn unknown(&self) -> usize {
        self.values
            .iter()
            .filter(|v| v.value.as_ref().is_some_and(has_unknown))
            .count()
    }
}

/// Whether the outputs `request` shows need ARM: a value neither stored nor known without it,
/// or a SAS to re-sign.
pub fn needs_connection(request: &OutputRequest<'_>) -> bool {
    needs_refresh(request)
        || (request.show_secrets
            && shown(request).any(|o| {
                let value = match request.state.outputs.get(&o.name) {
                    Some(saved) if !has_unknown(saved) => saved,
                    _ => &o.value,
                };
                sas_reference(value).is_some()
            }))
}

/// The manifest's outputs this request shows.
fn shown<'r>(request: &'r OutputRequest<'_>) -> impl Iterator<Item = &'r crate::model::Output> {
    request
        .desired
        .outputs
        .iter()
        .filter(|o| request.name.is_none_or(|n| n == o.name))
        .filter(|o| !o.sensitive || request.show_secrets)
}

/// Whether a shown output has a value still unknown that a refresh could read.
fn needs_refresh(request: &OutputRequest<'_>) -> bool {
    !request.state.resources.is_empty()
        && request.desired.outputs.iter().any(|o| {
            (!o.sensitive || request.show_secrets)
                && has_unknown(&o.value)
                && request.state.outputs.get(&o.name).is_none_or(has_unknown)
        })
}

/// The outputs `request` asks for.
///
/// # Errors
///
/// The refresh or a SAS's re-signing failed, a SAS was asked for without a connection, the named
/// output does not exist or is sensitive without `show_secrets`, or Ctrl-C during a read.
pub async fn output(
    mut request: OutputRequest<'_>,
    cancel: &Cancel,
) -> Result<OutputOutcome, Error> {
    let mut observed = std::collections::BTreeMap::<Address, Attrs>::new();
    let refresh_first = needs_refresh(&request);
    if let Some(arm) = request.arm.filter(|_| refresh_first) {
        // Read-only: the refreshed state is not saved.
        let report = cancel
            .interruptible(refresh::refresh(
                &arm.client,
                &arm.subscription,
                &mut request.state,
            ))
            .await??;
        observed = report.observed;
    }
    let state = &request.state;
    let mut values: Vec<OutputValue> = request
        .desired
        .outputs
        .iter()
        .map(|o| {
            let value = match state.outputs.get(&o.name) {
                Some(saved) if !has_unknown(saved) => saved.clone(),
                _ => resolve_known(&o.value, &observed),
            };
            OutputValue {
                name: o.name.clone(),
                value: (!o.sensitive || request.show_secrets).then_some(value),
                sensitive: o.sensitive,
            }
        })
        .collect();
    if request.show_secrets {
        cancel
            .interruptible(reveal_sas(&request, &mut values))
            .await??;
    }
    let Some(name) = request.name else {
        return Ok(OutputOutcome { values });
    };
    let Some(found) = values.iter().position(|v| v.name == name) else {
        let known: Vec<&str> = values.iter().map(|v| v.name.as_str()).collect();
        let hint = crate::diag::did_you_mean(name, known.iter().copied()).map_or_else(
            || format!("the manifest declares: {}", known.join(", ")),
            |m| format!("did you mean `{m}`?"),
        );
        return Err(Error::Failed(format!("no output named `{name}`: {hint}")));
    };
    let found = values.swap_remove(found);
    if found.value.is_none() {
        return Err(Error::Failed(format!(
            "output `{name}` is sensitive: add --show-secrets to print it"
        )));
    }
    Ok(OutputOutcome {
        values: vec![found],
    })
}

/// The SAS address an output's value refers to: `value = sas.read` evaluates to
/// `{address = "sas.read", permissions = ...}`.
fn sas_reference(value: &Value) -> Option<Address> {
    let address = value.get("address")?.as_str()?;
    address
        .starts_with("sas.")
        .then(|| address.parse().ok())
        .flatten()
}

/// Replaces each shown output that refers to a SAS by its token, re-derived as apply signed it:
/// the account key from `listKeys`, the fields and signing time from the state's identity
/// (checked against its fingerprint). The token is never stored, so this needs a connection;
/// without one it fails rather than show something else.
async fn reveal_sas(request: &OutputRequest<'_>, values: &mut [OutputValue]) -> Result<(), Error> {
    let state = &request.state;
    let wanted: Vec<(usize, Address)> = values
        .iter()
        .enumerate()
        .filter(|(_, v)| request.name.is_none_or(|n| n == v.name))
        .filter_map(|(i, v)| Some((i, v.value.as_ref().and_then(sas_reference)?)))
        .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    let arm = request.arm.ok_or_else(|| {
        Error::Failed(
            "a SAS is not stored: printing it needs a connection to re-sign it (--emulator or --endpoint)"
                .to_owned(),
        )
    })?;
    let failed = |e: sas::SasError| Error::Failed(e.to_string());
    for (i, address) in wanted {
        let resource = request
            .desired
            .resource(&address)
            .ok_or_else(|| Error::Failed(format!("the manifest has no {address}")))?;
        let identity = state
            .resource(&address)
            .and_then(|r| r.secrets.get("token"))
            .ok_or_else(|| {
                Error::Failed(format!(
                    "{address} has not been applied: run `dsinfra apply` first"
                ))
            })?;
        let key = sas::account_key(&arm.client, request.desired, &arm.subscription, resource)
            .await
            .map_err(failed)?;
        let token = sas::resign(resource, &key, &state.lineage, identity).map_err(failed)?;
        values[i].value = Some(Value::String(token.expose_query().to_owned()));
    }
    Ok(())
}
