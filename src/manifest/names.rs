//! Deterministic Azure names and Azure's naming rules.
//!
//! Every resource's name is derived from the experiment id and the block label, so the same
//! manifest always names the same resources (plans are reproducible and state can be rebuilt from
//! names). The rules follow the Azure resource-name documentation (shared/reference/arm.md §4);
//! every generated name is checked, because a name Azure rejects would otherwise fail only in the
//! middle of an apply.

use sha2::{Digest, Sha256};

use crate::model::ResourceKind;

/// The experiment id from a file stem: lowercase letters, digits and single `-`.
pub(super) fn sanitise_experiment(stem: &str) -> String {
    let mut out = String::new();
    for c in stem.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let trimmed = out.trim_end_matches('-');
    if trimmed.is_empty() {
        "experiment".to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// Whether a string is a valid experiment id (what `sanitise_experiment` produces).
pub(super) fn is_valid_experiment(id: &str) -> bool {
    id.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !id.ends_with('-')
        && !id.contains("--")
}

/// A block label as part of an Azure name: `_` is not allowed in VM names, so it becomes `-`.
pub(super) fn label_part(label: &str) -> String {
    label.replace('_', "-")
}

/// `<experiment>-<label>[-suffix]`.
pub(super) fn compose(experiment: &str, label: &str, suffix: &str) -> String {
    let mut name = format!("{experiment}-{}", label_part(label));
    if !suffix.is_empty() {
        name.push('-');
        name.push_str(suffix);
    }
    name
}

/// The default storage account name: lowercase letters and digits from the experiment and the
/// label (at most 18), then 6 hex digits of a hash of both. Storage names are global across Azure,
/// so the hash makes collisions with other people's accounts unlikely while staying stable.
pub(super) fn storage_account_name(experiment: &str, label: &str) -> String {
    hashed_name(experiment, label, "", 18)
}

/// Lowercase letters and digits of the experiment and the label (at most `readable`), then 6 hex
/// digits of a hash of both and `seed`: the shape of names that are global across Azure. The
/// experiment id starts with a letter, so the name does too.
fn hashed_name(experiment: &str, label: &str, seed: &str, readable: usize) -> String {
    let prefix: String = format!("{experiment}{label}")
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .take(readable)
        .collect();
    let digest = Sha256::digest(format!("{experiment}/{label}{seed}").as_bytes());
    format!("{prefix}{}", &hex::encode(digest)[..6])
}

/// The storage account an `aml_workspace` creates: the storage account rule, seeded apart so it
/// never takes the name of a `storage_account` block with the same label.
pub(super) fn aml_storage_name(experiment: &str, label: &str) -> String {
    hashed_name(experiment, label, "/aml_workspace.storage", 18)
}

/// The key vault an `aml_workspace` creates: vault names are global too (3-24 letters, digits
/// and `-`), so they take the storage account shape; but a vault's name must start with a
/// letter, and an experiment id from a file name may start with a digit (`87-beeond.hcl`), so
/// such a name starts with `kv` instead.
pub(super) fn key_vault_name(experiment: &str, label: &str) -> String {
    let seed = "/aml_workspace.key_vault";
    let name = hashed_name(experiment, label, seed, 18);
    if name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        name
    } else {
        format!("kv{}", hashed_name(experiment, label, seed, 16))
    }
}

/// The container registry an `aml_workspace` may create: registry names are global (5-50
/// letters and digits).
pub(super) fn registry_name(experiment: &str, label: &str) -> String {
    hashed_name(experiment, label, "/aml_workspace.registry", 40)
}

/// The default AmlCompute name: the label (`_` as `-`, at most 11 characters), `-`, and 4 hex
/// digits of a hash of the experiment and the label. A compute name is at most 16 characters and
/// unique only within its workspace, which several experiments may share (an existing one): the
/// hash keeps theirs apart while the label keeps it readable in the studio.
pub(super) fn aml_compute_name(experiment: &str, label: &str) -> String {
    let readable: String = label_part(label).chars().take(11).collect();
    let readable = readable.trim_end_matches('-');
    let digest = Sha256::digest(format!("{experiment}/aml_cluster.{label}").as_bytes());
    format!("{readable}-{}", &hex::encode(digest)[..4])
}

/// The auto-shutdown schedule name Azure expects for a VM.
pub(super) fn shutdown_schedule_name(vm_name: &str) -> String {
    format!("shutdown-computevm-{vm_name}")
}

/// Eight hex digits of a hash of the subscription and the resource group (case-insensitive, as
/// ARM treats group names): what keeps a block's idle-park role name apart from the same
/// experiment's in another group or subscription. Role names are unique in the whole tenant
/// (RoleDefinitionWithSameNameExists), and two groups applying one manifest is ordinary.
pub(super) fn group_tag(subscription: &str, resource_group: &str) -> String {
    let digest = Sha256::digest(format!(
        "{subscription}\n{}",
        resource_group.to_ascii_lowercase()
    ));
    hex::encode(digest)[..8].to_owned()
}

/// The GUID that names a block's idle-park role definition or role assignment (`part` is
/// `idle_role` or `idle_access`): derived from the subscription, the resource group and the
/// block's address, so every apply finds the one it made, and two experiments (or two blocks)
/// never share one. Role definition names are unique per tenant, hence the subscription.
pub(super) fn idle_guid(
    subscription: &str,
    resource_group: &str,
    block: &str,
    part: &str,
) -> String {
    use sha2::{Digest as _, Sha256};
    let digest = Sha256::digest(format!(
        "dsinfra-idle-park-v1\n{subscription}\n{}\n{block}\n{part}",
        resource_group.to_ascii_lowercase()
    ));
    let mut bytes = [0_u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes)
        .into_uuid()
        .to_string()
}

/// Check a name against Azure's rules for its kind; `Err` says what is wrong.
pub(super) fn check(kind: ResourceKind, name: &str) -> Result<(), String> {
    if kind.named_at_apply() && name == crate::model::NAMED_AT_APPLY {
        return Ok(());
    }
    let len = name.chars().count();
    let length = |min: usize, max: usize| {
        if len < min || len > max {
            Err(format!(
                "it is {len} characters; Azure allows {min} to {max}"
            ))
        } else {
            Ok(())
        }
    };
    match kind {
        ResourceKind::ResourceGroup => {
            length(1, 90)?;
            if let Some(c) = name
                .chars()
                .find(|c| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '(' | ')')))
            {
                return Err(format!(
                    "`{c}` is not allowed (letters, digits, _ - . ( ) only)"
                ));
            }
            if name.ends_with('.') {
                return Err("it may not end with `.`".to_owned());
            }
            Ok(())
        }
        ResourceKind::VirtualMachine => {
            length(1, 64)?;
            if let Some(c) = name.chars().find(|c| {
                c.is_whitespace()
                    || c.is_control()
                    || "~!@#$%^&*()=+_[]{}\\|;:.'\",<>/?".contains(*c)
            }) {
                return Err(format!("`{c}` is not allowed in a VM name"));
            }
            if name.ends_with('-') || name.ends_with('.') {
                return Err("a Linux VM name may not end with `-` or `.`".to_owned());
            }
            if name.chars().all(|c| c.is_ascii_digit()) {
                return Err("a VM name may not be only digits".to_owned());
            }
            Ok(())
        }
        ResourceKind::VirtualNetwork => network_name(name, 2, 64),
        ResourceKind::NetworkSecurityGroup
        | ResourceKind::PublicIp
        | ResourceKind::NetworkInterface
        | ResourceKind::ProximityPlacementGroup
        | ResourceKind::AvailabilitySet
        | ResourceKind::ManagedDisk => network_name(name, 1, 80),
        ResourceKind::StorageAccount => {
            length(3, 24)?;
            if name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            {
                Ok(())
            } else {
                Err("only lowercase letters and digits are allowed".to_owned())
            }
        }
        ResourceKind::BlobContainer | ResourceKind::FileShare => {
            length(3, 63)?;
            if !name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            {
                return Err("only lowercase letters, digits and `-` are allowed".to_owned());
            }
            if name.starts_with('-') || name.ends_with('-') || name.contains("--") {
                return Err(
                    "`-` must sit between letters or digits (not first, last or doubled)"
                        .to_owned(),
                );
            }
            Ok(())
        }
        ResourceKind::AutoShutdownSchedule | ResourceKind::Sas => Ok(()),
        ResourceKind::AksCluster | ResourceKind::AksPool => aks_name(kind, name, length),
        ResourceKind::RoleDefinition | ResourceKind::RoleAssignment => uuid::Uuid::try_parse(name)
            .map(drop)
            .map_err(|_| "ARM names role definitions and assignments by a GUID".to_owned()),
        ResourceKind::KeyVault
        | ResourceKind::LogAnalyticsWorkspace
        | ResourceKind::AppInsights
        | ResourceKind::ContainerRegistry
        | ResourceKind::MlWorkspace
        | ResourceKind::MlCompute => machine_learning_name(kind, name, length),
    }
}

