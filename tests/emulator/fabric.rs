//! Availability sets as InfiniBand fabrics (issue 13): ARM's synchronous PUT with its defaults and
//! range checks, fixed domain counts, member back-references, the in-use delete refusal, a VM
//! that joins a set only at creation, and the fabric (and ib0 stand-in address) the boot hook is
//! told for each VM.

use std::sync::{Arc, Mutex};

use dsinfra::emulator::VmBoot;

use super::*;

/// A NIC in the default subnet, without a public IP; returns its id.
async fn nic(env: &Env, name: &str) -> String {
    let id = res("rg", &format!("Microsoft.Network/networkInterfaces/{name}"));
    env.create(
        &id,
        NET,
        &json!({"location": "eastus", "properties": {"ipConfigurations": [{"name": "ipconfig1",
            "properties": {"subnet": {"id": res("rg", "Microsoft.Network/virtualNetworks/vnet/subnets/default")}}}]}}),
    )
    .await;
    id
}

/// An ND40rs_v2 VM body on `nic`, in `set` when given.
fn member(nic: &str, set: Option<&str>) -> Value {
    let mut body = vm_body("rg", "Standard_ND40rs_v2");
    body["properties"]["networkProfile"]["networkInterfaces"][0]["id"] = json!(nic);
    if let Some(set) = set {
        body["properties"]["availabilitySet"] = json!({"id": set});
    }
    body
}

#[tokio::test]
async fn availability_set_puts_are_synchronous_with_arms_defaults_and_fixed_domains() {
    let env = env(fast()).await;
    env.group("rg").await;
    let set = res("rg", "Microsoft.Compute/availabilitySets/fabric");

    let bad = env
        .put(
            &set,
            COMPUTE,
            &json!({"location": "eastus", "properties": {"platformFaultDomainCount": 4}}),
        )
        .await;
    assert_eq!((bad.status, bad.code()), (400, "InvalidParameter"));
    assert_eq!(
        bad.message(),
        "The specified fault domain count 4 must fall in the range 1 to 3."
    );

    // Synchronous, as ARM's availability set PUT is; ARM's defaults fill what is left out.
    let plain = res("rg", "Microsoft.Compute/availabilitySets/plain");
    let defaults = env
        .put(&plain, COMPUTE, &json!({"location": "eastus"}))
        .await;
    // 200 for a creation too: the spec lists no 201 for this PUT.
    assert_eq!(defaults.status, 200);
    assert!(defaults.header("azure-asyncoperation").is_none());
    assert_eq!(defaults.body["sku"]["name"], "Classic");
    assert_eq!(defaults.body["properties"]["platformFaultDomainCount"], 2);
    assert_eq!(defaults.body["properties"]["platformUpdateDomainCount"], 5);
    let body = json!({"location": "eastus", "sku": {"name": "Aligned"},
        "properties": {"platformFaultDomainCount": 1, "platformUpdateDomainCount": 1}});
    let created = env.put(&set, COMPUTE, &body).await;
    assert_eq!(created.status, 200);
    assert_eq!(created.body["type"], "Microsoft.Compute/availabilitySets");
    assert_eq!(created.body["properties"]["virtualMachines"], json!([]));
    assert_eq!(env.put(&set, COMPUTE, &body).await.status, 200);
    let mut more = body.clone();
    more["properties"]["platformFaultDomainCount"] = json!(2);
    let refused = env.put(&set, COMPUTE, &more).await;
    assert_eq!(
        (refused.status, refused.code()),
        (409, "PropertyChangeNotAllowed")
    );
    assert_eq!(
        refused.message(),
        "Changing property 'platformFaultDomainCount' is not allowed."
    );
}

