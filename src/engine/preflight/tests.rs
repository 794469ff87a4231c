//! Unit tests of the pure preflight decisions: quota per family and region, SKU restrictions,
//! and the size fallback.

use std::collections::BTreeMap;

use chrono::Utc;
use serde_json::{Value, json};

use super::*;
use crate::model::{AzureSettings, Desired, ResourceKind};
use crate::plan::fixtures::resource;
use crate::plan::{Mode, PlanOptions};

/// A cluster of `count` nodes of `size` (with `sizes` candidates when given) in eastus.
pub(super) fn cluster(count: u32, size: &str, sizes: Option<&[&str]>) -> Desired {
    let mut resources = vec![resource(
        "resource_group.main",
        ResourceKind::ResourceGroup,
        "exp-rg",
        &[],
        &json!({"location": "eastus"}),
    )];
    resources.push(resource(
        "cluster.train.ppg",
        ResourceKind::ProximityPlacementGroup,
        "exp-train-ppg",
        &["resource_group.main"],
        &json!({"location": "eastus", "vm_sizes": [size]}),
    ));
    for i in 0..count {
        let mut vm = json!({"location": "eastus", "size": size, "zone": null});
        if let Some(sizes) = sizes {
            vm["sizes"] = json!(sizes);
        }
        resources.push(resource(
            &format!("cluster.train[{i}].nic"),
            ResourceKind::NetworkInterface,
            &format!("exp-train-{i}-nic"),
            &["resource_group.main"],
            &json!({"location": "eastus", "accelerated_networking": false}),
        ));
        resources.push(resource(
            &format!("cluster.train[{i}].vm"),
            ResourceKind::VirtualMachine,
            &format!("exp-train-{i}"),
            &["resource_group.main"],
            &vm,
        ));
    }
    resources.sort_by(|a, b| a.address.cmp(&b.address));
    Desired {
        experiment: "exp".into(),
        azure: AzureSettings {
            subscription: None,
            location: "eastus".into(),
            resource_group: "exp-rg".into(),
            tags: BTreeMap::new(),
            endpoint: None,
        },
        resources,
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
            rerun_steps: std::collections::BTreeSet::new(),
        },
    )
    .expect("the fixture plans")
}

fn usage(counter: &str, localized: &str, current: i64, limit: i64) -> Usage {
    serde_json::from_value(json!({
        "unit": "Count", "currentValue": current, "limit": limit,
        "name": {"value": counter, "localizedValue": localized}
    }))
    .expect("a usage")
}

fn sku(name: &str, family: &str, restrictions: &Value) -> ResourceSku {
    serde_json::from_value(json!({
        "resourceType": "virtualMachines", "name": name, "family": family,
        "locations": ["eastus"],
        "locationInfo": [{"location": "eastus", "zones": ["1", "2", "3"]}],
        "restrictions": restrictions
    }))
    .expect("a SKU")
}

fn capacity(nd_limit: i64, restrictions: &Value) -> Capacity {
    Capacity {
        usages: BTreeMap::from([(
            "eastus".to_owned(),
            vec![
                usage("cores", "Total Regional vCPUs", 10, 5000),
                usage(
                    "standardNDSv2Family",
                    "Standard NDSv2 Family vCPUs",
                    0,
                    nd_limit,
                ),
                usage(
                    "standardNDASv4_A100Family",
                    "Standard NDASv4_A100 Family vCPUs",
                    0,
                    1000,
                ),
            ],
        )]),
        skus: BTreeMap::from([(
            "eastus".to_owned(),
            vec![
                sku("Standard_ND40rs_v2", "standardNDSv2Family", restrictions),
                sku(
                    "Standard_ND96asr_v4",
                    "standardNDASv4_A100Family",
                    &json!([]),
                ),
            ],
        )]),
    }
}

#[test]
fn a_family_short_of_quota_is_reported_with_the_numbers_and_where_to_ask() {
    let desired = cluster(4, "Standard_ND40rs_v2", None);
    let plan = plan_of(&desired, &State::new("exp"));
    let problems = check(&desired, &plan, &capacity(100, &json!([])));
    assert_eq!(problems.len(), 1, "{problems:#?}");
    let d = &problems[0];
    assert_eq!(
        d.summary,
        "not enough vCPU quota in eastus: cluster.train needs 160 vCPUs of standardNDSv2Family, 100 available"
    );
    assert_eq!(
        d.label.as_deref(),
        Some("4 x Standard_ND40rs_v2 (40 vCPUs each)")
    );
    assert_eq!(
        d.help,
        [
            "standardNDSv2Family in eastus: limit 100, in use 0, available 100; this plan adds 160",
            "request more in the Azure portal > Quotas > Compute (\"Standard NDSv2 Family vCPUs\", region eastus), or try another region or size (`sizes = [...]` on the block tries sizes in order)"
        ]
    );
    assert!(check(&desired, &plan, &capacity(160, &json!([]))).is_empty());
}

