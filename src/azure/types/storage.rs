//! Storage bodies (Microsoft.Storage 2025-01-01): storage accounts (create body and resource are
//! different definitions in the spec, so they are different types here), listKeys, blob
//! containers and file shares.
//!
//! Account keys are secrets: [`StorageAccountKey::value`] is a [`Secret`].

use serde::{Deserialize, Serialize};

use super::common::Tags;
use crate::azure::secret::Secret;

/// The PUT body, `StorageAccountCreateParameters`: `sku`, `kind` and `location` are required.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StorageAccountCreate {
    /// Replication.
    pub sku: StorageSku,
    /// Account kind; dsinfra uses StorageV2.
    pub kind: StorageKind,
    /// Region.
    pub location: String,
    /// Tags.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    /// Properties.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub properties: Option<StorageAccountCreateProperties>,
}

/// `Sku` (storage). `tier` is read-only and derived from the name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageSku {
    /// e.g. `Standard_LRS`.
    pub name: StorageSkuName,
    /// Read-only: Standard or Premium.
    #[serde(default, skip_serializing)]
    pub tier: Option<String>,
}

/// `SkuName` (storage).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StorageSkuName {
    /// Locally redundant.
    #[serde(rename = "Standard_LRS")]
    StandardLrs,
    /// Geo-redundant.
    #[serde(rename = "Standard_GRS")]
    StandardGrs,
    /// Read-access geo-redundant.
    #[serde(rename = "Standard_RAGRS")]
    StandardRagrs,
    /// Zone-redundant.
    #[serde(rename = "Standard_ZRS")]
    StandardZrs,
    /// Premium, locally redundant.
    #[serde(rename = "Premium_LRS")]
    PremiumLrs,
    /// Premium, zone-redundant.
    #[serde(rename = "Premium_ZRS")]
    PremiumZrs,
    /// Geo-zone-redundant.
    #[serde(rename = "Standard_GZRS")]
    StandardGzrs,
    /// Read-access geo-zone-redundant.
    #[serde(rename = "Standard_RAGZRS")]
    StandardRagzrs,
    /// Standard v2, locally redundant.
    #[serde(rename = "StandardV2_LRS")]
    StandardV2Lrs,
    /// Standard v2, geo-redundant.
    #[serde(rename = "StandardV2_GRS")]
    StandardV2Grs,
    /// Standard v2, zone-redundant.
    #[serde(rename = "StandardV2_ZRS")]
    StandardV2Zrs,
    /// Standard v2, geo-zone-redundant.
    #[serde(rename = "StandardV2_GZRS")]
    StandardV2Gzrs,
    /// Premium v2, locally redundant.
    #[serde(rename = "PremiumV2_LRS")]
    PremiumV2Lrs,
    /// Premium v2, zone-redundant.
    #[serde(rename = "PremiumV2_ZRS")]
    PremiumV2Zrs,
}

/// `Kind` (storage).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StorageKind {
    /// General purpose v1.
    Storage,
    /// General purpose v2.
    StorageV2,
    /// Blob only.
    BlobStorage,
    /// Premium files.
    FileStorage,
    /// Premium block blobs.
    BlockBlobStorage,
}

/// `StorageAccountPropertiesCreateParameters`, the settings dsinfra decides.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StorageAccountCreateProperties {
    /// e.g. TLS1_2.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minimum_tls_version: Option<MinimumTlsVersion>,
    /// Whether containers may be made public; dsinfra sends false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_blob_public_access: Option<bool>,
    /// Whether account keys work at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_shared_key_access: Option<bool>,
    /// HTTPS only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supports_https_traffic_only: Option<bool>,
    /// Hierarchical namespace (Data Lake Gen2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_hns_enabled: Option<bool>,
    /// NFS v3 for blobs.
    #[serde(rename = "isNfsV3Enabled", skip_serializing_if = "Option::is_none")]
    pub is_nfs_v3_enabled: Option<bool>,
    /// Hot, Cool, Cold or Premium.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_tier: Option<AccessTier>,
    /// Shares up to 100 TiB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub large_file_shares_state: Option<EnabledDisabled>,
    /// Enabled, Disabled or SecuredByPerimeter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_network_access: Option<String>,
    /// Prefer Entra ID in the portal.
    #[serde(
        rename = "defaultToOAuthAuthentication",
        skip_serializing_if = "Option::is_none"
    )]
    pub default_to_oauth_authentication: Option<bool>,
    /// The firewall: which networks may reach the account's data plane.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_acls: Option<NetworkRuleSet>,
}

