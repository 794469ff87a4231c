//! AmlCompute clusters (`workspaces/{ws}/computes/{name}`, 2024-10-01): the long-running PUT
//! and PATCH (`ClusterUpdateParameters`: scale settings only), the GET view with its allocation
//! state and node counts, `listNodes`, and AML's own refusals: an invalid name, a VM size the
//! service does not offer, and its per-family "cluster dedicated vCPU" quota.
//!
//! The cluster keeps `minNodeCount` nodes (dsinfra sends min = max): the emulator runs no jobs,
//! so nothing would ever make it grow toward `maxNodeCount` (docs/emulator.md, deviations).

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

use super::nodes::{self, Cluster, Node, NodeState};
use super::{HIDDEN, not_amlcompute};
use crate::emulator::config::{EmulatorConfig, VmSizeSpec, normalize_location};
use crate::emulator::error::ArmError;
use crate::emulator::http::{Ctx, Reply};
use crate::emulator::json::At as _;
use crate::emulator::network::next_public_address;
use crate::emulator::ops;
use crate::emulator::paging;
use crate::emulator::resource::{Target, key, require_reference};
use crate::emulator::store::{Cloud, Kind, OpKind, Resource};

/// AML's rule for cluster names: 2-16 letters, digits and `-`, starting with a letter and ending
/// with a letter or digit.
fn valid_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    (2..=16).contains(&bytes.len())
        && bytes[0].is_ascii_alphabetic()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
}

fn invalid_name() -> ArmError {
    ArmError::new(
        400,
        "BadRequest",
        "Compute name is invalid. It can include letters, digits and dashes. It must start with \
         a letter, end with a letter or digit, and be between 2 and 16 characters in length.",
    )
}

fn unsupported_size(size: &str) -> ArmError {
    ArmError::new(
        400,
        "InvalidPropertyValue",
        format!(
            "The specified value {size} for property Cluster.Properties.VMSize is not a supported \
             VM size. See additional details for supported VM sizes."
        ),
    )
    .with_target("properties.properties.vmSize")
}

fn bad_request(message: impl Into<String>) -> ArmError {
    ArmError::new(400, "BadRequest", message)
}

/// The scale settings of a request, checked: `(min, max, idle time)`.
fn scale_settings(settings: &Value) -> Result<(u64, u64, String), ArmError> {
    let count = |name: &str| settings.get(name).and_then(Value::as_u64);
    let max = count("maxNodeCount").ok_or_else(|| {
        ArmError::invalid_request(
            "The request content was invalid and could not be deserialized: 'Required property \
             'maxNodeCount' not found in JSON. Path 'properties.properties.scaleSettings'.'",
        )
    })?;
    let min = count("minNodeCount").unwrap_or(0);
    if min > max {
        return Err(bad_request(format!(
            "minNodeCount ({min}) must not be greater than maxNodeCount ({max})."
        )));
    }
    let idle = settings
        .get("nodeIdleTimeBeforeScaleDown")
        .and_then(Value::as_str)
        .unwrap_or("PT120S")
        .to_owned();
    Ok((min, max, idle))
}

/// The family label AML's quota messages use: `standardNDSv2Family` -> `Standard NDSv2 family`.
fn family_label(family: &str) -> String {
    let trimmed = family
        .trim_start_matches("standard")
        .trim_start_matches("Standard")
        .trim();
    format!(
        "Standard {} family",
        trimmed.trim_end_matches("Family").trim()
    )
}

fn is_low_priority(body: &Value) -> bool {
    body.at("/properties/properties/vmPriority")
        .and_then(Value::as_str)
        .is_some_and(|p| p.eq_ignore_ascii_case("LowPriority"))
}

