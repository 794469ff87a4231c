//! Monitoring bodies for an Azure Machine Learning workspace: a Log Analytics workspace
//! (Microsoft.OperationalInsights 2022-10-01) and a workspace-based Application Insights
//! component (Microsoft.Insights `components` 2020-02-02), which stores into it (Azure retired
//! classic components). No official spec of these providers is in `shared/azure-specs`; the
//! bodies follow Azure's REST reference.

use serde::{Deserialize, Serialize};

use super::common::Tags;

/// A Log Analytics workspace.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogAnalyticsWorkspace {
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub id: Option<String>,
    /// Region (required).
    pub location: String,
    /// Tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    /// Properties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<LogAnalyticsProperties>,
}

/// `WorkspaceProperties` (Log Analytics).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogAnalyticsProperties {
    /// The pricing SKU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sku: Option<LogAnalyticsSku>,
    /// Days data is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_in_days: Option<i32>,
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub provisioning_state: Option<String>,
}

/// `WorkspaceSku` (Log Analytics): `PerGB2018` is the pay-as-you-go SKU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogAnalyticsSku {
    /// The SKU's name.
    pub name: String,
}

/// An Application Insights component. ARM spells its properties in PascalCase with
/// underscores (`Application_Type`, `WorkspaceResourceId`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AppInsightsComponent {
    /// Read-only.
    #[serde(default, skip_serializing)]
    pub id: Option<String>,
    /// Region (required).
    pub location: String,
    /// The kind of application (required): `web`.
    pub kind: String,
    /// Tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Tags>,
    /// Properties.
    pub properties: AppInsightsProperties,
}

/// `ApplicationInsightsComponentProperties`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AppInsightsProperties {
    /// The application type (required): `web`.
    #[serde(rename = "Application_Type")]
    pub application_type: String,
    /// The Log Analytics workspace the component stores into.
    #[serde(
        rename = "WorkspaceResourceId",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub workspace_resource_id: Option<String>,
    /// `LogAnalytics` for a workspace-based component.
    #[serde(
        rename = "IngestionMode",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub ingestion_mode: Option<String>,
    /// Read-only.
    #[serde(rename = "provisioningState", default, skip_serializing)]
    pub provisioning_state: Option<String>,
}
