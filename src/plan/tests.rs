//! Unit tests of the planner on hand-built desired worlds.

use chrono::Duration;
use serde_json::{Value, json};

use super::fixtures::{addr, dual, normal, now, set};
use super::*;
use crate::diag::Span;
use crate::model::ResourceKind;
use crate::state::{
    DSINFRA_VERSION, Drift, PowerState, ResourceStatus, SecretIdentity, SecretKind, State,
};

fn applied() -> State {
    State::from_applied(&dual(), "sub")
}

fn addresses(plan: &Plan, keep: impl Fn(&Change) -> bool) -> Vec<String> {
    plan.changes
        .iter()
        .filter(|c| keep(c))
        .map(|c| c.address.to_string())
        .collect()
}

#[test]
fn from_empty_everything_is_created_dependencies_first() {
    let plan = plan(&dual(), &State::new("exp"), &normal()).expect("plans");
    assert_eq!(
        addresses(&plan, |_| true),
        [
            "resource_group.main",
            "network.main.vnet",
            "storage_account.data.account",
            "storage_account.data.container.raw",
            "vm.gpu.pip",
            "vm.gpu.nic",
            "vm.gpu.vm",
        ]
    );
    assert!(plan.changes.iter().all(|c| c.action == Action::Create));
    assert!(plan.changes.iter().all(|c| c.reasons == [Reason::New]));
    assert_eq!(
        plan.counts(),
        Counts {
            add: 7,
            ..Counts::default()
        }
    );
    assert!(plan.has_changes());
    assert_eq!(plan.binding.serial, 0);
    assert_eq!(plan.steps.len(), 1);
    assert_eq!(plan.steps[0].nodes_text(), "vm.gpu");
}

#[test]
fn the_applied_state_plans_no_changes() {
    let plan = plan(&dual(), &applied(), &normal()).expect("plans");
    assert!(!plan.has_changes());
    assert!(plan.changes.iter().all(|c| c.action == Action::NoOp));
    assert_eq!(plan.binding.serial, 1);
    assert!((plan.cost.before.running_per_hour - plan.cost.after.running_per_hour).abs() < 1e-12);
}

#[test]
fn a_size_change_replaces_the_vm_naming_the_attribute() {
    let mut desired = dual();
    set(
        &mut desired,
        "vm.gpu.vm",
        "size",
        json!("Standard_NC24ads_A100_v4"),
    );
    let plan = plan(&desired, &applied(), &normal()).expect("plans");
    let vm = plan.change(&addr("vm.gpu.vm")).expect("planned");
    assert_eq!(
        vm.action,
        Action::Replace {
            forced_by: vec!["size".to_owned()]
        }
    );
    assert_eq!(vm.reasons[0].to_string(), "`size` cannot change in place");
    assert_eq!(plan.counts().replace, 1);
    assert_eq!(
        plan.counts().add + plan.counts().change + plan.counts().destroy,
        0
    );
}

#[test]
fn replacing_a_nic_replaces_the_vm_that_refers_to_it() {
    let mut desired = dual();
    set(
        &mut desired,
        "vm.gpu.nic",
        "subnet",
        json!("network.other.vnet"),
    );
    let plan = plan(&desired, &applied(), &normal()).expect("plans");
    let vm = plan.change(&addr("vm.gpu.vm")).expect("planned");
    assert_eq!(vm.forced_by(), ["nic"]);
    assert_eq!(
        vm.reasons,
        [Reason::DependencyReplaced {
            attribute: "nic".to_owned(),
            dependency: addr("vm.gpu.nic"),
        }]
    );
    assert_eq!(
        plan.change(&addr("vm.gpu.pip")).map(|c| &c.action),
        Some(&Action::NoOp)
    );
}

#[test]
fn a_tag_change_updates_in_place() {
    let mut desired = dual();
    set(
        &mut desired,
        "vm.gpu.vm",
        "tags",
        json!({"dsinfra-experiment": "exp", "owner": "ml"}),
    );
    let plan = plan(&desired, &applied(), &normal()).expect("plans");
    let vm = plan.change(&addr("vm.gpu.vm")).expect("planned");
    assert_eq!(vm.action, Action::Update);
    assert_eq!(vm.reasons[0].to_string(), "`tags` changed");
}

#[test]
fn removed_resources_are_deleted_dependents_first_before_other_changes() {
    let mut desired = dual();
    desired
        .resources
        .retain(|r| r.address.kind != "storage_account");
    set(&mut desired, "vm.gpu.vm", "tags", json!({}));
    let plan = plan(&desired, &applied(), &normal()).expect("plans");
    let deletes = addresses(&plan, |c| c.action == Action::Delete);
    assert_eq!(
        deletes,
        [
            "storage_account.data.container.raw",
            "storage_account.data.account"
        ]
    );
    assert_eq!(
        addresses(&plan, |_| true)[..2],
        deletes[..],
        "deletions come first"
    );
    let account = plan
        .change(&addr("storage_account.data.account"))
        .expect("planned");
    assert_eq!(account.reasons, [Reason::Removed]);
    assert!(account.after.is_none() && account.before.is_some());
    assert!(
        account
            .id
            .as_deref()
            .is_some_and(|id| id.ends_with("/storageAccounts/expdata01"))
    );
}