/// The nodes a cluster holds quota for: its target.
fn target_of(body: &Value) -> u64 {
    body.at("/properties/properties/scaleSettings/minNodeCount")
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// AML's own vCPU quota, per VM family and location, shared by every cluster of the
/// subscription: dedicated nodes count against the family's limit (the emulator's
/// [`QuotaConfig`](crate::emulator::QuotaConfig) limits) and the regional dedicated total,
/// low-priority nodes against one low-priority limit per location; both totals are the regional
/// limit. VMs do not count: AML's quota is its own.
fn check_quota(
    cloud: &Cloud,
    config: &EmulatorConfig,
    target: &Target<'_>,
    location: &str,
    size: &VmSizeSpec,
    low_priority: bool,
    nodes: u64,
) -> Result<(), ArmError> {
    let location = normalize_location(location);
    let at = (target.path.sub.as_str(), location.as_str());
    let used =
        |family: Option<&str>| cluster_vcpus(cloud, config, at, low_priority, family, &target.key);
    // (limit, vCPUs held by the other clusters, the counter as AML's message names it)
    let counters = if low_priority {
        vec![(
            config.quotas.regional_limit,
            used(None),
            "low-priority".to_owned(),
        )]
    } else {
        vec![
            (
                config.quotas.family_limit(&location, &size.family),
                used(Some(size.family.as_str())),
                family_label(&size.family),
            ),
            (
                config.quotas.regional_limit,
                used(None),
                "total regional dedicated".to_owned(),
            ),
        ]
    };
    let vcpus = u64::from(size.vcpus);
    for (limit, used, what) in counters {
        let room = u64::from(limit).saturating_sub(used) / vcpus.max(1);
        if nodes <= room {
            continue;
        }
        let short = nodes - room;
        return Err(bad_request(format!(
            "The specified subscription has a {what} vCPU quota of {limit} and cannot accomodate for \
             at least {short} requested managed compute nodes which maps to {} vCPUs. Talk to your \
             Subscription Admin or refer to \
             https://docs.microsoft.com/azure/machine-learning/how-to-manage-quotas#request-quota-increases \
             to increase the family quota",
            short * vcpus
        )));
    }
    Ok(())
}

/// The vCPUs AML clusters of the subscription hold in `location` (their target nodes), of one
/// priority and, when given, one family; the cluster at `except` left out.
fn cluster_vcpus(
    cloud: &Cloud,
    config: &EmulatorConfig,
    (sub, location): (&str, &str),
    low_priority: bool,
    family: Option<&str>,
    except: &str,
) -> u64 {
    let prefix = key(&format!("/subscriptions/{sub}/"));
    cloud
        .of_kind(Kind::MlCompute)
        .into_iter()
        .filter(|c| key(&c.id) != except && key(&c.id).starts_with(&prefix))
        .filter(|c| normalize_location(c.location()) == location)
        .filter(|c| is_low_priority(&c.body) == low_priority)
        .filter_map(|c| {
            let spec = c
                .body
                .at("/properties/properties/vmSize")
                .and_then(Value::as_str)
                .and_then(|s| config.vm_size(s))?;
            family
                .is_none_or(|f| spec.family.eq_ignore_ascii_case(f))
                .then(|| target_of(&c.body) * u64::from(spec.vcpus))
        })
        .sum()
}

/// `GET .../Microsoft.MachineLearningServices/locations/{loc}/usages`: AML's own vCPU usage
/// and limits, per family of the sizes offered in the location (dedicated), and the regional
/// dedicated and low-priority totals.
pub(crate) fn usages(
    cloud: &Cloud,
    ctx: &Ctx<'_>,
    sub: &str,
    location: &str,
) -> Result<Reply, ArmError> {
    let location = normalize_location(location);
    let families = ctx.config.families_offered_in(&location);
    let base = format!(
        "/subscriptions/{sub}/providers/Microsoft.MachineLearningServices/locations/{location}/usages"
    );
    let usage = |kind: &str, name: &str, label: String, current: u64, limit: u32| {
        json!({
            "id": format!("{base}/{name}"),
            "amlWorkspaceLocation": location,
            "type": format!("Microsoft.MachineLearningServices/{kind}/usages"),
            "unit": "Count",
            "currentValue": current,
            "limit": limit,
            "name": {"value": name, "localizedValue": label},
        })
    };
    let at = (sub, location.as_str());
    let mut items = vec![
        usage(
            "totalCores",
            "Cores",
            "Total Cluster Dedicated Regional vCPUs".into(),
            cluster_vcpus(cloud, ctx.config, at, false, None, ""),
            ctx.config.quotas.regional_limit,
        ),
        usage(
            "totalLowPriorityCores",
            "LowPriorityCores",
            "Total Cluster LowPriority Regional vCPUs".into(),
            cluster_vcpus(cloud, ctx.config, at, true, None, ""),
            ctx.config.quotas.regional_limit,
        ),
    ];
    for family in families {
        items.push(usage(
            "vmFamily",
            family,
            format!("{} Cluster Dedicated vCPUs", family_label(family)),
            cluster_vcpus(cloud, ctx.config, at, false, Some(family), ""),
            ctx.config.quotas.family_limit(&location, family),
        ));
    }
    paging::page(ctx, items)
}

/// `GET .../Microsoft.MachineLearningServices/locations/{loc}/vmSizes`: the sizes AmlCompute
/// offers in the location, with what the emulator knows of them (one answer, no paging: the
/// spec's list has no nextLink).
pub(crate) fn vm_sizes(ctx: &Ctx<'_>, location: &str) -> Reply {
    let location = normalize_location(location);
    let value: Vec<Value> = ctx
        .config
        .vm_sizes
        .iter()
        .filter(|s| s.offered_in(&location))
        .map(|s| {
            let mut size = json!({
                "name": s.name,
                "family": s.family,
                "vCPUs": s.vcpus,
                "lowPriorityCapable": true,
                "supportedComputeTypes": ["AmlCompute", "ComputeInstance"],
            });
            if let Some(gpus) = s.gpus {
                // The spec counts whole GPUs; a fraction of one is none.
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                let whole = gpus.floor().max(0.0) as u32;
                size["gpus"] = json!(whole);
            }
            if let Some(memory) = s.memory_mb {
                size["memoryGB"] = json!(f64::from(memory) / 1024.0);
            }
            if let Some(disk) = s.resource_disk_mb {
                size["maxResourceVolumeMB"] = json!(disk);
            }
            if let Some(premium) = s.premium_io {
                size["premiumIO"] = json!(premium);
            }
            size
        })
        .collect();
    Reply::json(200, json!({ "value": value }))
}

fn timestamp(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// `PUT` of a compute: a new AmlCompute cluster (201, long-running), or an update of an
/// existing one's scale settings and description (200, long-running).
pub(crate) fn put_compute(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
) -> Result<Reply, ArmError> {
    let body = ctx.body();
    let compute_type = body
        .at("/properties/computeType")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            ArmError::invalid_request(
                "The request content was invalid and could not be deserialized: 'Required \
                 property 'computeType' not found in JSON. Path 'properties'.'",
            )
        })?;
    if !compute_type.eq_ignore_ascii_case("AmlCompute") {
        return Err(not_amlcompute(ctx, compute_type));
    }
    if !valid_name(target.name()) {
        return Err(invalid_name());
    }
    if let Some(existing) = cloud.resources.get(&target.key).cloned() {
        return update_by_put(cloud, ctx, target, existing, &body);
    }
    create(cloud, ctx, target, &body)
}

