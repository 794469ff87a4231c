//! Refresh by lists (issue 32, decision 70): one list per resource type and group, and the
//! subscription's VM power states, instead of a GET (and an instance view) per resource.
//!
//! - The same drift either way: changes made outside dsinfra (a VM deallocated and resized, a tag
//!   edited, a VM deleted) give the same report and the same refreshed state read by lists as
//!   read resource by resource, so the plan is the same.
//! - The calls of a refresh do not grow with the node count: a cluster of 2 and one of 8, applied
//!   by the real binary, are refreshed with the same number of ARM requests (counted by the
//!   emulator), while resource-by-resource reads grow by three per node.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dsinfra::azure::types::compute::VmAction;
use dsinfra::emulator::RequestInfo;
use dsinfra::engine::refresh::{Reading, refresh_by};

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_see_the_same_drift_as_reads_of_each_resource() {
    let world = World::applied(config()).await;
    let vm = ResourceId::from_raw(id(&world.desired, "vm.gpu.vm"));

    // Outside dsinfra: the VM is resized then deallocated (a PUT starts it again), and the
    // NSG's tag edited. (A deleted
    // resource is the next test; a NIC or disk its VM holds cannot be deleted.)
    let _: Value = world
        .client
        .put(
            &vm,
            &vm_body(
                &world.desired,
                "Standard_NC8as_T4_v3",
                &json!({"managed-by": "dsinfra"}),
            ),
        )
        .await
        .expect("resized");
    world
        .client
        .vm_action(&vm, VmAction::Deallocate)
        .await
        .expect("deallocated");
    let nsg = world
        .desired
        .resource(&"network.main.nsg".parse().expect("valid"))
        .expect("present");
    let mut attrs = nsg.attrs.clone();
    attrs.insert("tags".into(), json!({"managed-by": "someone else"}));
    let _: Value = world
        .client
        .put(
            &ResourceId::from_raw(nsg.arm_id(SUB)),
            &body(&world.desired, ResourceKind::NetworkSecurityGroup, &attrs),
        )
        .await
        .expect("tag edited");

    let mut by_each = world.state();
    let mut by_lists = world.state();
    let each = refresh_by(&world.client, SUB, &mut by_each, Reading::EachResource)
        .await
        .expect("reads each resource");
    let lists = refresh_by(&world.client, SUB, &mut by_lists, Reading::Lists)
        .await
        .expect("reads by lists");
    assert!(each.has_drift(), "the changes are drift: {each:?}");
    assert_eq!(
        each.power_changed.len(),
        1,
        "the deallocated VM is seen: {each:?}"
    );
    assert_eq!(lists, each);
    assert_eq!(by_lists, by_each);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_deleted_outside_dsinfra_is_gone_from_its_list_as_from_its_get() {
    let world = World::applied(config()).await;
    world
        .client
        .delete(&ResourceId::from_raw(id(&world.desired, "vm.gpu.vm")))
        .await
        .expect("DELETE works");
    let mut by_each = world.state();
    let mut by_lists = world.state();
    let each = refresh_by(&world.client, SUB, &mut by_each, Reading::EachResource)
        .await
        .expect("reads each resource");
    let lists = refresh_by(&world.client, SUB, &mut by_lists, Reading::Lists)
        .await
        .expect("reads by lists");
    assert_eq!(each.deleted, ["vm.gpu.vm".parse().expect("valid")]);
    assert_eq!(lists, each);
    assert_eq!(by_lists, by_each);
}

/// A cluster of `count` nodes applied by the real binary against an emulator that counts the ARM
/// requests it answers; returns the requests of a refresh by lists and of one by GETs.
async fn refresh_calls(count: usize) -> (usize, usize) {
    let requests = Arc::new(AtomicUsize::new(0));
    let mut config = config();
    let counted = Arc::clone(&requests);
    config.request_validator = Some(Arc::new(move |_: &RequestInfo| {
        counted.fetch_add(1, Ordering::SeqCst);
        Vec::new()
    }));
    let (dir, manifest) = scratch(&format!(
        "azure {{ location = \"eastus\" }}\nnetwork \"main\" {{ ssh_from = [\"203.0.113.7/32\"] }}\n\
         cluster \"c\" {{\n  size    = \"Standard_D4s_v5\"\n  count   = {count}\n  ssh_key = file(\"demo.pub\")\n}}\n"
    ));
    let emulator = emulator::start(config).await.expect("the emulator starts");
    dsinfra(dir.path())
        .args(["apply", "exp.hcl", "--auto-approve", "--steps", "skip"])
        .args(["--endpoint", &emulator.endpoint()])
        .assert()
        .success();
    let client = client(&emulator);
    let state = LocalBackend::open(&manifest)
        .expect("state dir")
        .load_sync()
        .expect("reads")
        .expect("applied");
    let calls = |reading| {
        let mut state = state.clone();
        let requests = Arc::clone(&requests);
        let client = client.clone();
        async move {
            let before = requests.load(Ordering::SeqCst);
            let report = refresh_by(&client, SUB, &mut state, reading)
                .await
                .expect("refresh works");
            assert!(!report.has_drift(), "{report:?}");
            requests.load(Ordering::SeqCst) - before
        }
    };
    let lists = calls(Reading::Lists).await;
    let each = calls(Reading::EachResource).await;
    drop(dir);
    (lists, each)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_by_lists_makes_as_many_calls_for_eight_nodes_as_for_two() {
    let (lists_2, each_2) = refresh_calls(2).await;
    let (lists_8, each_8) = refresh_calls(8).await;
    eprintln!(
        "refresh calls: by lists {lists_2} (2 nodes), {lists_8} (8); by GETs {each_2}, {each_8}"
    );
    assert_eq!(
        lists_8, lists_2,
        "lists: {lists_2} calls for 2 nodes, {lists_8} for 8"
    );
    // Resource by resource: a VM, its instance view and its NIC per node.
    assert_eq!(
        each_8 - each_2,
        6 * 3,
        "GETs: {each_2} for 2 nodes, {each_8} for 8"
    );
    assert!(lists_8 <= 16, "{lists_8} calls");
}
