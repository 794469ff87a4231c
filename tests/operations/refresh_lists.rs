//! Refresh by lists (issue 32, decision 70): one list per resource type and group, and the
//! subscription's VM power states, instead of a GET (and an instance view) per resource.
//!
//! - The same drift either way: changes made outside dsinfra (a VM deallocated and resized, a tag
//!   edited, a VM and its NIC deleted, a data disk detached) give the same report and the same
//!   refreshed state read by lists as read resource by resource, so the same plan.
//! - The calls of a refresh, and of the address reads of `status`, `ssh` and the steps, do not
//!   grow with the node count: a cluster of 2 and one of 8, applied by the real binary, are read
//!   with the same number of ARM requests (counted by the emulator), while resource-by-resource
//!   reads grow by three per node.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dsinfra::azure::types::compute::VmAction;
use dsinfra::emulator::RequestInfo;
use dsinfra::engine::reach::read_addresses;
use dsinfra::engine::refresh::{Reading, RefreshReport, refresh_by};
use dsinfra::plan::{Mode, PlanOptions, plan};

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

/// Both refreshes of `state`, each of its own copy: the report and the refreshed state of the
/// reads of each resource, then of the lists.
async fn both_ways(client: &ArmClient, state: &State) -> [(RefreshReport, State); 2] {
    let mut by_each = state.clone();
    let mut by_lists = state.clone();
    let each = refresh_by(client, SUB, &mut by_each, Reading::EachResource)
        .await
        .expect("reads each resource");
    let lists = refresh_by(client, SUB, &mut by_lists, Reading::Lists)
        .await
        .expect("reads by lists");
    [(each, by_each), (lists, by_lists)]
}