/// A PUT of an existing cluster: its scale settings and description may change, not its size or
/// priority.
fn update_by_put(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
    existing: Resource,
    body: &Value,
) -> Result<Reply, ArmError> {
    {
        let mut update = json!({"properties": {"properties": {}}});
        if let Some(settings) = body.at("/properties/properties/scaleSettings") {
            update["properties"]["properties"]["scaleSettings"] = settings.clone();
        }
        for fixed in ["vmSize", "vmPriority"] {
            let asked = body
                .at(&format!("/properties/properties/{fixed}"))
                .and_then(Value::as_str);
            let has = existing
                .body
                .at(&format!("/properties/properties/{fixed}"))
                .and_then(Value::as_str);
            if asked.is_some_and(|a| !has.is_some_and(|h| h.eq_ignore_ascii_case(a))) {
                return Err(bad_request(format!(
                    "Updating {fixed} of an existing AmlCompute is not supported; delete and \
                     recreate the compute."
                )));
            }
        }
        if let Some(description) = body.at("/properties/description") {
            update["properties"]["description"] = description.clone();
        }
        rescale(cloud, ctx, target, existing, &update)
    }
}

/// A new cluster: checked, stored `Creating`, its nodes on their way.
fn create(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
    body: &Value,
) -> Result<Reply, ArmError> {
    let workspace = workspace_of(cloud, target);
    let location = body
        .get("location")
        .and_then(Value::as_str)
        .filter(|l| !l.is_empty())
        .map_or_else(|| workspace.clone(), str::to_owned);
    let asked = body
        .at("/properties/properties")
        .cloned()
        .unwrap_or(json!({}));
    let size_name = asked.get("vmSize").and_then(Value::as_str).ok_or_else(|| {
        ArmError::invalid_request(
            "The request content was invalid and could not be deserialized: 'Required property \
             'vmSize' not found in JSON. Path 'properties.properties'.'",
        )
    })?;
    let size = ctx
        .config
        .vm_size(size_name)
        .filter(|s| s.offered_in(&normalize_location(&location)))
        .cloned()
        .ok_or_else(|| unsupported_size(size_name))?;
    let (min, max, idle) = scale_settings(
        asked
            .get("scaleSettings")
            .unwrap_or(&json!({"maxNodeCount": 1})),
    )?;
    let priority = match asked.get("vmPriority").and_then(Value::as_str) {
        None => "Dedicated",
        Some(p) if p.eq_ignore_ascii_case("Dedicated") => "Dedicated",
        Some(p) if p.eq_ignore_ascii_case("LowPriority") => "LowPriority",
        Some(other) => {
            return Err(bad_request(format!(
                "The value '{other}' is not valid for vmPriority: use Dedicated or LowPriority."
            )));
        }
    };
    if let Some(subnet) = asked.at("/subnet/id").and_then(Value::as_str) {
        require_reference(cloud, subnet, &target.id)?;
    }
    let credentials = asked.get("userAccountCredentials");
    let admin = credentials
        .and_then(|c| c.get("adminUserName"))
        .and_then(Value::as_str);
    if credentials.is_some() && admin.is_none() {
        return Err(ArmError::invalid_request(
            "The request content was invalid and could not be deserialized: 'Required property \
             'adminUserName' not found in JSON. Path 'properties.properties.userAccountCredentials'.'",
        ));
    }
    check_quota(
        cloud,
        ctx.config,
        target,
        &location,
        &size,
        priority == "LowPriority",
        min,
    )?;
    let now = timestamp(ctx.now);
    let props = cluster_properties(&asked, size_name, priority, (min, max, &idle), admin);
    let mut compute_props = json!({
        "computeType": "AmlCompute",
        "computeLocation": location,
        "provisioningState": "Creating",
        "createdOn": now,
        "modifiedOn": now,
        "isAttachedCompute": false,
        "disableLocalAuth": body.at("/properties/disableLocalAuth").cloned().unwrap_or(json!(true)),
        "properties": props,
    });
    if let Some(description) = body.at("/properties/description").filter(|d| !d.is_null()) {
        compute_props["description"] = description.clone();
    }
    let public_ip = next_public_address(cloud);
    let mut stored = json!({
        "id": target.id,
        "name": target.name(),
        "type": Kind::MlCompute.type_name(),
        "location": location,
        "properties": compute_props,
        HIDDEN: {
            "publicIp": public_ip,
            "sshPublicKey": credentials.and_then(|c| c.get("adminUserSshPublicKey")).cloned(),
        },
    });
    for field in ["tags", "identity", "sku"] {
        if let Some(value) = body.get(field) {
            stored[field] = value.clone();
        }
    }
    let resource = cloud.new_resource(target.id.clone(), Kind::MlCompute, stored);
    Ok(start_cluster(cloud, ctx, target, resource, min))
}

