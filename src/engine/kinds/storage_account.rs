//! The storage account driver: the plain row's body and reads (`plain::STORAGE_ACCOUNT`: SKU and
//! kind compared, listed per group), and a preflight for its name. Account names are global
//! across Azure, and dsinfra's default name hashes only the experiment and the block's label, so
//! two teams with an experiment and a block of the same names would both be given it; without
//! this check the second learns it when the apply has made the network and the VMs and the
//! account's PUT is refused (`StorageAccountAlreadyTaken`). `checkNameAvailability` says it at plan
//! time instead, located at the block.

use futures::future::join_all;
use serde_json::{Value, json};

use super::{Act, Driver, Preflight, plain};
use crate::azure::{ArmError, Idempotency, ResourceId};
use crate::diag::Diagnostic;
use crate::engine::bodies::{Body, BodyError, Builder};
use crate::model::{Attrs, Desired, ResourceKind};
use crate::plan::{Action, Change, Plan};

/// The storage account driver.
pub(crate) struct StorageAccount;

/// The one storage account driver.
pub(crate) static DRIVER: StorageAccount = StorageAccount;

impl Driver for StorageAccount {
    fn body(&self, b: &Builder<'_>) -> Result<Option<Body>, BodyError> {
        plain::STORAGE_ACCOUNT.body(b)
    }

    fn compared(&self) -> &'static [&'static str] {
        plain::STORAGE_ACCOUNT.compared()
    }

    fn observed(&self, name: &str, body: &Value, want: Option<&Value>) -> Option<Value> {
        plain::STORAGE_ACCOUNT.observed(name, body, want)
    }

    fn known(&self, body: &Value, known: &mut Attrs) {
        plain::STORAGE_ACCOUNT.known(body, known);
    }

    fn delete_query(&self) -> &'static [(&'static str, &'static str)] {
        plain::STORAGE_ACCOUNT.delete_query()
    }

    fn listed(&self) -> bool {
        plain::STORAGE_ACCOUNT.listed()
    }

    /// Every account the plan creates whose name Azure says is taken, by an account that is not
    /// this experiment's own (one made outside dsinfra in its group, or left by a lost state, is
    /// the apply's to adopt: its PUT updates it).
    fn preflight<'a>(&'a self, at: &'a Preflight<'a>, plan: &'a Plan) -> Act<'a, Vec<Diagnostic>> {
        Box::pin(async move {
            let created = plan.changes.iter().filter(|c| {
                c.kind == ResourceKind::StorageAccount && matches!(c.action, Action::Create)
            });
            let checks = created.map(|change| taken(at, change));
            let found: Vec<Option<Diagnostic>> = join_all(checks)
                .await
                .into_iter()
                .collect::<Result<_, _>>()?;
            Ok(found.into_iter().flatten().collect())
        })
    }
}

/// The problem with the name of the account `change` creates, if another holds it.
async fn taken(at: &Preflight<'_>, change: &Change) -> Result<Option<Diagnostic>, ArmError> {
    let provider = ResourceId::from_raw(format!(
        "/subscriptions/{}/providers/Microsoft.Storage",
        at.subscription
    ));
    let ask = json!({"name": change.name, "type": "Microsoft.Storage/storageAccounts"});
    let answer: Value = at
        .client
        .post_action(
            &provider,
            "checkNameAvailability",
            &[],
            Some(&ask),
            Idempotency::Idempotent,
        )
        .await?
        .unwrap_or_default();
    if answer["nameAvailable"].as_bool().unwrap_or(true) || is_own(at, change).await? {
        return Ok(None);
    }
    Ok(Some(diagnostic(at.desired, change, &answer)))
}

/// Whether the account already exists where this experiment puts it.
async fn is_own(at: &Preflight<'_>, change: &Change) -> Result<bool, ArmError> {
    let Some(resource) = at.desired.resource(&change.address) else {
        return Ok(false);
    };
    let own = ResourceId::from_raw(resource.arm_id(at.subscription));
    match at.client.get::<Value>(&own).await {
        Ok(found) => Ok(found.is_some()),
        // The experiment's group does not exist yet: neither does the account in it.
        Err(e) if e.is_resource_group_not_found() => Ok(false),
        Err(e) => Err(e),
    }
}

/// Located at the block's `name` when the manifest writes one, else at the block.
fn diagnostic(desired: &Desired, change: &Change, answer: &Value) -> Diagnostic {
    let resource = desired.resource(&change.address);
    let span = resource.and_then(|r| r.attr_spans.get("name").or(r.span.as_ref()).cloned());
    let why = answer["message"]
        .as_str()
        .filter(|m| !m.is_empty())
        .map_or_else(
            || "storage account names are unique across all of Azure".to_owned(),
            str::to_owned,
        );
    let name = &change.name;
    let help = if change.address.kind == "storage_account" {
        format!(
            "storage account names are global across Azure, and an account outside this \
             experiment (another subscription's, or another group's) holds `{name}`: write \
             `name = \"...\"` on the block, 3-24 lowercase letters and digits that nobody uses \
             yet (the default hashes only the experiment and the block's label)"
        )
    } else {
        format!(
            "storage account names are global across Azure, and an account outside this \
             experiment holds `{name}`, the name this block's account takes from the \
             experiment and the block's label: rename the experiment (`experiment = \"...\"`) \
             or the block"
        )
    };
    Diagnostic::error(format!("storage account name `{name}` is taken in Azure"))
        .with_span_opt(span)
        .with_label(why)
        .with_help(help)
}
