//! Unit tests of the AML preflight's decisions: which usage is which counter, what a plan's
//! clusters need (created, grown, replaced), and the words for an existing workspace.

use std::collections::BTreeMap;

use chrono::Utc;
use serde_json::json;

use super::*;
use crate::model::AzureSettings;
use crate::plan::fixtures::resource;
use crate::plan::{Mode, PlanOptions};
use crate::state::ResourceStatus;

fn usage(value: &str, localized: &str, current: i64, limit: i64) -> Usage {
    serde_json::from_value(json!({
        "unit": "Count", "currentValue": current, "limit": limit,
        "name": {"value": value, "localizedValue": localized}
    }))
    .expect("a usage")
}

/// One AmlCompute of `count` nodes of Standard_NC4as_T4_v3 (4 vCPUs, "Standard NCASv3_T4
/// Family") in eastus.
fn desired(count: i64, priority: &str) -> Desired {
    let compute = resource(
        "aml_cluster.train.compute",
        super::super::KIND,
        "train",
        &[],
        &json!({"location": "eastus", "size": "Standard_NC4as_T4_v3", "count": count,
            "priority": priority, "existing_workspace": true, "workspace_name": "amlws",
            "workspace_resource_group": "ml-rg"}),
    );
    Desired {
        experiment: "exp".into(),
        azure: AzureSettings {
            subscription: None,
            location: "eastus".into(),
            resource_group: "exp-rg".into(),
            tags: BTreeMap::new(),
            endpoint: None,
        },
        resources: vec![compute],
        steps: Vec::new(),
        outputs: Vec::new(),
        manifest_hash: "h".into(),
        notes: Vec::new(),
        park_idle: std::collections::BTreeMap::new(),
        kube_objects: Vec::new(),
        catalog: crate::catalog::Catalog::shipped(),
    }
}

fn plan_of(desired: &Desired, state: &State) -> Plan {
    crate::plan::plan(
        desired,
        state,
        &PlanOptions {
            mode: Mode::Normal,
            targets: Vec::new(),
            now: Utc::now(),
            rerun_steps: BTreeSet::new(),
        },
    )
    .expect("the fixture plans")
}

/// AML's usages in eastus as the service documents them: the family and both regional totals
/// named by their labels.
fn documented(family: i64, dedicated: i64, low: i64) -> MlCapacity {
    let mut capacity = MlCapacity::default();
    capacity.usages.insert(
        "eastus".into(),
        vec![
            usage("Clusters", "Clusters", 0, 100),
            usage(
                "Total Cluster Dedicated Regional vCPUs",
                "Total Cluster Dedicated Regional vCPUs",
                0,
                dedicated,
            ),
            usage(
                "Total Cluster LowPriority Regional vCPUs",
                "Total Cluster LowPriority Regional vCPUs",
                0,
                low,
            ),
            usage(
                "Standard NCASv3_T4 Family Cluster Dedicated vCPUs",
                "Standard NCASv3_T4 Family Cluster Dedicated vCPUs",
                0,
                family,
            ),
        ],
    );
    capacity
}

#[test]
fn counters_match_the_documented_labels_and_the_short_names() {
    let family = Counter::Family("standardNDSv2Family".into());
    assert!(family.matches(&usage(
        "Standard NDSv2 Family Cluster Dedicated vCPUs",
        "",
        0,
        1
    )));
    assert!(family.matches(&usage("standardNDSv2Family", "x", 0, 1)));
    assert!(!family.matches(&usage("standardNDSFamily", "x", 0, 1)));
    assert!(Counter::Dedicated.matches(&usage("Cores", "x", 0, 1)));
    assert!(Counter::LowPriority.matches(&usage("LowPriorityCores", "x", 0, 1)));
    assert!(!Counter::Dedicated.matches(&usage("Clusters", "Clusters", 0, 1)));
}

