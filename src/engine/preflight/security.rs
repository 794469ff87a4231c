//! A VM's security settings, decided with what Azure says when connected (issue 29).
//!
//! The manifest layer states Trusted Launch only where the shipped data knows that the size and
//! the image support it; where it does not know, the VM has no `securityProfile` yet and its
//! `security` attribute remembers the Secure Boot it would get (`if_supported`,
//! manifest::expand::security). Connected, before planning, this module reads:
//! - the size's Resource SKU (`TrustedLaunchDisabled`, already fetched for the quota preflight);
//! - the image's `features` (`SecurityType`), generation and architecture
//!   (VirtualMachineImages_List newest first, then VirtualMachineImages_Get);
//! - the subscription's Compute preview features `TrustedLaunchByDefaultPreview` (ARM then gives
//!   a VM without a profile Trusted Launch with Secure Boot, where size and image allow) and
//!   `UseStandardSecurityType` (ARM then accepts `securityType: Standard`).
//!
//! From those it states Trusted Launch where both support it, refuses before any write what ARM
//! would refuse at the VM (Trusted Launch where the size or image lacks it, an image of the wrong
//! generation or architecture, an image the region does not offer), and keeps Trusted Launch off
//! on a subscription that gives it by default only by sending `Standard`, which needs the
//! feature. VMs that exist keep the settings they were created with ([`keep_existing`]): a
//! changed default must not replace running VMs; only the manifest's own `trusted_launch` or
//! `secure_boot` does.
//!
//! Fetching ([`SecurityFacts::fetch`]) is separate from deciding ([`apply`]), which is pure.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::addr::Address;
use crate::azure::ArmClient;
use crate::catalog::{self, images as known_images};
use crate::diag::Diagnostic;
use crate::model::{Desired, Resource, ResourceKind, SECURITY_WHERE_SUPPORTED};
use crate::state::State;

use super::{Capacity, live, text};

/// The Compute feature that gives VMs without a profile Trusted Launch (REST clients too).
pub const TRUSTED_LAUNCH_BY_DEFAULT: &str = "TrustedLaunchByDefaultPreview";
/// The Compute feature without which ARM refuses `securityType: Standard`.
pub const USE_STANDARD_SECURITY_TYPE: &str = "UseStandardSecurityType";

/// What Azure says of one image version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageFacts {
    /// Its `SecurityType` feature includes Trusted Launch.
    pub trusted_launch: bool,
    /// `hyperVGeneration`, 1 or 2, if stated.
    pub generation: Option<u8>,
    /// An Arm64 image, if its architecture is stated.
    pub arm64: Option<bool>,
}

/// What the subscription and the marketplace say, for the VMs a plan creates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecurityFacts {
    /// Registered for `TrustedLaunchByDefaultPreview`.
    pub trusted_launch_by_default: bool,
    /// Registered for `UseStandardSecurityType`.
    pub standard_allowed: bool,
    /// By [`image_key`]: `Some` with what the image says, `None` when the region does not offer
    /// it. An image absent from the map was not read.
    pub images: BTreeMap<String, Option<ImageFacts>>,
    /// What could not be read (the plan says so and decides from the shipped data).
    pub unread: Vec<String>,
}

/// The marketplace image of a VM's `image` attribute: publisher, offer, SKU, version.
fn urn_of(vm: &Resource) -> Option<[String; 4]> {
    let image = vm.attrs.get("image")?;
    let part = |k: &str| image.get(k).and_then(Value::as_str).map(str::to_owned);
    Some([
        part("publisher")?,
        part("offer")?,
        part("sku")?,
        part("version").unwrap_or_else(|| "latest".to_owned()),
    ])
}

/// The key of an image in a location: `location/publisher:offer:sku:version`, lower case.
pub fn image_key(location: &str, urn: &[String; 4]) -> String {
    format!("{location}/{}", urn.join(":")).to_ascii_lowercase()
}

/// The VMs the plan creates (those not in `existing`) that have a `security` attribute.
fn new_vms<'d>(desired: &'d Desired, existing: &[Address]) -> impl Iterator<Item = &'d Resource> {
    desired.resources.iter().filter(move |r| {
        r.kind == ResourceKind::VirtualMachine
            && !existing.contains(&r.address)
            && r.attrs.contains_key("security")
    })
}

