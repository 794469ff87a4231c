//! Virtual machine PUTs: the checks ARM makes on the body, customData, and what is stored.

use serde_json::{Map, Value, json};

use super::avset::changed;
use super::capabilities::{check_accelerated_networking, check_premium_disks, default_disk_type};
use super::disks::{DiskSite, build_storage_profile, detach, disk_ids};
use super::quota::{check_quota, holds_cores, vm_size};
use super::skus::{Placement, check_sku, offered_size};
use super::{merge, render};
use crate::emulator::error::ArmError;
use crate::emulator::http::{Ctx, Reply};
use crate::emulator::json::{At as _, strings};
use crate::emulator::ops;
use crate::emulator::resource::{Target, envelope, key, require_location, require_reference};
use crate::emulator::store::{Cloud, Kind, OpKind, Resource};

/// The checks ARM makes before accepting a VM PUT: a known size offered in the location, neither
/// restricted nor retired, quota, references to NICs and a placement group that exist, and NICs
/// whose accelerated networking the size supports.
fn check_vm_request(
    cloud: &Cloud,
    ctx: &Ctx<'_>,
    target: &Target<'_>,
    body: &Value,
    id: &str,
    size: &str,
    existing: Option<&Resource>,
) -> Result<(), ArmError> {
    if let Some(vm) = existing
        && vm.op.is_some()
        && vm.provisioning_state() == Some("Deleting")
    {
        return Err(ArmError::new(
            409,
            "OperationNotAllowed",
            format!(
                "Operation '{}' is not allowed on VM '{}' since the VM is marked for deletion.",
                ctx.method,
                vm.name()
            ),
        ));
    }
    let location = require_location(body)?;
    let spec = offered_size(ctx.config, size, &location)?;
    let zones: Vec<String> = strings(body.get("zones")).map(str::to_owned).collect();
    // A retired size is refused when a VM is created with it or resized to it.
    let newly = existing
        .and_then(vm_size)
        .is_none_or(|current| !current.eq_ignore_ascii_case(size));
    let placement = Placement {
        vm_id: id,
        sub: &target.path.sub,
        location: &location,
        zones: &zones,
    };
    check_sku(ctx.config, spec, &placement, newly, ctx.now.date_naive())?;
    super::spot::check(body, existing, size, &location)?;
    let holds = existing.is_none_or(holds_cores);
    if holds {
        check_quota(
            cloud,
            ctx.config,
            (&target.path.sub, &location),
            size,
            &target.key,
            matches!(super::spot::priority(body), "Spot" | "Low")
                || existing.is_some_and(super::spot::is_spot),
        )?;
    }
    let props = body.get("properties").cloned().unwrap_or_else(|| json!({}));
    for nic in props
        .at("/networkProfile/networkInterfaces")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(nic_id) = nic.get("id").and_then(Value::as_str) {
            require_reference(cloud, nic_id, id)?;
        }
    }
    check_accelerated_networking(cloud, ctx.config, spec, &props, &location, id)?;
    super::security::check_security_type(
        &props,
        crate::emulator::features::registered(
            cloud,
            ctx.config,
            &target.path.sub,
            crate::emulator::config::USE_STANDARD_SECURITY_TYPE,
        ),
    )?;
    if existing.is_none() {
        super::security::check_size_and_image(ctx.config, &props, spec)?;
    }
    if let Some(ppg) = props
        .at("/proximityPlacementGroup/id")
        .and_then(Value::as_str)
    {
        require_reference(cloud, ppg, id)?;
    }
    super::avset::check_vm_set(cloud, body, id, existing)?;
    super::spot::check_set_members(cloud, body, &target.key)?;
    if let Some(vm) = existing {
        check_update(ctx, body, vm, size)?;
    }
    Ok(())
}