#[tokio::test]
async fn an_availability_set_is_a_fabric_that_a_vm_joins_only_at_creation() {
    let booted: Arc<Mutex<Vec<VmBoot>>> = Arc::default();
    let sink = Arc::clone(&booted);
    let env = env(EmulatorConfig {
        on_vm_boot: Some(Arc::new(move |boot: &VmBoot| {
            sink.lock().expect("no poisoned lock").push(boot.clone());
            None
        })),
        ..fast()
    })
    .await;
    env.network("rg").await;
    let set = res("rg", "Microsoft.Compute/availabilitySets/fabric");
    let plain = res("rg", "Microsoft.Compute/availabilitySets/plain");
    let body = json!({"location": "eastus", "sku": {"name": "Aligned"},
        "properties": {"platformFaultDomainCount": 1, "platformUpdateDomainCount": 1}});
    assert_eq!(env.put(&set, COMPUTE, &body).await.status, 200);
    assert_eq!(env.put(&plain, COMPUTE, &body).await.status, 200);

    // Two members and one VM outside every set.
    let (a, b, c) = (
        nic(&env, "nic-a").await,
        nic(&env, "nic-b").await,
        nic(&env, "nic-c").await,
    );
    let vm = |name: &str| res("rg", &format!("Microsoft.Compute/virtualMachines/{name}"));
    env.create(&vm("a"), COMPUTE, &member(&a, Some(&set))).await;
    env.create(&vm("b"), COMPUTE, &member(&b, Some(&set))).await;
    env.create(&vm("c"), COMPUTE, &member(&c, None)).await;
    let got = env.get(&set, COMPUTE).await;
    assert_eq!(
        got.body["properties"]["virtualMachines"],
        json!([{"id": vm("a")}, {"id": vm("b")}])
    );

    // The boot hook is told each VM's fabric and, for members, their ib0 stand-ins.
    let boots = booted.lock().expect("no poisoned lock").clone();
    let of = |name: &str| {
        boots
            .iter()
            .find(|b| b.name == name)
            .unwrap_or_else(|| panic!("{name} booted: {boots:?}"))
            .clone()
    };
    let (boot_a, boot_b, boot_c) = (of("a"), of("b"), of("c"));
    assert_eq!(boot_a.fabric.as_deref(), Some(set.as_str()));
    assert_eq!(boot_b.fabric, boot_a.fabric);
    assert_eq!(boot_c.fabric, None);
    assert_eq!(
        boot_c.ib0_address, None,
        "outside every set: no InfiniBand route"
    );
    assert_eq!(boot_a.vm_size, "Standard_ND40rs_v2");
    let (ib_a, ib_b) = (
        boot_a.ib0_address.expect("a member has an ib0 address"),
        boot_b.ib0_address.expect("a member has an ib0 address"),
    );
    assert_ne!(ib_a, ib_b);
    let range = |ip: &str| ip.rsplitn(3, '.').last().map(str::to_owned);
    assert_eq!(
        range(&ib_a),
        range(&ib_b),
        "one fabric, one range: {ib_a} {ib_b}"
    );
    assert!(ib_a.starts_with("127."), "{ib_a}");

    // A VM joins a set only when it is created: neither moving nor joining is allowed.
    for (name, nic) in [("a", &a), ("c", &c)] {
        let moved = env
            .put(&vm(name), COMPUTE, &member(nic, Some(&plain)))
            .await;
        assert_eq!(
            (moved.status, moved.code(), moved.message()),
            (
                409,
                "PropertyChangeNotAllowed",
                "Changing property 'availabilitySet.id' is not allowed."
            ),
            "{name}"
        );
    }
    // The same set again, or none named, is an ordinary update.
    let same = env.put(&vm("a"), COMPUTE, &member(&a, Some(&set))).await;
    assert_eq!(same.status, 200, "{same:?}");

    let in_use = env.delete(&set, COMPUTE).await;
    assert_eq!((in_use.status, in_use.code()), (409, "OperationNotAllowed"));
    assert_eq!(
        in_use.message(),
        "Availability Set 'fabric' cannot be deleted. Before deleting an Availability Set please \
         ensure that it does not contain any VM."
    );
    for name in ["a", "b"] {
        let deleted = env.delete(&vm(name), COMPUTE).await;
        env.poll_location(deleted.header("location").expect("Location"))
            .await;
    }
    assert_eq!(env.delete(&set, COMPUTE).await.status, 200);
    assert_eq!(env.delete(&set, COMPUTE).await.status, 204);
}

/// Issue 29 item 7: a VM is placed by an availability set or by a zone, never both; ARM refuses
/// the PUT before anything is allocated (the manifest refuses `zone` on an InfiniBand cluster
/// for the same reason).
#[tokio::test]
async fn a_vm_in_an_availability_set_cannot_also_name_a_zone() {
    let env = env(fast()).await;
    env.network("rg").await;
    let set = res("rg", "Microsoft.Compute/availabilitySets/fabric");
    let body = json!({"location": "eastus", "sku": {"name": "Aligned"},
        "properties": {"platformFaultDomainCount": 1, "platformUpdateDomainCount": 1}});
    assert_eq!(env.put(&set, COMPUTE, &body).await.status, 200);
    let a = nic(&env, "nic-a").await;
    let vm = res("rg", "Microsoft.Compute/virtualMachines/a");
    let mut zoned = member(&a, Some(&set));
    zoned["zones"] = json!(["1"]);
    let refused = env.put(&vm, COMPUTE, &zoned).await;
    assert_eq!((refused.status, refused.code()), (400, "InvalidParameter"));
    assert_eq!(refused.body["error"]["target"], "zones");
    assert_eq!(
        env.get(&vm, COMPUTE).await.status,
        404,
        "nothing was created"
    );
    // The same VM without the zone is created.
    env.create(&vm, COMPUTE, &member(&a, Some(&set))).await;
}