/// `NetworkRuleSet`: the account firewall. dsinfra sends it only for an account holding an NFS
/// share, which Azure Files serves only to the virtual networks allowed here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkRuleSet {
    /// What is allowed when no rule matches (required).
    pub default_action: DefaultAction,
    /// Traffic let through whatever the rules say (`AzureServices`, `None`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bypass: Option<String>,
    /// Subnets allowed in (each needs the `Microsoft.Storage` service endpoint).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub virtual_network_rules: Vec<VirtualNetworkRule>,
}

/// `DefaultAction` of a [`NetworkRuleSet`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DefaultAction {
    /// Allow everything not denied.
    Allow,
    /// Deny everything not allowed.
    Deny,
}

/// `VirtualNetworkRule`: one subnet allowed into the account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VirtualNetworkRule {
    /// The subnet's ARM id.
    pub id: String,
    /// Always `Allow` (the only value the spec has).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// Read-only: `Succeeded` once the rule is in force.
    #[serde(default, skip_serializing)]
    pub state: Option<String>,
}

/// `MinimumTlsVersion`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MinimumTlsVersion {
    /// TLS 1.0.
    #[serde(rename = "TLS1_0")]
    Tls10,
    /// TLS 1.1.
    #[serde(rename = "TLS1_1")]
    Tls11,
    /// TLS 1.2.
    #[serde(rename = "TLS1_2")]
    Tls12,
    /// TLS 1.3.
    #[serde(rename = "TLS1_3")]
    Tls13,
}

/// `AccessTier` (accounts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AccessTier {
    /// Hot.
    Hot,
    /// Cool.
    Cool,
    /// Premium.
    Premium,
    /// Cold.
    Cold,
}

/// Enabled / Disabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EnabledDisabled {
    /// Enabled.
    Enabled,
    /// Disabled.
    Disabled,
}

impl StorageAccountCreate {
    /// A StorageV2 account with secure defaults: TLS 1.2, HTTPS only, no public blob access.
    pub fn secure_v2(location: impl Into<String>, sku: StorageSkuName, tags: Option<Tags>) -> Self {
        Self {
            sku: StorageSku {
                name: sku,
                tier: None,
            },
            kind: StorageKind::StorageV2,
            location: location.into(),
            tags,
            properties: Some(StorageAccountCreateProperties {
                minimum_tls_version: Some(MinimumTlsVersion::Tls12),
                allow_blob_public_access: Some(false),
                supports_https_traffic_only: Some(true),
                ..StorageAccountCreateProperties::default()
            }),
        }
    }
}

/// The resource as ARM returns it (`StorageAccount`); `sku` and `kind` are read-only here.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StorageAccount {
    /// Id.
    #[serde(default)]
    pub id: Option<String>,
    /// Name.
    #[serde(default)]
    pub name: Option<String>,
    /// `Microsoft.Storage/storageAccounts`.
    #[serde(default, rename = "type")]
    pub kind_of_resource: Option<String>,
    /// Region.
    #[serde(default)]
    pub location: Option<String>,
    /// Tags.
    #[serde(default)]
    pub tags: Option<Tags>,
    /// Replication.
    #[serde(default)]
    pub sku: Option<StorageSku>,
    /// Account kind.
    #[serde(default)]
    pub kind: Option<StorageKind>,
    /// Properties.
    #[serde(default)]
    pub properties: Option<StorageAccountProperties>,
}

/// `StorageAccountProperties`, the fields dsinfra reads.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StorageAccountProperties {
    /// `Creating`, `ResolvingDNS`, `Succeeded`.
    #[serde(default)]
    pub provisioning_state: Option<String>,
    /// Service endpoints.
    #[serde(default)]
    pub primary_endpoints: Option<Endpoints>,
    /// Primary region.
    #[serde(default)]
    pub primary_location: Option<String>,
    /// available / unavailable.
    #[serde(default)]
    pub status_of_primary: Option<String>,
    /// Creation time.
    #[serde(default)]
    pub creation_time: Option<String>,
    /// Minimum TLS.
    #[serde(default)]
    pub minimum_tls_version: Option<MinimumTlsVersion>,
    /// Public blob access.
    #[serde(default)]
    pub allow_blob_public_access: Option<bool>,
    /// HTTPS only.
    #[serde(default)]
    pub supports_https_traffic_only: Option<bool>,
    /// Hierarchical namespace.
    #[serde(default)]
    pub is_hns_enabled: Option<bool>,
}

