//! Learning VM sizes before a connected `plan`/`apply` loads its manifest: a size the shipped
//! catalog lacks (Azure adds sizes after the catalog's date) is looked up in the subscription's
//! Resource SKUs before it is called unknown.
//!
//! The CLI loads the manifest once collecting such sizes instead of refusing them and hands the
//! result here with its connection (the same one the operation then uses). When there are some,
//! or a size the manifest names has facts the shipped catalog leaves unknown (its temp disk, say),
//! the SKUs of the manifest's region are read, what they say of those sizes is learnt into the
//! command's [`catalog::Catalog`] (with a note naming where the facts come from), and the CLI
//! judges the manifest against that catalog, so its rules (a step's `{temp}` on a size without
//! a temp disk) see the live facts, and a saved plan records them. A size the SKUs do not list
//! either stays an error, with the catalog's suggestion; offline commands never get this far.

use serde_json::Value;

use super::{Arm, Error, Events, OpEvent};
use crate::catalog;
use crate::engine::preflight::live;
use crate::model::{Desired, ResourceKind};

/// Learn from the Resource SKUs of `desired`'s region what the shipped catalog does not know of
/// the sizes it names (`unknown`: those the catalog lacks altogether). Best effort: without a
/// connection (`arm` is the error connecting gave), or when the SKUs cannot be read, a note says
/// so and the manifest's load then judges the sizes as the catalog has them.
pub async fn learn_sizes(
    arm: Result<&Arm, &Error>,
    desired: &Desired,
    unknown: &[String],
    events: &Events,
) -> catalog::Catalog {
    let mut learnt = desired.catalog.clone();
    let wanted = to_look_up(desired, unknown);
    if wanted.is_empty() {
        return learnt;
    }
    let skus = match arm {
        Ok(arm) => arm
            .client
            .compute_skus(&arm.subscription, &desired.azure.location)
            .await
            .map_err(|e| chain(&e)),
        Err(err) => Err(chain(err)),
    };
    let skus = match skus {
        Ok(skus) => skus,
        Err(why) => {
            events.event(OpEvent::Note(&format!(
                "could not look up {} in the subscription's Resource SKUs: {why}",
                wanted.join(", ")
            )));
            return learnt;
        }
    };
    let date = catalog::sizes_provenance()
        .generated
        .map_or_else(|| "unknown date".to_owned(), |d| d.to_string());
    let location = &desired.azure.location;
    for name in &wanted {
        let Some(live) = skus
            .iter()
            .filter(|s| {
                s.name
                    .as_deref()
                    .is_some_and(|n| n.eq_ignore_ascii_case(name))
            })
            .find_map(live::size_from_sku)
        else {
            continue;
        };
        let size = live.name.to_string();
        let note = match learnt.learn(live) {
            catalog::Learnt::New => format!(
                "{size} is not in the shipped catalog of {date}: its facts come from the \
                 subscription's Resource SKUs in {location}, and it has no price in the catalog"
            ),
            catalog::Learnt::Filled => format!(
                "{size}: what the shipped catalog of {date} does not say (temp disk, accelerated \
                 networking, premium IO) comes from the subscription's Resource SKUs in {location}"
            ),
            catalog::Learnt::Known => continue,
        };
        events.event(OpEvent::Note(&note));
    }
    learnt
}

/// The sizes worth a Resource SKUs lookup: those the catalog lacks, and those the manifest names
/// whose temp disk, accelerated networking or premium IO the shipped catalog does not know.
fn to_look_up(desired: &Desired, unknown: &[String]) -> Vec<String> {
    let mut names = unknown.to_vec();
    for vm in desired
        .resources
        .iter()
        .filter(|r| r.kind == ResourceKind::VirtualMachine)
    {
        let candidates = vm
            .attrs
            .get("sizes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .chain(vm.attrs.get("size"))
            .filter_map(Value::as_str);
        for name in candidates {
            let incomplete = desired.vm_size(name).is_some_and(|s| {
                s.temp_disk_gib.is_none()
                    || s.accelerated_networking.is_none()
                    || s.premium_io.is_none()
            });
            if incomplete && !names.iter().any(|n| n.eq_ignore_ascii_case(name)) {
                names.push(name.to_owned());
            }
        }
    }
    names
}

/// An error with its causes, as `anyhow`'s `{:#}` prints them ("outer: inner").
fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