/// The rules of an update (a PUT of an existing VM, or a PATCH merged over it): what ARM lets
/// change only while the VM is deallocated, and what it never lets change.
fn check_update(ctx: &Ctx<'_>, body: &Value, vm: &Resource, size: &str) -> Result<(), ArmError> {
    let allocated = holds_cores(vm);
    // A running VM can only move to a size its hardware cluster offers; the emulator's cluster
    // is the size's quota family. Deallocated, any size is accepted (re-allocation picks a new
    // cluster), as on Azure.
    if allocated
        && let Some(current) = vm_size(vm)
        && !current.eq_ignore_ascii_case(size)
    {
        let family_of = |name: &str| ctx.config.vm_size(name).map(|s| s.family.clone());
        let family = family_of(current);
        if family.is_none() || family != family_of(size) {
            let available: Vec<&str> = ctx
                .config
                .vm_sizes
                .iter()
                .filter(|s| Some(&s.family) == family.as_ref())
                .map(|s| s.name.as_str())
                .collect();
            return Err(ArmError::new(
                409,
                "OperationNotAllowed",
                format!(
                    "Unable to resize the VM '{}' because the requested size {size} is not \
                     available in the current hardware cluster. The available sizes in this \
                     cluster are: {}. Read more on VM resizing strategy at \
                     https://aka.ms/azure-resizevm.",
                    vm.name(),
                    available.join(",")
                ),
            ));
        }
    }
    // Moving a VM into or out of a placement group needs it deallocated (the group pins where
    // it is allocated).
    let ppg_of = |v: &Value| {
        v.at("/properties/proximityPlacementGroup/id")
            .and_then(Value::as_str)
            .map(key)
    };
    if allocated
        && body.at("/properties/proximityPlacementGroup").is_some()
        && ppg_of(body) != ppg_of(&vm.body)
    {
        return Err(changed("proximityPlacementGroup.id"));
    }
    // The OS disk is the VM's own: its name is fixed at creation.
    let os_name = |v: &Value| {
        v.at("/properties/storageProfile/osDisk/name")
            .and_then(Value::as_str)
            .map(str::to_ascii_lowercase)
    };
    if let Some(asked) = os_name(body)
        && os_name(&vm.body).is_some_and(|before| before != asked)
    {
        return Err(changed("osDisk.name"));
    }
    Ok(())
}

/// The properties stored for a VM: the request over what was there, minus secrets, plus what
/// the compute provider adds.
fn stored_vm_properties(
    ctx: &Ctx<'_>,
    existing: Option<&Resource>,
    props: &Value,
    profile: Value,
) -> Map<String, Value> {
    let mut stored_props: Map<String, Value> = match existing {
        Some(vm) => merge(vm.body["properties"].clone(), props)
            .as_object()
            .cloned()
            .unwrap_or_default(),
        None => props.as_object().cloned().unwrap_or_default(),
    };
    // Secrets are accepted but never stored or echoed, as ARM never returns them.
    if let Some(os) = stored_props
        .get_mut("osProfile")
        .and_then(Value::as_object_mut)
    {
        os.remove("adminPassword");
        os.remove("customData");
        os.entry("secrets").or_insert(json!([]));
        os.entry("allowExtensionOperations").or_insert(json!(true));
        os.entry("requireGuestProvisionSignal")
            .or_insert(json!(true));
    }
    stored_props.remove("userData");
    stored_props.remove("instanceView");
    stored_props.insert("storageProfile".into(), profile);
    let created = existing.is_none();
    let vm_id = existing
        .and_then(|vm| vm.body.at("/properties/vmId").cloned())
        .unwrap_or_else(|| json!(uuid::Uuid::new_v4().to_string()));
    stored_props.insert("vmId".into(), vm_id);
    stored_props.insert(
        "provisioningState".into(),
        json!(if created { "Creating" } else { "Updating" }),
    );
    let time_created = existing
        .and_then(|vm| vm.body.at("/properties/timeCreated").cloned())
        .unwrap_or_else(|| json!(ctx.now.to_rfc3339()));
    stored_props.insert("timeCreated".into(), time_created);
    stored_props
}

