//! Loading a manifest for a command that connects (`plan`, `apply`): a VM size the shipped
//! catalog lacks (Azure adds sizes after the catalog's date) is looked up in the subscription's
//! Resource SKUs before it is called unknown.
//!
//! The manifest is loaded once collecting such sizes instead of refusing them; when there are
//! some, or a size it names has facts the shipped catalog leaves unknown (its temp disk, say),
//! and a connection is configured, the SKUs of the manifest's region are read, what they say of
//! those sizes is learnt (`catalog::learn`, with a note naming where the facts come from), and
//! the manifest is loaded again as usual, so its rules (a step's `{temp}` on a size without a temp
//! disk) see the live facts. A size the SKUs do not list either stays an error, with the
//! catalog's suggestion; offline commands never get this far.

use super::args::ConnectArgs;
use super::args::ManifestArgs;
use super::request::{load, load_options};
use super::{Output, interrupt, plan_cmd};
use crate::catalog;
use crate::engine::preflight::live;
use crate::manifest::{self, Loaded};
use crate::model::ResourceKind;
use serde_json::Value;

/// [`load`], after learning from live Resource SKUs the sizes the shipped catalog lacks.
pub fn load_connected(
    args: &ManifestArgs,
    connect: &ConnectArgs,
    out: &Output,
) -> anyhow::Result<Loaded> {
    let mut lenient = load_options(args)?;
    lenient.collect_unknown_sizes = true;
    if let Ok(first) = manifest::load(&args.manifest, &lenient) {
        let wanted = to_look_up(&first);
        if !wanted.is_empty()
            && let Err(err) = learn(&first, &wanted, args, connect, out)
        {
            out.note(&format!(
                "could not look up {} in the subscription's Resource SKUs: {err:#}",
                wanted.join(", ")
            ));
        }
    }
    load(args, out)
}

/// The sizes worth a Resource SKUs lookup: those the catalog lacks, and those the manifest names
/// whose temp disk, accelerated networking or premium IO the shipped catalog does not know.
fn to_look_up(first: &Loaded) -> Vec<String> {
    let mut names = first.unknown_sizes.clone();
    for vm in first
        .desired
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
            let incomplete = catalog::vm_size(name).is_some_and(|s| {
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

/// Read the SKUs of the manifest's region and learn the unknown sizes they list.
fn learn(
    first: &Loaded,
    wanted: &[String],
    args: &ManifestArgs,
    connect: &ConnectArgs,
    out: &Output,
) -> anyhow::Result<()> {
    let azure = &first.desired.azure;
    let runtime = interrupt::runtime()?;
    let skus = interrupt::block_on(&runtime, async {
        let Some(conn) = plan_cmd::live_connection(connect, &args.manifest, azure).await? else {
            return Ok(Vec::new());
        };
        Ok::<_, anyhow::Error>(
            conn.client
                .compute_skus(&conn.subscription, &azure.location)
                .await?,
        )
    })??;
    let date = catalog::sizes_provenance()
        .generated
        .map_or_else(|| "unknown date".to_owned(), |d| d.to_string());
    for name in wanted {
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
        let before = catalog::vm_size(name);
        let size = catalog::learn(live);
        match before {
            None => out.note(&format!(
                "{} is not in the shipped catalog of {date}: its facts come from the subscription's \
                 Resource SKUs in {}, and it has no price in the catalog",
                size.name, azure.location
            )),
            Some(shipped) if !std::ptr::eq(shipped, size) => out.note(&format!(
                "{}: what the shipped catalog of {date} does not say (temp disk, accelerated \
                 networking, premium IO) comes from the subscription's Resource SKUs in {}",
                size.name, azure.location
            )),
            Some(_) => {}
        }
    }
    Ok(())
}