#[test]
fn an_interrupted_create_is_planned_as_create_to_adopt() {
    let mut state = applied();
    let vm = state.resource_mut(&addr("vm.gpu.vm")).expect("present");
    vm.status = ResourceStatus::Creating;
    let plan = plan(&dual(), &state, &normal()).expect("plans");
    let vm = plan.change(&addr("vm.gpu.vm")).expect("planned");
    assert_eq!(vm.action, Action::Create);
    assert_eq!(vm.reasons, [Reason::Interrupted]);
}

#[test]
fn drift_shows_in_the_plan() {
    let mut state = applied();
    state
        .resource_mut(&addr("vm.gpu.pip"))
        .expect("present")
        .drift = Some(Drift::Deleted);
    let nic = state.resource_mut(&addr("vm.gpu.nic")).expect("present");
    nic.drift = Some(Drift::Changed {
        attributes: vec!["location".to_owned()],
    });
    nic.attrs.insert("location".to_owned(), json!("westus"));
    let plan = plan(&dual(), &state, &normal()).expect("plans");
    let pip = plan.change(&addr("vm.gpu.pip")).expect("planned");
    assert_eq!(
        (&pip.action, &pip.reasons[..]),
        (&Action::Create, &[Reason::DriftDeleted][..])
    );
    assert!(pip.before.is_none());
    let nic = plan.change(&addr("vm.gpu.nic")).expect("planned");
    assert_eq!(nic.forced_by(), ["location"]);
    assert_eq!(
        nic.reasons[0].to_string(),
        "drifted: `location` changed outside dsinfra"
    );
    // The VM refers to the replaced NIC, so it is replaced too.
    assert_eq!(
        plan.change(&addr("vm.gpu.vm")).map(Change::forced_by),
        Some(&["nic".to_owned()][..])
    );
}

#[test]
fn destroy_deletes_everything_dependents_first() {
    let opts = PlanOptions {
        mode: Mode::Destroy { keep_data: false },
        ..normal()
    };
    let plan = plan(&dual(), &applied(), &opts).expect("plans");
    assert_eq!(
        addresses(&plan, |_| true),
        [
            "vm.gpu.vm",
            "vm.gpu.nic",
            "vm.gpu.pip",
            "storage_account.data.container.raw",
            "storage_account.data.account",
            "network.main.vnet",
            "resource_group.main",
        ]
    );
    assert!(plan.changes.iter().all(|c| c.action == Action::Delete));
    assert!(plan.steps.is_empty());
    assert!(plan.cost.after.running_per_hour.abs() < f64::EPSILON);
}

#[test]
fn destroy_keep_data_keeps_data_and_what_it_needs() {
    let opts = PlanOptions {
        mode: Mode::Destroy { keep_data: true },
        ..normal()
    };
    let plan = plan(&dual(), &applied(), &opts).expect("plans");
    assert_eq!(
        addresses(&plan, |c| c.action == Action::NoOp),
        [
            "resource_group.main",
            "storage_account.data.account",
            "storage_account.data.container.raw",
        ]
    );
    let rg = plan.change(&addr("resource_group.main")).expect("planned");
    assert_eq!(
        rg.reasons[0].to_string(),
        "kept by --keep-data: storage_account.data.account needs it"
    );
    assert_eq!(
        addresses(&plan, |c| c.action == Action::Delete),
        ["vm.gpu.vm", "vm.gpu.nic", "vm.gpu.pip", "network.main.vnet"]
    );
    assert!(plan.notes[0].starts_with("--keep-data keeps 2 data resource(s)"));
}

