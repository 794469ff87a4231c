//! Which sizes fit: a typed query over the catalog (`dsinfra sizes` builds one from its flags).
//!
//! The filters are plain predicates on a size's facts ([`Filter`]); a [`Query`] adds the region
//! whose prices count and a price ceiling, and [`select`] returns the sizes in the order to show
//! them, cheapest first in a region. Drawing them is `render::sizes`'s business.

use chrono::NaiveDate;

use crate::catalog::{self, Price, Retirement, VmSize};

/// One size of a listing.
#[derive(Debug, Clone)]
pub struct SizeRow {
    /// The size and its facts.
    pub size: &'static VmSize,
    /// Its price in the region asked for (`None` when no region was asked for).
    pub price: Option<Price>,
    /// Every region that offers it, sorted (shown in JSON when no region was asked for).
    pub regions: Vec<&'static str>,
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
            Some(region) => match catalog::price(&size.name, region) {
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
            regions: catalog::regions_offering(&size.name),
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

/// Whether the shipped price list has any size in `region`.
pub fn offers_any(region: &str) -> bool {
    catalog::vm_sizes()
        .iter()
        .any(|s| catalog::price(&s.name, region).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(text: &str) -> NaiveDate {
        NaiveDate::parse_from_str(text, "%Y-%m-%d").expect("a date")
    }

    fn names(selection: &Selection) -> Vec<&'static str> {
        selection.rows.iter().map(|r| &*r.size.name).collect()
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
        let size = catalog::shipped_size("Standard_ND96isr_H200_v5").expect("in the catalog");
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
        let cpu = catalog::shipped_size("Standard_D8s_v5").expect("in the catalog");
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
            assert_eq!(row.price, catalog::price(&row.size.name, "eastus"));
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
            .map(|r| &*r.size.name)
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
                (None, catalog::regions_offering(&row.size.name))
            );
        }
    }
}
