use super::*;
use crate::manifest::{LoadOptions, load};
use crate::openapi::{Specs, significant};
use serde_json::json;
use std::path::Path;

const SUB: &str = "00000000-0000-0000-0000-000000000000";
const TENANT: &str = "11111111-2222-3333-4444-555555555555";

fn example(name: &str) -> Desired {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name);
    let opts = LoadOptions {
        env: Box::new(|_| None),
        ..LoadOptions::default()
    };
    load(&path, &opts).expect("the seed examples load").desired
}

fn request(desired: &Desired, address: &str) -> Request {
    let address: Address = address.parse().expect("valid address");
    let resource = desired.resource(&address).expect("the example has it");
    request_for(resource, desired, SUB, Some(TENANT))
        .expect("the body builds")
        .expect("an ARM resource")
}

#[test]
fn a_vm_refers_to_its_nic_and_placement_group_by_arm_id() {
    let desired = example("nd40-beeond.hcl");
    let req = request(&desired, "cluster.train[2].vm");
    let body = req.to_json();
    let rg = &desired.azure.resource_group;
    let vm_name = &desired
        .resource(&"cluster.train[2].vm".parse().expect("valid"))
        .expect("present")
        .name;
    assert_eq!(
        req.id.as_str(),
        format!(
            "/subscriptions/{SUB}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines/{vm_name}"
        )
    );
    let nic = body["properties"]["networkProfile"]["networkInterfaces"][0]["id"]
        .as_str()
        .expect("a NIC id");
    assert!(
        nic.starts_with(&format!("/subscriptions/{SUB}/resourceGroups/{rg}/providers/Microsoft.Network/networkInterfaces/")),
        "{nic}"
    );
    assert!(
        body["properties"]["proximityPlacementGroup"]["id"]
            .as_str()
            .expect("a PPG id")
            .contains("/providers/Microsoft.Compute/proximityPlacementGroups/")
    );
    assert_eq!(
        body["properties"]["hardwareProfile"]["vmSize"],
        "Standard_ND40rs_v2"
    );
    assert_eq!(
        body["properties"]["storageProfile"]["osDisk"]["deleteOption"],
        "Delete"
    );
    assert_eq!(
        body["properties"]["osProfile"]["linuxConfiguration"]["disablePasswordAuthentication"],
        true
    );
    assert_eq!(body["tags"]["dsinfra-address"], "cluster.train[2].vm");
    assert_eq!(body["tags"]["managed-by"], "dsinfra");
}

#[test]
fn every_node_names_the_clusters_availability_set_which_sits_in_the_placement_group() {
    let desired = example("nd40-beeond.hcl");
    let set = request(&desired, "cluster.train.availability_set");
    assert!(
        set.id
            .as_str()
            .contains("/providers/Microsoft.Compute/availabilitySets/"),
        "{}",
        set.id.as_str()
    );
    let body = set.to_json();
    assert_eq!(body["sku"], serde_json::json!({"name": "Aligned"}));
    assert_eq!(body["properties"]["platformFaultDomainCount"], 1);
    assert_eq!(body["properties"]["platformUpdateDomainCount"], 1);
    let ppg = request(&desired, "cluster.train.ppg");
    assert_eq!(
        body["properties"]["proximityPlacementGroup"]["id"],
        ppg.id.as_str()
    );
    for i in 0..4 {
        let vm = request(&desired, &format!("cluster.train[{i}].vm")).to_json();
        assert_eq!(
            vm["properties"]["availabilitySet"]["id"],
            set.id.as_str(),
            "node {i}"
        );
    }
}

#[test]
fn a_nic_points_at_its_subnet_inside_the_vnet_and_at_its_public_ip() {
    let desired = example("dual-dsvm.hcl");
    let body = request(&desired, "vm.gpu.nic").to_json();
    let config = &body["properties"]["ipConfigurations"][0]["properties"];
    let subnet = config["subnet"]["id"].as_str().expect("a subnet id");
    assert!(
        subnet.contains("/providers/Microsoft.Network/virtualNetworks/")
            && subnet.contains("/subnets/"),
        "{subnet}"
    );
    assert!(
        config["publicIPAddress"]["id"]
            .as_str()
            .expect("a public IP id")
            .contains("/publicIPAddresses/")
    );
}