impl SecurityFacts {
    /// Read the two features and every image the new VMs use (one List and one Get each),
    /// concurrently. A read that fails is noted in `unread`, not raised: the plan then decides
    /// from the shipped data, as offline.
    pub async fn fetch(
        client: &ArmClient,
        subscription: &str,
        desired: &Desired,
        existing: &[Address],
    ) -> Self {
        let mut wanted: BTreeMap<String, (String, [String; 4])> = BTreeMap::new();
        for vm in new_vms(desired, existing) {
            if let (Some(location), Some(urn)) = (text(vm.attrs.get("location")), urn_of(vm)) {
                let location = location.to_ascii_lowercase();
                wanted.insert(image_key(&location, &urn), (location, urn));
            }
        }
        if wanted.is_empty() {
            return Self::default();
        }
        let feature = |name: &'static str| async move {
            (
                name,
                client
                    .feature_registered(subscription, "Microsoft.Compute", name)
                    .await,
            )
        };
        let images = wanted.into_iter().map(|(key, (location, urn))| async move {
            let [p, o, s, v] = &urn;
            let read = client.vm_image(subscription, &location, (p, o, s, v)).await;
            (key, urn.join(":"), read)
        });
        let (by_default, standard, images) = futures::join!(
            feature(TRUSTED_LAUNCH_BY_DEFAULT),
            feature(USE_STANDARD_SECURITY_TYPE),
            futures::future::join_all(images)
        );
        let mut facts = Self::default();
        for (name, read) in [by_default, standard] {
            match read {
                Ok(on) if name == TRUSTED_LAUNCH_BY_DEFAULT => facts.trusted_launch_by_default = on,
                Ok(on) => facts.standard_allowed = on,
                Err(err) => facts.unread.push(format!(
                    "the subscription's feature Microsoft.Compute/{name}: {err}"
                )),
            }
        }
        for (key, urn, read) in images {
            match read {
                Ok(image) => {
                    let image = image.map(|i| ImageFacts {
                        trusted_launch: known_images::security_type_allows_trusted_launch(
                            i.feature("SecurityType"),
                        ),
                        generation: i.generation(),
                        arm64: i.arm64(),
                    });
                    facts.images.insert(key, image);
                }
                Err(err) => facts.unread.push(format!("image {urn}: {err}")),
            }
        }
        facts
    }
}

/// The security attribute of a VM, as the manifest layer wrote it.
struct Wanted {
    trusted_launch: bool,
    asked_standard: bool,
    if_supported: Option<bool>,
}

fn wanted(security: &Value) -> Wanted {
    Wanted {
        trusted_launch: security.get("type").and_then(Value::as_str) == Some("TrustedLaunch"),
        asked_standard: security.get("asked").and_then(Value::as_bool) == Some(true),
        if_supported: security
            .pointer("/if_supported/secure_boot")
            .and_then(Value::as_bool),
    }
}

fn trusted(secure_boot: bool) -> Value {
    json!({"type": "TrustedLaunch", "secure_boot": secure_boot, "vtpm": true})
}

/// No Trusted Launch (no profile sent), as the manifest layer writes it.
fn standard() -> Value {
    json!({"type": "Standard", "secure_boot": false, "vtpm": false})
}

/// Where a diagnostic about the VM's security points: the manifest's `trusted_launch` or
/// `secure_boot` when it states one, else the block.
fn security_span(vm: &Resource) -> Option<crate::diag::Span> {
    vm.attr_spans
        .get("security")
        .cloned()
        .or_else(|| vm.span.clone())
}

/// The block's note, replaced: the offline one said the choice was not known yet.
fn set_note(desired: &mut Desired, block: &Address, note: String) {
    desired.notes.retain(|(b, _)| b != block);
    desired.notes.push((block.clone(), note));
}

