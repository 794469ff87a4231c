//! The managed cluster: its PUT (create, or update of what may change), the pools that come in
//! its `agentPoolProfiles`, its node resource group, stop and start, and the kubeconfig
//! `listClusterUserCredential` hands out.

use base64::Engine as _;
use serde_json::{Value, json};

use super::pools::{self, InCluster};
use super::{HIDDEN, versions};
use crate::emulator::error::ArmError;
use crate::emulator::http::{Ctx, Reply};
use crate::emulator::json::At as _;
use crate::emulator::ops;
use crate::emulator::resource::{Target, key, not_implemented, require_location};
use crate::emulator::store::{Cloud, Kind, OpKind, Resource};

/// How long AKS takes, before the latency scale: minutes to create a control plane and its
/// first nodes, less to change them.
const CREATE_SECONDS: u64 = 300;
const UPDATE_SECONDS: u64 = 120;

/// A cluster property a request carries that must never be stored or shown (the spec marks them
/// secret: a service principal's secret, a Windows admin password).
const SECRETS: [&str; 2] = [
    "/servicePrincipalProfile/secret",
    "/windowsProfile/adminPassword",
];

/// The refusal of anything but start or delete while a cluster is stopped (AKS's documented
/// rule for a stopped cluster; the code and wording are the emulator's, not checked against a
/// live cluster).
pub(super) fn refuse_if_stopped(cluster: &Resource, what: &str) -> Result<(), ArmError> {
    if cluster.power.as_deref() == Some("Stopped") {
        return Err(ArmError::new(
            409,
            "OperationNotAllowed",
            format!(
                "Operation '{what}' is not allowed because managed cluster '{}' is stopped: a \
                 stopped cluster accepts only start or delete. Start the cluster first.",
                cluster.name()
            ),
        ));
    }
    Ok(())
}

fn busy(cluster: &Resource) -> ArmError {
    ArmError::new(
        409,
        "OperationNotAllowed",
        format!(
            "Operation is not allowed: another operation is in progress on managed cluster '{}'.",
            cluster.name()
        ),
    )
}

/// `PUT` of a managed cluster.
pub(crate) fn put_cluster(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
) -> Result<Reply, ArmError> {
    let body = ctx.body();
    let location = require_location(&body)?;
    let existing = cloud.resources.get(&target.key).cloned();
    if let Some(existing) = &existing {
        refuse_if_stopped(existing, "update")?;
        if existing.op.is_some() {
            return Err(busy(existing));
        }
    }
    let asked = body.get("properties").cloned().unwrap_or(json!({}));
    let version = versions::resolve(
        asked.get("kubernetesVersion").and_then(Value::as_str),
        &location,
    )?;
    let mut profiles = asked
        .get("agentPoolProfiles")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    // A new cluster whose profiles name no mode at all gets its first pool as the System pool,
    // as clusters made before pool modes existed (the spec's GET example shows one); profiles
    // that name modes and no System one are refused below.
    if existing.is_none()
        && profiles.iter().all(|p| p.get("mode").is_none())
        && let Some(first) = profiles.first_mut()
    {
        first["mode"] = json!("System");
    }
    if existing.is_none() && !profiles.iter().any(is_system) {
        return Err(ArmError::new(
            400,
            "InvalidParameter",
            "The value of parameter agentPoolProfiles is invalid. A managed cluster needs at \
             least one agent pool in System mode.",
        ));
    }
    let sub = target.path.sub.clone();
    let cluster_in = InCluster {
        sub: &sub,
        location: &location,
        version: &version,
    };
    let checked = check_profiles(cloud, ctx, target, &profiles, &cluster_in)?;
    let stored = cluster_body(
        target,
        &location,
        &body,
        &asked,
        &version,
        existing.as_ref(),
    );
    let node_group = stored
        .at("/properties/nodeResourceGroup")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let real = std::time::Duration::from_secs(if existing.is_some() {
        UPDATE_SECONDS
    } else {
        CREATE_SECONDS
    });
    let op = ops::start(
        cloud,
        ctx,
        OpKind::Put,
        &target.key,
        Kind::ManagedCluster.namespace(),
        &location,
        real,
    );
    let mut resource = existing.clone().unwrap_or_else(|| {
        let mut r = cloud.new_resource(target.id.clone(), Kind::ManagedCluster, Value::Null);
        r.power = Some("Running".into());
        r
    });
    resource.body = stored;
    resource.op = Some(op.id.clone());
    resource.set_provisioning_state(if existing.is_some() {
        "Updating"
    } else {
        "Creating"
    });
    cloud.put_resource(target.key.clone(), resource.clone());
    for (name, pool_key, props) in checked {
        store_pool(cloud, &pool_key, (&target.id, &name), props, &op.id);
    }
    if existing.is_none() {
        create_node_group(cloud, &sub, &node_group, &location, &target.id);
    }
    let status = if existing.is_some() { 200 } else { 201 };
    let view = super::render(cloud, &resource);
    Ok(Reply::json(status, view).headers(ops::put_headers(ctx, &op)))
}

