//! The plan as JSON shaped like `terraform show -json`, so tools that read Terraform plans
//! (`jq '.resource_changes[] | select(.change.actions != ["no-op"])'`) work unchanged. dsinfra adds
//! `reasons` to each change and top-level `steps`, `kubernetes_objects` (`{cluster, id, source,
//! action}`, action one of `create`, `update`, `unchanged`, `prune`), `cost` and `notes`. Each step carries `runs`
//! (whether the next apply is predicted to run it on some node) and `reasons`, one
//! `{"node", "reason"}` per node with `reason` one of `new_node`, `new`, `changed`, `rebooted`,
//! `always`, `forced`, `up_to_date`.

use serde_json::{Value, json};

use crate::plan::{Mode, Plan};

/// The format version of Terraform's JSON plan representation this output follows.
const TERRAFORM_JSON_FORMAT: &str = "1.2";

/// The plan as a JSON value.
pub fn plan_json(plan: &Plan) -> Value {
    let resource_changes: Vec<Value> = plan
        .changes
        .iter()
        .map(|c| {
            let replace_paths: Vec<Value> = c.forced_by().iter().map(|a| json!([a])).collect();
            json!({
                "address": c.address.to_string(),
                "type": c.kind.arm_type(),
                "name": c.name,
                "change": {
                    "actions": c.action.terraform_actions(),
                    "before": c.before,
                    "after": c.after,
                    "replace_paths": replace_paths,
                    "reasons": c.reasons.iter().map(ToString::to_string).collect::<Vec<_>>(),
                },
            })
        })
        .collect();
    let steps: Vec<Value> = plan
        .steps
        .iter()
        .map(|s| {
            json!({
                "block": s.block.to_string(),
                "name": s.name,
                "kind": s.kind,
                "scope": s.scope,
                "run": s.run,
                "nodes": s.nodes.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "runs": s.runs(),
                "reasons": s
                    .reasons
                    .iter()
                    .map(|r| json!({"node": r.node.to_string(), "reason": r.reason}))
                    .collect::<Vec<_>>(),
            })
        })
        .collect();
    let mode = match plan.mode {
        Mode::Normal => "normal",
        Mode::Destroy { keep_data: false } => "destroy",
        Mode::Destroy { keep_data: true } => "destroy-keep-data",
    };
    json!({
        "format_version": TERRAFORM_JSON_FORMAT,
        "dsinfra_version": plan.binding.dsinfra_version,
        "experiment": plan.experiment,
        "mode": mode,
        "targets": plan.targets.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "resource_changes": resource_changes,
        "steps": steps,
        "kubernetes_objects": plan.kube,
        "cost": plan.cost,
        "notes": plan.notes,
    })
}

/// The plan as pretty JSON text with a final newline.
pub fn plan_json_string(plan: &Plan) -> String {
    let mut text =
        serde_json::to_string_pretty(&plan_json(plan)).unwrap_or_else(|_| "{}".to_owned());
    text.push('\n');
    text
}
