//! Operational views of a running experiment: `dsinfra status` (VMs, power states, IPs, uptime
//! and cost), `park`/`unpark` cost lines, `dsinfra output` and `dsinfra state list|show`.
//!
//! Tables are aligned columns of plain text; colour (power states) only when the caller says the
//! stream is a terminal, so piped output stays plain and greppable.

use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::money::{dollars, rate};
use super::paint::{bold, dim, green, paint, yellow};
use super::table::table;
use super::value::{inline, key};
use crate::engine::kinds::ml_compute::scale::describe_counts;
use crate::engine::op::{ClusterNodes, ClusterStatus, StatusOutcome};
use crate::engine::power::{HourlyCost, VmStatus};
use crate::state::{Drift, PowerState, ResourceState, ResourceStatus, State};

/// A power state as the status table and plans name it.
pub fn power_word(state: Option<PowerState>) -> &'static str {
    match state {
        Some(PowerState::Running) => "running",
        Some(PowerState::Deallocated) => "deallocated (parked)",
        Some(PowerState::Stopped) => "stopped (still billed)",
        None => "unknown",
    }
}

/// `1h 05m`, `3d 2h`, `42s`.
pub fn duration_words(seconds: i64) -> String {
    let s = seconds.max(0);
    let (d, h, m) = (s / 86_400, (s % 86_400) / 3600, (s % 3600) / 60);
    if d > 0 {
        format!("{d}d {h}h")
    } else if h > 0 {
        format!("{h}h {m:02}m")
    } else if m > 0 {
        format!("{m}m {:02}s", s % 60)
    } else {
        format!("{s}s")
    }
}

/// The `dsinfra status` view of what the status operation found.
pub fn status_view(found: &StatusOutcome, colour: bool) -> String {
    status_text(
        &found.state,
        &found.vms,
        &found.clusters,
        &found.cost,
        found.at,
        found.refreshed.is_some(),
        colour,
    )
}

/// An AmlCompute cluster's nodes in words: `4 nodes: 4 idle`, `parked (0 nodes)`,
/// `resizing 0 -> 4: 2 preparing`.
pub fn cluster_nodes_words(nodes: &ClusterNodes) -> String {
    let counts = describe_counts(&nodes.counts);
    if !nodes.steady {
        format!("resizing {} -> {}: {counts}", nodes.current, nodes.target)
    } else if nodes.current == 0 && nodes.target == 0 {
        "parked (0 nodes)".to_owned()
    } else if !nodes.has_states() {
        // A service that reports no per-node states (AKS through ARM): the count alone.
        let plural = if nodes.current == 1 { "" } else { "s" };
        format!("{} node{plural}", nodes.current)
    } else {
        format!("{} nodes: {counts}", nodes.current)
    }
}

/// A cluster's NODES cell: what Azure said, or else what the state last recorded.
fn cluster_nodes_cell(cluster: &ClusterStatus) -> String {
    match &cluster.nodes {
        Some(nodes) => cluster_nodes_words(nodes),
        None if cluster.parked => "parked (as last recorded)".to_owned(),
        None => format!("{} nodes (as last recorded)", cluster.count),
    }
}

/// The node pools' table (AmlCompute clusters, AKS node pools): nodes and $/hour.
fn clusters_table(clusters: &[ClusterStatus], colour: bool) -> String {
    let mut rows = vec![
        ["NODE POOL", "SIZE", "NODES", "$/HOUR"]
            .iter()
            .map(|h| paint(colour, &bold(), h))
            .collect::<Vec<_>>(),
    ];
    for cluster in clusters {
        rows.push(vec![
            cluster.address.to_string(),
            cluster.size.clone(),
            cluster_nodes_cell(cluster),
            rate(cluster.per_hour),
        ]);
    }
    table(&rows)
}