/// Stores a new cluster with its first nodes on their way and starts its creation.
fn start_cluster(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
    mut resource: Resource,
    min: u64,
) -> Reply {
    let size_name = resource
        .body
        .at("/properties/properties/vmSize")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let size_name = size_name.as_str();
    let location = resource.location().to_owned();
    let cluster = Cluster {
        seq: resource.seq,
        vm_size: size_name,
    };
    let at = ctx.now;
    let mut new_nodes = Vec::new();
    nodes::resize(
        &mut new_nodes,
        usize::try_from(min).unwrap_or(usize::MAX),
        &cluster,
        ctx.config,
        at,
        |n| nodes::node_id(cloud.next_seq(), n, at),
    );
    resource.nodes = new_nodes;
    let real = ops::base_latency(Kind::MlCompute, &OpKind::Put, Some(size_name));
    let op = ops::start(
        cloud,
        ctx,
        OpKind::Put,
        &target.key,
        Kind::MlCompute.namespace(),
        &location,
        real,
    );
    resource.op = Some(op.id.clone());
    cloud.put_resource(target.key.clone(), resource.clone());
    Reply::json(201, render(&resource, ctx.now)).headers(ops::put_headers(ctx, &op))
}

/// `AmlComputeProperties` as stored: what was asked, with the service's defaults.
fn cluster_properties(
    asked: &Value,
    size_name: &str,
    priority: &str,
    (min, max, idle): (u64, u64, &str),
    admin: Option<&str>,
) -> Value {
    let mut props = json!({
        "vmSize": size_name,
        "vmPriority": priority,
        "osType": asked.get("osType").cloned().unwrap_or(json!("Linux")),
        "isolatedNetwork": asked.get("isolatedNetwork").cloned().unwrap_or(json!(false)),
        "scaleSettings": {
            "minNodeCount": min,
            "maxNodeCount": max,
            "nodeIdleTimeBeforeScaleDown": idle,
        },
        "remoteLoginPortPublicAccess": asked.get("remoteLoginPortPublicAccess").cloned()
            .unwrap_or(json!("NotSpecified")),
        "enableNodePublicIp": asked.get("enableNodePublicIp").cloned().unwrap_or(json!(true)),
    });
    for copied in ["virtualMachineImage", "subnet", "propertyBag"] {
        if let Some(value) = asked.get(copied).filter(|v| !v.is_null()) {
            props[copied] = value.clone();
        }
    }
    if let Some(admin) = admin {
        // The key and password are secrets in the spec (x-ms-secret): AML never shows them.
        props["userAccountCredentials"] = json!({"adminUserName": admin});
    }
    props
}

