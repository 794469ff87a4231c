//! The one table of ARM api-versions dsinfra speaks, and how a request path picks its entry.
//!
//! Every version here is the version of the spec file in `shared/azure-specs` that the typed
//! bodies were checked against; bumping one means re-checking those bodies against the newer
//! spec. Keeping the table in one place (and deriving the version from the request path) means
//! no call site can drift to a version nobody validated.

/// api-version per provider namespace, or per `Namespace/type` where one namespace mixes spec
/// files of different versions (compute). The most specific entry wins.
pub const API_VERSIONS: &[(&str, &str)] = &[
    // Resource groups live at /subscriptions/{s}/resourceGroups/{rg}, outside any provider.
    ("Microsoft.Resources", "2025-04-01"),
    ("Microsoft.Network", "2024-07-01"),
    ("Microsoft.Compute/virtualMachines", "2024-11-01"),
    ("Microsoft.Compute/proximityPlacementGroups", "2024-11-01"),
    ("Microsoft.Compute/availabilitySets", "2024-11-01"),
    // Usages and operation status both live under .../Microsoft.Compute/locations/{loc}/.
    ("Microsoft.Compute/locations", "2024-11-01"),
    ("Microsoft.Compute/disks", "2025-01-02"),
    ("Microsoft.Compute/skus", "2021-07-01"),
    ("Microsoft.Storage", "2025-01-01"),
    ("Microsoft.DevTestLab", "2018-09-15"),
    // Issue 17: Azure Machine Learning and what a new workspace needs. Only the first has a
    // spec in shared/azure-specs; the others follow Azure's REST reference at these versions.
    ("Microsoft.MachineLearningServices", "2024-10-01"),
    ("Microsoft.KeyVault", "2023-07-01"),
    ("Microsoft.OperationalInsights", "2022-10-01"),
    ("Microsoft.Insights/components", "2020-02-02"),
    ("Microsoft.ContainerRegistry", "2023-07-01"),
    // Issue 18: the idle watcher's role definition and its assignment to the head VM.
    ("Microsoft.Authorization", "2022-04-01"),
    // Issue 29: the subscription's preview features (Trusted Launch by default, Standard).
    ("Microsoft.Features", "2021-07-01"),
    // Issue 33: AKS managed clusters and agent pools (aks/stable/2025-10-01).
    ("Microsoft.ContainerService", "2025-10-01"),
];

/// The Subscriptions API (`GET /subscriptions/{id}`, which names the tenant) is versioned on its
/// own, apart from resource groups.
pub const SUBSCRIPTIONS_API_VERSION: &str = "2022-12-01";