/// The 2025-10-01 spec's `ResourceNameParameter` (a cluster) and `AgentPoolNameParameter` (a
/// pool) patterns (`length` checks the count of characters, as in [`check`]).
fn aks_name(
    kind: ResourceKind,
    name: &str,
    length: impl Fn(usize, usize) -> Result<(), String>,
) -> Result<(), String> {
    if kind == ResourceKind::AksPool {
        length(1, 12)?;
        if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
            return Err("it must start with a lowercase letter".to_owned());
        }
        return only(
            name,
            |c| c.is_ascii_lowercase() || c.is_ascii_digit(),
            "lowercase letters and digits",
        );
    }
    length(1, 63)?;
    only(
        name,
        |c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'),
        "letters, digits, _ and -",
    )?;
    if name.starts_with(['-', '_']) || name.ends_with(['-', '_']) {
        return Err("it must start and end with a letter or digit".to_owned());
    }
    Ok(())
}

/// The rules of an Azure Machine Learning workspace's resources and of AmlCompute clusters
/// (`length` checks the count of characters, as in [`check`]).
fn machine_learning_name(
    kind: ResourceKind,
    name: &str,
    length: impl Fn(usize, usize) -> Result<(), String>,
) -> Result<(), String> {
    match kind {
        ResourceKind::KeyVault => {
            length(3, 24)?;
            dashed(name, "a key vault")?;
            if name.contains("--") {
                return Err("`--` is not allowed in a key vault name".to_owned());
            }
            Ok(())
        }
        ResourceKind::LogAnalyticsWorkspace => {
            length(4, 63)?;
            only(
                name,
                |c| c.is_ascii_alphanumeric() || c == '-',
                "letters, digits and -",
            )?;
            if name.starts_with('-') || name.ends_with('-') {
                return Err("it must start and end with a letter or digit".to_owned());
            }
            Ok(())
        }
        ResourceKind::AppInsights => {
            length(1, 255)?;
            only(
                name,
                |c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '(' | ')'),
                "letters, digits, _ - . ( )",
            )?;
            if name.ends_with('.') {
                return Err("it may not end with `.`".to_owned());
            }
            Ok(())
        }
        ResourceKind::ContainerRegistry => {
            length(5, 50)?;
            only(name, |c| c.is_ascii_alphanumeric(), "letters and digits")
        }
        ResourceKind::MlWorkspace => {
            length(3, 33)?;
            only(
                name,
                |c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'),
                "letters, digits, _ and -",
            )?;
            if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
                return Err("it must start with a letter or digit".to_owned());
            }
            Ok(())
        }
        ResourceKind::MlCompute => {
            length(2, 16)?;
            dashed(name, "an AmlCompute")
        }
        _ => Ok(()),
    }
}