/// Checks each pool of a cluster PUT: `(name, key, properties to store)`.
fn check_profiles(
    cloud: &Cloud,
    ctx: &Ctx<'_>,
    target: &Target<'_>,
    profiles: &[Value],
    cluster_in: &InCluster<'_>,
) -> Result<Vec<(String, String, Value)>, ArmError> {
    let mut checked = Vec::new();
    let mut allocations = Vec::new();
    for profile in profiles {
        let name = profile
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let pool_key = format!("{}/agentpools/{}", target.key, name.to_ascii_lowercase());
        let pool = cloud.resources.get(&pool_key);
        let (props, allocation) = pools::check(ctx, name, profile, cluster_in, pool)?;
        if pool.is_some() && !is_system(profile) && pools::last_system_pool(cloud, &pool_key) {
            return Err(pools::needs_a_system_pool(name));
        }
        allocations.push(allocation);
        checked.push((name.to_owned(), pool_key, props));
    }
    // The pools' nodes together: AKS creates a scale set per pool, and Compute refuses the one
    // that no longer fits.
    let keys: Vec<&str> = checked.iter().map(|(_, key, _)| key.as_str()).collect();
    pools::check_quota(cloud, ctx, cluster_in, &allocations, &keys)?;
    Ok(checked)
}

fn is_system(profile: &Value) -> bool {
    profile
        .get("mode")
        .and_then(Value::as_str)
        .is_some_and(|m| m.eq_ignore_ascii_case("System"))
}

/// Stores a pool (new or updated) under its cluster, `Creating` or `Updating` with operation `op`.
pub(super) fn store_pool(
    cloud: &mut Cloud,
    pool_key: &str,
    (cluster_id, name): (&str, &str),
    mut props: Value,
    op: &str,
) {
    let existing = cloud.resources.get(pool_key).cloned();
    props["provisioningState"] = json!(if existing.is_some() {
        "Updating"
    } else {
        "Creating"
    });
    let body = json!({
        "id": existing.as_ref().map_or_else(|| format!("{cluster_id}/agentPools/{name}"), |p| p.id.clone()),
        "name": name,
        "type": Kind::AgentPool.type_name(),
        "properties": props,
    });
    let mut pool = existing.unwrap_or_else(|| {
        cloud.new_resource(
            body["id"].as_str().unwrap_or_default().to_owned(),
            Kind::AgentPool,
            Value::Null,
        )
    });
    pool.body = body;
    pool.op = Some(op.to_owned());
    cloud.put_resource(pool_key.to_owned(), pool);
}

