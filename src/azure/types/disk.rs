//! Managed disks (Microsoft.Compute DiskRP 2025-01-02). Attaching and detaching happen on the
//! VM (its `storageProfile.dataDisks`), not here.

use serde::{Deserialize, Serialize};

use super::common::Tags;
use super::compute::{DiskStorageAccountType, OperatingSystemType};

/// A managed disk.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Disk {
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub id: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub name: Option<String>,
    /// Read-only.
    #[serde(default, rename = "type", skip_serializing)]
    pub kind: Option<String>,
    /// Read-only: the VM it is attached to.
    #[serde(default, skip_serializing)]
    pub managed_by: Option<String>,
    /// Region (required).
    pub location: String,
    /// Tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    /// Zone; must match the VM's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zones: Option<Vec<String>>,
    /// Storage type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sku: Option<DiskSku>,
    /// Properties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<DiskProperties>,
}

/// `DiskUpdate`: the body of a disk PATCH (a resize, a SKU change, new tags). Only what is set
/// is sent; ARM refuses a smaller `diskSizeGB`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiskUpdate {
    /// The disk's tags, all of them: a PATCH replaces the tag set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    /// A new storage type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sku: Option<DiskSku>,
    /// The properties to change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<DiskUpdateProperties>,
}

/// The properties of a [`DiskUpdate`] dsinfra changes.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DiskUpdateProperties {
    /// The new size in GiB (only ever larger).
    #[serde(
        default,
        rename = "diskSizeGB",
        skip_serializing_if = "Option::is_none"
    )]
    pub disk_size_gb: Option<i32>,
}

/// `DiskSku`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DiskSku {
    /// The storage type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<DiskStorageAccountType>,
    /// Read-only: Standard or Premium.
    #[serde(default, skip_serializing)]
    pub tier: Option<String>,
}

/// `DiskProperties`; `creationData` is required.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiskProperties {
    /// How the disk is created.
    pub creation_data: CreationData,
    /// Size in GiB.
    #[serde(
        default,
        rename = "diskSizeGB",
        skip_serializing_if = "Option::is_none"
    )]
    pub disk_size_gb: Option<i32>,
    /// OS type, for OS disks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_type: Option<OperatingSystemType>,
    /// Provisioned IOPS (Ultra, Premium v2).
    #[serde(
        default,
        rename = "diskIOPSReadWrite",
        skip_serializing_if = "Option::is_none"
    )]
    pub disk_iops_read_write: Option<i64>,
    /// Provisioned MB/s (Ultra, Premium v2).
    #[serde(
        default,
        rename = "diskMBpsReadWrite",
        skip_serializing_if = "Option::is_none"
    )]
    pub disk_mbps_read_write: Option<i64>,
    /// Performance tier, e.g. `P30`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    /// Unattached, Attached, Reserved, ...; reported by ARM, never set by dsinfra.
    #[serde(default, skip_serializing)]
    pub disk_state: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub disk_size_bytes: Option<i64>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub unique_id: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub time_created: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub provisioning_state: Option<String>,
}

/// `CreationData`; `createOption` is required.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreationData {
    /// How to create the disk.
    pub create_option: DiskCreateOption,
    /// The snapshot or disk to copy (`Copy`, `Restore`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_resource_id: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub source_unique_id: Option<String>,
}

/// `DiskCreateOption`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DiskCreateOption {
    /// A new empty disk.
    Empty,
    /// Attach an existing disk.
    Attach,
    /// From a platform image.
    FromImage,
    /// Import a VHD.
    Import,
    /// Copy a disk or snapshot.
    Copy,
    /// Restore from a restore point.
    Restore,
    /// Upload.
    Upload,
    /// Background copy across regions.
    CopyStart,
    /// Import a confidential VM disk.
    ImportSecure,
    /// Upload a confidential VM disk.
    UploadPreparedSecure,
    /// From an elastic SAN snapshot.
    CopyFromSanSnapshot,
}

impl Disk {
    /// An empty data disk of `size_gb` GiB.
    pub fn empty(
        location: impl Into<String>,
        size_gb: i32,
        sku: DiskStorageAccountType,
        zones: Option<Vec<String>>,
        tags: Option<Tags>,
    ) -> Self {
        Self {
            location: location.into(),
            tags,
            zones,
            sku: Some(DiskSku {
                name: Some(sku),
                tier: None,
            }),
            properties: Some(DiskProperties {
                creation_data: CreationData {
                    create_option: DiskCreateOption::Empty,
                    source_resource_id: None,
                    source_unique_id: None,
                },
                disk_size_gb: Some(size_gb),
                os_type: None,
                disk_iops_read_write: None,
                disk_mbps_read_write: None,
                tier: None,
                disk_state: None,
                disk_size_bytes: None,
                unique_id: None,
                time_created: None,
                provisioning_state: None,
            }),
            ..Self::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::azure::types::spec_examples::{request_body, response_body};

    const DIR: &str = "compute/resource-manager/Microsoft.Compute/DiskRP/stable/2025-01-02/examples/diskExamples/";

    #[test]
    fn empty_disk_matches_the_spec_example() {
        let mut disk = Disk::empty(
            "West US",
            200,
            DiskStorageAccountType::StandardLrs,
            None,
            None,
        );
        // The example leaves the SKU to its default.
        disk.sku = None;
        assert_eq!(
            serde_json::to_value(&disk).expect("serialises"),
            request_body(&format!("{DIR}Disk_Create_Empty.json"), "disk")
        );
    }

    #[test]
    fn disk_example_response_reads() {
        let disk: Disk =
            serde_json::from_value(response_body(&format!("{DIR}Disk_Get.json"), "200"))
                .expect("the example response reads");
        let props = disk.properties.expect("the example has properties");
        assert!(props.provisioning_state.is_some());
        assert!(disk.managed_by.is_some());
    }
}