/// The api-version for an ARM path such as
/// `/subscriptions/{s}/resourceGroups/{rg}/providers/Microsoft.Network/virtualNetworks/v/subnets/x`.
///
/// The provider is the last `providers/{Namespace}/{type}` pair in the path (extension resources
/// such as schedules nest one provider under another). A path without a provider segment is a
/// subscription or resource-group path and uses `Microsoft.Resources`. Returns `None` for a
/// provider the table does not know, which the client reports as a usage error instead of
/// guessing a version.
pub fn api_version_for_path(path: &str) -> Option<&'static str> {
    let path = path.split('?').next().unwrap_or_default();
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    // A feature names its provider after Microsoft.Features' own (`.../providers/
    // Microsoft.Features/providers/Microsoft.Compute/features/{name}`); the API is Features'.
    if segments.windows(2).any(|w| {
        w[0].eq_ignore_ascii_case("providers") && w[1].eq_ignore_ascii_case("Microsoft.Features")
    }) {
        return API_VERSIONS
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case("Microsoft.Features"))
            .map(|(_, version)| *version);
    }
    let provider_at = segments
        .iter()
        .rposition(|s| s.eq_ignore_ascii_case("providers"));
    let (namespace, kind) = match provider_at {
        // `/subscriptions/{s}/providers/{namespace}` is the provider itself, which ARM's
        // Providers API (Microsoft.Resources) serves, not the namespace's own provider.
        Some(2) if segments.len() == 4 => ("Microsoft.Resources", ""),
        // `/subscriptions/{s}` itself.
        None if segments.len() == 2 => return Some(SUBSCRIPTIONS_API_VERSION),
        Some(i) => (
            segments.get(i + 1).copied()?,
            segments.get(i + 2).copied().unwrap_or_default(),
        ),
        None => ("Microsoft.Resources", ""),
    };
    let specific = format!("{namespace}/{kind}");
    API_VERSIONS
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case(&specific))
        .or_else(|| {
            API_VERSIONS
                .iter()
                .find(|(key, _)| key.eq_ignore_ascii_case(namespace))
        })
        .map(|(_, version)| *version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_resource_type_gets_its_spec_files_version() {
        let rg = "/subscriptions/s/resourceGroups/rg";
        let cases = [
            (rg.to_string(), "2025-04-01"),
            (
                format!("{rg}/providers/Microsoft.Network/virtualNetworks/v/subnets/a"),
                "2024-07-01",
            ),
            (
                format!("{rg}/providers/Microsoft.Compute/virtualMachines/vm/deallocate"),
                "2024-11-01",
            ),
            (
                format!("{rg}/providers/Microsoft.Compute/proximityPlacementGroups/p"),
                "2024-11-01",
            ),
            (
                format!("{rg}/providers/Microsoft.Compute/availabilitySets/a"),
                "2024-11-01",
            ),
            (
                format!("{rg}/providers/Microsoft.Compute/disks/d"),
                "2025-01-02",
            ),
            (
                "/subscriptions/s/providers/Microsoft.Compute/locations/eastus/usages".into(),
                "2024-11-01",
            ),
            (
                "/subscriptions/s/providers/Microsoft.Features/providers/Microsoft.Compute/features/UseStandardSecurityType".into(),
                "2021-07-01",
            ),
            (
                "/subscriptions/s/providers/Microsoft.Compute/locations/eastus/publishers/Canonical/artifacttypes/vmimage/offers/o/skus/s/versions".into(),
                "2024-11-01",
            ),
            (
                "/subscriptions/s/providers/Microsoft.Compute/skus".into(),
                "2021-07-01",
            ),
            (
                format!(
                    "{rg}/providers/Microsoft.Storage/storageAccounts/a/fileServices/default/shares/s"
                ),
                "2025-01-01",
            ),
            (
                format!("{rg}/providers/Microsoft.DevTestLab/schedules/shutdown-computevm-vm"),
                "2018-09-15",
            ),
        ];
        let ml = format!("{rg}/providers/Microsoft.MachineLearningServices/workspaces/w");
        let more = [
            (format!("{ml}/computes/c"), "2024-10-01"),
            (format!("{ml}/computes/c/listNodes"), "2024-10-01"),
            (
                "/subscriptions/s/providers/Microsoft.MachineLearningServices/locations/eastus/usages"
                    .into(),
                "2024-10-01",
            ),
            (format!("{rg}/providers/Microsoft.KeyVault/vaults/v"), "2023-07-01"),
            (
                format!("{rg}/providers/Microsoft.OperationalInsights/workspaces/l"),
                "2022-10-01",
            ),
            (format!("{rg}/providers/microsoft.insights/components/i"), "2020-02-02"),
            (
                format!("{rg}/providers/Microsoft.ContainerRegistry/registries/r"),
                "2023-07-01",
            ),
            ("/subscriptions/s".into(), SUBSCRIPTIONS_API_VERSION),
        ];
        for (path, version) in cases.into_iter().chain(more) {
            assert_eq!(api_version_for_path(&path), Some(version), "{path}");
        }
    }

    #[test]
    fn provider_names_match_case_insensitively_as_arm_does() {
        assert_eq!(
            api_version_for_path(
                "/subscriptions/s/resourcegroups/rg/PROVIDERS/microsoft.compute/DISKS/d"
            ),
            Some("2025-01-02")
        );
    }

    #[test]
    fn a_provider_itself_is_read_through_microsoft_resources() {
        assert_eq!(
            api_version_for_path("/subscriptions/s/providers/Microsoft.DevTestLab"),
            Some("2025-04-01")
        );
        assert_eq!(
            api_version_for_path("/subscriptions/s/providers/Microsoft.Sql"),
            Some("2025-04-01")
        );
    }

    #[test]
    fn unknown_providers_get_no_guessed_version() {
        assert_eq!(
            api_version_for_path("/subscriptions/s/providers/Microsoft.Sql/servers/x"),
            None
        );
    }
}
