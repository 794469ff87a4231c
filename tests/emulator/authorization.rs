//! Managed identities and Microsoft.Authorization: a VM's system-assigned identity, the IMDS
//! token stand-in, role definitions and assignments, and the access check ARM makes for a
//! managed identity's token. Role assignment answers are validated against the spec.

use super::providers::{conforms, conforms_request};
use super::*;

const AUTHZ: &str = "2022-04-01";
const VM_CONTRIBUTOR: &str = "9980e02c-c2be-4d73-94e8-173b1dc7cf3c";
const READER: &str = "acdd72a7-3385-48ef-bd42-f606fba81ae7";
const ROLE: &str = "4d8e6c3a-1b2f-4a5c-9d7e-0f1a2b3c4d5e";
const ASSIGNMENT: &str = "7c1b2a3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";

fn vm_id(rg: &str, name: &str) -> String {
    res(rg, &format!("Microsoft.Compute/virtualMachines/{name}"))
}

fn role_path(scope: &str, guid: &str) -> String {
    format!("{scope}/providers/Microsoft.Authorization/roleDefinitions/{guid}")
}

fn assignment_path(scope: &str, guid: &str) -> String {
    format!("{scope}/providers/Microsoft.Authorization/roleAssignments/{guid}")
}

/// The custom role dsinfra's idle watcher gets: read, deallocate and start VMs, assignable in
/// the experiment's group.
fn idle_role(rg: &str, actions: &[&str]) -> Value {
    json!({"properties": {
        "roleName": format!("dsinfra idle park exp {rg}"),
        "description": "test",
        "type": "CustomRole",
        "permissions": [{"actions": actions, "notActions": []}],
        "assignableScopes": [rg_path(rg)],
    }})
}

fn assignment(sub_role: &str, principal: &str, principal_type: Option<&str>) -> Value {
    let mut props = json!({
        "roleDefinitionId": format!("/subscriptions/{SUB}/providers/Microsoft.Authorization/roleDefinitions/{sub_role}"),
        "principalId": principal,
    });
    if let Some(kind) = principal_type {
        props["principalType"] = json!(kind);
    }
    json!({"properties": props})
}

/// An emulator that requires its own token, as `dsinfra emulator` may.
async fn env_with_token() -> Env {
    env(EmulatorConfig {
        required_token: Some("test-token".into()),
        ..fast()
    })
    .await
}

impl Env {
    /// A running VM with a system-assigned identity; returns its principal.
    async fn vm_with_identity(&self, rg: &str, name: &str) -> String {
        self.network(rg).await;
        let mut body = vm_body(rg, "Standard_D2s_v5");
        body["identity"] = json!({"type": "SystemAssigned"});
        let resp = self.create(&vm_id(rg, name), COMPUTE, &body).await;
        resp.body["identity"]["principalId"]
            .as_str()
            .expect("a principal on the PUT's answer")
            .to_owned()
    }

    async fn imds(&self, vm: &str, metadata: bool) -> Resp {
        let url = format!(
            "{}/_emulator/imds{vm}/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https%3A%2F%2Fmanagement.azure.com%2F",
            self.handle.endpoint()
        );
        let mut request = self.http.get(url);
        if metadata {
            request = request.header("Metadata", "true");
        }
        let response = request.send().await.expect("IMDS answers");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.expect("body");
        Resp {
            status,
            headers,
            body: serde_json::from_str(&text).unwrap_or(Value::Null),
        }
    }

    async fn token_of(&self, vm: &str) -> String {
        let resp = self.imds(vm, true).await;
        assert_eq!(resp.status, 200, "{:?}", resp.body);
        resp.body["access_token"]
            .as_str()
            .expect("a token")
            .to_owned()
    }

    async fn deallocate_with(&self, vm: &str, token: &str) -> Resp {
        let url = with_version(&format!("{vm}/deallocate"), COMPUTE);
        self.send("POST", &url, None, Some(token)).await
    }

    async fn put_checked(&self, path: &str, body: &Value) -> Resp {
        conforms_request("PUT", path, AUTHZ, body);
        let resp = self.put(path, AUTHZ, body).await;
        conforms("PUT", path, AUTHZ, &resp);
        resp
    }
}

