//! Issue 18 (decision 52): `park { idle }` added to an applied VM, against the emulator: the VM
//! gains its identity in place, the role and its assignment to the VM's principal are created,
//! the plan converges, and destroy leaves nothing (the assignment goes before the role).

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_park_adds_the_identity_role_and_assignment_and_destroys_them() {
    let w = world().await;
    let file = "dual-dsvm.hcl";
    w.ok(&["apply", file, "--auto-approve"]).await;
    edit(
        &w.path(file),
        "park { at = \"19:00\" }",
        "park {\n    at   = \"19:00\"\n    idle = \"45m\"\n  }",
    );
    let plan = w.ok(&["plan", file]).await;
    assert!(
        plan.contains("vm.gpu.idle_access will be created"),
        "{plan}"
    );
    assert!(plan.contains("idle for 45m parks 1 VM"), "{plan}");
    let apply = w.ok(&["apply", file, "--auto-approve"]).await;
    assert!(apply.contains("Apply complete:"), "{apply}");
    let converged = w.run(&["plan", file, "--detailed-exitcode"]).await;
    assert_eq!(converged.status.code(), Some(0), "{}", describe(&converged));
    let state = w.state("dual-dsvm");
    let addresses = w.state_addresses("dual-dsvm");
    assert!(addresses.contains("vm.gpu.idle_role"), "{addresses:?}");
    assert!(addresses.contains("vm.gpu.idle_access"), "{state:#}");
    // What ARM holds: the assignment names the VM's own principal and the role.
    let vm = arm_get(&w, &w.id_in_state("dual-dsvm", "vm.gpu.vm"), "2024-11-01").await;
    let principal = vm["identity"]["principalId"].as_str().expect("a principal");
    let access_id = w.id_in_state("dual-dsvm", "vm.gpu.idle_access");
    let access = arm_get(&w, &access_id, "2022-04-01").await;
    assert_eq!(access["properties"]["principalId"], principal, "{access:#}");
    assert_eq!(access["properties"]["principalType"], "ServicePrincipal");
    let role_id = w.id_in_state("dual-dsvm", "vm.gpu.idle_role");
    assert!(
        access["properties"]["roleDefinitionId"]
            .as_str()
            .is_some_and(|r| r.eq_ignore_ascii_case(&role_id)),
        "{access:#}"
    );
    let destroy = w.ok(&["destroy", file, "--auto-approve"]).await;
    assert!(destroy.contains("Destroy complete:"), "{destroy}");
    assert!(w.state_addresses("dual-dsvm").is_empty());
}

/// Issue 30: role names are unique in the whole tenant, so the same manifest applied in two
/// resource groups (one emulator: one tenant) must name its idle roles apart. Before the group's
/// hash was in the name, the second apply failed with RoleDefinitionWithSameNameExists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_manifest_in_two_resource_groups_gets_two_idle_roles() {
    let w = world().await;
    let key = std::fs::read_to_string(w.path("keys/demo.pub")).expect("the demo key");
    let mut names = Vec::new();
    for group in ["dsvm-team-a", "dsvm-team-b"] {
        // No storage account: its name is global too, and follows the experiment alone (see
        // the note).
        let text = format!(
            "experiment = \"teams\"\nazure {{\n  location       = \"eastus\"\n  resource_group = \"{group}\"\n}}\nnetwork \"main\" {{ ssh_from = [\"203.0.113.7/32\"] }}\nvm \"gpu\" {{\n  size    = \"Standard_NC4as_T4_v3\"\n  image   = \"ubuntu-22.04\"\n  ssh_key = \"{}\"\n  park {{ idle = \"45m\" }}\n}}\n",
            key.trim()
        );
        let file = format!("{group}.hcl");
        std::fs::write(w.path(&file), text).expect("written");
        let apply = w.ok(&["apply", &file, "--auto-approve"]).await;
        assert!(apply.contains("Apply complete:"), "{apply}");
        let role = arm_get(&w, &w.id_in_state(group, "vm.gpu.idle_role"), "2022-04-01").await;
        names.push(
            role["properties"]["roleName"]
                .as_str()
                .expect("a name")
                .to_owned(),
        );
    }
    assert_ne!(names[0], names[1]);
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("dsinfra idle park teams vm.gpu ")),
        "{names:?}"
    );
}