/// The location of the compute's workspace (the parent exists: the router checked).
fn workspace_of(cloud: &Cloud, target: &Target<'_>) -> String {
    let parent = target.key.rsplit_once("/computes/").map_or("", |(p, _)| p);
    cloud
        .resources
        .get(parent)
        .map_or("eastus", Resource::location)
        .to_owned()
}

/// `PATCH` of a compute: `ClusterUpdateParameters`, whose only content is the scale settings.
pub(crate) fn patch_compute(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
    stored: Resource,
    update: &Value,
) -> Result<Reply, ArmError> {
    let mut merged = json!({"properties": {"properties": {}}});
    if let Some(settings) = update.at("/properties/properties/scaleSettings") {
        merged["properties"]["properties"]["scaleSettings"] = settings.clone();
    }
    rescale(cloud, ctx, target, stored, &merged)
}

/// Applies new scale settings (and description) to an existing cluster: quota is checked for
/// the new target, nodes come or leave, and the update runs as a long-running operation.
fn rescale(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
    mut stored: Resource,
    update: &Value,
) -> Result<Reply, ArmError> {
    if stored.provisioning_state() == Some("Deleting") {
        return Err(ArmError::new(
            409,
            "Conflict",
            format!("Compute {} is being deleted.", stored.name()),
        ));
    }
    let size_name = stored
        .body
        .at("/properties/properties/vmSize")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if let Some(settings) = update.at("/properties/properties/scaleSettings") {
        let (min, max, idle) = scale_settings(settings)?;
        if let Some(size) = ctx.config.vm_size(&size_name).cloned() {
            check_quota(
                cloud,
                ctx.config,
                target,
                stored.location(),
                &size,
                is_low_priority(&stored.body),
                min,
            )?;
        }
        stored.body["properties"]["properties"]["scaleSettings"] = json!({
            "minNodeCount": min,
            "maxNodeCount": max,
            "nodeIdleTimeBeforeScaleDown": idle,
        });
        let cluster = Cluster {
            seq: stored.seq,
            vm_size: &size_name,
        };
        let at = ctx.now;
        let mut resized = std::mem::take(&mut stored.nodes);
        nodes::resize(
            &mut resized,
            usize::try_from(min).unwrap_or(usize::MAX),
            &cluster,
            ctx.config,
            at,
            |n| nodes::node_id(cloud.next_seq(), n, at),
        );
        stored.nodes = resized;
    }
    if let Some(description) = update.at("/properties/description") {
        stored.body["properties"]["description"] = description.clone();
    }
    stored.body["properties"]["modifiedOn"] = json!(timestamp(ctx.now));
    stored.set_provisioning_state("Updating");
    let real = ops::base_latency(Kind::MlCompute, &OpKind::Put, None);
    let op = ops::start(
        cloud,
        ctx,
        OpKind::Put,
        &target.key,
        Kind::MlCompute.namespace(),
        stored.location(),
        real,
    );
    stored.op = Some(op.id.clone());
    cloud.put_resource(target.key.clone(), stored.clone());
    Ok(Reply::json(200, render(&stored, ctx.now)).headers(ops::put_headers(ctx, &op)))
}

