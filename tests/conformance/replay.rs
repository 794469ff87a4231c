//! Every example present in the specs replayed against the emulator.

use super::*;

async fn emulator() -> EmulatorHandle {
    emulator::start(EmulatorConfig {
        latency_scale: 0.0,
        principals: vec![EXAMPLE_PRINCIPAL.to_owned()],
        ..EmulatorConfig::default()
    })
    .await
    .expect("emulator starts")
}

/// The api-version to create a prerequisite of this resource type with.
fn version_for(id: &str) -> &'static str {
    let lower = id.to_ascii_lowercase();
    if lower.contains("/microsoft.network/") {
        "2024-07-01"
    } else if lower.contains("/microsoft.compute/disks/") {
        "2025-01-02"
    } else if lower.contains("/microsoft.compute/") {
        "2024-11-01"
    } else if lower.contains("/microsoft.storage/") {
        "2025-01-01"
    } else if lower.contains("/microsoft.machinelearningservices/") {
        "2024-10-01"
    } else if lower.contains("/microsoft.containerservice/") {
        "2025-10-01"
    } else if lower.contains("/microsoft.keyvault/")
        || lower.contains("/microsoft.containerregistry/")
    {
        "2023-07-01"
    } else if lower.contains("/microsoft.operationalinsights/") {
        "2022-10-01"
    } else if lower.contains("/microsoft.insights/") {
        "2020-02-02"
    } else {
        "2025-04-01"
    }
}

fn group_of(id: &str) -> Option<String> {
    let parts: Vec<&str> = id.split('/').collect();
    (parts.len() > 4 && parts[3].eq_ignore_ascii_case("resourceGroups"))
        .then(|| parts[..5].join("/"))
}