/// The stored cluster: what was asked (secrets and the pool profiles left out: pools are their
/// own resources), with what AKS fills in.
fn cluster_body(
    target: &Target<'_>,
    location: &str,
    body: &Value,
    asked: &Value,
    version: &str,
    existing: Option<&Resource>,
) -> Value {
    let mut props = asked.clone();
    if let Some(map) = props.as_object_mut() {
        map.remove("agentPoolProfiles");
        for computed in [
            "provisioningState",
            "powerState",
            "currentKubernetesVersion",
            "fqdn",
            "azurePortalFQDN",
            "maxAgentPools",
        ] {
            map.remove(computed);
        }
    }
    for secret in SECRETS {
        let (parent, field) = secret.rsplit_once('/').unwrap_or_default();
        if let Some(map) = props.pointer_mut(parent).and_then(Value::as_object_mut) {
            map.remove(field);
        }
    }
    let before = |pointer: &str| existing.and_then(|e| e.body.at(pointer)).cloned();
    let group = &target.group_name;
    let name = target.name();
    let dns_prefix = asked
        .get("dnsPrefix")
        .and_then(Value::as_str)
        .map_or_else(|| format!("{name}-{group}"), str::to_owned);
    let node_group = before("/properties/nodeResourceGroup").unwrap_or_else(|| {
        json!(
            asked
                .get("nodeResourceGroup")
                .and_then(Value::as_str)
                .map_or_else(|| format!("MC_{group}_{name}_{location}"), str::to_owned)
        )
    });
    let suffix = &format!("{:x}", sha2_prefix(&target.key))[..8];
    props["kubernetesVersion"] = json!(
        asked
            .get("kubernetesVersion")
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
            .unwrap_or(versions::minor_of(version))
    );
    props["currentKubernetesVersion"] = json!(version);
    props["dnsPrefix"] = json!(dns_prefix);
    props["fqdn"] = json!(format!("{dns_prefix}-{suffix}.hcp.{location}.azmk8s.io"));
    props["nodeResourceGroup"] = node_group;
    props["azurePortalFQDN"] = json!(format!(
        "{dns_prefix}-{suffix}.portal.hcp.{location}.azmk8s.io"
    ));
    props["maxAgentPools"] = json!(100);
    if props.get("enableRBAC").is_none() {
        props["enableRBAC"] = json!(true);
    }
    let token = before(&format!("/{HIDDEN}/token"))
        .unwrap_or_else(|| json!(uuid::Uuid::new_v4().simple().to_string()));
    let mut stored = json!({
        "id": existing.map_or_else(|| target.id.clone(), |e| e.id.clone()),
        "name": name,
        "type": Kind::ManagedCluster.type_name(),
        "location": location,
        "eTag": pools::new_etag(),
        "properties": props,
        HIDDEN: {"token": token},
    });
    for field in ["tags", "sku", "identity"] {
        if let Some(value) = body.get(field) {
            stored[field] = value.clone();
        }
    }
    if stored.get("identity").is_none() {
        stored["identity"] = json!({"type": "SystemAssigned"});
    }
    if stored.at("/identity/type").and_then(Value::as_str) == Some("SystemAssigned") {
        let principal = before("/identity/principalId")
            .unwrap_or_else(|| json!(uuid::Uuid::new_v4().to_string()));
        stored["identity"]["principalId"] = principal;
        stored["identity"]["tenantId"] = json!(crate::emulator::resource::TENANT);
    }
    stored
}

/// A stable number from a key, for the FQDN's suffix.
fn sha2_prefix(key: &str) -> u64 {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(key.as_bytes());
    u64::from_be_bytes(digest[..8].try_into().unwrap_or_default())
}

/// Creates the node resource group AKS manages for the cluster (`managedBy` the cluster).
fn create_node_group(cloud: &mut Cloud, sub: &str, name: &str, location: &str, cluster_id: &str) {
    let id = format!("/subscriptions/{sub}/resourceGroups/{name}");
    if cloud.resources.contains_key(&key(&id)) {
        return;
    }
    let body = json!({
        "id": id,
        "name": name,
        "type": Kind::ResourceGroup.type_name(),
        "location": location,
        "managedBy": cluster_id,
        "properties": {"provisioningState": "Succeeded"},
    });
    let group = cloud.new_resource(id.clone(), Kind::ResourceGroup, body);
    cloud.resources.insert(key(&id), group);
}

/// The node resource group a cluster's body names, as a key.
pub(super) fn node_group_key(cluster: &Resource) -> Option<String> {
    let sub = cluster.id.split('/').nth(2)?;
    let name = cluster
        .body
        .at("/properties/nodeResourceGroup")
        .and_then(Value::as_str)?;
    Some(key(&format!("/subscriptions/{sub}/resourceGroups/{name}")))
}

/// `POST .../managedClusters/{name}/{stop|start|listClusterUserCredential}`.
pub(crate) fn action(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
    tail: &str,
) -> Result<Reply, ArmError> {
    let cluster = cloud
        .resources
        .get(&target.key)
        .filter(|r| !r.hidden)
        .cloned()
        .ok_or_else(|| target.not_found())?;
    let tail = tail.to_ascii_lowercase();
    if ctx.method != "POST" {
        return Err(
            if ["stop", "start", "listclusterusercredential"].contains(&tail.as_str()) {
                ArmError::method_not_allowed(&ctx.method)
            } else {
                not_implemented(ctx)
            },
        );
    }
    match tail.as_str() {
        "stop" | "start" => power(cloud, ctx, target, &cluster, &tail),
        "listclusterusercredential" => Ok(credentials(ctx, target, &cluster)),
        _ => Err(not_implemented(ctx)),
    }
}

