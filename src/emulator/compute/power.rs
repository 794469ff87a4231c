//! VM power actions (start, deallocate, powerOff, restart) and the instance view that reports
//! their states.

use serde_json::{Value, json};

use super::disks::disk_ids;
use super::quota::{check_quota, vm_size};
use crate::emulator::error::ArmError;
use crate::emulator::http::{Ctx, Reply};
use crate::emulator::json::At as _;
use crate::emulator::ops;
use crate::emulator::resource::Target;
use crate::emulator::store::{Cloud, Kind, OpKind, Resource};

/// The power state an action ends in.
pub(crate) fn power_after(action: &str) -> &'static str {
    match action {
        "deallocate" => "deallocated",
        "powerOff" => "stopped",
        _ => "running",
    }
}

/// The transitional power state while an action runs.
fn power_during(action: &str) -> &'static str {
    match action {
        "deallocate" => "deallocating",
        "powerOff" => "stopping",
        _ => "starting",
    }
}

fn display_power(state: &str) -> String {
    format!("VM {state}")
}

fn statuses_for(vm: &Resource, now: &str) -> Vec<Value> {
    let state = vm.provisioning_state().unwrap_or("Succeeded");
    let provisioning = match state {
        "Succeeded" => {
            json!({"code": "ProvisioningState/succeeded", "level": "Info", "displayStatus": "Provisioning succeeded", "time": now})
        }
        "Failed" => {
            let (code, message) = vm
                .failure
                .as_ref()
                .map_or(("InternalError", String::new()), |f| {
                    (f.code.as_str(), f.message.clone())
                });
            json!({"code": format!("ProvisioningState/failed/{code}"), "level": "Error", "displayStatus": "Provisioning failed", "message": message, "time": now})
        }
        other => json!({
            "code": format!("ProvisioningState/{}", other.to_ascii_lowercase()),
            "level": "Info",
            "displayStatus": other,
        }),
    };
    let mut out = vec![provisioning];
    if let Some(power) = &vm.power {
        out.push(json!({"code": format!("PowerState/{power}"), "level": "Info", "displayStatus": display_power(power)}));
    }
    out
}

/// The VM's instance view read at `now`. Its provisioning statuses are dated when its last
/// operation finished ([`Resource::changed`]), as ARM's are, not at the read: `now` only for a
/// VM no finished operation made (one put in place by a test hook).
pub(super) fn instance_view(vm: &Resource, now: &str) -> Value {
    let changed = vm.changed.map(|t| t.to_rfc3339());
    let now = changed.as_deref().unwrap_or(now);
    let props = &vm.body["properties"];
    let computer = props
        .at("/osProfile/computerName")
        .and_then(Value::as_str)
        .unwrap_or(vm.name());
    let linux = props
        .at("/storageProfile/osDisk/osType")
        .and_then(Value::as_str)
        != Some("Windows");
    let disks: Vec<Value> = disk_ids(&props["storageProfile"])
        .iter()
        .map(|id| {
            json!({
                "name": id.rsplit('/').next().unwrap_or_default(),
                "statuses": [{"code": "ProvisioningState/succeeded", "level": "Info", "displayStatus": "Provisioning succeeded", "time": now}],
            })
        })
        .collect();
    json!({
        "computerName": computer,
        "osName": if linux { "ubuntu" } else { "Windows Server 2022 Datacenter" },
        "osVersion": if linux { "22.04" } else { "10.0.20348" },
        "vmAgent": {
            "vmAgentVersion": "2.13.1.1",
            "statuses": [{"code": "ProvisioningState/succeeded", "level": "Info", "displayStatus": "Ready", "message": "Guest Agent is running", "time": now}],
            "extensionHandlers": [],
        },
        "hyperVGeneration": "V2",
        "disks": disks,
        "statuses": statuses_for(vm, now),
    })
}

pub(crate) fn vm_action(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
    tail: &str,
) -> Result<Reply, ArmError> {
    let Some(vm) = cloud
        .resources
        .get(&target.key)
        .filter(|r| !r.hidden)
        .cloned()
    else {
        return Err(target.not_found());
    };
    if ctx.method == "GET" && tail.eq_ignore_ascii_case("instanceView") {
        return Ok(Reply::json(200, instance_view(&vm, &ctx.now.to_rfc3339())));
    }
    if ctx.method == "GET" && tail.eq_ignore_ascii_case("vmSizes") {
        return Ok(super::skus::vm_available_sizes(ctx, &vm));
    }
    let action = match tail.to_ascii_lowercase().as_str() {
        "start" => "start",
        "deallocate" => "deallocate",
        "poweroff" => "powerOff",
        "restart" => "restart",
        "simulateeviction" => "simulateEviction",
        _ => return Err(crate::emulator::resource::not_implemented(ctx)),
    };
    if ctx.method != "POST" {
        return Err(ArmError::method_not_allowed(&ctx.method));
    }
    if vm.op.is_some() {
        return Err(ArmError::new(
            409,
            "OperationNotAllowed",
            format!(
                "Operation '{action}' is not allowed on VM '{}' since the VM has another operation in \
                 progress.",
                vm.name()
            ),
        ));
    }
    if action == "simulateEviction" {
        // Not a long-running operation: 204, and the eviction follows its notice.
        super::spot::schedule(cloud, &target.key, ctx.now, ctx.config.eviction_notice_secs)?;
        return Ok(Reply::empty(204));
    }
    let power = vm.power.clone().unwrap_or_else(|| "running".into());
    if action == "restart" && power == "deallocated" {
        return Err(ArmError::new(
            409,
            "OperationNotAllowed",
            format!(
                "Operation 'restart' is not allowed on VM '{}' since the VM is deallocated.",
                vm.name()
            ),
        ));
    }
    // Starting a deallocated VM allocates its cores again, so quota applies.
    if action == "start"
        && power == "deallocated"
        && let Some(size) = vm_size(&vm)
    {
        super::spot::check_start(&vm)?;
        check_quota(
            cloud,
            ctx.config,
            (&target.path.sub, vm.location()),
            size,
            &target.key,
            super::spot::is_spot(&vm),
        )?;
    }
    let op = ops::start(
        cloud,
        ctx,
        OpKind::Action(action.to_owned()),
        &target.key,
        "Microsoft.Compute",
        vm.location(),
        ops::base_latency(
            Kind::VirtualMachine,
            &OpKind::Action(action.to_owned()),
            vm_size(&vm),
        ),
    );
    if let Some(stored) = cloud.operations.get_mut(&op.id) {
        stored.previous_power = Some(power);
    }
    if let Some(stored) = cloud.resources.get_mut(&target.key) {
        stored.op = Some(op.id.clone());
        stored.power = Some(power_during(action).to_owned());
    }
    Ok(Reply::empty(202).headers(ops::accepted_headers(ctx, &op)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_states_follow_actions() {
        assert_eq!(
            (power_during("deallocate"), power_after("deallocate")),
            ("deallocating", "deallocated")
        );
        assert_eq!(
            (power_during("powerOff"), power_after("powerOff")),
            ("stopping", "stopped")
        );
        assert_eq!(
            (power_during("start"), power_after("start")),
            ("starting", "running")
        );
    }
}
