//! `dsinfra sizes`: list the VM sizes of the shipped catalog with their facts and, in a region,
//! their prices, so a user can choose a `size` for a manifest without leaving the terminal.
//!
//! Everything comes from the catalog embedded in the binary (`crate::catalog`), so the command
//! needs no account and no network, and shows exactly the facts and prices `validate` and `plan`
//! use. The filters are plain predicates on a size ([`Filter`]); the order and the view are
//! decided here and drawn by `render::sizes`.

use anyhow::bail;
use chrono::NaiveDate;
use clap::Args;

use super::{Outcome, Output};
use crate::catalog::{self, Price, Retirement, VmSize};
use crate::render::sizes::{SizeRow, SizesView, sizes_json, sizes_text};

/// `dsinfra sizes`
// Each flag is an independent filter switch, as clap models them.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, Args)]
pub struct SizesArgs {
    /// Only sizes with GPUs (a whole GPU or part of one).
    #[arg(long)]
    pub gpu: bool,
    /// Only sizes Azure offers in this region (`eastus`; `East US` works too), with their price
    /// there, cheapest first.
    #[arg(long, value_name = "REGION")]
    pub region: Option<String>,
    /// Only sizes whose Linux pay-as-you-go price in --region (required with it) is at most
    /// this many USD per hour.
    #[arg(long, value_name = "USD", requires = "region", value_parser = non_negative)]
    pub max_price: Option<f64>,
    /// Only sizes with at least this many vCPUs.
    #[arg(long, value_name = "N")]
    pub min_vcpus: Option<u32>,
    /// Only sizes with at least this many GPUs (`1` leaves out sizes with part of a GPU).
    #[arg(long, value_name = "N", value_parser = non_negative)]
    pub min_gpus: Option<f64>,
    /// Only sizes whose name contains this text, in any case (`d8ds`, `H100`, `_v5`).
    #[arg(long, value_name = "TEXT")]
    pub name: Option<String>,
    /// Only sizes with an InfiniBand (RDMA) network, for MPI and NCCL across nodes.
    #[arg(long)]
    pub infiniband: bool,
    /// Only sizes known to have a local temp disk (BeeOND scratch, blobfuse caches); sizes whose
    /// temp disk the catalog does not know (`?`) are left out too.
    #[arg(long)]
    pub temp_disk: bool,
    /// Also list sizes Azure has retired (hidden by default: they can no longer be created).
    #[arg(long)]
    pub include_retired: bool,
    /// Print the sizes as a JSON array: every fact (`null` when unknown), and the region's
    /// `price` and `spot` with --region, else the `regions` that offer each size.
    #[arg(long)]
    pub json: bool,
}

/// `--max-price`, `--min-gpus`: a number of at least 0.
fn non_negative(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(n) if n.is_finite() && n >= 0.0 => Ok(n),
        _ => Err(format!(
            "{text:?} is not a number of at least 0 (for example 1.5)"
        )),
    }
}

/// The facts a size must have to be listed; a `None` or `false` field does not filter.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    /// Has a GPU or part of one.
    pub gpu: bool,
    /// At least this many vCPUs.
    pub min_vcpus: Option<u32>,
    /// At least this many GPUs.
    pub min_gpus: Option<f64>,
    /// Lower-case text the lower-case name contains.
    pub name: Option<String>,
    /// Has InfiniBand.
    pub infiniband: bool,
    /// Has a known, non-empty temp disk.
    pub temp_disk: bool,
}

impl Filter {
    /// Whether `size` has every fact asked for.
    pub fn matches(&self, size: &VmSize) -> bool {
        (!self.gpu || size.gpus > 0.0)
            && self.min_vcpus.is_none_or(|n| size.vcpus >= n)
            && self.min_gpus.is_none_or(|n| size.gpus >= n)
            && self
                .name
                .as_ref()
                .is_none_or(|text| size.name.to_ascii_lowercase().contains(text))
            && (!self.infiniband || size.infiniband)
            && (!self.temp_disk || size.temp_disk_gib.is_some_and(|gib| gib > 0))
    }
}

