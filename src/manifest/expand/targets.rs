//! What references and enumerated texts in resource blocks may be: the [`Target`]s of
//! `network = network.main` and friends, and the [`Choices`] of `sku`, `zone` and the like, as
//! the decoder checks them.

use super::super::decode::{Choices, Target};

/// `network.NAME`.
pub(super) struct Network;

impl Target for Network {
    const WHAT_AND_EXAMPLE: &'static [&'static str] = &["a network", "network.main"];

    fn accepts(address: &str) -> bool {
        address.starts_with("network.") && address.matches('.').count() == 1
    }
}

/// `aml_workspace.NAME`: what an `aml_cluster` runs in.
pub(super) struct AmlWorkspace;

impl Target for AmlWorkspace {
    const WHAT_AND_EXAMPLE: &'static [&'static str] = &["an aml_workspace", "aml_workspace.ws"];

    fn accepts(address: &str) -> bool {
        address.starts_with("aml_workspace.") && address.matches('.').count() == 1
    }
}

/// `vm.NAME`: what a disk attaches to.
pub(super) struct Vm;

impl Target for Vm {
    const WHAT_AND_EXAMPLE: &'static [&'static str] = &["a vm (disks attach to one VM)", "vm.prep"];

    fn accepts(address: &str) -> bool {
        address.starts_with("vm.") && address.matches('.').count() == 1
    }
}

/// `storage_account.NAME.container.NAME`.
pub(super) struct Container;

impl Target for Container {
    const WHAT_AND_EXAMPLE: &'static [&'static str] =
        &["a blob container", "storage_account.data.container.raw"];

    fn accepts(address: &str) -> bool {
        address.starts_with("storage_account.") && address.contains(".container.")
    }
}

/// `storage_account.NAME.file_share.NAME`.
pub(super) struct Share;

impl Target for Share {
    const WHAT_AND_EXAMPLE: &'static [&'static str] =
        &["a file share", "storage_account.data.file_share.scratch"];

    fn accepts(address: &str) -> bool {
        address.starts_with("storage_account.") && address.contains(".file_share.")
    }
}

/// `storage_account.NAME`, as a `sas` block scopes it (one dot exactly).
pub(super) struct SasAccount;

impl Target for SasAccount {
    const WHAT_AND_EXAMPLE: &'static [&'static str] =
        &["a storage account", "storage_account.data"];

    fn accepts(address: &str) -> bool {
        address.starts_with("storage_account.") && address.matches('.').count() == 1
    }
}

/// `storage_account.NAME`, as a step takes it (for its key).
pub(super) struct Account;

impl Target for Account {
    const WHAT_AND_EXAMPLE: &'static [&'static str] =
        &["a storage account", "storage_account.data"];

    fn accepts(address: &str) -> bool {
        address
            .strip_prefix("storage_account.")
            .is_some_and(|label| !label.is_empty() && !label.contains('.'))
    }
}

/// `sas.NAME`.
pub(super) struct Sas;

impl Target for Sas {
    const WHAT_AND_EXAMPLE: &'static [&'static str] = &["a sas block", "sas.read"];

    fn accepts(address: &str) -> bool {
        address.starts_with("sas.")
    }
}

/// A managed disk's SKU (OS disks and data disks).
pub(super) struct DiskSku;

impl Choices for DiskSku {
    const ALLOWED: &'static [&'static str] = &[
        "Standard_LRS",
        "StandardSSD_LRS",
        "Premium_LRS",
        "StandardSSD_ZRS",
        "Premium_ZRS",
    ];
}

/// An availability zone.
pub(super) struct Zone;

impl Choices for Zone {
    const ALLOWED: &'static [&'static str] = &["1", "2", "3"];
}
