use super::*;
use crate::emulator::store::Evicted;
use chrono::TimeZone as _;

const SET: &str =
    "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/availabilitySets/fabric";

fn vm_id(name: &str) -> String {
    format!("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/{name}")
}

fn body(priority: Option<&str>, extra: &Value) -> Value {
    let mut props = json!({
        "hardwareProfile": {"vmSize": "Standard_ND40rs_v2"},
        "availabilitySet": {"id": SET},
    });
    if let Some(p) = priority {
        props["priority"] = json!(p);
    }
    if let (Some(props), Some(extra)) = (props.as_object_mut(), extra.as_object()) {
        props.extend(extra.clone());
    }
    json!({"location": "eastus", "properties": props})
}

fn put(cloud: &mut Cloud, name: &str, body: Value) -> String {
    let id = vm_id(name);
    let mut vm = cloud.new_resource(id.clone(), Kind::VirtualMachine, body);
    vm.body["name"] = json!(name);
    vm.power = Some("running".into());
    cloud.put_resource(key(&id), vm);
    key(&id)
}

fn code(result: Result<(), ArmError>) -> (u16, String, String) {
    let err = result.expect_err("refused");
    (err.status, err.code, err.message)
}

#[test]
fn an_eviction_policy_or_a_price_cap_is_only_for_spot_vms() {
    let regular = body(None, &json!({"evictionPolicy": "Deallocate"}));
    let (status, code_, _) = code(check(&regular, None, "Standard_ND40rs_v2", "eastus"));
    assert_eq!((status, code_.as_str()), (400, "InvalidParameter"));
    let regular = body(
        Some("Regular"),
        &json!({"billingProfile": {"maxPrice": 5.0}}),
    );
    let (status, _, message) = code(check(&regular, None, "Standard_ND40rs_v2", "eastus"));
    assert_eq!(status, 400, "{message}");
    let spot = body(
        Some("Spot"),
        &json!({"evictionPolicy": "Delete", "billingProfile": {"maxPrice": -1}}),
    );
    check(&spot, None, "Standard_ND40rs_v2", "eastus").expect("a spot VM with both");
    let bad = body(Some("Cheap"), &json!({}));
    assert_eq!(
        code(check(&bad, None, "Standard_ND40rs_v2", "eastus")).0,
        400
    );
}

#[test]
fn spot_needs_a_spot_offer_and_a_cap_above_the_spot_price() {
    let spot = body(Some("Spot"), &json!({}));
    // The B-series has no spot offer (no spot price in the catalog).
    let (status, code_, message) = code(check(&spot, None, "Standard_B2s", "eastus"));
    assert_eq!(
        (status, code_.as_str()),
        (409, "SkuNotAvailable"),
        "{message}"
    );
    let current = spot_price("Standard_ND40rs_v2", "eastus").expect("a spot price");
    let low = body(
        Some("Spot"),
        &json!({"billingProfile": {"maxPrice": current / 2.0}}),
    );
    let (status, code_, message) = code(check(&low, None, "Standard_ND40rs_v2", "eastus"));
    assert_eq!((status, code_.as_str()), (409, "OperationNotAllowed"));
    assert!(
        message.contains("lower than the current spot price"),
        "{message}"
    );
    let zero = body(Some("Spot"), &json!({"billingProfile": {"maxPrice": 0}}));
    assert_eq!(
        code(check(&zero, None, "Standard_ND40rs_v2", "eastus")).0,
        400
    );
    let high = body(
        Some("Spot"),
        &json!({"billingProfile": {"maxPrice": current * 2.0}}),
    );
    check(&high, None, "Standard_ND40rs_v2", "eastus").expect("a cap above the price");
}

