//! The representation a GET returns for each kind, from the handler that owns the kind: the one
//! place that maps a kind to its renderer, for the router, the generic resource list and PATCH.

use serde_json::Value;

use super::http::Ctx;
use super::store::{Cloud, Kind, Resource};
use super::{aks, compute, ml, network, storage};

/// The representation a GET returns, with values derived from other resources.
pub(crate) fn render(cloud: &Cloud, ctx: &Ctx<'_>, resource: &Resource) -> Value {
    match resource.kind {
        Kind::VirtualNetwork
        | Kind::Subnet
        | Kind::NetworkSecurityGroup
        | Kind::SecurityRule
        | Kind::PublicIpAddress
        | Kind::NetworkInterface => network::render(cloud, resource),
        Kind::VirtualMachine
        | Kind::Disk
        | Kind::ProximityPlacementGroup
        | Kind::AvailabilitySet => compute::render(cloud, ctx, resource),
        Kind::StorageAccount | Kind::BlobContainer | Kind::FileShare => {
            storage::render(cloud, resource)
        }
        Kind::Schedule | Kind::ResourceGroup => resource.body.clone(),
        Kind::KeyVault
        | Kind::LogAnalyticsWorkspace
        | Kind::AppInsights
        | Kind::ContainerRegistry
        | Kind::MlWorkspace
        | Kind::MlCompute => ml::render(resource, ctx.now),
        Kind::ManagedCluster | Kind::AgentPool => aks::render(cloud, resource),
    }
}