/// The `dsinfra status` view: the VM table, the AmlCompute clusters, the other resources, and
/// the cost lines. `live` says whether the power states were just read from Azure (otherwise
/// they are as last recorded).
pub fn status_text(
    state: &State,
    vms: &[VmStatus],
    clusters: &[ClusterStatus],
    cost: &HourlyCost,
    now: DateTime<Utc>,
    live: bool,
    colour: bool,
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}\n",
        paint(
            colour,
            &bold(),
            &format!("Experiment `{}`", state.experiment)
        )
    );
    if vms.is_empty() {
        out.push_str("No VMs in the state.\n\n");
    } else {
        let mut rows = vec![
            [
                "VM",
                "SIZE",
                "POWER",
                "PUBLIC IP",
                "PRIVATE IP",
                "UPTIME",
                "$/HOUR",
                "SINCE START",
            ]
            .iter()
            .map(|h| paint(colour, &bold(), h))
            .collect::<Vec<_>>(),
        ];
        for vm in vms {
            let style = match vm.power {
                Some(PowerState::Running) => green(),
                Some(PowerState::Deallocated) => dim(),
                _ => yellow(),
            };
            let running = vm.power == Some(PowerState::Running);
            rows.push(vec![
                vm.address.to_string(),
                vm.size.clone(),
                paint(colour, &style, power_word(vm.power)),
                vm.public_ip.clone().unwrap_or_else(|| "-".into()),
                vm.private_ip.clone().unwrap_or_else(|| "-".into()),
                match vm.since {
                    Some(t) if running => duration_words((now - t).num_seconds()),
                    _ => "-".into(),
                },
                rate(vm.per_hour),
                vm.since_start.map_or_else(|| "-".into(), rate),
            ]);
        }
        out.push_str(&table(&rows));
        out.push('\n');
    }
    if !clusters.is_empty() {
        out.push_str(&clusters_table(clusters, colour));
        out.push('\n');
    }
    let others = other_resources(state, clusters);
    if !others.is_empty() {
        let mut rows = vec![
            ["RESOURCE", "TYPE", "STATE"]
                .iter()
                .map(|h| paint(colour, &bold(), h))
                .collect::<Vec<_>>(),
        ];
        rows.extend(others);
        out.push_str(&table(&rows));
        out.push('\n');
    }
    out.push_str(&cost_lines(cost));
    if !live {
        out.push_str(
            "\nPower states are as last recorded; run with --emulator, --endpoint or Azure credentials to read them live.\n",
        );
    }
    out
}

/// Every resource but the VMs and the clusters' computes: address, ARM type and what dsinfra
/// knows of it.
fn other_resources(state: &State, clusters: &[ClusterStatus]) -> Vec<Vec<String>> {
    state
        .resources
        .iter()
        .filter(|r| r.kind != crate::model::ResourceKind::VirtualMachine)
        .filter(|r| !clusters.iter().any(|c| c.address == r.address))
        .map(|r| {
            let known = match (&r.drift, r.status) {
                (Some(Drift::Deleted), _) => "deleted outside dsinfra".to_owned(),
                (Some(Drift::Changed { attributes }), _) => {
                    format!("changed outside dsinfra: {}", attributes.join(", "))
                }
                (None, ResourceStatus::Creating) => "create interrupted".to_owned(),
                (None, ResourceStatus::Created) => "created".to_owned(),
            };
            vec![r.address.to_string(), r.kind.arm_type().to_owned(), known]
        })
        .collect()
}

/// After park/unpark's progress lines: each VM that could not be changed, with ARM's words and
/// the engine's advice, as apply's summary lists its failures.
pub fn power_failures(failures: &[crate::engine::advice::ResourceError]) -> String {
    let mut text = String::new();
    for failure in failures {
        let _ = writeln!(
            text,
            "{}: {} failed: {}",
            failure.address,
            failure.operation.progressive(),
            failure.message
        );
        for help in &failure.advice {
            let _ = writeln!(text, "  = help: {help}");
        }
    }
    text
}

