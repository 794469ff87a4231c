//! The connected security decision (issue 29), on hand-built worlds: what Azure says of the
//! size, the image and the subscription, and what each VM then gets.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::*;
use crate::engine::preflight::tests::{capacity_with, cluster};
use crate::state::{ResourceState, ResourceStatus};

const HPC: [&str; 4] = ["microsoft-dsvm", "ubuntu-hpc", "2204-v100", "latest"];

/// A cluster of two `size` VMs on `image` whose `security` is `security`.
fn vms(size: &str, image: [&str; 4], security: &Value) -> Desired {
    let mut desired = cluster(2, size, None);
    for r in &mut desired.resources {
        if r.kind == ResourceKind::VirtualMachine {
            r.attrs.insert(
                "image".into(),
                json!({"publisher": image[0], "offer": image[1], "sku": image[2], "version": image[3]}),
            );
            r.attrs.insert("security".into(), security.clone());
        }
    }
    desired
}

fn facts_with(image: [&str; 4], read: Option<ImageFacts>) -> SecurityFacts {
    let urn: [String; 4] = image.map(str::to_owned);
    SecurityFacts {
        images: BTreeMap::from([(image_key("eastus", &urn), read)]),
        ..SecurityFacts::default()
    }
}

#[allow(clippy::unnecessary_wraps)] // the shape of `SecurityFacts::images`' values
fn supports(trusted_launch: bool) -> Option<ImageFacts> {
    Some(ImageFacts {
        trusted_launch,
        generation: Some(2),
        arm64: Some(false),
    })
}

fn security_of(desired: &Desired, address: &str) -> Value {
    desired
        .resource(&address.parse().expect("valid"))
        .expect("present")
        .attrs["security"]
        .clone()
}

fn undecided(secure_boot: bool) -> Value {
    json!({"type": "Standard", "secure_boot": false, "vtpm": false, "if_supported": {"secure_boot": secure_boot}})
}

/// The flagship's case: ND40rs_v2 on the HPC image, whose support is not known offline.
#[test]
fn an_undecided_block_gets_trusted_launch_where_azure_says_the_size_and_image_support_it() {
    let mut desired = vms("Standard_ND40rs_v2", HPC, &undecided(false));
    let capacity = capacity_with("Standard_ND40rs_v2", &json!([]));
    desired.notes.push((
        "cluster.train".parse().expect("valid"),
        format!("no securityProfile offline: ... {SECURITY_WHERE_SUPPORTED}Trusted Launch with Secure Boot off: its beeond step builds kernel modules"),
    ));
    let (notes, problems) = apply(
        &mut desired,
        &[],
        &capacity,
        &facts_with(HPC, supports(true)),
    );
    assert!(
        problems.is_empty() && notes.is_empty(),
        "{problems:?} {notes:?}"
    );
    for i in 0..2 {
        assert_eq!(
            security_of(&desired, &format!("cluster.train[{i}].vm")),
            json!({"type": "TrustedLaunch", "secure_boot": false, "vtpm": true})
        );
    }
    // The block's note (shown when its VMs are created) keeps the reason and says what Azure said.
    assert_eq!(
        desired.notes,
        [(
            "cluster.train".parse().expect("valid"),
            "Trusted Launch with Secure Boot off: its beeond step builds kernel modules (Standard_ND40rs_v2 and image microsoft-dsvm:ubuntu-hpc:2204-v100:latest support Trusted Launch, read from Azure)".to_owned()
        )]
    );

    // The image does not advertise it: no profile, and the plan says why.
    let mut desired = vms("Standard_ND40rs_v2", HPC, &undecided(false));
    apply(
        &mut desired,
        &[],
        &capacity,
        &facts_with(HPC, supports(false)),
    );
    assert_eq!(
        security_of(&desired, "cluster.train[0].vm"),
        json!({"type": "Standard", "secure_boot": false, "vtpm": false})
    );
    assert!(
        desired.notes[0]
            .1
            .contains("does not support it (read from Azure)"),
        "{:?}",
        desired.notes
    );

    // The live SKU refuses it (TrustedLaunchDisabled), whatever the shipped catalog says.
    let mut desired = vms("Standard_ND40rs_v2", HPC, &undecided(false));
    let refusing = capacity_with(
        "Standard_ND40rs_v2",
        &json!([{"name": "TrustedLaunchDisabled", "value": "True"}]),
    );
    apply(
        &mut desired,
        &[],
        &refusing,
        &facts_with(HPC, supports(true)),
    );
    assert_eq!(
        security_of(&desired, "cluster.train[1].vm")["type"],
        "Standard"
    );

    // A VM that exists is not touched.
    let mut desired = vms("Standard_ND40rs_v2", HPC, &undecided(false));
    let existing = vec!["cluster.train[0].vm".parse().expect("valid")];
    apply(
        &mut desired,
        &existing,
        &capacity,
        &facts_with(HPC, supports(true)),
    );
    assert_eq!(
        security_of(&desired, "cluster.train[0].vm"),
        undecided(false)
    );
    assert_eq!(
        security_of(&desired, "cluster.train[1].vm")["type"],
        "TrustedLaunch"
    );
}

