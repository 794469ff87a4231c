//! Storage bodies: the account, safe by default (TLS 1.2, HTTPS only, no public blob access
//! unless the manifest asks), and its containers and shares, which carry no tags (ARM refuses
//! them there).

use crate::azure::types::storage::{
    BlobContainer, ContainerProperties, EnabledProtocols, FileShare, FileShareProperties,
    MinimumTlsVersion, PublicAccess, StorageAccountCreate, StorageAccountCreateProperties,
    StorageKind, StorageSku, StorageSkuName,
};

use super::{BodyError, Builder};

impl Builder<'_> {
    pub(super) fn storage_account(&self) -> Result<StorageAccountCreate, BodyError> {
        let sku: StorageSkuName = self.wire_enum("sku")?;
        let kind: StorageKind = self.wire_enum("kind")?;
        let tls = match self.value("min_tls_version") {
            Some(_) => Some(self.wire_enum::<MinimumTlsVersion>("min_tls_version")?),
            None => Some(MinimumTlsVersion::Tls12),
        };
        Ok(StorageAccountCreate {
            sku: StorageSku {
                name: sku,
                tier: None,
            },
            kind,
            location: self.location()?,
            tags: self.tags()?,
            properties: Some(StorageAccountCreateProperties {
                minimum_tls_version: tls,
                allow_blob_public_access: Some(
                    self.opt_bool("allow_blob_public_access")?.unwrap_or(false),
                ),
                supports_https_traffic_only: Some(self.opt_bool("https_only")?.unwrap_or(true)),
                is_hns_enabled: self.opt_bool("hns")?.filter(|h| *h),
                ..StorageAccountCreateProperties::default()
            }),
        })
    }

    pub(super) fn container(&self) -> Result<BlobContainer, BodyError> {
        let access = match self.value("public_access") {
            Some(_) => self.wire_enum::<PublicAccess>("public_access")?,
            None => PublicAccess::None,
        };
        Ok(BlobContainer {
            properties: Some(ContainerProperties {
                public_access: Some(access),
                ..ContainerProperties::default()
            }),
            ..BlobContainer::default()
        })
    }

    pub(super) fn file_share(&self) -> Result<FileShare, BodyError> {
        let protocol = match self.value("protocol") {
            Some(_) => Some(self.wire_enum::<EnabledProtocols>("protocol")?),
            None => None,
        };
        Ok(FileShare {
            properties: Some(FileShareProperties {
                share_quota: self.opt_i32("quota_gb")?,
                enabled_protocols: protocol,
                ..FileShareProperties::default()
            }),
            ..FileShare::default()
        })
    }
}