/// Issue 30: an assignment made right after the head's identity and the custom role can be
/// refused while Microsoft Entra ID replicates them (`PrincipalNotFound` even with
/// `principalType`, then `RoleDefinitionDoesNotExist`): here ARM refuses the first two PUTs so.
/// Apply keeps trying on the client's clock and converges; before, the first refusal failed the
/// apply after the GPU VM existed. (The emulator's own replication lag, which makes such
/// refusals from the creation times, is tested in tests/emulator/authorization.rs.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_assignment_waits_for_replication_and_converges() {
    let refused = |code: &str, message: &str| FaultRule {
        method: Some("PUT".to_owned()),
        path: Some("*/providers/Microsoft.Authorization/roleAssignments/*".to_owned()),
        resource_type: None,
        count: Some(1),
        action: FaultAction::Respond {
            status: 400,
            code: code.to_owned(),
            message: message.to_owned(),
            retry_after: None,
        },
    };
    let w = world_with(move |c| EmulatorConfig {
        faults: vec![
            refused(
                "PrincipalNotFound",
                "Principal does not exist in the directory.",
            ),
            refused(
                "RoleDefinitionDoesNotExist",
                "The specified role definition does not exist.",
            ),
        ],
        ..c
    })
    .await;
    let file = "dual-dsvm.hcl";
    edit(
        &w.path(file),
        "park { at = \"19:00\" }",
        "park {\n    at   = \"19:00\"\n    idle = \"45m\"\n  }",
    );
    let apply = w.ok(&["apply", file, "--auto-approve"]).await;
    assert!(apply.contains("Apply complete:"), "{apply}");
    assert!(
        w.state_addresses("dual-dsvm")
            .contains("vm.gpu.idle_access"),
        "{apply}"
    );
    let converged = w.run(&["plan", file, "--detailed-exitcode"]).await;
    assert_eq!(converged.status.code(), Some(0), "{}", describe(&converged));
}

/// The same with the emulator's own replication lag: new principals and custom roles are
/// invisible to assignments for 119 s after they were made (119 ms at this latency scale), less
/// than the two minutes apply waits. Whether the first PUT comes soon enough to be refused
/// depends on the machine's speed; either way the apply converges, which is what this pins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apply_converges_while_new_principals_and_roles_replicate() {
    let w = world_with(|c| EmulatorConfig {
        replication_lag: Duration::from_secs(119),
        ..c
    })
    .await;
    let file = "dual-dsvm.hcl";
    edit(
        &w.path(file),
        "park { at = \"19:00\" }",
        "park {\n    at   = \"19:00\"\n    idle = \"45m\"\n  }",
    );
    let apply = w.ok(&["apply", file, "--auto-approve"]).await;
    assert!(apply.contains("Apply complete:"), "{apply}");
    let converged = w.run(&["plan", file, "--detailed-exitcode"]).await;
    assert_eq!(converged.status.code(), Some(0), "{}", describe(&converged));
}

/// The principal of the caller whose rights the emulator checks in the tests below.
const USER: &str = "5a5a5a5a-1111-4222-8333-944444444444";
/// Built-in roles, by GUID.
const CONTRIBUTOR: &str = "b24988ac-6180-42a0-ab88-20f7382dd24c";
const OWNER: &str = "8e3af657-a8ff-443c-a75c-2fe8c4bcb635";

/// A world whose emulator checks the token `user-token` as [`USER`], who holds `role` at the
/// subscription (given by the full-access token, as an administrator would).
async fn world_as(role: &str) -> World {
    let w = world_with(|c| EmulatorConfig {
        callers: vec![emulator::Caller {
            token: "user-token".into(),
            principal: USER.into(),
        }],
        ..c
    })
    .await;
    let path = format!(
        "/subscriptions/{SUB}/providers/Microsoft.Authorization/roleAssignments/0f0e0d0c-0000-4000-8000-000000000030"
    );
    let given = reqwest::Client::new()
        .put(format!("{}{path}", w.handle.endpoint()))
        .query(&[("api-version", "2022-04-01")])
        .bearer_auth("test")
        .json(&serde_json::json!({"properties": {
            "roleDefinitionId": format!("/subscriptions/{SUB}/providers/Microsoft.Authorization/roleDefinitions/{role}"),
            "principalId": USER,
            "principalType": "User",
        }}))
        .send()
        .await
        .expect("the emulator answers");
    assert_eq!(
        given.status().as_u16(),
        201,
        "{}",
        given.text().await.unwrap_or_default()
    );
    w
}

/// dsinfra as [`USER`].
async fn run_as_user(w: &World, args: &[&str]) -> Output {
    let mut cmd = w.command(args);
    cmd.env("DSINFRA_EMULATOR_TOKEN", "user-token");
    tokio::task::spawn_blocking(move || cmd.output().expect("dsinfra runs"))
        .await
        .expect("joined")
}