/// The GET view of a compute at `now`: what was asked, and the cluster's live allocation.
pub(crate) fn render(resource: &Resource, now: DateTime<Utc>) -> Value {
    let mut body = resource.body.clone();
    if let Some(map) = body.as_object_mut() {
        map.remove(HIDDEN);
    }
    let listed: Vec<&Node> = resource.nodes.iter().filter(|n| n.listed(now)).collect();
    let count = |state: NodeState| listed.iter().filter(|n| n.state(now) == state).count();
    let resizing = resource
        .nodes
        .iter()
        .any(|n| (n.staying() && n.allocated_at > now) || (!n.staying() && n.listed(now)));
    let transition = resource
        .nodes
        .iter()
        .flat_map(|n| [Some(n.allocated_at), n.leaving_at, n.gone_at])
        .flatten()
        .filter(|t| *t <= now)
        .max();
    let props = &mut body["properties"]["properties"];
    if !props.is_object() {
        return body;
    }
    props["allocationState"] = json!(if resizing { "Resizing" } else { "Steady" });
    if let Some(at) = transition {
        props["allocationStateTransitionTime"] = json!(timestamp(at));
    }
    props["currentNodeCount"] = json!(listed.len());
    props["targetNodeCount"] = json!(target_of(&resource.body));
    props["nodeStateCounts"] = json!({
        "idleNodeCount": count(NodeState::Idle),
        "runningNodeCount": 0,
        "preparingNodeCount": count(NodeState::Preparing),
        "unusableNodeCount": 0,
        "leavingNodeCount": count(NodeState::Leaving),
        "preemptedNodeCount": count(NodeState::Preempted),
    });
    body
}