/// What to list: the facts, the region and its price ceiling, and whether retired sizes count.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// The facts every listed size has.
    pub filter: Filter,
    /// The region (ARM's normal form) whose prices are shown; only sizes offered there.
    pub region: Option<String>,
    /// The highest pay-as-you-go $/hour in `region`.
    pub max_price: Option<f64>,
    /// List retired sizes too.
    pub include_retired: bool,
}

/// The sizes a query found, in the order to show them.
#[derive(Debug, Clone)]
pub struct Selection {
    /// The sizes: cheapest first in a region (then by name), else by name.
    pub rows: Vec<SizeRow>,
    /// Sizes that matched but are retired, left out without --include-retired.
    pub hidden_retired: usize,
}

/// Run `query` over `sizes` as of `today`.
pub fn select(query: &Query, sizes: &'static [VmSize], today: NaiveDate) -> Selection {
    let mut rows = Vec::new();
    let mut hidden_retired = 0;
    for size in sizes.iter().filter(|s| query.filter.matches(s)) {
        let price: Option<Price> = match &query.region {
            Some(region) => match catalog::price(size.name, region) {
                Some(price) => Some(price),
                // Not offered in the region: not a choice there.
                None => continue,
            },
            None => None,
        };
        if let (Some(max), Some(price)) = (query.max_price, price)
            && price.linux_payg > max
        {
            continue;
        }
        if !query.include_retired && matches!(size.retirement(today), Some(Retirement::Retired(_)))
        {
            hidden_retired += 1;
            continue;
        }
        rows.push(SizeRow {
            size,
            price,
            regions: catalog::regions_offering(size.name),
        });
    }
    if query.region.is_some() {
        // The catalog is sorted by name, and the sort is stable: equal prices stay by name.
        rows.sort_by(|a, b| {
            let payg = |r: &SizeRow| r.price.map_or(f64::INFINITY, |p| p.linux_payg);
            payg(a).total_cmp(&payg(b))
        });
    }
    Selection {
        rows,
        hidden_retired,
    }
}

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