/// Issue 34: spot VMs count against the regional low-priority quota (`lowPriorityCores`), and
/// only against it: a family with no quota left does not stop them.
#[test]
fn spot_vms_count_against_the_low_priority_quota_only() {
    let mut desired = cluster(4, "Standard_ND40rs_v2", None);
    for r in &mut desired.resources {
        if r.kind == ResourceKind::VirtualMachine {
            r.attrs.insert("priority".into(), json!("Spot"));
        }
    }
    let plan = plan_of(&desired, &State::new("exp"));
    let mut capacity = capacity(0, &json!([]));
    let low = |limit| {
        usage(
            "lowPriorityCores",
            "Total Regional Low-priority vCPUs",
            0,
            limit,
        )
    };
    capacity
        .usages
        .get_mut("eastus")
        .expect("eastus")
        .push(low(100));
    let problems = check(&desired, &plan, &capacity);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert_eq!(
        problems[0].summary,
        "not enough vCPU quota in eastus: cluster.train needs 160 vCPUs of the regional low-priority total (spot VMs), 100 available"
    );
    assert!(
        problems[0].help[1].contains("\"Total Regional Spot vCPUs\""),
        "{:?}",
        problems[0].help
    );
    let usages = capacity.usages.get_mut("eastus").expect("eastus");
    usages.pop();
    usages.push(low(160));
    assert!(check(&desired, &plan, &capacity).is_empty());
}

#[test]
fn existing_vms_need_no_new_quota_and_replacements_free_their_old_cores() {
    let desired = cluster(2, "Standard_ND40rs_v2", None);
    let state = State::from_applied(&desired, "sub");
    assert!(
        check(
            &desired,
            &plan_of(&desired, &state),
            &capacity(0, &json!([]))
        )
        .is_empty()
    );
    // Growing by one node needs exactly one node's vCPUs.
    let bigger = cluster(3, "Standard_ND40rs_v2", None);
    let plan = plan_of(&bigger, &state);
    assert!(check(&bigger, &plan, &capacity(40, &json!([]))).is_empty());
    assert_eq!(check(&bigger, &plan, &capacity(39, &json!([]))).len(), 1);
}

#[test]
fn a_restricted_sku_and_an_unavailable_zone_are_reported_on_the_block() {
    let desired = cluster(1, "Standard_ND40rs_v2", None);
    let plan = plan_of(&desired, &State::new("exp"));
    let restricted = json!([{"type": "Location", "values": ["eastus"],
        "reasonCode": "NotAvailableForSubscription",
        "restrictionInfo": {"locations": ["eastus"]}}]);
    let problems = check(&desired, &plan, &capacity(1000, &restricted));
    assert_eq!(problems.len(), 1);
    assert_eq!(
        problems[0].summary,
        "Standard_ND40rs_v2 is not available to this subscription in eastus (SkuNotAvailable)"
    );
    assert_eq!(
        problems[0].label.as_deref(),
        Some("ARM would refuse cluster.train with SkuNotAvailable (NotAvailableForSubscription)")
    );

    let mut zonal = cluster(1, "Standard_ND40rs_v2", None);
    for r in &mut zonal.resources {
        if r.kind == ResourceKind::VirtualMachine {
            r.attrs.insert("zone".into(), json!("2"));
        }
    }
    let zone_restricted = json!([{"type": "Zone", "values": ["eastus"],
        "restrictionInfo": {"locations": ["eastus"], "zones": ["2"]}}]);
    let plan = plan_of(&zonal, &State::new("exp"));
    let problems = check(&zonal, &plan, &capacity(1000, &zone_restricted));
    assert_eq!(
        problems[0].summary,
        "Standard_ND40rs_v2 is not available in zone 2 of eastus (SkuNotAvailable)"
    );
    assert_eq!(
        problems[0].help[0],
        "use a zone where it is available (1, 3) or remove `zone`, or list other sizes in order with `sizes = [...]` on the block"
    );
}