#[test]
fn a_new_cluster_needs_its_nodes_of_the_family_and_the_regional_total() {
    let desired = desired(2, "Dedicated");
    let plan = plan_of(&desired, &State::new("exp"));
    assert!(check(&desired, &plan, &documented(8, 8, 0)).is_empty());
    let short = check(&desired, &plan, &documented(4, 100, 0));
    assert_eq!(short.len(), 1, "{short:?}");
    assert_eq!(
        short[0].summary,
        "not enough AmlCompute quota in eastus: aml_cluster.train needs 8 vCPUs of Standard NCASv3_T4 Family Cluster Dedicated vCPUs, 4 available"
    );
    let regional = check(&desired, &plan, &documented(100, 6, 0));
    assert_eq!(regional.len(), 1, "{regional:?}");
    assert!(
        regional[0]
            .summary
            .contains("8 vCPUs of Total Cluster Dedicated Regional vCPUs, 6 available"),
        "{regional:?}"
    );
}

#[test]
fn low_priority_nodes_count_against_the_low_priority_total_only() {
    let desired = desired(2, "LowPriority");
    let plan = plan_of(&desired, &State::new("exp"));
    assert!(check(&desired, &plan, &documented(0, 0, 8)).is_empty());
    let short = check(&desired, &plan, &documented(100, 100, 4));
    assert_eq!(short.len(), 1, "{short:?}");
    assert!(
        short[0]
            .summary
            .contains("8 vCPUs of Total Cluster LowPriority Regional vCPUs, 4 available"),
        "{short:?}"
    );
}

#[test]
fn growing_a_running_cluster_needs_only_the_new_nodes_and_a_parked_one_none() {
    let mut state = State::from_applied(&desired(2, "Dedicated"), "sub");
    let grown = desired(3, "Dedicated");
    let plan = plan_of(&grown, &state);
    // One more node: 4 vCPUs, which fit; two more would not.
    assert!(check(&grown, &plan, &documented(4, 100, 0)).is_empty());
    let more = desired(4, "Dedicated");
    assert_eq!(
        check(&more, &plan_of(&more, &state), &documented(4, 100, 0)).len(),
        1
    );
    let compute = state
        .resource_mut(&"aml_cluster.train.compute".parse().expect("valid"))
        .expect("applied");
    assert_eq!(compute.status, ResourceStatus::Created);
    compute.power_state = Some(PowerState::Deallocated);
    assert!(check(&more, &plan_of(&more, &state), &documented(0, 0, 0)).is_empty());
}

#[test]
fn unpark_needs_every_node_of_a_parked_cluster_again() {
    let desired = desired(2, "Dedicated");
    let state = State::from_applied(&desired, "sub");
    let clusters = vec!["aml_cluster.train.compute".parse().expect("valid")];
    assert_eq!(
        locations_of_clusters(&state, &clusters),
        BTreeSet::from(["eastus".to_owned()])
    );
    let short = check_start(&state, &clusters, &desired, &documented(4, 100, 0));
    assert_eq!(short.len(), 1);
    assert!(
        short[0]
            .help
            .iter()
            .any(|h| h.ends_with("scaling them back needs 8")),
        "{short:?}"
    );
}

#[test]
fn an_existing_workspace_missing_or_elsewhere_is_said_at_the_workspace_block() {
    let desired = desired(2, "Dedicated");
    let compute = &desired.resources[0];
    let missing = workspace_problem(compute, "sub", &Found::Missing).expect("a problem");
    assert_eq!(
        missing.summary,
        "workspace ml-rg/amlws does not exist in subscription sub"
    );
    assert!(
        missing
            .help
            .iter()
            .any(|h| h.contains("drop `existing = true` to let dsinfra create it")),
        "{missing:?}"
    );
    let elsewhere =
        workspace_problem(compute, "sub", &Found::In("West Europe".into())).expect("a problem");
    assert_eq!(
        elsewhere.summary,
        "workspace ml-rg/amlws is in westeurope, not in eastus where the manifest puts its clusters"
    );
    assert!(workspace_problem(compute, "sub", &Found::In("East US".into())).is_none());
}
