//! Managed disks: standalone PUTs, and the OS and data disks a VM's storage profile creates,
//! attaches and releases.

use serde_json::{Value, json};

use super::{merge, render};
use crate::emulator::error::ArmError;
use crate::emulator::http::{Ctx, Reply};
use crate::emulator::json::At as _;
use crate::emulator::ops;
use crate::emulator::resource::{Target, key, require_location};
use crate::emulator::store::{Cloud, Kind, OpKind, Resource};

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
pub(super) struct DiskSite<'a> {
    pub(super) vm_id: &'a str,
    pub(super) vm_name: &'a str,
    pub(super) location: &'a str,
    pub(super) now: String,
    /// The type of a disk the request does not type (see `capabilities::default_disk_type`).
    pub(super) default_type: &'a str,
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
        let sku = str_or(&os, "/managedDisk/storageAccountType", site.default_type).to_owned();
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
        let sku = str_or(disk, "/managedDisk/storageAccountType", site.default_type).to_owned();
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
pub(super) fn build_storage_profile(
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
    // Two disks on one LUN: ARM refuses the whole request.
    let mut luns = std::collections::BTreeSet::new();
    let requested = request.get("dataDisks").and_then(Value::as_array);
    for (i, disk) in requested.into_iter().flatten().enumerate() {
        // `toBeDetached: true` is how ARM clients detach a data disk: it leaves the profile,
        // and the rule below releases it.
        if disk.get("toBeDetached").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        let (out, resource) = data_disk(cloud, site, i, disk, previous)?;
        let lun = out.get("lun").and_then(Value::as_i64).unwrap_or_default();
        if !luns.insert(lun) {
            return Err(ArmError::new(
                400,
                "InvalidParameter",
                format!("A disk at LUN {lun} already exists."),
            )
            .with_target("dataDisks"));
        }
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

pub(super) fn disk_ids(storage_profile: &Value) -> Vec<String> {
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

pub(super) fn detach(disk: &mut Resource) {
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

pub(crate) fn put_disk(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
) -> Result<Reply, ArmError> {
    let body = ctx.body();
    let location = require_location(&body)?;
    let id = target.id_in(cloud);
    let existing = cloud.resources.get(&target.key).cloned();
    // A PUT of an existing disk is an update: the same rules as a PATCH (which comes through
    // here with the update merged over the stored disk).
    if let Some(old) = existing.as_ref().filter(|d| !d.hidden) {
        check_disk_update(cloud, old, &body)?;
    }
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
    cloud.put_resource(target.key.clone(), disk.clone());
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

/// Azure's limit for growing a data disk while its VM runs: a disk of at most 4 TiB cannot grow
/// past it without the VM deallocated.
const ONLINE_GROW_LIMIT_GB: i64 = 4096;

/// Whether Azure converts a disk to or from this SKU in place: not Premium SSD v2 or Ultra Disk,
/// which need a new disk made from a snapshot ("Change the disk type of an Azure managed disk").
fn converts_in_place(sku: &str) -> bool {
    !matches!(sku, "PremiumV2_LRS" | "UltraSSD_LRS")
}

/// The rules of a disk update (a PATCH's `DiskUpdate`, or a PUT of an existing disk), checked
/// against the stored disk: the size only grows; the SKU changes only between types Azure
/// converts in place; while the disk is attached to an allocated VM, an OS disk keeps its size,
/// a data disk grows only within the online-expansion limit, and the SKU stays.
fn check_disk_update(cloud: &Cloud, disk: &Resource, update: &Value) -> Result<(), ArmError> {
    let current = disk
        .body
        .at("/properties/diskSizeGB")
        .and_then(Value::as_i64)
        .unwrap_or_default();
    let asked = update.at("/properties/diskSizeGB").and_then(Value::as_i64);
    if let Some(asked) = asked
        && asked < current
    {
        return Err(ArmError::new(
            400,
            "BadRequest",
            format!(
                "The disk/snapshot resource with id {} cannot be resized down from {current} GB to \
                 {asked} GB. Reducing disk/snapshot size is not supported in Azure to prevent data \
                 loss. If you do need to reduce the size of the disk, please create new \
                 snapshot/disks with the appropriate size. More information is available at \
                 https://aka.ms/AzureDisksFAQ",
                disk.id
            ),
        ));
    }
    let stored_sku = disk.body.at("/sku/name").and_then(Value::as_str);
    let asked_sku = update.at("/sku/name").and_then(Value::as_str);
    if let (Some(from), Some(to)) = (stored_sku, asked_sku)
        && from != to
        && !(converts_in_place(from) && converts_in_place(to))
    {
        // ARM's answer, as clients meet it (e.g. bosh-azure-cpi's handling of it).
        return Err(ArmError::new(
            400,
            "OperationNotAllowed",
            format!("Changing a disk's account type from '{from}' to '{to}' is not supported."),
        ));
    }
    let owner = disk
        .body
        .get("managedBy")
        .and_then(Value::as_str)
        .and_then(|vm| cloud.resources.get(&key(vm)));
    let Some(vm) = owner.filter(|vm| super::quota::holds_cores(vm)) else {
        return Ok(());
    };
    let grows = asked.is_some_and(|a| a > current);
    let is_os_disk = vm
        .body
        .at("/properties/storageProfile/osDisk/managedDisk/id")
        .and_then(Value::as_str)
        .is_some_and(|id| key(id) == key(&disk.id));
    let crosses_limit =
        asked.is_some_and(|a| current <= ONLINE_GROW_LIMIT_GB && a > ONLINE_GROW_LIMIT_GB);
    let sku_changes = update
        .at("/sku/name")
        .and_then(Value::as_str)
        .is_some_and(|s| Some(s) != disk.body.at("/sku/name").and_then(Value::as_str));
    if (grows && (is_os_disk || crosses_limit)) || sku_changes {
        let what = if sku_changes { "sku" } else { "size" };
        return Err(ArmError::new(
            409,
            "OperationNotAllowed",
            format!(
                "Changes to the disk {what} of '{}' can be made only when the disk is unattached \
                 or the managing virtual machine(s) are deallocated. The disk is attached to VM \
                 '{}'.",
                disk.name(),
                vm.id
            ),
        ));
    }
    Ok(())
}