/// Decide each new VM's security from the live facts. Each decision replaces its block's note
/// (`desired.notes`, shown when the block's VMs are created); returns the plan's other notes
/// (what could not be read) and the problems (errors: ARM would refuse the VM).
pub fn apply(
    desired: &mut Desired,
    existing: &[Address],
    capacity: &Capacity,
    facts: &SecurityFacts,
) -> (Vec<String>, Vec<Diagnostic>) {
    let notes: Vec<String> = facts
        .unread
        .iter()
        .map(|what| format!("could not read {what}; Trusted Launch decided from the shipped data"))
        .collect();
    let mut problems = Vec::new();
    let mut changes: Vec<(Address, Value, Option<String>)> = Vec::new();
    let mut seen_blocks = BTreeSet::new();
    for vm in new_vms(desired, existing) {
        let first_of_block = seen_blocks.insert(vm.address.block_address());
        if let Some((security, note)) = decide(
            vm,
            (&desired.notes, &desired.catalog),
            capacity,
            facts,
            first_of_block,
            &mut problems,
        ) {
            changes.push((vm.address.clone(), security, note));
        }
    }
    for (address, security, note) in changes {
        let block = address.block_address();
        if let Some(resource) = desired.resources.iter_mut().find(|r| r.address == address) {
            resource.attrs.insert("security".into(), security);
        }
        if let Some(note) = note {
            // Shown with the block's VMs being created, as the manifest layer's notes are.
            set_note(desired, &block, note);
        }
    }
    (notes, problems)
}

/// What is known of one new VM's size and image, live where read, else shipped.
struct Known {
    size: String,
    image_name: String,
    /// The size accepts Trusted Launch.
    size_tl: Option<bool>,
    /// The image advertises Trusted Launch.
    image_tl: Option<bool>,
}

/// One new VM's size and image as Azure describes them; `None` when the VM cannot be judged (or
/// its image is not offered, which is added to `problems` with what else ARM would refuse).
fn known(
    vm: &Resource,
    (capacity, catalog): (&Capacity, &catalog::Catalog),
    facts: &SecurityFacts,
    first_of_block: bool,
    problems: &mut Vec<Diagnostic>,
) -> Option<Known> {
    let block = vm.address.block_address();
    let (Some(size), Some(location), Some(urn)) = (
        text(vm.attrs.get("size")),
        text(vm.attrs.get("location")),
        urn_of(vm),
    ) else {
        return None;
    };
    let location = location.to_ascii_lowercase();
    let image_name = urn.join(":");
    let live_size = capacity.sku(&location, &size);
    let info = catalog.vm_size(&size);
    let size_tl = live_size
        .and_then(live::trusted_launch)
        .or_else(|| info.and_then(|s| s.trusted_launch));
    let size_arm64 = live_size
        .and_then(live::cpu_architecture)
        .map(|cpu| cpu == catalog::CpuArchitecture::Arm64)
        .or_else(|| info.map(catalog::VmSize::arm64));
    let image = match facts.images.get(&image_key(&location, &urn)) {
        Some(Some(image)) => Some(image.clone()),
        Some(None) => {
            if first_of_block {
                problems.push(
                    Diagnostic::error(format!(
                        "{block}: image {image_name} is not offered in {location}"
                    ))
                    .with_span_opt(vm.span.clone())
                    .with_label("VirtualMachineImages_List found no version of it there")
                    .with_help("check the publisher, offer and SKU (`az vm image list --all --publisher ...`), or use an image alias"),
                );
            }
            return None;
        }
        None => None,
    };
    let image_tl = image
        .as_ref()
        .map(|i| i.trusted_launch)
        .or_else(|| known_images::trusted_launch(&urn[0], &urn[1], &urn[2]));
    if let Some(image) = &image
        && first_of_block
    {
        problems.extend(image_problems(
            &block,
            vm,
            (&size, info),
            &image_name,
            image,
            size_arm64,
        ));
    }
    Some(Known {
        size,
        image_name,
        size_tl,
        image_tl,
    })
}