/// The plan from `state` to `desired`, as `dsinfra plan` makes it after a refresh (at a fixed
/// time, so that two plans compare whole).
fn plan_of(desired: &Desired, state: &State) -> dsinfra::plan::Plan {
    let opts = PlanOptions {
        mode: Mode::Normal,
        targets: Vec::new(),
        now: chrono::DateTime::UNIX_EPOCH,
        rerun_steps: std::collections::BTreeSet::new(),
    };
    plan(desired, state, &opts).expect("plans")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_and_its_nic_deleted_outside_dsinfra_are_gone_from_their_lists_as_from_their_gets() {
    let world = World::applied(config()).await;
    // A NIC cannot be deleted while a VM holds it: the VM goes first, as in the portal.
    for address in ["vm.gpu.vm", "vm.gpu.nic"] {
        world
            .client
            .delete(&ResourceId::from_raw(id(&world.desired, address)))
            .await
            .unwrap_or_else(|e| panic!("DELETE {address}: {e}"));
    }
    let [(each, by_each), (lists, by_lists)] = both_ways(&world.client, &world.state()).await;
    let gone: Vec<dsinfra::addr::Address> = ["vm.gpu.nic", "vm.gpu.vm"]
        .iter()
        .map(|a| a.parse().expect("valid"))
        .collect();
    let mut deleted = each.deleted.clone();
    deleted.sort();
    assert_eq!(deleted, gone);
    assert_eq!(lists, each);
    assert_eq!(by_lists, by_each);
    assert_eq!(
        plan_of(&world.desired, &by_lists),
        plan_of(&world.desired, &by_each)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_disk_detached_outside_dsinfra_is_the_same_drift_both_ways_and_apply_attaches_it_again()
 {
    let (dir, manifest) = scratch(&format!(
        "{MANIFEST}\ndisk \"data\" {{\n  size_gb   = 64\n  attach_to = vm.gpu\n}}\n"
    ));
    let emulator = emulator::start(config())
        .await
        .expect("the emulator starts");
    let endpoint = emulator.endpoint();
    dsinfra(dir.path())
        .args(["apply", "exp.hcl", "--auto-approve", "--steps", "skip"])
        .args(["--endpoint", &endpoint])
        .assert()
        .success();
    let client = client(&emulator);
    let desired = desired_of(&manifest);
    let vm = ResourceId::from_raw(id(&desired, "vm.gpu.vm"));
    let disks = |body: &Value| {
        body.pointer("/properties/storageProfile/dataDisks")
            .and_then(Value::as_array)
            .map_or(0, Vec::len)
    };
    let before: Value = client.get(&vm).await.expect("GET").expect("the VM");
    assert_eq!(disks(&before), 1, "the apply attached the disk: {before}");

    // Outside dsinfra, as `az vm disk detach` does it: a PATCH of the VM without the disk.
    let _: Value = client
        .patch(
            &vm,
            &json!({"properties": {"storageProfile": {"dataDisks": []}}}),
        )
        .await
        .expect("detached");
    let state = LocalBackend::open(&manifest)
        .expect("state dir")
        .load_sync()
        .expect("reads")
        .expect("applied");
    let [(each, by_each), (lists, by_lists)] = both_ways(&client, &state).await;
    assert_eq!(
        each.changed,
        [(
            "vm.gpu.vm".parse().expect("valid"),
            vec!["data_disks".to_owned()]
        )],
        "{each:?}"
    );
    assert_eq!(lists, each);
    assert_eq!(by_lists, by_each);
    let planned = plan_of(&desired, &by_lists);
    assert_eq!(planned, plan_of(&desired, &by_each));
    let vm_change = planned
        .changes
        .iter()
        .find(|c| c.address.to_string() == "vm.gpu.vm")
        .expect("the VM is in the plan");
    assert!(
        vm_change
            .reasons
            .contains(&dsinfra::plan::Reason::DriftChanged {
                attributes: vec!["data_disks".to_owned()]
            }),
        "{vm_change:?}"
    );

    // The binary, connected, plans an update of the VM, and its apply attaches the disk again.
    let out = dsinfra(dir.path())
        .args(["plan", "exp.hcl", "--endpoint", &endpoint])
        .assert()
        .success();
    let text = stdout(&out);
    assert!(text.contains("data_disks"), "{text}");
    assert!(text.contains("1 to change"), "{text}");
    dsinfra(dir.path())
        .args(["apply", "exp.hcl", "--auto-approve", "--steps", "skip"])
        .args(["--endpoint", &endpoint])
        .assert()
        .success();
    let after: Value = client.get(&vm).await.expect("GET").expect("the VM");
    assert_eq!(disks(&after), 1, "attached again: {after}");
    let [(again, _), _] = both_ways(&client, &state).await;
    assert!(!again.has_drift(), "{again:?}");
}

/// The ARM requests of reading one cluster: a refresh by lists, one by GETs, and the reads of
/// every node's addresses (`status`, `ssh` and the steps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Calls {
    lists: usize,
    each: usize,
    addresses: usize,
}

/// A cluster of `count` nodes applied by the real binary against an emulator that counts the ARM
/// requests it answers, and the requests of reading it.
async fn refresh_calls(count: usize) -> Calls {
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
    let before = requests.load(Ordering::SeqCst);
    let found = read_addresses(&client, SUB, &state)
        .await
        .expect("the addresses read");
    let addresses = requests.load(Ordering::SeqCst) - before;
    // Every node's private IP, the head's public IP, and each VM's Secure Boot.
    let vms = found.keys().filter(|a| a.part == "vm").count();
    assert_eq!(vms, count, "{found:?}");
    drop(dir);
    Calls {
        lists,
        each,
        addresses,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_by_lists_makes_as_many_calls_for_eight_nodes_as_for_two() {
    let two = refresh_calls(2).await;
    let eight = refresh_calls(8).await;
    eprintln!("ARM calls, 2 nodes: {two:?}; 8 nodes: {eight:?}");
    assert_eq!(
        eight.lists, two.lists,
        "lists: {two:?} for 2 nodes, {eight:?} for 8"
    );
    assert_eq!(
        eight.addresses, two.addresses,
        "address reads: {two:?} for 2 nodes, {eight:?} for 8"
    );
    // Resource by resource: a VM, its instance view and its NIC per node.
    assert_eq!(
        eight.each - two.each,
        6 * 3,
        "GETs: {two:?} for 2 nodes, {eight:?} for 8"
    );
    assert!(eight.lists <= 16, "{eight:?}");
}