#[test]
fn containers_and_shares_carry_no_tags_and_sas_sends_nothing() {
    let desired = example("nd40-beeond.hcl");
    let container = request(&desired, "storage_account.data.container.cosmoflow").to_json();
    assert_eq!(container, json!({"properties": {"publicAccess": "None"}}));
    let share = request(&desired, "storage_account.data.file_share.results").to_json();
    assert_eq!(
        share,
        json!({"properties": {"shareQuota": 1024, "enabledProtocols": "SMB"}})
    );
    let sas = desired
        .resource(&"sas.read".parse().expect("valid"))
        .expect("present");
    assert_eq!(request_for(sas, &desired, SUB, None), Ok(None));
}

#[test]
fn the_park_schedule_targets_the_vm_at_hhmm() {
    let desired = example("dual-dsvm.hcl");
    let req = request(&desired, "vm.gpu.auto_shutdown");
    let body = req.to_json();
    assert_eq!(body["properties"]["dailyRecurrence"]["time"], "1900");
    assert_eq!(body["properties"]["taskType"], "ComputeVmShutdownTask");
    assert!(
        body["properties"]["targetResourceId"]
            .as_str()
            .expect("a VM id")
            .contains("/virtualMachines/")
    );
    assert!(req.id.as_str().contains("/schedules/shutdown-computevm-"));
}

#[test]
fn a_single_service_tag_source_goes_in_the_singular_field() {
    let desired = example("dual-dsvm.hcl");
    let body = request(&desired, "network.main.nsg").to_json();
    let rules = body["properties"]["securityRules"]
        .as_array()
        .expect("rules");
    let vnet_rule = rules
        .iter()
        .find(|r| r["name"] == "allow-vnet-inbound")
        .expect("the VNet rule");
    assert_eq!(
        vnet_rule["properties"]["sourceAddressPrefix"],
        "VirtualNetwork"
    );
    assert!(
        vnet_rule["properties"]
            .get("sourceAddressPrefixes")
            .is_none()
    );
}

#[test]
fn a_broken_reference_is_named() {
    let mut desired = example("dual-dsvm.hcl");
    let nic: Address = "vm.gpu.nic".parse().expect("valid");
    let index = desired
        .resources
        .iter()
        .position(|r| r.address == nic)
        .expect("present");
    desired.resources[index]
        .attrs
        .insert("public_ip".into(), json!("vm.nothere.public_ip"));
    let err = request_for(&desired.resources[index], &desired, SUB, None)
        .expect_err("the reference is unknown");
    assert_eq!(
        err.to_string(),
        "vm.gpu.nic: `public_ip` refers to vm.nothere.public_ip, which is not in the manifest"
    );
}

#[test]
fn only_a_create_carries_the_cloud_config_as_base64_custom_data() {
    use base64::Engine as _;
    let desired = example("dual-dsvm.hcl");
    let update = request(&desired, "vm.gpu.vm");
    // What request_for builds is what an update sends: never customData.
    assert!(
        update.to_json()["properties"]["osProfile"]
            .get("customData")
            .is_none()
    );
    let pair = crate::ssh::HostKeyPair::generate().expect("ed25519 generation works");
    let cloud_init = pair.cloud_config();
    let create = update.clone().with_custom_data(&cloud_init);
    let body = create.to_json();
    let encoded = body["properties"]["osProfile"]["customData"]
        .as_str()
        .expect("customData is set");
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .expect("customData is base64");
    assert_eq!(
        String::from_utf8(decoded).expect("UTF-8"),
        cloud_init.expose()
    );
    // Nothing else changes, and the request's Debug output never shows the value.
    let mut without = body.clone();
    without["properties"]["osProfile"]
        .as_object_mut()
        .expect("an object")
        .remove("customData");
    assert_eq!(without, update.to_json());
    let shown = format!("{create:?}");
    assert!(!shown.contains(encoded), "{shown}");
    assert!(!shown.contains("PRIVATE KEY"), "{shown}");
    // Only VMs take customData.
    let nic = request(&desired, "vm.gpu.nic");
    assert_eq!(nic.clone().with_custom_data(&cloud_init), nic);
}