/// Only characters `allowed` accepts (`what` lists them for the message).
fn only(name: &str, allowed: impl Fn(char) -> bool, what: &str) -> Result<(), String> {
    match name.chars().find(|c| !allowed(*c)) {
        Some(c) => Err(format!("`{c}` is not allowed ({what} only)")),
        None => Ok(()),
    }
}

/// Letters, digits and `-`, starting with a letter and ending with a letter or digit: the rule
/// of key vaults and AmlCompute clusters (`what` names the kind in the message).
fn dashed(name: &str, what: &str) -> Result<(), String> {
    only(
        name,
        |c| c.is_ascii_alphanumeric() || c == '-',
        "letters, digits and -",
    )?;
    if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return Err(format!("{what} name must start with a letter"));
    }
    if name.ends_with('-') {
        return Err(format!("{what} name must end with a letter or digit"));
    }
    Ok(())
}

/// The rule shared by network resources, PPGs and disks: letters, digits, `_`, `.`, `-`; start
/// with a letter or digit; end with a letter, digit or `_`.
fn network_name(name: &str, min: usize, max: usize) -> Result<(), String> {
    let len = name.chars().count();
    if len < min || len > max {
        return Err(format!(
            "it is {len} characters; Azure allows {min} to {max}"
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Err(format!(
            "`{c}` is not allowed (letters, digits, _ . - only)"
        ));
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err("it must start with a letter or digit".to_owned());
    }
    if !name.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
        return Err("it must end with a letter, digit or `_`".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn experiment_ids_come_from_file_stems() {
        assert_eq!(sanitise_experiment("ND40 BeeOND_test"), "nd40-beeond-test");
        assert_eq!(sanitise_experiment("--x--"), "x");
        assert_eq!(sanitise_experiment("___"), "experiment");
        assert!(is_valid_experiment("cosmoflow-2"));
        assert!(!is_valid_experiment("Cosmo"));
        assert!(!is_valid_experiment("a--b"));
    }

    #[test]
    fn storage_names_are_short_lowercase_and_stable() {
        let name = storage_account_name("a-very-long-experiment-name", "data");
        assert_eq!(name.len(), 24);
        assert!(name.starts_with("averylongexperimentn"[..18].as_ref() as &str));
        assert_eq!(
            name,
            storage_account_name("a-very-long-experiment-name", "data")
        );
        assert_ne!(
            name,
            storage_account_name("a-very-long-experiment-name", "other")
        );
        assert!(check(ResourceKind::StorageAccount, &name).is_ok());
    }

    #[test]
    fn rules_follow_the_azure_docs() {
        assert!(check(ResourceKind::VirtualMachine, "exp-gpu").is_ok());
        assert_eq!(
            check(ResourceKind::VirtualMachine, "exp_gpu"),
            Err("`_` is not allowed in a VM name".to_owned())
        );
        assert_eq!(
            check(ResourceKind::VirtualMachine, &"a".repeat(65)),
            Err("it is 65 characters; Azure allows 1 to 64".to_owned())
        );
        assert!(check(ResourceKind::VirtualNetwork, "x").is_err());
        assert!(check(ResourceKind::NetworkInterface, "nic-").is_err());
        assert!(check(ResourceKind::StorageAccount, "Data1").is_err());
        assert!(check(ResourceKind::BlobContainer, "raw--data").is_err());
        assert!(check(ResourceKind::BlobContainer, "ab").is_err());
        assert!(check(ResourceKind::FileShare, "scratch").is_ok());
        assert!(check(ResourceKind::ResourceGroup, "dsinfra-x.").is_err());
    }

    #[test]
    fn machine_learning_rules_follow_the_azure_docs() {
        assert!(check(ResourceKind::MlWorkspace, "cosmoflow-ws").is_ok());
        assert!(check(ResourceKind::MlWorkspace, "my_ws-1").is_ok());
        assert!(check(ResourceKind::MlWorkspace, "_ws").is_err());
        assert_eq!(
            check(ResourceKind::MlWorkspace, &"w".repeat(34)),
            Err("it is 34 characters; Azure allows 3 to 33".to_owned())
        );
        assert!(check(ResourceKind::MlCompute, "beeond-1a2b").is_ok());
        assert_eq!(
            check(ResourceKind::MlCompute, "1beeond"),
            Err("an AmlCompute name must start with a letter".to_owned())
        );
        assert!(check(ResourceKind::MlCompute, "b").is_err());
        assert!(check(ResourceKind::MlCompute, &"b".repeat(17)).is_err());
        assert!(check(ResourceKind::MlCompute, "bee_ond").is_err());
        assert!(check(ResourceKind::KeyVault, "kv-one").is_ok());
        assert!(check(ResourceKind::KeyVault, "kv--one").is_err());
        assert!(check(ResourceKind::KeyVault, "9kv").is_err());
        assert!(check(ResourceKind::LogAnalyticsWorkspace, "abc").is_err());
        assert!(check(ResourceKind::LogAnalyticsWorkspace, "exp-ws-logs").is_ok());
        assert!(check(ResourceKind::AppInsights, "exp-ws-insights").is_ok());
        assert!(check(ResourceKind::AppInsights, "x.").is_err());
        assert!(check(ResourceKind::ContainerRegistry, "exp-ws").is_err());
        assert!(check(ResourceKind::ContainerRegistry, "expws1a2b3c").is_ok());
    }

    #[test]
    fn generated_machine_learning_names_are_valid_and_distinct() {
        let long = "a-very-long-experiment-name-indeed";
        let compute = aml_compute_name(long, "beeond_cluster_x");
        assert_eq!(compute.len(), 16);
        assert!(compute.starts_with("beeond-clus"));
        assert!(check(ResourceKind::MlCompute, &compute).is_ok());
        // A label cut at a `-` does not leave it at the end of the readable part.
        assert!(!aml_compute_name("e", "abcdefghij-k").contains("--"));
        assert_ne!(aml_compute_name("one", "c"), aml_compute_name("two", "c"));
        for name in [key_vault_name(long, "ws"), aml_storage_name(long, "ws")] {
            assert_eq!(name.len(), 24);
        }
        assert!(check(ResourceKind::KeyVault, &key_vault_name(long, "ws")).is_ok());
        // An experiment id from a file name may start with a digit; a vault's name may not.
        let from_digits = key_vault_name("87-aml", "ws");
        assert!(from_digits.starts_with("kv87amlws"), "{from_digits}");
        assert_eq!(check(ResourceKind::KeyVault, &from_digits), Ok(()));
        assert_eq!(key_vault_name(&"9".repeat(40), "ws").len(), 24);
        assert!(check(ResourceKind::ContainerRegistry, &registry_name(long, "ws")).is_ok());
        assert_ne!(
            aml_storage_name("e", "data"),
            storage_account_name("e", "data")
        );
    }
}
