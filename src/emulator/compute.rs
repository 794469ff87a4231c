//! Microsoft.Compute: VMs (quota, SKU restrictions, power states, instance view, disks via the
//! VM body), managed disks, proximity placement groups, and the usages and SKUs endpoints.

use serde_json::{Map, Value, json};

use super::config::{EmulatorConfig, normalize_location};
use super::error::ArmError;
use super::json::At as _;
use super::ops;
use super::providers::{Target, envelope, key, require_location, require_reference};
use super::server::{Ctx, Reply};
use super::store::{Cloud, Kind, OpKind, Resource};

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

fn vm_size(vm: &Resource) -> Option<&str> {
    vm.body
        .at("/properties/hardwareProfile/vmSize")
        .and_then(Value::as_str)
}

/// Whether a VM holds cores: everything except deallocated (and failed, never allocated) VMs.
fn holds_cores(vm: &Resource) -> bool {
    vm.power.as_deref() != Some("deallocated")
}

/// `(family usage, regional usage)` in vCPUs for a subscription and location, leaving out one VM.
fn usage(
    cloud: &Cloud,
    config: &EmulatorConfig,
    sub: &str,
    location: &str,
    family: &str,
    except: &str,
) -> (u32, u32) {
    let prefix = key(&format!("/subscriptions/{sub}/"));
    let mut family_usage = 0;
    let mut regional = 0;
    // Runs over every VM on every VM PUT: compared in place, nothing allocated per VM.
    for vm in cloud.of_kind(Kind::VirtualMachine) {
        let id = vm.id.trim_end_matches('/');
        let in_sub = id
            .get(..prefix.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(&prefix));
        if id.eq_ignore_ascii_case(except) || !in_sub || !holds_cores(vm) {
            continue;
        }
        let same_location = vm
            .location()
            .chars()
            .filter(|c| !c.is_whitespace())
            .flat_map(char::to_lowercase)
            .eq(location.chars());
        if !same_location {
            continue;
        }
        let Some(size) = vm_size(vm).and_then(|s| config.vm_size(s)) else {
            continue;
        };
        regional += size.vcpus;
        if size.family.eq_ignore_ascii_case(family) {
            family_usage += size.vcpus;
        }
    }
    (family_usage, regional)
}

/// ARM's OperationNotAllowed for a vCPU quota, in its exact words.
fn quota_error(quota: &str, location: &str, limit: u32, current: u32, required: u32) -> ArmError {
    ArmError::new(
        409,
        "OperationNotAllowed",
        format!(
            "Operation could not be completed as it results in exceeding approved {quota} quota. \
             Additional details - Deployment Model: Resource Manager, Location: {location}, Current \
             Limit: {limit}, Current Usage: {current}, Additional Required: {required}, (Minimum) New \
             Limit Required: {}.",
            current + required
        ),
    )
}

/// Checks that allocating `size` in `location` fits the family and regional quotas.
fn check_quota(
    cloud: &Cloud,
    config: &EmulatorConfig,
    sub: &str,
    location: &str,
    size: &str,
    vm_key: &str,
) -> Result<(), ArmError> {
    let Some(spec) = config.vm_size(size) else {
        return Ok(());
    };
    let location = normalize_location(location);
    let (family_usage, regional) = usage(cloud, config, sub, &location, &spec.family, vm_key);
    let family_limit = config.quotas.family_limit(&location, &spec.family);
    if family_usage + spec.vcpus > family_limit {
        return Err(quota_error(
            &format!("{} Cores", spec.family),
            &location,
            family_limit,
            family_usage,
            spec.vcpus,
        ));
    }
    let regional_limit = config.quotas.regional_limit;
    if regional + spec.vcpus > regional_limit {
        return Err(quota_error(
            "Total Regional Cores",
            &location,
            regional_limit,
            regional,
            spec.vcpus,
        ));
    }
    Ok(())
}

