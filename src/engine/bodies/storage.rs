//! Storage bodies: the account, safe by default (TLS 1.2, HTTPS only, no public blob access
//! unless the manifest asks), and its containers and shares, which carry no tags (ARM refuses
//! them there).

use crate::azure::ResourceId;
use crate::azure::types::storage::{
    BlobContainer, ContainerProperties, DefaultAction, EnabledProtocols, FileShare,
    FileShareProperties, MinimumTlsVersion, NetworkRuleSet, PublicAccess, StorageAccountCreate,
    StorageAccountCreateProperties, StorageKind, StorageSku, StorageSkuName, VirtualNetworkRule,
};

use super::{BodyError, Builder};

impl Builder<'_> {
    pub(crate) fn storage_account(&self) -> Result<StorageAccountCreate, BodyError> {
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
                network_acls: self.network_rules()?,
                ..StorageAccountCreateProperties::default()
            }),
        })
    }

    /// `network_rules` (an account holding an NFS share, see manifest::expand::nfs_access):
    /// deny by default, allow the listed subnets.
    fn network_rules(&self) -> Result<Option<NetworkRuleSet>, BodyError> {
        #[derive(serde::Deserialize)]
        struct SubnetRef {
            vnet: String,
            subnet: String,
        }
        #[derive(serde::Deserialize)]
        struct Rules {
            default_action: String,
            #[serde(default)]
            bypass: Option<String>,
            #[serde(default)]
            subnets: Vec<SubnetRef>,
        }
        let Some(raw) = self.value("network_rules").filter(|v| !v.is_null()) else {
            return Ok(None);
        };
        let rules: Rules = serde_json::from_value(raw.clone())
            .map_err(|e| self.invalid("network_rules", e.to_string()))?;
        let default_action = match rules.default_action.as_str() {
            "Deny" => DefaultAction::Deny,
            "Allow" => DefaultAction::Allow,
            other => {
                return Err(self.invalid(
                    "network_rules",
                    format!("default_action `{other}` is not Allow or Deny"),
                ));
            }
        };
        let mut virtual_network_rules = Vec::new();
        for s in rules.subnets {
            let vnet = self.target("network_rules", &s.vnet)?;
            let subnet =
                ResourceId::from_raw(vnet.arm_id(self.subscription)).child("subnets", &s.subnet);
            virtual_network_rules.push(VirtualNetworkRule {
                id: subnet.to_string(),
                action: Some("Allow".to_owned()),
                state: None,
            });
        }
        Ok(Some(NetworkRuleSet {
            default_action,
            bypass: rules.bypass,
            virtual_network_rules,
        }))
    }

    pub(crate) fn container(&self) -> Result<BlobContainer, BodyError> {
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

    pub(crate) fn file_share(&self) -> Result<FileShare, BodyError> {
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