/// Where a VM keeps the SHA-256 of the customData it was created with: never the value (a
/// secret), only what tells a later PUT whether it sends the same. Stripped from every answer.
pub(super) const CUSTOM_DATA_DIGEST: &str = "_emulatorCustomDataSha256";

/// ARM's check of `osProfile.customData`: base64 (at most 87380 characters) at creation, and
/// never changed afterwards (the same value again, or none, is accepted). Returns the digest the
/// VM keeps.
fn check_custom_data(body: &Value, existing: Option<&Resource>) -> Result<Option<Value>, ArmError> {
    use base64::Engine as _;
    use sha2::Digest as _;
    let before = existing.and_then(|vm| vm.body.get(CUSTOM_DATA_DIGEST).cloned());
    let Some(sent) = body
        .at("/properties/osProfile/customData")
        .and_then(Value::as_str)
    else {
        return Ok(before);
    };
    if sent.len() > 87_380
        || base64::engine::general_purpose::STANDARD
            .decode(sent)
            .is_err()
    {
        return Err(ArmError::new(
            400,
            "InvalidParameter",
            "Custom data in OSProfile must be in Base64 encoding and with a maximum length of \
             87380 characters.",
        )
        .with_target("customData"));
    }
    let digest = json!(hex::encode(sha2::Sha256::digest(sent.as_bytes())));
    match (existing, before) {
        (None, _) => Ok(Some(digest)),
        (Some(_), Some(before)) if before == digest => Ok(Some(before)),
        (Some(_), _) => Err(ArmError::new(
            409,
            "PropertyChangeNotAllowed",
            "Changing property 'customData' is not allowed.",
        )
        .with_target("customData")),
    }
}

/// The VM size asked for, or the current one on an update that leaves it out.
fn requested_size(body: &Value, existing: Option<&Resource>) -> Result<String, ArmError> {
    body.at("/properties/hardwareProfile/vmSize")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| existing.and_then(|vm| vm_size(vm).map(str::to_owned)))
        .ok_or_else(|| {
            ArmError::new(
                400,
                "InvalidParameter",
                "Required parameter 'hardwareProfile.vmSize' is missing (null).",
            )
            .with_target("hardwareProfile.vmSize")
        })
}