/// Azure takes back the low-priority node `node_id` of the compute at `compute_key` (the admin
/// route `/_emulator/aml-preemptions`): it is listed as `preempted`, and AmlCompute allocates a
/// new node in its place, as on Azure.
///
/// # Errors
///
/// No such compute, a dedicated one, or no such usable node: the message says which.
pub(crate) fn preempt_node(
    cloud: &mut Cloud,
    config: &crate::emulator::config::EmulatorConfig,
    (compute_key, node_id): (&str, &str),
    now: DateTime<Utc>,
) -> Result<(), String> {
    let Some(stored) = cloud.resources.get(compute_key) else {
        return Err(format!("no AmlCompute {compute_key}"));
    };
    if !is_low_priority(&stored.body) {
        return Err("only a low-priority AmlCompute's nodes are preempted".to_owned());
    }
    let size = stored
        .body
        .at("/properties/properties/vmSize")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let (seq, target) = (stored.seq, target_of(&stored.body));
    let mut nodes = cloud
        .resources
        .get_mut(compute_key)
        .map(|r| std::mem::take(&mut r.nodes))
        .unwrap_or_default();
    let preempted = nodes::preempt(&mut nodes, node_id, &size, config, now);
    if preempted {
        let cluster = Cluster {
            seq,
            vm_size: &size,
        };
        nodes::resize(
            &mut nodes,
            usize::try_from(target).unwrap_or(usize::MAX),
            &cluster,
            config,
            now,
            |n| nodes::node_id(cloud.next_seq(), n, now),
        );
    }
    if let Some(r) = cloud.resources.get_mut(compute_key) {
        r.nodes = nodes;
    }
    if preempted {
        Ok(())
    } else {
        Err(format!("the compute has no usable node {node_id}"))
    }
}

/// The cluster's public address, where every node's port is.
pub(crate) fn public_ip(resource: &Resource) -> Option<&str> {
    resource
        .body
        .at(&format!("/{HIDDEN}/publicIp"))
        .and_then(Value::as_str)
}

/// The SSH key the cluster was created with (never shown by GET).
pub(crate) fn ssh_public_key(resource: &Resource) -> Option<&str> {
    resource
        .body
        .at(&format!("/{HIDDEN}/sshPublicKey"))
        .and_then(Value::as_str)
}

/// The listed nodes at `now`, in `listNodes` order: by node id.
pub(crate) fn listed_nodes(resource: &Resource, now: DateTime<Utc>) -> Vec<&Node> {
    let mut listed: Vec<&Node> = resource.nodes.iter().filter(|n| n.listed(now)).collect();
    listed.sort_by(|a, b| a.id.cmp(&b.id));
    listed
}

/// `POST .../computes/{name}/listNodes`: `{"nodes": [...], "nextLink"?}`, paged like every list.
/// The spec's operation is a POST; the next page is fetched from `nextLink` with POST too (GET
/// is also answered, for clients that follow links with GET).
pub(crate) fn list_nodes(
    cloud: &Cloud,
    ctx: &Ctx<'_>,
    target: &Target<'_>,
) -> Result<Reply, ArmError> {
    if ctx.method != "POST" && ctx.method != "GET" {
        return Err(ArmError::method_not_allowed(&ctx.method));
    }
    let resource = cloud
        .resources
        .get(&target.key)
        .filter(|r| !r.hidden)
        .ok_or_else(|| target.not_found())?;
    let public_ip = public_ip(resource).map(str::to_owned);
    let items: Vec<Value> = listed_nodes(resource, ctx.now)
        .into_iter()
        .map(|node| {
            json!({
                "nodeId": node.id,
                "privateIpAddress": node.private_ip,
                "publicIpAddress": public_ip,
                "port": node.port(),
                "nodeState": node.state(ctx.now).as_str(),
            })
        })
        .collect();
    let mut reply = paging::page(ctx, items)?;
    if let Some(body) = reply.body.as_mut().and_then(Value::as_object_mut)
        && let Some(value) = body.remove("value")
    {
        body.insert("nodes".into(), value);
    }
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_amls_rule() {
        for good in ["ab", "beeond", "c-1", "A1234567890123-z"] {
            assert!(valid_name(good), "{good}");
        }
        for bad in ["a", "1abc", "abc-", "a_b", "abcdefghijklmnopq", ""] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn quota_labels_read_like_amls() {
        assert_eq!(family_label("standardNDSv2Family"), "Standard NDSv2 family");
        assert_eq!(family_label("standardDv2Family"), "Standard Dv2 family");
    }
}