#[tokio::test]
async fn a_system_assigned_identity_lives_with_its_vm() {
    let env = env(fast()).await;
    let vm = vm_id("rg", "head");
    let principal = env.vm_with_identity("rg", "head").await;
    assert!(uuid::Uuid::parse_str(&principal).is_ok(), "{principal}");
    let got = env.get(&vm, COMPUTE).await;
    conforms("GET", &vm, COMPUTE, &got);
    assert_eq!(got.body["identity"]["type"], "SystemAssigned");
    assert_eq!(got.body["identity"]["principalId"], principal.as_str());
    assert!(got.body["identity"]["tenantId"].is_string());
    assert!(
        !got.body.to_string().contains("_emulator"),
        "bookkeeping never shows: {}",
        got.body
    );

    // Stable across an update (PUT and PATCH), gone when the type becomes None.
    let mut body = vm_body("rg", "Standard_D2s_v5");
    body["identity"] = json!({"type": "SystemAssigned"});
    body["tags"] = json!({"k": "v"});
    conforms_request("PUT", &vm, COMPUTE, &body);
    let updated = env.create(&vm, COMPUTE, &body).await;
    conforms("PUT", &vm, COMPUTE, &updated);
    assert_eq!(updated.body["identity"]["principalId"], principal.as_str());
    let patched = env
        .call("PATCH", &vm, COMPUTE, Some(&json!({"tags": {"k": "w"}})))
        .await;
    assert_eq!(
        patched.body["identity"]["principalId"],
        principal.as_str(),
        "{patched:?}"
    );
    let removed = env
        .call(
            "PATCH",
            &vm,
            COMPUTE,
            Some(&json!({"identity": {"type": "None"}})),
        )
        .await;
    assert!(removed.body.get("identity").is_none(), "{removed:?}");
    let imds = env.imds(&vm, true).await;
    assert_eq!(
        (imds.status, imds.body.clone()),
        (
            400,
            json!({"error": "invalid_request", "error_description": "Identity not found"})
        )
    );

    // With a required token (`dsinfra emulator --token`), IMDS tokens are valid as well.
    let required = env_with_token().await;
    required.vm_with_identity("rg", "head").await;
    let token = required.token_of(&vm).await;
    let read = required
        .send("GET", &with_version(&vm, COMPUTE), None, Some(&token))
        .await;
    assert_eq!(
        read.code(),
        "AuthorizationFailed",
        "authenticated, then denied: {read:?}"
    );

    // A new identity is a new principal.
    let again = env
        .call(
            "PATCH",
            &vm,
            COMPUTE,
            Some(&json!({"identity": {"type": "SystemAssigned"}})),
        )
        .await;
    let second = again.body["identity"]["principalId"]
        .as_str()
        .expect("principal");
    assert_ne!(second, principal);

    // Deleting the VM deletes its principal: it can no longer be assigned a role.
    let deleted = env.delete(&vm, COMPUTE).await;
    if let Some(url) = deleted.header("azure-asyncoperation") {
        env.poll_status(url).await;
    }
    let orphan = env
        .put(
            &format!(
                "{}/providers/Microsoft.Authorization/roleAssignments/{ASSIGNMENT}",
                rg_path("rg")
            ),
            AUTHZ,
            &assignment(READER, second, Some("ServicePrincipal")),
        )
        .await;
    assert_eq!(orphan.code(), "PrincipalNotFound", "{orphan:?}");

    let mut user = vm_body("rg", "Standard_D2s_v5");
    user["identity"] = json!({"type": "UserAssigned", "userAssignedIdentities": {}});
    let refused = env.put(&vm_id("rg", "other"), COMPUTE, &user).await;
    assert_eq!(refused.status, 501, "{refused:?}");
    assert!(refused.message().contains("user-assigned"), "{refused:?}");
}