pub(crate) fn put_vm(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
) -> Result<Reply, ArmError> {
    let body = ctx.body();
    let location = require_location(&body)?;
    let id = target.id_in(cloud);
    let existing = cloud.resources.get(&target.key).cloned();
    let size = requested_size(&body, existing.as_ref())?;
    check_vm_request(cloud, ctx, target, &body, &id, &size, existing.as_ref())?;
    let custom_data_digest = check_custom_data(&body, existing.as_ref())?;
    let identity = super::identity::vm_identity(&body, existing.as_ref(), ctx.now)?;
    let props = body.get("properties").cloned().unwrap_or_else(|| json!({}));
    let previous_profile = existing
        .as_ref()
        .and_then(|vm| vm.body.at("/properties/storageProfile").cloned());
    let requested_profile = props
        .get("storageProfile")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let config = ctx.config;
    let spec = offered_size(config, &size, &location)?;
    let disk_site = DiskSite {
        vm_id: &id,
        vm_name: target.name(),
        location: &location,
        now: ctx.now.to_rfc3339(),
        default_type: default_disk_type(spec),
    };
    let (profile, disks) = build_storage_profile(
        cloud,
        &disk_site,
        &requested_profile,
        props.get("osProfile").unwrap_or(&Value::Null),
        previous_profile.as_ref(),
    )?;
    // Judged on the disks the VM ends up with: those it is created with, attaches now, or keeps
    // from before (a resize to a size without premium IO).
    check_premium_disks(cloud, spec, &profile)?;
    // Disks no longer in the profile are detached.
    if let Some(before) = &previous_profile {
        let now_ids: Vec<String> = disk_ids(&profile).iter().map(|d| key(d)).collect();
        for old in disk_ids(before) {
            if !now_ids.contains(&key(&old))
                && let Some(disk) = cloud.resources.get_mut(&key(&old))
            {
                detach(disk);
            }
        }
    }
    let created = existing.is_none();
    let mut stored_props = stored_vm_properties(ctx, existing.as_ref(), &props, profile);
    if created {
        let by_default = crate::emulator::features::registered(
            cloud,
            config,
            &target.path.sub,
            crate::emulator::config::TRUSTED_LAUNCH_BY_DEFAULT,
        );
        super::security::apply_default(config, &mut stored_props, by_default, spec);
    }
    let mut stored_body = envelope(
        &id,
        target.name(),
        Kind::VirtualMachine,
        Some(&location),
        &body,
    );
    stored_body["properties"] = Value::Object(stored_props);
    if let Some(digest) = custom_data_digest {
        stored_body[CUSTOM_DATA_DIGEST] = digest;
    }
    if let Some(map) = stored_body.as_object_mut() {
        map.remove("identity");
        if let Some((identity, created)) = identity {
            map.insert("identity".into(), identity);
            map.insert(super::identity::PRINCIPAL_CREATED.into(), created);
        }
    }
    let op = ops::start(
        cloud,
        ctx,
        OpKind::Put,
        &target.key,
        "Microsoft.Compute",
        &location,
        ops::base_latency(Kind::VirtualMachine, &OpKind::Put, Some(&size)),
    );
    let mut vm = cloud.new_resource(id, Kind::VirtualMachine, stored_body);
    vm.op = Some(op.id.clone());
    vm.power = match &existing {
        Some(old) => old.power.clone(),
        None => Some("starting".into()),
    };
    for mut disk in disks {
        let disk_key = key(&disk.id);
        disk.op = match cloud.resources.get(&disk_key) {
            Some(old) => old.op.clone(),
            None => Some(op.id.clone()),
        };
        cloud.put_resource(disk_key, disk);
    }
    cloud.put_resource(target.key.clone(), vm.clone());
    Ok(
        Reply::json(if created { 201 } else { 200 }, render(cloud, ctx, &vm))
            .headers(ops::put_headers(ctx, &op)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_data_must_be_base64_and_can_never_change() {
        let put = |data: Option<&str>| match data {
            Some(d) => json!({"properties": {"osProfile": {"customData": d}}}),
            None => json!({"properties": {"osProfile": {}}}),
        };
        let err = check_custom_data(&put(Some("not base64!")), None).expect_err("refused");
        assert_eq!((err.status, err.code.as_str()), (400, "InvalidParameter"));
        assert_eq!(
            err.message,
            "Custom data in OSProfile must be in Base64 encoding and with a maximum length of \
             87380 characters."
        );

        let digest = check_custom_data(&put(Some("I2Nsb3VkLWNvbmZpZwo=")), None)
            .expect("a create with base64 customData is accepted")
            .expect("and the VM keeps its digest");
        // Only the digest is kept, never the value.
        assert!(!digest.to_string().contains("I2Nsb3VkLWNvbmZpZwo="));
        let mut vm = Cloud::default().new_resource(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/v"
                .into(),
            Kind::VirtualMachine,
            json!({}),
        );
        vm.body[CUSTOM_DATA_DIGEST] = digest.clone();
        let same = check_custom_data(&put(Some("I2Nsb3VkLWNvbmZpZwo=")), Some(&vm));
        assert_eq!(
            same.expect("the same value is accepted"),
            Some(digest.clone())
        );
        let none = check_custom_data(&put(None), Some(&vm));
        assert_eq!(none.expect("leaving it out is accepted"), Some(digest));
        let err = check_custom_data(&put(Some("b3RoZXI=")), Some(&vm)).expect_err("refused");
        assert_eq!(
            (err.status, err.code.as_str(), err.message.as_str()),
            (
                409,
                "PropertyChangeNotAllowed",
                "Changing property 'customData' is not allowed."
            )
        );
    }
}
