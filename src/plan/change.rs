//! One planned change to one resource, and why.

use std::collections::BTreeSet;
use std::fmt;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use crate::addr::Address;
use crate::model::{Attrs, ResourceKind};
use crate::state::PowerState;

/// What happens to a resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "action")]
pub enum Action {
    /// It is created.
    Create,
    /// It is changed in place.
    Update,
    /// It is deleted and created again, because these attributes cannot change in place.
    Replace {
        /// The attributes that force the replacement (from `ResourceKind::force_new`, plus `name`,
        /// `resource_group`, `parent` or `type` when the identity itself changes).
        forced_by: Vec<String>,
    },
    /// It is deleted.
    Delete,
    /// Nothing happens.
    NoOp,
}

impl Action {
    /// The action list of Terraform's JSON plan (`["delete","create"]` for a replace).
    pub fn terraform_actions(&self) -> &'static [&'static str] {
        match self {
            Self::Create => &["create"],
            Self::Update => &["update"],
            Self::Replace { .. } => &["delete", "create"],
            Self::Delete => &["delete"],
            Self::NoOp => &["no-op"],
        }
    }
}

/// Why a resource gets its action. Several reasons may apply to one change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "reason")]
pub enum Reason {
    /// It is in the manifest but not in the state.
    New,
    /// These attributes differ between the state and the manifest.
    Changed {
        /// Attribute names, in order.
        attributes: Vec<String>,
    },
    /// These attributes cannot change in place.
    ForcedBy {
        /// Attribute names, in order.
        attributes: Vec<String>,
    },
    /// An attribute that cannot change in place refers to a resource that is replaced.
    DependencyReplaced {
        /// The referring attribute (`nic`).
        attribute: String,
        /// The replaced resource.
        dependency: Address,
    },
    /// It lives inside a resource that is replaced (a container in its storage account) and is
    /// deleted with it, so it is created again in the new one.
    ParentReplaced {
        /// The replaced resource it lives in.
        parent: Address,
    },
    /// It is in the state but no longer in the manifest.
    Removed,
    /// A previous apply recorded the intent to create it and was interrupted: it may exist.
    Interrupted,
    /// The refresh found it deleted outside dsinfra.
    DriftDeleted,
    /// The refresh found these attributes changed outside dsinfra.
    DriftChanged {
        /// Attribute names, in order.
        attributes: Vec<String>,
    },
    /// Its SAS expires soon (or has expired) and is signed again.
    SasExpiring {
        /// When the current SAS expires.
        expiry: DateTime<Utc>,
    },
    /// `dsinfra destroy` deletes everything.
    Destroy,
    /// `destroy --keep-data` keeps it because it holds data.
    KeptData,
    /// `destroy --keep-data` keeps it because a kept data resource needs it.
    KeptForData {
        /// A kept data resource that depends on it.
        needed_by: Address,
    },
}

fn names(attributes: &[String]) -> String {
    attributes
        .iter()
        .map(|a| format!("`{a}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::New => f.write_str("new in the manifest"),
            Self::Changed { attributes } => write!(f, "{} changed", names(attributes)),
            Self::ForcedBy { attributes } => {
                write!(f, "{} cannot change in place", names(attributes))
            }
            Self::DependencyReplaced {
                attribute,
                dependency,
            } => write!(f, "`{attribute}` refers to {dependency}, which is replaced"),
            Self::ParentReplaced { parent } => {
                write!(
                    f,
                    "it lives in {parent}, which is replaced, and goes with it"
                )
            }
            Self::Removed => f.write_str("removed from the manifest"),
            Self::Interrupted => f.write_str(
                "a previous apply was interrupted while creating it: it is adopted if it exists",
            ),
            Self::DriftDeleted => f.write_str("drifted: deleted outside dsinfra"),
            Self::DriftChanged { attributes } => {
                write!(f, "drifted: {} changed outside dsinfra", names(attributes))
            }
            Self::SasExpiring { expiry } => write!(
                f,
                "the SAS expires at {}: it is signed again",
                expiry.to_rfc3339_opts(SecondsFormat::Secs, true)
            ),
            Self::Destroy => f.write_str("destroy deletes everything"),
            Self::KeptData => f.write_str("kept by --keep-data: it holds data"),
            Self::KeptForData { needed_by } => {
                write!(f, "kept by --keep-data: {needed_by} needs it")
            }
        }
    }
}

/// The planned change of one resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// Address.
    pub address: Address,
    /// Resource type.
    pub kind: ResourceKind,
    /// Azure name (after the change; before it for a delete).
    pub name: String,
    /// Resource group.
    pub resource_group: String,
    /// Parent resource name for child types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// ARM id from the state, when the resource exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// What happens.
    pub action: Action,
    /// Attributes now (from the state); `None` when it does not exist.
    pub before: Option<Attrs>,
    /// Attributes afterwards (from the manifest); `None` when it is deleted.
    pub after: Option<Attrs>,
    /// Why, most important first.
    pub reasons: Vec<Reason>,
    /// What it depends on (from the manifest; from the state for a delete).
    pub depends_on: BTreeSet<Address>,
    /// For VMs: the power state recorded in the state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_state: Option<PowerState>,
    /// Names of the secrets it has (shown as `(sensitive)`, never their values or fingerprints).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
}

impl Change {
    /// The attributes forcing a replacement, if this is one.
    pub fn forced_by(&self) -> &[String] {
        match &self.action {
            Action::Replace { forced_by } => forced_by,
            _ => &[],
        }
    }
}

/// How many resources a plan adds, changes, replaces and destroys.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Creates.
    pub add: usize,
    /// Updates in place.
    pub change: usize,
    /// Replacements.
    pub replace: usize,
    /// Deletes.
    pub destroy: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_read_as_sentences() {
        let expiry = DateTime::parse_from_rfc3339("2026-11-25T00:00:00Z")
            .expect("valid")
            .with_timezone(&Utc);
        let cases = [
            (Reason::New, "new in the manifest"),
            (
                Reason::ForcedBy {
                    attributes: vec!["size".into(), "zone".into()],
                },
                "`size`, `zone` cannot change in place",
            ),
            (
                Reason::DependencyReplaced {
                    attribute: "nic".into(),
                    dependency: "vm.gpu.nic".parse().expect("valid"),
                },
                "`nic` refers to vm.gpu.nic, which is replaced",
            ),
            (Reason::DriftDeleted, "drifted: deleted outside dsinfra"),
            (
                Reason::SasExpiring { expiry },
                "the SAS expires at 2026-11-25T00:00:00Z: it is signed again",
            ),
            (
                Reason::KeptForData {
                    needed_by: "storage_account.data".parse().expect("valid"),
                },
                "kept by --keep-data: storage_account.data needs it",
            ),
        ];
        for (reason, text) in cases {
            assert_eq!(reason.to_string(), text);
        }
    }

    #[test]
    fn replace_is_delete_then_create_in_terraform_terms() {
        let replace = Action::Replace {
            forced_by: vec!["size".into()],
        };
        assert_eq!(replace.terraform_actions(), ["delete", "create"]);
        assert_eq!(Action::NoOp.terraform_actions(), ["no-op"]);
    }
}
