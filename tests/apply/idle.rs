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