/// SkuNotAvailable when the size is restricted in the location (or in one of the VM's zones).
fn check_sku(
    config: &EmulatorConfig,
    size: &str,
    location: &str,
    zones: &[String],
) -> Result<(), ArmError> {
    let normalized = normalize_location(location);
    let restricted = config.sku_restrictions.iter().any(|r| {
        r.size.eq_ignore_ascii_case(size)
            && normalize_location(&r.location) == normalized
            && (r.zones.is_empty() || zones.iter().any(|z| r.zones.contains(z)))
    });
    if restricted {
        return Err(ArmError::new(
            409,
            "SkuNotAvailable",
            format!(
                "The requested VM size for resource 'Following SKUs have failed for Capacity \
                 Restrictions: {size}' is currently not available in location '{normalized}'. Please \
                 try another size or deploy to a different location or different zone. See \
                 https://aka.ms/azureskunotavailable for details."
            ),
        ));
    }
    Ok(())
}

fn short_hex() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

fn disk_body(
    id: &str,
    name: &str,
    location: &str,
    sku: &str,
    size_gb: i64,
    creation: &Value,
    now: &str,
) -> Value {
    json!({
        "id": id,
        "name": name,
        "type": Kind::Disk.type_name(),
        "location": location,
        "sku": {"name": sku, "tier": if sku.starts_with("Premium") { "Premium" } else { "Standard" }},
        "properties": {
            "creationData": creation,
            "diskSizeGB": size_gb,
            "diskSizeBytes": size_gb * 1024 * 1024 * 1024,
            "diskState": "Unattached",
            "provisioningState": "Updating",
            "timeCreated": now,
            "uniqueId": uuid::Uuid::new_v4().to_string(),
            "encryption": {"type": "EncryptionAtRestWithPlatformKey"},
            "networkAccessPolicy": "AllowAll",
            "publicNetworkAccess": "Enabled",
        }
    })
}

fn group_prefix_id(vm_id: &str) -> String {
    // `/subscriptions/s/resourceGroups/rg` of a resource id.
    vm_id.splitn(6, '/').take(5).collect::<Vec<_>>().join("/")
}

/// Where a VM's implicit disks are made.
struct DiskSite<'a> {
    vm_id: &'a str,
    vm_name: &'a str,
    location: &'a str,
    now: String,
}

impl DiskSite<'_> {
    /// Creates an implicit managed disk owned by the VM; returns its id and the resource.
    fn implicit_disk(
        &self,
        cloud: &mut Cloud,
        name: &str,
        sku: &str,
        size: i64,
        create: &str,
    ) -> (String, Resource) {
        let disk_id = format!(
            "{}/providers/Microsoft.Compute/disks/{name}",
            group_prefix_id(self.vm_id)
        );
        let creation = json!({ "createOption": create });
        let mut body = disk_body(
            &disk_id,
            name,
            self.location,
            sku,
            size,
            &creation,
            &self.now,
        );
        body["managedBy"] = json!(self.vm_id);
        let resource = cloud.new_resource(disk_id.clone(), Kind::Disk, body);
        (disk_id, resource)
    }
}

fn str_or<'a>(value: &'a Value, pointer: &str, default: &'a str) -> &'a str {
    value.at(pointer).and_then(Value::as_str).unwrap_or(default)
}