#[tokio::test]
async fn imds_answers_as_azure_does() {
    let env = env(fast()).await;
    let vm = vm_id("rg", "head");
    let principal = env.vm_with_identity("rg", "head").await;

    let bare = env.imds(&vm, false).await;
    assert_eq!(
        (bare.status, bare.body.clone()),
        (
            400,
            json!({"error": "invalid_request", "error_description": "Required metadata header not specified"})
        )
    );

    let ok = env.imds(&vm, true).await;
    assert_eq!(ok.status, 200, "{:?}", ok.body);
    let body = &ok.body;
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["resource"], "https://management.azure.com/");
    assert_eq!(body["expires_in"], "86399");
    assert_eq!(body["ext_expires_in"], "86399");
    let not_before: i64 = body["not_before"]
        .as_str()
        .expect("string")
        .parse()
        .expect("secs");
    let expires_on: i64 = body["expires_on"]
        .as_str()
        .expect("string")
        .parse()
        .expect("secs");
    assert_eq!(expires_on - not_before, 86_399);
    assert!(uuid::Uuid::parse_str(body["client_id"].as_str().expect("client")).is_ok());
    let token = body["access_token"].as_str().expect("token");
    assert!(
        !token.contains(&principal),
        "opaque: the token names nobody"
    );
    let other = env.token_of(&vm).await;
    assert_ne!(token, other, "each token is new");

    // Deallocated, the host does not answer.
    let resp = env.post(&format!("{vm}/deallocate"), COMPUTE).await;
    if let Some(url) = resp.header("azure-asyncoperation") {
        env.poll_status(url).await;
    }
    let parked = env.imds(&vm, true).await;
    assert_eq!(parked.status, 503, "{:?}", parked.body);

    // A VM without an identity.
    env.create(
        &vm_id("rg", "plain"),
        COMPUTE,
        &vm_body("rg", "Standard_D2s_v5"),
    )
    .await;
    let none = env.imds(&vm_id("rg", "plain"), true).await;
    assert_eq!(
        (none.status, none.body["error_description"].clone()),
        (400, json!("Identity not found"))
    );
}

#[tokio::test]
async fn a_managed_identity_may_do_only_what_its_roles_allow() {
    let env = env(fast()).await;
    let vm = vm_id("rg", "head");
    let principal = env.vm_with_identity("rg", "head").await;
    let token = env.token_of(&vm).await;

    // No assignment: ARM's AuthorizationFailed, exactly.
    let denied = env.deallocate_with(&vm, &token).await;
    assert_eq!((denied.status, denied.code()), (403, "AuthorizationFailed"));
    assert_eq!(
        denied.message(),
        format!(
            "The client '{principal}' with object id '{principal}' does not have authorization \
             to perform action 'Microsoft.Compute/virtualMachines/deallocate/action' over scope \
             '{vm}' or the scope is invalid. If access was recently granted, please refresh your \
             credentials."
        )
    );

    // The idle role, assigned at the group: read and deallocate pass, the rest does not.
    let group = rg_path("rg");
    let role = env
        .put(
            &role_path(&group, ROLE),
            AUTHZ,
            &idle_role(
                "rg",
                &[
                    "Microsoft.Compute/virtualMachines/read",
                    "Microsoft.Compute/virtualMachines/start/action",
                ],
            ),
        )
        .await;
    assert_eq!(role.status, 201, "{role:?}");
    let assigned = env
        .put_checked(
            &assignment_path(&group, ASSIGNMENT),
            &assignment(ROLE, &principal, Some("ServicePrincipal")),
        )
        .await;
    assert_eq!(assigned.status, 201, "{assigned:?}");
    let read = env
        .send("GET", &with_version(&vm, COMPUTE), None, Some(&token))
        .await;
    assert_eq!(read.status, 200, "{read:?}");
    let lacking = env.deallocate_with(&vm, &token).await;
    assert_eq!(
        (lacking.status, lacking.code()),
        (403, "AuthorizationFailed"),
        "a role without deallocate: {lacking:?}"
    );

    // With deallocate in the role the same token may park the VM.
    let role = env
        .put(
            &role_path(&group, ROLE),
            AUTHZ,
            &idle_role(
                "rg",
                &[
                    "Microsoft.Compute/virtualMachines/read",
                    "Microsoft.Compute/virtualMachines/deallocate/action",
                    "Microsoft.Compute/virtualMachines/start/action",
                ],
            ),
        )
        .await;
    assert_eq!(role.status, 201, "{role:?}");
    let parked = env.deallocate_with(&vm, &token).await;
    assert!(matches!(parked.status, 200 | 202), "{parked:?}");
    let delete = env
        .send("DELETE", &with_version(&vm, COMPUTE), None, Some(&token))
        .await;
    assert_eq!(delete.code(), "AuthorizationFailed", "{delete:?}");

    // notActions take away what actions grant; wildcards match.
    let role = env
        .put(
            &role_path(&group, ROLE),
            AUTHZ,
            &json!({"properties": {
                "roleName": "dsinfra idle park exp rg",
                "permissions": [{"actions": ["Microsoft.Compute/*"],
                                 "notActions": ["Microsoft.Compute/virtualMachines/deallocate/action"]}],
                "assignableScopes": [group],
            }}),
        )
        .await;
    assert_eq!(role.status, 201, "{role:?}");
    let excluded = env.deallocate_with(&vm, &token).await;
    assert_eq!(excluded.code(), "AuthorizationFailed", "{excluded:?}");

    // Users' tokens are unaffected.
    let user = env.post(&format!("{vm}/deallocate"), COMPUTE).await;
    assert!(matches!(user.status, 200 | 202), "{user:?}");
}

