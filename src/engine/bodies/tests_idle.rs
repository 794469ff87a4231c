//! Issue 18 (decision 52): the head's identity, the idle role and its assignment, as ARM gets
//! them, held to the official specs (compute for the VM, authorization for the assignment).

use std::path::Path;

use serde_json::json;

use super::*;
use crate::manifest::{LoadOptions, load_str};
use crate::openapi::{Specs, significant};

const SUB: &str = "00000000-0000-0000-0000-000000000000";
const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKPlF6fsDFohwlkTo8t/J8O5d+c06R9CvcPGqScyggx1 demo@dsinfra";
const PRINCIPAL: &str = "99999999-8888-7777-6666-555555555555";

fn idle_cluster() -> Desired {
    let text = format!(
        "experiment = \"exp\"\nazure {{\n  location = \"eastus\"\n  subscription = \"{SUB}\"\n}}\nnetwork \"main\" {{ ssh_from = [\"198.51.100.0/24\"] }}\ncluster \"train\" {{\n  size    = \"Standard_D4ds_v5\"\n  count   = 2\n  ssh_key = \"{KEY}\"\n  step \"ssh_mesh\" {{}}\n  park {{ idle = \"45m\" }}\n}}\n"
    );
    let opts = LoadOptions {
        env: Box::new(|_| None),
        ..LoadOptions::default()
    };
    load_str(Path::new("exp.hcl"), &text, &opts)
        .unwrap_or_else(|f| panic!("{}", crate::diag::render_all(&f.diagnostics, &f.sources)))
        .desired
}

fn resource<'d>(desired: &'d Desired, address: &str) -> &'d Resource {
    let address: Address = address.parse().expect("valid address");
    desired.resource(&address).expect("the manifest has it")
}

fn put(desired: &Desired, address: &str) -> Request {
    request_for(resource(desired, address), desired, SUB, None)
        .expect("the body builds")
        .expect("an ARM resource")
}

/// The body validates against its PUT operation in the official spec (skipped with a reason
/// outside CI when the specs are missing, as the other body tests do).
fn assert_valid_put(req: &Request) {
    assert_valid_put_at(req, req.id.as_str());
}

/// [`assert_valid_put`] against the operation of `path` (see the assignment's test for why it
/// can differ from the request's id).
fn assert_valid_put_at(req: &Request, path: &str) {
    let Ok(specs) = Specs::load_default() else {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(!ci, "the spec check is required under CI");
        eprintln!("SKIPPING the spec check of {}: no specs", req.id);
        return;
    };
    let version = crate::azure::api_version::api_version_for_path(req.id.as_str());
    let op = specs
        .operation("PUT", path, version)
        .unwrap_or_else(|| panic!("no PUT operation in the specs for {}", req.id));
    let body = req.to_json();
    let violations = op.validate_request(Some(&body));
    let strict = significant(&violations, true);
    assert!(
        strict.is_empty(),
        "{} is invalid: {:?}\n{body:#}",
        req.id,
        strict.iter().map(ToString::to_string).collect::<Vec<_>>()
    );
}

#[test]
fn only_the_head_gets_a_system_assigned_identity_and_its_body_is_valid() {
    let desired = idle_cluster();
    let head = put(&desired, "cluster.train[0].vm");
    assert_eq!(
        head.to_json()["identity"],
        json!({"type": "SystemAssigned"})
    );
    assert_valid_put(&head);
    let other = put(&desired, "cluster.train[1].vm");
    assert_eq!(other.to_json().get("identity"), None);
}

#[test]
fn the_role_has_exactly_the_three_actions_in_the_resource_group() {
    let desired = idle_cluster();
    let req = put(&desired, "cluster.train.idle_role");
    let rg = format!("/subscriptions/{SUB}/resourceGroups/dsinfra-exp");
    assert!(
        req.id.as_str().starts_with(&format!(
            "{rg}/providers/Microsoft.Authorization/roleDefinitions/"
        )),
        "{}",
        req.id
    );
    assert_eq!(
        req.to_json()["properties"],
        json!({
            "roleName": "dsinfra idle park exp cluster.train d19918ee",
            "description": "Lets the head of cluster.train deallocate this experiment's VMs when they are idle (dsinfra)",
            "type": "CustomRole",
            "permissions": [{"actions": [
                "Microsoft.Compute/virtualMachines/read",
                "Microsoft.Compute/virtualMachines/deallocate/action",
                "Microsoft.Compute/virtualMachines/start/action"
            ]}],
            "assignableScopes": [rg]
        })
    );
    assert_eq!(req.method(), "PUT");
}