/// `Endpoints`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
pub struct Endpoints {
    /// `https://{account}.blob.core.windows.net/`.
    #[serde(default)]
    pub blob: Option<String>,
    /// Files.
    #[serde(default)]
    pub file: Option<String>,
    /// Data Lake.
    #[serde(default)]
    pub dfs: Option<String>,
    /// Queues.
    #[serde(default)]
    pub queue: Option<String>,
    /// Tables.
    #[serde(default)]
    pub table: Option<String>,
    /// Static website.
    #[serde(default)]
    pub web: Option<String>,
}

/// The listKeys result.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct StorageAccountKeys {
    /// key1 and key2.
    #[serde(default)]
    pub keys: Vec<StorageAccountKey>,
}

/// One account key; its value never prints.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StorageAccountKey {
    /// `key1`, `key2`.
    pub key_name: String,
    /// The key (base64).
    pub value: Secret,
    /// Read or Full.
    #[serde(default)]
    pub permissions: Option<String>,
    /// When the key was made.
    #[serde(default)]
    pub creation_time: Option<String>,
}

impl StorageAccountKeys {
    /// The key named `name` (`key1`).
    pub fn key(&self, name: &str) -> Option<&Secret> {
        self.keys
            .iter()
            .find(|k| k.key_name.eq_ignore_ascii_case(name))
            .map(|k| &k.value)
    }
}

/// A blob container. `{}` is a valid create body.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlobContainer {
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub id: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub name: Option<String>,
    /// Read-only.
    #[serde(default, rename = "type", skip_serializing)]
    pub kind: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub etag: Option<String>,
    /// Properties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<ContainerProperties>,
}

/// `ContainerProperties`, the fields dsinfra sets or reads.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerProperties {
    /// Container, Blob or None.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_access: Option<PublicAccess>,
    /// Metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Tags>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub last_modified_time: Option<String>,
    /// Read-only: Available, Leased, ...
    #[serde(default, skip_serializing)]
    pub lease_state: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub has_immutability_policy: Option<bool>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub has_legal_hold: Option<bool>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub deleted: Option<bool>,
}

/// `PublicAccess`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PublicAccess {
    /// Anonymous read of container and blobs.
    Container,
    /// Anonymous read of blobs.
    Blob,
    /// Private.
    None,
}

/// A file share. `{}` is a valid create body.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileShare {
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub id: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub name: Option<String>,
    /// Read-only.
    #[serde(default, rename = "type", skip_serializing)]
    pub kind: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub etag: Option<String>,
    /// Properties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<FileShareProperties>,
}

/// `FileShareProperties`, the fields dsinfra sets or reads.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileShareProperties {
    /// Quota in GiB, 1-102400.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_quota: Option<i32>,
    /// SMB or NFS; settable on create only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled_protocols: Option<EnabledProtocols>,
    /// TransactionOptimized, Hot, Cool, Premium.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_tier: Option<ShareAccessTier>,
    /// NFS root squash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_squash: Option<RootSquash>,
    /// Metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Tags>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub last_modified_time: Option<String>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub share_usage_bytes: Option<i64>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub deleted: Option<bool>,
}

/// `EnabledProtocols`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EnabledProtocols {
    /// SMB.
    #[serde(rename = "SMB")]
    Smb,
    /// NFS (premium FileStorage accounts).
    #[serde(rename = "NFS")]
    Nfs,
}

/// `ShareAccessTier`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ShareAccessTier {
    /// Transaction optimized.
    TransactionOptimized,
    /// Hot.
    Hot,
    /// Cool.
    Cool,
    /// Premium.
    Premium,
}