/// The OS disk: the one made before, else a new implicit managed disk.
fn os_disk(
    cloud: &mut Cloud,
    site: &DiskSite<'_>,
    request: &Value,
    linux: bool,
    previous: Option<&Value>,
) -> (Value, Option<Resource>) {
    let os_type = if linux { "Linux" } else { "Windows" };
    let requested = request
        .get("osDisk")
        .cloned()
        .unwrap_or_else(|| json!({"createOption": "FromImage"}));
    let made = previous.and_then(|p| p.get("osDisk")).cloned();
    let (mut os, disk) = if let Some(before) = made {
        (merge(before, &requested), None)
    } else {
        let mut os = requested;
        let name = os.get("name").and_then(Value::as_str).map_or_else(
            || format!("{}_OsDisk_1_{}", site.vm_name, short_hex()),
            str::to_owned,
        );
        let sku = str_or(&os, "/managedDisk/storageAccountType", "Premium_LRS").to_owned();
        let size_gb = os.get("diskSizeGB").and_then(Value::as_i64).unwrap_or(30);
        let (disk_id, mut disk) = site.implicit_disk(cloud, &name, &sku, size_gb, "FromImage");
        disk.body["properties"]["osType"] = json!(os_type);
        os["name"] = json!(name);
        os["managedDisk"] = json!({"storageAccountType": sku, "id": disk_id});
        os["diskSizeGB"] = json!(size_gb);
        if let Some(o) = os.as_object_mut() {
            o.entry("caching").or_insert(json!("ReadWrite"));
            o.entry("deleteOption").or_insert(json!("Detach"));
        }
        (os, Some(disk))
    };
    os["osType"] = json!(os_type);
    (os, disk)
}

/// Attaches an existing managed disk to the VM, unless another VM owns it.
fn attach_disk(
    cloud: &Cloud,
    vm_id: &str,
    disk_id: &str,
    out: &mut Value,
) -> Result<Resource, ArmError> {
    let existing = cloud
        .resources
        .get(&key(disk_id))
        .filter(|d| !d.hidden)
        .cloned()
        .ok_or_else(|| ArmError::new(404, "NotFound", format!("Disk {disk_id} was not found.")))?;
    if let Some(owner) = existing.body.get("managedBy").and_then(Value::as_str)
        && key(owner) != key(vm_id)
    {
        return Err(ArmError::new(
            409,
            "OperationNotAllowed",
            format!(
                "Disk '{}' cannot be attached as the disk is already owned by VM '{owner}'.",
                existing.name()
            ),
        ));
    }
    let mut attached = existing.clone();
    attached.body["managedBy"] = json!(vm_id);
    out["name"] = json!(existing.name());
    out["managedDisk"] = json!({
        "id": existing.id,
        "storageAccountType": str_or(&existing.body, "/sku/name", "Standard_LRS"),
    });
    out["diskSizeGB"] = existing
        .body
        .at("/properties/diskSizeGB")
        .cloned()
        .unwrap_or(json!(0));
    Ok(attached)
}

/// One data disk: attached, kept from before, or created empty.
fn data_disk(
    cloud: &mut Cloud,
    site: &DiskSite<'_>,
    index: usize,
    disk: &Value,
    previous: Option<&Value>,
) -> Result<(Value, Option<Resource>), ArmError> {
    let lun = disk
        .get("lun")
        .and_then(Value::as_i64)
        .unwrap_or(i64::try_from(index).unwrap_or_default());
    let create = str_or(disk, "/createOption", "Empty").to_owned();
    let given_id = disk.at("/managedDisk/id").and_then(Value::as_str);
    let same_lun_before = previous
        .and_then(|p| p.get("dataDisks"))
        .and_then(Value::as_array)
        .and_then(|d| {
            d.iter()
                .find(|x| x.get("lun").and_then(Value::as_i64) == Some(lun))
        });
    let mut out = disk.clone();
    let resource = if create.eq_ignore_ascii_case("Attach") || given_id.is_some() {
        let disk_id = given_id.ok_or_else(|| {
            ArmError::new(
                400,
                "InvalidParameter",
                "Required parameter 'managedDisk.id' is missing (null).",
            )
            .with_target("dataDisks")
        })?;
        Some(attach_disk(cloud, site.vm_id, disk_id, &mut out)?)
    } else if let Some(before) = same_lun_before {
        out = merge(before.clone(), &out);
        None
    } else {
        let name = disk.get("name").and_then(Value::as_str).map_or_else(
            || format!("{}_disk{lun}_{}", site.vm_name, short_hex()),
            str::to_owned,
        );
        let sku = str_or(disk, "/managedDisk/storageAccountType", "Premium_LRS").to_owned();
        let size_gb = disk.get("diskSizeGB").and_then(Value::as_i64).unwrap_or(32);
        let (disk_id, resource) = site.implicit_disk(cloud, &name, &sku, size_gb, "Empty");
        out["name"] = json!(name);
        out["managedDisk"] = json!({"storageAccountType": sku, "id": disk_id});
        out["diskSizeGB"] = json!(size_gb);
        Some(resource)
    };
    if let Some(o) = out.as_object_mut() {
        o.insert("lun".into(), json!(lun));
        o.entry("createOption").or_insert(json!(create));
        o.entry("caching").or_insert(json!("None"));
        o.entry("toBeDetached").or_insert(json!(false));
        o.entry("writeAcceleratorEnabled").or_insert(json!(false));
        o.entry("deleteOption").or_insert(json!("Detach"));
    }
    Ok((out, resource))
}