/// Creates the resource an id names (and what it needs) with a minimal body, waiting for it.
fn ensure<'a>(
    http: &'a reqwest::Client,
    endpoint: &'a str,
    id: &'a str,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + 'a>> {
    Box::pin(async move {
        if let Some(group) = group_of(id) {
            let exists = send(
                http,
                endpoint,
                "GET",
                &versioned(&group, "2025-04-01"),
                None,
            )
            .await;
            if exists.status == 404 {
                let made = send(
                    http,
                    endpoint,
                    "PUT",
                    &versioned(&group, "2025-04-01"),
                    Some(&json!({"location": "westus"})),
                )
                .await;
                assert_eq!(made.status, 201, "prerequisite group {group}");
            }
        }
        let Some(group) = group_of(id) else { return };
        let lower = id.to_ascii_lowercase();
        let version = version_for(id);
        if send(http, endpoint, "GET", &versioned(id, version), None)
            .await
            .status
            == 200
        {
            return;
        }
        let prereq_nic =
            format!("{group}/providers/Microsoft.Network/networkInterfaces/prereq-nic");
        let body = if let Some((vnet, subnet)) = lower.split_once("/subnets/") {
            let vnet_id = &id[..vnet.len()];
            let subnet_name = &id[lower.len() - subnet.len()..];
            let body = json!({"location": "westus", "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]},
                "subnets": [{"name": subnet_name, "properties": {"addressPrefix": "10.0.0.0/24"}}]}});
            put_and_wait(http, endpoint, vnet_id, version, &body).await;
            return;
        } else if lower.contains("/virtualnetworks/") {
            json!({"location": "westus", "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]}}})
        } else if lower.contains("/networkinterfaces/") {
            let subnet = format!(
                "{group}/providers/Microsoft.Network/virtualNetworks/prereq-vnet/subnets/default"
            );
            ensure(http, endpoint, &subnet).await;
            json!({"location": "westus", "properties": {"ipConfigurations": [{"name": "ipconfig1", "properties": {"subnet": {"id": subnet}}}]}})
        } else if lower.contains("/virtualmachines/") {
            ensure(http, endpoint, &prereq_nic).await;
            json!({"location": "westus", "properties": {"hardwareProfile": {"vmSize": "Standard_D2_v2"},
                "storageProfile": {"osDisk": {"createOption": "FromImage"}},
                "networkProfile": {"networkInterfaces": [{"id": prereq_nic}]}}})
        } else if lower.contains("/disks/") {
            json!({"location": "westus", "properties": {"creationData": {"createOption": "Empty"}, "diskSizeGB": 32}})
        } else if lower.contains("/storageaccounts/") {
            let account = id
                .split("/blobServices/")
                .next()
                .unwrap_or(id)
                .split("/fileServices/")
                .next()
                .unwrap_or(id);
            // Names are case-insensitive in ARM, but a storage account's is created in lower case
            // (ARM refuses capitals): the AML examples' `testStorageAccount` is this account.
            let lowered = account
                .rsplit_once('/')
                .map_or(account.to_owned(), |(head, name)| {
                    format!("{head}/{}", name.to_ascii_lowercase())
                });
            let account = lowered.as_str();
            let made = send(http, endpoint, "PUT", &versioned(account, version), Some(&json!({"location": "westus", "sku": {"name": "Standard_LRS"}, "kind": "StorageV2"}))).await;
            assert!(
                matches!(made.status, 200 | 202),
                "prerequisite account {account}"
            );
            // Latency 0: the next request completes the creation.
            if account.len() < id.len() {
                let child = send(
                    http,
                    endpoint,
                    "PUT",
                    &versioned(id, version),
                    Some(&json!({})),
                )
                .await;
                assert_eq!(child.status, 201, "prerequisite {id}");
            }
            return;
        } else if let Some(body) = service_prerequisite(http, endpoint, id, &group).await {
            body
        } else if lower.contains("/microsoft.devtestlab/schedules/") {
            json!({"location": "westus", "properties": {"status": "Enabled", "taskType": "LabVmsStartupTask", "timeZoneId": "UTC", "dailyRecurrence": {"time": "0700"}}})
        } else {
            json!({"location": "westus"})
        };
        put_and_wait(http, endpoint, id, version_for(id), &body).await;
    })
}

/// The minimal body of an Azure Machine Learning resource, of a workspace's dependency or of an
/// AKS cluster or pool, once what it needs exists; `None` for any other type.
async fn service_prerequisite(
    http: &reqwest::Client,
    endpoint: &str,
    id: &str,
    group: &str,
) -> Option<Value> {
    let lower = id.to_ascii_lowercase();
    let body = if let Some(at) = lower.find("/computes/") {
        ensure(http, endpoint, &id[..at]).await;
        json!({"location": "westus", "properties": {"computeType": "AmlCompute",
            "description": "prerequisite compute", "properties": {"vmSize": "Standard_D2_v2",
            "scaleSettings": {"minNodeCount": 1, "maxNodeCount": 1}}}})
    } else if lower.contains("/microsoft.machinelearningservices/workspaces/") {
        let deps = [
            (
                "storageAccount",
                format!("{group}/providers/Microsoft.Storage/storageAccounts/prereqmlsa"),
            ),
            (
                "keyVault",
                format!("{group}/providers/Microsoft.KeyVault/vaults/prereq-ml-kv"),
            ),
            (
                "applicationInsights",
                format!("{group}/providers/microsoft.insights/components/prereq-ai"),
            ),
        ];
        let mut properties = serde_json::Map::new();
        for (property, dep) in deps {
            ensure(http, endpoint, &dep).await;
            properties.insert(property.into(), json!(dep));
        }
        json!({"location": "westus", "properties": properties})
    } else if lower.contains("/microsoft.keyvault/vaults/") {
        json!({"location": "westus", "properties": {"tenantId": "d51f0000-0000-4000-8000-00000000e317",
            "sku": {"family": "A", "name": "standard"}}})
    } else if lower.contains("/microsoft.insights/components/") {
        json!({"location": "westus", "kind": "web", "properties": {"Application_Type": "web"}})
    } else if lower.contains("/microsoft.containerregistry/registries/") {
        json!({"location": "westus", "sku": {"name": "Basic"}})
    } else if let Some(at) = lower.find("/agentpools/") {
        ensure(http, endpoint, &id[..at]).await;
        json!({"properties": {"mode": "User", "count": 1, "vmSize": "Standard_D2_v2"}})
    } else if lower.contains("/microsoft.containerservice/managedclusters/") {
        json!({"location": "westus", "properties": {"dnsPrefix": "prereq", "agentPoolProfiles": [
            {"name": "system", "mode": "System", "count": 1, "vmSize": "Standard_D2_v2"}]}})
    } else {
        return None;
    };
    Some(body)
}

async fn put_and_wait(
    http: &reqwest::Client,
    endpoint: &str,
    id: &str,
    version: &str,
    body: &Value,
) {
    let made = send(http, endpoint, "PUT", &versioned(id, version), Some(body)).await;
    assert!(
        matches!(made.status, 200..=202),
        "prerequisite {id}: {} {:?}",
        made.status,
        made.body
    );
}

/// The resources a workspace body names in its own properties (not under `id`): the storage
/// account, key vault, Application Insights and container registry it is created with.
fn workspace_references(body: &Value, out: &mut BTreeSet<String>) {
    for property in [
        "storageAccount",
        "keyVault",
        "applicationInsights",
        "containerRegistry",
    ] {
        if let Some(id) = body
            .pointer(&format!("/properties/{property}"))
            .and_then(Value::as_str)
            .filter(|id| id.starts_with("/subscriptions/"))
        {
            out.insert(id.to_owned());
        }
    }
}

/// Ids an example refers to that name resource types the emulator does not serve, and why the
/// emulator accepts the example without them.
const PREREQ_NOT_EMULATED: &[(&str, &str)] = &[(
    // A custom image for AmlCompute nodes: Compute galleries are not emulated, and the emulator
    // does not check that a cluster's custom image exists (docs/emulator.md).
    "/providers/microsoft.compute/galleries/",
    "gallery images are not emulated",
)];

/// Every ARM id an example body refers to.
fn referenced_ids(value: &Value, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if let Value::String(s) = v
                    && (k == "id" || k == "targetResourceId")
                    && s.starts_with("/subscriptions/")
                {
                    out.insert(s.clone());
                }
                referenced_ids(v, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| referenced_ids(v, out)),
        _ => {}
    }
}

