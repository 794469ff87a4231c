//! A storage account name is global across Azure. dsinfra's default name hashes the experiment
//! and the block's label only, so another team's experiment of the same names is given the same
//! one; a connected plan asks `checkNameAvailability` for every account it creates and refuses,
//! at the block, a name held outside the experiment, instead of an apply that makes the network
//! and VMs and then has the account's PUT refused. An account of that name already in the
//! experiment's own group (made outside dsinfra, or left by a lost state) is the apply's to adopt.

use super::*;

/// The storage account body ARM takes, as the other holder made it.
fn account_body() -> Value {
    json!({"location": "eastus", "kind": "StorageV2", "sku": {"name": "Standard_LRS"}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_refuses_an_account_name_held_outside_the_experiment_and_adopts_its_own() {
    let (dir, manifest) = scratch(&format!("{MANIFEST}\nstorage_account \"data\" {{}}\n"));
    let desired = desired_of(&manifest);
    let account = desired
        .resources
        .iter()
        .find(|r| r.kind == ResourceKind::StorageAccount)
        .expect("the manifest has an account");
    let emulator = emulator::start(config())
        .await
        .expect("the emulator starts");
    let endpoint = emulator.endpoint();
    let client = client(&emulator);
    let plan = || {
        dsinfra(dir.path())
            .args(["plan", "exp.hcl", "--endpoint", &endpoint])
            .assert()
    };
    // Free: the plan creates it.
    plan().success();

    // Held by another group (another team's experiment of the same names).
    let group = ResourceId::from_raw(format!("/subscriptions/{SUB}/resourceGroups/someone-else"));
    let _: Value = client
        .put(&group, &json!({"location": "eastus"}))
        .await
        .expect("their group");
    let theirs = ResourceId::from_raw(format!(
        "/subscriptions/{SUB}/resourceGroups/someone-else/providers/Microsoft.Storage/storageAccounts/{}",
        account.name
    ));
    let _: Value = client
        .put(&theirs, &account_body())
        .await
        .expect("their account");
    let refused = plan().failure();
    let err = stderr(&refused);
    assert!(
        err.contains(&format!(
            "error: storage account name `{}` is taken in Azure",
            account.name
        )),
        "{err}"
    );
    assert!(err.contains("exp.hcl:"), "located at the block: {err}");
    assert!(err.contains("write `name = \"...\"` on the block"), "{err}");

    // Ours (made outside dsinfra in the experiment's own group): the apply adopts it.
    client.delete(&theirs).await.expect("theirs deleted");
    let ours = ResourceId::from_raw(account.arm_id(SUB));
    let own_group = ResourceId::from_raw(format!(
        "/subscriptions/{SUB}/resourceGroups/{}",
        account.resource_group
    ));
    let _: Value = client
        .put(&own_group, &json!({"location": "eastus"}))
        .await
        .expect("our group");
    let _: Value = client
        .put(&ours, &account_body())
        .await
        .expect("our account");
    plan().success();
    drop(dir);
}
