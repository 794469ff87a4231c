//! Loading a manifest for a command that connects (`plan`, `apply`): a VM size the shipped
//! catalog lacks (Azure adds sizes after the catalog's date) is looked up in the subscription's
//! Resource SKUs before it is called unknown.
//!
//! The manifest is loaded once collecting such sizes instead of refusing them; when there are
//! some and a connection is configured, the SKUs of the manifest's region are read, the sizes
//! found there are learnt (`catalog::learn`, with a note naming where their facts come from),
//! and the manifest is loaded again as usual. A size the SKUs do not list either stays an
//! error, with the catalog's suggestion; offline commands never get this far.

use super::args::ManifestArgs;
use super::connect::ConnectArgs;
use super::manifest_cmds::{load, load_options};
use super::{Output, interrupt, plan_cmd};
use crate::catalog;
use crate::engine::preflight::live;
use crate::manifest::{self, Loaded};

/// [`load`], after learning from live Resource SKUs the sizes the shipped catalog lacks.
pub fn load_connected(
    args: &ManifestArgs,
    connect: &ConnectArgs,
    out: &Output,
) -> anyhow::Result<Loaded> {
    let mut lenient = load_options(args)?;
    lenient.collect_unknown_sizes = true;
    if let Ok(first) = manifest::load(&args.manifest, &lenient)
        && !first.unknown_sizes.is_empty()
        && let Err(err) = learn(&first, args, connect, out)
    {
        out.note(&format!(
            "could not look up {} in the subscription's Resource SKUs: {err:#}",
            first.unknown_sizes.join(", ")
        ));
    }
    load(args, out)
}

/// Read the SKUs of the manifest's region and learn the unknown sizes they list.
fn learn(
    first: &Loaded,
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
    for name in &first.unknown_sizes {
        let Some(size) = skus
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
        let size = catalog::learn(size);
        out.note(&format!(
            "{} is not in the shipped catalog of {date}: its facts come from the subscription's \
             Resource SKUs in {}, and it has no price in the catalog",
            size.name, azure.location
        ));
    }
    Ok(())
}