/// Issue 30: a Contributor cannot create the idle role (Microsoft.Authorization/*/Write is in
/// its notActions). Before the check, its apply failed with AuthorizationFailed after the GPU VM
/// existed and billed. Now, in a new resource group, apply asks ARM right after creating the
/// group, reports a located error at `idle`, and deletes the group again: nothing is left. In a
/// group that exists (the same experiment applied without idle first), the plan's preflight
/// stops before any write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contributor_is_stopped_at_idle_before_anything_is_created() {
    let w = world_as(CONTRIBUTOR).await;
    let file = "dual-dsvm.hcl";
    let without_idle = std::fs::read_to_string(w.path(file)).expect("the example");
    edit(
        &w.path(file),
        "park { at = \"19:00\" }",
        "park {\n    at   = \"19:00\"\n    idle = \"45m\"\n  }",
    );
    let expect_located = |out: &Output| {
        let text = describe(out);
        assert_eq!(out.status.code(), Some(1), "{text}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(
                "error: vm.gpu parks when idle, but your identity may not create its role in \
                 resource group dsinfra-dual-dsvm: it lacks \
                 Microsoft.Authorization/roleAssignments/write and \
                 Microsoft.Authorization/roleDefinitions/write"
            ),
            "{text}"
        );
        assert!(stderr.contains("dual-dsvm.hcl:"), "located: {text}");
        assert!(stderr.contains("idle = \"45m\""), "at `idle`: {text}");
        assert!(
            stderr.contains("Owner or User Access Administrator"),
            "{text}"
        );
    };
    // A new group: the plan says apply will ask; apply asks once the group exists.
    let plan = run_as_user(&w, &["plan", file]).await;
    assert!(plan.status.success(), "{}", describe(&plan));
    assert!(
        describe(&plan).contains("apply asks right after creating it"),
        "{}",
        describe(&plan)
    );
    let refused = run_as_user(&w, &["apply", file, "--auto-approve"]).await;
    expect_located(&refused);
    assert!(
        w.inventory(&group_of("dual-dsvm")).await.is_empty(),
        "nothing is left in Azure: {}",
        describe(&refused)
    );
    assert!(
        !w.path(".dsinfra/dual-dsvm/state.json").exists()
            || w.state_addresses("dual-dsvm").is_empty()
    );

    // The group exists (applied without idle, which a Contributor may do): the preflight
    // stops the plan, and apply, before any write.
    std::fs::write(w.path(file), &without_idle).expect("written");
    let applied = run_as_user(&w, &["apply", file, "--auto-approve"]).await;
    assert!(applied.status.success(), "{}", describe(&applied));
    let before = w.inventory(&group_of("dual-dsvm")).await;
    edit(
        &w.path(file),
        "park { at = \"19:00\" }",
        "park {\n    at   = \"19:00\"\n    idle = \"45m\"\n  }",
    );
    expect_located(&run_as_user(&w, &["plan", file]).await);
    expect_located(&run_as_user(&w, &["apply", file, "--auto-approve"]).await);
    assert_eq!(w.inventory(&group_of("dual-dsvm")).await, before);
    let vm = arm_get(&w, &w.id_in_state("dual-dsvm", "vm.gpu.vm"), "2024-11-01").await;
    assert!(
        vm.get("identity").is_none(),
        "the head was not updated: {vm:#}"
    );
}

/// An Owner applies the same manifest, idle park and all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_applies_idle_park() {
    let w = world_as(OWNER).await;
    let file = "dual-dsvm.hcl";
    edit(
        &w.path(file),
        "park { at = \"19:00\" }",
        "park {\n    at   = \"19:00\"\n    idle = \"45m\"\n  }",
    );
    let applied = run_as_user(&w, &["apply", file, "--auto-approve"]).await;
    assert!(applied.status.success(), "{}", describe(&applied));
    assert!(
        w.state_addresses("dual-dsvm")
            .contains("vm.gpu.idle_access")
    );
}