#[test]
fn prevent_destroy_refuses_at_the_block_with_advice() {
    let mut desired = dual();
    let file: std::sync::Arc<std::path::Path> = std::path::Path::new("exp.hcl").into();
    for r in &mut desired.resources {
        if r.address.kind == "storage_account" {
            r.lifecycle.prevent_destroy = true;
            r.span = Some(Span::new(file.clone(), 10, 20));
        }
    }
    let opts = PlanOptions {
        mode: Mode::Destroy { keep_data: false },
        ..normal()
    };
    let errors = plan(&desired, &applied(), &opts).expect_err("refused");
    assert_eq!(errors.len(), 2);
    assert_eq!(
        errors[0].summary,
        "storage_account.data.account has `prevent_destroy` set, but this plan would destroy it"
    );
    assert_eq!(errors[0].span.as_ref().map(|s| s.start), Some(10));
    assert_eq!(
        errors[0].help,
        [
            "`dsinfra destroy --keep-data` keeps storage accounts, shares, containers and data disks",
            "to really destroy it, remove `prevent_destroy` from `storage_account.data` first"
        ]
    );
    // With --keep-data nothing protected is destroyed, so the plan goes ahead.
    let keep = PlanOptions {
        mode: Mode::Destroy { keep_data: true },
        ..normal()
    };
    assert!(plan(&desired, &applied(), &keep).is_ok());

    // A replacement is refused too, naming the attribute.
    set(
        &mut desired,
        "storage_account.data.account",
        "sku",
        json!("Premium_LRS"),
    );
    let errors = plan(&desired, &applied(), &normal()).expect_err("refused");
    assert_eq!(
        errors[0].summary,
        "storage_account.data.account has `prevent_destroy` set, but this plan would replace it (`sku` cannot change in place)"
    );
    assert_eq!(errors[0].help[0], "revert the change to `sku` to keep it");
}

#[test]
fn targets_plan_the_selection_and_its_dependencies_only() {
    let mut desired = dual();
    set(
        &mut desired,
        "storage_account.data.container.raw",
        "public_access",
        json!("Blob"),
    );
    let opts = PlanOptions {
        targets: vec![addr("vm.gpu")],
        ..normal()
    };
    let plan = plan(&desired, &State::new("exp"), &opts).expect("plans");
    assert_eq!(
        addresses(&plan, |_| true),
        [
            "resource_group.main",
            "network.main.vnet",
            "vm.gpu.pip",
            "vm.gpu.nic",
            "vm.gpu.vm"
        ]
    );
    assert_eq!(
        plan.notes[0],
        "targeting is for exceptional cases (recovering from an error, working around a problem): this plan covers 5 of 7 resources; run a plan without -target afterwards"
    );
}

#[test]
fn a_target_that_matches_nothing_suggests_a_close_address() {
    let opts = PlanOptions {
        targets: vec![addr("vm.gpo")],
        ..normal()
    };
    let errors = plan(&dual(), &applied(), &opts).expect_err("no match");
    assert_eq!(
        errors[0].summary,
        "-target vm.gpo matches no resource in the manifest or the state"
    );
    assert_eq!(errors[0].help, ["did you mean `vm.gpu`?"]);
}

#[test]
fn destroy_targets_take_their_dependents_along() {
    let opts = PlanOptions {
        mode: Mode::Destroy { keep_data: false },
        targets: vec![addr("vm.gpu.nic")],
        now: now(),
        rerun_steps: std::collections::BTreeSet::new(),
    };
    let plan = plan(&dual(), &applied(), &opts).expect("plans");
    assert_eq!(addresses(&plan, |_| true), ["vm.gpu.vm", "vm.gpu.nic"]);
}

#[test]
fn a_sas_is_signed_again_before_it_expires() {
    let mut desired = dual();
    desired.resources.push(super::fixtures::resource(
        "storage_account.data.sas.read",
        ResourceKind::Sas,
        "read",
        &["storage_account.data.account"],
        &json!({"scope": "container", "permissions": "rl"}),
    ));
    let mut state = State::from_applied(&desired, "sub");
    let set_expiry = |state: &mut State, expiry| {
        let sas = state
            .resource_mut(&addr("storage_account.data.sas.read"))
            .expect("present");
        sas.secrets.insert(
            "token".to_owned(),
            SecretIdentity {
                kind: SecretKind::Sas,
                scope: "container expdata01/raw".to_owned(),
                permissions: "rl".to_owned(),
                expiry: Some(expiry),
                signed_at: None,
                fingerprint: SecretIdentity::fingerprint(b"l", b"s"),
            },
        );
    };
    set_expiry(&mut state, now() + Duration::hours(48));
    let fresh = plan(&desired, &state, &normal()).expect("plans");
    assert!(!fresh.has_changes());

    let expiry = now() + Duration::minutes(30);
    set_expiry(&mut state, expiry);
    let plan = plan(&desired, &state, &normal()).expect("plans");
    let sas = plan
        .change(&addr("storage_account.data.sas.read"))
        .expect("planned");
    assert_eq!(sas.forced_by(), ["expiry"]);
    assert_eq!(sas.reasons, [Reason::SasExpiring { expiry }]);
    assert_eq!(sas.secrets, ["token"]);
}