#[tokio::test]
async fn a_new_principal_is_not_found_for_a_while_unless_it_is_a_service_principal() {
    let env = env(EmulatorConfig {
        latency_scale: 0.01,
        ..EmulatorConfig::default()
    })
    .await;
    let group = rg_path("rg");
    env.network("rg").await;
    let mut body = vm_body("rg", "Standard_D2s_v5");
    body["identity"] = json!({"type": "SystemAssigned"});
    // Not waiting for the VM: its principal exists from the PUT on, as on Azure.
    let vm = env.put(&vm_id("rg", "head"), COMPUTE, &body).await;
    let principal = vm.body["identity"]["principalId"]
        .as_str()
        .expect("a principal")
        .to_owned();
    let too_soon = env
        .put_checked(
            &assignment_path(&group, ASSIGNMENT),
            &assignment(READER, &principal, None),
        )
        .await;
    assert_eq!(
        (too_soon.status, too_soon.code()),
        (400, "PrincipalNotFound")
    );
    assert!(
        too_soon.message().contains(&principal.replace('-', "")),
        "{too_soon:?}"
    );
    let service = env
        .put_checked(
            &assignment_path(&group, ASSIGNMENT),
            &assignment(READER, &principal, Some("ServicePrincipal")),
        )
        .await;
    assert_eq!(service.status, 201, "{service:?}");
    // After the (scaled) replication delay the directory knows it.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let later = env
        .put_checked(
            &assignment_path(&group, "0a1b2c3d-0000-4000-8000-000000000001"),
            &assignment(VM_CONTRIBUTOR, &principal, None),
        )
        .await;
    assert_eq!(later.status, 201, "{later:?}");

    // A principal that never existed.
    let nobody = env
        .put_checked(
            &assignment_path(&group, "0a1b2c3d-0000-4000-8000-000000000002"),
            &assignment(
                READER,
                "11111111-2222-3333-4444-555555555555",
                Some("ServicePrincipal"),
            ),
        )
        .await;
    assert_eq!(nobody.code(), "PrincipalNotFound", "{nobody:?}");
}

/// Issue 30: with `replication_lag`, a new principal (even named as a ServicePrincipal) and a new
/// custom role stay invisible to assignments for that long after they were made, as Microsoft
/// Entra ID's replication sometimes leaves them; then the same PUT lands.
#[tokio::test]
async fn a_replication_lag_hides_new_principals_and_new_roles_for_a_while() {
    let env = env(EmulatorConfig {
        latency_scale: 0.01,
        replication_lag: Duration::from_mins(1),
        principals: vec!["11111111-2222-3333-4444-555555555555".into()],
        ..EmulatorConfig::default()
    })
    .await;
    let group = rg_path("rg");
    env.network("rg").await;
    let mut body = vm_body("rg", "Standard_D2s_v5");
    body["identity"] = json!({"type": "SystemAssigned"});
    let vm = env.put(&vm_id("rg", "head"), COMPUTE, &body).await;
    let principal = vm.body["identity"]["principalId"]
        .as_str()
        .expect("a principal")
        .to_owned();
    let role = env
        .put_checked(
            &role_path(&group, ROLE),
            &idle_role("rg", &["Microsoft.Compute/virtualMachines/read"]),
        )
        .await;
    assert_eq!(role.status, 201, "{role:?}");
    let to_new_role = |principal: &str| {
        let mut body = assignment(READER, principal, Some("ServicePrincipal"));
        body["properties"]["roleDefinitionId"] = json!(format!(
            "{group}/providers/Microsoft.Authorization/roleDefinitions/{ROLE}"
        ));
        body
    };
    let too_soon = env
        .put_checked(
            &assignment_path(&group, ASSIGNMENT),
            &assignment(READER, &principal, Some("ServicePrincipal")),
        )
        .await;
    assert_eq!(
        (too_soon.status, too_soon.code()),
        (400, "PrincipalNotFound"),
        "{too_soon:?}"
    );
    let declared = "11111111-2222-3333-4444-555555555555";
    let role_too_soon = env
        .put_checked(&assignment_path(&group, ASSIGNMENT), &to_new_role(declared))
        .await;
    assert_eq!(
        (role_too_soon.status, role_too_soon.code()),
        (400, "RoleDefinitionDoesNotExist"),
        "{role_too_soon:?}"
    );
    // 60 s at scale 0.01 is 600 ms.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let later = env
        .put_checked(
            &assignment_path(&group, ASSIGNMENT),
            &to_new_role(&principal),
        )
        .await;
    assert_eq!(later.status, 201, "{later:?}");
}