#[test]
fn the_assignment_waits_for_the_principal_and_then_is_valid() {
    let desired = idle_cluster();
    let access = resource(&desired, "cluster.train.idle_access");
    let refused = request_for(access, &desired, SUB, None).expect_err("no principal yet");
    assert!(refused.to_string().contains("principal"), "{refused}");
    assert_eq!(
        principal_vm_id(access, &desired, SUB).expect("names the head"),
        resource(&desired, "cluster.train[0].vm").arm_id(SUB)
    );
    let req = role_assignment_request(access, &desired, SUB, PRINCIPAL).expect("builds");
    let role = resource(&desired, "cluster.train.idle_role").arm_id(SUB);
    assert_eq!(
        req.to_json(),
        json!({"properties": {
            "roleDefinitionId": role,
            "principalId": PRINCIPAL,
            "principalType": "ServicePrincipal"
        }})
    );
    // The spec's path is `/{scope}/providers/Microsoft.Authorization/roleAssignments/{name}`,
    // `{scope}` standing for the resource group's several segments; the spec lookup takes one
    // segment per parameter, so the scope is passed as one.
    let name = req.id.as_str().rsplit('/').next().expect("a name");
    assert_valid_put_at(
        &req,
        &format!("/scope/providers/Microsoft.Authorization/roleAssignments/{name}"),
    );
}

#[test]
fn identity_added_to_an_existing_vm_is_a_full_put_with_it() {
    let desired = idle_cluster();
    let head = resource(&desired, "cluster.train[0].vm");
    let mut before = head.attrs.clone();
    before.remove("identity");
    let full = put(&desired, "cluster.train[0].vm");
    let req = update_request(full.clone(), &before, &head.attrs);
    // VirtualMachineUpdate's PATCH could carry it too; the PUT is the body every other
    // non-disk change already sends, and ARM keeps the VM running through it.
    assert_eq!(req, full);
    assert_eq!(req.to_json()["identity"]["type"], "SystemAssigned");
}

#[test]
fn names_are_stable_guids_per_block_and_resource_group() {
    let desired = idle_cluster();
    let role = resource(&desired, "cluster.train.idle_role");
    assert!(uuid::Uuid::try_parse(&role.name).is_ok(), "{}", role.name);
    assert_eq!(
        role.name,
        idle_cluster().resource(&role.address).expect("again").name
    );
}

/// Issue 30: an assignment's name is a GUID of scope, principal and role (Microsoft's
/// recommendation), made at apply: the same three give the same name, a new principal (the head
/// VM made again) a new one, in any letter case.
#[test]
fn an_assignments_name_follows_its_scope_principal_and_role() {
    let desired = idle_cluster();
    let access = resource(&desired, "cluster.train.idle_access");
    assert_eq!(access.name, crate::model::NAMED_AT_APPLY);
    let id = |principal: &str| {
        role_assignment_request(access, &desired, SUB, principal)
            .expect("builds")
            .id
            .as_str()
            .to_owned()
    };
    let first = id(PRINCIPAL);
    let rg = format!("/subscriptions/{SUB}/resourceGroups/dsinfra-exp");
    let name = first
        .strip_prefix(&format!(
            "{rg}/providers/Microsoft.Authorization/roleAssignments/"
        ))
        .expect("at the resource group");
    assert!(uuid::Uuid::try_parse(name).is_ok(), "{first}");
    assert_eq!(id(PRINCIPAL), first);
    assert_eq!(id(&PRINCIPAL.to_ascii_uppercase()), first);
    assert_ne!(id("11111111-2222-3333-4444-555555555555"), first);
}