/// The note after `status` when a refresh found drift.
pub fn drift_note(report: &crate::engine::refresh::RefreshReport) -> Option<String> {
    report.has_drift().then(|| {
        format!(
            "{} resource(s) were deleted and {} changed outside dsinfra: `dsinfra plan` shows what apply would do about it",
            report.deleted.len(),
            report.changed.len()
        )
    })
}

/// The cost per hour now and in both extremes.
pub fn cost_lines(cost: &HourlyCost) -> String {
    format!(
        "Cost per hour now: {} (all running: {}, all parked: {})\n",
        rate(cost.now),
        rate(cost.all_running),
        rate(cost.all_parked)
    )
}

/// `park`/`unpark`: the cost per hour before and after.
pub fn cost_change(before: &HourlyCost, after: &HourlyCost) -> String {
    format!(
        "Cost per hour: {} before, {} now ({} per 30 days at this rate)\n",
        rate(before.now),
        rate(after.now),
        dollars(after.now * crate::catalog::HOURS_PER_MONTH)
    )
}

/// One output value for `dsinfra output`, as the `output` operation returns it.
pub use crate::engine::op::output::OutputValue;

/// Every output as `name = value` lines; hidden ones as `(sensitive)`.
pub fn outputs_text(outputs: &[OutputValue]) -> String {
    let width = outputs.iter().map(|o| o.name.len()).max().unwrap_or(0);
    let mut out = String::new();
    for o in outputs {
        let shown = o
            .value
            .as_ref()
            .map_or_else(|| "(sensitive)".to_owned(), inline);
        let _ = writeln!(out, "{:width$} = {shown}", key(&o.name));
    }
    out
}

/// Outputs as JSON, shaped like `terraform output -json`: `{name: {sensitive, value}}`; a hidden
/// value is `null`.
///
/// # Panics
///
/// Never: a JSON object with string keys always serialises.
pub fn outputs_json(outputs: &[OutputValue]) -> String {
    let map: serde_json::Map<String, Value> = outputs
        .iter()
        .map(|o| {
            (
                o.name.clone(),
                serde_json::json!({"sensitive": o.sensitive, "value": o.value}),
            )
        })
        .collect();
    let mut text = serde_json::to_string_pretty(&Value::Object(map))
        .expect("a JSON object with string keys always serialises");
    text.push('\n');
    text
}

/// One output on its own: a string raw (for `$(dsinfra output exp.hcl ip)`), anything else as
/// JSON.
pub fn output_raw(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s}\n"),
        other => format!("{other}\n"),
    }
}

/// `dsinfra state list`: one address per line, in address order.
pub fn state_list(state: &State) -> String {
    let mut out = String::new();
    for r in &state.resources {
        let _ = writeln!(out, "{}", r.address);
    }
    out
}