/// One new VM's security from the live facts: the value to set and the block's new note, if it
/// changes; problems are added to `problems` (once per block: `first_of_block`).
fn decide(
    vm: &Resource,
    (notes, catalog): (&[(Address, String)], &catalog::Catalog),
    capacity: &Capacity,
    facts: &SecurityFacts,
    first_of_block: bool,
    problems: &mut Vec<Diagnostic>,
) -> Option<(Value, Option<String>)> {
    let block = vm.address.block_address();
    let known_facts = known(vm, (capacity, catalog), facts, first_of_block, problems)?;
    let Known {
        size,
        image_name,
        size_tl,
        image_tl,
    } = &known_facts;
    let (size_tl, image_tl) = (*size_tl, *image_tl);
    let security = vm.attrs.get("security")?;
    let want = wanted(security);
    if want.trusted_launch {
        return check_stated(vm, &known_facts, first_of_block, problems);
    }
    let supported = size_tl == Some(true) && image_tl == Some(true);
    if let Some(secure_boot) = want.if_supported {
        if supported {
            // The offline note said what the block gets where both support it, and why.
            let reason = notes
                .iter()
                .find(|(b, _)| *b == block)
                .and_then(|(_, note)| note.split_once(SECURITY_WHERE_SUPPORTED))
                .map_or_else(
                    || {
                        format!(
                            "Trusted Launch{}",
                            if secure_boot {
                                ""
                            } else {
                                " with Secure Boot off"
                            }
                        )
                    },
                    |(_, reason)| reason.to_owned(),
                );
            let note = format!(
                "{reason} ({size} and image {image_name} support Trusted Launch, read from Azure)"
            );
            return Some((trusted(secure_boot), Some(note)));
        }
        let why = if size_tl == Some(false) {
            format!("{size} does not support it")
        } else if image_tl == Some(false) {
            format!("image {image_name} does not support it")
        } else {
            // Still not known (a read failed): no profile, as offline.
            if facts.trusted_launch_by_default && !secure_boot && first_of_block {
                problems.push(
                    Diagnostic::warning(format!(
                        "{block}: Azure may give its VMs Secure Boot, which this block needs off"
                    ))
                    .with_span_opt(vm.span.clone())
                    .with_label("the subscription gives Trusted Launch by default, and whether the size and image support it could not be read")
                    .with_help("set `secure_boot = false` on the block to state Trusted Launch with Secure Boot off"),
                );
            }
            return None;
        };
        return Some((
            standard(),
            Some(format!("no Trusted Launch: {why} (read from Azure)")),
        ));
    }
    // Without Trusted Launch: on a subscription that gives it by default, ARM would add it
    // (with Secure Boot) where the size and image allow.
    let azure_adds_it =
        facts.trusted_launch_by_default && size_tl != Some(false) && image_tl == Some(true);
    if want.asked_standard && azure_adds_it {
        if facts.standard_allowed {
            let mut explicit = security.clone();
            explicit["explicit"] = json!(true);
            return Some((explicit,
                Some("no Trusted Launch: the VM states securityType Standard, because this subscription gives Trusted Launch by default (TrustedLaunchByDefaultPreview) and is registered for UseStandardSecurityType".to_owned()),
            ));
        } else if first_of_block {
            problems.push(
                Diagnostic::error(format!(
                    "{block} asks for no Trusted Launch, which this subscription cannot give"
                ))
                .with_span_opt(security_span(vm))
                .with_label("the subscription gives Trusted Launch by default (Microsoft.Compute/TrustedLaunchByDefaultPreview), and only `securityType: Standard` opts out, which needs Microsoft.Compute/UseStandardSecurityType")
                .with_help("register the feature (`az feature register --namespace Microsoft.Compute --name UseStandardSecurityType`, then `az provider register -n Microsoft.Compute`), or remove `trusted_launch = false` (the VM then gets Trusted Launch)"),
            );
        }
    }
    None
}

/// Trusted Launch the VM states, checked against what Azure says: dsinfra's own choice yields to
/// a refusal, the manifest's is an error (once per block).
fn check_stated(
    vm: &Resource,
    known: &Known,
    first_of_block: bool,
    problems: &mut Vec<Diagnostic>,
) -> Option<(Value, Option<String>)> {
    let block = vm.address.block_address();
    let Known {
        size,
        image_name,
        size_tl,
        image_tl,
    } = known;
    // Stated: checked against what Azure says.
    let refusal = if *size_tl == Some(false) {
        Some(format!(
            "{size} does not support it (Resource SKUs: TrustedLaunchDisabled)"
        ))
    } else if *image_tl == Some(false) {
        Some(format!(
            "image {image_name} does not advertise it (its features have no SecurityType with Trusted Launch)"
        ))
    } else {
        None
    };
    let asked = vm.attr_spans.contains_key("security");
    if let Some(why) = refusal.as_ref().filter(|_| !asked) {
        // dsinfra's own choice, made for another size (a `sizes` fallback took this one)
        // or from the shipped data: Azure's answer wins.
        return Some((
            standard(),
            Some(format!("no Trusted Launch: {why} (read from Azure)")),
        ));
    }
    if let Some(why) = refusal.filter(|_| first_of_block) {
        problems.push(
            Diagnostic::error(format!("{block} cannot use Trusted Launch: {why}"))
                .with_span_opt(security_span(vm))
                .with_label("ARM would refuse the VM after the network and disks exist")
                .with_help("remove `trusted_launch = true` / `secure_boot = true`, or use a size and an image that support Trusted Launch"),
        );
    }
    None
}