/// Resolves the VM's disks: creates implicit OS and empty data disks, attaches existing ones, and
/// returns the storage profile to store, plus the disk resources to upsert.
fn build_storage_profile(
    cloud: &mut Cloud,
    site: &DiskSite<'_>,
    request: &Value,
    os_profile: &Value,
    previous: Option<&Value>,
) -> Result<(Value, Vec<Resource>), ArmError> {
    let mut profile = request.clone();
    let linux = !is_windows(request, os_profile);
    let (os, os_resource) = os_disk(cloud, site, request, linux, previous);
    profile["osDisk"] = os;
    let mut disks: Vec<Resource> = os_resource.into_iter().collect();
    let mut data = Vec::new();
    let requested = request.get("dataDisks").and_then(Value::as_array);
    for (i, disk) in requested.into_iter().flatten().enumerate() {
        // `toBeDetached: true` is how ARM clients detach a data disk: it leaves the profile,
        // and the rule below releases it.
        if disk.get("toBeDetached").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        let (out, resource) = data_disk(cloud, site, i, disk, previous)?;
        disks.extend(resource);
        data.push(out);
    }
    profile["dataDisks"] = Value::Array(data);
    Ok((profile, disks))
}

/// Windows when the OS disk says so, the OS profile configures Windows, or the image is a
/// Windows one; Linux otherwise.
fn is_windows(storage_profile: &Value, os_profile: &Value) -> bool {
    let os_type = storage_profile.at("/osDisk/osType").and_then(Value::as_str);
    if let Some(os_type) = os_type {
        return os_type.eq_ignore_ascii_case("Windows");
    }
    os_profile.get("windowsConfiguration").is_some()
        || storage_profile
            .at("/imageReference/publisher")
            .and_then(Value::as_str)
            .is_some_and(|p| p.to_ascii_lowercase().contains("windows"))
}

/// Overlays `update` on `base`, object by object.
fn merge(mut base: Value, update: &Value) -> Value {
    match (base.as_object_mut(), update.as_object()) {
        (Some(base_map), Some(update_map)) => {
            for (k, v) in update_map {
                let merged = match base_map.remove(k) {
                    Some(old) if old.is_object() && v.is_object() => merge(old, v),
                    _ => v.clone(),
                };
                base_map.insert(k.clone(), merged);
            }
            base
        }
        _ => update.clone(),
    }
}

