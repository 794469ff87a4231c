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
    let readable: String = format!("{experiment}{label}")
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .take(18)
        .collect();
    let digest = Sha256::digest(format!("{experiment}/{label}").as_bytes());
    format!("{readable}{}", &hex::encode(digest)[..6])
}

/// The auto-shutdown schedule name Azure expects for a VM.
pub(super) fn shutdown_schedule_name(vm_name: &str) -> String {
    format!("shutdown-computevm-{vm_name}")
}

/// Check a name against Azure's rules for its kind; `Err` says what is wrong.
pub(super) fn check(kind: ResourceKind, name: &str) -> Result<(), String> {
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
        // Issue 17 (in progress): the Azure Machine Learning kinds' rules come with their blocks.
        ResourceKind::KeyVault
        | ResourceKind::LogAnalyticsWorkspace
        | ResourceKind::AppInsights
        | ResourceKind::ContainerRegistry
        | ResourceKind::MlWorkspace
        | ResourceKind::MlCompute => Ok(()),
    }
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
}
