//! Azure Machine Learning bodies: a new workspace's dependencies (key vault, Log Analytics,
//! Application Insights, container registry) and the workspace itself (an AmlCompute cluster's
//! body is its driver's: `engine::kinds::ml_compute`).
//!
//! Two decisions live here. A workspace gets a system-assigned identity (Azure requires one;
//! it reaches the storage account and key vault with it). And a key vault keeps deleted vaults
//! the fewest days Azure allows (decision 40).

use crate::azure::types::ml::{ManagedIdentity, MlSku, Workspace, WorkspaceProperties};
use crate::azure::types::monitor::{
    AppInsightsComponent, AppInsightsProperties, LogAnalyticsProperties, LogAnalyticsSku,
    LogAnalyticsWorkspace,
};
use crate::azure::types::registry::{Registry, RegistryProperties, RegistrySku};
use crate::azure::types::vault::{MIN_SOFT_DELETE_DAYS, Vault, VaultProperties, VaultSku};

use super::{BodyError, Builder};

impl Builder<'_> {
    pub(crate) fn key_vault(&self) -> Result<Vault, BodyError> {
        let tenant = self.tenant.ok_or_else(|| self.missing("tenant_id"))?;
        Ok(Vault {
            location: self.location()?,
            tags: self.tags()?,
            properties: VaultProperties {
                tenant_id: tenant.to_owned(),
                sku: VaultSku::named(self.text("sku")?),
                access_policies: Vec::new(),
                enable_soft_delete: Some(true),
                soft_delete_retention_in_days: Some(MIN_SOFT_DELETE_DAYS),
                ..VaultProperties::default()
            },
            ..Vault::default()
        })
    }

    pub(crate) fn log_analytics(&self) -> Result<LogAnalyticsWorkspace, BodyError> {
        Ok(LogAnalyticsWorkspace {
            location: self.location()?,
            tags: self.tags()?,
            properties: Some(LogAnalyticsProperties {
                sku: Some(LogAnalyticsSku {
                    name: self.text("sku")?,
                }),
                retention_in_days: self.opt_i32("retention_days")?,
                ..LogAnalyticsProperties::default()
            }),
            ..LogAnalyticsWorkspace::default()
        })
    }

    pub(crate) fn app_insights(&self) -> Result<AppInsightsComponent, BodyError> {
        let application_type = self.text("application_type")?;
        let logs = self
            .reference_id("logs")?
            .ok_or_else(|| self.missing("logs"))?;
        Ok(AppInsightsComponent {
            location: self.location()?,
            kind: application_type.clone(),
            tags: self.tags()?,
            properties: AppInsightsProperties {
                application_type,
                workspace_resource_id: Some(logs),
                ingestion_mode: Some("LogAnalytics".to_owned()),
                provisioning_state: None,
            },
            ..AppInsightsComponent::default()
        })
    }

    pub(crate) fn registry(&self) -> Result<Registry, BodyError> {
        Ok(Registry {
            location: self.location()?,
            tags: self.tags()?,
            sku: RegistrySku {
                name: self.text("sku")?,
            },
            properties: Some(RegistryProperties {
                admin_user_enabled: Some(false),
                ..RegistryProperties::default()
            }),
            ..Registry::default()
        })
    }

    pub(crate) fn ml_workspace(&self) -> Result<Workspace, BodyError> {
        let required = |attribute: &str| {
            self.reference_id(attribute)?
                .ok_or_else(|| self.missing(attribute))
        };
        let sku = self.text("sku")?;
        Ok(Workspace {
            location: Some(self.location()?),
            tags: self.tags()?,
            identity: Some(ManagedIdentity::system_assigned()),
            sku: Some(MlSku {
                name: sku.clone(),
                tier: Some(sku),
            }),
            properties: Some(WorkspaceProperties {
                friendly_name: self.opt_text("friendly_name")?,
                storage_account: Some(required("storage_account")?),
                key_vault: Some(required("key_vault")?),
                application_insights: Some(required("application_insights")?),
                container_registry: self.reference_id("container_registry")?,
                provisioning_state: None,
            }),
            ..Workspace::default()
        })
    }
}