/// `dsinfra state show ADDRESS`: what the state records about one resource.
pub fn state_show(resource: &ResourceState) -> String {
    let mut fields: Vec<(String, String)> = vec![
        (
            "type".into(),
            Value::from(resource.kind.arm_type()).to_string(),
        ),
        (
            "name".into(),
            Value::from(resource.name.clone()).to_string(),
        ),
    ];
    if let Some(parent) = &resource.parent {
        fields.push(("parent".into(), Value::from(parent.clone()).to_string()));
    }
    fields.push((
        "resource_group".into(),
        Value::from(resource.resource_group.clone()).to_string(),
    ));
    if let Some(id) = &resource.id {
        fields.push(("id".into(), Value::from(id.clone()).to_string()));
    }
    fields.push((
        "status".into(),
        match resource.status {
            ResourceStatus::Created => "created".into(),
            ResourceStatus::Creating => "creating (interrupted; adopted by the next apply)".into(),
        },
    ));
    if resource.power_state.is_some() {
        fields.push((
            "power_state".into(),
            power_word(resource.power_state).into(),
        ));
    }
    for (name, value) in &resource.attrs {
        fields.push((key(name), inline(value)));
    }
    for name in resource.secrets.keys() {
        fields.push((key(name), "(sensitive)".into()));
    }
    if !resource.depends_on.is_empty() {
        let deps: Vec<String> = resource
            .depends_on
            .iter()
            .map(ToString::to_string)
            .collect();
        fields.push(("depends_on".into(), format!("[{}]", deps.join(", "))));
    }
    let width = fields.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut out = format!("# {}\n", resource.address);
    for (k, v) in fields {
        let _ = writeln!(out, "{k:width$} = {v}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::power::VmStatus;

    #[test]
    fn durations_and_dollars_read_naturally() {
        assert_eq!(duration_words(42), "42s");
        assert_eq!(duration_words(3900), "1h 05m");
        assert_eq!(duration_words(90_061), "1d 1h");
        assert_eq!(duration_words(-5), "0s");
    }

    #[test]
    fn the_status_table_aligns_columns_and_says_when_states_are_not_live() {
        let now = DateTime::parse_from_rfc3339("2026-11-22T08:00:00Z")
            .expect("valid")
            .with_timezone(&Utc);
        let since = DateTime::parse_from_rfc3339("2026-11-22T06:30:00Z")
            .expect("valid")
            .with_timezone(&Utc);
        let vms = [
            VmStatus {
                address: "vm.gpu.vm".parse().expect("valid"),
                name: "exp-gpu".into(),
                size: "Standard_NC4as_T4_v3".into(),
                power: Some(PowerState::Running),
                public_ip: Some("20.100.0.4".into()),
                private_ip: Some("10.0.0.4".into()),
                since: Some(since),
                per_hour: 3.0,
                since_start: Some(4.5),
            },
            VmStatus {
                address: "cluster.t[0].vm".parse().expect("valid"),
                name: "exp-t-0".into(),
                size: "Standard_ND40rs_v2".into(),
                power: Some(PowerState::Deallocated),
                public_ip: None,
                private_ip: None,
                since: None,
                per_hour: 0.02,
                since_start: None,
            },
        ];
        let cost = HourlyCost {
            now: 3.02,
            all_running: 25.05,
            all_parked: 0.04,
        };
        let mut state = State::new("exp");
        state.upsert(ResourceState {
            address: "storage_account.data".parse().expect("valid"),
            kind: crate::model::ResourceKind::StorageAccount,
            name: "expdata".into(),
            parent: None,
            resource_group: "rg".into(),
            id: None,
            attrs: crate::model::Attrs::new(),
            depends_on: std::collections::BTreeSet::new(),
            status: ResourceStatus::Created,
            power_state: None,
            secrets: std::collections::BTreeMap::new(),
            host_key: None,
            boots: 0,
            steps: std::collections::BTreeMap::new(),
            mesh_key: None,
            nodes: std::collections::BTreeMap::new(),
            drift: Some(Drift::Deleted),
        });
        assert_eq!(
            status_text(&state, &vms, &[], &cost, now, false, false),
            "\
Experiment `exp`

VM               SIZE                  POWER                 PUBLIC IP   PRIVATE IP  UPTIME  $/HOUR   SINCE START
vm.gpu.vm        Standard_NC4as_T4_v3  running               20.100.0.4  10.0.0.4    1h 30m  $3.00    $4.50
cluster.t[0].vm  Standard_ND40rs_v2    deallocated (parked)  -           -           -       $0.0200  -

RESOURCE              TYPE                               STATE
storage_account.data  Microsoft.Storage/storageAccounts  deleted outside dsinfra

Cost per hour now: $3.02 (all running: $25.05, all parked: $0.0400)

Power states are as last recorded; run with --emulator, --endpoint or Azure credentials to read them live.
"
        );
    }

    fn nodes(current: i32, target: i32, steady: bool, idle: i32, preparing: i32) -> ClusterNodes {
        ClusterNodes {
            current,
            target,
            steady,
            counts: crate::azure::types::ml::NodeStateCounts {
                idle_node_count: idle,
                preparing_node_count: preparing,
                ..Default::default()
            },
        }
    }

    #[test]
    fn an_aml_clusters_nodes_read_as_words() {
        assert_eq!(
            cluster_nodes_words(&nodes(4, 4, true, 4, 0)),
            "4 nodes: 4 idle"
        );
        assert_eq!(
            cluster_nodes_words(&nodes(0, 0, true, 0, 0)),
            "parked (0 nodes)"
        );
        assert_eq!(
            cluster_nodes_words(&nodes(0, 4, false, 0, 2)),
            "resizing 0 -> 4: 2 preparing"
        );
        assert_eq!(
            cluster_nodes_words(&nodes(4, 0, false, 2, 0)),
            "resizing 4 -> 0: 2 idle"
        );
        // AKS through ARM says how many nodes, not which state each is in.
        assert_eq!(cluster_nodes_words(&nodes(1, 1, true, 0, 0)), "1 node");
        assert_eq!(cluster_nodes_words(&nodes(3, 3, true, 0, 0)), "3 nodes");
    }

    #[test]
    fn the_status_view_has_a_row_per_aml_cluster_with_its_nodes_and_cost() {
        let now = DateTime::parse_from_rfc3339("2026-11-22T08:00:00Z")
            .expect("valid")
            .with_timezone(&Utc);
        let cluster =
            |name: &str, parked: bool, nodes: Option<ClusterNodes>, per_hour| ClusterStatus {
                address: format!("aml_cluster.{name}.compute")
                    .parse()
                    .expect("valid"),
                size: "Standard_ND40rs_v2".into(),
                count: 4,
                parked,
                nodes,
                per_hour,
            };
        let clusters = [
            cluster("a", false, Some(nodes(4, 4, true, 4, 0)), 89.76),
            cluster("b", true, Some(nodes(0, 0, true, 0, 0)), 0.0),
            cluster("c", false, None, 89.76),
            cluster("d", true, None, 0.0),
        ];
        let cost = HourlyCost {
            now: 179.52,
            all_running: 359.04,
            all_parked: 0.0,
        };
        let text = status_text(&State::new("exp"), &[], &clusters, &cost, now, true, false);
        assert_eq!(
            text,
            "\
Experiment `exp`

No VMs in the state.

NODE POOL              SIZE                NODES                       $/HOUR
aml_cluster.a.compute  Standard_ND40rs_v2  4 nodes: 4 idle             $89.76
aml_cluster.b.compute  Standard_ND40rs_v2  parked (0 nodes)            $0.00
aml_cluster.c.compute  Standard_ND40rs_v2  4 nodes (as last recorded)  $89.76
aml_cluster.d.compute  Standard_ND40rs_v2  parked (as last recorded)   $0.00

Cost per hour now: $179.52 (all running: $359.04, all parked: $0.00)
"
        );
    }

    #[test]
    fn outputs_hide_sensitive_values() {
        let outputs = [
            OutputValue {
                name: "ip".into(),
                value: Some(Value::from("20.100.0.4")),
                sensitive: false,
            },
            OutputValue {
                name: "sas_url".into(),
                value: None,
                sensitive: true,
            },
        ];
        assert_eq!(
            outputs_text(&outputs),
            "ip      = \"20.100.0.4\"\nsas_url = (sensitive)\n"
        );
        assert_eq!(
            outputs_json(&outputs),
            "{\n  \"ip\": {\n    \"sensitive\": false,\n    \"value\": \"20.100.0.4\"\n  },\n  \"sas_url\": {\n    \"sensitive\": true,\n    \"value\": null\n  }\n}\n"
        );
    }
}