fn encode_segment(value: &str) -> String {
    value
        .replace('{', "%7B")
        .replace('}', "%7D")
        .replace(' ', "%20")
}

/// Keys of the example that our answer lacks, at the top level and under `properties`.
fn missing_keys(ours: &Value, example: &Value) -> Vec<String> {
    let mut missing = Vec::new();
    if let (Some(ours), Some(theirs)) = (ours.as_object(), example.as_object()) {
        for key in theirs.keys() {
            if !ours.contains_key(key) {
                missing.push(key.clone());
            }
        }
    }
    if let (Some(ours), Some(theirs)) = (
        ours["properties"].as_object(),
        example["properties"].as_object(),
    ) {
        for key in theirs.keys() {
            if !ours.contains_key(key) {
                missing.push(format!("properties.{key}"));
            }
        }
    }
    missing
}

/// Example response keys the emulator deliberately does not produce (docs/emulator.md lists
/// why): values only real infrastructure has, or features the emulator does not model.
const NOT_EMULATED: &[&str] = &[
    "systemData",
    // Sent only while more pages remain; the examples' short lists fit the default page
    // (tests/emulator/paging.rs checks paged answers).
    "nextLink",
    // Instance-view details of a real guest agent and hardware.
    "platformUpdateDomain",
    "platformFaultDomain",
    "rdpThumbPrint",
    "bootDiagnostics",
    "osVersion",
    "extensions",
    "assignedHost",
    "maintenanceRedeployStatus",
    "patchStatus",
    // Placement groups: scale sets are not emulated.
    "properties.virtualMachineScaleSets",
    // Availability sets: migration to a scale set and platform statuses are not emulated.
    "properties.virtualMachineScaleSetMigrationInfo",
    "properties.statuses",
    // Disk fields real DiskRP fills from hardware and features the emulator does not model.
    "properties.purchasePlan",
    "properties.supportedCapabilities",
    "properties.hyperVGeneration",
    "properties.diskIOPSReadWrite",
    "properties.diskMBpsReadWrite",
    "properties.encryptionSettingsCollection",
    "properties.tier",
    "properties.lastOwnershipUpdateTime",
    // Storage account fields for features the emulator does not model.
    "properties.geoReplicationStats",
    "properties.secondaryLocation",
    "properties.statusOfSecondary",
    "properties.secondaryEndpoints",
    "properties.isHnsEnabled",
    "properties.immutableStorageWithVersioning",
    "properties.azureFilesIdentityBasedAuthentication",
    "properties.routingPreference",
    "properties.allowSharedKeyAccess",
    "properties.isSftpEnabled",
    "properties.isLocalUserEnabled",
    "properties.keyPolicy",
    "properties.sasPolicy",
    "properties.defaultToOAuthAuthentication",
    "properties.allowCrossTenantReplication",
    "properties.publicNetworkAccess",
    "properties.dnsEndpointType",
    "properties.networkAcls",
    "properties.privateEndpointConnections",
    // Container and share fields about versions, leases and soft delete.
    "properties.version",
    "properties.deleted",
    "properties.remainingRetentionDays",
    "properties.immutabilityPolicy",
    "properties.legalHold",
    "properties.shareUsageBytes",
    // Network fields of features not modelled (DNS names, DDoS, flow logs, tap, encryption).
    "properties.dnsSettings",
    "properties.ipTags",
    "properties.disableTcpStateTracking",
    "properties.tapConfigurations",
    "properties.hostedWorkloads",
    "properties.vnetEncryptionSupported",
    "properties.enableDdosProtection",
    "properties.auxiliaryMode",
    "properties.auxiliarySku",
    "properties.flushConnection",
    "properties.provisioningStateForInstanceView",
    // Standby pools are not emulated.
    "isVMInStandbyPool",
    // DiskRP example spells this key in PascalCase; the spec's property is lastOwnershipUpdateTime.
    "properties.LastOwnershipUpdateTime",
];

