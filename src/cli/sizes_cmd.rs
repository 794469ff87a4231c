//! `dsinfra sizes`: list the VM sizes of the shipped catalog with their facts and, in a region,
//! their prices, so a user can choose a `size` for a manifest without leaving the terminal.
//!
//! Everything comes from the catalog embedded in the binary (`crate::catalog`), so the command
//! needs no account and no network, and shows exactly the facts and prices `validate` and `plan`
//! use. The flags become a [`Query`] (`catalog::query` selects and orders), drawn by
//! `render::sizes`.

use anyhow::bail;

use super::{Outcome, Output};
use crate::args::SizesArgs;
use crate::catalog::{
    self,
    query::{Filter, Query, offers_any, select},
};
use crate::render::sizes::{SizesView, sizes_json, sizes_text};

/// `--region` in ARM's normal form, or an error that names the closest region (or says where
/// the names are).
///
/// A region of the price list counts even when `catalog::LOCATIONS` lacks it (a region that
/// needs an enabled subscription, such as `jioindiawest`): its prices are facts all the same.
fn region(text: &str) -> anyhow::Result<String> {
    let normal = catalog::normal_region(text);
    if catalog::is_known_location(&normal) || offers_any(&normal) {
        return Ok(normal);
    }
    match crate::diag::did_you_mean(&normal, catalog::LOCATIONS.iter().copied()) {
        Some(close) => {
            bail!("there is no Azure region `{text}` (--region): did you mean `{close}`?")
        }
        None => bail!(
            "there is no Azure region `{text}` (--region): give a region's name as ARM spells it, \
             such as eastus, westeurope or southcentralus (`az account list-locations -o table` \
             lists them)"
        ),
    }
}

/// `dsinfra sizes`
pub fn sizes(args: &SizesArgs, out: &Output) -> anyhow::Result<Outcome> {
    let query = Query {
        filter: Filter {
            gpu: args.gpu,
            min_vcpus: args.min_vcpus,
            min_gpus: args.min_gpus,
            name: args.name.as_deref().map(str::to_ascii_lowercase),
            infiniband: args.infiniband,
            temp_disk: args.temp_disk,
        },
        region: args.region.as_deref().map(region).transpose()?,
        max_price: args.max_price,
        include_retired: args.include_retired,
    };
    let today = catalog::today();
    let selection = select(&query, catalog::vm_sizes(), today);
    let view = SizesView {
        rows: &selection.rows,
        region: query.region.as_deref(),
        today,
        catalog_date: catalog::sizes_provenance().generated,
        prices_date: catalog::prices_date(),
        hidden_retired: selection.hidden_retired,
    };
    if args.json {
        out.result(&sizes_json(&view));
    } else {
        out.result(&sizes_text(&view, out.stdout_colour()));
    }
    if let Some(region) = &query.region
        && !offers_any(region)
    {
        // A region ARM knows but the shipped price list has nothing for (a new region): say so,
        // rather than let an empty list read as "no size fits".
        out.note(&format!(
            "the shipped catalog has no size priced in {region}; see docs/catalog.md to refresh it"
        ));
    }
    Ok(Outcome::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_region_is_taken_as_arm_takes_it_and_a_typo_gets_a_suggestion() {
        assert_eq!(region("East US").expect("known"), "eastus");
        // Every region of the price list, including those `LOCATIONS` lacks (jioindiawest).
        for size in catalog::vm_sizes() {
            for priced in catalog::regions_offering(&size.name) {
                assert_eq!(region(priced).expect("priced there"), priced);
            }
        }
        assert_eq!(
            region("eastu").expect_err("unknown").to_string(),
            "there is no Azure region `eastu` (--region): did you mean `eastus`?"
        );
        let far = region("moon").expect_err("unknown").to_string();
        assert!(
            far.starts_with("there is no Azure region `moon` (--region): give a region's name"),
            "{far}"
        );
    }
}