/// The manifest's `trusted_launch = true` (or `secure_boot`) is located on the VM.
fn manifest_asked(mut desired: Desired) -> Desired {
    for r in &mut desired.resources {
        r.attr_spans.insert(
            "security".into(),
            crate::diag::Span {
                file: std::path::Path::new("m.hcl").into(),
                start: 0,
                end: 1,
            },
        );
    }
    desired
}

#[test]
fn stated_trusted_launch_that_arm_would_refuse_is_an_error_before_any_write() {
    let stated = json!({"type": "TrustedLaunch", "secure_boot": false, "vtpm": true});
    let mut desired = manifest_asked(vms("Standard_ND96asr_v4", HPC, &stated));
    let refusing = capacity_with(
        "Standard_ND96asr_v4",
        &json!([{"name": "TrustedLaunchDisabled", "value": "True"}]),
    );
    let (_, problems) = apply(
        &mut desired,
        &[],
        &refusing,
        &facts_with(HPC, supports(true)),
    );
    assert_eq!(problems.len(), 1, "one per block: {problems:?}");
    assert!(problems[0].is_error());
    assert!(
        problems[0].summary.contains("TrustedLaunchDisabled"),
        "{problems:?}"
    );

    let mut desired = manifest_asked(vms("Standard_ND40rs_v2", HPC, &stated));
    let capacity = capacity_with("Standard_ND40rs_v2", &json!([]));
    let (_, problems) = apply(
        &mut desired,
        &[],
        &capacity,
        &facts_with(HPC, supports(false)),
    );
    assert!(
        problems[0].summary.contains("does not advertise it"),
        "{problems:?}"
    );

    // dsinfra's own choice (for the first of a `sizes` list, say) yields to Azure's answer.
    let mut desired = vms("Standard_ND96asr_v4", HPC, &stated);
    let (_, problems) = apply(
        &mut desired,
        &[],
        &refusing,
        &facts_with(HPC, supports(true)),
    );
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(
        security_of(&desired, "cluster.train[1].vm")["type"],
        "Standard"
    );
    assert!(
        desired.notes[0].1.contains("TrustedLaunchDisabled"),
        "{:?}",
        desired.notes
    );
}

#[test]
fn no_trusted_launch_on_a_subscription_that_gives_it_by_default_needs_standard() {
    let jammy = [
        "Canonical",
        "0001-com-ubuntu-server-jammy",
        "22_04-lts-gen2",
        "latest",
    ];
    let asked = json!({"type": "Standard", "secure_boot": false, "vtpm": false, "asked": true});
    let capacity = capacity_with("Standard_D4s_v5", &json!([]));
    let mut facts = facts_with(jammy, supports(true));
    facts.trusted_launch_by_default = true;

    let mut desired = vms("Standard_D4s_v5", jammy, &asked);
    let (_, problems) = apply(&mut desired, &[], &capacity, &facts);
    assert_eq!(problems.len(), 1);
    assert!(
        problems[0].summary.contains("asks for no Trusted Launch"),
        "{problems:?}"
    );
    assert!(
        problems[0]
            .help
            .iter()
            .any(|h| h.contains("UseStandardSecurityType")),
        "{problems:?}"
    );

    facts.standard_allowed = true;
    let mut desired = vms("Standard_D4s_v5", jammy, &asked);
    let (_, problems) = apply(&mut desired, &[], &capacity, &facts);
    assert!(problems.is_empty());
    assert_eq!(
        security_of(&desired, "cluster.train[0].vm")["explicit"],
        true
    );
    assert!(
        desired.notes[0].1.contains("states securityType Standard"),
        "{:?}",
        desired.notes
    );

    // Without Trusted Launch by default, omitting the profile is enough.
    facts.trusted_launch_by_default = false;
    let mut desired = vms("Standard_D4s_v5", jammy, &asked);
    let (notes, problems) = apply(&mut desired, &[], &capacity, &facts);
    assert!(notes.is_empty() && problems.is_empty());
    assert_eq!(security_of(&desired, "cluster.train[0].vm"), asked);
}