fn disk_ids(storage_profile: &Value) -> Vec<String> {
    let os = storage_profile
        .at("/osDisk/managedDisk/id")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let data = storage_profile
        .get("dataDisks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|d| {
            d.at("/managedDisk/id")
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
    os.into_iter().chain(data).collect()
}

/// The checks ARM makes before accepting a VM PUT: a known size, SKU restrictions, quota, and
/// references to NICs and a placement group that exist.
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
                "Operation 'PUT' is not allowed on VM '{}' since the VM is marked for deletion.",
                vm.name()
            ),
        ));
    }
    let location = require_location(body)?;
    if ctx.config.vm_size(size).is_none() {
        return Err(ArmError::new(
            400,
            "InvalidParameter",
            format!(
                "The value {size} provided for the VM size is not valid. The valid sizes in the \
                 current region are: {}.",
                ctx.config
                    .vm_sizes
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        )
        .with_target("vmSize"));
    }
    let zones: Vec<String> = body
        .get("zones")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect();
    check_sku(ctx.config, size, &location, &zones)?;
    let holds = existing.is_none_or(holds_cores);
    if holds {
        check_quota(
            cloud,
            ctx.config,
            &target.path.sub,
            &location,
            size,
            &target.key,
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
    if let Some(ppg) = props
        .at("/proximityPlacementGroup/id")
        .and_then(Value::as_str)
    {
        require_reference(cloud, ppg, id)?;
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
const CUSTOM_DATA_DIGEST: &str = "_emulatorCustomDataSha256";

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
    let props = body.get("properties").cloned().unwrap_or_else(|| json!({}));
    let previous_profile = existing
        .as_ref()
        .and_then(|vm| vm.body.at("/properties/storageProfile").cloned());
    let requested_profile = props
        .get("storageProfile")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let disk_site = DiskSite {
        vm_id: &id,
        vm_name: target.name(),
        location: &location,
        now: ctx.now.to_rfc3339(),
    };
    let (profile, disks) = build_storage_profile(
        cloud,
        &disk_site,
        &requested_profile,
        props.get("osProfile").unwrap_or(&Value::Null),
        previous_profile.as_ref(),
    )?;
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
    let stored_props = stored_vm_properties(ctx, existing.as_ref(), &props, profile);
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
    match &existing {
        Some(old) => {
            vm.seq = old.seq;
            vm.power.clone_from(&old.power);
        }
        None => vm.power = Some("starting".into()),
    }
    for mut disk in disks {
        let disk_key = key(&disk.id);
        if let Some(old) = cloud.resources.get(&disk_key) {
            disk.seq = old.seq;
            disk.op.clone_from(&old.op);
        } else {
            disk.op = Some(op.id.clone());
        }
        cloud.resources.insert(disk_key, disk);
    }
    cloud.resources.insert(target.key.clone(), vm.clone());
    Ok(
        Reply::json(if created { 201 } else { 200 }, render(cloud, ctx, &vm))
            .headers(ops::put_headers(ctx, &op)),
    )
}

fn detach(disk: &mut Resource) {
    if let Some(map) = disk.body.as_object_mut() {
        map.remove("managedBy");
    }
    disk.body["properties"]["diskState"] = json!("Unattached");
}

/// On VM deletion: disks with `deleteOption: Delete` go, the others are detached.
pub(crate) fn release_disks(cloud: &mut Cloud, vm_key: &str) {
    let Some(vm) = cloud.resources.get(vm_key).cloned() else {
        return;
    };
    let profile = vm
        .body
        .at("/properties/storageProfile")
        .cloned()
        .unwrap_or(Value::Null);
    let os = profile.get("osDisk").into_iter();
    let data = profile
        .get("dataDisks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    for disk in os.chain(data) {
        let Some(disk_id) = disk.at("/managedDisk/id").and_then(Value::as_str) else {
            continue;
        };
        let delete = disk
            .get("deleteOption")
            .and_then(Value::as_str)
            .is_some_and(|o| o.eq_ignore_ascii_case("Delete"));
        if delete {
            cloud.remove_tree(&key(disk_id));
        } else if let Some(stored) = cloud.resources.get_mut(&key(disk_id)) {
            detach(stored);
        }
    }
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

fn instance_view(vm: &Resource, now: &str) -> Value {
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

/// The GET representation of compute resources.
pub(crate) fn render(cloud: &Cloud, ctx: &Ctx<'_>, resource: &Resource) -> Value {
    let mut body = resource.body.clone();
    let now = ctx.now.to_rfc3339();
    match resource.kind {
        Kind::VirtualMachine => {
            if let Some(map) = body.as_object_mut() {
                map.remove(CUSTOM_DATA_DIGEST);
            }
            let expand = ctx
                .query("$expand")
                .is_some_and(|e| e.eq_ignore_ascii_case("instanceView"));
            if expand {
                body["properties"]["instanceView"] = instance_view(resource, &now);
            }
        }
        Kind::Disk => {
            let attached = body.get("managedBy").is_some();
            let state = resource.provisioning_state().unwrap_or("Succeeded");
            if state == "Succeeded" || attached {
                body["properties"]["diskState"] =
                    json!(if attached { "Attached" } else { "Unattached" });
            }
        }
        Kind::ProximityPlacementGroup => {
            let vms: Vec<Value> = ppg_members(cloud, &resource.id)
                .map(|vm| json!({"id": vm.id}))
                .collect();
            body["properties"]["virtualMachines"] = Value::Array(vms);
            if ctx
                .query("includeColocationStatus")
                .is_some_and(|v| v.eq_ignore_ascii_case("true"))
            {
                body["properties"]["colocationStatus"] = json!({
                    "code": "ColocationStatus/Aligned",
                    "level": "Info",
                    "displayStatus": "Aligned",
                    "message": "All resources in the proximity placement group are aligned.",
                });
            }
        }
        _ => {}
    }
    body
}

pub(crate) fn put_ppg(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
) -> Result<Reply, ArmError> {
    let body = ctx.body();
    let location = require_location(&body)?;
    let id = target.id_in(cloud);
    let existing = cloud.resources.get(&target.key).cloned();
    let mut props = body
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    props.remove("virtualMachines");
    props.remove("colocationStatus");
    props
        .entry("proximityPlacementGroupType")
        .or_insert(json!("Standard"));
    let mut stored_body = envelope(
        &id,
        target.name(),
        Kind::ProximityPlacementGroup,
        Some(&location),
        &body,
    );
    stored_body["properties"] = Value::Object(props);
    let mut ppg = cloud.new_resource(id, Kind::ProximityPlacementGroup, stored_body);
    if let Some(old) = &existing {
        ppg.seq = old.seq;
    }
    cloud.resources.insert(target.key.clone(), ppg.clone());
    Ok(Reply::json(
        if existing.is_some() { 200 } else { 201 },
        render(cloud, ctx, &ppg),
    ))
}

pub(crate) fn put_disk(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
) -> Result<Reply, ArmError> {
    let body = ctx.body();
    let location = require_location(&body)?;
    let id = target.id_in(cloud);
    let existing = cloud.resources.get(&target.key).cloned();
    let creation = body
        .at("/properties/creationData")
        .cloned()
        .ok_or_else(|| {
            ArmError::new(
                400,
                "InvalidParameter",
                "Required parameter 'creationData' is missing (null).",
            )
            .with_target("disk.creationData")
        })?;
    let sku = body
        .at("/sku/name")
        .and_then(Value::as_str)
        .unwrap_or("Standard_LRS")
        .to_owned();
    let size = body
        .at("/properties/diskSizeGB")
        .and_then(Value::as_i64)
        .unwrap_or(32);
    let mut stored_body = disk_body(
        &id,
        target.name(),
        &location,
        &sku,
        size,
        &creation,
        &ctx.now.to_rfc3339(),
    );
    // Other writable properties (osType, encryption, ...) are echoed as sent.
    if let Some(requested) = body.get("properties").and_then(Value::as_object) {
        for (name, value) in requested {
            let derived = matches!(
                name.as_str(),
                "provisioningState" | "diskState" | "timeCreated" | "uniqueId" | "diskSizeBytes"
            );
            if !derived {
                stored_body["properties"][name] = value.clone();
            }
        }
    }
    for field in ["tags", "zones"] {
        if let Some(value) = body.get(field) {
            stored_body[field] = value.clone();
        }
    }
    if let Some(old) = &existing {
        if let Some(owner) = old.body.get("managedBy") {
            stored_body["managedBy"] = owner.clone();
        }
        for field in ["uniqueId", "timeCreated", "osType"] {
            if let Some(value) = old.body["properties"].get(field) {
                stored_body["properties"][field] = value.clone();
            }
        }
    }
    let op = ops::start(
        cloud,
        ctx,
        OpKind::Put,
        &target.key,
        "Microsoft.Compute",
        &location,
        ops::base_latency(Kind::Disk, &OpKind::Put, None),
    );
    let mut disk = cloud.new_resource(id, Kind::Disk, stored_body);
    disk.op = Some(op.id.clone());
    if let Some(old) = &existing {
        disk.seq = old.seq;
    }
    cloud.resources.insert(target.key.clone(), disk.clone());
    // DiskRP answers a create with 202 and the body, an update with 200.
    let status = if existing.is_some() { 200 } else { 202 };
    let mut headers = ops::put_headers(ctx, &op);
    headers.extend(
        ops::accepted_headers(ctx, &op)
            .into_iter()
            .filter(|(n, _)| n == "Location"),
    );
    Ok(Reply::json(status, render(cloud, ctx, &disk)).headers(headers))
}

/// The VMs placed in the proximity placement group `ppg_id`.
fn ppg_members<'c>(cloud: &'c Cloud, ppg_id: &str) -> impl Iterator<Item = &'c Resource> {
    let own = key(ppg_id);
    cloud
        .of_kind(Kind::VirtualMachine)
        .into_iter()
        .filter(move |vm| {
            vm.body
                .at("/properties/proximityPlacementGroup/id")
                .and_then(Value::as_str)
                .is_some_and(|id| key(id) == own)
        })
}

/// The in-use rules of compute DELETEs.
pub(crate) fn check_delete(cloud: &Cloud, resource: &Resource) -> Result<(), ArmError> {
    match resource.kind {
        Kind::Disk => match resource.body.get("managedBy").and_then(Value::as_str) {
            Some(owner) => Err(ArmError::new(
                409,
                "OperationNotAllowed",
                format!("Disk {} is attached to VM {owner}.", resource.name()),
            )),
            None => Ok(()),
        },
        Kind::ProximityPlacementGroup => {
            let users: Vec<String> = ppg_members(cloud, &resource.id)
                .map(|vm| vm.id.clone())
                .collect();
            if users.is_empty() {
                Ok(())
            } else {
                Err(ArmError::new(
                    409,
                    "OperationNotAllowed",
                    format!(
                        "Proximity placement group {} cannot be deleted as it is in use by the \
                         following resources: {}.",
                        resource.id,
                        users.join(", ")
                    ),
                ))
            }
        }
        _ => Ok(()),
    }
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
    let action = match tail.to_ascii_lowercase().as_str() {
        "start" => "start",
        "deallocate" => "deallocate",
        "poweroff" => "powerOff",
        "restart" => "restart",
        _ => {
            return Err(ArmError::new(
                404,
                "NotFound",
                format!(
                    "The action '{tail}' is not supported by the emulator on virtual machines."
                ),
            ));
        }
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
        check_quota(
            cloud,
            ctx.config,
            &target.path.sub,
            vm.location(),
            size,
            &target.key,
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

fn family_label(family: &str) -> String {
    let trimmed = family
        .trim_start_matches("standard")
        .trim_start_matches("Standard");
    let trimmed = trimmed.trim_end_matches("Family");
    format!("Standard {trimmed} Family vCPUs")
}

/// `GET .../locations/{loc}/usages`: per-family and regional vCPU usage with their limits.
pub(crate) fn usages(cloud: &Cloud, ctx: &Ctx<'_>, sub: &str, location: &str) -> Reply {
    let location = normalize_location(location);
    let mut families: Vec<&str> = ctx
        .config
        .vm_sizes
        .iter()
        .map(|s| s.family.as_str())
        .collect();
    families.sort_unstable();
    families.dedup();
    let (_, regional) = usage(cloud, ctx.config, sub, &location, "", "");
    let prefix = key(&format!("/subscriptions/{sub}/"));
    let vm_count = cloud
        .of_kind(Kind::VirtualMachine)
        .into_iter()
        .filter(|vm| {
            key(&vm.id).starts_with(&prefix) && normalize_location(vm.location()) == location
        })
        .count();
    let mut value = vec![
        json!({"unit": "Count", "currentValue": regional, "limit": ctx.config.quotas.regional_limit,
               "name": {"value": "cores", "localizedValue": "Total Regional vCPUs"}}),
        json!({"unit": "Count", "currentValue": vm_count, "limit": 25000,
               "name": {"value": "virtualMachines", "localizedValue": "Virtual Machines"}}),
    ];
    for family in families {
        let (current, _) = usage(cloud, ctx.config, sub, &location, family, "");
        value.push(json!({
            "unit": "Count",
            "currentValue": current,
            "limit": ctx.config.quotas.family_limit(&location, family),
            "name": {"value": family, "localizedValue": family_label(family)},
        }));
    }
    Reply::json(200, json!({ "value": value }))
}

/// `GET /subscriptions/{s}/providers/Microsoft.Compute/skus`, with `$filter=location eq '...'`.
pub(crate) fn skus(ctx: &Ctx<'_>) -> Reply {
    let filter = ctx.query("$filter").and_then(|f| {
        let (_, rest) = f.split_once("eq")?;
        Some(normalize_location(rest.trim().trim_matches('\'')))
    });
    let mut value = Vec::new();
    for size in &ctx.config.vm_sizes {
        for location in &ctx.config.locations {
            let location = normalize_location(location);
            if filter.as_ref().is_some_and(|f| *f != location) {
                continue;
            }
            let restrictions: Vec<Value> = ctx
                .config
                .sku_restrictions
                .iter()
                .filter(|r| r.size.eq_ignore_ascii_case(&size.name) && normalize_location(&r.location) == location)
                .map(|r| {
                    if r.zones.is_empty() {
                        json!({"type": "Location", "values": [location], "restrictionInfo": {"locations": [location]}, "reasonCode": "NotAvailableForSubscription"})
                    } else {
                        json!({"type": "Zone", "values": [location], "restrictionInfo": {"locations": [location], "zones": r.zones}, "reasonCode": "NotAvailableForSubscription"})
                    }
                })
                .collect();
            value.push(json!({
                "resourceType": "virtualMachines",
                "name": size.name,
                "tier": "Standard",
                "size": size.name.trim_start_matches("Standard_"),
                "family": size.family,
                "locations": [location],
                "locationInfo": [{"location": location, "zones": ["1", "2", "3"], "zoneDetails": []}],
                "capabilities": [
                    {"name": "vCPUs", "value": size.vcpus.to_string()},
                    {"name": "vCPUsAvailable", "value": size.vcpus.to_string()},
                    {"name": "HyperVGenerations", "value": "V1,V2"},
                ],
                "restrictions": restrictions,
            }));
        }
    }
    Reply::json(200, json!({ "value": value }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_message_matches_arm() {
        let err = quota_error("standardNDSv2Family Cores", "eastus", 0, 0, 40);
        assert_eq!(err.status, 409);
        assert_eq!(err.code, "OperationNotAllowed");
        assert_eq!(
            err.message,
            "Operation could not be completed as it results in exceeding approved standardNDSv2Family \
             Cores quota. Additional details - Deployment Model: Resource Manager, Location: eastus, \
             Current Limit: 0, Current Usage: 0, Additional Required: 40, (Minimum) New Limit \
             Required: 40."
        );
    }

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

    #[test]
    fn merge_overlays_nested_objects() {
        let merged = merge(
            json!({"a": {"b": 1, "c": 2}, "d": 3}),
            &json!({"a": {"b": 9}}),
        );
        assert_eq!(merged, json!({"a": {"b": 9, "c": 2}, "d": 3}));
    }
}