/// Whether the shipped price list has any size in `region`.
fn offers_any(region: &str) -> bool {
    catalog::vm_sizes()
        .iter()
        .any(|s| catalog::price(s.name, region).is_some())
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

    fn day(text: &str) -> NaiveDate {
        NaiveDate::parse_from_str(text, "%Y-%m-%d").expect("a date")
    }

    fn names(selection: &Selection) -> Vec<&'static str> {
        selection.rows.iter().map(|r| r.size.name).collect()
    }

    fn query(filter: Filter, region: Option<&str>) -> Query {
        Query {
            filter,
            region: region.map(str::to_owned),
            max_price: None,
            include_retired: false,
        }
    }

    #[test]
    fn filters_are_predicates_on_the_size_s_facts() {
        let size = catalog::vm_size("Standard_ND96isr_H200_v5").expect("in the catalog");
        let all = Filter::default();
        assert!(all.matches(size));
        let want = |f: Filter| f.matches(size);
        assert!(want(Filter {
            gpu: true,
            infiniband: true,
            ..Filter::default()
        }));
        assert!(want(Filter {
            min_gpus: Some(8.0),
            min_vcpus: Some(96),
            ..Filter::default()
        }));
        assert!(!want(Filter {
            min_gpus: Some(9.0),
            ..Filter::default()
        }));
        assert!(!want(Filter {
            min_vcpus: Some(97),
            ..Filter::default()
        }));
        assert!(want(Filter {
            name: Some("h200".into()),
            ..Filter::default()
        }));
        assert!(!want(Filter {
            name: Some("h100".into()),
            ..Filter::default()
        }));
        let cpu = catalog::vm_size("Standard_D8s_v5").expect("in the catalog");
        assert!(
            !Filter {
                gpu: true,
                ..Filter::default()
            }
            .matches(cpu)
        );
        assert!(
            !Filter {
                infiniband: true,
                ..Filter::default()
            }
            .matches(cpu)
        );
    }

    #[test]
    fn a_fraction_of_a_gpu_is_a_gpu_but_not_one_gpu() {
        let part = catalog::vm_sizes()
            .iter()
            .find(|s| s.gpus > 0.0 && s.gpus < 1.0)
            .expect("the catalog has a partial-GPU size");
        assert!(
            Filter {
                gpu: true,
                ..Filter::default()
            }
            .matches(part)
        );
        assert!(
            !Filter {
                min_gpus: Some(1.0),
                ..Filter::default()
            }
            .matches(part)
        );
    }

    #[test]
    fn an_unknown_temp_disk_is_not_a_temp_disk() {
        let temp = Filter {
            temp_disk: true,
            ..Filter::default()
        };
        for size in catalog::vm_sizes() {
            assert_eq!(
                temp.matches(size),
                size.temp_disk_gib.is_some_and(|g| g > 0),
                "{}",
                size.name
            );
        }
    }

    #[test]
    fn a_region_lists_only_what_it_offers_cheapest_first_under_the_ceiling() {
        let mut q = query(
            Filter {
                gpu: true,
                ..Filter::default()
            },
            Some("eastus"),
        );
        let all = select(&q, catalog::vm_sizes(), day("2026-11-26"));
        assert!(!all.rows.is_empty());
        let prices: Vec<f64> = all
            .rows
            .iter()
            .map(|r| r.price.expect("priced").linux_payg)
            .collect();
        assert!(prices.windows(2).all(|w| w[0] <= w[1]), "{prices:?}");
        for row in &all.rows {
            assert_eq!(row.price, catalog::price(row.size.name, "eastus"));
        }
        // ND H200 is not offered in eastus (catalog::tests says where it is).
        assert!(!names(&all).contains(&"Standard_ND96isr_H200_v5"));
        let ceiling = prices[prices.len() / 2];
        q.max_price = Some(ceiling);
        let cheap = select(&q, catalog::vm_sizes(), day("2026-11-26"));
        let expected: Vec<&str> = all
            .rows
            .iter()
            .filter(|r| r.price.is_some_and(|p| p.linux_payg <= ceiling))
            .map(|r| r.size.name)
            .collect();
        assert_eq!(names(&cheap), expected);
    }

    #[test]
    fn retired_sizes_are_hidden_and_counted_unless_asked_for() {
        let mut q = query(
            Filter {
                name: Some("nc6s_v3".into()),
                ..Filter::default()
            },
            None,
        );
        // Standard_NC6s_v3 retired on 2025-09-30.
        let after = select(&q, catalog::vm_sizes(), day("2026-11-26"));
        assert!(after.rows.is_empty());
        assert_eq!(after.hidden_retired, 1);
        let before = select(&q, catalog::vm_sizes(), day("2025-01-01"));
        assert_eq!(names(&before), ["Standard_NC6s_v3"]);
        q.include_retired = true;
        let asked = select(&q, catalog::vm_sizes(), day("2026-11-26"));
        assert_eq!(
            (names(&asked), asked.hidden_retired),
            (vec!["Standard_NC6s_v3"], 0)
        );
    }

    #[test]
    fn without_a_region_sizes_are_by_name_with_their_regions() {
        let q = query(
            Filter {
                name: Some("_d8".into()),
                ..Filter::default()
            },
            None,
        );
        let found = select(&q, catalog::vm_sizes(), day("2026-11-26"));
        let found_names = names(&found);
        let mut sorted = found_names.clone();
        sorted.sort_by_key(|n| n.to_ascii_lowercase());
        assert_eq!(found_names, sorted);
        for row in &found.rows {
            assert_eq!(
                (row.price, row.regions.clone()),
                (None, catalog::regions_offering(row.size.name))
            );
        }
    }

    #[test]
    fn a_region_is_taken_as_arm_takes_it_and_a_typo_gets_a_suggestion() {
        assert_eq!(region("East US").expect("known"), "eastus");
        // Every region of the price list, including those `LOCATIONS` lacks (jioindiawest).
        for size in catalog::vm_sizes() {
            for priced in catalog::regions_offering(size.name) {
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