fn power(
    cloud: &mut Cloud,
    ctx: &mut Ctx<'_>,
    target: &Target<'_>,
    cluster: &Resource,
    action: &str,
) -> Result<Reply, ArmError> {
    if cluster.op.is_some() {
        return Err(busy(cluster));
    }
    let running = cluster.power.as_deref() != Some("Stopped");
    if (action == "stop") != running {
        // Already where it was asked to go: nothing to do.
        return Ok(Reply::empty(204));
    }
    if action == "start" {
        // Starting allocates every pool's nodes again, all of them: Compute's quota applies to
        // their sum.
        let wants: Vec<(&str, u32)> = cloud
            .children(&target.key, Kind::AgentPool)
            .into_iter()
            .filter_map(crate::emulator::compute::pool_nodes)
            .collect();
        crate::emulator::compute::check_nodes(
            cloud,
            ctx.config,
            (&target.path.sub, cluster.location()),
            &wants,
            &[],
        )?;
    }
    let op = ops::start(
        cloud,
        ctx,
        OpKind::Action(action.to_owned()),
        &target.key,
        Kind::ManagedCluster.namespace(),
        cluster.location(),
        std::time::Duration::from_secs(UPDATE_SECONDS),
    );
    if let Some(stored) = cloud.operations.get_mut(&op.id) {
        stored.previous_power.clone_from(&cluster.power);
    }
    if let Some(stored) = cloud.resources.get_mut(&target.key) {
        stored.op = Some(op.id.clone());
    }
    Ok(Reply::empty(202).headers(ops::accepted_headers(ctx, &op)))
}

/// AKS's Entra ID server application (the audience of a cluster's Entra tokens) and the
/// Azure CLI's public client kubelogin uses, as AKS's kubeconfigs name them.
pub(crate) const ENTRA_SERVER_APP: &str = "6dae42f8-4368-4678-94ff-3960e28e3630";
const ENTRA_CLIENT_APP: &str = "80faf920-1908-4b52-b5ef-a8e7bedfc67a";

/// `listClusterUserCredential`: one kubeconfig whose server is the emulator's Kubernetes API
/// path for this cluster (https, its CA in `certificate-authority-data`, as AKS's kubeconfigs
/// carry the cluster's CA) and whose user holds the cluster's token.
fn credentials(ctx: &Ctx<'_>, target: &Target<'_>, cluster: &Resource) -> Reply {
    let name = cluster.name();
    let group = &target.group_name;
    let token = cluster
        .body
        .at(&format!("/{HIDDEN}/token"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let server = format!("{}{}", ctx.kube_api.url, super::kube_api_path(&target.key));
    let ca = base64::engine::general_purpose::STANDARD.encode(&ctx.kube_api.ca_pem);
    let user = format!("clusterUser_{group}_{name}");
    let entra = cluster.body.at("/properties/aadProfile/managed") == Some(&Value::Bool(true));
    // An Entra-ID cluster's user signs in through kubelogin for AKS's Entra server application
    // (AKS's kubeconfig since 1.24); a cluster with local accounts gets the static token.
    let credential = if entra {
        format!(
            "    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: \
             kubelogin\n      args:\n      - get-token\n      - --environment\n      - \
             AzurePublicCloud\n      - --server-id\n      - {ENTRA_SERVER_APP}\n      - \
             --client-id\n      - {ENTRA_CLIENT_APP}\n      - --tenant-id\n      - {}\n      \
             - --login\n      - devicecode\n      provideClusterInfo: false\n      \
             interactiveMode: IfPossible\n",
            crate::emulator::resource::TENANT
        )
    } else {
        format!("    token: {token}\n")
    };
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: \
         {server}\n    certificate-authority-data: {ca}\ncontexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: \
         {user}\ncurrent-context: {name}\npreferences: {{}}\nusers:\n- name: {user}\n  user:\n{credential}"
    );
    let value = base64::engine::general_purpose::STANDARD.encode(kubeconfig);
    Reply::json(
        200,
        json!({"kubeconfigs": [{"name": "clusterUser", "value": value}]}),
    )
}
