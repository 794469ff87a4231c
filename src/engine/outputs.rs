//! The manifest's outputs as an apply leaves them in the state.
//!
//! An output's value is evaluated with the manifest, except for what only ARM knows once the
//! resource exists (a public IP address, a NIC's private address), which the manifest layer leaves
//! as `(known after apply: ADDRESS.ATTR)` placeholders ([`crate::model::known_after_apply`]).
//! After a successful apply, [`record`] reads exactly the resources those placeholders name back
//! from ARM, fills them in, and saves the non-sensitive outputs in `state.outputs`, so that
//! `dsinfra output` can print them without a connection. Sensitive outputs are never stored
//! (docs/state.md): they are computed again when asked for.
//!
//! [`resolve`] and [`references`] are pure, so what is stored is unit-tested without ARM.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::execute::StateStore;
use super::refresh::{known_values, resolve_known};
use crate::addr::Address;
use crate::azure::{ArmClient, ArmError, ResourceId};
use crate::model::{Attrs, Desired};
use crate::state::{ResourceStatus, State, StateError};

/// How a placeholder starts; the format is [`crate::model::known_after_apply`]'s.
const PLACEHOLDER: &str = "(known after apply: ";

/// Why the outputs could not be recorded. The resources themselves are unaffected.
#[derive(Debug, thiserror::Error)]
pub enum OutputsError {
    /// Reading a resource a placeholder names failed.
    #[error("reading {address} for the outputs failed: {source}")]
    Read {
        /// The resource.
        address: Address,
        /// What ARM said.
        source: ArmError,
    },
    /// Saving the state with the outputs failed.
    #[error("saving the outputs in the state failed: {0}")]
    Save(#[from] StateError),
}

/// The resources the `(known after apply: ...)` placeholders in `value` name, in address order.
pub fn references(value: &Value) -> BTreeSet<Address> {
    let mut found = BTreeSet::new();
    collect_references(value, &mut found);
    found
}

fn collect_references(value: &Value, found: &mut BTreeSet<Address>) {
    match value {
        Value::String(text) => {
            let mut rest = text.as_str();
            while let Some(start) = rest.find(PLACEHOLDER) {
                let after = &rest[start + PLACEHOLDER.len()..];
                let Some(end) = after.find(')') else { break };
                if let Some(address) = after[..end]
                    .rsplit_once('.')
                    .and_then(|(address, _attribute)| address.parse().ok())
                {
                    found.insert(address);
                }
                rest = &after[end + 1..];
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_references(v, found)),
        Value::Object(map) => map.values().for_each(|v| collect_references(v, found)),
        _ => {}
    }
}

/// The outputs to store: every non-sensitive output of `desired`, its placeholders filled from
/// `known` where it has the value (the others stay placeholders, which `dsinfra output` resolves
/// with a connection or reports). A state without resources (everything destroyed) stores none:
/// there is nothing left for them to describe.
pub fn resolve(
    desired: &Desired,
    state: &State,
    known: &BTreeMap<Address, Attrs>,
) -> BTreeMap<String, Value> {
    if state.resources.is_empty() {
        return BTreeMap::new();
    }
    desired
        .outputs
        .iter()
        .filter(|o| !o.sensitive)
        .map(|o| (o.name.clone(), resolve_known(&o.value, known)))
        .collect()
}

/// Reads the values only ARM knows of every resource in `addresses` that `state` records as
/// created; resources not in the state (not applied, or destroyed) are skipped.
///
/// # Errors
///
/// A read failed (a resource that is gone is not an error: its values stay unknown).
pub async fn read_known(
    client: &ArmClient,
    state: &State,
    addresses: &BTreeSet<Address>,
) -> Result<BTreeMap<Address, Attrs>, OutputsError> {
    let mut known = BTreeMap::new();
    for address in addresses {
        let Some(resource) = state.resource(address) else {
            continue;
        };
        let (Some(id), ResourceStatus::Created) = (&resource.id, resource.status) else {
            continue;
        };
        let body = client
            .get::<Value>(&ResourceId::from_raw(id))
            .await
            .map_err(|source| OutputsError::Read {
                address: address.clone(),
                source,
            })?;
        if let Some(body) = body {
            let values = known_values(resource.kind, &body);
            if !values.is_empty() {
                known.insert(address.clone(), values);
            }
        }
    }
    Ok(known)
}

/// After a successful apply or destroy: resolves the non-sensitive outputs (reading only the
/// resources their placeholders name) and saves them as the state's `outputs`, replacing what
/// an earlier apply stored (outputs removed from the manifest go too).
///
/// # Errors
///
/// Reading a named resource or saving the state failed.
pub async fn record(
    client: &ArmClient,
    desired: &Desired,
    store: &StateStore,
) -> Result<(), OutputsError> {
    let state = store.snapshot();
    let named: BTreeSet<Address> = desired
        .outputs
        .iter()
        .filter(|o| !o.sensitive)
        .flat_map(|o| references(&o.value))
        .collect();
    let known = read_known(client, &state, &named).await?;
    let outputs = resolve(desired, &state, &known);
    if outputs == state.outputs {
        return Ok(());
    }
    store.update(|state| state.outputs = outputs).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Output, known_after_apply};
    use serde_json::json;

    fn addr(text: &str) -> Address {
        text.parse().expect("a valid address")
    }

    fn output(name: &str, value: Value, sensitive: bool) -> Output {
        Output {
            name: name.to_owned(),
            value,
            sensitive,
            description: None,
        }
    }

    fn desired(outputs: Vec<Output>) -> Desired {
        let mut desired = crate::plan::fixtures::dual();
        desired.outputs = outputs;
        desired
    }

    fn applied(desired: &Desired) -> State {
        let mut state = State::new(&desired.experiment);
        state.resources.push(crate::state::ResourceState {
            address: addr("vm.gpu.public_ip"),
            kind: crate::model::ResourceKind::PublicIp,
            name: "exp-gpu-ip".into(),
            parent: None,
            resource_group: "rg".into(),
            id: Some("/subscriptions/s/resourceGroups/rg/providers/x/y/exp-gpu-ip".into()),
            attrs: Attrs::new(),
            depends_on: BTreeSet::new(),
            status: ResourceStatus::Created,
            power_state: None,
            secrets: BTreeMap::new(),
            host_key: None,
            boots: 0,
            steps: BTreeMap::new(),
            mesh_key: None,
            nodes: std::collections::BTreeMap::new(),
            drift: None,
        });
        state
    }

    #[test]
    fn references_finds_every_placeholder_however_deep() {
        let ip = known_after_apply(&addr("vm.gpu.public_ip"), "ip_address");
        let value = json!({
            "ssh": format!("ssh azureuser@{} -p 22", ip.as_str().expect("a string")),
            "nodes": [known_after_apply(&addr("cluster.train[1].nic"), "private_ip")],
            "plain": "no placeholder here",
        });
        assert_eq!(
            references(&value).into_iter().collect::<Vec<_>>(),
            [addr("cluster.train[1].nic"), addr("vm.gpu.public_ip")]
        );
        assert!(references(&json!("(known after apply: unterminated")).is_empty());
    }

    #[test]
    fn resolve_fills_placeholders_and_never_keeps_sensitive_outputs() {
        let ip = known_after_apply(&addr("vm.gpu.public_ip"), "ip_address");
        let desired = desired(vec![
            output("ip", ip.clone(), false),
            output(
                "ssh",
                json!(format!("ssh u@{}", ip.as_str().expect("text"))),
                false,
            ),
            output(
                "nic",
                known_after_apply(&addr("vm.gpu.nic"), "private_ip"),
                false,
            ),
            output("secret_ip", ip, true),
            output("region", json!("eastus"), false),
        ]);
        let known = BTreeMap::from([(
            addr("vm.gpu.public_ip"),
            Attrs::from([("ip_address".to_owned(), json!("20.1.2.3"))]),
        )]);
        let stored = resolve(&desired, &applied(&desired), &known);
        assert_eq!(
            serde_json::to_value(&stored).expect("serialises"),
            json!({
                "ip": "20.1.2.3",
                "ssh": "ssh u@20.1.2.3",
                // Not read: stays a placeholder for `dsinfra output` to resolve or report.
                "nic": "(known after apply: vm.gpu.nic.private_ip)",
                "region": "eastus",
            })
        );
    }

    #[test]
    fn a_state_without_resources_stores_no_outputs() {
        let desired = desired(vec![output("region", json!("eastus"), false)]);
        let empty = State::new(&desired.experiment);
        assert!(resolve(&desired, &empty, &BTreeMap::new()).is_empty());
    }
}