/// Keys an example's response shows that its own request cannot produce: the example describes
/// a resource in a richer context than the example sets up.
const EXAMPLE_ARTIFACTS: &[(&str, &str)] = &[
    // `null` in the stopped pool's answer: the emulator leaves out the autoscaler's bounds of a
    // pool without autoscaling, as AKS's other pool examples do.
    ("AgentPools_Stop.json", "properties.minCount"),
    ("AgentPools_Stop.json", "properties.maxCount"),
    // The disk in the example is attached to a VM the example never creates.
    ("Disk_Get.json", "managedBy"),
    // The response shows tags the request never sent.
    ("GlobalSchedules_CreateOrUpdate.json", "tags"),
    // A fresh public IP shown attached to a NIC that the example never creates.
    (
        "PublicIpAddressCreateDefaults.json",
        "properties.ipConfiguration",
    ),
    (
        "PublicIpAddressCreateCustomizedValues.json",
        "properties.ipConfiguration",
    ),
    // The example passes zones as a stray top-level parameter instead of in the body.
    ("PublicIpAddressCreateCustomizedValues.json", "zones"),
    // The response shows a scheduled events policy the request never sent.
    (
        "AvailabilitySet_Create_WithScheduledEventProfile.json",
        "properties.scheduledEventsPolicy",
    ),
    // Left out of the seed (see SEED_ARTIFACTS).
    (
        "AvailabilitySet_Get_MaximumSet_Gen.json",
        "properties.proximityPlacementGroup",
    ),
    // A generated example of some image in an edge zone, with a purchase plan, tags and upgrade
    // and deprecation facts; the emulator's marketplace images (the shared image table's) have
    // none of those, as the plain Ubuntu and HPC images have none.
    ("VirtualMachineImage_Get_MaximumSet_Gen.json", "tags"),
    (
        "VirtualMachineImage_Get_MaximumSet_Gen.json",
        "extendedLocation",
    ),
    (
        "VirtualMachineImage_Get_MaximumSet_Gen.json",
        "properties.plan",
    ),
    (
        "VirtualMachineImage_Get_MaximumSet_Gen.json",
        "properties.automaticOSUpgradeProperties",
    ),
    (
        "VirtualMachineImage_Get_MaximumSet_Gen.json",
        "properties.disallowed",
    ),
    (
        "VirtualMachineImage_Get_MaximumSet_Gen.json",
        "properties.imageDeprecationStatus",
    ),
];

/// Parts of a GET example's response that cannot seed the resource it describes, by pointer: the
/// generated example's placement group id is a path template naming an availability set, which
/// ARM (and the emulator) refuses as a reference that does not exist.
const SEED_ARTIFACTS: &[(&str, &str)] = &[
    (
        "AvailabilitySet_Get_MaximumSet_Gen.json",
        "/properties/proximityPlacementGroup",
    ),
    // The compute examples' subnet id is `test-subnet-resource-id`, not an ARM id: AML, like the
    // emulator, refuses a subnet that does not exist.
    (
        "Compute/get/AmlCompute.json",
        "/properties/properties/subnet",
    ),
    (
        "Compute/createOrUpdate/AmlCompute.json",
        "/properties/properties/subnet",
    ),
];

/// PUT examples that update a resource the example assumes exists: their bodies carry only what
/// changes (this one has no vmSize, which a creation requires), so the resource is first created
/// from the example's own 200 response.
const UPDATE_EXAMPLES: &[&str] = &["Compute/createOrUpdate/AmlCompute.json"];

/// PUT examples that change a resource the example assumes exists, whose answers cannot create
/// it (the stopped pool's has no size): the resource is first made with a minimal body.
const UPDATES_OF_EXISTING: &[&str] = &["AgentPools_Stop.json"];

/// Providers whose specs are in shared/azure-specs for work not done yet, with the issue that
/// brings them to the emulator. Their examples are not replayed; instead the test checks that the
/// emulator still refuses their resource types, so a provider that gets emulated must leave this
/// list (and have its examples replayed) instead of hiding behind it.
const NOT_YET_EMULATED: &[(&str, &str)] = &[];