/// Issue 30: an assignment whose principal is not its head's any more is replaced, and the plan
/// says why. Its name follows scope, principal and role, so the new one has a new name and ARM
/// never sees a principal change (RoleAssignmentUpdateNotPermitted). Outside dsinfra, the head's
/// identity is first turned off and on again (a new principal, as Azure makes one), then the head
/// is deleted (apply makes it again: a new principal too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_principal_on_the_head_replaces_its_assignment() {
    let w = world().await;
    let file = "dual-dsvm.hcl";
    edit(
        &w.path(file),
        "park { at = \"19:00\" }",
        "park {\n    at   = \"19:00\"\n    idle = \"45m\"\n  }",
    );
    w.ok(&["apply", file, "--auto-approve"]).await;
    let vm_id = w.id_in_state("dual-dsvm", "vm.gpu.vm");
    let first = principal_now(&w, &vm_id).await;
    let (first_id, first_assigned) = assigned(&w).await;
    assert_eq!(first_assigned, first);

    // 1. The identity turned off and on again outside dsinfra: a new principal.
    for kind in ["None", "SystemAssigned"] {
        arm_patch(&w, &vm_id, &serde_json::json!({"identity": {"type": kind}})).await;
    }
    let second = principal_now(&w, &vm_id).await;
    assert_ne!(second, first);
    let plan = w.ok(&["plan", file]).await;
    assert!(
        plan.contains("vm.gpu.idle_access must be replaced"),
        "{plan}"
    );
    assert!(plan.contains("principal"), "{plan}");
    w.ok(&["apply", file, "--auto-approve"]).await;
    let (second_id, second_assigned) = assigned(&w).await;
    assert_eq!(second_assigned, second);
    assert_ne!(second_id, first_id, "a new principal, a new name");
    assert_eq!(
        arm_status(&w, &first_id, "2022-04-01").await,
        404,
        "the old one is gone"
    );
    let converged = w.run(&["plan", file, "--detailed-exitcode"]).await;
    assert_eq!(converged.status.code(), Some(0), "{}", describe(&converged));

    // 2. The head deleted outside dsinfra: made again, with a new principal, and its
    // assignment with it.
    assert!(
        matches!(
            arm_status_of(&w, "DELETE", &vm_id, "2024-11-01").await,
            200 | 202 | 204
        ),
        "the VM is deleted"
    );
    for _ in 0..200 {
        if arm_status(&w, &vm_id, "2024-11-01").await == 404 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let plan = w.ok(&["plan", file]).await;
    assert!(
        plan.contains("vm.gpu.idle_access must be replaced"),
        "{plan}"
    );
    w.ok(&["apply", file, "--auto-approve"]).await;
    let third = principal_now(&w, &vm_id).await;
    let (_, third_assigned) = assigned(&w).await;
    assert_eq!(third_assigned, third);
    assert_ne!(third, second);
    let converged = w.run(&["plan", file, "--detailed-exitcode"]).await;
    assert_eq!(converged.status.code(), Some(0), "{}", describe(&converged));
}

/// The principal of the VM at `vm_id`, as ARM has it.
async fn principal_now(w: &World, vm_id: &str) -> String {
    arm_get(w, vm_id, "2024-11-01").await["identity"]["principalId"]
        .as_str()
        .expect("a principal")
        .to_owned()
}

/// The id of `vm.gpu.idle_access` in the state, and the principal ARM's assignment names.
async fn assigned(w: &World) -> (String, String) {
    let access = w.id_in_state("dual-dsvm", "vm.gpu.idle_access");
    let body = arm_get(w, &access, "2022-04-01").await;
    let principal = body["properties"]["principalId"]
        .as_str()
        .expect("a principal")
        .to_owned();
    (access, principal)
}

/// PATCH a resource as the user and wait until its operation ends.
async fn arm_patch(w: &World, id: &str, body: &Value) {
    let resp = reqwest::Client::new()
        .patch(format!("{}{id}", w.handle.endpoint()))
        .query(&[("api-version", "2024-11-01")])
        .bearer_auth("test")
        .json(body)
        .send()
        .await
        .expect("the emulator answers");
    assert!(resp.status().is_success(), "PATCH {id}: {}", resp.status());
    for _ in 0..200 {
        let now = arm_get(w, id, "2024-11-01").await;
        if now["properties"]["provisioningState"] == "Succeeded" {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("the PATCH of {id} never finished");
}

/// The status of a GET of `id`.
async fn arm_status(w: &World, id: &str, api_version: &str) -> u16 {
    arm_status_of(w, "GET", id, api_version).await
}

/// The status of a `method` request on `id`.
async fn arm_status_of(w: &World, method: &str, id: &str, api_version: &str) -> u16 {
    reqwest::Client::new()
        .request(
            reqwest::Method::from_bytes(method.as_bytes()).expect("a method"),
            format!("{}{id}", w.handle.endpoint()),
        )
        .query(&[("api-version", api_version)])
        .bearer_auth("test")
        .send()
        .await
        .expect("the emulator answers")
        .status()
        .as_u16()
}

/// GET one resource from the emulator (as the user: full access).
async fn arm_get(w: &World, id: &str, api_version: &str) -> Value {
    let resp = reqwest::Client::new()
        .get(format!("{}{id}", w.handle.endpoint()))
        .query(&[("api-version", api_version)])
        .bearer_auth("test")
        .send()
        .await
        .expect("the emulator answers");
    assert!(resp.status().is_success(), "GET {id}: {}", resp.status());
    resp.json().await.expect("JSON")
}