#[test]
fn the_fallback_takes_the_first_size_that_fits_and_says_why() {
    let sizes = ["Standard_ND40rs_v2", "Standard_ND96asr_v4"];
    let mut desired = cluster(2, "Standard_ND40rs_v2", Some(&sizes));
    let notes = resolve_sizes(&mut desired, &State::new("exp"), &capacity(40, &json!([])));
    assert_eq!(
        notes,
        [
            "cluster.train: `sizes` resolved to Standard_ND96asr_v4: it passes the quota and SKU preflight, and the candidates before it do not: Standard_ND40rs_v2 (needs 80 standardNDSv2Family vCPUs in eastus, 40 available)"
        ]
    );
    let vm = desired
        .resource(&"cluster.train[1].vm".parse().expect("valid"))
        .expect("present");
    assert_eq!(vm.attrs["size"], json!("Standard_ND96asr_v4"));
    assert!(!vm.attrs.contains_key(SIZES_ATTR));
    let ppg = desired
        .resource(&"cluster.train.ppg".parse().expect("valid"))
        .expect("present");
    assert_eq!(ppg.attrs["vm_sizes"], json!(["Standard_ND96asr_v4"]));
    let nic = desired
        .resource(&"cluster.train[0].nic".parse().expect("valid"))
        .expect("present");
    assert_eq!(nic.attrs["accelerated_networking"], json!(true));
}

#[test]
fn the_fallback_keeps_what_exists_and_defaults_to_the_first_offline() {
    let sizes = ["Standard_ND40rs_v2", "Standard_ND96asr_v4"];
    let mut applied = cluster(2, "Standard_ND96asr_v4", None);
    set_block_size(
        &mut applied,
        &"cluster.train".parse().expect("valid"),
        "Standard_ND96asr_v4",
    );
    let state = State::from_applied(&applied, "sub");
    let mut desired = cluster(2, "Standard_ND40rs_v2", Some(&sizes));
    let notes = resolve_sizes(&mut desired, &state, &capacity(1000, &json!([])));
    assert_eq!(
        notes,
        [
            "cluster.train: keeps Standard_ND96asr_v4 from `sizes`, the size it was created with (a fallback never replaces existing VMs)"
        ]
    );
    assert!(!plan_of(&desired, &state).has_changes());

    let mut offline = cluster(1, "Standard_ND40rs_v2", Some(&sizes));
    let notes = resolve_sizes_offline(&mut offline, &State::new("exp"));
    assert_eq!(
        notes,
        [
            "cluster.train: `sizes` resolved to the first candidate, Standard_ND40rs_v2, without checking quota (no Azure connection); with --emulator, --endpoint or Azure credentials the plan picks the first size that passes the quota and SKU preflight"
        ]
    );
    let none_fit = {
        let mut d = cluster(1, "Standard_ND40rs_v2", Some(&sizes[..1]));
        resolve_sizes(&mut d, &State::new("exp"), &capacity(0, &json!([])))
    };
    assert_eq!(
        none_fit,
        [
            "cluster.train: no candidate of `sizes` passes the quota and SKU preflight (Standard_ND40rs_v2 (needs 40 standardNDSv2Family vCPUs in eastus, 0 available)); planned with the first, Standard_ND40rs_v2"
        ]
    );
}

#[test]
fn starting_parked_vms_needs_their_quota_again() {
    let desired = cluster(2, "Standard_ND40rs_v2", None);
    let mut state = State::from_applied(&desired, "sub");
    let vms: Vec<Address> = state
        .resources
        .iter()
        .filter(|r| r.kind == ResourceKind::VirtualMachine)
        .map(|r| r.address.clone())
        .collect();
    for r in &mut state.resources {
        if r.kind == ResourceKind::VirtualMachine {
            r.power_state = Some(crate::state::PowerState::Deallocated);
        }
    }
    assert_eq!(
        locations_of_vms(&state, &vms)
            .into_iter()
            .collect::<Vec<_>>(),
        ["eastus"]
    );
    assert!(check_start(&state, &vms, &desired, &capacity(80, &json!([]))).is_empty());
    let short = check_start(&state, &vms, &desired, &capacity(40, &json!([])));
    assert_eq!(
        short.iter().map(|d| d.summary.as_str()).collect::<Vec<_>>(),
        [
            "not enough vCPU quota in eastus: cluster.train needs 80 vCPUs of standardNDSv2Family, 40 available"
        ]
    );
}