/// Every body built from both seed examples is valid for its PUT operation in the official
/// spec, read-only properties excluded and unknown properties refused.
#[test]
fn every_seed_body_validates_against_the_official_spec() {
    let specs = match Specs::load_default() {
        Ok(specs) => specs,
        Err(missing) => {
            let ci = std::env::var("CI").is_ok_and(|v| v == "true");
            assert!(!ci, "the spec check is required under CI: {missing}");
            eprintln!("SKIPPING the spec check of request bodies: {missing}");
            return;
        }
    };
    let mut checked = 0;
    let cloud_init = crate::ssh::HostKeyPair::generate()
        .expect("ed25519 generation works")
        .cloud_config();
    for name in [
        "dual-dsvm.hcl",
        "nd40-beeond.hcl",
        "nfs-cache.hcl",
        "aks-gpu.hcl",
    ] {
        let desired = example(name);
        for resource in &desired.resources {
            let Some(req) = request_for(resource, &desired, SUB, None).expect("the body builds")
            else {
                continue;
            };
            // A VM is checked as updated (no customData) and as created (with it).
            let mut requests = vec![req.clone()];
            if resource.kind == ResourceKind::VirtualMachine {
                requests.push(req.with_custom_data(&cloud_init));
                // And as a spot VM (issue 34): priority, eviction policy and price cap.
                let mut spot = resource.clone();
                for (k, v) in [
                    ("priority", json!("Spot")),
                    ("eviction_policy", json!("Delete")),
                    ("max_price", json!(4.5)),
                ] {
                    spot.attrs.insert(k.into(), v);
                }
                let req = request_for(&spot, &desired, SUB, None)
                    .expect("the body builds")
                    .expect("a VM has a body");
                let props = &req.to_json()["properties"];
                assert_eq!(
                    (
                        &props["priority"],
                        &props["evictionPolicy"],
                        &props["billingProfile"]
                    ),
                    (&json!("Spot"), &json!("Delete"), &json!({"maxPrice": 4.5}))
                );
                requests.push(req.with_custom_data(&cloud_init));
            }
            // An AKS cluster also as an Entra-ID one (`entra_id = true`).
            if resource.kind == ResourceKind::AksCluster {
                let mut entra = resource.clone();
                entra
                    .attrs
                    .insert("entra_id".into(), serde_json::json!(true));
                let req = request_for(&entra, &desired, SUB, None)
                    .expect("the body builds")
                    .expect("a cluster has a body");
                assert_eq!(
                    req.to_json()["properties"]["aadProfile"],
                    serde_json::json!({"managed": true, "enableAzureRBAC": true})
                );
                requests.push(req);
            }
            for req in requests {
                let version = crate::azure::api_version::api_version_for_path(req.id.as_str());
                let op = specs
                    .operation("PUT", req.id.as_str(), version)
                    .unwrap_or_else(|| panic!("no PUT operation in the specs for {}", req.id));
                let body = req.to_json();
                let violations = op.validate_request(Some(&body));
                let strict = significant(&violations, true);
                assert!(
                    strict.is_empty(),
                    "{} ({}) is invalid: {:?}\n{body:#}",
                    resource.address,
                    op.operation_id(),
                    strict.iter().map(ToString::to_string).collect::<Vec<_>>()
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 45, "checked only {checked} bodies");
}

/// Azure Files NFS: the account holding the share allows plain NFS and only the experiment's
/// subnets, which carry the Microsoft.Storage service endpoint; other accounts are unchanged.
#[test]
fn an_nfs_account_denies_every_network_but_the_subnets_with_the_storage_endpoint() {
    let desired = example("nfs-cache.hcl");
    let account = request(&desired, "storage_account.nfs.account").to_json();
    let props = &account["properties"];
    assert_eq!(props["supportsHttpsTrafficOnly"], false);
    assert_eq!(props["minimumTlsVersion"], "TLS1_2");
    let vnet = request(&desired, "network.main.vnet");
    assert_eq!(
        props["networkAcls"],
        json!({
            "defaultAction": "Deny",
            "bypass": "None",
            "virtualNetworkRules": [
                {"id": format!("{}/subnets/default", vnet.id.as_str()), "action": "Allow"}
            ],
        })
    );
    let subnets = &vnet.to_json()["properties"]["subnets"];
    assert_eq!(
        subnets[0]["properties"]["serviceEndpoints"],
        json!([{"service": "Microsoft.Storage"}])
    );
    // The account waits for the VNet: Azure checks the subnet's endpoint when the rule is set.
    let resource = desired
        .resource(&"storage_account.nfs.account".parse().expect("valid"))
        .expect("present");
    assert!(
        resource
            .depends_on
            .contains(&"network.main.vnet".parse().expect("valid"))
    );

    let blob = example("dual-dsvm.hcl");
    let other = request(&blob, "storage_account.data.account").to_json();
    assert_eq!(other["properties"]["supportsHttpsTrafficOnly"], true);
    assert!(other["properties"].get("networkAcls").is_none());
    let subnets = &request(&blob, "network.main.vnet").to_json()["properties"]["subnets"];
    assert!(subnets[0]["properties"].get("serviceEndpoints").is_none());
}

/// Issue 13 item 13 and issue 29: a body states Trusted Launch only where the manifest layer (or
/// the connected preflight) chose it, with Secure Boot off where steps build kernel modules, on
/// InfiniBand and on NVIDIA GPUs; a block without Trusted Launch sends no profile (`Standard`
/// needs a feature), unless the preflight marked `Standard` explicit.
#[test]
fn every_vm_body_states_its_security_profile() {
    let profile = |desired: &Desired, address: &str| {
        request(desired, address).to_json()["properties"]["securityProfile"].clone()
    };
    // The HPC and DSVM images' Trusted Launch support is not known offline: no profile yet.
    let nd40 = example("nd40-beeond.hcl");
    for node in 0..4 {
        assert_eq!(
            profile(&nd40, &format!("cluster.train[{node}].vm")),
            Value::Null,
            "node {node}"
        );
    }
    let dual = example("dual-dsvm.hcl");
    assert_eq!(profile(&dual, "vm.gpu.vm"), Value::Null);
    let with_security = |security: Value| {
        let mut desired = dual.clone();
        let gpu = desired
            .resources
            .iter_mut()
            .find(|r| r.address.to_string() == "vm.gpu.vm")
            .expect("the GPU VM");
        gpu.attrs.insert("security".into(), security);
        profile(&desired, "vm.gpu.vm")
    };
    assert_eq!(
        with_security(json!({"type": "TrustedLaunch", "secure_boot": false, "vtpm": true})),
        json!({"securityType": "TrustedLaunch", "uefiSettings": {"secureBootEnabled": false, "vTpmEnabled": true}})
    );
    // `trusted_launch = false`, a Generation 1 image, or not decided: no profile at all.
    for standard in [
        json!({"type": "Standard", "secure_boot": false, "vtpm": false}),
        json!({"type": "Standard", "secure_boot": false, "vtpm": false, "asked": true}),
        json!({"type": "Standard", "secure_boot": false, "vtpm": false, "if_supported": {"secure_boot": false}}),
    ] {
        assert_eq!(with_security(standard.clone()), Value::Null, "{standard}");
    }
    // A subscription that gives Trusted Launch by default and has UseStandardSecurityType: the
    // preflight makes `Standard` explicit, and the body says so.
    assert_eq!(
        with_security(
            json!({"type": "Standard", "secure_boot": false, "vtpm": false, "asked": true, "explicit": true})
        ),
        json!({"securityType": "Standard"})
    );
}

/// The resource at `address` in `desired`, with its attributes as the plan's `after`.
fn resource<'d>(desired: &'d Desired, address: &str) -> &'d Resource {
    let address: Address = address.parse().expect("valid address");
    desired.resource(&address).expect("the example has it")
}

/// Holds a PATCH body to the spec's update operation for the resource (`*Update` models).
fn assert_valid_patch(req: &Request) {
    let Ok(specs) = Specs::load_default() else {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(!ci, "the spec check is required under CI");
        return;
    };
    let version = crate::azure::api_version::api_version_for_path(req.id.as_str());
    let op = specs
        .operation("PATCH", req.id.as_str(), version)
        .unwrap_or_else(|| panic!("no PATCH operation in the specs for {}", req.id));
    let body = req.to_json();
    let violations = op.validate_request(Some(&body));
    let strict = significant(&violations, true);
    assert!(
        strict.is_empty(),
        "{} is invalid: {:?}\n{body:#}",
        op.operation_id(),
        strict.iter().map(ToString::to_string).collect::<Vec<_>>()
    );
}

#[test]
fn a_vm_update_of_data_disks_and_tags_only_is_a_patch_of_just_those() {
    let desired = example("dual-dsvm-files.hcl");
    let vm = resource(&desired, "vm.prep.vm");
    let put = request(&desired, "vm.prep.vm");
    let mut before = vm.attrs.clone();
    before.insert("data_disks".into(), json!([]));
    before.insert("tags".into(), json!({"managed-by": "dsinfra"}));

    let req = update_request(put.clone(), &before, &vm.attrs);
    assert_eq!(req.method(), "PATCH");
    assert_eq!(req.id, put.id);
    let body = req.to_json();
    let disk_id =
        put.to_json()["properties"]["storageProfile"]["dataDisks"][0]["managedDisk"]["id"].clone();
    assert!(disk_id.as_str().is_some_and(|id| id.contains("/disks/")));
    assert_eq!(
        body,
        json!({
            "tags": put.to_json()["tags"],
            "properties": {"storageProfile": {"dataDisks": [{
                "lun": 0, "createOption": "Attach", "deleteOption": "Detach",
                "managedDisk": {"id": disk_id},
            }]}},
        }),
        "only what changed: never the OS profile, the image or the size"
    );
    assert_valid_patch(&req);

    // Losing its disk: the whole new list, empty, so the PATCH detaches it.
    let train = resource(&desired, "vm.train.vm");
    let mut before = train.attrs.clone();
    before.insert(
        "data_disks".into(),
        json!([{"lun": 0, "disk": "disk.datasets"}]),
    );
    let req = update_request(request(&desired, "vm.train.vm"), &before, &train.attrs);
    assert_eq!(
        req.to_json(),
        json!({"properties": {"storageProfile": {"dataDisks": []}}})
    );
    assert_valid_patch(&req);
}

#[test]
fn any_other_vm_change_stays_a_full_put() {
    let desired = example("dual-dsvm-files.hcl");
    let vm = resource(&desired, "vm.prep.vm");
    let put = request(&desired, "vm.prep.vm");
    // Nothing changed (an update the plan made for another reason): the PUT as built.
    assert_eq!(update_request(put.clone(), &vm.attrs, &vm.attrs), put);
    for (attribute, value) in [
        ("ssh_public_keys", json!(["ssh-ed25519 AAAAother"])),
        ("security", json!({"type": "Standard"})),
    ] {
        let mut before = vm.attrs.clone();
        before.insert("data_disks".into(), json!([]));
        before.insert(attribute.into(), value);
        let req = update_request(put.clone(), &before, &vm.attrs);
        assert_eq!(req.method(), "PUT", "{attribute}");
        assert_eq!(req, put);
    }
}

#[test]
fn a_disk_grow_or_retag_is_a_patch_and_a_location_change_is_not() {
    let desired = example("dual-dsvm-files.hcl");
    let disk = resource(&desired, "disk.datasets");
    let put = request(&desired, "disk.datasets");
    let mut before = disk.attrs.clone();
    before.insert("size_gb".into(), json!(512));
    let req = update_request(put.clone(), &before, &disk.attrs);
    assert_eq!(req.method(), "PATCH");
    assert_eq!(req.to_json(), json!({"properties": {"diskSizeGB": 1024}}));
    assert_valid_patch(&req);

    before.insert("sku".into(), json!("StandardSSD_LRS"));
    before.insert("tags".into(), Value::Null);
    let req = update_request(put.clone(), &before, &disk.attrs);
    assert_eq!(
        req.to_json(),
        json!({"properties": {"diskSizeGB": 1024}, "sku": {"name": "Premium_LRS"},
            "tags": put.to_json()["tags"]})
    );
    assert_valid_patch(&req);

    before.insert("location".into(), json!("westus"));
    assert_eq!(update_request(put.clone(), &before, &disk.attrs), put);
}