#[test]
fn nodes_and_parked_vms_are_priced_individually() {
    let mut state = applied();
    state
        .resource_mut(&addr("vm.gpu.vm"))
        .expect("present")
        .power_state = Some(PowerState::Deallocated);
    let plan = plan(&dual(), &state, &normal()).expect("plans");
    let priced: Vec<String> = plan
        .cost
        .resources
        .iter()
        .map(|r| r.address.to_string())
        .collect();
    assert_eq!(priced, ["vm.gpu.pip", "vm.gpu.vm"]);
    let disk = crate::catalog::disk_price_per_hour("Premium_LRS", 128);
    let parked = crate::catalog::PUBLIC_IP_PER_HOUR + disk;
    assert!((plan.cost.after.parked_per_hour - parked).abs() < 1e-6);
    assert!((plan.cost.after.running_per_hour - (parked + 0.526)).abs() < 1e-6);
    assert_eq!(
        plan.change(&addr("vm.gpu.vm")).and_then(|c| c.power_state),
        Some(PowerState::Deallocated)
    );
}

#[test]
fn a_dependency_cycle_is_reported_as_a_path() {
    let mut desired = dual();
    desired.resources[0].depends_on.insert(addr("vm.gpu.vm"));
    let errors = plan(&desired, &State::new("exp"), &normal()).expect_err("cycle");
    assert!(
        errors[0]
            .summary
            .starts_with("the manifest's resources depend on each other in a cycle: "),
        "{}",
        errors[0].summary
    );
    assert!(
        errors[0].summary.contains("vm.gpu.vm -> network.main.vnet"),
        "{}",
        errors[0].summary
    );
}

#[test]
fn saved_plans_round_trip_and_bind_to_state_and_manifest() {
    let state = applied();
    let desired = dual();
    let saved = plan(&desired, &state, &normal()).expect("plans");
    let text = saved.to_saved_json();
    let back = Plan::from_saved_json(&text, "p.json").expect("reads");
    // Costs are floats, which serde_json may read back a bit off; everything else is exact.
    assert_eq!(back.changes, saved.changes);
    assert_eq!((&back.binding, &back.steps), (&saved.binding, &saved.steps));
    assert!((back.cost.after.running_per_month - saved.cost.after.running_per_month).abs() < 1e-6);
    assert_eq!(check_binding(&back, &state, &desired.manifest_hash), Ok(()));

    let mut moved = state.clone();
    moved.serial = 2;
    assert_eq!(
        check_binding(&back, &moved, &desired.manifest_hash)
            .expect_err("stale")
            .to_string(),
        "the saved plan was made against state serial 1, the state is now at serial 2: run `dsinfra plan -out` again"
    );
    let mut other = state.clone();
    other.lineage = "other-lineage".to_owned();
    assert_eq!(
        check_binding(&back, &other, &desired.manifest_hash)
            .expect_err("stale")
            .to_string(),
        format!(
            "the saved plan was made against state lineage {}, but the state now has lineage other-lineage (it was replaced or belongs to another experiment): run `dsinfra plan -out` again",
            state.lineage
        )
    );
    assert_eq!(
        check_binding(&back, &state, &"ab".repeat(32))
            .expect_err("stale")
            .to_string(),
        "the manifest or its variables changed since the plan was saved (hash 0f0f0f0f0f0f then, abababababab now): run `dsinfra plan -out` again"
    );
    let mut old = back.clone();
    old.binding.dsinfra_version = "0.0.9".to_owned();
    assert_eq!(
        check_binding(&old, &state, &desired.manifest_hash)
            .expect_err("stale")
            .to_string(),
        format!(
            "the saved plan was made by dsinfra 0.0.9, this is dsinfra {DSINFRA_VERSION}: run `dsinfra plan -out` again"
        )
    );
}

#[test]
fn a_plan_from_an_unsaved_state_stays_valid_while_the_state_is_unsaved() {
    let desired = dual();
    let saved = plan(&desired, &State::new("exp"), &normal()).expect("plans");
    // Loading "no state" again gives a fresh lineage: that is the same, empty world.
    assert_eq!(
        check_binding(&saved, &State::new("exp"), &desired.manifest_hash),
        Ok(())
    );
}

#[test]
fn a_newer_or_broken_plan_file_is_refused() {
    let err = Plan::from_saved_json(r#"{"format_version": 9}"#, "p.json").expect_err("newer");
    assert_eq!(
        err.to_string(),
        "p.json is a saved plan of format 9, but this dsinfra reads format 1 at most: apply it with the dsinfra that made it, or run `dsinfra plan -out` again"
    );
    let err = Plan::from_saved_json("{", "p.json").expect_err("broken");
    assert_eq!(
        err.to_string(),
        "p.json is not a saved dsinfra plan: EOF while parsing an object at line 1 column 1"
    );
    let value: Value = serde_json::from_str(
        &plan(&dual(), &applied(), &normal())
            .expect("plans")
            .to_saved_json(),
    )
    .expect("json");
    assert_eq!(value["binding"]["serial"], json!(1));
    assert_eq!(value["format_version"], json!(PLAN_FORMAT_VERSION));
}

mod aml;