/// Operations of emulated providers whose specs arrived for work not done yet, by operationId,
/// with the issue that brings them, and a request path of the operation the emulator must still
/// refuse as not implemented (checked like [`NOT_YET_EMULATED`]).
const OPERATIONS_NOT_YET_EMULATED: &[(&str, &str, &str)] = &[];

/// Path parameters of examples whose placeholders ARM refuses before it reaches what the example
/// shows (`roleDefinitionId` must be a GUID; `scope` must be an ARM scope), by example file:
/// replaced with values of the same meaning, so the example's answer is still checked.
const EXAMPLE_PARAMETERS: &[(&str, &str, &str)] = &[
    // The example's version is a placeholder; the emulator's marketplace has one version of
    // every image (src/emulator/compute/images.rs).
    (
        "VirtualMachineImage_Get_MaximumSet_Gen.json",
        "version",
        "1.0.20241101",
    ),
    (
        "GetRoleDefinitionByName.json",
        "scope",
        "subscriptions/00000000-0000-0000-0000-000000000000",
    ),
    (
        "GetRoleDefinitionByName.json",
        "roleDefinitionId",
        "6a3f1a4e-8c3b-4f0e-9d52-1f0c2b7e5a10",
    ),
    (
        "PutRoleDefinition.json",
        "scope",
        "subscriptions/00000000-0000-0000-0000-000000000000",
    ),
    (
        "PutRoleDefinition.json",
        "roleDefinitionId",
        "6a3f1a4e-8c3b-4f0e-9d52-1f0c2b7e5a10",
    ),
];

/// PUT examples whose body parameter holds `{}` and whose body sits under another key (the
/// role definition example puts it in `body.roleDefinition`), with that key's pointer. The
/// assignable scope is the replaced `scope` (the example's `/subscriptions/subId` is not a
/// subscription id).
const EXAMPLE_BODIES: &[(&str, &str)] =
    &[("PutRoleDefinition.json", "/parameters/body/roleDefinition")];