/// Issue 30: a caller the emulator knows (its token, its principal) may do what its role
/// assignments allow: a Contributor writes resources but no role definition or assignment, and
/// `permissions` at its resource group says so, as ARM's Permissions_ListForResourceGroup does
/// (the answer checked against the spec). A token with full access holds `*`; a group that does
/// not exist is ResourceGroupNotFound.
#[tokio::test]
async fn a_contributor_caller_cannot_write_roles_and_its_permissions_say_so() {
    const CONTRIBUTOR: &str = "b24988ac-6180-42a0-ab88-20f7382dd24c";
    const USER: &str = "5a5a5a5a-1111-4222-8333-944444444444";
    let env = env(EmulatorConfig {
        callers: vec![emulator::Caller {
            token: "contributor-token".into(),
            principal: USER.into(),
        }],
        ..fast()
    })
    .await;
    env.group("rg").await;
    let group = rg_path("rg");
    let sub = format!("/subscriptions/{SUB}");
    // The owner (full access) gives the user Contributor at the subscription.
    let given = env
        .put_checked(
            &assignment_path(&sub, ASSIGNMENT),
            &assignment(CONTRIBUTOR, USER, Some("User")),
        )
        .await;
    assert_eq!(given.status, 201, "{given:?}");
    let as_user = |method: &'static str, path: String, body: Option<Value>| {
        let env = &env;
        async move {
            env.send(
                method,
                &with_version(&path, AUTHZ),
                body.as_ref(),
                Some("contributor-token"),
            )
            .await
        }
    };
    let permissions = format!("{group}/providers/Microsoft.Authorization/permissions");
    let mine = as_user("GET", permissions.clone(), None).await;
    assert_eq!(mine.status, 200, "{mine:?}");
    conforms("GET", &permissions, AUTHZ, &mine);
    assert_eq!(mine.body["value"][0]["actions"], json!(["*"]), "{mine:?}");
    assert!(
        mine.body["value"][0]["notActions"]
            .as_array()
            .expect("notActions")
            .contains(&json!("Microsoft.Authorization/*/Write")),
        "{mine:?}"
    );
    let refused = as_user(
        "PUT",
        role_path(&group, ROLE),
        Some(idle_role("rg", &["Microsoft.Compute/virtualMachines/read"])),
    )
    .await;
    assert_eq!(
        (refused.status, refused.body["error"]["code"].as_str()),
        (403, Some("AuthorizationFailed")),
        "{refused:?}"
    );
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Microsoft.Authorization/roleDefinitions/write")),
        "{refused:?}"
    );
    // It may still write resources.
    let network = as_user(
        "PUT",
        res("rg", "Microsoft.Network/networkSecurityGroups/nsg"),
        Some(json!({"location": "eastus"})),
    )
    .await;
    assert!(
        matches!(network.status, 200 | 201 | 400),
        "Contributor passes ARM's access check: {network:?}"
    );
    assert_ne!(network.status, 403, "{network:?}");
    // Full access holds everything; a missing group is not found.
    let owner = env.get(&permissions, AUTHZ).await;
    assert_eq!(
        owner.body["value"],
        json!([{"actions": ["*"], "notActions": [], "dataActions": [], "notDataActions": []}])
    );
    let missing = env
        .get(
            &format!(
                "{}/providers/Microsoft.Authorization/permissions",
                rg_path("nope")
            ),
            AUTHZ,
        )
        .await;
    assert_eq!(
        (missing.status, missing.body["error"]["code"].as_str()),
        (404, Some("ResourceGroupNotFound"))
    );
}