/// What ARM refuses of an image for a size: the other generation, the other architecture.
fn image_problems(
    block: &Address,
    vm: &Resource,
    (size, info): (&str, Option<&catalog::VmSize>),
    image_name: &str,
    image: &ImageFacts,
    size_arm64: Option<bool>,
) -> Vec<Diagnostic> {
    let span = vm
        .attr_spans
        .get("image")
        .cloned()
        .or_else(|| vm.span.clone());
    let mut problems = Vec::new();
    if let (Some(image_arm64), Some(size_arm64)) = (image.arm64, size_arm64)
        && image_arm64 != size_arm64
    {
        let (size_arch, image_arch) = if size_arm64 {
            ("Arm64", "x64")
        } else {
            ("x64", "Arm64")
        };
        problems.push(
            Diagnostic::error(format!(
                "{block}: image {image_name} is {image_arch}, and {size} is {size_arch}"
            ))
            .with_span_opt(span.clone())
            .with_label("read from Azure (VirtualMachineImages_Get: architecture)")
            .with_help(format!("use an {size_arch} image of the same OS (the image aliases pick one), or an {image_arch} size")),
        );
    }
    if let (Some(generation), Some(info)) = (image.generation, info) {
        let fits = (generation == 1 && info.gen1) || (generation == 2 && info.gen2);
        if !fits {
            problems.push(
                Diagnostic::error(format!(
                    "{block}: image {image_name} is Generation {generation}, which {size} does not boot"
                ))
                .with_span_opt(span)
                .with_label("read from Azure (VirtualMachineImages_Get: hyperVGeneration)")
                .with_help("use an image of the generation the size boots (the image aliases pick it)"),
            );
        }
    }
    problems
}

/// VMs that exist keep the security settings they were created with when the manifest does not
/// state them: dsinfra's default may have changed since (issue 29 changed it), and `security`
/// replaces the VM. Returns one plan note per block whose default differs.
pub fn keep_existing(desired: &mut Desired, state: &State) -> Vec<String> {
    let mut notes = Vec::new();
    let mut blocks_noted = BTreeSet::new();
    for resource in desired
        .resources
        .iter_mut()
        .filter(|r| r.kind == ResourceKind::VirtualMachine)
    {
        let Some(created) = state
            .resource(&resource.address)
            .and_then(|r| r.attrs.get("security"))
        else {
            continue;
        };
        let Some(now) = resource.attrs.get("security") else {
            continue;
        };
        if created == now {
            continue;
        }
        // The same profile written with other bookkeeping keys (`asked`): not a change.
        let same = same_security(created, now);
        if !same && resource.attr_spans.contains_key("security") {
            // The manifest's own choice changed: the plan replaces the VMs.
            continue;
        }
        let block = resource.address.block_address();
        if !same && blocks_noted.insert(block.clone()) {
            notes.push(format!(
                "{block}: its VMs keep the security settings they were created with ({}); dsinfra would choose {} for new ones (set `trusted_launch` or `secure_boot` on the block to change them, which replaces the VMs)",
                describe(created),
                describe(now)
            ));
        }
        resource.attrs.insert("security".into(), created.clone());
    }
    notes
}

/// Whether two `security` values send the same profile.
fn same_security(a: &Value, b: &Value) -> bool {
    let key = |v: &Value| {
        (
            v.get("type").and_then(Value::as_str).map(str::to_owned),
            v.get("secure_boot").and_then(Value::as_bool),
            v.get("vtpm").and_then(Value::as_bool),
            v.pointer("/if_supported/secure_boot")
                .and_then(Value::as_bool),
        )
    };
    key(a) == key(b)
}

fn describe(security: &Value) -> String {
    match security.get("type").and_then(Value::as_str) {
        Some("TrustedLaunch") => format!(
            "Trusted Launch, Secure Boot {}",
            if security.get("secure_boot").and_then(Value::as_bool) == Some(true) {
                "on"
            } else {
                "off"
            }
        ),
        _ if security.get("if_supported").is_some() => {
            "Trusted Launch where Azure says the size and image support it".to_owned()
        }
        _ => "no Trusted Launch".to_owned(),
    }
}

#[cfg(test)]
mod tests;