/// The example's value of path parameter `name`, replaced per [`EXAMPLE_PARAMETERS`].
fn example_parameter(file: &str, name: &str, given: &Value) -> String {
    if let Some((_, _, value)) = EXAMPLE_PARAMETERS
        .iter()
        .find(|(f, n, _)| file.ends_with(f) && *n == name)
    {
        return (*value).to_owned();
    }
    match given {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The body of an [`EXAMPLE_BODIES`] example, with its assignable scopes made the scope the
/// request names.
fn example_body(file: &str, example: &Value, scope: &str) -> Option<Value> {
    let (_, pointer) = EXAMPLE_BODIES.iter().find(|(f, _)| file.ends_with(f))?;
    let mut body = example.pointer(pointer)?.clone();
    let map = body.as_object_mut()?;
    for read_only in ["id", "name", "type"] {
        map.remove(read_only);
    }
    let mut properties = serde_json::Map::new();
    for (key, value) in std::mem::take(map) {
        properties.insert(key, value);
    }
    properties.insert("assignableScopes".into(), json!([scope]));
    Some(json!({ "properties": properties }))
}

/// The principal the role assignment examples name: a user of the examples' directory, which
/// the emulator (without Entra ID) is told exists.
const EXAMPLE_PRINCIPAL: &str = "ce2ce14e-85d7-4629-bdbc-454d0519d987";

/// What a role assignment example assumes exists: the role definition it names (a custom role
/// assignable in the example's subscription) and, for a read or delete, the assignment itself,
/// created from the example's answer.
async fn authorization_prerequisites(
    http: &reqwest::Client,
    endpoint: &str,
    example: &Value,
    decoded: &str,
    method: &str,
) {
    let answer = &example["responses"]["200"]["body"]["properties"];
    let asked = &example["parameters"]["parameters"]["properties"];
    let role = asked["roleDefinitionId"]
        .as_str()
        .or_else(|| answer["roleDefinitionId"].as_str());
    let sub = decoded.split('/').nth(2).unwrap_or_default();
    if let Some((scope, _)) =
        decoded.split_once("/providers/Microsoft.Authorization/roleDefinitions/")
    {
        // A role definition example: a read needs the definition, made with what its answer
        // shows, assignable where the request looks.
        if method != "PUT" && answer.is_object() {
            let body = json!({"properties": {"roleName": answer["roleName"],
                "description": answer["description"], "permissions": answer["permissions"],
                "assignableScopes": [scope]}});
            let made = send(
                http,
                endpoint,
                "PUT",
                &versioned(decoded, "2022-04-01"),
                Some(&body),
            )
            .await;
            assert_eq!(
                made.status, 201,
                "prerequisite role {decoded}: {:?}",
                made.body
            );
        }
        return;
    }
    if let Some(guid) = role.and_then(|r| r.rsplit('/').next()) {
        let scope = format!("/subscriptions/{sub}");
        let path = format!("{scope}/providers/Microsoft.Authorization/roleDefinitions/{guid}");
        let body = json!({"properties": {"roleName": format!("example role {guid}"),
            "permissions": [{"actions": ["*/read"]}], "assignableScopes": [scope]}});
        let made = send(
            http,
            endpoint,
            "PUT",
            &versioned(&path, "2022-04-01"),
            Some(&body),
        )
        .await;
        assert_eq!(
            made.status, 201,
            "prerequisite role {path}: {:?}",
            made.body
        );
    }
    if method != "PUT" && answer.is_object() {
        let body = json!({"properties": {"roleDefinitionId": answer["roleDefinitionId"],
            "principalId": answer["principalId"], "principalType": answer["principalType"]}});
        let made = send(
            http,
            endpoint,
            "PUT",
            &versioned(decoded, "2022-04-01"),
            Some(&body),
        )
        .await;
        assert_eq!(
            made.status, 201,
            "prerequisite assignment {decoded}: {:?}",
            made.body
        );
    }
}

/// Values of examples that no region offers today, by example file, pointer (under the
/// request body and every response body) and the value a region does offer: the AKS examples
/// run Kubernetes 1.9.6 (out of support for years; regions refuse it with
/// K8sVersionNotSupported) on Standard_DS1_v2 System pools (1 vCPU, below the 2 vCPUs the spec's
/// own `AgentPoolMode` description requires of a System pool). The example is otherwise replayed
/// as written.
const REGION_VALUES: &[(&str, &str, &str)] = &[
    (
        "ManagedClustersGet.json",
        "/properties/kubernetesVersion",
        "1.33",
    ),
    (
        "ManagedClustersCreate_Update.json",
        "/properties/kubernetesVersion",
        "1.33",
    ),
    (
        "ManagedClustersGet.json",
        "/properties/agentPoolProfiles/0/vmSize",
        "Standard_D2_v2",
    ),
    (
        "ManagedClustersCreate_Update.json",
        "/properties/agentPoolProfiles/0/vmSize",
        "Standard_D2_v2",
    ),
    (
        "ManagedClustersGet.json",
        "/properties/agentPoolProfiles/0/orchestratorVersion",
        "1.33",
    ),
    (
        "ManagedClustersCreate_Update.json",
        "/properties/agentPoolProfiles/0/orchestratorVersion",
        "1.33",
    ),
    ("AgentPoolsGet.json", "/properties/vmSize", "Standard_D2_v2"),
    (
        "AgentPoolsGet.json",
        "/properties/orchestratorVersion",
        "1.33",
    ),
    (
        "AgentPoolsCreate_Update.json",
        "/properties/vmSize",
        "Standard_D2_v2",
    ),
    (
        "AgentPoolsCreate_Update.json",
        "/properties/orchestratorVersion",
        "1.33",
    ),
];

/// The example with [`REGION_VALUES`] put in, where the pointer exists.
fn with_region_values(file: &str, example: &Value) -> Value {
    let mut fixed = example.clone();
    let bodies = ["/parameters/parameters".to_owned()].into_iter().chain(
        example["responses"]
            .as_object()
            .into_iter()
            .flat_map(|r| r.keys())
            .map(|status| format!("/responses/{status}/body")),
    );
    for body in bodies.collect::<Vec<_>>() {
        for (_, pointer, value) in REGION_VALUES.iter().filter(|(f, _, _)| file.ends_with(f)) {
            if let Some(slot) = fixed.pointer_mut(&format!("{body}{pointer}")) {
                *slot = json!(value);
            }
        }
    }
    fixed
}

/// The provider namespace an operation's path names last (`.../providers/NS/...`).
fn provider_of(template: &str) -> Option<&str> {
    template
        .rsplit_once("/providers/")
        .and_then(|(_, rest)| rest.split('/').next())
}

// One example after another, each set up, sent and judged in sequence: it reads best whole.
#[allow(clippy::too_many_lines)]
#[tokio::test]
async fn every_example_present_replays_against_the_emulator() {
    let Some(specs) = specs() else { return };
    let http = reqwest::Client::new();
    let mut replayed = Vec::new();
    let mut failures = Vec::new();
    let mut not_yet = BTreeSet::new();
    for example in specs.examples() {
        let op = example.operation;
        if let Some((ns, _)) = provider_of(op.template()).and_then(|ns| {
            NOT_YET_EMULATED
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(ns))
        }) {
            not_yet.insert(*ns);
            continue;
        }
        let fixed = with_region_values(&example.file, example.body);
        let example_json = &fixed;
        let params = &example_json["parameters"];
        let handle = emulator().await;
        let endpoint = handle.endpoint();
        let mut path = op.template().to_owned();
        if let Some((id, issue, _)) = OPERATIONS_NOT_YET_EMULATED
            .iter()
            .find(|(id, _, _)| *id == op.operation_id())
        {
            not_yet.insert(*id);
            let _ = issue;
            continue;
        }
        for name in op.path_parameters() {
            let mut value = example_parameter(&example.file, &name, &params[&name]);
            if name == "resourceGroupName" {
                // A placeholder such as `{resourceGroupName}` is not a valid group name, for ARM
                // as for the emulator; the example means "some group".
                value = value.replace(['{', '}'], "");
            }
            path = path.replace(&format!("{{{name}}}"), &encode_segment(&value));
        }
        let decoded = path
            .replace("%7B", "{")
            .replace("%7D", "}")
            .replace("%20", " ");
        let mut query = format!("api-version={}", op.api_version());
        let body_param = op.body_parameter();
        for (name, value) in params.as_object().into_iter().flatten() {
            let in_path = op.path_parameters().contains(name);
            if in_path
                || name == "api-version"
                || Some(name.as_str()) == body_param
                || value.is_object()
                || value.is_array()
            {
                continue;
            }
            let value = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            query.push('&');
            query.push_str(&encode_segment(name));
            query.push('=');
            query.push_str(&encode_segment(&value));
        }
        let scope = format!(
            "/{}",
            example_parameter(&example.file, "scope", &params["scope"])
        );
        let body = example_body(&example.file, example_json, &scope)
            .or_else(|| body_param.and_then(|p| params.get(p)).cloned());
        let method = op.method().to_ascii_uppercase();
        // Prerequisites: the group, every resource the body refers to, and the target itself
        // for reads, deletes and actions (or its parent for a child PUT).
        if let Some(group) = group_of(&decoded)
            && group != decoded
        {
            ensure(&http, &endpoint, &group).await;
        }
        // A compute's workspace, before anything is seeded into it.
        if let Some((workspace, _)) = decoded.split_once("/computes/") {
            ensure(&http, &endpoint, workspace).await;
        }
        let seed_of = |pointer: &str| {
            let mut seed = example_json.pointer(pointer)?.clone();
            for (_, artifact) in SEED_ARTIFACTS
                .iter()
                .filter(|(file, _)| example.file.ends_with(file))
            {
                let (parent, key) = artifact.rsplit_once('/').unwrap_or_default();
                if let Some(map) = seed.pointer_mut(parent).and_then(Value::as_object_mut) {
                    map.remove(key);
                }
            }
            Some(seed)
        };
        if provider_of(op.template()) == Some("Microsoft.Authorization") {
            authorization_prerequisites(&http, &endpoint, example_json, &decoded, &method).await;
        }
        let mut ids = BTreeSet::new();
        if let Some(body) = &body {
            referenced_ids(body, &mut ids);
            workspace_references(body, &mut ids);
        }
        if method == "GET"
            && let Some(seed) = seed_of("/responses/200/body")
        {
            workspace_references(&seed, &mut ids);
        }
        ids.retain(|id| {
            !PREREQ_NOT_EMULATED
                .iter()
                .any(|(part, _)| id.to_ascii_lowercase().contains(part))
        });
        for id in &ids {
            ensure(&http, &endpoint, id).await;
        }
        if method == "PUT"
            && UPDATE_EXAMPLES.iter().any(|f| example.file.ends_with(f))
            && let Some(seed) = seed_of("/responses/200/body")
        {
            put_and_wait(&http, &endpoint, &decoded, op.api_version(), &seed).await;
        }
        if method == "PUT"
            && UPDATES_OF_EXISTING
                .iter()
                .any(|f| example.file.ends_with(f))
        {
            ensure(&http, &endpoint, &decoded).await;
        }
        let target_segments = decoded.split('/').count();
        let resource_like = decoded.contains("/providers/") && group_of(&decoded).is_some();
        if resource_like && method != "PUT" {
            let target = if target_segments % 2 == 0 {
                decoded
                    .rsplit_once('/')
                    .map_or(decoded.clone(), |(p, _)| p.to_owned())
            } else {
                decoded.clone()
            };
            // A GET example describes a resource created with what its response shows: create it
            // from that body (ARM ignores read-only properties in requests, as the emulator does).
            let seed = seed_of("/responses/200/body").filter(|b| {
                method == "GET" && b.get("properties").is_some() && b.get("location").is_some()
            });
            if let Some(seed) = seed {
                put_and_wait(&http, &endpoint, &target, op.api_version(), &seed).await;
            }
            ensure(&http, &endpoint, &target).await;
        } else if resource_like
            && (decoded.contains("/subnets/")
                || decoded.contains("/blobServices/")
                || decoded.contains("/fileServices/")
                || decoded.contains("/agentPools/"))
        {
            let parent = decoded
                .split("/agentPools/")
                .next()
                .unwrap_or(&decoded)
                .split("/subnets/")
                .next()
                .unwrap_or(&decoded)
                .split("/blobServices/")
                .next()
                .unwrap_or(&decoded)
                .split("/fileServices/")
                .next()
                .unwrap_or(&decoded)
                .to_owned();
            ensure(&http, &endpoint, &parent).await;
        }
        let answer = send(
            &http,
            &endpoint,
            &method,
            &format!("{path}?{query}"),
            body.as_ref(),
        )
        .await;
        let label = format!("{} ({method} {})", example.title, example.file);
        let responses = example_json["responses"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        if !responses.contains_key(&answer.status.to_string()) {
            failures.push(format!(
                "{label}: status {} not among {:?}: {:?}",
                answer.status,
                responses.keys().collect::<Vec<_>>(),
                answer.body
            ));
            continue;
        }
        let violations = op.validate_response(answer.status, answer.body.as_ref());
        let strict = significant(&violations, true);
        if !strict.is_empty() {
            failures.push(format!(
                "{label}: response does not validate:{}",
                describe(&strict)
            ));
        }
        if let (Some(ours), Some(theirs)) = (
            &answer.body,
            responses[&answer.status.to_string()].get("body"),
        ) {
            let missing: Vec<String> = missing_keys(ours, theirs)
                .into_iter()
                .filter(|k| !NOT_EMULATED.contains(&k.as_str()))
                .filter(|k| {
                    !EXAMPLE_ARTIFACTS
                        .iter()
                        .any(|(file, key)| example.file.ends_with(file) && key == k)
                })
                .collect();
            if !missing.is_empty() {
                failures.push(format!(
                    "{label}: response lacks the example's keys {missing:?}"
                ));
            }
        }
        replayed.push(label);
        handle.shutdown().await;
    }
    assert!(
        failures.is_empty(),
        "{} of {} examples failed:\n{}",
        failures.len(),
        replayed.len() + failures.len(),
        failures.join("\n")
    );
    assert!(
        replayed.len() >= 35,
        "replayed only {} examples",
        replayed.len()
    );
    // Every provider left out must still be one the emulator says it does not implement (501
    // naming the request, never an ARM-looking 404): once it is emulated, its examples are
    // replayed like the rest.
    let handle = emulator().await;
    let group = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg";
    ensure(&http, &handle.endpoint(), group).await;
    let providers = NOT_YET_EMULATED
        .iter()
        .map(|(ns, issue)| (format!("{group}/providers/{ns}/things/x"), *ns, *issue));
    let operations = OPERATIONS_NOT_YET_EMULATED
        .iter()
        .map(|(id, issue, path)| ((*path).to_owned(), *id, *issue));
    for (resource, ns, issue) in providers.chain(operations) {
        let path = format!("{resource}?api-version=2024-01-01");
        let answer = send(&http, &handle.endpoint(), "GET", &path, None).await;
        let error = |field: &str| {
            answer
                .body
                .as_ref()
                .and_then(|b| b.pointer(&format!("/error/{field}")))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let code = error("code");
        assert!(
            answer.status == 501 && code == "NotImplemented",
            "{ns} is listed as not yet emulated ({issue}) but the emulator answered {} {code}: \
             remove it from NOT_YET_EMULATED (or OPERATIONS_NOT_YET_EMULATED) so its examples \
             are replayed",
            answer.status
        );
        assert_eq!(
            error("message"),
            format!(
                "The dsinfra emulator does not implement GET {resource}; see docs/emulator.md \
                 for what it covers."
            )
        );
    }
    handle.shutdown().await;
    eprintln!(
        "replayed {} examples; not yet emulated, left out: {not_yet:?}",
        replayed.len()
    );
}