#[test]
fn an_image_the_region_lacks_or_of_the_wrong_kind_is_an_error() {
    let capacity = capacity_with("Standard_ND40rs_v2", &json!([]));
    let mut desired = vms("Standard_ND40rs_v2", HPC, &undecided(false));
    let (_, problems) = apply(&mut desired, &[], &capacity, &facts_with(HPC, None));
    assert_eq!(problems.len(), 1);
    assert!(
        problems[0].summary.contains("is not offered in eastus"),
        "{problems:?}"
    );

    // Issue 29 item 6: an unknown URN's generation is read from Azure when connected.
    let gen1 = Some(ImageFacts {
        trusted_launch: false,
        generation: Some(1),
        arm64: Some(false),
    });
    let mut desired = vms("Standard_ND40rs_v2", HPC, &undecided(false));
    let (_, problems) = apply(&mut desired, &[], &capacity, &facts_with(HPC, gen1));
    assert!(problems[0].summary.contains("Generation 1"), "{problems:?}");

    let arm = Some(ImageFacts {
        trusted_launch: true,
        generation: Some(2),
        arm64: Some(true),
    });
    let mut desired = vms("Standard_ND40rs_v2", HPC, &undecided(false));
    let (_, problems) = apply(&mut desired, &[], &capacity, &facts_with(HPC, arm));
    assert!(problems[0].summary.contains("is Arm64"), "{problems:?}");
}

#[test]
fn a_read_that_failed_is_said_and_the_shipped_data_decides() {
    let capacity = capacity_with("Standard_ND40rs_v2", &json!([]));
    let mut desired = vms("Standard_ND40rs_v2", HPC, &undecided(false));
    let facts = SecurityFacts {
        unread: vec!["image x: 503".into()],
        ..SecurityFacts::default()
    };
    let (notes, problems) = apply(&mut desired, &[], &capacity, &facts);
    assert!(problems.is_empty());
    assert!(
        notes[0].starts_with("could not read image x: 503"),
        "{notes:?}"
    );
    // The table does not know the HPC image's support: still undecided, so no profile is sent.
    assert_eq!(
        security_of(&desired, "cluster.train[0].vm"),
        undecided(false)
    );
}

fn state_with(address: &str, security: &Value) -> State {
    let mut state = State::new("exp");
    state.upsert(ResourceState {
        address: address.parse().expect("valid"),
        kind: ResourceKind::VirtualMachine,
        name: "vm".into(),
        parent: None,
        resource_group: "exp-rg".into(),
        id: None,
        attrs: [("security".to_owned(), security.clone())]
            .into_iter()
            .collect(),
        depends_on: BTreeSet::new(),
        status: ResourceStatus::Created,
        power_state: None,
        secrets: BTreeMap::new(),
        host_key: None,
        boots: 0,
        steps: BTreeMap::new(),
        mesh_key: None,
        nodes: BTreeMap::new(),
        drift: None,
    });
    state
}

/// A VM made by an older dsinfra (Trusted Launch stated for every Generation 2 block) is not
/// replaced because the default changed.
#[test]
fn existing_vms_keep_the_security_they_were_created_with_unless_the_manifest_changes_it() {
    let created = json!({"type": "TrustedLaunch", "secure_boot": false, "vtpm": true});
    let state = state_with("cluster.train[0].vm", &created);
    let mut desired = vms("Standard_ND40rs_v2", HPC, &undecided(false));
    let notes = keep_existing(&mut desired, &state);
    assert_eq!(security_of(&desired, "cluster.train[0].vm"), created);
    assert_eq!(
        security_of(&desired, "cluster.train[1].vm"),
        undecided(false)
    );
    assert_eq!(notes.len(), 1);
    assert!(notes[0].starts_with("cluster.train: its VMs keep the security settings they were created with (Trusted Launch, Secure Boot off)"), "{notes:?}");

    // The same profile with a new bookkeeping key is no change, and says nothing.
    let old_standard = json!({"type": "Standard", "secure_boot": false, "vtpm": false});
    let state = state_with("cluster.train[0].vm", &old_standard);
    let mut with_key = old_standard.clone();
    with_key["asked"] = json!(true);
    let mut desired = vms("Standard_ND40rs_v2", HPC, &with_key);
    assert!(keep_existing(&mut desired, &state).is_empty());
    assert_eq!(security_of(&desired, "cluster.train[0].vm"), old_standard);

    // The manifest's own `secure_boot = true` where the VM has it off: the VM is replaced.
    let state = state_with("cluster.train[0].vm", &created);
    let on = json!({"type": "TrustedLaunch", "secure_boot": true, "vtpm": true});
    let mut desired = manifest_asked(vms("Standard_ND40rs_v2", HPC, &on));
    assert!(keep_existing(&mut desired, &state).is_empty());
    assert_eq!(security_of(&desired, "cluster.train[0].vm"), on);
}
