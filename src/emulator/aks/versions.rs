//! The Kubernetes versions AKS offers in a region (`GET .../locations/{location}/
//! kubernetesVersions`, `KubernetesVersionListResult` of the 2025-10-01 spec), and what a
//! `kubernetesVersion` or `orchestratorVersion` asks for: `<major.minor>` picks the newest patch
//! of that minor, `<major.minor.patch>` must be one listed (the spec's description of
//! `orchestratorVersion`); absent picks the default minor.
//!
//! The table is the emulator's, not Azure's: three minors with two patches each, the middle one
//! the default, as AKS keeps about three minors in support. Real regions answer their own list,
//! which dsinfra reads before it plans (the version check is never a table inside dsinfra).

use serde_json::{Value, json};

use crate::emulator::error::ArmError;
use crate::emulator::http::{Ctx, Reply};

/// `(minor, patches oldest first, default)`.
const VERSIONS: &[(&str, &[&str], bool)] = &[
    ("1.32", &["1.32.6", "1.32.7"], false),
    ("1.33", &["1.33.2", "1.33.3"], true),
    ("1.34", &["1.34.0", "1.34.1"], false),
];

/// The patch version a cluster or pool runs for what was asked, or AKS's refusal.
pub(crate) fn resolve(asked: Option<&str>, location: &str) -> Result<String, ArmError> {
    let asked = asked.map(str::trim).filter(|v| !v.is_empty());
    let Some(asked) = asked else {
        let (_, patches, _) = VERSIONS
            .iter()
            .find(|(_, _, default)| *default)
            .unwrap_or(&VERSIONS[0]);
        return Ok(newest(patches));
    };
    for (minor, patches, _) in VERSIONS {
        if asked == *minor {
            return Ok(newest(patches));
        }
        if patches.contains(&asked) {
            return Ok(asked.to_owned());
        }
    }
    Err(not_supported(asked, location))
}

fn newest(patches: &[&str]) -> String {
    patches.last().copied().unwrap_or_default().to_owned()
}

/// AKS's refusal of a version the region does not offer (`K8sVersionNotSupported`, as AKS's
/// public troubleshooting pages and issue reports show it; the wording is not checked against a
/// live region here).
pub(crate) fn not_supported(asked: &str, location: &str) -> ArmError {
    ArmError::new(
        400,
        "K8sVersionNotSupported",
        format!(
            "Version {asked} is not supported in this region ({location}). Please use [az aks \
             get-versions] command to get the supported version list in this region."
        ),
    )
}

/// The minor of a patch version (`1.33.3` -> `1.33`).
pub(crate) fn minor_of(version: &str) -> &str {
    match version.match_indices('.').nth(1) {
        Some((at, _)) => &version[..at],
        None => version,
    }
}

/// `GET .../providers/Microsoft.ContainerService/locations/{location}/kubernetesVersions`.
pub(crate) fn kubernetes_versions(ctx: &Ctx<'_>) -> Result<Reply, ArmError> {
    if ctx.method != "GET" {
        return Err(ArmError::method_not_allowed(&ctx.method));
    }
    let all: Vec<&str> = VERSIONS
        .iter()
        .flat_map(|(_, p, _)| p.iter().copied())
        .collect();
    let values: Vec<Value> = VERSIONS
        .iter()
        .map(|(minor, patches, default)| {
            let patch_versions: serde_json::Map<String, Value> = patches
                .iter()
                .map(|patch| {
                    let at = all.iter().position(|v| v == patch).unwrap_or_default();
                    let upgrades: Vec<&str> = all[at + 1..]
                        .iter()
                        .copied()
                        .filter(|v| {
                            // One minor at a time, as AKS upgrades.
                            minor_of(v) == *minor || is_next_minor(minor, minor_of(v))
                        })
                        .collect();
                    ((*patch).to_owned(), json!({"upgrades": upgrades}))
                })
                .collect();
            let mut value = json!({
                "version": minor,
                "capabilities": {"supportPlan": ["KubernetesOfficial"]},
                "patchVersions": patch_versions,
            });
            if *default {
                value["isDefault"] = json!(true);
            }
            value
        })
        .collect();
    Ok(Reply::json(200, json!({"values": values})))
}

fn is_next_minor(minor: &str, other: &str) -> bool {
    let number = |v: &str| v.split('.').nth(1).and_then(|m| m.parse::<u32>().ok());
    matches!((number(minor), number(other)), (Some(a), Some(b)) if b == a + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minor_picks_its_newest_patch_and_nothing_picks_the_default() {
        assert_eq!(resolve(Some("1.34"), "eastus").expect("offered"), "1.34.1");
        assert_eq!(
            resolve(Some("1.32.6"), "eastus").expect("offered"),
            "1.32.6"
        );
        assert_eq!(resolve(None, "eastus").expect("a default"), "1.33.3");
        let err = resolve(Some("1.20"), "eastus").expect_err("not offered");
        assert_eq!(err.code, "K8sVersionNotSupported");
        assert_eq!(minor_of("1.33.3"), "1.33");
    }
}