#[tokio::test]
async fn role_assignments_are_checked_and_listed_at_every_scope() {
    let env = env(fast()).await;
    let group = rg_path("rg");
    let vm = vm_id("rg", "head");
    let principal = env.vm_with_identity("rg", "head").await;
    let path = assignment_path(&group, ASSIGNMENT);
    let created = env
        .put_checked(
            &path,
            &assignment(READER, &principal, Some("ServicePrincipal")),
        )
        .await;
    assert_eq!(created.status, 201, "{created:?}");
    assert_eq!(created.body["properties"]["scope"], group.as_str());
    assert_eq!(created.body["id"], path.as_str());

    // The same principal, role and scope under another name.
    let twin = env
        .put_checked(
            &assignment_path(&group, "0a1b2c3d-0000-4000-8000-000000000003"),
            &assignment(READER, &principal, Some("ServicePrincipal")),
        )
        .await;
    assert_eq!(
        (twin.status, twin.code(), twin.message()),
        (
            409,
            "RoleAssignmentExists",
            "The role assignment already exists."
        )
    );
    let no_role = env
        .put_checked(
            &assignment_path(&group, "0a1b2c3d-0000-4000-8000-000000000004"),
            &assignment(ROLE, &principal, Some("ServicePrincipal")),
        )
        .await;
    assert_eq!(no_role.code(), "RoleDefinitionDoesNotExist", "{no_role:?}");

    // A custom role assignable in the group only cannot be assigned at the subscription.
    let role = env
        .put(
            &role_path(&group, ROLE),
            AUTHZ,
            &idle_role("rg", &["*/read"]),
        )
        .await;
    assert_eq!(role.status, 201, "{role:?}");
    let outside = env
        .put_checked(
            &assignment_path(
                &format!("/subscriptions/{SUB}"),
                "0a1b2c3d-0000-4000-8000-000000000005",
            ),
            &assignment(ROLE, &principal, Some("ServicePrincipal")),
        )
        .await;
    assert_eq!(outside.code(), "RoleDefinitionDoesNotExist", "{outside:?}");
    let on_vm = env
        .put_checked(
            &assignment_path(&vm, "0a1b2c3d-0000-4000-8000-000000000006"),
            &assignment(ROLE, &principal, Some("ServicePrincipal")),
        )
        .await;
    assert_eq!(on_vm.status, 201, "{on_vm:?}");

    // Lists: atScope() at the VM sees the group's assignment and the VM's; by principal at the
    // subscription sees both below it.
    let list = |scope: &str, filter: &str| {
        format!("{scope}/providers/Microsoft.Authorization/roleAssignments?$filter={filter}")
    };
    let at_vm = env.get(&list(&vm, "atScope()"), AUTHZ).await;
    conforms(
        "GET",
        &format!("{vm}/providers/Microsoft.Authorization/roleAssignments"),
        AUTHZ,
        &at_vm,
    );
    assert_eq!(
        at_vm.body["value"].as_array().map(Vec::len),
        Some(2),
        "{at_vm:?}"
    );
    let at_group = env.get(&list(&group, "atScope()"), AUTHZ).await;
    assert_eq!(
        at_group.body["value"].as_array().map(Vec::len),
        Some(1),
        "{at_group:?}"
    );
    let by_principal = env
        .get(
            &list(
                &format!("/subscriptions/{SUB}"),
                &format!("principalId%20eq%20'{principal}'"),
            ),
            AUTHZ,
        )
        .await;
    assert_eq!(
        by_principal.body["value"].as_array().map(Vec::len),
        Some(2),
        "{by_principal:?}"
    );
}