/// A capacity whose only SKU is `size` in eastus with these capabilities.
pub(super) fn capacity_with(size: &str, capabilities: &Value) -> Capacity {
    let mut sku = json!({
        "resourceType": "virtualMachines", "name": size, "family": "fam",
        "locations": ["eastus"],
        "locationInfo": [{"location": "eastus", "zones": ["1", "2", "3"]}],
        "capabilities": capabilities, "restrictions": []
    });
    sku["family"] = json!(catalog::shipped_size(size).map_or("fam", |s| &*s.quota_family));
    Capacity {
        usages: BTreeMap::from([(
            "eastus".to_owned(),
            vec![usage("cores", "Total Regional vCPUs", 0, 5000)],
        )]),
        skus: BTreeMap::from([(
            "eastus".to_owned(),
            vec![serde_json::from_value(sku).expect("a SKU")],
        )]),
    }
}

/// `cluster` with each VM pointing at its NIC, as the manifest layer writes it.
fn cluster_with_nics(count: u32, size: &str) -> Desired {
    let mut desired = cluster(count, size, None);
    for r in &mut desired.resources {
        if r.kind == ResourceKind::VirtualMachine {
            let nic = r.address.to_string().replace(".vm", ".nic");
            r.attrs.insert("nic".into(), json!(nic));
        }
    }
    desired
}

#[test]
fn a_new_vms_nic_follows_the_live_skus_accelerated_networking() {
    // The shipped catalog says ND96asr_v4 has accelerated networking, so the manifest layer
    // asks for it; this subscription's live SKU says it has none.
    assert_eq!(
        catalog::shipped_size("Standard_ND96asr_v4").and_then(|s| s.accelerated_networking),
        Some(true)
    );
    let mut desired = cluster_with_nics(2, "Standard_ND96asr_v4");
    for r in &mut desired.resources {
        if r.kind == ResourceKind::NetworkInterface {
            r.attrs.insert("accelerated_networking".into(), json!(true));
        }
    }
    let live = capacity_with(
        "Standard_ND96asr_v4",
        &json!([{"name": "AcceleratedNetworkingEnabled", "value": "False"}]),
    );
    // The first node exists: its NIC stays as it is.
    let existing = vec!["cluster.train[0].vm".parse().expect("valid")];
    let notes = live::apply_networking(&mut desired, &existing, &live);
    let an = |d: &Desired, i: u32| {
        d.resource(&format!("cluster.train[{i}].nic").parse().expect("valid"))
            .expect("present")
            .attrs["accelerated_networking"]
            .clone()
    };
    assert_eq!(
        (an(&desired, 0), an(&desired, 1)),
        (json!(true), json!(false))
    );
    assert_eq!(
        notes,
        [
            "cluster.train[1].nic: accelerated networking off as the subscription's Resource SKUs state for Standard_ND96asr_v4 (the shipped catalog says otherwise)"
        ]
    );
    // A SKU that says nothing changes nothing.
    let mut again = cluster_with_nics(1, "Standard_ND96asr_v4");
    let silent = capacity_with("Standard_ND96asr_v4", &json!([]));
    assert!(live::apply_networking(&mut again, &[], &silent).is_empty());
}

#[test]
fn a_premium_disk_on_a_size_whose_live_sku_has_no_premium_io_is_refused() {
    let mut desired = cluster_with_nics(1, "Standard_ND96asr_v4");
    for r in &mut desired.resources {
        if r.kind == ResourceKind::VirtualMachine {
            r.attrs.insert("os_disk_sku".into(), json!("Premium_LRS"));
        }
    }
    let plan = plan_of(&desired, &State::new("exp"));
    let live = capacity_with(
        "Standard_ND96asr_v4",
        &json!([{"name": "PremiumIO", "value": "False"},
                {"name": "RetirementDateUtc", "value": "09/30/2031"}]),
    );
    let problems = check(&desired, &plan, &live);
    let summaries: Vec<&str> = problems.iter().map(|d| d.summary.as_str()).collect();
    assert!(
        summaries.contains(&"cluster.train cannot use a Premium_LRS OS disk: Standard_ND96asr_v4 has no premium storage in eastus"),
        "{summaries:?}"
    );
    assert!(
        summaries.contains(
            &"Standard_ND96asr_v4 retires on 2031-09-30, per the subscription's Resource SKUs"
        ),
        "{summaries:?}"
    );
    let premium_ok = capacity_with(
        "Standard_ND96asr_v4",
        &json!([{"name": "PremiumIO", "value": "True"}]),
    );
    assert!(
        check(&desired, &plan, &premium_ok)
            .iter()
            .all(|d| !d.is_error())
    );
}