/// `RootSquashType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RootSquash {
    /// No squash.
    NoRootSquash,
    /// Squash root.
    RootSquash,
    /// Squash everyone.
    AllSquash,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::azure::types::spec_examples::{request_body, response_body};
    use serde_json::json;

    const DIR: &str = "storage/resource-manager/Microsoft.Storage/stable/2025-01-01/examples/";

    #[test]
    fn account_create_matches_the_modelled_part_of_the_spec_example() {
        // The example also sets an edge zone, key and SAS policies, encryption and routing,
        // which dsinfra does not model; every field it does model must match exactly.
        let expected = request_body(&format!("{DIR}StorageAccountCreate.json"), "parameters");
        let body = StorageAccountCreate {
            sku: StorageSku {
                name: StorageSkuName::StandardGrs,
                tier: None,
            },
            kind: StorageKind::Storage,
            location: "eastus".into(),
            tags: Some(
                [("key1", "value1"), ("key2", "value2")]
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .into(),
            ),
            properties: Some(StorageAccountCreateProperties {
                is_hns_enabled: Some(true),
                allow_blob_public_access: Some(false),
                default_to_oauth_authentication: Some(false),
                minimum_tls_version: Some(MinimumTlsVersion::Tls12),
                allow_shared_key_access: Some(true),
                ..StorageAccountCreateProperties::default()
            }),
        };
        let ours = serde_json::to_value(&body).expect("serialises");
        for key in ["sku", "kind", "location", "tags"] {
            assert_eq!(ours[key], expected[key], "{key}");
        }
        let ours_props = ours["properties"]
            .as_object()
            .expect("properties is an object");
        for (key, value) in ours_props {
            assert_eq!(
                Some(value),
                expected["properties"].get(key),
                "properties.{key}"
            );
        }
        assert_eq!(ours_props.len(), 5);
    }

    #[test]
    fn secure_v2_is_the_documented_body() {
        assert_eq!(
            serde_json::to_value(StorageAccountCreate::secure_v2(
                "eastus",
                StorageSkuName::StandardLrs,
                None
            ))
            .expect("serialises"),
            json!({"sku":{"name":"Standard_LRS"},"kind":"StorageV2","location":"eastus",
                   "properties":{"minimumTlsVersion":"TLS1_2","allowBlobPublicAccess":false,"supportsHttpsTrafficOnly":true}})
        );
    }

    #[test]
    fn account_example_response_reads() {
        let account: StorageAccount = serde_json::from_value(response_body(
            &format!("{DIR}StorageAccountGetProperties.json"),
            "200",
        ))
        .expect("the example response reads");
        let endpoints = account
            .properties
            .and_then(|p| p.primary_endpoints)
            .expect("the example has endpoints");
        assert_eq!(
            endpoints.blob.as_deref(),
            Some("https://sto8596.blob.core.windows.net/")
        );
    }

    #[test]
    fn list_keys_reads_and_keys_never_print() {
        let keys: StorageAccountKeys = serde_json::from_value(json!({"keys":[
            {"keyName":"key1","permissions":"Full","value":"c2VjcmV0LWtleS0x"},
            {"keyName":"key2","permissions":"Full","value":"c2VjcmV0LWtleS0y"}]}))
        .expect("reads");
        assert_eq!(
            keys.key("key2").map(Secret::expose),
            Some("c2VjcmV0LWtleS0y")
        );
        assert!(!format!("{keys:?}").contains("c2VjcmV0"));
        let example: StorageAccountKeys = serde_json::from_value(response_body(
            &format!("{DIR}StorageAccountListKeys.json"),
            "200",
        ))
        .expect("the example response reads");
        assert_eq!(example.keys.len(), 2);
    }

    #[test]
    fn container_and_share_bodies_match_the_spec_examples() {
        assert_eq!(
            serde_json::to_value(BlobContainer::default()).expect("serialises"),
            request_body(&format!("{DIR}BlobContainersPut.json"), "blobContainer")
        );
        assert_eq!(
            serde_json::to_value(FileShare::default()).expect("serialises"),
            request_body(&format!("{DIR}FileSharesPut.json"), "fileShare")
        );
        let share = FileShare {
            properties: Some(FileShareProperties {
                share_quota: Some(1024),
                enabled_protocols: Some(EnabledProtocols::Nfs),
                ..FileShareProperties::default()
            }),
            ..FileShare::default()
        };
        assert_eq!(
            serde_json::to_value(&share).expect("serialises"),
            json!({"properties":{"shareQuota":1024,"enabledProtocols":"NFS"}})
        );
        let container: BlobContainer = serde_json::from_value(response_body(
            &format!("{DIR}BlobContainersGet.json"),
            "200",
        ))
        .expect("the example response reads");
        assert_eq!(
            container.properties.and_then(|p| p.has_legal_hold),
            Some(true)
        );
        let back: FileShare =
            serde_json::from_value(response_body(&format!("{DIR}FileSharesPut.json"), "201"))
                .expect("the example response reads");
        assert_eq!(back.name.as_deref(), Some("share6185"));
    }
}