#[tokio::test]
async fn role_definitions_are_found_and_go_with_their_group() {
    let env = env(fast()).await;
    let group = rg_path("rg");
    let principal = env.vm_with_identity("rg", "head").await;
    let path = assignment_path(&group, ASSIGNMENT);
    let role = env
        .put(
            &role_path(&group, ROLE),
            AUTHZ,
            &idle_role("rg", &["*/read"]),
        )
        .await;
    assert_eq!(role.status, 201, "{role:?}");
    let created = env
        .put_checked(
            &path,
            &assignment(ROLE, &principal, Some("ServicePrincipal")),
        )
        .await;
    assert_eq!(created.status, 201, "{created:?}");
    let bad_name = env
        .put(
            &assignment_path(&group, "not-a-guid"),
            AUTHZ,
            &assignment(READER, &principal, Some("ServicePrincipal")),
        )
        .await;
    assert_eq!(
        (bad_name.status, bad_name.code()),
        (400, "InvalidRoleAssignmentId")
    );
    let list = |scope: &str, filter: &str| {
        format!("{scope}/providers/Microsoft.Authorization/roleAssignments?$filter={filter}")
    };

    // Role definitions: built-ins by GUID, custom ones by name.
    let reader = env
        .get(&role_path(&format!("/subscriptions/{SUB}"), READER), AUTHZ)
        .await;
    assert_eq!(
        reader.body["properties"]["roleName"], "Reader",
        "{reader:?}"
    );
    let named = env
        .get(
            &format!(
                "{group}/providers/Microsoft.Authorization/roleDefinitions?$filter=roleName%20eq%20'dsinfra%20idle%20park%20exp%20rg'"
            ),
            AUTHZ,
        )
        .await;
    assert_eq!(named.body["value"][0]["name"], ROLE, "{named:?}");

    // A role in use cannot be deleted; deleting the group takes both with it.
    let in_use = env.delete(&role_path(&group, ROLE), AUTHZ).await;
    assert_eq!(
        (in_use.status, in_use.code()),
        (409, "RoleDefinitionHasAssignments")
    );
    let gone = env.delete(&group, RESOURCES).await;
    if let Some(url) = gone.header("location") {
        env.poll_location(url).await;
    }
    let after = env
        .get(&list(&format!("/subscriptions/{SUB}"), "atScope()"), AUTHZ)
        .await;
    let all = env
        .get(
            &format!("/subscriptions/{SUB}/providers/Microsoft.Authorization/roleAssignments"),
            AUTHZ,
        )
        .await;
    assert_eq!(after.body["value"], json!([]), "{after:?}");
    assert_eq!(all.body["value"], json!([]), "{all:?}");
    let role_gone = env
        .get(&role_path(&format!("/subscriptions/{SUB}"), ROLE), AUTHZ)
        .await;
    assert_eq!(
        role_gone.code(),
        "RoleDefinitionDoesNotExist",
        "{role_gone:?}"
    );
    let deleted = env.delete(&path, AUTHZ).await;
    assert_eq!(deleted.status, 204);
}

/// Issue 29 item 12c: the JavaScript SDK builds `/{scope}/providers/...` from a scope written as
/// `/subscriptions/...`, so its requests start with `//`. ARM serves them as the one-slash path;
/// the emulator kept the `//` in the stored id, and a list by scope missed the assignment.
#[tokio::test]
async fn a_scope_sent_with_a_leading_double_slash_is_the_same_scope() {
    let env = env(fast()).await;
    let group = rg_path("rg");
    let principal = env.vm_with_identity("rg", "head").await;
    let path = assignment_path(&group, ASSIGNMENT);
    let created = env
        .put_checked(
            &format!("/{path}"),
            &assignment(READER, &principal, Some("ServicePrincipal")),
        )
        .await;
    assert_eq!(created.status, 201, "{created:?}");
    assert_eq!(created.body["id"], path.as_str());
    assert_eq!(created.body["properties"]["scope"], group.as_str());
    let listed = env
        .get(
            &format!("{group}/providers/Microsoft.Authorization/roleAssignments?$filter=atScope()"),
            AUTHZ,
        )
        .await;
    let ids: Vec<&str> = listed.body["value"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["id"].as_str())
        .collect();
    assert_eq!(ids, [path.as_str()], "{listed:?}");
    // Read and deleted through the same form.
    assert_eq!(env.get(&format!("/{path}"), AUTHZ).await.status, 200);
    assert_eq!(env.delete(&format!("/{path}"), AUTHZ).await.status, 200);
    assert_eq!(env.get(&path, AUTHZ).await.status, 404);
}