#[test]
fn priority_and_eviction_policy_are_fixed_and_the_cap_changes_only_deallocated() {
    let mut cloud = Cloud::default();
    let created = body(
        Some("Spot"),
        &json!({"evictionPolicy": "Deallocate", "billingProfile": {"maxPrice": -1}}),
    );
    let k = put(&mut cloud, "n0", created.clone());
    let vm = cloud.resources.get(&k).cloned().expect("vm");
    let regular = body(Some("Regular"), &json!({}));
    let (status, code_, message) = code(check(&regular, Some(&vm), "Standard_ND40rs_v2", "eastus"));
    assert_eq!((status, code_.as_str()), (409, "PropertyChangeNotAllowed"));
    assert!(message.contains("'priority'"), "{message}");
    let delete = body(Some("Spot"), &json!({"evictionPolicy": "Delete"}));
    let (_, code_, message) = code(check(&delete, Some(&vm), "Standard_ND40rs_v2", "eastus"));
    assert_eq!(code_, "PropertyChangeNotAllowed", "{message}");
    let recap = body(
        Some("Spot"),
        &json!({"evictionPolicy": "Deallocate", "billingProfile": {"maxPrice": 30.0}}),
    );
    let (status, _, message) = code(check(&recap, Some(&vm), "Standard_ND40rs_v2", "eastus"));
    assert_eq!(status, 409, "{message}");
    let mut parked = vm.clone();
    parked.power = Some("deallocated".into());
    check(&recap, Some(&parked), "Standard_ND40rs_v2", "eastus").expect("deallocated");
    // The same body again is no change.
    check(&created, Some(&vm), "Standard_ND40rs_v2", "eastus").expect("unchanged");
}

#[test]
fn spot_and_regular_vms_never_share_an_availability_set() {
    let mut cloud = Cloud::default();
    put(&mut cloud, "n0", body(Some("Spot"), &json!({})));
    let regular = body(None, &json!({}));
    let err = check_set_members(&cloud, &regular, &key(&vm_id("n1"))).expect_err("mixed");
    assert_eq!(err.code, "OperationNotAllowed");
    assert!(err.message.contains("n0"), "{}", err.message);
    check_set_members(&cloud, &body(Some("Spot"), &json!({})), &key(&vm_id("n1")))
        .expect("another spot VM");
}

#[test]
fn an_eviction_is_announced_to_the_set_then_deallocates_or_deletes() {
    let mut cloud = Cloud::default();
    let now = Utc.with_ymd_and_hms(2026, 12, 3, 1, 0, 0).unwrap();
    let n0 = put(
        &mut cloud,
        "n0",
        body(Some("Spot"), &json!({"evictionPolicy": "Deallocate"})),
    );
    let n1 = put(
        &mut cloud,
        "n1",
        body(Some("Spot"), &json!({"evictionPolicy": "Delete"})),
    );
    let alone = put(&mut cloud, "alone", {
        let mut b = body(Some("Spot"), &json!({}));
        b["properties"]
            .as_object_mut()
            .expect("props")
            .remove("availabilitySet");
        b
    });
    let before = scheduled_events(&cloud, &n1)["DocumentIncarnation"].clone();
    let event = schedule(&mut cloud, &n0, now, 30).expect("scheduled");
    // Every member of the set sees it, naming the VM that goes; a VM outside the set does not.
    let doc = scheduled_events(&cloud, &n1);
    assert_ne!(doc["DocumentIncarnation"], before);
    assert_eq!(doc["Events"][0]["EventType"], "Preempt");
    assert_eq!(doc["Events"][0]["Resources"], json!(["n0"]));
    assert_eq!(doc["Events"][0]["EventId"], json!(event.event_id));
    assert_eq!(
        doc["Events"][0]["NotBefore"],
        "Thu, 03 Dec 2026 01:00:30 GMT"
    );
    assert_eq!(scheduled_events(&cloud, &alone)["Events"], json!([]));
    let deleted = std::cell::RefCell::new(Vec::new());
    let delete = |c: &mut Cloud, k: &str| {
        deleted.borrow_mut().push(k.to_owned());
        c.resources.remove(k);
    };
    assert!(!evict_due(
        &mut cloud,
        now + chrono::Duration::seconds(29),
        &delete
    ));
    assert!(evict_due(
        &mut cloud,
        now + chrono::Duration::seconds(30),
        &delete
    ));
    assert_eq!(
        cloud
            .resources
            .get(&n0)
            .and_then(|v| v.power.clone())
            .as_deref(),
        Some("deallocated")
    );
    assert_eq!(scheduled_events(&cloud, &n1)["Events"], json!([]));
    schedule(&mut cloud, &n1, now, 0).expect("scheduled");
    assert!(evict_due(&mut cloud, now, &delete));
    assert_eq!(*deleted.borrow(), vec![n1.clone()]);
    assert_eq!(
        cloud.evicted,
        vec![
            Evicted {
                vm: n0.clone(),
                name: "n0".into(),
                deleted: false
            },
            Evicted {
                vm: n1,
                name: "n1".into(),
                deleted: true
            }
        ]
    );
    // A regular VM, or one not running, cannot be evicted.
    let err = schedule(&mut cloud, &n0, now, 30).expect_err("deallocated");
    assert_eq!(err.code, "OperationNotAllowed");
}
